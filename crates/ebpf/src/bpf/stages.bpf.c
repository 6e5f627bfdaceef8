// SPDX-License-Identifier: MIT OR GPL-2.0
// The kernel half of tailscope's stage collector (see ../lib.rs for the design).
//
// Declared "Dual MIT/GPL": bpf_probe_read_kernel, which every CO-RE read below uses, is a
// GPL-only helper, and the kernel refuses it to programs without a GPL-compatible licence.
//
// No kprobes (they do not work on every VM), no patches. System calls are watched on their
// own tracepoints (syscalls:sys_enter_read, …, one program per call of interest), not on
// raw_syscalls:sys_enter/sys_exit: those fire for every system call of every process, ~150
// program runs per request at 20k req/s; these fire only for the calls the stages need (the
// kernel's per-call bitmap skips the rest before any program runs). The rest are raw
// tracepoints, which hand the programs the tracepoint's own arguments (no copy into a trace
// record first).
//
// Kernel structures are declared here with only the fields read, marked
// preserve_access_index: libbpf relocates every access against the running kernel's BTF
// (CO-RE), so the object needs no vmlinux.h and runs on any kernel with BTF whose fields
// have these names.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define MSG_PEEK 0x2
#define MSG_ERRQUEUE 0x2000

// System call classes (one per program below). The read classes say where a datagram's
// payload and source address are: buffer in argument 2; recvfrom also the address in
// argument 5; recvmsg a msghdr in argument 2.
#define CLS_READ 1
#define CLS_WRITE 2
#define CLS_EPOLL 3
#define CLS_RECVFROM 4
#define CLS_RECVMSG 5

// Event kinds (ring buffer records).
#define EV_ARRIVAL 1
#define EV_READ 2
#define EV_WRITE 3

// Counters (per-CPU array slots).
#define C_EVENTS 0
#define C_DROPS 1
#define C_NCOUNTERS 4

// The records of the syscalls:sys_enter_* and sys_exit_* tracepoints (their `format` files
// under tracefs): the 8-byte common header, the call's number (an int, padded to 8), then
// the six arguments or the return value, 8 bytes each on every architecture.
struct sys_enter_ctx {
	__u64 common;
	__s64 nr;
	__u64 args[6];
};

struct sys_exit_ctx {
	__u64 common;
	__s64 nr;
	__s64 ret;
};

struct sk_buff;

struct sk_buff_head {
	struct sk_buff *next;
	struct sk_buff *prev;
	__u32 qlen;
} __attribute__((preserve_access_index));

struct sock_common {
	__be16 skc_dport;
	__u16 skc_num;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	struct sk_buff_head sk_receive_queue;
	__u16 sk_protocol;
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 rcv_nxt;
	__u32 copied_seq;
	__u32 write_seq;
} __attribute__((preserve_access_index));

struct sk_buff {
	__s64 tstamp;  // the receive stamp (CLOCK_REALTIME while net timestamping is on)
	unsigned char *head;
	__u16 transport_header;
	__u16 network_header;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

// One record in the ring buffer; mirrored by `RawEvent` in ../event.rs (keep in step).
struct event {
	__u64 ts;      // arrival: when the socket was told of the data; read/write: syscall exit
	__u64 enter;   // read/write: syscall entry
	__u64 sk;      // the socket (kernel address, used only as an identity)
	__u64 epoll;   // read: the thread's last return from epoll_wait; write: last transmit
	__u64 wakeup;  // read: the thread's last sched_wakeup
	__u64 oncpu;   // read: the thread's last switch onto a CPU
	__u64 rx;      // arrival: the queued packet's skb->tstamp (the stack's entry), 0: none
	__u32 tid;
	__u32 seq;     // TCP: rcv_nxt (arrival), copied_seq (read), write_seq (write)
	__u32 bytes;
	__u16 lport;   // the server's port
	__u16 rport;   // the client's port (TCP: the connection's; UDP: the datagram's)
	__u16 rid;     // UDP: the payload's first two bytes (memcached's frame request id)
	__u8 kind;
	__u8 proto;
	__u32 pad;
};

// A system call in progress on a server thread.
struct inflight {
	__u64 enter;
	__u64 sk;
	__u64 tx;
	__u64 ubuf;    // read: the user buffer (recvmsg: the msghdr)
	__u64 uaddr;   // recvfrom: the user's source address buffer
	__u32 seq;
	__u32 bytes;
	__u16 lport;
	__u16 rport;
	__u16 dport;   // UDP: the datagram's client port
	__u16 rid;
	__u8 kind;     // CLS_READ, CLS_WRITE, CLS_EPOLL (recvfrom/recvmsg are reads)
	__u8 cls;      // the exact class
	__u8 proto;
	__u8 have_dgram;
};

// A server thread: what it last did, and the system call it is in (`call.kind` 0: none).
// One entry per thread for the collector's life: a call's entry and return rewrite it in
// place, since a hash map's update and delete (its lock, its free list) cost more than the
// rest of these programs together.
struct tstate {
	__u64 epoll;
	__u64 wakeup;
	__u64 oncpu;
	struct inflight call;
};

#define MAX_TGIDS 16

// Who is traced, in one array slot: every system call of every process passes through
// `tracked`, and an array lookup is a direct load (a hash lookup would cost each of them
// tens of ns). Server processes by tgid (and those they fork, up to MAX_TGIDS); threads by
// tid (a hash, consulted only when some were given); threads of one process whose names
// start with a prefix (the built-in server's "ts-" threads inside tailscope, which come and
// go with its connections).
struct filter {
	__u32 ntgids;
	__u32 tgids[MAX_TGIDS];
	__u32 has_tids;
	__u32 comm_tgid;
	__u32 comm_len;
	char prefix[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct filter);
} filter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} tids SEC(".maps");

// The server's ports: 1 at their index. `sk_data_ready` runs for every socket of the host,
// and an array lookup is a direct load where a hash lookup costs tens of ns.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct tstate);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// Sized by user space before loading.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &slot);
	if (c)
		*c += 1;
}

static __always_inline int tracked(__u64 id)
{
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0;
	struct filter *f = bpf_map_lookup_elem(&filter, &zero);
	if (!f)
		return 0;
	for (int i = 0; i < MAX_TGIDS; i++) {
		if (i >= f->ntgids)
			break;
		if (f->tgids[i] == tgid)
			return 1;
	}
	if (f->has_tids && bpf_map_lookup_elem(&tids, &tid))
		return 1;
	if (f->comm_len == 0 || f->comm_tgid != tgid)
		return 0;
	char comm[16] = {};
	bpf_get_current_comm(comm, sizeof(comm));
	for (int i = 0; i < 16; i++) {
		if (i >= f->comm_len)
			break;
		if (comm[i] != f->prefix[i])
			return 0;
	}
	return 1;
}

// Writes one record; no wake-up of the consumer (it drains on its own schedule, so the
// server's threads never pay for waking it).
static __always_inline void emit(struct event *e)
{
	struct event *slot = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!slot) {
		count(C_DROPS);
		return;
	}
	__builtin_memcpy(slot, e, sizeof(*e));
	bpf_ringbuf_submit(slot, BPF_RB_NO_WAKEUP);
	count(C_EVENTS);
}

// UDP (or TCP) ports and the first payload bytes of a datagram, from its transport header.
static __always_inline void read_dgram(const struct sk_buff *skb, __u16 *sport, __u16 *dport,
				       __u16 *rid)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 th = BPF_CORE_READ(skb, transport_header);
	__u16 hdr[5] = {};
	if (!head || th == 0xffff)
		return;
	bpf_probe_read_kernel(hdr, sizeof(hdr), head + th);
	*sport = bpf_ntohs(hdr[0]);
	*dport = bpf_ntohs(hdr[1]);
	*rid = bpf_ntohs(hdr[4]);
}

// A UDP read's datagram, from the user's memory after the call: the source port (the
// connection's for a connected socket, else recvfrom's address or recvmsg's msg_name) and
// the payload's first two bytes.
static __always_inline void user_dgram(struct inflight *f, struct event *e)
{
	__u64 buf = f->ubuf, addr = f->uaddr;
	if (f->cls == CLS_RECVMSG && buf) {
		__u64 iov = 0;
		bpf_probe_read_user(&addr, sizeof(addr), (void *)buf);          // msg_name
		bpf_probe_read_user(&iov, sizeof(iov), (void *)(buf + 16));     // msg_iov
		buf = 0;
		if (iov)
			bpf_probe_read_user(&buf, sizeof(buf), (void *)iov);    // iov_base
	}
	if (!e->rport && addr) {
		__u16 sa[2] = {};
		bpf_probe_read_user(sa, sizeof(sa), (void *)addr);
		e->rport = bpf_ntohs(sa[1]);
	}
	if (buf) {
		__u16 rid = 0;
		bpf_probe_read_user(&rid, sizeof(rid), (void *)buf);
		e->rid = bpf_ntohs(rid);
	}
}

// Entry of a watched call on a server thread.
static __always_inline int sys_enter(__u8 cls, __u64 buf, __u64 addr)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!tracked(id))
		return 0;
	__u32 tid = (__u32)id;
	struct tstate *s = bpf_map_lookup_elem(&threads, &tid);
	if (!s) {
		struct tstate fresh = {};
		bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&threads, &tid);
		if (!s)
			return 0;
	}
	struct inflight *f = &s->call;
	__builtin_memset(f, 0, sizeof(*f));
	f->enter = bpf_ktime_get_ns();
	f->cls = cls;
	f->kind = cls == CLS_RECVFROM || cls == CLS_RECVMSG ? CLS_READ : cls;
	if (f->kind == CLS_READ) {
		f->ubuf = buf;
		if (cls == CLS_RECVFROM)
			f->uaddr = addr;
	}
	return 0;
}

// The current thread's state when it is a traced server thread inside a watched call, else
// NULL. Other processes' calls leave at the filter (an array), before the hash lookup.
static __always_inline struct tstate *in_call(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (!tracked(id))
		return 0;
	__u32 tid = (__u32)id;
	struct tstate *s = bpf_map_lookup_elem(&threads, &tid);
	if (!s || !s->call.kind)
		return 0;
	return s;
}

// Return of a watched call: a read or write that moved bytes on a socket is one event.
static __always_inline int sys_exit(long ret)
{
	struct tstate *s = in_call();
	if (!s)
		return 0;
	struct inflight *f = &s->call;
	__u64 now = bpf_ktime_get_ns();
	if (f->kind == CLS_EPOLL) {
		if (ret > 0)
			s->epoll = now;
	} else if (f->sk && f->bytes > 0) {
		struct event e = {};
		e.ts = now;
		e.enter = f->enter;
		e.sk = f->sk;
		e.tid = (__u32)bpf_get_current_pid_tgid();
		e.seq = f->seq;
		e.bytes = f->bytes;
		e.lport = f->lport;
		e.rport = f->rport ? f->rport : f->dport;
		e.rid = f->rid;
		e.proto = f->proto;
		if (f->kind == CLS_READ) {
			e.kind = EV_READ;
			if (f->proto == IPPROTO_UDP)
				user_dgram(f, &e);
			e.epoll = s->epoll;
			e.wakeup = s->wakeup;
			e.oncpu = s->oncpu;
		} else {
			e.kind = EV_WRITE;
			e.epoll = f->tx;
		}
		emit(&e);
	}
	f->kind = 0;
	return 0;
}

// One program on each call's entry and return. User space leaves out those whose tracepoint
// this kernel lacks (epoll_wait on arm64, epoll_pwait2 before 5.11): see
// `collector::OPTIONAL_CALLS`.
#define WATCH(call, cls)                                                     \
	SEC("tp/syscalls/sys_enter_" #call)                                  \
	int enter_##call(struct sys_enter_ctx *ctx)                          \
	{                                                                    \
		return sys_enter(cls, ctx->args[1], ctx->args[4]);           \
	}                                                                    \
	SEC("tp/syscalls/sys_exit_" #call)                                   \
	int exit_##call(struct sys_exit_ctx *ctx)                            \
	{                                                                    \
		return sys_exit(ctx->ret);                                   \
	}

// Sampled collection (see ../sampling.rs) attaches these two instead of the per-call ones:
// the same entry and return, on raw_syscalls:sys_enter and sys_exit, with the call's class
// from the `calls` map (its number → class; 0: not watched). They run for every system call
// of the host while attached, but detach in a fraction of a millisecond, where each per-call
// tracepoint's detach waits for a grace period (50–90 ms, one after the other). The call's
// arguments come from its saved registers (CO-RE reads of the running kernel's pt_regs).
#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long si;
	unsigned long r8;
} __attribute__((preserve_access_index));
#define SYSCALL_ARG2(r) BPF_CORE_READ(r, si)
#define SYSCALL_ARG5(r) BPF_CORE_READ(r, r8)
#elif defined(__TARGET_ARCH_arm64)
struct pt_regs {
	__u64 regs[31];
} __attribute__((preserve_access_index));
#define SYSCALL_ARG2(r) BPF_CORE_READ(r, regs[1])
#define SYSCALL_ARG5(r) BPF_CORE_READ(r, regs[4])
#elif defined(__TARGET_ARCH_riscv)
struct pt_regs {
	unsigned long a1;
	unsigned long a4;
} __attribute__((preserve_access_index));
#define SYSCALL_ARG2(r) BPF_CORE_READ(r, a1)
#define SYSCALL_ARG5(r) BPF_CORE_READ(r, a4)
#else
#error "the raw system call programs read registers of x86, arm64 and riscv only"
#endif

#define MAX_SYSCALL 512

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SYSCALL);
	__type(key, __u32);
	__type(value, __u8);
} calls SEC(".maps");

SEC("raw_tp/sys_enter")
int raw_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 nr = (__u32)ctx->args[1];
	__u8 *cls = bpf_map_lookup_elem(&calls, &nr);
	if (!cls || !*cls)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	return sys_enter(*cls, SYSCALL_ARG2(regs), SYSCALL_ARG5(regs));
}

SEC("raw_tp/sys_exit")
int raw_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	return sys_exit((long)ctx->args[1]);
}

// memcached: read + sendmsg, UDP recvfrom + sendmsg; nginx: recvfrom + writev + sendfile;
// Redis: read + write (checked with strace); the rest for other servers.
WATCH(read, CLS_READ)
WATCH(readv, CLS_READ)
WATCH(recvfrom, CLS_RECVFROM)
WATCH(recvmsg, CLS_RECVMSG)
WATCH(recvmmsg, CLS_READ)
WATCH(write, CLS_WRITE)
WATCH(writev, CLS_WRITE)
WATCH(sendto, CLS_WRITE)
WATCH(sendmsg, CLS_WRITE)
WATCH(sendmmsg, CLS_WRITE)
WATCH(sendfile64, CLS_WRITE)
WATCH(epoll_wait, CLS_EPOLL)
WATCH(epoll_pwait, CLS_EPOLL)
WATCH(epoll_pwait2, CLS_EPOLL)

// The socket a read or write system call used, and the bytes it moved.
static __always_inline void on_sock_length(struct bpf_raw_tracepoint_args *ctx, __u8 kind)
{
	struct tstate *s = in_call();
	if (!s || s->call.kind != kind)
		return;
	struct inflight *f = &s->call;
	int ret = (int)ctx->args[1];
	int flags = (int)ctx->args[2];
	if (ret <= 0 || (flags & (MSG_PEEK | MSG_ERRQUEUE)))
		return;
	struct sock *sk = (struct sock *)ctx->args[0];
	f->sk = (__u64)sk;
	f->bytes += ret;
	f->proto = BPF_CORE_READ(sk, sk_protocol);
	f->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	f->rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (f->proto == IPPROTO_TCP) {
		struct tcp_sock *tp = (struct tcp_sock *)sk;
		f->seq = kind == CLS_READ ? BPF_CORE_READ(tp, copied_seq) : BPF_CORE_READ(tp, write_seq);
	}
}

SEC("raw_tp/sock_recv_length")
int on_recv_length(struct bpf_raw_tracepoint_args *ctx)
{
	on_sock_length(ctx, CLS_READ);
	return 0;
}

SEC("raw_tp/sock_send_length")
int on_send_length(struct bpf_raw_tracepoint_args *ctx)
{
	on_sock_length(ctx, CLS_WRITE);
	return 0;
}

// The receive stamp of the packet just queued on `sk` (the receive queue's tail: TCP
// coalescing into the tail copies the newer packet's stamp into it). The kernel takes it at
// the stack's entry (netif_rx / netif_receive_skb, or when IP hands the packet up) as
// CLOCK_REALTIME when some socket on the host asked for receive timestamps; 0 otherwise.
// User space converts it to CLOCK_MONOTONIC.
static __always_inline __u64 tail_rx_stamp(struct sock *sk)
{
	if (BPF_CORE_READ(sk, sk_receive_queue.qlen) == 0)
		return 0;
	const struct sk_buff *skb = BPF_CORE_READ(sk, sk_receive_queue.prev);
	if (!skb)
		return 0;
	__s64 t = BPF_CORE_READ(skb, tstamp);
	return t > 0 ? (__u64)t : 0;
}

// Data reached one of the server's sockets (called from the stack, in whatever task ran the
// receive: on loopback usually the client's send): the end of the protocol stack (Tales'
// T2), and the queued packet's receive stamp (its entry, Tales' T1).
SEC("raw_tp/sk_data_ready")
int on_data_ready(struct bpf_raw_tracepoint_args *ctx)
{
	struct sock *sk = (struct sock *)ctx->args[0];
	__u16 lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	__u32 slot = lport;
	__u8 *watched = bpf_map_lookup_elem(&ports, &slot);
	if (!watched || !*watched)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u16 proto = BPF_CORE_READ(sk, sk_protocol);
	if (proto == IPPROTO_TCP) {
		struct event e = {};
		e.kind = EV_ARRIVAL;
		e.proto = IPPROTO_TCP;
		e.ts = now;
		e.sk = (__u64)sk;
		e.lport = lport;
		e.rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
		e.seq = BPF_CORE_READ((struct tcp_sock *)sk, rcv_nxt);
		e.rx = tail_rx_stamp(sk);
		emit(&e);
	} else if (proto == IPPROTO_UDP) {
		// The datagram just queued is the queue's tail: its client port and request id.
		if (BPF_CORE_READ(sk, sk_receive_queue.qlen) == 0)
			return 0;
		const struct sk_buff *skb = BPF_CORE_READ(sk, sk_receive_queue.prev);
		__u16 sport = 0, dport = 0, rid = 0;
		if (!skb)
			return 0;
		read_dgram(skb, &sport, &dport, &rid);
		struct event e = {};
		e.kind = EV_ARRIVAL;
		e.proto = IPPROTO_UDP;
		e.ts = now;
		e.sk = (__u64)sk;
		e.lport = lport;
		e.rport = sport;
		e.rid = rid;
		__s64 t = BPF_CORE_READ(skb, tstamp);
		e.rx = t > 0 ? (__u64)t : 0;
		emit(&e);
	}
	return 0;
}

// A packet handed to the device during a server write: the write's transmit time (the
// kernel's software transmit stamp is taken at the same point) and, for UDP, the client
// port and request id of the reply datagram.
SEC("raw_tp/net_dev_queue")
int on_dev_queue(struct bpf_raw_tracepoint_args *ctx)
{
	struct tstate *s = in_call();
	if (!s || s->call.kind != CLS_WRITE)
		return 0;
	struct inflight *f = &s->call;
	f->tx = bpf_ktime_get_ns();
	if (f->have_dgram)
		return 0;
	f->have_dgram = 1;
	const struct sk_buff *skb = (const struct sk_buff *)ctx->args[0];
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	__u8 ip[40] = {};
	if (!head || nh == 0xffff)
		return 0;
	bpf_probe_read_kernel(ip, sizeof(ip), head + nh);
	__u32 off;
	__u8 proto;
	if ((ip[0] >> 4) == 4) {
		off = (ip[0] & 0xf) * 4;
		proto = ip[9];
	} else if ((ip[0] >> 4) == 6) {
		off = 40;
		proto = ip[6];
	} else {
		return 0;
	}
	if (proto != IPPROTO_UDP || off > 60)
		return 0;
	__u16 hdr[5] = {};
	bpf_probe_read_kernel(hdr, sizeof(hdr), head + nh + off);
	f->dport = bpf_ntohs(hdr[1]);
	f->rid = bpf_ntohs(hdr[4]);
	return 0;
}

SEC("raw_tp/sched_wakeup")
int on_wakeup(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx->args[0];
	__u32 pid = BPF_CORE_READ(p, pid);
	struct tstate *s = bpf_map_lookup_elem(&threads, &pid);
	if (s)
		s->wakeup = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/sched_switch")
int on_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	__u32 pid = BPF_CORE_READ(next, pid);
	struct tstate *s = bpf_map_lookup_elem(&threads, &pid);
	if (s)
		s->oncpu = bpf_ktime_get_ns();
	return 0;
}

// Worker processes forked by a traced server (nginx's master) are traced too.
SEC("raw_tp/sched_process_fork")
int on_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 ptgid = BPF_CORE_READ(parent, tgid), zero = 0;
	struct filter *f = bpf_map_lookup_elem(&filter, &zero);
	if (!f)
		return 0;
	int found = 0;
	for (int i = 0; i < MAX_TGIDS; i++) {
		if (i >= f->ntgids)
			break;
		if (f->tgids[i] == ptgid)
			found = 1;
	}
	__u32 n = f->ntgids;
	if (!found || n >= MAX_TGIDS)
		return 0;
	f->tgids[n & (MAX_TGIDS - 1)] = BPF_CORE_READ(child, tgid);
	f->ntgids = n + 1;
	return 0;
}
