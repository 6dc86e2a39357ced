/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/io.bpf.h - syncfs(2) and the block requests the target issues.
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

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

/* Track request rq of target `slot` from `ts`: its own slot, a free one
 * (taken atomically: slot_take), or (all taken: counted) the first. */
static __always_inline void rq_track(__u64 rq, __u64 ts, __u32 slot)
{
	__u32 i = rq_index(rq), none = ~0U, free = none;
	struct rq_start *p;

	for (int w = 0; w < RQ_WAYS; w++) {
		__u32 j = (i + w) & (RQ_SLOTS - 1);

		p = bpf_map_lookup_elem(&rqs, &j);
		if (!p)
			continue;
		if (p->rq == rq || (!p->rq && slot_take(&p->rq, rq))) {
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
