/* SPDX-License-Identifier: GPL-2.0 */
/* rbdrecord/cache.bpf.h - librbd's cache: each object write it takes and
 * what it does with it, each write it sees finish on the OSDs. Part of
 * rbdrecord.bpf.c, which includes it last: one compilation unit, not a
 * header of its own.
 *
 * Local functions of librbd.so.1 (librbd1-dbg's symbol table), entry
 * probes only; the offsets are Ceph's struct layouts, checked against
 * each release's DWARF (lib/cephlat/ceph/librbd_cache.py). cache_on (in
 * rbdrecord.bpf.c) is 0 when they are not found: nothing here runs.
 */
const volatile __u32 oc_on = 0;			/* ObjectCacherObjectDispatch::write too */
const volatile __u32 wa_on_finish_sp = 0;	/* dispatch_io's on_finish: sp + this */
const volatile __u32 oc_on_finish_sp = 0;	/* ObjectCacher write's on_finish */
const volatile __u32 wa_ictx_off = 0;		/* WriteAroundObjectDispatch:: */
const volatile __u32 wa_init_max_dirty_off = 0;	/*   m_image_ctx, m_init_max_dirty, */
const volatile __u32 wa_max_dirty_off = 0;	/*   m_max_dirty, m_last_tid, */
const volatile __u32 wa_last_tid_off = 0;	/*   m_in_flight_bytes */
const volatile __u32 wa_in_flight_off = 0;
const volatile __u32 aioreq_comp_off = 0;	/* io::C_AioRequest::m_completion */
const volatile __u32 oc_ictx_off = 0;		/* ObjectCacherObjectDispatch:: */
const volatile __u32 oc_cacher_off = 0;		/*   m_image_ctx, m_object_cacher */
const volatile __u32 ocr_max_dirty_off = 0;	/* ObjectCacher::max_dirty, */
const volatile __u32 ocr_dirty_off = 0;		/*   stat_dirty, stat_tx */
const volatile __u32 ocr_tx_off = 0;
const volatile __u32 bl_len_off = 0;		/* ceph::buffer::list::_len */

#define FUA_FLAG 0x80	/* LIBRADOS_OP_FLAG_FADVISE_FUA */

static __always_inline __u64 user_u64(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* the call of an object write: on_finish (a Context**, read from the
 * stack at `sp`) points at the write's io::C_AioRequest, whose
 * m_completion is the call's io::AioCompletion; its rbd_completion_t
 * from the "pcs" map, or 0 (counted) */
static __always_inline void call_of(struct rbd_cache_rec *r, __u64 sp)
{
	__u64 ctx = user_u64(user_u64(sp));
	__u64 *c;

	r->aio_comp = ctx ? user_u64(ctx + aioreq_comp_off) : 0;
	c = r->aio_comp ? bpf_map_lookup_elem(&pcs, &r->aio_comp) : 0;
	r->completion = c ? *c : 0;
	if (!c)
		count_lost(RBD_LOST_UNKNOWN_COMP);
}

/* what WriteAroundObjectDispatch::dispatch_io will do, from the fields it
 * tests (read before it takes m_lock: a write finishing on the other
 * asio thread may change them in between) */
static __always_inline __u8 wa_state(struct rbd_cache_rec *r)
{
	if (!r->max_dirty)
		return RBD_CACHE_THROUGH;
	if (r->op_flags & FUA_FLAG)
		return RBD_CACHE_FUA;
	if (!r->in_flight || r->in_flight + r->len <= r->max_dirty)
		return RBD_CACHE_ACKED;
	return RBD_CACHE_QUEUED;
}

/* bool dispatch_io(this, object_no, object_off, object_len, int op_flags,
 * DispatchResult*, Context** on_finish (stack), Context* on_dispatched) */
SEC("uprobe")
int BPF_KPROBE(cache_dispatch, void *cache, __u64 object_no, __u64 off,
	       __u64 len, __u32 op_flags)
{
	struct rbd_cache_rec *r;
	struct { __u64 init_max, max; } lim = {};
	__u64 c = (__u64)cache;

	if (!cache_on || !ours())
		return 0;
	r = rec_new(sizeof(*r), RBD_CACHE_WRITE, bpf_ktime_get_ns());
	if (!r)
		return 0;
	__builtin_memset((char *)r + sizeof(r->h), 0, sizeof(*r) - sizeof(r->h));
	if (bpf_probe_read_user(&r->imagectx, 8, (void *)(c + wa_ictx_off)) ||
	    bpf_probe_read_user(&lim, sizeof(lim),
				(void *)(c + wa_init_max_dirty_off)) ||
	    bpf_probe_read_user(&r->tid, 8, (void *)(c + wa_last_tid_off)) ||
	    bpf_probe_read_user(&r->in_flight, 8,
				(void *)(c + wa_in_flight_off))) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		count_lost(RBD_LOST_CACHE_UNREAD);
		return 0;
	}
	r->cache = c;
	r->object_no = object_no;
	r->off = off;
	r->len = len;
	r->op_flags = op_flags;
	r->init_max_dirty = lim.init_max;
	r->max_dirty = lim.max;
	r->tid += 1;
	r->state = wa_state(r);
	call_of(r, PT_REGS_SP(ctx) + wa_on_finish_sp);
	SEND(r);
	return 0;
}

/* void handle_in_flight_io_complete(this, int r, uint64_t tid,
 * uint64_t object_no, uint64_t object_off, uint64_t object_len) */
SEC("uprobe")
int BPF_KPROBE(cache_done, void *cache, int ret, __u64 tid, __u64 object_no,
	       __u64 off)
{
	struct rbd_cache_rec *r;
	__u64 c = (__u64)cache;

	if (!cache_on || !ours())
		return 0;
	r = rec_new(sizeof(*r), RBD_CACHE_DONE, bpf_ktime_get_ns());
	if (!r)
		return 0;
	__builtin_memset((char *)r + sizeof(r->h), 0, sizeof(*r) - sizeof(r->h));
	r->cache = c;
	r->r = ret;
	r->tid = tid;
	r->object_no = object_no;
	r->off = off;
	r->len = ARG6(ctx);
	r->in_flight = user_u64(c + wa_in_flight_off);
	SEND(r);
	return 0;
}

/* bool ObjectCacherObjectDispatch::write(this, object_no, object_off,
 * bufferlist&& data, ...) (writeback, writethrough): on_finish on the
 * stack; the ObjectCacher's max_dirty (0: write-through) and its dirty
 * and in-flight bytes */
SEC("uprobe")
int BPF_KPROBE(cache_oc_write, void *cache, __u64 object_no, __u64 off,
	       void *data)
{
	struct rbd_cache_rec *r;
	__u64 c = (__u64)cache, oc;
	__u32 len = 0;

	if (!cache_on || !oc_on || !ours())
		return 0;
	r = rec_new(sizeof(*r), RBD_CACHE_WRITE, bpf_ktime_get_ns());
	if (!r)
		return 0;
	__builtin_memset((char *)r + sizeof(r->h), 0, sizeof(*r) - sizeof(r->h));
	oc = user_u64(c + oc_cacher_off);
	if (!oc ||
	    bpf_probe_read_user(&r->imagectx, 8, (void *)(c + oc_ictx_off)) ||
	    bpf_probe_read_user(&r->max_dirty, 8,
				(void *)(oc + ocr_max_dirty_off))) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		count_lost(RBD_LOST_CACHE_UNREAD);
		return 0;
	}
	bpf_probe_read_user(&len, sizeof(len), data + bl_len_off);
	r->cache = c;
	r->object_no = object_no;
	r->off = off;
	r->len = len;
	r->op_flags = (__u32)ARG6(ctx);
	r->in_flight = user_u64(oc + ocr_dirty_off) + user_u64(oc + ocr_tx_off);
	r->state = r->max_dirty ? RBD_CACHE_WRITEBACK : RBD_CACHE_OC_THROUGH;
	call_of(r, PT_REGS_SP(ctx) + oc_on_finish_sp);
	SEND(r);
	return 0;
}
