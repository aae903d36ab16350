// The sink of the line-rate harness: drops every frame in native XDP on the receiving veth; the
// kernel counts them (ethtool -S: rx_queue_0_xdp_drops), so counting costs no userspace CPU.
#include <linux/bpf.h>

__attribute__((section("xdp"), used)) int drop(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
