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
#include <bpf/bpf_core_read.h>
#include "osdstage.h"

/* Set by the loader before load (keep the order: lib/cephlat/osdstage.py) */
const volatile __u32 targ_tgid = 0;	/* 0 = any process */
const volatile __u32 rmw_flags_off = 0;	/* OpRequest -> rmw flags; 0 = unknown */
const volatile __u32 rmw_read_bit = 0;
const volatile __u32 rmw_write_bit = 0;
const volatile __u32 calib_tgid = 0;	/* the loader itself, calibrating */

/* What a uprobe + uretprobe pair adds to an entry -> return time on this
 * machine, measured by the loader after load (calibration) and written
 * here; subtracted from "call" stages. */
__u64 call_bias_ns = 0;

/* Entry timestamps of "call" stages, one slot per stage, in the thread's
 * own task storage: no hash lookup on the probe path, and freed by the
 * kernel when the thread exits (nothing can leak). */
struct task_starts {
	__u64 ts[MAX_STAGES];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_starts);
} starts SEC(".maps");

/* Ops between enqueue and completion. A plain hash (not LRU): when it is
 * full the insert fails and is counted; user space ages out ops that never
 * complete. Sized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct op_state);
} ops SEC(".maps");

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
	__u32 stage = bpf_get_attach_cookie(ctx) & (MAX_STAGES - 1);
	struct task_starts *t;

	if (targ_tgid && (id >> 32) != targ_tgid && (id >> 32) != calib_tgid)
		return 0;
	t = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		count(CNT_START_MAP_FULL);
		return 0;
	}
	/* last thing: what follows the timestamp is probe cost, not the call */
	t->ts[stage] = bpf_ktime_get_ns();
	return 0;
}

SEC("uretprobe")
int stage_return(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();	/* first thing, for the same reason */
	__u64 id = bpf_get_current_pid_tgid();
	__u32 stage = bpf_get_attach_cookie(ctx) & (MAX_STAGES - 1);
	struct task_starts *t;
	__u64 d, bias;

	if (targ_tgid && (id >> 32) != targ_tgid && (id >> 32) != calib_tgid)
		return 0;
	t = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0, 0);
	if (!t || !t->ts[stage]) {
		count(CNT_NO_START);
		return 0;
	}
	if (now < t->ts[stage]) {
		count(CNT_NEGATIVE);
		t->ts[stage] = 0;
		return 0;
	}
	d = now - t->ts[stage];
	t->ts[stage] = 0;
	bias = call_bias_ns;
	if (stage != ST_CALIB)
		d = d > bias ? d - bias : 0;
	record(stage, d);
	return 0;
}

static __always_inline __u64 arg_n(struct pt_regs *ctx, __u32 n)
{
	switch (n) {
	case 1: return PT_REGS_PARM1_CORE(ctx);
	case 2: return PT_REGS_PARM2_CORE(ctx);
	case 3: return PT_REGS_PARM3_CORE(ctx);
	case 4: return PT_REGS_PARM4_CORE(ctx);
	case 5: return PT_REGS_PARM5_CORE(ctx);
	default: return 0;
	}
}

static __always_inline __u32 op_class(__u64 op)
{
	__u32 flags = 0;

	if (!rmw_flags_off ||
	    bpf_probe_read_user(&flags, sizeof(flags), (void *)(op + rmw_flags_off)))
		return OPC_OTHER;
	if (flags & rmw_write_bit)
		return OPC_WRITE;
	if (flags & rmw_read_bit)
		return OPC_READ;
	return OPC_OTHER;
}

/* Op-keyed events: enqueue, dequeue and completion of one OpRequest. */
SEC("uprobe")
int op_event(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 cookie, op, now;
	struct op_state *st;
	__u32 ev, cls;

	if (targ_tgid && (id >> 32) != targ_tgid)
		return 0;
	cookie = bpf_get_attach_cookie(ctx);
	ev = cookie & 0xff;
	op = arg_n(ctx, (cookie >> 8) & 0xf);
	if (cookie & (1 << 12)) {
		__u64 ptr = op;

		if (!ptr || bpf_probe_read_user(&op, sizeof(op), (void *)ptr)) {
			count(CNT_BAD_ARG);
			return 0;
		}
	}
	if (!op)
		return 0;
	now = bpf_ktime_get_ns();
	st = bpf_map_lookup_elem(&ops, &op);

	if (ev == OPEV_ENQUEUE) {
		/* OSD::enqueue_op sees each op once (requeues go through
		 * _enqueue_front), so an existing entry is a stale op whose
		 * OpRequest was freed and its address reused. */
		struct op_state n = { .enq_ns = now };

		if (st) {
			count(CNT_OP_REPLACED);
			*st = n;
		} else if (bpf_map_update_elem(&ops, &op, &n, BPF_NOEXIST)) {
			count(CNT_OP_MAP_FULL);
		}
		return 0;
	}
	if (!st) {
		count(CNT_OP_UNKNOWN);
		return 0;
	}
	if (ev == OPEV_DEQUEUE) {
		/* a requeued op is dequeued again: its first wait is queue_wait */
		if (!st->deq_ns && now >= st->enq_ns) {
			st->qwait_ns = now - st->enq_ns;
			st->deq_ns = now;
			record(ST_QUEUE_WAIT, st->qwait_ns);
		}
		return 0;
	}
	if (ev == OPEV_DONE) {
		cls = op_class(op);
		if (now >= st->enq_ns) {
			record(ST_OP_TOTAL, now - st->enq_ns);
			record(ST_OP_TOTAL_READ + cls, now - st->enq_ns);
		}
		if (st->deq_ns)
			record(ST_QUEUE_WAIT_READ + cls, st->qwait_ns);
		bpf_map_delete_elem(&ops, &op);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
