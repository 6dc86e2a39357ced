// SPDX-License-Identifier: GPL-2.0
/* osdstage.bpf.c - where an op's time goes inside a ceph-osd (or any
 * producer/consumer program described by a probe spec).
 *
 *  - "call" stages: function entry -> return on one thread (uprobe +
 *    uretprobe; the stage id is the BPF cookie);
 *  - "op" stages: enqueue -> dequeue -> completion of one op, keyed by its
 *    address (op_enqueue, op_dequeue, op_done; the cookie says which
 *    argument holds it);
 *  - kernel stages of the target's threads from tracepoints: sleep (offcpu),
 *    wake-up -> on CPU, futex waits, syncfs, block requests;
 *  - queue-wait attribution: when a worker dequeues an op, the op's wait is
 *    split by the worker's state since the enqueue (busy / asleep / waiting
 *    for a CPU / picking up), with who woke it.
 * Everything is aggregated here. With record_events set (osdstage -w),
 * each measurement is also sent as one event to the "events" ring buffer
 * (no wake-ups; the recorder polls), tagged with the report interval.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "osdstage.h"

#define ETIMEDOUT	110
#define FUTEX_CMD_MASK	0x7f	/* without FUTEX_PRIVATE_FLAG / CLOCK_REALTIME */
#define FUTEX_WAIT	0
#define FUTEX_WAKE	1
#define FUTEX_REQUEUE	3
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_OP	5
#define FUTEX_LOCK_PI	6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2	13
#define TASK_DEAD_STATE	0x80	/* TASK_DEAD: the thread's last switch-out */

/* Set by the loader before load (lib/cephlat/engine/tracer.py) */
const volatile __u32 rmw_flags_off = 0;	/* OpRequest -> rmw flags; 0 = unknown */
const volatile __u32 rmw_read_bit = 0;
const volatile __u32 rmw_write_bit = 0;
const volatile __u32 calib_tgid = 0;	/* the loader itself, calibrating */
const volatile __u32 worker_role = 1;	/* role of the queue's workers */
const volatile __u32 track_in_op = 0;	/* the dequeue function's return is
					 * probed: sleeps inside it are work */
const volatile struct role_prefix roles[MAX_ROLES] = {};
const volatile __u32 record_events = 0;	/* send capture events */
/* per Ceph release (probe table). reqid_off 0: unknown (captures carry
 * no request ids); the stages that need the others are only attached
 * where the probe table has them. */
const volatile __u32 reqid_off = 0;	/* OpRequest -> reqid (osd_reqid_t) */
const volatile __u32 src_num_off = 0;	/* OpRequest -> req_src_inst.name._num */
const volatile __u32 repmod_op_off = 0;	/* ReplicatedBackend::RepModify -> op */
const volatile __u32 inprog_op_off = 0;	/* ReplicatedBackend::InProgressOp -> op */
const volatile __u32 enq_pg_on_stack = 0; /* the enqueue function's spg_t is
					 * its first stack argument */
const volatile __u32 msg_off = 0;	/* OpRequest -> request (Message*) */
const volatile __u32 msg_stamps_off = 0; /* Message -> its stamps (struct
					 * msg_stamps); 0: the messenger
					 * stages are not traced */
const volatile __u32 op_name_off = 0;	/* MOSDOp -> hobj.oid.name */
const volatile __u32 repop_name_off = 0; /* MOSDRepOp -> poid.oid.name */

const volatile __u32 ops_mask = 65535;	/* the op table's size - 1 */

/* Written by the loader (osdstage.h explains it) */
struct ctl ctl = {};

/* Entry timestamps of "call" stages, one slot per stage, in the thread's
 * own task storage: no hash lookup on the probe path, and freed by the
 * kernel when the thread exits (nothing can leak). */
struct task_starts {
	__u64 ts[MAX_STAGES];
	__u64 cur_op;		/* the op it dequeued last (raw address), until
				 * the dequeue function returns */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_starts);
} starts SEC(".maps");

/* Ops between enqueue and completion: a table of op_slot (osdstage.h), a
 * power of two sized by the loader (ops_mask), which user space maps to
 * count and age out ops that never complete. An op whose OPS_WAYS slots
 * are all taken is not tracked (counted: op_map_full). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct op_slot);
} ops SEC(".maps");

/* The target's threads; user space reads it for per-role time shares and
 * deletes threads that have exited. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2048);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads SEC(".maps");

/* shard workers' long rings of state changes (struct wring) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WRINGS);
	__type(key, __u32);
	__type(value, struct wring);
} wrings SEC(".maps");

/* an all-zero thread_state to insert new threads from (too big for the BPF
 * stack, too big to memset); never written */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct thread_state);
} tzero SEC(".maps");

/* per CPU: each CPU adds to its own copy, no atomics (user space sums) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct shard_stats);
} shards SEC(".maps");

/* Block requests in flight that a target issued: the request's address,
 * its issue time (1: inserted, not issued yet) and the issuing target's
 * slot, in one of RQ_WAYS slots of a table from a hash of the address (no
 * hash-map insert or delete per request). A request still here when its
 * slots are needed again is overwritten (its completion is not seen). */
#define RQ_SLOTS 4096
#define RQ_WAYS 4
struct rq_start {
	__u64 rq;		/* 0 = free */
	__u64 ts;
	__u32 slot;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RQ_SLOTS);
	__type(key, __u32);
	__type(value, struct rq_start);
} rqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 256);
	__type(key, __u64);
	__type(value, struct dev_stats);
} devs SEC(".maps");

/* replicated writes in flight on their primary: request id -> op key
 * (osdstage.h struct req_slot) */
#define REQ_SLOTS 16384
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, REQ_SLOTS);
	__type(key, __u32);
	__type(value, struct req_slot);
} reqidx SEC(".maps");

/* per target, peer OSD and interval half (osdstage.h HALF_SHIFT): its
 * replies' waits and how often it was last (cumulative in each half) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct peer_stats);
} peers SEC(".maps");

/* an all-zero peer_stats to insert new peers from (never written) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct peer_stats);
} pzero SEC(".maps");

/* Peer `peer` of target `slot` in the half of interval `gen` (inserted
 * when new); NULL when the map is full. */
static __always_inline struct peer_stats *peer_stats_of(__u32 slot,
							__u32 peer,
							__u32 gen)
{
	__u64 key = (__u64)slot << 32 | peer | (__u64)(gen & 1) << HALF_SHIFT;
	struct peer_stats *ps = bpf_map_lookup_elem(&peers, &key), *z;
	__u32 zero = 0;

	if (ps)
		return ps;
	z = bpf_map_lookup_elem(&pzero, &zero);
	if (z)
		bpf_map_update_elem(&peers, &key, z, BPF_NOEXIST);
	return bpf_map_lookup_elem(&peers, &key);
}

/* per target slot, two halves of MAX_STAGES entries by report-interval
 * parity: key (slot * 2 + parity) * MAX_STAGES + stage; sized by the
 * loader for its targets */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * MAX_STAGES);
	__type(key, __u32);
	__type(value, struct stage_stats);
} stats SEC(".maps");

/* capture events; sized by the loader (a page when not recording) */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

/* CNT__MAX counters per target slot and interval half ((slot * 2 + half)
 * * CNT__MAX + id); sized by the loader. Never cleared: user space reads
 * both halves summed for totals, a closed half for an interval. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline __u32 cur_gen(void);

/* count one `id` of target `slot` in the half of report interval `gen` */
static __always_inline void count_in(__u32 slot, __u32 id, __u32 gen)
{
	__u32 key = (slot * 2 + (gen & 1)) * CNT__MAX + id;
	__u64 *c = bpf_map_lookup_elem(&counters, &key);

	if (c)
		(*c)++;
}

/* ... in the current interval */
static __always_inline void count(__u32 slot, __u32 id)
{
	count_in(slot, id, cur_gen());
}

/* a shard, device or peer key in the half of interval `gen` */
static __always_inline __u64 in_half(__u64 key, __u32 gen)
{
	return key | (__u64)(gen & 1) << HALF_SHIFT;
}

/* The op table's first slot for `key` (Fibonacci hashing of the address
 * bits above the allocator's alignment; the target slot is in the key). */
static __always_inline __u32 op_index(__u64 key)
{
	return (__u32)(((key >> 4) ^ (key >> TARGET_SHIFT)) *
		       0x9E3779B97F4A7C15ULL >> 32);
}

/* The op table's slot holding `key`, or NULL. */
static __always_inline struct op_slot *op_find(__u64 key)
{
	__u32 i = op_index(key);

	for (int w = 0; w < OPS_WAYS; w++) {
		__u32 j = (i + w) & ops_mask;
		struct op_slot *s = bpf_map_lookup_elem(&ops, &j);

		if (s && s->key == key)
			return s;
	}
	return 0;
}

/* A slot for a new op `key`: its own (an address still tracked: *replaced
 * set) or a free one; NULL when all its slots are taken. */
static __always_inline struct op_slot *op_claim(__u64 key, int *replaced)
{
	__u32 i = op_index(key), none = ~0U, free = none;

	*replaced = 0;
	for (int w = 0; w < OPS_WAYS; w++) {
		__u32 j = (i + w) & ops_mask;
		struct op_slot *s = bpf_map_lookup_elem(&ops, &j);

		if (!s)
			continue;
		if (s->key == key) {
			*replaced = 1;
			return s;
		}
		if (!s->key && free == none)
			free = j;
	}
	if (free == none)
		return 0;
	return bpf_map_lookup_elem(&ops, &free);
}

static __always_inline __u32 req_index(const struct reqid *r)
{
	return (__u32)((r->num * 31 + r->tid + r->slot) *
		       0x9E3779B97F4A7C15ULL >> 32);
}

static __always_inline int req_same(const struct reqid *a,
				    const struct reqid *b)
{
	return a->num == b->num && a->tid == b->tid && a->inc == b->inc &&
	       a->type == b->type && a->slot == b->slot;
}

/* The index slot of request id r, or NULL. */
static __always_inline struct req_slot *req_find(const struct reqid *r)
{
	__u32 i = req_index(r);

	for (int w = 0; w < OPS_WAYS; w++) {
		__u32 j = (i + w) & (REQ_SLOTS - 1);
		struct req_slot *s = bpf_map_lookup_elem(&reqidx, &j);

		if (s && s->key && req_same(&s->req, r))
			return s;
	}
	return 0;
}

/* Index op `key` by its request id r: -1 when r's slots are all taken. */
static __always_inline int req_index_op(const struct reqid *r, __u64 key)
{
	__u32 i = req_index(r), none = ~0U, free = none;
	struct req_slot *s;

	for (int w = 0; w < OPS_WAYS; w++) {
		__u32 j = (i + w) & (REQ_SLOTS - 1);

		s = bpf_map_lookup_elem(&reqidx, &j);
		if (!s)
			continue;
		if (!s->key || req_same(&s->req, r)) {
			free = j;
			break;
		}
	}
	if (free == none)
		return -1;
	s = bpf_map_lookup_elem(&reqidx, &free);
	if (!s)
		return -1;
	s->req = *r;
	s->key = key;
	return 0;
}

static __always_inline void req_forget(const struct reqid *r)
{
	struct req_slot *s = req_find(r);

	if (s)
		s->key = 0;
}

static __always_inline struct op_state *op_state_of(__u64 key)
{
	struct op_slot *s = op_find(key);

	return s ? &s->st : 0;
}

/* The op is done: its slot is free again. */
static __always_inline void op_forget(__u64 key)
{
	struct op_slot *s = op_find(key);

	if (s)
		s->key = 0;
}

/* The target slot of process tgid, or -1 when it is not traced. The list
 * is short and packed: a few loads, no map access. */
static __always_inline int target_of(__u32 tgid)
{
	for (int i = 0; i < MAX_TARGETS; i++) {
		__u32 t = *(volatile __u32 *)&ctl.targets[i];

		if (!t)
			break;
		if (t == tgid)
			return i;
	}
	return -1;
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

/* The report interval, read once per program run. */
static __always_inline __u32 cur_gen(void)
{
	return *(volatile __u32 *)&ctl.gen;
}

static __always_inline void hist_add(struct stage_stats *s, __u64 delta)
{
	__u32 slot;

	s->count++;
	s->sum_ns += delta;
	if (delta > s->max_ns)
		s->max_ns = delta;
	/* hist_slot() already clamps; the mask is for the verifier (HIST_SLOTS
	 * is a power of two) */
	slot = hist_slot(delta) & (HIST_SLOTS - 1);
	s->slots[slot]++;
}

static __always_inline void record(__u32 target, __u32 stage, __u64 delta,
				   __u32 gen)
{
	struct stage_stats *s;
	__u32 key = (stage & (MAX_STAGES - 1)) |
		    (target * 2 + (gen & 1)) * MAX_STAGES;

	s = bpf_map_lookup_elem(&stats, &key);
	if (s)
		hist_add(s, delta);
}

/* Reserve a capture event of `size` bytes with its header filled; NULL
 * when not recording or the ring is full (counted). */
static __always_inline void *ev_reserve(__u64 size, __u32 id, __u64 ts,
					__u32 gen, __u32 target)
{
	struct ev_hdr *h;

	if (!record_events)
		return 0;
	h = bpf_ringbuf_reserve(&events, size, 0);
	if (!h) {
		count_in(target, CNT_EVENTS_LOST, gen);
		return 0;
	}
	h->id = id;
	h->ts = ts;
	h->cpu = bpf_get_smp_processor_id();
	h->interval = gen;
	h->target = target;
	return h;
}

#define EV_NEW(type, id, ts, gen, target) \
	((struct type *)ev_reserve(sizeof(struct type), id, ts, gen, target))
/* the recorder polls: no wake-up from inside a probe */
#define EV_SEND(e) bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP)

static __always_inline void mark_in_op(__u32 tid, __u32 on)
{
	struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);

	if (t)
		t->in_op = on;
}

/* ------------------------------------------------------------------------
 * "call" stages */

/* The slot of a "call" probe's process: a target's, or 0 for our own
 * calibration calls; -1 = not ours. */
static __always_inline int call_slot(__u64 id)
{
	int slot = target_of(id >> 32);

	if (slot < 0 && (id >> 32) == calib_tgid)
		return 0;
	return slot;
}

SEC("uprobe")
int stage_entry(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 stage = bpf_get_attach_cookie(ctx) & (MAX_STAGES - 1);
	struct task_starts *t;
	int slot = call_slot(id);

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_ENTRY);
	t = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		count(slot, CNT_START_MAP_FULL);
		return 0;
	}
	if (stage == ST_DEQUEUE_OP)	/* as in op_dequeue */
		t->ts[ST_DO_OP] = 0;
	/* last thing: what follows the timestamp is probe cost, not the call */
	t->ts[stage] = bpf_ktime_get_ns();
	return 0;
}

/* A call stage ended: its statistics and capture event. */
static __always_inline void end_call(__u32 slot, __u32 stage, __u64 now,
				     __u64 d, __u64 bias, __u64 op, __u32 tid,
				     __u32 gen)
{
	struct ev_stage *e;

	d = d > bias ? d - bias : 0;
	e = EV_NEW(ev_stage, EV_STAGE, now, gen, slot);
	if (e) {
		e->duration_ns = d;
		e->op = op;
		e->tid = tid;
		e->stage = stage;
		EV_SEND(e);
	}
	record(slot, stage, d, gen);
}

SEC("uretprobe")
int stage_return(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();	/* first thing, for the same reason */
	__u64 id = bpf_get_current_pid_tgid();
	__u32 stage = bpf_get_attach_cookie(ctx) & (MAX_STAGES - 1);
	struct task_starts *t;
	__u64 d, bias, op;
	__u32 gen;
	int slot = call_slot(id);

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_RETURN);
	t = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0, 0);
	if (!t || !t->ts[stage]) {
		/* dequeue_op's start is op_dequeue's when both are wanted
		 * (probetable: merged): an op event, attached after this
		 * return probe and detached before it, so a return without
		 * its start is a call of an op not followed, not a loss. A
		 * uretprobe never fires for a call entered before it was
		 * attached. */
		if (stage != ST_DEQUEUE_OP)
			count(slot, CNT_NO_START);
		return 0;
	}
	if (now < t->ts[stage]) {
		count(slot, CNT_NEGATIVE);
		t->ts[stage] = 0;
		return 0;
	}
	d = now - t->ts[stage];
	t->ts[stage] = 0;
	op = t->cur_op;
	bias = ctl.call_bias_ns;
	gen = cur_gen();
	if (stage == ST_DEQUEUE_OP) {	/* the worker is done with its op */
		mark_in_op((__u32)id, 0);
		t->cur_op = 0;
		/* do_op ran inside it and has no return probe of its own
		 * (probetable: ends_at) */
		if (t->ts[ST_DO_OP] && now > t->ts[ST_DO_OP])
			end_call(slot, ST_DO_OP, now, now - t->ts[ST_DO_OP],
				 bias, op, (__u32)id, gen);
		t->ts[ST_DO_OP] = 0;
	}
	if (stage == ST__CALIB)
		record(slot, stage, d, gen);
	else
		end_call(slot, stage, now, d, bias, op, (__u32)id, gen);
	return 0;
}

/* ------------------------------------------------------------------------
 * thread state (scheduler) */

static __always_inline __u32 classify(const char *comm)
{
	/* roles[] is read-only: the verifier knows every byte */
	for (int r = 0; r < MAX_ROLES; r++) {
		__u32 len = roles[r].len;
		int ok = len > 0;

		for (int i = 0; i < ROLE_PREFIX_LEN; i++) {
			if (i >= len)
				break;
			if (comm[i] != roles[r].prefix[i]) {
				ok = 0;
				break;
			}
		}
		if (ok)
			return roles[r].role;
	}
	return 0;
}

/* The state of target thread p, created on first sight. */
static __always_inline struct thread_state *thread_of(struct task_struct *p,
						      __u64 now, __u32 slot)
{
	__u32 tid = p->pid;
	struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
	char comm[16];
	__u64 comm8;

	__builtin_memcpy(&comm8, p->comm, sizeof(comm8));
	if (t) {
		if (t->comm8 != comm8) {	/* renamed itself */
			bpf_probe_read_kernel(comm, sizeof(comm), p->comm);
			t->role = classify(comm);
			t->comm8 = comm8;
		}
		return t;
	}
	{
		__u32 zero = 0;
		struct thread_state *z = bpf_map_lookup_elem(&tzero, &zero);

		if (!z)
			return 0;
		if (bpf_map_update_elem(&threads, &tid, z, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&threads, &tid)) {
			count(slot, CNT_THREAD_MAP_FULL);
			return 0;
		}
		t = bpf_map_lookup_elem(&threads, &tid);
		if (!t)
			return 0;
		bpf_probe_read_kernel(comm, sizeof(comm), p->comm);
		t->target = slot;
		t->comm8 = comm8;
		t->role = classify(comm);
		t->state = TS_RUN;
		t->since = now;
		t->born = now;
	}
	return t;
}

/* Leave the current state at `now`, enter `state` (a sleep of kind
 * `sleep`, enum sleep_kind), remember it: in the thread's worker ring
 * once it has one, else in its short ring. */
static __always_inline void transition(struct thread_state *t, __u32 state,
				       __u32 sleep, __u64 now)
{
	struct tring *e = NULL;
	struct wring *w;
	__u32 h, k;

	if (now > t->since) {
		if (t->state == TS_SLEEP) {
			t->cum_sleep += now - t->since;
			if (t->sleep == SK_HELD)
				t->cum_held += now - t->since;
			else if (t->sleep == SK_IDLE)
				t->cum_isleep += now - t->since;
		} else if (t->state == TS_RUNQ) {
			t->cum_runq += now - t->since;
		}
	}
	if (t->state == TS_SLEEP && t->sleep == SK_HELD) {
		t->held_end = now;
		t->he_isleep = t->cum_isleep;
		t->he_runq = t->cum_runq;
	}
	t->state = state;
	t->sleep = state == TS_SLEEP ? sleep : SK_WORK;
	t->since = now;
	if (t->wring) {
		k = t->wring - 1;
		w = bpf_map_lookup_elem(&wrings, &k);
		if (w) {
			e = &w->e[w->head & (WRING - 1)];
			w->head++;
		}
	}
	if (!e) {
		h = t->ring_head & (TRING - 1);
		e = &t->ring[h];
		t->ring_head = h + 1;
	}
	e->ts = now;
	e->cum_isleep = t->cum_isleep;
	e->cum_held = t->cum_held;
	e->cum_runq = t->cum_runq;
	e->state = state;
	e->sleep = t->sleep;
}

static __always_inline __u32 hash32(__u32 x)
{
	return x * 2654435761U;		/* Knuth's multiplicative hash */
}

/* Give worker t (thread `tid`) a long ring, once: a free one of its
 * WRING_WAYS, or one whose owner has exited. None free: it keeps its
 * short ring (long waits then count as truncated). */
static __always_inline void wring_claim(struct thread_state *t, __u32 tid)
{
	if (t->wring)
		return;
	for (int i = 0; i < WRING_WAYS; i++) {
		__u32 k = (hash32(tid) >> 8) + i, o_tid;
		__u64 owner;
		struct thread_state *o;
		struct wring *w;

		k &= WRINGS - 1;
		w = bpf_map_lookup_elem(&wrings, &k);
		if (!w)
			continue;
		owner = w->tid;
		if (owner && owner != tid) {
			o_tid = owner;
			o = bpf_map_lookup_elem(&threads, &o_tid);
			if (o && !o->died)
				continue;
		}
		if (__sync_val_compare_and_swap(&w->tid, owner, (__u64)tid) !=
		    owner)
			continue;
		w->head = 0;
		t->wring = k + 1;
		return;
	}
}

/* ------------------------------------------------------------------------
 * futex waits, from the scheduler programs: no syscall tracepoint (one
 * attached puts every syscall of every task on the kernel's tracing slow
 * path, ~40-70 ns a syscall host-wide). A target thread switched out
 * asleep inside futex(2) (its saved user registers: the syscall number,
 * uaddr, op, timeout) is in a futex wait until its wake-up. A wait that
 * returns without sleeping (EAGAIN: the word had changed) is not one. */

#if defined(__TARGET_ARCH_arm64)
#define NR_FUTEX	98
#else
#define NR_FUTEX	202	/* x86_64 */
#endif
#define FUTEX_CLOCK_REALTIME 256
#define FUTEX_REL_SLACK_NS 20000

static __always_inline int futex_is_wait(__u64 op)
{
	op &= FUTEX_CMD_MASK;
	return op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET ||
	       op == FUTEX_LOCK_PI || op == FUTEX_LOCK_PI2 ||
	       op == FUTEX_WAIT_REQUEUE_PI;
}

/* The futex(2) call a task is inside, from its saved user registers. */
struct futex_call {
	__u64 uaddr, op, timeout, uaddr2;
};

static __always_inline int futex_call_of(struct task_struct *task,
					 struct futex_call *c)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

	if (!regs)
		return 0;
#if defined(__TARGET_ARCH_arm64)
	if (regs->syscallno != NR_FUTEX)
		return 0;
	c->uaddr = regs->orig_x0;
	c->op = regs->regs[1];
	c->timeout = regs->regs[3];
	c->uaddr2 = regs->regs[4];
#else
	if (regs->orig_ax != NR_FUTEX)	/* -1 outside a syscall */
		return 0;
	c->uaddr = regs->di;
	c->op = regs->si;
	c->timeout = regs->r10;
	c->uaddr2 = regs->r8;
#endif
	return 1;
}

/* Target thread `prev` (state t) goes to sleep at `now`: in a futex wait?
 * Called on prev's switch-out, in its own context (its user memory is the
 * current mm: the timeout is read from it). */
static __always_inline void futex_sleep(struct thread_state *t,
					struct task_struct *prev, __u64 now)
{
	struct { __s64 sec, nsec; } ts;
	struct futex_call c;
	__u64 uaddr, op, tmo, cmd;

	t->futex_start = 0;
	if (!futex_call_of(prev, &c) || !futex_is_wait(c.op))
		return;
	uaddr = c.uaddr;
	op = c.op;
	tmo = c.timeout;
	t->futex_start = now;
	t->futex_deadline = 0;
	cmd = op & FUTEX_CMD_MASK;
	/* the timeout: absolute, CLOCK_MONOTONIC unless FUTEX_CLOCK_REALTIME
	 * (always CLOCK_REALTIME for FUTEX_LOCK_PI: a realtime deadline
	 * stays unknown, 0); or relative (FUTEX_WAIT), from the call, a
	 * little before now: less FUTEX_REL_SLACK_NS, so that the deadline
	 * is not later than the kernel's */
	if (tmo && (cmd == FUTEX_WAIT || !(op & FUTEX_CLOCK_REALTIME)) &&
	    cmd != FUTEX_LOCK_PI &&
	    !bpf_probe_read_user(&ts, sizeof(ts), (void *)tmo) &&
	    ts.sec >= 0 && ts.nsec >= 0) {
		__u64 d = ts.sec * 1000000000ULL + ts.nsec;

		if (cmd == FUTEX_WAIT)
			d = now + (d > FUTEX_REL_SLACK_NS ?
				   d - FUTEX_REL_SLACK_NS : 0);
		t->futex_deadline = d;
	}
	if (cmd == FUTEX_WAIT_BITSET)
		/* glibc condition variables wait with FUTEX_WAIT_BITSET on one of
		 * two adjacent words: the 8-byte-aligned address names the cv */
		t->cv_uaddr = uaddr & ~7ULL;
	else
		t->cv_uaddr |= 1;	/* mark: last wait was not on the cv */
}

/* Is `waker`, the task waking a thread of its own process, inside a
 * futex(2) call that wakes the waiters of the condition variable whose
 * words are at `cv` (futex_sleep's cv_uaddr)? A notify is. A timer's
 * wake-up comes from an interrupt, of whichever task it interrupted: that
 * one is in such a call only if it was itself notifying this cv. */
static __always_inline int futex_notifies(struct task_struct *waker, __u64 cv)
{
	struct futex_call c;
	__u64 op;

	if (!cv || (cv & 1) || !futex_call_of(waker, &c))
		return 0;
	op = c.op & FUTEX_CMD_MASK;
	if (op == FUTEX_WAKE || op == FUTEX_WAKE_BITSET)
		return (c.uaddr & ~7ULL) == cv;
	if (op == FUTEX_WAKE_OP || op == FUTEX_REQUEUE ||
	    op == FUTEX_CMP_REQUEUE)
		return (c.uaddr & ~7ULL) == cv || (c.uaddr2 & ~7ULL) == cv;
	return 0;
}

/* Target thread t, asleep in a futex wait, is woken at `now` by `waker`
 * (a thread of its process, or NULL): the wait's end. Timed out: woken at
 * or after its deadline, and not by a notify of its condition variable:
 * the kernel fires the timer up to the thread's timer slack (50 us) late,
 * and a notify in between wakes the thread with success. Left counted as
 * a timeout: a notify that reaches the wait after its timer woke the
 * thread but before the thread ran (the kernel then reports success too;
 * it is seen nowhere here). `held`: the wait was a scheduler hold. */
static __always_inline void futex_woken(struct thread_state *t, __u32 tid,
					__u64 now, __u32 gen,
					struct task_struct *waker, __u32 held)
{
	struct ev_futex_wait *e;
	__u64 d = now > t->futex_start ? now - t->futex_start : 0;
	int timedout = t->futex_deadline && now >= t->futex_deadline &&
		       !(waker && futex_notifies(waker, t->cv_uaddr));

	t->futex_start = 0;
	t->cum_futex += d;
	record(t->target, ST_FUTEX_WAIT__ROLE + (t->role & (MAX_ROLES - 1)), d,
	       gen);
	e = EV_NEW(ev_futex_wait, EV_FUTEX_WAIT, now, gen, t->target);
	if (e) {
		e->uaddr = t->cv_uaddr & ~1ULL;
		e->duration_ns = d;
		e->ret = timedout ? -ETIMEDOUT : 0;
		e->tid = tid;
		e->role = t->role;
		e->is_cv = !(t->cv_uaddr & 1);
		EV_SEND(e);
	}
	/* a scheduler hold ends at its time by design: not a missed wake-up */
	if (!(t->cv_uaddr & 1))
		t->cv_timedout = timedout && !held;
	t->cv_uaddr &= ~1ULL;
}

/* p's state: 0 runnable (TASK_RUNNING); __state since Linux 5.14 */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *p)
{
	if (bpf_core_field_exists(p->__state))
		return BPF_CORE_READ(p, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)p, state);
}

/* Target thread t (task p), asleep, is woken at `now` by `waker`, a
 * thread of its process (NULL: another process's, an interrupt of one,
 * or unknown). */
static __always_inline void wake_up(struct thread_state *t,
				    struct task_struct *p, int slot, __u64 now,
				    __u32 gen, struct task_struct *waker)
{
	__u32 waker_tid = waker ? waker->pid : 0;
	struct ev_waking *e;
	__u64 off = now > t->since ? now - t->since : 0;

	__u32 held = t->sleep == SK_HELD;

	if (off)
		record(slot, ST_OFFCPU__ROLE + (t->role & (MAX_ROLES - 1)), off,
		       gen);
	transition(t, TS_RUNQ, SK_WORK, now);
	t->wake_ts = now;
	t->wakeups++;
	t->waker_tid = waker_tid;
	if (t->futex_start)
		futex_woken(t, p->pid, now, gen, waker, held);
	e = EV_NEW(ev_waking, EV_WAKING, now, gen, slot);
	if (e) {
		e->offcpu_ns = off;	/* 0: not counted */
		e->tid = p->pid;
		e->waker_tid = waker_tid;
		e->role = t->role;
		EV_SEND(e);
	}
}

/* What the sleep thread t (of target `slot`) goes into is, right after
 * futex_sleep() read it: work inside an op; a scheduler hold (an idle
 * timed wait on a condition variable, on an mClock OSD: under mClock a
 * shard worker waits with a timeout only when the scheduler's dequeue
 * answered with a time instead of an op, on its queue's cv; its
 * empty-queue wait has none); else idle. */
static __always_inline __u32 sleep_kind(struct thread_state *t, int slot)
{
	if (t->in_op)		/* in_op cannot change while asleep */
		return SK_WORK;
	if (t->futex_start && t->futex_deadline && !(t->cv_uaddr & 1) &&
	    t->cv_uaddr && (ctl.mclock >> (slot & (MAX_TARGETS - 1))) & 1)
		return SK_HELD;
	return SK_IDLE;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	__u64 now = 0;
	struct thread_state *t;
	struct ev_switch_out *eo;
	struct ev_switch_in *ei;
	__u32 gen = 0, state, woken = 0;
	int slot;

	slot = target_of(prev->tgid);
	if (slot >= 0) {
		count(slot, CNT_HIT_SCHED);
		now = bpf_ktime_get_ns();
		gen = cur_gen();
		t = thread_of(prev, now, slot);
		if (t) {
			state = (prev_state & TASK_DEAD_STATE) ? TS_DEAD :
				prev_state ? TS_SLEEP : TS_RUNQ;
			if (state == TS_SLEEP)
				futex_sleep(t, prev, now);
			else
				t->futex_start = 0;
			/* a shard worker keeps a long history from the start */
			if (!t->wring && t->role == worker_role)
				wring_claim(t, prev->pid);
			transition(t, state, sleep_kind(t, slot), now);
			if (state == TS_DEAD)
				t->died = now;
			eo = EV_NEW(ev_switch_out, EV_SWITCH_OUT, now, gen,
				    slot);
			if (eo) {
				eo->tid = prev->pid;
				eo->state = state;
				eo->role = t->role;
				EV_SEND(eo);
			}
		}
	}
	slot = target_of(next->tgid);
	if (slot >= 0) {
		if (!now) {
			count(slot, CNT_HIT_SCHED);
			now = bpf_ktime_get_ns();
			gen = cur_gen();
		}
		t = thread_of(next, now, slot);
		if (!t)
			return 0;
		if (t->state == TS_SLEEP && !task_state(next)) {
			/* switched in runnable after it went to sleep: woken
			 * without a sched_waking. 6.18 does that now and then
			 * to a thread whose timed futex wait expired (~1 in
			 * 2,000 such waits here; a perf-event tracepoint
			 * misses it too). Its wake-up is taken as now, by no
			 * one known; no run-queue delay is recorded for it.
			 * (A thread preempted while it was going to sleep
			 * comes back still in its sleeping state: no wake-up
			 * yet.) */
			wake_up(t, next, slot, now, gen, NULL);
			t->oncpu_after_wake = now;
		} else if (t->state == TS_RUNQ && t->wake_ts &&
			   t->wake_ts >= t->since) {
			/* first time on CPU since its wake-up */
			record(slot, ST_WAKEUP_DELAY__ROLE +
			       (t->role & (MAX_ROLES - 1)), now - t->wake_ts, gen);
			t->oncpu_after_wake = now;
			woken = 1;
		}
		ei = EV_NEW(ev_switch_in, EV_SWITCH_IN, now, gen, slot);
		if (ei) {
			ei->wakeup_ns = woken ? now - t->wake_ts : 0;
			ei->tid = next->pid;
			ei->role = t->role;
			ei->woken = woken;
			EV_SEND(ei);
		}
		transition(t, TS_RUN, SK_WORK, now);
	}
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	struct task_struct *cur;
	struct thread_state *t;
	__u64 now;
	__u32 gen;
	int slot;

	slot = target_of(p->tgid);
	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_SCHED);
	now = bpf_ktime_get_ns();
	gen = cur_gen();
	t = thread_of(p, now, slot);
	if (!t || t->state != TS_SLEEP)
		return 0;
	cur = bpf_get_current_task_btf();
	/* a waker of the same process: it may be the op's enqueuer */
	wake_up(t, p, slot, now, gen, cur->tgid == p->tgid ? cur : NULL);
	return 0;
}

/* ------------------------------------------------------------------------
 * syncfs(2): its syscall tracepoints, the only hook this kernel offers
 * (no kprobes, no fentry). While one is attached every syscall of every
 * task takes the tracing slow path: the loader leaves them out where no
 * target calls syncfs (BlueStore OSDs; lib/cephlat/engine/tracer.py). */

SEC("tracepoint/syscalls/sys_enter_syncfs")
int on_syncfs_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now;
	struct thread_state *t;
	int slot = target_of(id >> 32);

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_SYSCALL);
	now = bpf_ktime_get_ns();
	t = thread_of(bpf_get_current_task_btf(), now, slot);
	if (t)
		t->syncfs_start = now;
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_syncfs")
int on_syncfs_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct thread_state *t;
	struct ev_syncfs *e;
	__u32 tid = (__u32)id, gen;
	__u64 now;
	int slot = target_of(id >> 32);

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_SYSCALL);
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || !t->syncfs_start)
		return 0;
	now = bpf_ktime_get_ns();
	gen = cur_gen();
	if (now > t->syncfs_start) {
		record(t->target, ST_SYNCFS, now - t->syncfs_start, gen);
		e = EV_NEW(ev_syncfs, EV_SYNCFS, now, gen, t->target);
		if (e) {
			e->duration_ns = now - t->syncfs_start;
			e->tid = tid;
			EV_SEND(e);
		}
	}
	t->syncfs_start = 0;
	return 0;
}

/* ------------------------------------------------------------------------
 * block requests issued by the target */

/* A tp_btf argument's address as a number: the verifier tracks it as a
 * trusted pointer and allows no arithmetic (hashing) on it; a copy of its
 * bytes is a plain scalar. */
static __always_inline __u64 ptr_bits(void *p)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &p);
	return v;
}

static __always_inline __u32 rq_index(__u64 rq)
{
	return (__u32)((rq >> 6) * 0x9E3779B97F4A7C15ULL >> 32);
}

/* The slot of request rq, or NULL. */
static __always_inline struct rq_start *rq_find(__u64 rq)
{
	__u32 i = rq_index(rq);

	for (int w = 0; w < RQ_WAYS; w++) {
		__u32 j = (i + w) & (RQ_SLOTS - 1);
		struct rq_start *p = bpf_map_lookup_elem(&rqs, &j);

		if (p && p->rq == rq)
			return p;
	}
	return 0;
}

/* Track request rq of target `slot` from `ts`: its own slot, a free one,
 * or (all taken: counted) the first. */
static __always_inline void rq_track(__u64 rq, __u64 ts, __u32 slot)
{
	__u32 i = rq_index(rq), none = ~0U, free = none;
	struct rq_start *p;

	for (int w = 0; w < RQ_WAYS; w++) {
		__u32 j = (i + w) & (RQ_SLOTS - 1);

		p = bpf_map_lookup_elem(&rqs, &j);
		if (!p)
			continue;
		if (p->rq == rq || !p->rq) {
			free = j;
			break;
		}
	}
	if (free == none) {
		count(slot, CNT_RQ_MAP_FULL);
		free = i & (RQ_SLOTS - 1);
	}
	p = bpf_map_lookup_elem(&rqs, &free);
	if (!p)
		return;
	p->ts = ts;
	p->slot = slot;
	p->rq = rq;
}

static __always_inline void rq_start(struct request *rq)
{
	int slot = target_of(bpf_get_current_pid_tgid() >> 32);

	if (slot < 0) {
		/* issued by someone else (e.g. kblockd): ours if inserted by us */
		struct rq_start *p = rq_find(ptr_bits(rq));

		if (p && p->ts == 1)
			p->ts = bpf_ktime_get_ns();
		return;
	}
	rq_track(ptr_bits(rq), bpf_ktime_get_ns(), slot);
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(on_rq_insert, struct request *rq)
{
	int slot = target_of(bpf_get_current_pid_tgid() >> 32);

	if (slot < 0)
		return 0;
	rq_track(ptr_bits(rq), 1, slot);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_rq_issue, struct request *rq)
{
	rq_start(rq);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_rq_complete, struct request *rq, blk_status_t error,
	     unsigned int nr_bytes)
{
	__u64 now, d, dkey;
	struct rq_start *st = rq_find(ptr_bits(rq));
	struct dev_stats *ds, z = {};
	struct ev_block_rq *e;
	struct gendisk *disk;
	__u32 dev, gen, slot;

	if (!st)
		return 0;
	if (st->ts <= 1) {		/* inserted, never issued */
		st->rq = 0;
		return 0;
	}
	now = bpf_ktime_get_ns();
	gen = cur_gen();
	d = now > st->ts ? now - st->ts : 0;
	slot = st->slot;
	st->rq = 0;
	record(slot, ST_BLOCK_RQ, d, gen);
	/* a tp_btf argument: read through BTF directly, no helper calls */
	disk = rq->q->disk;
	dev = disk ? (disk->major << DEV_MINOR_BITS | disk->first_minor) : 0;
	e = EV_NEW(ev_block_rq, EV_BLOCK_RQ, now, gen, slot);
	if (e) {
		e->duration_ns = d;
		e->dev = dev;
		e->bytes = nr_bytes;
		EV_SEND(e);
	}
	dkey = in_half((__u64)slot << 32 | dev, gen);
	ds = bpf_map_lookup_elem(&devs, &dkey);
	if (!ds) {
		bpf_map_update_elem(&devs, &dkey, &z, BPF_NOEXIST);
		ds = bpf_map_lookup_elem(&devs, &dkey);
		if (!ds)
			return 0;
	}
	ds->count++;
	ds->sum_ns += d;
	ds->bytes += nr_bytes;
	if (d > ds->max_ns)
		ds->max_ns = d;
	return 0;
}

/* ------------------------------------------------------------------------
 * op stages and the queue-wait attribution */

/* Argument n (1-based) of a uprobe. Every argument register is loaded
 * straight from the context (no helper call) and barrier_var() keeps them
 * loaded before the choice: clang would otherwise turn a switch over ctx
 * loads into a computed ctx offset, which the verifier rejects. */
static __always_inline __u64 arg_n(struct pt_regs *ctx, __u32 n)
{
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx),
	      a3 = PT_REGS_PARM3(ctx), a4 = PT_REGS_PARM4(ctx),
	      a5 = PT_REGS_PARM5(ctx);

	barrier_var(a1);
	barrier_var(a2);
	barrier_var(a3);
	barrier_var(a4);
	barrier_var(a5);
	switch (n) {
	case 1: return a1;
	case 2: return a2;
	case 3: return a3;
	case 4: return a4;
	case 5: return a5;
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

/* A thread's cumulative idle-sleep, held and run-queue ns at a time. */
struct cums {
	__u64 isleep, held, runq;
};

/* c = the cumulative times at `at`, from ring entry e, the latest change
 * at or before `at` */
static __always_inline void cums_from(struct tring *e, __u64 at,
				      struct cums *c)
{
	c->isleep = e->cum_isleep;
	c->held = e->cum_held;
	c->runq = e->cum_runq;
	if (e->state == TS_SLEEP && e->sleep == SK_HELD)
		c->held += at - e->ts;
	else if (e->state == TS_SLEEP && e->sleep == SK_IDLE)
		c->isleep += at - e->ts;
	else if (e->state == TS_RUNQ)
		c->runq += at - e->ts;
}

/* Thread t's cumulative times at time `at` (past) into c, from its worker
 * ring, else its short ring. Returns 0 if `at` is older than what the
 * rings remember (c then holds zeros or the oldest known values). */
static __always_inline int cum_at(struct thread_state *t, __u64 at,
				  struct cums *c)
{
	__u32 head = t->ring_head, k, lo, hi, mid;
	struct wring *w = NULL;

	c->isleep = c->held = c->runq = 0;
	if (t->wring) {
		k = t->wring - 1;
		w = bpf_map_lookup_elem(&wrings, &k);
	}
	if (w && w->head) {
		/* its changes since it was given the ring are in time order:
		 * the latest at or before `at` by bisection */
		hi = w->head - 1;
		lo = w->head > WRING ? w->head - WRING : 0;
		/* newest first: most ops waited for the last few changes */
		for (int i = 0; i < 4; i++) {
			if (hi < lo + i)
				break;
			if (w->e[(hi - i) & (WRING - 1)].ts <= at) {
				cums_from(&w->e[(hi - i) & (WRING - 1)], at, c);
				return 1;
			}
		}
		if (w->e[lo & (WRING - 1)].ts <= at) {
			for (int i = 0; i <= WRING_BITS; i++) {
				if (lo >= hi)
					break;
				mid = lo + (hi - lo + 1) / 2;
				if (w->e[mid & (WRING - 1)].ts <= at)
					lo = mid;
				else
					hi = mid - 1;
			}
			cums_from(&w->e[lo & (WRING - 1)], at, c);
			return 1;
		}
		if (w->head > WRING)
			return 0;	/* older than the ring */
		/* before the ring began: the short ring has it */
	}
	/* newest first: an op usually waited for only the last few changes */
	for (int i = 0; i < TRING; i++) {
		struct tring *e = &t->ring[(head - 1 - i) & (TRING - 1)];

		if (!e->ts)
			return 0;	/* ring not full yet: `at` predates it */
		c->isleep = e->cum_isleep;
		c->held = e->cum_held;
		c->runq = e->cum_runq;
		if (e->ts <= at) {
			/* the latest transition at or before `at` */
			cums_from(e, at, c);
			return 1;
		}
	}
	return 0;			/* older than the ring: its oldest entry */
}

/* The stats of shard `cv` (0: unknown) of target `slot` in the half of
 * interval `gen`, inserted when new; NULL when the map is full. */
static __always_inline struct shard_stats *shard_of(__u32 slot, __u64 cv,
						    __u32 gen)
{
	__u64 key = in_half(cv | (__u64)slot << TARGET_SHIFT, gen);
	struct shard_stats *sh = bpf_map_lookup_elem(&shards, &key), z = {};

	if (sh)
		return sh;
	bpf_map_update_elem(&shards, &key, &z, BPF_NOEXIST);
	return bpf_map_lookup_elem(&shards, &key);
}

/* Split the op's queue wait by the state of worker `tid` since the
 * enqueue; `e` (the capture event, may be NULL) gets the parts. */
static __always_inline void attribute(struct op_state *st, __u64 now,
				      __u32 tid, __u32 gen, __u32 slot,
				      struct ev_op_dequeue *e)
{
	struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
	__u64 qw = st->qwait_ns, sig = 0, held = 0, rq = 0, pick = 0, busy;
	struct cums c = {};
	struct shard_stats *sh;
	__u64 key;
	int woke = 0, timedout;

	if (!t) {
		/* a worker the scheduler programs do not know: no split, but
		 * the op counts in its (unknown) shard as in queue_wait */
		sh = shard_of(slot, 0, gen);
		if (sh) {
			sh->ops++;
			sh->qwait_ns += qw;
		}
		return;
	}
	if (t->state == TS_SLEEP) {
		/* running here, yet asleep as far as the scheduler programs
		 * saw: neither its wake-up nor its switch-in was seen (Linux
		 * 6.18 now and then runs neither program, nor a perf-event
		 * one, for a thread whose timed futex wait expired: ~1 in
		 * 2,000 such waits here). Taken as woken and running now. */
		wake_up(t, bpf_get_current_task_btf(), slot, now, gen, NULL);
		transition(t, TS_RUN, SK_WORK, now);
		t->oncpu_after_wake = now;
	}
	/* a worker's first op: from now on its changes go to a long ring */
	wring_claim(t, tid);
	if (st->enq_ns >= t->since && t->state == TS_RUN) {
		/* running since before the enqueue: all of it was busy */
	} else if (t->held_end > st->enq_ns) {
		/* a scheduler hold of this worker ended after the enqueue: up
		 * to then the op was not due (a worker sleeps on a hold only
		 * when no queued op is; when it ends a run of other ops, none
		 * was due then either, and an op once due stays due), so all
		 * of it was held, the ops served in between and the run-queue
		 * waits of the holds' ends included. The rest splits by what
		 * the worker did since, from its totals then (no ring look-up:
		 * a long hold truncates nothing). */
		held = t->held_end - st->enq_ns;
		if (held > qw)
			held = qw;
		sig = t->cum_isleep - t->he_isleep;
		rq = t->cum_runq - t->he_runq;
		if (sig > qw - held)
			sig = qw - held;
		if (rq > qw - held - sig)
			rq = qw - held - sig;
		if (t->oncpu_after_wake >= t->held_end &&
		    now > t->oncpu_after_wake)
			pick = now - t->oncpu_after_wake;
		if (pick > qw - held - sig - rq)
			pick = qw - held - sig - rq;
		woke = sig > 0;
	} else {
		if (!cum_at(t, st->enq_ns, &c)) {
			count_in(slot, CNT_ATTR_TRUNCATED, gen);
			if (e)
				e->truncated = 1;
		}
		/* now the worker is running: its totals are current. Sleeping
		 * inside an earlier op (I/O, locks) is work; a scheduler hold
		 * is held; only other idle sleep is signal delay. */
		held = t->cum_held > c.held ? t->cum_held - c.held : 0;
		sig = t->cum_isleep > c.isleep ? t->cum_isleep - c.isleep : 0;
		rq = t->cum_runq > c.runq ? t->cum_runq - c.runq : 0;
		if (held > qw)
			held = qw;
		if (sig > qw - held)
			sig = qw - held;
		if (rq > qw - held - sig)
			rq = qw - held - sig;
		if ((sig || held) && t->oncpu_after_wake > st->enq_ns &&
		    now > t->oncpu_after_wake)
			pick = now - t->oncpu_after_wake;
		if (pick > qw - held - sig - rq)
			pick = qw - held - sig - rq;
		woke = sig > 0;
	}
	busy = qw - held - sig - rq - pick;
	record(slot, ST_ATTR__HELD, held, gen);
	record(slot, ST_ATTR__BUSY, busy, gen);
	record(slot, ST_ATTR__SIGNAL, sig, gen);
	record(slot, ST_ATTR__RUNQ, rq, gen);
	record(slot, ST_ATTR__PICKUP, pick, gen);
	if (e) {
		e->attributed = 1;
		e->held_ns = held;
		e->busy_ns = busy;
		e->signal_ns = sig;
		e->runq_ns = rq;
		e->pickup_ns = pick;
		e->waker_tid = t->waker_tid;
	}

	/* woken from an idle wait on a condition variable by this op's
	 * enqueuer (or by the wait's timeout), or held in a timed wait on one:
	 * that cv is the queue's and names the worker's shard. Wake-ups by
	 * others may be on other cvs. */
	if ((sig || held) && !(t->cv_uaddr & 1) && t->cv_uaddr &&
	    (held || t->cv_timedout ||
	     (t->waker_tid && t->waker_tid == st->enq_tid)))
		t->queue_cv = t->cv_uaddr;
	key = t->queue_cv;
	if (e)
		e->shard = key;
	sh = shard_of(slot, key, gen);
	if (!sh)
		return;
	sh->ops++;
	sh->qwait_ns += qw;
	sh->held_ns += held;
	sh->busy_ns += busy;
	sh->signal_ns += sig;
	sh->runq_ns += rq;
	sh->pickup_ns += pick;
	if (qw > sh->qwait_max_ns)
		sh->qwait_max_ns = qw;
	/* the worker's last condition-variable wait expired and this is the
	 * first op it takes since: queued work was found by the timeout */
	timedout = t->cv_timedout;
	t->cv_timedout = 0;
	if (timedout) {
		count_in(slot, CNT_TIMEOUTS_WITH_WORK, gen);
		sh->timeouts_with_work++;
		if (e)
			e->timeout_with_work = 1;
	}
	if (!woke)
		return;
	if (timedout) {
		count_in(slot, CNT_WAKE_TIMEOUT, gen);
		sh->wake_timeout++;
		if (e)
			e->wake = WK_TIMEOUT;
	} else if (t->waker_tid && t->waker_tid == st->enq_tid) {
		count_in(slot, CNT_WAKE_ENQUEUER, gen);
		sh->wake_enqueuer++;
		if (e)
			e->wake = WK_ENQUEUER;
	} else {
		count_in(slot, CNT_WAKE_OTHER, gen);
		sh->wake_other++;
		if (e)
			e->wake = WK_OTHER;
	}
}

/* Op-keyed events: enqueue, dequeue and completion of one op, each its
 * own program; the cookie says where the op key is (enum op_arg). */

/* The op key of this hit, or 0 (counted when it could not be read). */
static __always_inline __u64 op_key(struct pt_regs *ctx, __u32 slot)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 op = arg_n(ctx, cookie & OPARG_NUM_MASK);

	if (cookie & OPARG_DEREF) {
		__u64 ptr = op;

		if (!ptr || bpf_probe_read_user(&op, sizeof(op), (void *)ptr)) {
			count(slot, CNT_BAD_ARG);
			return 0;
		}
	}
	return op;
}

/* The request id of OpRequest `op` into r; 0 when read. */
static __always_inline int read_reqid(__u64 op, struct reqid *r, __u32 slot)
{
	/* osd_reqid_t: entity_name_t {u8 _type; s64 _num}, u64 tid, s32 inc */
	struct { __u8 type; __u8 pad[7]; __u64 num; __u64 tid; __s32 inc; } raw;

	if (!reqid_off || bpf_probe_read_user(&raw, sizeof(raw),
					      (void *)(op + reqid_off)))
		return -1;
	r->num = raw.num;
	r->tid = raw.tid;
	r->inc = raw.inc;
	r->type = raw.type;
	r->slot = slot;
	r->pad = 0;
	return 0;
}

/* The name of the object OpRequest `op` is for (its message's std::string
 * at name_off: data pointer, length), cut to OBJ_NAME_LEN - 1 bytes.
 * For captures only; "" when unknown. */
static __always_inline void read_object(__u64 op, __u32 name_off, char *out)
{
	struct { __u64 ptr; __u64 len; } str;
	__u64 msg = 0;

	out[0] = 0;
	if (!msg_off || !name_off ||
	    bpf_probe_read_user(&msg, sizeof(msg), (void *)(op + msg_off)) ||
	    !msg ||
	    bpf_probe_read_user(&str, sizeof(str), (void *)(msg + name_off)) ||
	    !str.ptr || !str.len)
		return;
	bpf_probe_read_user_str(out, OBJ_NAME_LEN, (void *)str.ptr);
}

/* A hit of a target: counted. -> its slot (-1: not a target, or the op
 * could not be read), the op's address and its key in the ops map. */
static __always_inline int op_hit(struct pt_regs *ctx, __u64 *op, __u64 *key)
{
	int slot = target_of(bpf_get_current_pid_tgid() >> 32);

	if (slot < 0)
		return -1;
	count(slot, CNT_HIT_ENTRY);
	*op = op_key(ctx, slot);
	*key = (__u64)slot << TARGET_SHIFT | *op;
	return *op ? slot : -1;
}

/* A dequeue or completion: the op's state, or NULL (not seen enqueued:
 * counted) */
static __always_inline struct op_state *known_op(struct pt_regs *ctx,
						 __u64 *op, __u64 *key,
						 int *slot)
{
	struct op_state *st;

	*slot = op_hit(ctx, op, key);
	if (*slot < 0)
		return 0;
	st = op_state_of(*key);
	if (!st)
		count(*slot, CNT_OP_UNKNOWN);
	return st;
}

static __always_inline __u64 utime_ns(struct utime t)
{
	return (__u64)t.sec * 1000000000ull + t.nsec;
}

/* The messenger stages of an op enqueued at `now` (monotonic), from its
 * message's wall-clock stamps: two reads, no probe hit. 0: not traced or
 * stamps missing / out of order (counted). */
static __always_inline int msg_stages(__u64 op, int slot, __u64 now,
				      __u32 gen, __u64 out[3])
{
	struct msg_stamps m;
	__u64 msg = 0, recv, thr, all, enq;

	if (!msg_stamps_off || !msg_off)
		return 0;
	if (bpf_probe_read_user(&msg, sizeof(msg), (void *)(op + msg_off)) ||
	    !msg || bpf_probe_read_user(&m, sizeof(m),
					(void *)(msg + msg_stamps_off)))
		goto bad;
	recv = utime_ns(m.recv);
	thr = utime_ns(m.throttle);
	all = utime_ns(m.recv_complete);
	enq = now + *(volatile __s64 *)&ctl.real_off_ns;
	if (!m.recv.sec || thr < recv || all < thr || enq < all)
		goto bad;
	out[0] = thr - recv;
	out[1] = all - thr;
	out[2] = enq - all;
	record(slot, ST_THROTTLE_WAIT, out[0], gen);
	record(slot, ST_RECV, out[1], gen);
	record(slot, ST_DISPATCH, out[2], gen);
	return 1;
bad:
	count_in(slot, CNT_MSG_UNSTAMPED, gen);
	return 0;
}

SEC("uprobe")
int op_enqueue(struct pt_regs *ctx)
{
	/* OSD::enqueue_op sees each op once (requeues go through
	 * _enqueue_front), so an existing entry is a stale op whose
	 * OpRequest was freed and its address reused. */
	struct ev_op_enqueue *e;
	struct op_slot *s;
	struct op_state n = {};
	int replaced, stamped;
	__u64 op, key, now, msgs[3] = {};
	__u32 tid, gen;
	int slot = op_hit(ctx, &op, &key);

	if (slot < 0)
		return 0;
	now = bpf_ktime_get_ns();
	tid = (__u32)bpf_get_current_pid_tgid();
	n.enq_ns = now;
	n.enq_tid = tid;
	s = op_claim(key, &replaced);
	if (!s) {
		count(slot, CNT_OP_MAP_FULL);
		return 0;
	}
	if (replaced) {
		count(slot, CNT_OP_REPLACED);
		if (s->st.sub_ns)	/* its request id index goes too */
			req_forget(&s->st.req);
	}
	s->st = n;
	s->key = key;
	gen = cur_gen();
	stamped = msg_stages(op, slot, now, gen, msgs);
	e = EV_NEW(ev_op_enqueue, EV_OP_ENQUEUE, now, gen, slot);
	if (e) {
		struct reqid r = {};
		struct { __u64 pool; __u32 seed; __u32 pad; __s8 shard; } pg = {};

		/* who and where, for the capture only: one read each */
		read_reqid(op, &r, slot);
		if (enq_pg_on_stack)
			bpf_probe_read_user(&pg, sizeof(pg),
					    (void *)(PT_REGS_SP(ctx) + 8));
		e->op = op;
		e->req_num = r.num;
		e->req_tid = r.tid;
		e->req_inc = r.inc;
		e->tid = tid;
		e->pg_pool = pg.pool;
		e->pg_seed = pg.seed;
		e->pg_shard = pg.shard;
		e->req_type = r.type;
		e->stamped = stamped;
		e->throttle_wait_ns = msgs[0];
		e->recv_ns = msgs[1];
		e->dispatch_ns = msgs[2];
		EV_SEND(e);
	}
	return 0;
}

SEC("uprobe")
int op_dequeue(struct pt_regs *ctx)
{
	struct ev_op_dequeue *e;
	struct op_state *st;
	struct task_starts *ts;
	__u64 op, key, now;
	__u32 tid, gen;
	int slot;

	st = known_op(ctx, &op, &key, &slot);
	if (slot < 0)
		return 0;
	now = bpf_ktime_get_ns();
	/* the op this worker executes now: its call stages name it */
	ts = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ts)
		ts->cur_op = op;
	/* a requeued op is dequeued again: its first wait is queue_wait */
	if (st && !st->deq_ns && now >= st->enq_ns) {
		tid = (__u32)bpf_get_current_pid_tgid();
		gen = cur_gen();
		st->qwait_ns = now - st->enq_ns;
		st->deq_ns = now;
		record(slot, ST_QUEUE_WAIT, st->qwait_ns, gen);
		e = EV_NEW(ev_op_dequeue, EV_OP_DEQUEUE, now, gen, slot);
		if (e) {
			__builtin_memset((char *)e + sizeof(e->h), 0,
					 sizeof(*e) - sizeof(e->h));
			e->op = op;
			e->queue_wait_ns = st->qwait_ns;
			e->tid = tid;
			e->enq_tid = st->enq_tid;
		}
		attribute(st, now, tid, gen, slot, e);
		if (e)
			EV_SEND(e);
		if (track_in_op)
			mark_in_op(tid, 1);
	}
	if (bpf_get_attach_cookie(ctx) & OPARG_STARTS_DEQUEUE) {
		/* the dequeue_op call stage starts here (no stage_entry on
		 * this function): last thing, as in stage_entry */
		if (ts) {
			/* a do_op start left by a call whose dequeue_op
			 * return was not probed (attached mid-call) must not
			 * end at this one's */
			ts->ts[ST_DO_OP] = 0;
			ts->ts[ST_DEQUEUE_OP] = bpf_ktime_get_ns();
		} else {
			count(slot, CNT_START_MAP_FULL);
		}
	}
	return 0;
}

SEC("uprobe")
int op_done(struct pt_regs *ctx)
{
	struct ev_op_done *e;
	struct op_state *st;
	__u64 op, key, now;
	__u32 cls, gen;
	int slot;

	st = known_op(ctx, &op, &key, &slot);
	if (!st)
		return 0;
	now = bpf_ktime_get_ns();
	gen = cur_gen();
	cls = op_class(op);
	if (now >= st->enq_ns) {
		record(slot, ST_OP_TOTAL, now - st->enq_ns, gen);
		record(slot, ST_OP_TOTAL__READ + cls, now - st->enq_ns, gen);
	}
	if (st->deq_ns)
		record(slot, ST_QUEUE_WAIT__READ + cls, st->qwait_ns, gen);
	if (st->sub_ns) {		/* a replicated write: all committed */
		if (st->replies && st->last_ns >= st->sub_ns) {
			struct peer_stats *ps = peer_stats_of(slot,
							      st->last_peer,
							      gen);

			record(slot, ST_REPLICA_WAIT, st->last_ns - st->sub_ns,
			       gen);
			if (ps)
				ps->last++;
		}
		req_forget(&st->req);
	}
	e = EV_NEW(ev_op_done, EV_OP_DONE, now, gen, slot);
	if (e) {
		e->op = op;
		e->op_total_ns = now >= st->enq_ns ? now - st->enq_ns : 0;
		e->queue_wait_ns = st->deq_ns ? st->qwait_ns : 0;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		e->op_class = cls;
		e->dequeued = st->deq_ns != 0;
		e->total_valid = now >= st->enq_ns;
		e->replies = st->replies;
		e->replica_wait_ns = st->replies && st->last_ns >= st->sub_ns ?
				     st->last_ns - st->sub_ns : 0;
		e->local_commit_ns = st->local_ns > st->sub_ns && st->sub_ns ?
				     st->local_ns - st->sub_ns : 0;
		e->last_peer = st->last_peer;
		read_object(op, op_name_off, e->object);
		EV_SEND(e);
	}
	op_forget(key);
	return 0;
}

/* ------------------------------------------------------------------------
 * replicated writes: on the primary, sub-ops sent -> each replica's reply
 * and its own commit; on a replica, the replica op's life */

/* The current thread's op (it dequeued it last) and its state. */
static __always_inline struct op_state *current_op(__u32 slot, __u64 *op)
{
	struct task_starts *ts;
	__u64 key;

	ts = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0, 0);
	if (!ts || !ts->cur_op)
		return 0;
	*op = ts->cur_op;
	key = (__u64)slot << TARGET_SHIFT | *op;
	return op_state_of(key);
}

/* ReplicatedBackend::submit_transaction, on the worker executing the
 * client op: the sub-ops go out now; index the op by its request id,
 * which the replicas' replies carry. */
SEC("uprobe")
int rep_submit(struct pt_regs *ctx)
{
	int slot = target_of(bpf_get_current_pid_tgid() >> 32);
	struct op_state *st;
	__u64 op, key;

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_ENTRY);
	st = current_op(slot, &op);
	if (!st)
		return 0;
	if (read_reqid(op, &st->req, slot)) {
		count(slot, CNT_BAD_ARG);
		return 0;
	}
	st->sub_ns = bpf_ktime_get_ns();
	st->local_ns = st->last_ns = 0;
	st->replies = st->last_peer = 0;
	key = (__u64)slot << TARGET_SHIFT | op;
	if (req_index_op(&st->req, key)) {
		count(slot, CNT_REQ_MAP_FULL);
		st->sub_ns = 0;
	}
	return 0;
}

/* ReplicatedBackend::do_repop_reply(OpRequestRef): a replica's commit
 * reply, itself an op that went through the queue (done with now). */
SEC("uprobe")
int rep_reply(struct pt_regs *ctx)
{
	__u64 rop, rkey, now = bpf_ktime_get_ns(), peer = 0, wait;
	struct req_slot *k;
	struct peer_stats *ps;
	struct ev_replica_reply *e;
	struct op_state *st;
	struct reqid r = {};
	__u32 gen;
	int slot = op_hit(ctx, &rop, &rkey);

	if (slot < 0)
		return 0;
	op_forget(rkey);
	if (read_reqid(rop, &r, slot) || !src_num_off ||
	    bpf_probe_read_user(&peer, sizeof(peer),
				(void *)(rop + src_num_off))) {
		count(slot, CNT_BAD_ARG);
		return 0;
	}
	k = req_find(&r);
	st = k ? op_state_of(k->key) : 0;
	if (!k || !st || !st->sub_ns || now < st->sub_ns) {
		count(slot, CNT_REPLY_UNKNOWN);
		return 0;
	}
	wait = now - st->sub_ns;
	st->replies++;
	st->last_ns = now;
	st->last_peer = peer;
	gen = cur_gen();
	ps = peer_stats_of(slot, peer, gen);
	if (ps)
		hist_add(&ps->wait, wait);
	e = EV_NEW(ev_replica_reply, EV_REPLICA_REPLY, now, gen, slot);
	if (e) {
		e->op = k->key & ((1ULL << TARGET_SHIFT) - 1);
		e->wait_ns = wait;
		e->peer = peer;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		EV_SEND(e);
	}
	return 0;
}

/* The op a record of Ceph's holds at offset `off` (the record from the
 * probe's argument, through the cookie) and its state. The program is
 * attached only where the probe table knows the offset (it may be 0). */
static __always_inline struct op_state *op_in(struct pt_regs *ctx, __u32 off,
					      int *slot, __u64 *op,
					      __u64 *key)
{
	__u64 rec;

	*slot = op_hit(ctx, &rec, key);
	if (*slot < 0)
		return 0;
	if (bpf_probe_read_user(op, sizeof(*op), (void *)(rec + off)) || !*op) {
		count(*slot, CNT_BAD_ARG);
		return 0;
	}
	*key = (__u64)*slot << TARGET_SHIFT | *op;
	return op_state_of(*key);
}

/* ReplicatedBackend::op_commit(InProgressOpRef const&): the primary's own
 * commit of a replicated write */
SEC("uprobe")
int rep_local_commit(struct pt_regs *ctx)
{
	__u64 op, key, now = bpf_ktime_get_ns();
	struct ev_local_commit *e;
	struct op_state *st;
	__u32 gen;
	int slot;

	st = op_in(ctx, inprog_op_off, &slot, &op, &key);
	if (!st || !st->sub_ns || now < st->sub_ns)
		return 0;
	st->local_ns = now;
	gen = cur_gen();
	record(slot, ST_LOCAL_COMMIT, now - st->sub_ns, gen);
	e = EV_NEW(ev_local_commit, EV_LOCAL_COMMIT, now, gen, slot);
	if (e) {
		e->op = op;
		e->commit_ns = now - st->sub_ns;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		EV_SEND(e);
	}
	return 0;
}

/* ReplicatedBackend::repop_commit(RepModifyRef): on a replica, the
 * replica op committed; its reply goes out now. */
SEC("uprobe")
int repop_done(struct pt_regs *ctx)
{
	__u64 op, key, now = bpf_ktime_get_ns();
	struct ev_repop_done *e;
	struct op_state *st;
	__u32 gen;
	int slot;

	st = op_in(ctx, repmod_op_off, &slot, &op, &key);
	if (!st) {
		if (slot >= 0)
			count(slot, CNT_OP_UNKNOWN);
		return 0;
	}
	gen = cur_gen();
	if (now >= st->enq_ns)
		record(slot, ST_REPOP, now - st->enq_ns, gen);
	if (st->deq_ns)
		record(slot, ST_REPOP__QUEUE_WAIT, st->qwait_ns, gen);
	e = EV_NEW(ev_repop_done, EV_REPOP_DONE, now, gen, slot);
	if (e) {
		e->op = op;
		e->repop_ns = now >= st->enq_ns ? now - st->enq_ns : 0;
		e->queue_wait_ns = st->deq_ns ? st->qwait_ns : 0;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		e->dequeued = st->deq_ns != 0;
		read_object(op, repop_name_off, e->object);
		EV_SEND(e);
	}
	op_forget(key);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
