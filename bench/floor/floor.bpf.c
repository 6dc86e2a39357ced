// SPDX-License-Identifier: GPL-2.0
/* floor.bpf.c - the least a uprobe can run: one program that returns,
 * attached by bench/floor.py to the functions of target.c, so that
 * what a hit costs is the kernel's path (trap or syscall, emulation or
 * single-step, return trampoline), not ours. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("uprobe")
int floor_hit(void *ctx)
{
	return 0;
}

/* the same, loaded for a uprobe_multi link (floor.py says so before
 * load): how the tracer attaches its probes */
SEC("uprobe")
int floor_multi(void *ctx)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
