// SPDX-License-Identifier: GPL-2.0
/* rbdrecord.bpf.c - librbd client I/O of one process, for replay.
 *
 * Uprobes on librbd's (and librados') public C API in the client:
 *  - rados_ioctx_create: pool name of each io context;
 *  - rbd_open / rbd_open_read_only, rbd_close: the images;
 *  - rbd_aio_{read,read2,write,write2,discard,flush,writesame,
 *    write_zeroes}: each request, entry and return;
 *  - completion: the first rbd_aio_get_return_value(c) (applications
 *    call it in their completion callback: fio does), else
 *    rbd_aio_release(c) - exactly one per completion handle;
 *  - rbd_flush: a user flush (it turns write-around on);
 *  - librbd's cache, where librbd1-dbg names it (rbdrecord/cache.bpf.h).
 * One record per event to the "events" ring buffer (no wake-ups; user
 * space polls). The C ABI is stable: arguments by position.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "rbdrecord.h"

const volatile __u32 targ_tgid = 0;

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} events SEC(".maps");

/* io context -> pool name */
struct pool_name { char name[RBD_POOL_LEN]; };

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct pool_name);
} pools SEC(".maps");

/* arguments saved at a call's entry for its return, per thread */
struct call_args {
	__u64 a1, a2, a3, a4;
	__u64 ts;
	__u32 read_only;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct call_args);
} calls SEC(".maps");

/* completion handles whose completion was recorded (until released) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} completed SEC(".maps");

/* librbd's io::AioCompletion of each call in progress -> the call's
 * rbd_completion_t (its pc): filled at each aio call's entry, emptied at
 * rbd_aio_release, read by the cache's programs to name a write's call */
const volatile __u32 cache_on = 0;
const volatile __u32 rbdcomp_pc_off = 0;	/* RBD::AioCompletion::pc */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} pcs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RBD_LOST__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");	/* enum rbd_lost */

static __always_inline void count_lost(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&lost, &i);

	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline int ours(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == targ_tgid;
}

static __always_inline void *rec_new(__u64 size, __u32 ev, __u64 ts)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct rbd_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		count_lost(RBD_LOST_RING);
		return 0;
	}
	h->ev = ev;
	h->tid = (__u32)bpf_get_current_pid_tgid();
	h->ts = ts;
	/* glibc's pthread_self() is the thread pointer: x86-64 fs base */
	h->pthread_id = BPF_CORE_READ(task, thread.fsbase);
	return h;
}

#define SEND(r) bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP)

static __always_inline void save(struct call_args *a)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_update_elem(&calls, &tid, a, BPF_ANY);
}

static __always_inline int take(struct call_args *a)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_args *s = bpf_map_lookup_elem(&calls, &tid);

	if (!s)
		return 0;
	*a = *s;
	bpf_map_delete_elem(&calls, &tid);
	return 1;
}

/* ---------------------------------------------------------------- pools */

SEC("uprobe")
int BPF_KPROBE(ioctx_create, void *cluster, const char *pool, void **out)
{
	struct call_args a = { .a1 = (__u64)pool, .a2 = (__u64)out };

	if (ours())
		save(&a);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ioctx_create_ret, int ret)
{
	struct call_args a;
	struct pool_name pn = {};
	__u64 ioctx = 0;

	if (!ours() || !take(&a) || ret)
		return 0;
	if (bpf_probe_read_user(&ioctx, sizeof(ioctx), (void *)a.a2) || !ioctx)
		return 0;
	bpf_probe_read_user_str(pn.name, sizeof(pn.name), (void *)a.a1);
	bpf_map_update_elem(&pools, &ioctx, &pn, BPF_ANY);
	return 0;
}

/* --------------------------------------------------------------- images */

static __always_inline int open_entry(__u64 io, __u64 name, __u64 out,
				      __u64 snap, __u32 read_only)
{
	struct call_args a = { .a1 = io, .a2 = name, .a3 = out, .a4 = snap,
			       .read_only = read_only };

	if (!ours())
		return 0;
	a.ts = bpf_ktime_get_ns();
	save(&a);
	return 0;
}

/* int rbd_open(rados_ioctx_t io, const char *name, rbd_image_t *image,
 *              const char *snap_name) (same for rbd_open_read_only) */
SEC("uprobe")
int BPF_KPROBE(open_rw, void *io, const char *name, void **image,
	       const char *snap)
{
	return open_entry((__u64)io, (__u64)name, (__u64)image, (__u64)snap, 0);
}

SEC("uprobe")
int BPF_KPROBE(open_ro, void *io, const char *name, void **image,
	       const char *snap)
{
	return open_entry((__u64)io, (__u64)name, (__u64)image, (__u64)snap, 1);
}

SEC("uretprobe")
int BPF_KRETPROBE(open_ret, int ret)
{
	struct call_args a;
	struct rbd_open_rec *r;
	struct pool_name *pn;

	if (!ours() || !take(&a))
		return 0;
	r = rec_new(sizeof(*r), RBD_OPEN_IMAGE, bpf_ktime_get_ns());
	if (!r)
		return 0;
	r->enter_ts = a.ts;
	r->retval = ret;
	r->imagectx = 0;
	if (!ret)
		bpf_probe_read_user(&r->imagectx, sizeof(r->imagectx),
				    (void *)a.a3);
	r->img.read_only = a.read_only;
	r->img.name[0] = r->img.snap[0] = r->img.pool[0] = 0;
	bpf_probe_read_user_str(r->img.name, sizeof(r->img.name), (void *)a.a2);
	if (a.a4)
		bpf_probe_read_user_str(r->img.snap, sizeof(r->img.snap),
					(void *)a.a4);
	pn = bpf_map_lookup_elem(&pools, &a.a1);
	if (pn)
		bpf_probe_read_kernel_str(r->img.pool, sizeof(r->img.pool),
					  pn->name);
	SEND(r);
	return 0;
}

/* an image's close or user flush: its entry (the image) or its return */
static __always_inline int image_event(__u32 kind, __u64 image, int ret)
{
	struct rbd_close_rec *r;

	if (!ours())
		return 0;
	r = rec_new(sizeof(*r), kind, bpf_ktime_get_ns());
	if (!r)
		return 0;
	r->imagectx = image;
	r->retval = ret;
	SEND(r);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(close_enter, void *image)
{
	return image_event(RBD_CLOSE_IMAGE_ENTER, (__u64)image, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(close_ret, int ret)
{
	return image_event(RBD_CLOSE_IMAGE_EXIT, 0, ret);
}

/* int rbd_flush(rbd_image_t image): a synchronous user flush */
SEC("uprobe")
int BPF_KPROBE(flush_enter, void *image)
{
	return image_event(RBD_FLUSH_ENTER, (__u64)image, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(flush_ret, int ret)
{
	return image_event(RBD_FLUSH_EXIT, 0, ret);
}

/* ------------------------------------------------------------------ I/O */

/* the call's librbd completion (pc) -> c, for the cache's programs */
static __always_inline void pcs_add(__u64 c)
{
	__u64 pc = 0;

	if (!cache_on || !c ||
	    bpf_probe_read_user(&pc, sizeof(pc), (void *)(c + rbdcomp_pc_off)) ||
	    !pc)
		return;
	if (bpf_map_update_elem(&pcs, &pc, &c, BPF_ANY))
		count_lost(RBD_LOST_PCS);
}

static __always_inline void pcs_del(__u64 c)
{
	__u64 pc = 0;

	if (!cache_on || !c ||
	    bpf_probe_read_user(&pc, sizeof(pc), (void *)(c + rbdcomp_pc_off)))
		return;
	bpf_map_delete_elem(&pcs, &pc);
}

static __always_inline int aio_enter(__u32 op, __u64 image, __u64 off,
				     __u64 len, __u64 data_len, __u64 buf,
				     __u64 comp, __s32 flags)
{
	struct rbd_aio_rec *r;

	if (!ours())
		return 0;
	pcs_add(comp);
	r = rec_new(sizeof(*r), RBD_AIO_ENTER, bpf_ktime_get_ns());
	if (!r)
		return 0;
	r->imagectx = image;
	r->off = off;
	r->len = len;
	r->data_len = data_len;
	r->buf = buf;
	r->completion = comp;
	r->op_flags = flags;
	r->retval = 0;
	r->op = op;
	SEND(r);
	return 0;
}

/* Argument 6 and beyond: x86-64 passes six in registers (the sixth in
 * r9); PT_REGS_PARM6 exists only in newer libbpf headers. */
#define ARG6(ctx) ((__u64)BPF_CORE_READ((struct pt_regs *)(ctx), r9))

/* rbd_aio_read(image, off, len, buf, c) and rbd_aio_write(...) */
SEC("uprobe")
int BPF_KPROBE(aio_read, void *image, __u64 off, __u64 len, void *buf,
	       void *c)
{
	return aio_enter(RBD_OP_READ, (__u64)image, off, len, 0, (__u64)buf,
			 (__u64)c, 0);
}

SEC("uprobe")
int BPF_KPROBE(aio_write, void *image, __u64 off, __u64 len, void *buf,
	       void *c)
{
	return aio_enter(RBD_OP_WRITE, (__u64)image, off, len, 0, (__u64)buf,
			 (__u64)c, 0);
}

/* rbd_aio_read2 / rbd_aio_write2(image, off, len, buf, c, int op_flags) */
SEC("uprobe")
int BPF_KPROBE(aio_read2, void *image, __u64 off, __u64 len, void *buf,
	       void *c)
{
	return aio_enter(RBD_OP_READ2, (__u64)image, off, len, 0, (__u64)buf,
			 (__u64)c, (__s32)ARG6(ctx));
}

SEC("uprobe")
int BPF_KPROBE(aio_write2, void *image, __u64 off, __u64 len, void *buf,
	       void *c)
{
	return aio_enter(RBD_OP_WRITE2, (__u64)image, off, len, 0, (__u64)buf,
			 (__u64)c, (__s32)ARG6(ctx));
}

/* rbd_aio_discard(image, off, len, c) */
SEC("uprobe")
int BPF_KPROBE(aio_discard, void *image, __u64 off, __u64 len, void *c)
{
	return aio_enter(RBD_OP_DISCARD, (__u64)image, off, len, 0, 0, (__u64)c, 0);
}

/* rbd_aio_flush(image, c) */
SEC("uprobe")
int BPF_KPROBE(aio_flush, void *image, void *c)
{
	return aio_enter(RBD_OP_FLUSH, (__u64)image, 0, 0, 0, 0, (__u64)c, 0);
}

/* rbd_aio_writesame(image, off, len, buf, data_len, c, int op_flags):
 * the seventh argument is on the stack, not read */
SEC("uprobe")
int BPF_KPROBE(aio_writesame, void *image, __u64 off, __u64 len, void *buf,
	       __u64 data_len)
{
	return aio_enter(RBD_OP_WRITESAME, (__u64)image, off, len, data_len,
			 (__u64)buf, ARG6(ctx), 0);
}

/* rbd_aio_write_zeroes(image, off, len, c, int zero_flags, int op_flags) */
SEC("uprobe")
int BPF_KPROBE(aio_write_zeroes, void *image, __u64 off, __u64 len, void *c)
{
	return aio_enter(RBD_OP_WRITE_ZEROES, (__u64)image, off, len, 0, 0,
			 (__u64)c, (__s32)ARG6(ctx));
}

SEC("uretprobe")
int BPF_KRETPROBE(aio_ret, int ret)
{
	struct rbd_aio_rec *r;

	if (!ours())
		return 0;
	r = rec_new(sizeof(*r), RBD_AIO_EXIT, bpf_ktime_get_ns());
	if (!r)
		return 0;
	__builtin_memset((char *)r + sizeof(r->h), 0, sizeof(*r) - sizeof(r->h));
	r->retval = ret;
	SEND(r);
	return 0;
}

/* ----------------------------------------------------------- completion */

/* a completion (RBD_AIO_COMPLETE) or release (RBD_AIO_RELEASE) record */
static __always_inline void complete_rec(__u32 ev, __u64 c, __s64 rval,
					 __u8 known)
{
	struct rbd_complete_rec *r;

	r = rec_new(sizeof(*r), ev, bpf_ktime_get_ns());
	if (!r)
		return;
	r->completion = c;
	r->rval = rval;
	r->rval_known = known;
	SEND(r);
}

static __always_inline void complete(__u64 c, __s64 rval, __u8 known)
{
	__u8 one = 1;

	if (bpf_map_lookup_elem(&completed, &c))
		return;
	if (bpf_map_update_elem(&completed, &c, &one, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&completed, &c))
		count_lost(RBD_LOST_COMPLETIONS);
	complete_rec(RBD_AIO_COMPLETE, c, rval, known);
}

/* ssize_t rbd_aio_get_return_value(rbd_completion_t c) */
SEC("uprobe")
int BPF_KPROBE(get_rval, void *c)
{
	struct call_args a = { .a1 = (__u64)c };

	if (ours())
		save(&a);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(get_rval_ret, long ret)
{
	struct call_args a;

	if (ours() && take(&a))
		complete(a.a1, ret, 1);
	return 0;
}

/* void rbd_aio_release(rbd_completion_t c): the completion is over, and
 * the application has taken its result (fio releases a completion when
 * it reaps it): after an earlier completion record, a release record */
SEC("uprobe")
int BPF_KPROBE(aio_release, void *c)
{
	__u64 key = (__u64)c;

	if (!ours())
		return 0;
	/* completed before: the release; else the completion is this */
	complete_rec(bpf_map_lookup_elem(&completed, &key) ? RBD_AIO_RELEASE :
		     RBD_AIO_COMPLETE, key, 0, 0);
	bpf_map_delete_elem(&completed, &key);
	pcs_del(key);
	return 0;
}

/* the Objecter's OSD ops (each op the client sends, each reply) */
#include "rbdrecord/objecter.bpf.h"
/* librbd's cache (each object write it takes, each it sees finish) */
#include "rbdrecord/cache.bpf.h"
