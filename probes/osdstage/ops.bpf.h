/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/ops.bpf.h - op stages: enqueue, dequeue and completion of one op.
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

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
/* The osd_reqid_t at `addr` as a map key of target `slot`. */
static __always_inline int read_reqid_at(__u64 addr, struct reqid *r,
					 __u32 slot)
{
	/* osd_reqid_t: entity_name_t {u8 _type; s64 _num}, u64 tid, s32 inc */
	struct { __u8 type; __u8 pad[7]; __u64 num; __u64 tid; __s32 inc; } raw;

	if (bpf_probe_read_user(&raw, sizeof(raw), (void *)addr))
		return -1;
	r->num = raw.num;
	r->tid = raw.tid;
	r->inc = raw.inc;
	r->type = raw.type;
	r->slot = slot;
	r->pad = 0;
	return 0;
}

static __always_inline int read_reqid(__u64 op, struct reqid *r, __u32 slot)
{
	if (!reqid_off)
		return -1;
	return read_reqid_at(op + reqid_off, r, slot);
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

/* The messenger stages of an op enqueued now, from its message `msg`'s
 * wall-clock stamps: one read, no probe hit. 0: not traced or stamps
 * missing / out of order (counted). */
static __always_inline int msg_stages(__u64 msg, int slot, __u32 gen,
				      __u64 out[3])
{
	struct msg_stamps m;
	__u64 recv, thr, all, enq;

	if (!msg_stamps_off)
		return 0;
	if (!msg || bpf_probe_read_user(&m, sizeof(m),
					(void *)(msg + msg_stamps_off)))
		goto bad;
	recv = utime_ns(m.recv);
	thr = utime_ns(m.throttle);
	all = utime_ns(m.recv_complete);
	enq = wall_now();
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

/* Ceph's message types that decide an op's scheduler class
 * (include/ceph_fs.h, msg/Message.h; the same from 16.2 to 20.2), and
 * the priorities the class rule reads (include/msgr.h; PeeringState's
 * recovery_msg_priority_t: a recovery message below DEGRADED is best
 * effort on mClock) */
#define CEPH_MSG_OSD_OP			42
#define CEPH_MSG_OSD_BACKOFF		61
#define MSG_OSD_PG_SCAN			94
#define MSG_OSD_PG_BACKFILL		95
#define MSG_OSD_PG_BACKFILL_REMOVE	96
#define MSG_OSD_PG_PUSH			105
#define MSG_OSD_PG_PULL			106
#define MSG_OSD_PG_PUSH_REPLY		107
#define MSG_OSD_EC_WRITE_REPLY		109
#define MSG_OSD_EC_READ			110
#define MSG_OSD_EC_READ_REPLY		111
#define CEPH_MSG_PRIO_HIGH		196
#define RECOVERY_PRIO_DEGRADED		10

/* An erasure-coded pool's messages handled whole inside dequeue_op (a
 * shard's commit reply, a sub-read and its reply): no later event of
 * ours sees them. (A sub-write lives on to its commit: ec_committed.) */
static __always_inline int ends_in_dequeue(__u32 type)
{
	return type == MSG_OSD_EC_WRITE_REPLY || type == MSG_OSD_EC_READ ||
	       type == MSG_OSD_EC_READ_REPLY;
}

/* The class the OSD's scheduler gives an op with message type `type` and
 * priority `prio` (enum queue_class), by Ceph's OpSchedulerItem rules: a
 * client's op (or backoff) is client; a recovery message (OSD::enqueue_op
 * queues these six as recovery items) immediate at CEPH_MSG_PRIO_HIGH and
 * above, else recovery, or on mClock best effort below DEGRADED (WPQ has
 * no classes: there it says what the item is); anything else (replica
 * ops and their replies) immediate. */
static __always_inline __u32 queue_class_of(__u16 type, __u16 prio,
					    int mclock)
{
	switch (type) {
	case CEPH_MSG_OSD_OP:
	case CEPH_MSG_OSD_BACKOFF:
		return QC_CLIENT;
	case MSG_OSD_PG_SCAN:
	case MSG_OSD_PG_BACKFILL:
	case MSG_OSD_PG_BACKFILL_REMOVE:
	case MSG_OSD_PG_PUSH:
	case MSG_OSD_PG_PULL:
	case MSG_OSD_PG_PUSH_REPLY:
		if (prio >= CEPH_MSG_PRIO_HIGH)
			return QC_IMMEDIATE;
		if (mclock && prio < RECOVERY_PRIO_DEGRADED)
			return QC_BACKGROUND_BEST_EFFORT;
		return QC_BACKGROUND_RECOVERY;
	default:
		return QC_IMMEDIATE;
	}
}

/* ------------------------------------------------------------------------
 * Ops sent as OTLP traces (osdstage.h, struct op_trace): the choice at the
 * op's end. All of it is behind TRACE_ON, constants of .rodata: with no
 * traces asked for, the verifier removes it and an op pays nothing. */
#define TRACE_ON (trace_every || trace_over_ns)
#define CEPH_ENTITY_TYPE_CLIENT	8
#define SAMPLE_GOLDEN		0x9E3779B97F4A7C15ULL

/* Whether the rate cap lets one more trace through now: GCRA, one
 * compare-and-swap of the next trace's theoretical arrival time (tat);
 * a trace is let through while tat is at most trace_burst_ns ahead of
 * now. Another CPU's trace in between: tried once more. */
static __always_inline int trace_admit(void)
{
	__u32 zero = 0;
	__u64 *tat, t, base, now;

	if (!trace_gap_ns)
		return 1;
	tat = bpf_map_lookup_elem(&trace_tat, &zero);
	if (!tat)
		return 0;
	for (int i = 0; i < 2; i++) {
		now = bpf_ktime_get_ns();
		t = *(volatile __u64 *)tat;
		base = t > now ? t : now;
		if (base - now > trace_burst_ns)
			return 0;
		if (__sync_val_compare_and_swap(tat, t, base + trace_gap_ns) == t)
			return 1;
	}
	return 0;
}

/* Op `op` (state `st`, target `slot`) ends now: a primary's client op
 * (role TR_PRIMARY, op class `cls`) or a replica op (TR_REPLICA). Sent
 * as a struct op_trace when chosen: in the 1-in-trace_every sample of
 * request ids (model/sample.py's rule) or at least trace_over_ns long,
 * and under the rate cap (each counted). The request id is the one the
 * op's state holds (a replicated write's primary read it when its sub-ops
 * went out, an erasure-coded shard when its sub-write was applied), else
 * read now (32 bytes, the OpRequest's own, in cache: the probe just read
 * it), and only when the sample needs it or the op is slow. */
static __always_inline void trace_op(int slot, __u64 op, struct op_state *st,
				     __u64 now, __u32 gen, __u32 role,
				     __u32 cls, __u32 name_off,
				     __u64 bytes_in, __u64 bytes_out)
{
	struct reqid r = {};
	struct op_trace *t;
	__u64 total, h, src = 0;
	__u32 why;

	if (!TRACE_ON)
		return;
	total = now >= st->enq_ns ? now - st->enq_ns : 0;
	if (!trace_every && total < trace_over_ns)
		return;
	if (st->req.type)
		r = st->req;
	else if (read_reqid(op, &r, slot))
		return;
	if (r.type != CEPH_ENTITY_TYPE_CLIENT)
		return;
	h = r.tid * SAMPLE_GOLDEN + r.num;
	if (trace_every && (h >> 32) % trace_every == 0)
		why = TW_SAMPLE;
	else if (trace_over_ns && total >= trace_over_ns)
		why = TW_SLOW;
	else
		return;
	count_in(slot, why == TW_SAMPLE ? CNT_TRACE_SAMPLE : CNT_TRACE_SLOW,
		 gen);
	if (!trace_admit()) {
		count_in(slot, CNT_TRACE_OVER_RATE, gen);
		return;
	}
	t = bpf_ringbuf_reserve(&traces, sizeof(*t), 0);
	if (!t) {
		count_in(slot, CNT_TRACE_RING_FULL, gen);
		return;
	}
	/* a replica op's sender is its primary (its message's source) */
	if (role == TR_REPLICA && src_num_off)
		bpf_probe_read_user(&src, sizeof(src),
				    (void *)(op + src_num_off));
	t->op = op;
	t->req_num = r.num;
	t->req_tid = r.tid;
	t->req_inc = r.inc;
	t->src = src;
	t->enq_ns = st->enq_ns;
	t->deq_ns = st->deq_ns;
	t->done_ns = now;
	t->msg_ns = st->msg_ns;
	t->sub_ns = st->sub_ns;
	t->local_ns = st->local_ns;
	t->bytes_in = bytes_in;
	t->bytes_out = bytes_out;
	t->pg_pool = st->pg_pool;
	t->pg_seed = st->pg_seed;
	t->replies = st->replies;
	__builtin_memcpy(t->rep_peer, (void *)st->rep_peer,
			 sizeof(t->rep_peer));
	__builtin_memcpy(t->rep_us, (void *)st->rep_us, sizeof(t->rep_us));
	t->last_peer = st->last_peer;
	t->sent_us = st->sent_us;
	t->target = slot;
	t->role = role;
	t->why = why;
	t->op_class = cls;
	t->queue_class = st->qclass;
	t->req_type = r.type;
	t->dequeued = st->deq_ns != 0;
	t->pad2 = 0;
	read_object(op, name_off, t->object);
	/* the front end polls: no wake-up from inside a probe */
	bpf_ringbuf_submit(t, BPF_RB_NO_WAKEUP);
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
	struct { __u64 pool; __u32 seed; __u32 pad; __s8 shard; } pg = {};
	int replaced, stamped;
	__u64 op, key, now, msgs[3] = {}, msg = 0;
	__u16 mt[2] = {};	/* the message's type and priority */
	__u32 tid, gen;
	int slot = op_hit(ctx, &op, &key);

	if (slot < 0)
		return 0;
	now = bpf_ktime_get_ns();
	tid = (__u32)bpf_get_current_pid_tgid();
	n.enq_ns = now;
	n.enq_tid = tid;
	/* its message: the scheduler class and the messenger stages */
	if (msg_off && (msg_type_off || msg_stamps_off))
		bpf_probe_read_user(&msg, sizeof(msg), (void *)(op + msg_off));
	if (msg && msg_type_off)
		bpf_probe_read_user(mt, sizeof(mt), (void *)(msg + msg_type_off));
	n.msg_type = mt[0];
	/* unread (no offset: a probe spec's program): all ops are client */
	n.qclass = mt[0] ? queue_class_of(mt[0], mt[1],
					  (ctl.mclock >> (slot & (MAX_TARGETS - 1))) & 1) :
		   QC_CLIENT;
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
	stamped = msg_stages(msg, slot, gen, msgs);
	if (stamped)
		s->st.msg_ns = msgs[0] + msgs[1] + msgs[2];
	e = EV_NEW(ev_op_enqueue, EV_OP_ENQUEUE, now, gen, slot);
	/* where: for the capture, and for the op's trace should it be sent
	 * (one read of the stack, only when traces are) */
	if ((e || TRACE_ON) && enq_pg_on_stack)
		bpf_probe_read_user(&pg, sizeof(pg),
				    (void *)(PT_REGS_SP(ctx) + 8));
	if (TRACE_ON) {
		s->st.pg_pool = pg.pool;
		s->st.pg_seed = pg.seed;
	}
	if (e) {
		struct reqid r = {};

		/* who, for the capture only: one read */
		read_reqid(op, &r, slot);
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
		e->msg_type = mt[0];
		e->msg_priority = mt[1];
		e->queue_class = n.qclass;
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
		record(slot, ST_QUEUE_WAIT__CLIENT + (st->qclass & 3),
		       st->qwait_ns, gen);
		e = EV_NEW(ev_op_dequeue, EV_OP_DEQUEUE, now, gen, slot);
		if (e) {
			__builtin_memset((char *)e + sizeof(e->h), 0,
					 sizeof(*e) - sizeof(e->h));
			e->op = op;
			e->queue_wait_ns = st->qwait_ns;
			e->tid = tid;
			e->enq_tid = st->enq_tid;
			e->queue_class = st->qclass;
		}
		attribute(st, now, tid, gen, slot, e);
		if (e)
			EV_SEND(e);
		/* a recovery message's life ends in dequeue_op (no later
		 * event of ours sees it): its slot is free from here, not
		 * taken for an op that never completed */
		if (st->qclass == QC_BACKGROUND_RECOVERY ||
		    st->qclass == QC_BACKGROUND_BEST_EFFORT ||
		    ends_in_dequeue(st->msg_type))
			op_forget(key);
	}
	/* the worker is inside an op from here to dequeue_op's return: a
	 * sleep now is work (a lock, I/O), not idle, whether the op was
	 * followed from its enqueue or not (enqueued before the probes, or
	 * requeued) */
	if (track_in_op)
		mark_in_op((__u32)bpf_get_current_pid_tgid(), 1);
	if (bpf_get_attach_cookie(ctx) & OPARG_STARTS_DEQUEUE) {
		/* the dequeue_op call stage starts here (no stage_entry on
		 * this function): last thing, as in stage_entry */
		if (ts) {
			/* a do_op start left by a call whose dequeue_op
			 * return was not probed (attached mid-call) must not
			 * end at this one's */
			ts->ts[ST_DO_OP] = 0;
			ts->ts[ST_DEQUEUE_OP] = bpf_ktime_get_ns();
			/* this program's run says nothing of the CPU's
			 * state (it does the attribution): a warm bias */
			ts->cost[ST_DEQUEUE_OP] = 0;
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
	__u64 op, key, now, inb, outb;
	__u32 cls, gen;
	int slot;

	st = known_op(ctx, &op, &key, &slot);
	if (!st)
		return 0;
	now = bpf_ktime_get_ns();
	/* log_op_stats(const OpRequest&, uint64_t inb, uint64_t outb) */
	inb = PT_REGS_PARM3(ctx);
	outb = PT_REGS_PARM4(ctx);
	gen = cur_gen();
	cls = op_class(op);
	/* op_total and op_latency: per op class only (their totals are the
	 * sums of the classes: user space adds them up) */
	if (now >= st->enq_ns)
		record(slot, ST_OP_TOTAL__READ + cls, now - st->enq_ns, gen);
	if (st->deq_ns) {
		record(slot, ST_QUEUE_WAIT__READ + cls, st->qwait_ns, gen);
		if (now >= st->deq_ns)
			record(slot, ST_EXECUTE, now - st->deq_ns, gen);
	}
	if (st->msg_ns && now >= st->enq_ns)
		record(slot, ST_OP_LATENCY__READ + cls,
		       st->msg_ns + now - st->enq_ns, gen);
	if (st->sub_ns) {		/* a replicated write: all committed */
		if (st->replies && st->last_ns >= st->sub_ns) {
			struct peer_stats *ps = peer_stats_of(slot,
							      st->last_peer,
							      gen, 0);

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
		e->msg_ns = st->msg_ns;
		e->bytes_in = inb;
		e->bytes_out = outb;
		read_object(op, op_name_off, e->object);
		EV_SEND(e);
	}
	trace_op(slot, op, st, now, gen, TR_PRIMARY, cls, op_name_off, inb,
		 outb);
	op_forget(key);
	return 0;
}

/* OSD::enqueue_op's stamp of op (wall clock ns): OpTracker's
 * queued_for_pg event, marked there just before the op is queued. 0 when
 * the op has none (OpTracker off: its list is empty), or when the list
 * moved while it was read (another thread appended to it, under the op's
 * lock, and the vector grew: its storage start is read again after the
 * copy; a list that moved is never read as a stamp). */
static const char queued_name[] = "queued_for_pg";

static __always_inline int is_queued(struct opt_event *e)
{
	if (e->name_len != sizeof(queued_name) - 1)
		return 0;
	for (int k = 0; k < sizeof(queued_name) - 1; k++)
		if (e->name_buf[k] != queued_name[k])
			return 0;
	return 1;
}

static __always_inline __u64 queued_stamp(__u64 op)
{
	__u64 vec[2], again = 0;
	struct opt_scratch *s;
	__u32 zero = 0, n, h;

	if (!events_off ||
	    bpf_probe_read_user(vec, sizeof(vec), (void *)(op + events_off)) ||
	    vec[1] <= vec[0])
		return 0;
	n = (vec[1] - vec[0]) / sizeof(struct opt_event);
	if (n > OPT_EVENTS_MAX)
		n = OPT_EVENTS_MAX;
	s = bpf_map_lookup_elem(&opt_scratch, &zero);
	if (!s)
		return 0;
	/* where the last op had it: one event read */
	h = s->hint;
	if (h < n && h < OPT_EVENTS_MAX &&
	    !bpf_probe_read_user(&s->ev[0], sizeof(s->ev[0]),
				 (void *)(vec[0] + h * sizeof(s->ev[0]))) &&
	    is_queued(&s->ev[0])) {
		if (bpf_probe_read_user(&again, sizeof(again),
					(void *)(op + events_off)) ||
		    again != vec[0])
			return 0;
		return utime_ns(s->ev[0].stamp);
	}
	/* OPT_EVENTS_MAX whatever the list holds (one read of a constant
	 * size: the vector is reserved to 20 events, so the storage is
	 * there), those from the n-th on not looked at */
	if (bpf_probe_read_user(s->ev, sizeof(s->ev), (void *)vec[0]) ||
	    bpf_probe_read_user(&again, sizeof(again),
				(void *)(op + events_off)) ||
	    again != vec[0])
		return 0;
	for (int i = 0; i < OPT_EVENTS_MAX; i++) {
		if (i >= n)
			break;
		if (is_queued(&s->ev[i])) {
			s->hint = i;
			return utime_ns(s->ev[i].stamp);
		}
	}
	return 0;
}

/* The lean tier: PrimaryLogPG::log_op_stats alone, one probe hit per op.
 * Every stage of the op from the stamps Ceph keeps in it: its message's
 * (header read, throttles passed, read in full, dispatched), OpTracker's
 * queued_for_pg (OSD::enqueue_op) and its own dequeue time
 * (OpRequest::dequeued_time), all wall clock, and now. No op table, no
 * scheduler programs. Where a stage's boundary is a probe of the full
 * tier that this tier lacks, Ceph's stamp in its place: the enqueue is
 * OpTracker's queued_for_pg, marked inside enqueue_op (without it, the
 * tracker off: the message's dispatch stamp, just before the call;
 * counted), the dequeue Ceph's dequeue stamp (the first thing
 * dequeue_op does). */
SEC("uprobe")
int op_lean(struct pt_regs *ctx)
{
	struct msg_stamps m;
	struct utime deq_t;
	__u64 op, key, msg = 0, recv, thr, all, disp, deq, enq, now;
	__u32 cls, gen, flags = 0;
	int slot = op_hit(ctx, &op, &key);

	if (slot < 0)
		return 0;
	now = wall_now();
	if (!msg_off || !msg_stamps_off || !deq_time_off)
		goto bad;
	if (lean_span) {
		/* the op's fields in one read: its message pointer, Ceph's
		 * dequeue stamp and the rmw flags (lean_lo .. + lean_span,
		 * set by the loader when they are that close) */
		__u8 buf[LEAN_SPAN_MAX];

		/* constants to the verifier (.rodata): the loader keeps
		 * every field inside the span */
		if (lean_span >= LEAN_SPAN_MAX ||
		    msg_off - lean_lo > lean_span - 8 ||
		    deq_time_off - lean_lo > lean_span - 8 ||
		    rmw_flags_off - lean_lo > lean_span - 4 ||
		    bpf_probe_read_user(buf, lean_span, (void *)(op + lean_lo)))
			goto bad;
		__builtin_memcpy(&msg, buf + (msg_off - lean_lo), 8);
		__builtin_memcpy(&deq_t, buf + (deq_time_off - lean_lo), 8);
		__builtin_memcpy(&flags, buf + (rmw_flags_off - lean_lo), 4);
		cls = flags & rmw_write_bit ? OPC_WRITE :
		      flags & rmw_read_bit ? OPC_READ : OPC_OTHER;
	} else {
		if (bpf_probe_read_user(&msg, sizeof(msg),
					(void *)(op + msg_off)) ||
		    bpf_probe_read_user(&deq_t, sizeof(deq_t),
					(void *)(op + deq_time_off)))
			goto bad;
		cls = op_class(op);
	}
	if (!msg ||
	    bpf_probe_read_user(&m, sizeof(m), (void *)(msg + msg_stamps_off)))
		goto bad;
	recv = utime_ns(m.recv);
	thr = utime_ns(m.throttle);
	all = utime_ns(m.recv_complete);
	disp = utime_ns(m.dispatch);
	deq = utime_ns(deq_t);
	if (!m.recv.sec || thr < recv || all < thr || disp < all ||
	    deq < disp || now < deq)
		goto bad;
	enq = queued_stamp(op);
	if (enq < disp || enq > deq) {
		/* counted where the release's events are known */
		if (events_off)
			count(slot, CNT_ENQ_FROM_DISPATCH);
		enq = disp;
	}
	/* each stage's statistics cost a cache line or two of a busy OSD's
	 * CPU: what user space can add up is recorded once. queue_wait,
	 * op_total and op_latency per op class only (the totals are their
	 * sums), and no scheduler class: every op that reaches log_op_stats
	 * is a client op (MOSDOp), so queue_wait.client is queue_wait */
	gen = cur_gen();
	record(slot, ST_THROTTLE_WAIT, thr - recv, gen);
	record(slot, ST_RECV, all - thr, gen);
	record(slot, ST_DISPATCH, enq - all, gen);
	record(slot, ST_QUEUE_WAIT__READ + cls, deq - enq, gen);
	record(slot, ST_EXECUTE, now - deq, gen);
	record(slot, ST_OP_TOTAL__READ + cls, now - enq, gen);
	record(slot, ST_OP_LATENCY__READ + cls, now - recv, gen);
	return 0;
bad:
	count(slot, CNT_MSG_UNSTAMPED);
	return 0;
}
