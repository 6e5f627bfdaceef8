// SPDX-License-Identifier: MIT OR GPL-2.0
// The kernel half of the noise contributors' timer (see ../contrib.rs for the design):
// how long each hard IRQ handler, softirq, x86 system vector and other task's time slice
// took on the CPUs the noise probe spins on, as one fixed-size histogram per (CPU, kind,
// id) in a hash map. Nothing goes to user space until the end; no ring buffer.
//
// Independent of stages.bpf.c: its own object, maps and programs. Raw tracepoints only.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Contributor kinds; mirrored by `Kind` in ../contrib.rs.
#define K_HARDIRQ 1
#define K_SOFTIRQ 2
#define K_VECTOR 3
#define K_OFFCPU 4

// Buckets: values below 2^SUB_BITS exactly, then 2^SUB_BITS buckets per power of two up
// to 2^(MAX_MSB+1) ns; larger values go to the last bucket. Mirrored by `bucket_of` in
// ../hist.rs (keep in step).
#define SUB_BITS 3
#define SUB (1 << SUB_BITS)
#define MAX_MSB 39
#define NBUCKETS ((MAX_MSB - SUB_BITS + 2) * SUB)

#define MAX_CPUS 4096
#define MAX_HISTS 1024

#define C_RECORDED 0
#define C_NO_SLOT 1
#define C_NCOUNTERS 2

struct key {
	__u32 cpu;
	__u16 kind;
	__u16 id;
};

// One histogram; mirrored by `Histogram::parse` in ../hist.rs.
struct hist {
	__u64 count;
	__u64 sum;
	__u64 max;
	__u64 ge_1us;    // durations >= 1000 ns
	__u64 gt_100us;  // durations > 100000 ns
	__u64 buckets[NBUCKETS];
};

// What a probed CPU is in the middle of.
struct cpustate {
	__u64 irq_start;
	__u64 softirq_start;
	__u64 vector_start;
	__u64 off_start;  // when the probe thread was switched out
	__u32 irq;
	__u32 softirq;
	__u32 vector;
	__u32 off_kind;   // 0: preempted, 1: blocked or yielded
};

// The probe threads: of process `tgid`, named starting with `prefix`.
struct config {
	__u32 tgid;
	__u32 prefix_len;
	char prefix[16];
};

struct task_struct {
	unsigned int __state;
	int pid;
	int tgid;
	char comm[16];
} __attribute__((preserve_access_index));

// Before Linux 5.14 the state was `long state`.
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

// Whether `t` (switched out) was still runnable, i.e. preempted: its state is TASK_RUNNING.
// The tracepoint's own `preempt` argument is true only for preemption inside the kernel,
// not for the reschedule on the way back to user space that preempts a spinning thread.
static __always_inline int still_runnable(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state) == 0;
	struct task_struct___old *o = (void *)t;
	return BPF_CORE_READ(o, state) == 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_HISTS);
	__type(key, struct key);
	__type(value, struct hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, __u8);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpustate);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &slot);
	if (c)
		*c += 1;
}

static __always_inline __u32 msb64(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline __u32 bucket(__u64 v)
{
	if (v < SUB)
		return (__u32)v;
	if (v >> (MAX_MSB + 1))
		return NBUCKETS - 1;
	__u32 m = msb64(v);
	return (m - SUB_BITS + 1) * SUB + (__u32)((v >> (m - SUB_BITS)) & (SUB - 1));
}

// The state of the current CPU when it is one of the probed ones, else NULL.
static __always_inline struct cpustate *probed(void)
{
	__u32 cpu = bpf_get_smp_processor_id(), z = 0;
	__u8 *on = bpf_map_lookup_elem(&cpus, &cpu);
	if (!on || !*on)
		return 0;
	return bpf_map_lookup_elem(&state, &z);
}

static __always_inline void record(__u16 kind, __u32 id, __u64 d)
{
	struct key k = {
		.cpu = bpf_get_smp_processor_id(),
		.kind = kind,
		.id = (__u16)(id > 0xffff ? 0xffff : id),
	};
	struct hist *h = bpf_map_lookup_elem(&hists, &k);
	if (!h) {
		__u32 z = 0;
		struct hist *empty = bpf_map_lookup_elem(&zero, &z);
		if (!empty)
			return;
		bpf_map_update_elem(&hists, &k, empty, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&hists, &k);
		if (!h) {
			count(C_NO_SLOT);
			return;
		}
	}
	// Only this CPU's programs write this CPU's keys, and a kind's entry and exit do not
	// nest on one CPU: plain updates suffice.
	h->count += 1;
	h->sum += d;
	if (d > h->max)
		h->max = d;
	if (d >= 1000)
		h->ge_1us += 1;
	if (d > 100000)
		h->gt_100us += 1;
	__u32 b = bucket(d);
	if (b < NBUCKETS)
		h->buckets[b] += 1;
	count(C_RECORDED);
}

// Hard IRQ handlers: irq_handler_entry(int irq, struct irqaction *action) and
// irq_handler_exit(int irq, struct irqaction *action, int ret).
SEC("raw_tp/irq_handler_entry")
int irq_entry(struct bpf_raw_tracepoint_args *ctx)
{
	struct cpustate *s = probed();
	if (!s)
		return 0;
	s->irq = (__u32)ctx->args[0];
	s->irq_start = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/irq_handler_exit")
int irq_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	struct cpustate *s = probed();
	if (!s || !s->irq_start)
		return 0;
	if (s->irq == (__u32)ctx->args[0] && now > s->irq_start)
		record(K_HARDIRQ, s->irq, now - s->irq_start);
	s->irq_start = 0;
	return 0;
}

// Softirqs: softirq_entry(unsigned int vec_nr) and softirq_exit(unsigned int vec_nr).
SEC("raw_tp/softirq_entry")
int softirq_entry(struct bpf_raw_tracepoint_args *ctx)
{
	struct cpustate *s = probed();
	if (!s)
		return 0;
	s->softirq = (__u32)ctx->args[0];
	s->softirq_start = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/softirq_exit")
int softirq_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	struct cpustate *s = probed();
	if (!s || !s->softirq_start)
		return 0;
	if (s->softirq == (__u32)ctx->args[0] && now > s->softirq_start)
		record(K_SOFTIRQ, s->softirq, now - s->softirq_start);
	s->softirq_start = 0;
	return 0;
}

// x86 system vectors (irq_vectors:NAME_entry / NAME_exit, one argument: the vector). One
// program pair per tracepoint, the id fixed here (`VECTORS` in ../contrib.rs); the loader
// leaves out the pairs whose tracepoints the kernel lacks.
static __always_inline int vec_entry(__u32 id)
{
	struct cpustate *s = probed();
	if (!s)
		return 0;
	s->vector = id;
	s->vector_start = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int vec_exit(__u32 id)
{
	__u64 now = bpf_ktime_get_ns();
	struct cpustate *s = probed();
	if (!s || !s->vector_start)
		return 0;
	if (s->vector == id && now > s->vector_start)
		record(K_VECTOR, id, now - s->vector_start);
	s->vector_start = 0;
	return 0;
}

#define VECTOR(name, id)                                            \
	SEC("raw_tp/" #name "_entry")                               \
	int vec_entry_##name(struct bpf_raw_tracepoint_args *ctx)   \
	{                                                           \
		return vec_entry(id);                               \
	}                                                           \
	SEC("raw_tp/" #name "_exit")                                \
	int vec_exit_##name(struct bpf_raw_tracepoint_args *ctx)    \
	{                                                           \
		return vec_exit(id);                                \
	}

VECTOR(local_timer, 1)
VECTOR(reschedule, 2)
VECTOR(call_function, 3)
VECTOR(call_function_single, 4)
VECTOR(irq_work, 5)
VECTOR(x86_platform_ipi, 6)
VECTOR(thermal_apic, 7)
VECTOR(threshold_apic, 8)
VECTOR(deferred_error_apic, 9)
VECTOR(error_apic, 10)
VECTOR(spurious_apic, 11)

static __always_inline int is_probe(struct task_struct *t, struct config *c)
{
	if ((__u32)BPF_CORE_READ(t, tgid) != c->tgid)
		return 0;
	char comm[16] = {};
	if (bpf_core_read(comm, sizeof(comm), &t->comm))
		return 0;
	for (int i = 0; i < 16; i++) {
		if (i >= c->prefix_len)
			break;
		if (comm[i] != c->prefix[i])
			return 0;
	}
	return 1;
}

// Another task's time on a probed CPU: from the probe thread's switch out to its switch
// back in. sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
// ...): only the first three arguments are read (the fourth, prev_state, arrived in Linux
// 5.18; the state is read from the task instead).
SEC("raw_tp/sched_switch")
int on_switch(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	struct cpustate *s = probed();
	if (!s)
		return 0;
	__u32 z = 0;
	struct config *c = bpf_map_lookup_elem(&config, &z);
	if (!c || c->prefix_len == 0)
		return 0;
	struct task_struct *prev = (struct task_struct *)ctx->args[1];
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	if (is_probe(next, c) && s->off_start) {
		if (now > s->off_start)
			record(K_OFFCPU, s->off_kind, now - s->off_start);
		s->off_start = 0;
	}
	if (is_probe(prev, c)) {
		s->off_start = now;
		s->off_kind = (ctx->args[0] || still_runnable(prev)) ? 0 : 1;
	}
	return 0;
}
