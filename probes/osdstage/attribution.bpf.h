/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/attribution.bpf.h - an op's queue wait split by its worker's state since the enqueue.
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

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

/* A thread's cumulative idle-sleep, held, run-queue, all-sleep and
 * lock-wait ns at a time. */
struct cums {
	__u64 isleep, held, runq, sleep, lock;
};

/* c = the cumulative times at `at`, from ring entry e, the latest change
 * at or before `at` */
static __always_inline void cums_from(struct tring *e, __u64 at,
				      struct cums *c)
{
	c->isleep = e->cum_isleep;
	c->held = e->cum_held;
	c->runq = e->cum_runq;
	c->sleep = e->cum_sleep;
	c->lock = e->cum_lock;
	if (e->state == TS_SLEEP)
		c->sleep += at - e->ts;
	if (e->state == TS_SLEEP && e->sleep == SK_HELD)
		c->held += at - e->ts;
	else if (e->state == TS_SLEEP && e->sleep == SK_IDLE)
		c->isleep += at - e->ts;
	else if (e->state == TS_SLEEP && e->sleep == SK_LOCK)
		c->lock += at - e->ts;
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

	c->isleep = c->held = c->runq = c->sleep = c->lock = 0;
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
		c->sleep = e->cum_sleep;
		c->lock = e->cum_lock;
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
/* An op's queue wait split: held by the scheduler, asleep with the op
 * queued (signal), on the run queue, asleep waiting for a lock (lck),
 * asleep otherwise inside other work (blocked: I/O, a completion), picking
 * the op up after the wake-up; busy (on CPU with other work) is the rest.
 * woke: the worker slept with the op queued. */
struct split {
	__u64 held, sig, rq, lck, blk, pick;
	int woke;
};

/* Each part at most what the parts before it left of qw. */
static __always_inline void split_clamp(struct split *s, __u64 qw)
{
	if (s->held > qw)
		s->held = qw;
	if (s->sig > qw - s->held)
		s->sig = qw - s->held;
	if (s->rq > qw - s->held - s->sig)
		s->rq = qw - s->held - s->sig;
	if (s->lck > qw - s->held - s->sig - s->rq)
		s->lck = qw - s->held - s->sig - s->rq;
	if (s->blk > qw - s->held - s->sig - s->rq - s->lck)
		s->blk = qw - s->held - s->sig - s->rq - s->lck;
}

/* A scheduler hold of worker t ended after the op's enqueue: up to then
 * the op was not due (a worker sleeps on a hold only when no queued op is;
 * when it ends a run of other ops, none was due then either, and an op
 * once due stays due), so all of it was held, the ops served in between
 * and the run-queue waits of the holds' ends included. The rest splits by
 * what the worker did since, from its totals then (no ring look-up: a
 * long hold truncates nothing). */
static __always_inline void split_after_hold(struct thread_state *t,
					     struct op_state *st, __u64 qw,
					     __u64 now, struct split *s)
{
	s->held = t->held_end - st->enq_ns;
	s->sig = t->cum_isleep - t->he_isleep;
	s->rq = t->cum_runq - t->he_runq;
	/* no hold since held_end: the sleep that was not idle was work, a
	 * lock wait or other */
	s->lck = t->cum_lock - t->he_lock;
	s->blk = t->cum_sleep - t->he_sleep > s->sig + s->lck ?
		 t->cum_sleep - t->he_sleep - s->sig - s->lck : 0;
	split_clamp(s, qw);
	if (t->oncpu_after_wake >= t->held_end && now > t->oncpu_after_wake)
		s->pick = now - t->oncpu_after_wake;
}

/* The worker's totals now (it is running: they are current) less those at
 * the op's enqueue (its state ring). Waiting for a lock is lock; sleeping
 * otherwise inside an earlier op (I/O) is blocked; a scheduler hold is
 * held; only other idle sleep is signal delay. */
static __always_inline void split_since_enqueue(struct thread_state *t,
						struct op_state *st,
						__u64 qw, __u64 now,
						__u32 slot, __u32 gen,
						struct ev_op_dequeue *e,
						struct split *s)
{
	struct cums c = {};
	__u64 w;

	if (!cum_at(t, st->enq_ns, &c)) {
		count_in(slot, CNT_ATTR_TRUNCATED, gen);
		if (e)
			e->truncated = 1;
	}
	s->held = t->cum_held > c.held ? t->cum_held - c.held : 0;
	s->sig = t->cum_isleep > c.isleep ? t->cum_isleep - c.isleep : 0;
	s->rq = t->cum_runq > c.runq ? t->cum_runq - c.runq : 0;
	s->lck = t->cum_lock > c.lock ? t->cum_lock - c.lock : 0;
	/* other work sleeps: all sleep less the idle, held and lock ones */
	w = t->cum_sleep > c.sleep ? t->cum_sleep - c.sleep : 0;
	s->blk = w > s->held + s->sig + s->lck ?
		 w - s->held - s->sig - s->lck : 0;
	split_clamp(s, qw);
	/* picking the op up: on CPU since its first switch-in after a
	 * wake-up that came after the enqueue, from an idle sleep with the
	 * op queued (signal) or a hold; or after the timeout of its idle wait
	 * (cv_timedout: the first op it takes since), which may have come
	 * before the enqueue: still runnable then, it found the op when it
	 * ran, and no other op was in between */
	if ((s->sig || s->held || t->cv_timedout) &&
	    t->oncpu_after_wake > st->enq_ns && now > t->oncpu_after_wake)
		s->pick = now - t->oncpu_after_wake;
}

/* The split into the attribution histograms and the op's event. */
static __always_inline void record_split(struct op_state *st,
					 struct thread_state *t,
					 struct split *s, __u64 busy,
					 __u32 slot, __u32 gen,
					 struct ev_op_dequeue *e)
{
	record(slot, ST_ATTR__HELD, s->held, gen);
	record(slot, ST_HELD__CLIENT + (st->qclass & 3), s->held, gen);
	record(slot, ST_ATTR__BUSY, busy, gen);
	record(slot, ST_ATTR__LOCK, s->lck, gen);
	record(slot, ST_ATTR__BLOCKED, s->blk, gen);
	record(slot, ST_ATTR__SIGNAL, s->sig, gen);
	record(slot, ST_ATTR__RUNQ, s->rq, gen);
	record(slot, ST_ATTR__PICKUP, s->pick, gen);
	if (e) {
		e->attributed = 1;
		e->held_ns = s->held;
		e->busy_ns = busy;
		e->lock_ns = s->lck;
		e->blocked_ns = s->blk;
		e->signal_ns = s->sig;
		e->runq_ns = s->rq;
		e->pickup_ns = s->pick;
		e->waker_tid = t->waker_tid;
	}
}

/* Who woke the worker for the op, into its shard's and the slot's
 * counters: the timed wait's expiry, the op's enqueuer, or another. */
static __always_inline void count_waker(struct thread_state *t,
					struct op_state *st,
					struct shard_stats *sh, int timedout,
					__u32 slot, __u32 gen,
					struct ev_op_dequeue *e)
{
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

/* The op's share of its shard's totals: the shard is named by the queue's
 * condition variable, learnt from the worker's wake-ups. */
static __always_inline void account_shard(struct thread_state *t,
					  struct op_state *st, __u64 qw,
					  struct split *s, __u64 busy,
					  __u32 slot, __u32 gen,
					  struct ev_op_dequeue *e)
{
	struct shard_stats *sh;
	__u64 key;
	int timedout;

	/* woken from its last idle wait on a condition variable by this
	 * op's enqueuer (or by the wait's timeout), or held in a timed wait
	 * on one: that cv is the queue's and names the worker's shard (also
	 * named when a notify ends an idle wait: futex_woken). The cv of its
	 * last wait of any kind may be one inside an op (BlueStore's aio
	 * wait). */
	if ((s->sig || s->held) && t->idle_cv &&
	    (s->held || t->cv_timedout ||
	     (t->idle_waker && t->idle_waker == st->enq_tid)))
		t->queue_cv = t->idle_cv;
	key = t->queue_cv;
	if (e)
		e->shard = key;
	sh = shard_of(slot, key, gen);
	if (!sh)
		return;
	sh->ops++;
	sh->qwait_ns += qw;
	sh->held_ns += s->held;
	sh->busy_ns += busy;
	sh->lock_ns += s->lck;
	sh->blocked_ns += s->blk;
	sh->signal_ns += s->sig;
	sh->runq_ns += s->rq;
	sh->pickup_ns += s->pick;
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
	if (s->woke)
		count_waker(t, st, sh, timedout, slot, gen, e);
}

/* An op dequeued by worker tid: its queue wait split by what the worker
 * did since the enqueue (struct split), recorded, and counted in its
 * shard. */
static __always_inline void attribute(struct op_state *st, __u64 now,
				      __u32 tid, __u32 gen, __u32 slot,
				      struct ev_op_dequeue *e)
{
	struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
	__u64 qw = st->qwait_ns, busy;
	struct split s = {};
	struct shard_stats *sh;

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
		 * saw: no program ran for its wake-up nor its switch-in (see
		 * sched.bpf.h unseen_switch_in). Taken as woken and running
		 * now: a running thread's CPU time is not brought up to date
		 * before its next tick or switch, so it tells nothing here */
		count_in(slot, CNT_WAKE_UNSEEN, gen);
		wake_up(t, bpf_get_current_task_btf(), slot, now, gen, NULL);
		transition(t, TS_RUN, SK_WORK, now);
		t->oncpu_after_wake = now;
	}
	/* a worker's first op: from now on its changes go to a long ring */
	wring_claim(t, tid);
	if (st->enq_ns >= t->since && t->state == TS_RUN) {
		/* running since before the enqueue: all of it was busy */
	} else if (t->held_end > st->enq_ns) {
		split_after_hold(t, st, qw, now, &s);
	} else {
		split_since_enqueue(t, st, qw, now, slot, gen, e, &s);
	}
	if (s.pick > qw - s.held - s.sig - s.rq - s.lck - s.blk)
		s.pick = qw - s.held - s.sig - s.rq - s.lck - s.blk;
	s.woke = s.sig > 0;
	busy = qw - s.held - s.sig - s.rq - s.lck - s.blk - s.pick;
	record_split(st, t, &s, busy, slot, gen, e);
	account_shard(t, st, qw, &s, busy, slot, gen, e);
}
