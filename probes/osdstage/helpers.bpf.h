/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/helpers.bpf.h - helpers every program uses: counters, the op and request tables, histograms, capture records.
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

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

/* Take the free slot *k for `key`: a compare-and-swap, as the probes of
 * the traced OSDs run on every CPU at once and two of them may pick the
 * same free slot (a plain store lost one: an op, or a write's request id,
 * gone in the middle of its life). -> whether it is ours. */
static __always_inline int slot_take(__u64 *k, __u64 key)
{
	return __sync_val_compare_and_swap(k, 0, key) == 0;
}

/* A slot for a new op `key`, taken: its own (an address still tracked:
 * *replaced set) or a free one (its state is the caller's to write); NULL
 * when all its slots are taken. */
static __always_inline struct op_slot *op_claim(__u64 key, int *replaced)
{
	__u32 i = op_index(key), none = ~0U, free = none;
	struct op_slot *s;

	*replaced = 0;
	for (int w = 0; w < OPS_WAYS; w++) {
		__u32 j = (i + w) & ops_mask;

		s = bpf_map_lookup_elem(&ops, &j);
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
	s = bpf_map_lookup_elem(&ops, &free);
	if (s && slot_take(&s->key, key))
		return s;
	/* another CPU took it first: any other free one */
	for (int w = 0; w < OPS_WAYS; w++) {
		__u32 j = (i + w) & ops_mask;

		s = bpf_map_lookup_elem(&ops, &j);
		if (s && !s->key && slot_take(&s->key, key))
			return s;
	}
	return 0;
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

/* Index op `key` by its request id r: its first slot that is free
 * (taken atomically, as in op_claim) or holds r already. -1 when r's
 * slots are all taken. */
static __always_inline int req_index_op(const struct reqid *r, __u64 key)
{
	__u32 i = req_index(r);
	struct req_slot *s;

	for (int w = 0; w < OPS_WAYS; w++) {
		__u32 j = (i + w) & (REQ_SLOTS - 1);

		s = bpf_map_lookup_elem(&reqidx, &j);
		if (!s)
			continue;
		if (!s->key) {
			if (!slot_take(&s->key, key))
				continue;	/* another CPU's now */
			s->req = *r;
			return 0;
		}
		if (req_same(&s->req, r)) {
			s->key = key;
			return 0;
		}
	}
	return -1;
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

/* The wall clock now, in ns (Ceph's stamps are CLOCK_REALTIME): the
 * kernel's TAI clock where BPF has it (Linux 6.1) less TAI's offset from
 * the wall clock, so that a step of the wall clock (a time daemon's, a
 * virtual machine's after a pause) shows at once; else the monotonic
 * clock plus the offset user space measured at its last write of ctl
 * (each report), which a step leaves wrong until the next: stamps after
 * "now" would drop the ops of that while. */
static __always_inline __u64 wall_now(void)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id,
				       BPF_FUNC_ktime_get_tai_ns))
		return bpf_ktime_get_tai_ns() -
		       *(volatile __s64 *)&ctl.tai_off_ns;
	return bpf_ktime_get_ns() + *(volatile __s64 *)&ctl.real_off_ns;
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
