/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/threads.bpf.h - the state of each target thread, from the scheduler programs.
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

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
			else if (t->sleep == SK_LOCK)
				t->cum_lock += now - t->since;
		} else if (t->state == TS_RUNQ) {
			t->cum_runq += now - t->since;
		}
	}
	if (t->state == TS_SLEEP && t->sleep == SK_HELD) {
		t->held_end = now;
		t->he_isleep = t->cum_isleep;
		t->he_runq = t->cum_runq;
		t->he_sleep = t->cum_sleep;
		t->he_lock = t->cum_lock;
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
	e->cum_sleep = t->cum_sleep;
	e->cum_lock = t->cum_lock;
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
