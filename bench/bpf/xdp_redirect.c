// The kernel baseline of the line-rate harness: every frame received on the interface this is
// attached to is redirected to interface TARGET_IFINDEX (given with -D at compile time).
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))

static long (*bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect;

SEC("xdp")
int redirect(struct xdp_md *ctx)
{
	return bpf_redirect(TARGET_IFINDEX, 0);
}

char _license[] SEC("license") = "GPL";
