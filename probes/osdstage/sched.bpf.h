/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/sched.bpf.h - futex waits, wake-ups and the scheduler programs (sched_switch, sched_waking).
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

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
	t->lock_wait = 0;
	if (!futex_call_of(prev, &c) || !futex_is_wait(c.op)) {
		t->prev_cv = 0;
		return;
	}
	uaddr = c.uaddr;
	op = c.op;
	tmo = c.timeout;
	t->futex_start = now;
	t->futex_deadline = 0;
	cmd = op & FUTEX_CMD_MASK;
	/* a wait for a lock (a mutex: FUTEX_WAIT, FUTEX_LOCK_PI), unless it
	 * is pthread_cond_wait re-taking its mutex right after the cv wait:
	 * that is still the wake-up */
	t->lock_wait = cmd != FUTEX_WAIT_BITSET && !t->prev_cv;
	t->prev_cv = cmd == FUTEX_WAIT_BITSET;
	/* the timeout: absolute, CLOCK_MONOTONIC unless FUTEX_CLOCK_REALTIME
	 * (always CLOCK_REALTIME for FUTEX_LOCK_PI: a realtime deadline
	 * stays unknown, 0); or relative (FUTEX_WAIT), from the call, whose
	 * time is not known: the kernel counts it from the call's entry,
	 * after the thread last got the CPU (`since`, it is running) and
	 * before now, and an entry-to-sleep of 100 us happens. The earliest
	 * (less FUTEX_REL_SLACK_NS) is taken: a wait woken after it timed
	 * out unless a thread of the process woke its futex word
	 * (futex_woken) */
	if (tmo && (cmd == FUTEX_WAIT || !(op & FUTEX_CLOCK_REALTIME)) &&
	    cmd != FUTEX_LOCK_PI &&
	    !bpf_probe_read_user(&ts, sizeof(ts), (void *)tmo) &&
	    ts.sec >= 0 && ts.nsec >= 0) {
		__u64 d = ts.sec * 1000000000ULL + ts.nsec;

		if (cmd == FUTEX_WAIT)
			d = (t->since && t->since <= now ? t->since : now) +
			    (d > FUTEX_REL_SLACK_NS ?
			     d - FUTEX_REL_SLACK_NS : 0);
		t->futex_deadline = d;
	}
	t->futex_uaddr = uaddr & ~7ULL;
	if (cmd == FUTEX_WAIT_BITSET)
		/* glibc condition variables wait with FUTEX_WAIT_BITSET on one of
		 * two adjacent words: the 8-byte-aligned address names the cv */
		t->cv_uaddr = uaddr & ~7ULL;
	else
		t->cv_uaddr |= 1;	/* mark: last wait was not on the cv */
}

/* Is `waker`, the task waking a thread of its own process, inside a
 * futex(2) call that wakes the waiters of the condition variable whose
 * words are at `cv` (futex_sleep's cv_uaddr, or the futex word of a
 * plain wait)? A notify is. A timer's
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
 * or after its deadline, and not by a notify of its condition variable
 * (of its futex word, a plain wait's): the kernel fires the timer up to
 * the thread's timer slack (50 us) late, and a notify in between wakes
 * the thread with success. Left counted as a timeout: a notify that
 * reaches the wait after its timer woke the thread but before the thread
 * ran (the kernel then reports success too; it is seen nowhere here).
 * `kind`: the sleep's (enum sleep_kind). */
static __always_inline void futex_woken(struct thread_state *t, __u32 tid,
					__u64 now, __u32 gen,
					struct task_struct *waker, __u32 kind)
{
	struct ev_futex_wait *e;
	__u64 d = now > t->futex_start ? now - t->futex_start : 0;
	int late = t->futex_deadline && now >= t->futex_deadline;
	/* not a mutex wait (cv_uaddr's low bit marks those) */
	int is_cv = !(t->cv_uaddr & 1);
	/* a worker's idle wait on a known cv: whether a notify ended it is
	 * looked at for that too (its queue, below), not only for the
	 * timeout; no other wake-up pays for the look at the waker's
	 * registers */
	int worker_idle_cv = is_cv && t->cv_uaddr && kind == SK_IDLE &&
			     t->role == worker_role;
	/* (a cv wait's futex_uaddr is its cv_uaddr) */
	int notified = (late || worker_idle_cv) && waker &&
		       futex_notifies(waker, t->futex_uaddr);
	int timedout = late && !notified;

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
		e->is_cv = is_cv;
		EV_SEND(e);
	}
	if (is_cv) {
		/* only an idle wait for the queue that expires can miss
		 * work: a scheduler hold ends at its time by design, and a
		 * timed wait inside an op (for a completion) is not for the
		 * queue */
		t->cv_timedout = timedout && kind == SK_IDLE;
		/* the queue's cv is among these: a wait inside an op
		 * (BlueStore's aio wait, on the worker's stack) must not be
		 * taken for it */
		if (kind == SK_IDLE || kind == SK_HELD) {
			t->idle_cv = t->cv_uaddr;
			t->idle_waker = t->waker_tid;
		}
		/* notified in its idle wait: that cv is its queue's (an
		 * enqueuer's notify), whoever's op it was; a saturated worker
		 * seldom idles, and waiting for the op's own enqueuer left its
		 * ops in no shard for seconds */
		if (worker_idle_cv && notified)
			t->queue_cv = t->cv_uaddr;
	}
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

/* Is thread `tid` (of a target; 0: none) a shard worker? */
static __always_inline int is_worker(__u32 tid)
{
	struct thread_state *o;

	if (!tid)
		return 0;
	o = bpf_map_lookup_elem(&threads, &tid);
	return o && o->role == worker_role;
}


/* Target thread t, asleep, was waiting for a lock held by other work, not
 * idle: its sleep and the state change that began it say so (no op can
 * have read the latter meanwhile: it is the thread's own, and it was
 * asleep). */
static __always_inline void sleep_was_lock(struct thread_state *t)
{
	struct wring *w = NULL;
	__u32 k;

	t->sleep = SK_LOCK;
	if (t->wring) {
		k = t->wring - 1;
		w = bpf_map_lookup_elem(&wrings, &k);
	}
	if (w && w->head)
		w->e[(w->head - 1) & (WRING - 1)].sleep = SK_LOCK;
	else
		t->ring[(t->ring_head - 1) & (TRING - 1)].sleep = SK_LOCK;
}

/* Target thread t (task p), asleep, is woken at `now` by thread
 * `waker_tid` of its process (0: another process's, an interrupt of one,
 * or unknown), the current task `waker` if that is known here (else
 * NULL); `by_worker`: the waker is a shard worker (-1: ask `waker`).
 * -> the kind of the sleep it ends */
static __always_inline __u32 wake_up_as(struct thread_state *t,
					struct task_struct *p, int slot,
					__u64 now, __u32 gen,
					struct task_struct *waker,
					__u32 waker_tid, int by_worker)
{
	struct ev_waking *e;
	__u64 off = now > t->since ? now - t->since : 0;
	__u32 kind;

	/* an idle sleep that was a lock wait (the mutex wait right after a
	 * cv wait: pthread_cond_wait's re-lock, or a worker that took an op
	 * and waits for its PG's lock) released by another shard worker:
	 * behind that worker's op, not idle: a lock wait */
	if (t->state == TS_SLEEP && t->sleep == SK_IDLE && t->futex_start &&
	    (t->cv_uaddr & 1) && (by_worker > 0 || (by_worker < 0 && waker &&
						    is_worker(waker->pid))))
		sleep_was_lock(t);
	kind = t->sleep;
	if (off)
		record(slot, ST_OFFCPU__ROLE + (t->role & (MAX_ROLES - 1)), off,
		       gen);
	transition(t, TS_RUNQ, SK_WORK, now);
	t->wake_ts = now;
	t->wakeups++;
	t->waker_tid = waker_tid;
	if (t->futex_start)
		futex_woken(t, p->pid, now, gen, waker, kind);
	e = EV_NEW(ev_waking, EV_WAKING, now, gen, slot);
	if (e) {
		e->offcpu_ns = off;	/* 0: not counted */
		e->tid = p->pid;
		e->waker_tid = waker_tid;
		e->role = t->role;
		e->sleep = kind;	/* SK_WORK when it was not asleep */
		EV_SEND(e);
	}
	return kind;
}

/* wake_up_as() by `waker`, the current task (a thread of p's process),
 * or NULL (another process's, an interrupt of one, or unknown) */
static __always_inline __u32 wake_up(struct thread_state *t,
				    struct task_struct *p, int slot, __u64 now,
				    __u32 gen, struct task_struct *waker)
{
	return wake_up_as(t, p, slot, now, gen, waker, waker ? waker->pid : 0,
			  -1);
}

/* What the sleep thread t (of target `slot`) goes into is, right after
 * futex_sleep() read it: a wait for a lock, inside an op or between ops (a
 * worker that took an op and waits for its PG's lock, held by a worker
 * running another op of that PG: behind other work, not idle); other work
 * inside an op (I/O, a wait for a completion); a scheduler hold (an idle
 * timed wait on a condition variable, on an mClock OSD: under mClock a
 * shard worker waits with a timeout only when the scheduler's dequeue
 * answered with a time instead of an op, on its queue's cv; its
 * empty-queue wait has none); else idle. */
static __always_inline __u32 sleep_kind(struct thread_state *t, int slot)
{
	if (t->futex_start && t->lock_wait)
		return SK_LOCK;
	if (t->in_op)		/* in_op cannot change while asleep */
		return SK_WORK;
	if (t->futex_start && t->futex_deadline && !(t->cv_uaddr & 1) &&
	    t->cv_uaddr && (ctl.mclock >> (slot & (MAX_TARGETS - 1))) & 1)
		return SK_HELD;
	return SK_IDLE;
}

/* ------------------------------------------------------------------------
 * Who ran instead: each CPU keeps the tasks it ran last (struct cpu_ring,
 * written at every switch, any task's), and a target's thread that comes
 * on a CPU after waiting for one is told behind whom it waited: the
 * slices of that CPU's ring its wait overlaps, per process (the behind
 * map). A wait longer than the ring's slices tells the rest as unknown;
 * a thread that moved to another CPU while it waited is told the CPU it
 * ran on. */

/* The CPU switches from `prev` at `now`: its slice goes in the ring. */
static __always_inline struct cpu_ring *ring_push(struct task_struct *prev,
						  __u64 now)
{
	__u32 zero = 0;
	struct cpu_ring *r = bpf_map_lookup_elem(&cpu_rings, &zero);
	struct cpu_slice *s;

	if (!r)
		return NULL;
	s = &r->s[r->head & (CPU_SLICES - 1)];
	s->start = r->since;
	/* (the tracepoint runs before the switch: prev is current) */
	s->cgid = bpf_get_current_cgroup_id();
	s->tgid = prev->tgid;
	s->pid = prev->pid;
	__builtin_memcpy(s->comm, prev->comm, sizeof(s->comm));
	r->head++;
	r->since = now;
	return r;
}

/* `ns` of a wait behind slice `s` (NULL: not known whose) under `key`. */
static __noinline void behind_add(__u64 key, struct cpu_slice *s, __u64 ns,
				  __u32 slot)
{
	struct behind_stats *b = bpf_map_lookup_elem(&behind, &key);

	if (!b) {
		struct behind_stats z = {};

		bpf_map_update_elem(&behind, &key, &z, BPF_NOEXIST);
		b = bpf_map_lookup_elem(&behind, &key);
		if (!b) {
			count(slot, CNT_BEHIND_MAP_FULL);
			return;
		}
	}
	b->ns += ns;
	b->waits++;
	if (s) {
		b->cgid = s->cgid;
		b->pid = s->pid;
		__builtin_memcpy(b->comm, s->comm, sizeof(b->comm));
	}
}

/* A thread of role `role` of target `slot` waited for this CPU from `w0`
 * to `now` (ring `r`, its newest slice ending now): behind whom. Turns
 * of one process in a row go in as one. */
static __always_inline void behind_wait(struct cpu_ring *r, __u32 slot,
					__u32 role, __u64 w0, __u64 now,
					__u32 gen)
{
	__u64 base = (__u64)(gen & 1) << HALF_SHIFT |
		     (__u64)(role & (MAX_ROLES - 1)) << BEHIND_ROLE_SHIFT |
		     (__u64)slot << 32;
	__u64 end = r->since, told = now, a, pend = 0;
	__u32 head = r->head, k, ptgid = 0;
	struct cpu_slice *s, *ps = NULL;

	for (k = 0; k < CPU_SLICES; k++) {
		s = &r->s[(head - 1 - k) & (CPU_SLICES - 1)];
		if (!s->start || end <= w0)
			break;
		a = s->start > w0 ? s->start : w0;
		if (ps && s->tgid != ptgid) {
			behind_add(base | ptgid, ps, pend, slot);
			pend = 0;
		}
		pend += end - a;
		ps = s;
		ptgid = s->tgid;
		told = a;
		if (s->start <= w0)
			break;
		end = s->start;
	}
	if (ps && pend)
		behind_add(base | ptgid, ps, pend, slot);
	if (told > w0)
		behind_add(base | BEHIND_UNKNOWN, NULL, told - w0, slot);
}

/* ------------------------------------------------------------------------
 * Stacks at waits (--stacks, stack_min_ns): a target thread that goes to
 * sleep in a wait worth one (a lock, or inside an op: I/O, a completion;
 * not an idle worker's wait for work) keeps its stacks (wait_stacks); if
 * the wait lasts stack_min_ns, its wake-up sends them with the waker's
 * (struct ev_wait_stack). */

/* `task`'s stacks into `out`: the current kernel stack (the program's:
 * `task` is current), and when `user`, task's user registers and the top
 * of its user stack. */
static __noinline void take_stack(void *ctx, struct task_struct *task,
				  struct stack_copy *out, __u32 user)
{
	struct return_instance *ri;
	struct pt_regs *regs;
	long n;
	__u32 i;

	if (!out)
		return;
	n = bpf_get_stack(ctx, out->kstack, sizeof(out->kstack), 0);
	out->kframes = n > 0 ? (__u64)n / 8 : 0;
	out->ubytes = out->urets = 0;
	out->ip = out->sp = out->bp = 0;
	if (!user || !task)
		return;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return;
	out->ip = BPF_CORE_READ(regs, ip);
	out->sp = BPF_CORE_READ(regs, sp);
	out->bp = BPF_CORE_READ(regs, bp);
	for (i = 0; i < USTACK_BYTES / USTACK_CHUNK; i++) {
		if (bpf_probe_read_user(&out->ustack[i * USTACK_CHUNK],
					USTACK_CHUNK,
					(void *)(out->sp + i * USTACK_CHUNK)))
			break;
		out->ubytes = (i + 1) * USTACK_CHUNK;
	}
	/* the functions with a uretprobe pending (ours: dequeue_op...)
	 * have the kernel's trampoline as their return address: the
	 * addresses they stand for, innermost first */
	ri = BPF_CORE_READ(task, utask, return_instances);
	for (i = 0; i < URET_DEPTH && ri; i++) {
		out->uret_slot[i] = BPF_CORE_READ(ri, stack);
		out->uret_addr[i] = BPF_CORE_READ(ri, orig_ret_vaddr);
		out->urets = i + 1;
		ri = BPF_CORE_READ(ri, next);
	}
}

/* Target thread `prev` (tid, of target `slot`) goes to sleep at `now`:
 * its stacks kept. */
static __noinline void stack_at_sleep(void *ctx, struct task_struct *prev,
				      __u64 now, __u32 slot)
{
	__u32 tid = prev->pid, zero = 0;
	struct wait_stack *w = bpf_map_lookup_elem(&wait_stacks, &tid);

	if (!w) {
		struct wait_stack *z = bpf_map_lookup_elem(&stack_zero, &zero);

		if (!z)
			return;
		bpf_map_update_elem(&wait_stacks, &tid, z, BPF_NOEXIST);
		w = bpf_map_lookup_elem(&wait_stacks, &tid);
		if (!w) {
			count(slot, CNT_STACK_MAP_FULL);
			return;
		}
	}
	w->since = now;
	take_stack(ctx, prev, &w->s, 1);
}

/* A wait that ended: what stack_out needs of it (a subprogram takes five
 * arguments at most) */
struct wait_note {
	__u64 since;		/* asleep since */
	__u64 now;
	__u32 tid;
	__u32 waker_tid;	/* 0: not a thread of the target */
	__u32 slot;
	__u32 gen;
	__u32 kind;
	__u32 role;
	__u32 unseen;		/* no program ran for the wake-up: no waker */
};

/* The wait `n` lasted stack_min_ns: its stacks sent, with the waker's
 * (current: `waker`, a task of the target, or NULL), or none when no
 * program saw the wake-up (n->unseen: current is not its waker). */
static __noinline void stack_out(void *ctx, struct wait_note *n,
				 struct task_struct *waker)
{
	struct wait_stack *w;
	struct ev_wait_stack *e;
	__u32 tid;

	if (!n)
		return;
	tid = n->tid;
	w = bpf_map_lookup_elem(&wait_stacks, &tid);
	if (!w || w->since != n->since)
		return;		/* not a wait worth stacks */
	e = EV_NEW(ev_wait_stack, EV_WAIT_STACK, n->now, n->gen, n->slot);
	if (!e)
		return;
	e->offcpu_ns = n->now - n->since;
	e->tid = tid;
	e->waker_tid = n->waker_tid;
	e->role = n->role;
	e->sleep = n->kind;
	e->unseen = !!n->unseen;
	/* each half is a struct stack_copy, 8-byte aligned (the record is) */
	bpf_probe_read_kernel((void *)&e->ip, sizeof(struct stack_copy),
			      &w->s);
	if (n->unseen) {
		e->waker_ip = e->waker_sp = e->waker_bp = 0;
		e->waker_kframes = e->waker_ubytes = e->waker_urets = 0;
	} else {
		take_stack(ctx, waker,
			   (struct stack_copy *)(void *)&e->waker_ip, !!waker);
	}
	w->since = 0;
	EV_SEND(e);
}

_Static_assert(__builtin_offsetof(struct ev_wait_stack, waker_ip) -
	       __builtin_offsetof(struct ev_wait_stack, ip) ==
	       sizeof(struct stack_copy) &&
	       __builtin_offsetof(struct ev_wait_stack, ustack) -
	       __builtin_offsetof(struct ev_wait_stack, ip) ==
	       __builtin_offsetof(struct stack_copy, ustack) &&
	       (__builtin_offsetof(struct ev_wait_stack, ip) & 7) == 0,
	       "ev_wait_stack's halves are not struct stack_copy");

/* --on-cpu HZ: a perf event per CPU runs this HZ times a second; a
 * target thread found on the CPU sends its stacks (its user stack from
 * its registers at the interrupt, or at its last kernel entry when the
 * clock found it in the kernel). */
SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ev_cpu_sample *e;
	struct thread_state *t;
	__u32 tid;
	__u64 now;
	int slot;

	slot = target_of(task->tgid);
	if (slot < 0)
		return 0;
	now = bpf_ktime_get_ns();
	e = EV_NEW(ev_cpu_sample, EV_CPU_SAMPLE, now, cur_gen(), slot);
	if (!e)
		return 0;
	tid = task->pid;
	t = bpf_map_lookup_elem(&threads, &tid);
	e->tid = tid;
	e->role = t ? t->role : 0;
	e->in_op = t ? t->in_op : 0;
	take_stack(ctx, task, (struct stack_copy *)(void *)&e->ip, 1);
	EV_SEND(e);
	return 0;
}

_Static_assert((__builtin_offsetof(struct ev_cpu_sample, ip) & 7) == 0 &&
	       __builtin_offsetof(struct ev_cpu_sample, ustack) -
	       __builtin_offsetof(struct ev_cpu_sample, ip) ==
	       __builtin_offsetof(struct stack_copy, ustack),
	       "ev_cpu_sample's stack is not a struct stack_copy");

/* Target thread t (`tid`) got a CPU at `at`: the run-queue delay of its
 * wake-up if this is its first time on a CPU since (and `delay_known`),
 * its switch-in event, its state. */
static __always_inline void switched_in(struct thread_state *t, __u32 tid,
					int slot, __u64 at, __u32 gen,
					int delay_known)
{
	struct ev_switch_in *ei;
	__u32 woken = 0;

	if (delay_known && t->state == TS_RUNQ && t->wake_ts &&
	    t->wake_ts >= t->since && at >= t->wake_ts) {
		record(slot, ST_WAKEUP_DELAY__ROLE +
		       (t->role & (MAX_ROLES - 1)), at - t->wake_ts, gen);
		woken = 1;
	}
	if (woken || !delay_known)
		t->oncpu_after_wake = at;
	ei = EV_NEW(ev_switch_in, EV_SWITCH_IN, at, gen, slot);
	if (ei) {
		ei->wakeup_ns = woken ? at - t->wake_ts : 0;
		ei->tid = tid;
		ei->role = t->role;
		ei->woken = woken;
		EV_SEND(ei);
	}
	transition(t, TS_RUN, SK_WORK, at);
}

/* ------------------------------------------------------------------------
 * Switch-ins and wake-ups no program saw. The kernel does not always run
 * the tracepoint programs for them: on the lab hosts, none runs for a
 * wake-up that comes while a thread of the host's own management agent
 * holds the CPU, nor for that thread's switch-out (ftrace's sched_switch
 * misses those switches too). A target thread that got the CPU that way
 * is next seen leaving it, asleep or runnable as far as these programs
 * know. Its times come from the scheduler's own accounting of the task:
 * it got the CPU as long ago as the CPU time it used since it was last
 * seen leaving one (se.sum_exec_runtime: one stretch on a CPU, as every
 * switch-out is seen), and was woken as long before that as it waited on
 * a run queue meanwhile (sched_info.run_delay; a kernel without
 * CONFIG_SCHED_INFO: woken when it got the CPU). */

/* Sleeping target thread t (`p`) found woken with no waking program run
 * for it while it slept, at `woke` (where it was next seen, or rebuilt).
 * A wake-up noted as it left its CPU (early_wake, kept through its
 * switch-out: see woken_early) is its wake-up, at the switch-out, by that
 * waker -> 1. Else it is made as a seen one's, by no one known (counted
 * as unseen if `count`), and the wait's stacks are sent if it was worth
 * them, with no waker's half -> 0. */
static __always_inline int woken_unseen(void *ctx, struct thread_state *t,
					struct task_struct *p, int slot,
					__u64 woke, __u32 gen, int count)
{
	__u64 since = t->since;
	__u32 kind, w;

	if (t->early_wake) {
		w = t->early_waker;
		t->early_wake = 0;
		wake_up_as(t, p, slot, since, gen, NULL, w, is_worker(w));
		return 1;
	}
	if (count)
		count_in(slot, CNT_WAKE_UNSEEN, gen);
	kind = wake_up(t, p, slot, woke, gen, NULL);
	if (stack_min_ns && woke > since && woke - since >= stack_min_ns) {
		struct wait_note n = {
			.since = since, .now = woke, .tid = p->pid,
			.slot = slot, .gen = gen, .kind = kind,
			.role = t->role, .unseen = 1,
		};

		stack_out(ctx, &n, NULL);
	}
	return 0;
}

/* `p`'s switch-out at `now` with t->state not TS_RUN: its switch-in (and
 * wake-up) rebuilt. */
static __always_inline void unseen_switch_in(void *ctx,
					     struct thread_state *t,
					     struct task_struct *p, int slot,
					     __u64 now, __u32 gen)
{
	__u64 ran, waited = 0, in, woke;

	count_in(slot, CNT_WAKE_UNSEEN, gen);
	if (!t->exec_seen)	/* not seen leaving a CPU yet: no base */
		return;
	ran = p->se.sum_exec_runtime - t->exec_seen;
	if (bpf_core_field_exists(p->sched_info))
		waited = p->sched_info.run_delay - t->delay_seen;
	in = now > ran ? now - ran : 0;
	if (in < t->since)
		in = t->since;
	woke = in > waited ? in - waited : 0;
	if (woke < t->since)
		woke = t->since;
	if (t->state == TS_SLEEP)
		woken_unseen(ctx, t, p, slot, woke, gen, 0);
	switched_in(t, p->pid, slot, in, gen, 1);
}

/* ------------------------------------------------------------------------
 * A wake-up that races the sleep's switch-out. The kernel fires
 * sched_waking as soon as the sleeper's state says it sleeps (it has
 * not left its CPU yet, or is leaving it); sched_switch fires later, with
 * the sleeping state the scheduler read before. A waking program that
 * finds the thread still on a CPU (TS_RUN) notes the wake-up
 * (early_wake). The switch-out that follows is of a thread woken already
 * if its state is no longer a sleeping one (TASK_WAKING, or running
 * again): its sleep is taken as ending where it begins, by that waker,
 * and it waits for a CPU from there. If its state still says it sleeps,
 * the wake-up may complete once the switch is done (a thread the
 * scheduler left on its run queue, a delayed dequeue) or may have been
 * of a thread that never left its CPU and is now going to sleep again:
 * the note is kept, the next waking program run for the thread forgets
 * it, and a thread switched in with none run for it takes the note as
 * its wake-up (woken_unseen). A switch-out into a run queue forgets it.
 * (With no note, a wake-up no program saw is found at the switch-in.) */
#define TASK_WAKING_STATE 0x200

static __always_inline int woken_early(struct task_struct *prev)
{
	__u32 s;

	/* (read directly: a tp_btf program's task pointer is trusted) */
	if (bpf_core_field_exists(prev->__state))
		s = prev->__state;
	else
		s = ((struct task_struct___pre514 *)(void *)prev)->state;
	return s == 0 || s == TASK_WAKING_STATE;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	__u64 now = 0;
	struct cpu_ring *ring = NULL;
	struct thread_state *t;
	struct ev_switch_out *eo;
	__u32 gen = 0, state, counted = 0, early, early_waker = 0;
	int slot;

	/* (a run on every switch of the host: only when asked) */
	if (*(volatile __u32 *)&ctl.behind) {
		now = bpf_ktime_get_ns();
		ring = ring_push(prev, now);
	}
	slot = target_of(prev->tgid);
	if (slot >= 0) {
		count(slot, CNT_HIT_SCHED);
		counted = 1;
		if (!now)
			now = bpf_ktime_get_ns();
		gen = cur_gen();
		t = thread_of(prev, now, slot);
		if (t) {
			if (t->state != TS_RUN)
				unseen_switch_in(ctx, t, prev, slot, now, gen);
			state = (prev_state & TASK_DEAD_STATE) ? TS_DEAD :
				prev_state ? TS_SLEEP : TS_RUNQ;
			early = 0;
			if (t->early_wake) {
				early = state == TS_SLEEP && woken_early(prev);
				early_waker = t->early_waker;
				if (state != TS_SLEEP || early)
					t->early_wake = 0;
			}
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
			/* a wait worth stacks: a lock, or inside an op (an
			 * idle wait may turn out a lock's: a mutex's) */
			if (stack_min_ns && state == TS_SLEEP && !early &&
			    (t->sleep != SK_IDLE ||
			     (t->futex_start && (t->cv_uaddr & 1))))
				stack_at_sleep(ctx, prev, now, slot);
			t->exec_seen = prev->se.sum_exec_runtime;
			if (bpf_core_field_exists(prev->sched_info))
				t->delay_seen = prev->sched_info.run_delay;
			eo = EV_NEW(ev_switch_out, EV_SWITCH_OUT, now, gen,
				    slot);
			if (eo) {
				eo->tid = prev->pid;
				eo->state = state;
				eo->role = t->role;
				eo->sleep = t->sleep;
				EV_SEND(eo);
			}
			/* woken already: its sleep ends as it begins, and it
			 * waits for a CPU from now */
			if (early)
				wake_up_as(t, prev, slot, now, gen, NULL,
					   early_waker,
					   is_worker(early_waker));
		}
	}
	slot = target_of(next->tgid);
	if (slot >= 0) {
		if (!counted) {
			count(slot, CNT_HIT_SCHED);
			if (!now)
				now = bpf_ktime_get_ns();
			gen = cur_gen();
		}
		t = thread_of(next, now, slot);
		if (!t)
			return 0;
		/* it waited for a CPU (woken, or preempted) since `since` */
		if (t->state == TS_RUNQ && ring && t->since && t->since < now)
			behind_wait(ring, slot, t->role, t->since, now, gen);
		if (t->state == TS_SLEEP && !task_state(next)) {
			/* switched in runnable after it went to sleep, with
			 * no waking program run for it since: woken as it
			 * left its CPU (a note kept: see woken_early), else
			 * by no one known, taken as now, with no run-queue
			 * delay recorded (see unseen_switch_in). (A thread
			 * preempted while it was going to sleep comes back
			 * still in its sleeping state: no wake-up yet.) */
			switched_in(t, next->pid, slot, now, gen,
				    woken_unseen(ctx, t, next, slot, now, gen,
						 1));
		} else {
			switched_in(t, next->pid, slot, now, gen, 1);
		}
	}
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	struct task_struct *cur;
	struct thread_state *t;
	__u64 now, since;
	__u32 gen, kind;
	int slot;

	slot = target_of(p->tgid);
	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_SCHED);
	now = bpf_ktime_get_ns();
	gen = cur_gen();
	t = thread_of(p, now, slot);
	if (!t)
		return 0;
	cur = bpf_get_current_task_btf();
	if (t->state != TS_SLEEP) {
		/* on a CPU: going to sleep, maybe, its switch-out's program
		 * not run yet (see woken_early) */
		if (t->state == TS_RUN) {
			t->early_wake = now;
			t->early_waker = cur->tgid == p->tgid ? cur->pid : 0;
		}
		return 0;
	}
	if (t->early_wake)	/* (a note kept through its switch-out) */
		t->early_wake = 0;
	since = t->since;
	/* a waker of the same process: it may be the op's enqueuer */
	kind = wake_up(t, p, slot, now, gen, cur->tgid == p->tgid ? cur : NULL);
	/* (a wake-up racing the sleep's switch-out sees a later start) */
	if (stack_min_ns && now > since && now - since >= stack_min_ns) {
		struct wait_note n = {
			.since = since, .now = now, .tid = p->pid,
			.waker_tid = cur->tgid == p->tgid ? cur->pid : 0,
			.slot = slot, .gen = gen, .kind = kind,
			.role = t->role,
		};

		stack_out(ctx, &n, cur->tgid == p->tgid ? cur : NULL);
	}
	return 0;
}
