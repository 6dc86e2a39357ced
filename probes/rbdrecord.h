/* SPDX-License-Identifier: GPL-2.0 */
/* rbdrecord.h - records of rbdrecord.bpf.c. Python learns every id,
 * op and layout here from the build (make: build/rbdrecord.abi.json,
 * read by lib/cephlat/rbd/records.py); tests/unit/test_capture_format.py
 * checks that decoder against the object's DWARF.
 */
#ifndef RBDRECORD_H
#define RBDRECORD_H

#define RBD_NAME_LEN	96
#define RBD_SNAP_LEN	64
#define RBD_POOL_LEN	64
#define RBD_OID_LEN	64

/* One record per librbd call event; names follow librbd's LTTng
 * tracepoints (src/tracing/librbd.tp). */
enum rbd_ev {
	RBD_OPEN_IMAGE = 0,	/* rbd_open / rbd_open_read_only returned */
	RBD_CLOSE_IMAGE_ENTER,
	RBD_CLOSE_IMAGE_EXIT,
	RBD_AIO_ENTER,		/* an aio call: op says which */
	RBD_AIO_EXIT,
	RBD_AIO_COMPLETE,	/* the request completed */
	RBD_OSD_OP_SEND,	/* Objecter::_send_op: an op sent to an OSD */
	RBD_OSD_OP_REPLY,	/* Objecter::handle_osd_op_reply entered */
	RBD_OSD_OP_DONE,	/* ... returned: the op's completion has run */
	RBD_AIO_RELEASE,	/* rbd_aio_release after the completion: the
				 * application took the result (rbd_complete_rec,
				 * rval 0) */
	RBD_FLUSH_ENTER,	/* rbd_flush (rbd_close_rec): a user flush,
				 * which turns write-around on when
				 * rbd_cache_writethrough_until_flush */
	RBD_FLUSH_EXIT,
	RBD_CACHE_WRITE,	/* the cache took an object write (rbd_cache_rec):
				 * WriteAroundObjectDispatch::dispatch_io or
				 * ObjectCacherObjectDispatch::write entered */
	RBD_CACHE_DONE,		/* WriteAroundObjectDispatch::
				 * handle_in_flight_io_complete entered: the
				 * object write is on the OSDs (every replica) */
};

enum rbd_op {
	RBD_OP_READ = 0, RBD_OP_READ2, RBD_OP_WRITE, RBD_OP_WRITE2, RBD_OP_DISCARD, RBD_OP_FLUSH,
	RBD_OP_WRITESAME, RBD_OP_WRITE_ZEROES, RBD_OP__COUNT,
};

/* slots of the "lost" map */
enum rbd_lost {
	RBD_LOST_RING = 0,	/* the ring buffer was full */
	RBD_LOST_COMPLETIONS,	/* the "completed" map was full */
	RBD_LOST_UNREAD,	/* an Objecter op or reply could not be read */
	RBD_LOST_CACHE_UNREAD,	/* a cache write whose fields could not be read */
	RBD_LOST_UNKNOWN_COMP,	/* a cache write of no recorded call (recorded
				 * with completion 0: not from rbd_aio_*, or
				 * its call began before the recording) */
	RBD_LOST_PCS,		/* the "pcs" map was full: a call's cache
				 * writes are recorded as of no call */
	RBD_LOST__COUNT,
};

/* the sub-op the data sub-op search skips: its "extent" is the allocation
 * hint (CEPH_OSD_OP_SETALLOCHINT, include/rados.h; checked against
 * lib/cephlat/ceph/objecter.py's, itself against the DWARF) */
enum rbd_osd_op {
	RBD_OSD_OP_SETALLOCHINT = 0x2223,
};

/* what the cache did with an object write (lib/cephlat/ceph/
 * librbd_cache.py says why each follows from the fields read) */
enum rbd_cache_state {
	RBD_CACHE_ACKED = 0,	/* write-around: sent and acknowledged at once */
	RBD_CACHE_QUEUED,	/* write-around: over max_dirty in flight: held,
				 * sent and acknowledged when room is made */
	RBD_CACHE_THROUGH,	/* write-around off (max_dirty 0): passed through,
				 * acknowledged after the OSDs */
	RBD_CACHE_FUA,		/* a FUA write: acknowledged after the OSDs */
	RBD_CACHE_WRITEBACK,	/* ObjectCacher: acknowledged from the cache */
	RBD_CACHE_OC_THROUGH,	/* ObjectCacher with max_dirty 0 (writethrough) */
	RBD_CACHE__COUNT,
};

#define RBD_PACKED __attribute__((packed))

struct rbd_hdr {
	__u32 ev;		/* enum rbd_ev */
	__u32 tid;
	__u64 ts;		/* CLOCK_MONOTONIC ns */
	__u64 pthread_id;	/* pthread_self() of the caller */
} RBD_PACKED;

/* an opened image */
struct rbd_image_info {
	char name[RBD_NAME_LEN];
	char snap[RBD_SNAP_LEN];
	char pool[RBD_POOL_LEN];
	__u8 read_only;
} RBD_PACKED;

struct rbd_open_rec {
	struct rbd_hdr h;
	__u64 enter_ts;
	__u64 imagectx;		/* the rbd_image_t */
	__s32 retval;
	struct rbd_image_info img;
} RBD_PACKED;

/* I/O and close records name the image by imagectx only: the reader
 * knows the name from the open record (or calls it image-<imagectx> when
 * the image was opened before the recording started) */
struct rbd_close_rec {
	struct rbd_hdr h;
	__u64 imagectx;
	__s32 retval;		/* exit only */
} RBD_PACKED;

struct rbd_aio_rec {
	struct rbd_hdr h;
	__u64 imagectx;
	__u64 off;
	__u64 len;
	__u64 data_len;		/* writesame: the pattern's length */
	__u64 buf;
	__u64 completion;	/* the rbd_completion_t */
	__s32 op_flags;
	__s32 retval;		/* exit only */
	__u32 op;		/* enum rbd_op */
} RBD_PACKED;

struct rbd_complete_rec {
	struct rbd_hdr h;
	__u64 completion;
	__s64 rval;
	__u8 rval_known;	/* from rbd_aio_get_return_value */
} RBD_PACKED;

/* One op of the client's Objecter to an OSD: sent (each attempt), its
 * reply received, the reply handled (the op's completion ran inside).
 * The OSD knows it as request id client.<client>.<inc>:<tid>. Reply and
 * done records carry client, tid, osd (the replying OSD) only. */
struct rbd_osdop_rec {
	struct rbd_hdr h;
	__u64 client;		/* the client's entity number (client.N) */
	__u64 tid;		/* the Objecter's op tid */
	__u64 pool;		/* the PG: pool.seed */
	__u32 seed;
	__s32 osd;		/* send: the target; reply: the sender */
	__s32 inc;		/* the client's incarnation */
	__u32 flags;		/* CEPH_OSD_FLAG_* of the op (read, write) */
	__s32 attempts;		/* sends of this op before this one */
	__u32 oid_len;		/* the object name's length (may exceed oid) */
	__u64 ext_off;		/* send: that sub-op's extent in the object */
	__u64 ext_len;		/*   (reads, writes: where the data is) */
	__u32 nops;		/* send: the op's sub-ops (OSDOp) */
	__u16 first_op;		/* send: its first data sub-op's CEPH_OSD_OP_*
				 * (of the first two; else the first's) */
	__u16 pad;
	char oid[RBD_OID_LEN];
} RBD_PACKED;

/* An object write the cache took (RBD_CACHE_WRITE) or saw finish on the
 * OSDs (RBD_CACHE_DONE). A write record names the call it is part of by
 * the call's rbd_completion_t (0: none recorded); a done record carries
 * cache, r, tid, object_no, off, len and in_flight only. */
struct rbd_cache_rec {
	struct rbd_hdr h;
	__u64 completion;	/* the call's rbd_completion_t, or 0 */
	__u64 aio_comp;		/* librbd's io::AioCompletion of the call */
	__u64 imagectx;		/* the image (the rbd_image_t) */
	__u64 cache;		/* the cache layer object (one per image) */
	__u64 object_no;
	__u64 off;		/* the extent in the object */
	__u64 len;
	__u64 tid;		/* write: the tid it is due (m_last_tid + 1);
				 * done: its tid */
	__u64 in_flight;	/* bytes in flight as it came (ObjectCacher:
				 * dirty + being written) */
	__u64 max_dirty;	/* the limit in effect (0: write-through) */
	__u64 init_max_dirty;	/* rbd_cache_max_dirty as the image opened */
	__s32 r;		/* done: the write's result */
	__u32 op_flags;
	__u8 state;		/* write: enum rbd_cache_state */
} RBD_PACKED;

#endif /* RBDRECORD_H */
