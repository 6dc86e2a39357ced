// SPDX-License-Identifier: GPL-2.0
/* osdstage.bpf.c - per-stage latency of functions inside a ceph-osd.
 *
 * One pair of generic programs serves every "function entry -> return" stage:
 * the user space loader attaches stage_entry/stage_return to each function of
 * the probe table with the stage id as the BPF cookie. Aggregation happens
 * here (per-CPU histograms, no per-event output).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "osdstage.h"

const volatile __u32 targ_tgid = 0;	/* 0 = any process */

struct start_key {
	__u32 tid;
	__u32 stage;
};

/* Entry timestamps per (thread, stage). A thread can be inside at most a few
 * stages at once, so this is bounded by threads x stages; LRU so that a
 * thread that died mid-call cannot pin an entry forever. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct start_key);
	__type(value, __u64);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_STAGES);
	__type(key, __u32);
	__type(value, struct stage_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 id)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &id);

	if (c)
		(*c)++;
}

/* floor(log2(v)) for v > 0, branch-light (as in bcc's log2l). */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u32 hist_slot(__u64 ns)
{
	/* units of 1/16 us: ns * 16 / 1000 */
	__u64 v = (ns << HIST_FRAC_BITS) / 1000;
	__u32 p, slot;

	if (v < HIST_SUB)
		return v;
	p = log2_u64(v);
	slot = HIST_SUB + (p - HIST_SUB_BITS) * HIST_SUB +
	       ((v >> (p - HIST_SUB_BITS)) & (HIST_SUB - 1));
	return slot < HIST_SLOTS ? slot : HIST_SLOTS - 1;
}

static __always_inline void record(__u32 stage, __u64 delta)
{
	struct stage_stats *s = bpf_map_lookup_elem(&stats, &stage);
	__u32 slot;

	if (!s)
		return;
	s->count++;
	s->sum_ns += delta;
	if (delta > s->max_ns)
		s->max_ns = delta;
	/* hist_slot() already clamps; the mask is for the verifier (HIST_SLOTS
	 * is a power of two) */
	slot = hist_slot(delta) & (HIST_SLOTS - 1);
	s->slots[slot]++;
}

SEC("uprobe")
int stage_entry(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct start_key key = { .tid = (__u32)id,
				 .stage = (__u32)bpf_get_attach_cookie(ctx) };
	__u64 ts;

	if (targ_tgid && (id >> 32) != targ_tgid)
		return 0;
	ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &key, &ts, BPF_ANY))
		count(CNT_START_MAP_FULL);
	return 0;
}

SEC("uretprobe")
int stage_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct start_key key = { .tid = (__u32)id,
				 .stage = (__u32)bpf_get_attach_cookie(ctx) };
	__u64 *tsp, now;

	if (targ_tgid && (id >> 32) != targ_tgid)
		return 0;
	tsp = bpf_map_lookup_elem(&starts, &key);
	if (!tsp) {
		count(CNT_NO_START);
		return 0;
	}
	now = bpf_ktime_get_ns();
	if (now < *tsp) {
		count(CNT_NEGATIVE);
	} else if (key.stage < MAX_STAGES) {
		record(key.stage, now - *tsp);
	}
	bpf_map_delete_elem(&starts, &key);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
