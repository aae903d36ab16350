// SPDX-License-Identifier: Apache-2.0
//
// pisa_dctcp: DCTCP (RFC 8257; Alizadeh et al., "Data Center TCP", SIGCOMM 2010) as a BPF
// struct_ops `tcp_congestion_ops`, for kernels without the dctcp module. Written for pisa-switch
// from the RFC's algorithm; loaded and registered by `pisa_fabric::dctcp`.
//
// Sender (RFC 8257 section 3.3):
//   - per ACK, the bytes it newly acknowledges count into BytesAcked, and into BytesMarked when
//     the ACK carries ECE;
//   - once an ACK reaches WindowEnd (one window of data, about an RTT), the fraction of marked
//     bytes F = BytesMarked / BytesAcked updates alpha <- (1 - g) alpha + g F with g = 1/16, and
//     WindowEnd moves to SND.NXT;
//   - on ECE the kernel enters CWR (at most once per window of data) and asks `ssthresh`, which
//     answers cwnd (1 - alpha / 2); the kernel brings cwnd down to it.
//   - on loss (fast recovery or RTO) the window is halved as by standard TCP (section 3.5).
//   - growth is Reno's: the kernel's `tcp_reno_cong_avoid` (slow start, then one MSS per RTT).
// Receiver (section 3.2): the ACKs' ECE says whether the last data segment was CE-marked. When
// the CE state of arriving data changes while a delayed ACK is pending, an ACK with the old state
// is sent at once for the data before the change, so the sender sees the marks byte-accurately.
// The socket's ECE echo is driven through the kernel's `TCP_ECN_DEMAND_CWR` flag, which we set
// while in the CE state and clear when unmarked data arrives.
//
// Kernel types are declared here with only the fields we use and `preserve_access_index`, so
// CO-RE relocates every access against the running kernel's BTF (no vmlinux.h).

#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct sock {
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	struct {
		__u8 pending;
	} __attribute__((preserve_access_index)) icsk_ack;
	__u64 icsk_ca_priv[13];
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 rcv_nxt;
	__u32 snd_nxt;
	__u32 snd_una;
	__u32 snd_cwnd;
	__u32 snd_ssthresh;
	__u8 ecn_flags;
} __attribute__((preserve_access_index));

enum tcp_ca_event {
	CA_EVENT_ECN_NO_CE,
	CA_EVENT_ECN_IS_CE,
};

enum tcp_ca_ack_event_flags {
	CA_ACK_ECE,
};

enum tcp_ca_state {
	TCP_CA_Recovery,
	TCP_CA_Loss,
};

struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*set_state)(struct sock *sk, __u8 new_state);
	void (*cwnd_event)(struct sock *sk, enum tcp_ca_event ev);
	void (*in_ack_event)(struct sock *sk, __u32 flags);
	__u32 (*undo_cwnd)(struct sock *sk);
	void (*init)(struct sock *sk);
	char name[16];
	__u32 flags;
} __attribute__((preserve_access_index));

// `include/net/tcp.h`: the congestion control wants ECN negotiated (and ECT on its segments).
#define TCP_CONG_NEEDS_ECN 0x2
// `include/net/tcp.h`: the receiver echoes ECE while this `ecn_flags` bit is set.
#define TCP_ECN_DEMAND_CWR 0x4
// `include/net/inet_connection_sock.h`: a delayed ACK is scheduled (`icsk_ack.pending`).
#define ICSK_ACK_TIMER 0x2

// alpha is a fraction in units of 1/2^ALPHA_SHIFT.
#define ALPHA_SHIFT 16
#define ALPHA_ONE (1u << ALPHA_SHIFT)
// g = 1/2^G_SHIFT = 1/16 (RFC 8257 section 4.2).
#define G_SHIFT 4

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

// Per-connection state, in `icsk_ca_priv` (at most 104 bytes).
struct pisa_dctcp {
	__u32 alpha;          // DCTCP.Alpha, in 1/2^16
	__u32 window_end;     // WindowEnd: sequence that closes the current observation window
	__u32 prior_snd_una;  // snd_una at the previous ACK, to count newly acknowledged bytes
	__u32 bytes_acked;    // BytesAcked of the window
	__u32 bytes_marked;   // BytesMarked of the window
	__u32 loss_cwnd;      // cwnd when the last reduction began (for loss halving and undo)
	__u32 prior_rcv_nxt;  // rcv_nxt when the previous data segment was seen (receiver)
	__u32 ce_state;       // DCTCP.CE: was the last data segment CE-marked (receiver)
};

static __always_inline struct pisa_dctcp *ca_of(struct sock *sk)
{
	return (struct pisa_dctcp *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline struct tcp_sock *tp_of(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

// a is before b in sequence space.
static __always_inline int seq_before(__u32 a, __u32 b)
{
	return (__s32)(a - b) < 0;
}

SEC("struct_ops/pisa_dctcp_init")
void BPF_PROG(pisa_dctcp_init, struct sock *sk)
{
	struct pisa_dctcp *ca = ca_of(sk);
	struct tcp_sock *tp = tp_of(sk);

	// RFC 8257 section 4.2: starting at alpha = 1 is the conservative choice (the first
	// marks halve the window, as RFC 3168 would).
	ca->alpha = ALPHA_ONE;
	ca->window_end = tp->snd_nxt;
	ca->prior_snd_una = tp->snd_una;
	ca->bytes_acked = 0;
	ca->bytes_marked = 0;
	ca->loss_cwnd = 0;
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->ce_state = 0;
}

SEC("struct_ops/pisa_dctcp_in_ack_event")
void BPF_PROG(pisa_dctcp_in_ack_event, struct sock *sk, __u32 flags)
{
	struct pisa_dctcp *ca = ca_of(sk);
	struct tcp_sock *tp = tp_of(sk);
	__u32 una = tp->snd_una;
	__u32 acked = una - ca->prior_snd_una;

	if (seq_before(una, ca->prior_snd_una))
		acked = 0;
	ca->prior_snd_una = una;
	ca->bytes_acked += acked;
	if (flags & bpf_core_enum_value(enum tcp_ca_ack_event_flags, CA_ACK_ECE))
		ca->bytes_marked += acked;

	if (seq_before(una, ca->window_end))
		return;
	// One window observed: F, then alpha <- alpha - g alpha + g F.
	__u64 f = 0;
	if (ca->bytes_acked > 0) {
		f = ((__u64)ca->bytes_marked << ALPHA_SHIFT) / ca->bytes_acked;
		if (f > ALPHA_ONE)
			f = ALPHA_ONE;
	}
	__u32 alpha = ca->alpha;
	alpha = alpha - (alpha >> G_SHIFT) + ((__u32)f >> G_SHIFT);
	ca->alpha = alpha > ALPHA_ONE ? ALPHA_ONE : alpha;
	ca->window_end = tp->snd_nxt;
	ca->bytes_acked = 0;
	ca->bytes_marked = 0;
}

SEC("struct_ops/pisa_dctcp_ssthresh")
__u32 BPF_PROG(pisa_dctcp_ssthresh, struct sock *sk)
{
	struct pisa_dctcp *ca = ca_of(sk);
	struct tcp_sock *tp = tp_of(sk);
	__u32 cwnd = tp->snd_cwnd;
	__u32 cut = (__u32)(((__u64)cwnd * ca->alpha) >> (ALPHA_SHIFT + 1));
	__u32 next = cwnd - cut;

	ca->loss_cwnd = cwnd;
	return next > 2 ? next : 2;
}

SEC("struct_ops/pisa_dctcp_set_state")
void BPF_PROG(pisa_dctcp_set_state, struct sock *sk, __u8 new_state)
{
	struct pisa_dctcp *ca = ca_of(sk);
	struct tcp_sock *tp = tp_of(sk);

	// The kernel asked `ssthresh` just before entering recovery or loss; a loss halves the
	// window as standard TCP does, whatever alpha is.
	if (new_state == bpf_core_enum_value(enum tcp_ca_state, TCP_CA_Recovery) ||
	    new_state == bpf_core_enum_value(enum tcp_ca_state, TCP_CA_Loss)) {
		__u32 half = ca->loss_cwnd >> 1;
		tp->snd_ssthresh = half > 2 ? half : 2;
	}
}

// The receiver's CE state changes: ACK the data before the change with the old state at once
// if an ACK for it is still delayed, then echo the new state.
static __always_inline void ce_change(struct sock *sk, struct pisa_dctcp *ca, __u32 ce)
{
	struct tcp_sock *tp = tp_of(sk);
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;

	if (ca->ce_state != ce) {
		if (icsk->icsk_ack.pending & ICSK_ACK_TIMER)
			bpf_tcp_send_ack(tp, ca->prior_rcv_nxt);
		ca->ce_state = ce;
	}
	if (ce)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
	ca->prior_rcv_nxt = tp->rcv_nxt;
}

SEC("struct_ops/pisa_dctcp_cwnd_event")
void BPF_PROG(pisa_dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct pisa_dctcp *ca = ca_of(sk);

	if (ev == bpf_core_enum_value(enum tcp_ca_event, CA_EVENT_ECN_IS_CE))
		ce_change(sk, ca, 1);
	else if (ev == bpf_core_enum_value(enum tcp_ca_event, CA_EVENT_ECN_NO_CE))
		ce_change(sk, ca, 0);
}

SEC("struct_ops/pisa_dctcp_cong_avoid")
void BPF_PROG(pisa_dctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/pisa_dctcp_undo_cwnd")
__u32 BPF_PROG(pisa_dctcp_undo_cwnd, struct sock *sk)
{
	struct pisa_dctcp *ca = ca_of(sk);
	__u32 cwnd = tp_of(sk)->snd_cwnd;

	return cwnd > ca->loss_cwnd ? cwnd : ca->loss_cwnd;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops pisa_dctcp = {
	.init = (void *)pisa_dctcp_init,
	.in_ack_event = (void *)pisa_dctcp_in_ack_event,
	.ssthresh = (void *)pisa_dctcp_ssthresh,
	.set_state = (void *)pisa_dctcp_set_state,
	.cwnd_event = (void *)pisa_dctcp_cwnd_event,
	.cong_avoid = (void *)pisa_dctcp_cong_avoid,
	.undo_cwnd = (void *)pisa_dctcp_undo_cwnd,
	.name = "pisa_dctcp",
	.flags = TCP_CONG_NEEDS_ECN,
};
