"""The events of an rbdrecord trace: librbd's own LTTng tracepoints
(src/tracing/librbd.tp), names and fields, so that tools made for those
traces (rbd-replay-prep, babeltrace2) read it.

Mapping (probe -> events; every event carries the LTTng contexts
pthread_id, vtid and vpid):

  rbd_open, rbd_open_read_only   librbd:open_image_enter / _exit
                                 (+ rbdrecord:image_pool: the pool)
  rbd_close                      librbd:close_image_enter / _exit
  rbd_aio_read / read2           librbd:aio_read_enter / aio_read2_enter,
                                 librbd:aio_read_exit
  rbd_aio_write / write2         librbd:aio_write_enter / aio_write2_enter,
                                 librbd:aio_write_exit
  rbd_aio_discard                librbd:aio_discard_enter / _exit
  rbd_aio_flush                  librbd:aio_flush_enter / _exit
  rbd_aio_writesame              librbd:aio_writesame_enter / _exit
  rbd_aio_write_zeroes           rbdrecord:aio_write_zeroes_enter / _exit
                                 (librbd has no such tracepoint)
  completion                     librbd:aio_complete_enter / _exit
  rbd_aio_release, after it      rbdrecord:aio_release (the application
                                 took the result: fio, when it reaps)
  rbd_flush                      librbd:flush_enter / _exit (a user flush:
                                 it turns write-around on)
  librbd's cache (librbd1-dbg):  rbdrecord:cache_write (what the cache
    WriteAroundObjectDispatch::  did with an object write: `state`, and
    dispatch_io, ObjectCacher-   its call's `completion`, 0 when it is
    ObjectDispatch::write        of no recorded call)
    WriteAroundObjectDispatch::  rbdrecord:cache_write_done (the write is
    handle_in_flight_io_complete on every replica, and librbd knows it)
  Objecter::_send_op             rbdrecord:osd_op_send (each attempt; its
                                 first sub-op's kind and extent)
  Objecter::handle_osd_op_reply  rbdrecord:osd_op_reply (entry),
                                 rbdrecord:osd_op_done (return: the op's
                                 completion has run)

`completion` is the application's rbd_completion_t in both the request
and its aio_complete_enter (LTTng records librbd's internal completion
object in both): the pairing is the same. Completion time: the first
rbd_aio_get_return_value() on the handle (applications call it in their
completion callback: fio does), else its rbd_aio_release(). An image
opened before the recording started has no name: it is called
"image-<imagectx>".

The OSD-op events (librbd has no tracepoints for them) carry the request
id the OSDs know the op by (`reqid`, client.<id>.<inc>:<tid>: OpTracker's
and osdstage's), so a client's trace and the OSDs' captures join on it.
"""
from ..capture import ctf

CONTEXT = [("pthread_id", "x64"), ("vtid", "s32"), ("vpid", "s32")]
# read_only is a char in librbd's I/O tracepoints, a uint8_t when opening
_IMG = [("imagectx", "x64"), ("name", "string"), ("snap_name", "string"),
        ("read_only", "s8")]
_SEQ = [("buf", "x64"), ("buf_isnull", "u8"), ("buf_len", "u64")]
_RET = [("retval", "s64")]
# an OSD op: its request id, and the OSD it went to (send) or came from
_OSDOP = [("reqid", "string"), ("client", "u64"), ("inc", "s32"),
          ("tid", "u64"), ("osd", "s32")]


def event_classes():
    """The trace's events: librbd's tracepoint names and fields."""
    ev = [
        ("librbd:open_image_enter", [("imagectx", "x64"), ("name", "string"),
                                     ("id", "string"),
                                     ("snap_name", "string"),
                                     ("read_only", "u8")]),
        ("librbd:open_image_exit", _RET),
        ("rbdrecord:image_pool", [("imagectx", "x64"), ("pool", "string")]),
        ("librbd:close_image_enter", [("imagectx", "x64"), ("name", "string"),
                                      ("id", "string")]),
        ("librbd:close_image_exit", _RET),
        ("librbd:aio_read_enter", _IMG + [("offset", "u64"),
                                          ("length", "u64"),
                                          ("completion", "x64")]),
        ("librbd:aio_read2_enter", _IMG + [("offset", "u64"),
                                           ("length", "u64"),
                                           ("completion", "x64"),
                                           ("op_flags", "s32")]),
        ("librbd:aio_read_exit", _RET),
        ("librbd:aio_write_enter", _IMG + [("off", "u64"), ("len", "u64")] +
         _SEQ + [("completion", "x64")]),
        ("librbd:aio_write2_enter", _IMG + [("off", "u64"), ("len", "u64")] +
         _SEQ + [("completion", "x64"), ("op_flags", "s32")]),
        ("librbd:aio_write_exit", _RET),
        ("librbd:aio_discard_enter", _IMG + [("off", "u64"), ("len", "u64"),
                                             ("completion", "x64")]),
        ("librbd:aio_discard_exit", _RET),
        ("librbd:aio_flush_enter", _IMG + [("completion", "x64")]),
        ("librbd:aio_flush_exit", _RET),
        ("librbd:aio_writesame_enter", _IMG + [("off", "u64"),
                                               ("len", "u64"),
                                               ("data_len", "u64")] + _SEQ +
         [("completion", "x64"), ("op_flags", "s32")]),
        ("librbd:aio_writesame_exit", _RET),
        ("rbdrecord:aio_write_zeroes_enter", _IMG + [
            ("off", "u64"), ("len", "u64"), ("completion", "x64"),
            ("op_flags", "s32")]),
        ("rbdrecord:aio_write_zeroes_exit", _RET),
        ("librbd:aio_complete_enter", [("completion", "x64"),
                                       ("rval", "s64")]),
        ("librbd:aio_complete_exit", []),
        ("rbdrecord:aio_release", [("completion", "x64")]),
        ("rbdrecord:osd_op_send", _OSDOP + [
            ("pool", "u64"), ("seed", "u32"), ("pgid", "string"),
            ("object", "string"), ("object_len", "u32"), ("flags", "u32"),
            ("attempts", "s32"), ("ops", "u32"), ("first_op", "u16"),
            ("first_op_name", "string"), ("offset", "u64"),
            ("length", "u64")]),
        ("rbdrecord:osd_op_reply", _OSDOP),
        ("rbdrecord:osd_op_done", _OSDOP),
        ("librbd:flush_enter", _IMG),
        ("librbd:flush_exit", _RET),
        ("rbdrecord:cache_write", [
            ("completion", "x64"), ("aio_comp", "x64"), ("imagectx", "x64"),
            ("cache", "x64"), ("object_no", "u64"), ("offset", "u64"),
            ("length", "u64"), ("tid", "u64"), ("in_flight", "u64"),
            ("max_dirty", "u64"), ("init_max_dirty", "u64"),
            ("op_flags", "u32"), ("state", "u8"), ("state_name", "string")]),
        ("rbdrecord:cache_write_done", [
            ("cache", "x64"), ("r", "s32"), ("tid", "u64"),
            ("object_no", "u64"), ("offset", "u64"), ("length", "u64"),
            ("in_flight", "u64")]),
    ]
    return [ctf.EventClass(n, f) for n, f in ev]


TOOL_ENV = {"tool": "rbdrecord", "mode": "ebpf"}     # outdir knows it by this


def open_trace(path, env, clock_offset_ns):
    """A new eBPF-mode trace at `path` (outdir.prepare made way for it):
    these events, their context, and `env` after TOOL_ENV in the
    metadata."""
    return ctf.Writer(path, event_classes(), env=dict(TOOL_ENV, **env),
                      clock_offset_ns=clock_offset_ns, force=True,
                      event_context=CONTEXT, whole_packets=False)


# the events of each op of enum rbd_op (by its label: RBD_OP_READ2 ->
# "read2"; tests/unit/test_capture_format.py checks both name the same ops)
ENTER = {"read": "librbd:aio_read_enter", "read2": "librbd:aio_read2_enter",
         "write": "librbd:aio_write_enter",
         "write2": "librbd:aio_write2_enter",
         "discard": "librbd:aio_discard_enter",
         "flush": "librbd:aio_flush_enter",
         "writesame": "librbd:aio_writesame_enter",
         "write_zeroes": "rbdrecord:aio_write_zeroes_enter"}
EXIT = {"read": "librbd:aio_read_exit", "read2": "librbd:aio_read_exit",
        "write": "librbd:aio_write_exit", "write2": "librbd:aio_write_exit",
        "discard": "librbd:aio_discard_exit",
        "flush": "librbd:aio_flush_exit",
        "writesame": "librbd:aio_writesame_exit",
        "write_zeroes": "rbdrecord:aio_write_zeroes_exit"}
