"""librbd's cache, per release: the functions the client recorder probes
to know, write by write, what the cache did with it (rbdrecord's cache
records), and the struct offsets its programs read
(probes/rbdrecord/cache.bpf.h's wa_* / oc_* / aio_* globals).

With rbd_cache=true (the default) librbd puts a cache layer first in
each image's object dispatch. Its policy (rbd_cache_policy) picks the
class:

- writearound (the default): WriteAroundObjectDispatch. write, discard
  and write_same all go to dispatch_io(object_no, off, len, op_flags,
  dispatch_result, on_finish, on_dispatched). While m_max_dirty is 0
  (rbd_cache_writethrough_until_flush before the image's first user
  flush, or rbd_cache_max_dirty=0) the write passes through and is
  acknowledged after the OSDs; a FUA write (op flag 0x80) waits only for
  overlapping writes in flight. Otherwise, when the bytes in flight leave
  room (m_in_flight_bytes == 0 or + len <= m_max_dirty), the write is
  sent and acknowledged to the call at once, before any OSD has it; else
  it is queued, neither sent nor acknowledged, until an earlier write's
  handle_in_flight_io_complete(r, tid, object_no, off, len) makes room.
- writeback and writethrough: ObjectCacherObjectDispatch::write copies
  the data into the ObjectCacher and completes the write from there
  (writethrough: its max_dirty is 0, the ack waits for the OSDs); the
  cache's own ops later belong to no call.

These are local symbols of librbd.so.1: found in librbd1-dbg's symbol
table (by build id), with the same mangled names in 16.2.15, 18.2.7
and 20.2.4. Offsets: from each release's DWARF (gdb `ptype /o` of the
debug files of Debian's librbd1-dbg 16.2.15, 18.2.7 and 20.2.4; the same
in all three). Where the recorder finds them: lib/cephlat/rbd/ebpf.py
(CacheSite).
"""
_WA = "librbd::cache::WriteAroundObjectDispatch<librbd::ImageCtx>::"
_OC = "librbd::cache::ObjectCacherObjectDispatch<librbd::ImageCtx>::"

# role -> (qualified name, parameter pattern): all of these or none
FUNCS = {
    "dispatch": (_WA + "dispatch_io",
                 r"^unsigned long, unsigned long, unsigned long, int, "
                 r"librbd::io::DispatchResult\*, Context\*\*, Context\*$"),
    "done": (_WA + "handle_in_flight_io_complete",
             r"^int, unsigned long, unsigned long, unsigned long, "
             r"unsigned long$"),
}
# probed when present as well (writeback and writethrough images)
OPTIONAL = {
    "oc_write": (_OC + "write",
                 r"^unsigned long, unsigned long, ceph::buffer::\w+::list&&, "
                 r"std::shared_ptr<neorados::IOContext>, int, int, "
                 r"std::optional<unsigned long>, ZTracer::Trace const&, "
                 r"int\*, unsigned long\*, librbd::io::DispatchResult\*, "
                 r"Context\*\*, Context\*$"),
}

# the Debian package whose symbol table holds them
DBG_PACKAGE = "librbd1-dbg"

# x86-64 stack arguments, in bytes from the stack pointer at the entry
# (the return address at 0): dispatch_io's seventh argument on_finish
# (Context**) at 8; ObjectCacherObjectDispatch::write's on_finish at 64
# (write_flags 8, the std::optional<u64> 16-31, parent_trace 32,
# object_dispatch_flags 40, journal_tid 48, dispatch_result 56;
# 16.2.15's prologue reads them there)
STACK = {"wa_on_finish_sp": 8, "oc_on_finish_sp": 64}

# Ceph 16.2.15, 18.2.7, 20.2.4 (identical):
#   WriteAroundObjectDispatch<ImageCtx>: m_image_ctx 8, m_init_max_dirty 16,
#     m_max_dirty 24 (0: write-through now), m_last_tid 80,
#     m_in_flight_bytes 88
#   io::C_AioRequest::m_completion 8 (the call's io::AioCompletion*: the
#     on_finish dispatch_io is given is the C_AioRequest of the write)
#   RBD::AioCompletion::pc 0 (the rbd_completion_t's io::AioCompletion*)
#   ObjectCacherObjectDispatch<ImageCtx>: m_image_ctx 8, m_object_cacher 72
#   ObjectCacher: max_dirty 72 (0: write-through), stat_dirty 992,
#     stat_tx 1008; ceph::buffer::list::_len 24
_ALL = dict(STACK, wa_ictx_off=8, wa_init_max_dirty_off=16,
            wa_max_dirty_off=24, wa_last_tid_off=80, wa_in_flight_off=88,
            aioreq_comp_off=8, rbdcomp_pc_off=0, oc_ictx_off=8,
            oc_cacher_off=72, ocr_max_dirty_off=72, ocr_dirty_off=992,
            ocr_tx_off=1008, bl_len_off=24)
OFFSETS = {"16.2": _ALL, "18.2": _ALL, "20.2": _ALL}

# the DWARF expressions of each offset (gdb on librbd1-dbg's debug file)
DWARF = {
    "wa_ictx_off": "&((%s*)0)->m_image_ctx" % _WA[:-2],
    "wa_init_max_dirty_off": "&((%s*)0)->m_init_max_dirty" % _WA[:-2],
    "wa_max_dirty_off": "&((%s*)0)->m_max_dirty" % _WA[:-2],
    "wa_last_tid_off": "&((%s*)0)->m_last_tid" % _WA[:-2],
    "wa_in_flight_off": "&((%s*)0)->m_in_flight_bytes" % _WA[:-2],
    "aioreq_comp_off": "&((librbd::io::C_AioRequest*)0)->m_completion",
    "rbdcomp_pc_off": "&((librbd::RBD::AioCompletion*)0)->pc",
    "oc_ictx_off": "&((%s*)0)->m_image_ctx" % _OC[:-2],
    "oc_cacher_off": "&((%s*)0)->m_object_cacher" % _OC[:-2],
    "ocr_max_dirty_off": "&((ObjectCacher*)0)->max_dirty",
    "ocr_dirty_off": "&((ObjectCacher*)0)->stat_dirty",
    "ocr_tx_off": "&((ObjectCacher*)0)->stat_tx",
    "bl_len_off": "&((ceph::buffer::v15_2_0::list*)0)->_len",
}

# the op flag of a write that must be on the OSDs when acknowledged
# (LIBRADOS_OP_FLAG_FADVISE_FUA, include/rados/librados.h)
OP_FLAG_FUA = 0x80

# what the cache did with a write (enum rbd_cache_state's labels, the
# words the reports use for them)
STATES = {
    "acked": "sent and acknowledged at once, before any OSD had it",
    "queued": "held by the cache (over rbd_cache_max_dirty in flight), "
              "sent and acknowledged when an earlier write completed",
    "through": "written through (no write-around yet: before the image's "
               "first flush, or rbd_cache_max_dirty 0): acknowledged after "
               "the OSDs",
    "fua": "a FUA write: acknowledged after the OSDs",
    "writeback": "copied into the ObjectCacher and acknowledged from it",
    "oc_through": "the ObjectCacher in write-through: acknowledged after "
                  "the OSDs",
}
# the states whose call is acknowledged before its OSDs have the data
ACKED_EARLY = ("acked", "queued", "writeback")

# the policy each state tells (rbd_cache_policy)
POLICY = {"acked": "writearound", "queued": "writearound",
          "through": "writearound", "fua": "writearound",
          "writeback": "writeback", "oc_through": "writethrough"}

# librbd's cache settings recorded as "configured" (CEPH_ARGS, the conf
# file, the client's admin socket)
SETTINGS = ("rbd_cache", "rbd_cache_policy", "rbd_cache_max_dirty",
            "rbd_cache_writethrough_until_flush", "rbd_cache_size",
            "rbd_cache_target_dirty", "rbd_cache_max_dirty_age",
            "rbd_cache_block_writes_upfront")
