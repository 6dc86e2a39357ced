// SPDX-License-Identifier: GPL-2.0
/* ringgen.bpf.c - a ring buffer filled at a known rate, to measure the
 * capture recorder (lib/native/recorder.c) alone: each getppid(2) of
 * process `pid` submits `per_call` records shaped like osdstage's events
 * (struct ev_hdr of probes/osdstage.h, then payload; `size` bytes) the way
 * osdstage's probes do (no wake-up); a full ring is counted in `lost`.
 * With `skew_every` N > 0, every N-th record of a call is stamped
 * `skew_ns` earlier than the clock says: a program interrupted between
 * reading the clock and reserving its record, on purpose (the recorder
 * must still write each stream in time order).
 * Driven by tests/bpf/ringgen.py. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);	/* set by the loader */
} events SEC(".maps");

const volatile __u32 pid = 0;
const volatile __u32 per_call = 64;
const volatile __u32 skew_every = 0;
const volatile __u64 skew_ns = 0;

__u64 made = 0, lost = 0;

struct rec {
	__u32 id;
	__u64 ts;
	__u32 cpu;
	__u32 interval;
	__u8 target;
	__u8 payload[60];	/* 80 bytes: an op_enqueue / op_dequeue */
} __attribute__((packed));

static long one(__u32 i, void *ctx)
{
	struct rec *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return 0;
	}
	e->id = 1;
	e->ts = bpf_ktime_get_ns();
	if (skew_every && i % skew_every == skew_every - 1)
		e->ts -= skew_ns;
	e->cpu = bpf_get_smp_processor_id();
	e->interval = 0;
	e->target = 0;
	e->payload[0] = (__u8)i;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	__sync_fetch_and_add(&made, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int gen(void *ctx)
{
	if ((__u32)(bpf_get_current_pid_tgid() >> 32) != pid)
		return 0;
	bpf_loop(per_call, one, 0, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
