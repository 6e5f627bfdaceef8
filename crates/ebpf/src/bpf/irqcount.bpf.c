// SPDX-License-Identifier: MIT OR GPL-2.0
// The kernel half of the per-CPU hard-interrupt counter (see ../irqcount.rs for the design
// and for what /proc/interrupts counts that these programs cannot see): one increment per
// hard interrupt, per CPU, in a memory-mapped array that user space reads without a system
// call.
//
// Independent of the other objects: its own maps and programs. Raw tracepoints only.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Slots of `counts`: 0 is the total; the others are the rows of /proc/interrupts, mirrored
// by `ROWS` in ../irqcount.rs (keep in step).
#define S_TOTAL 0
#define S_DEVICE 1 // the numbered rows (device IRQ lines)
#define S_LOC 2
#define S_RES 3
#define S_CAL 4
#define S_IWI 5
#define S_SPU 6
#define S_TRM 7
#define S_THR 8
#define S_DFR 9
#define S_PLT 10
#define NSLOTS 11

// Each CPU's counts, one element per CPU id (user space sets max_entries to the possible
// CPUs), 128 bytes each so that no two CPUs write to one cache line. Memory-mapped: user
// space reads the counts with plain loads, no system call.
#define NWORDS 16
struct slots {
	__u64 v[NWORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slots);
} counts SEC(".maps");

struct irqaction {
	struct irqaction *next;
} __attribute__((preserve_access_index));

// Plain increments: every program runs in hard-interrupt context on the CPU whose element
// it updates, and a CPU runs one hard interrupt at a time, so no two updates of an element
// overlap.
static __always_inline void count(__u32 slot)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct slots *s = bpf_map_lookup_elem(&counts, &cpu);
	if (!s)
		return;
	s->v[S_TOTAL] += 1;
	s->v[slot] += 1;
}

// A device interrupt runs every handler of its line in turn, each between its own
// irq_handler_entry/exit: count the line's last handler only, so that a line shared by n
// handlers counts once per interrupt, as the kernel's per-line count does.
SEC("raw_tp/irq_handler_entry")
int BPF_PROG(irq_entry, int irq, struct irqaction *action)
{
	if (BPF_CORE_READ(action, next) == NULL)
		count(S_DEVICE);
	return 0;
}

#define VECTOR(name, slot)                                  \
	SEC("raw_tp/" #name "_entry")                       \
	int vec_##name(void *ctx)                           \
	{                                                   \
		count(slot);                                \
		return 0;                                   \
	}

VECTOR(local_timer, S_LOC)
VECTOR(reschedule, S_RES)
VECTOR(call_function, S_CAL)
VECTOR(call_function_single, S_CAL)
VECTOR(irq_work, S_IWI)
VECTOR(spurious_apic, S_SPU)
VECTOR(thermal_apic, S_TRM)
VECTOR(threshold_apic, S_THR)
VECTOR(deferred_error_apic, S_DFR)
VECTOR(x86_platform_ipi, S_PLT)
