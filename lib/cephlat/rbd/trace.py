"""librbd client I/O recorded with eBPF, written as a CTF trace whose
events and fields are librbd's own LTTng tracepoints (src/tracing/
librbd.tp), so that tools made for those traces (rbd-replay-prep,
babeltrace2) read it.

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

`completion` is the application's rbd_completion_t in both the request
and its aio_complete_enter (LTTng records librbd's internal completion
object in both): the pairing is the same. Completion time: the first
rbd_aio_get_return_value() on the handle (applications call it in their
completion callback: fio does), else its rbd_aio_release(). An image
opened before the recording started has no name: it is called
"image-<imagectx>".
"""
import collections
import ctypes
import os
import socket
import struct
import time

from ..engine import bpf

from ..capture import ctf
from ..engine import native
from ..engine.elfsym import ElfSymbols
from ..errors import UserError

# probes/rbdrecord.h
EV_OPEN, EV_CLOSE_ENTER, EV_CLOSE_EXIT, EV_AIO_ENTER, EV_AIO_EXIT, \
    EV_COMPLETE = range(6)
OPS = ["read", "read2", "write", "write2", "discard", "flush", "writesame",
       "write_zeroes"]
NAME_LEN, SNAP_LEN, POOL_LEN = 96, 64, 64
HDR = struct.Struct("<IIQQ")                      # ev, tid, ts, pthread_id
OPEN = struct.Struct("<QQi%ds%ds%dsB" % (NAME_LEN, SNAP_LEN, POOL_LEN))
CLOSE = struct.Struct("<Qi")
AIO = struct.Struct("<QQQQQQiiI")
COMPLETE = struct.Struct("<QqB")

CONTEXT = [("pthread_id", "x64"), ("vtid", "s32"), ("vpid", "s32")]
# read_only is a char in librbd's I/O tracepoints, a uint8_t when opening
_IMG = [("imagectx", "x64"), ("name", "string"), ("snap_name", "string"),
        ("read_only", "s8")]
_SEQ = [("buf", "x64"), ("buf_isnull", "u8"), ("buf_len", "u64")]
_RET = [("retval", "s64")]


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
    ]
    return [ctf.EventClass(n, f) for n, f in ev]


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

# (library, symbol, program, retprobe program)
PROBES = [
    ("librados", "rados_ioctx_create", "ioctx_create", "ioctx_create_ret"),
    ("librbd", "rbd_open", "open_rw", "open_ret"),
    ("librbd", "rbd_open_read_only", "open_ro", "open_ret"),
    ("librbd", "rbd_close", "close_enter", "close_ret"),
    ("librbd", "rbd_aio_read", "aio_read", "aio_ret"),
    ("librbd", "rbd_aio_read2", "aio_read2", "aio_ret"),
    ("librbd", "rbd_aio_write", "aio_write", "aio_ret"),
    ("librbd", "rbd_aio_write2", "aio_write2", "aio_ret"),
    ("librbd", "rbd_aio_discard", "aio_discard", "aio_ret"),
    ("librbd", "rbd_aio_flush", "aio_flush", "aio_ret"),
    ("librbd", "rbd_aio_writesame", "aio_writesame", "aio_ret"),
    ("librbd", "rbd_aio_write_zeroes", "aio_write_zeroes", "aio_ret"),
    ("librbd", "rbd_aio_get_return_value", "get_rval", "get_rval_ret"),
    ("librbd", "rbd_aio_release", "aio_release", None),
]


def find_libraries(pid=None):
    """{"librbd": path, "librados": path} mapped by `pid`, or (no pid) the
    ones this host's dynamic linker would load."""
    out = {}
    if pid is not None:
        try:
            with open("/proc/%d/maps" % pid) as f:
                for line in f:
                    path = line.split(None, 5)[-1].strip()
                    base = os.path.basename(path)
                    for lib in ("librbd", "librados"):
                        if base.startswith(lib + ".so") and lib not in out:
                            out[lib] = "/proc/%d/root%s" % (pid, path)
        except OSError as e:
            raise UserError("cannot read /proc/%d/maps: %s" % (pid,
                                                              e.strerror))
        return out
    import ctypes.util
    for lib, so in (("librbd", "rbd"), ("librados", "rados")):
        name = ctypes.util.find_library(so)
        for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
            if name and os.path.exists(os.path.join(d, name)):
                out[lib] = os.path.realpath(os.path.join(d, name))
                break
    return out


class Decoder:
    """Raw records -> (ts, class name, context, values) in trace order."""

    def __init__(self, pid):
        self.pid = pid
        self.images = {}        # imagectx -> (name, snap, read_only)
        self.pending = {}       # tid -> op of its aio call in progress

    def image(self, ictx):
        return self.images.get(ictx) or ("image-%x" % ictx, "", 0)

    def decode(self, data):
        out = []
        pos, n = 0, len(data)
        while pos + 8 <= n:
            (size,) = struct.unpack_from("<I", data, pos)
            rec = pos + 8
            pos = rec + (size + 7) // 8 * 8
            ev, tid, ts, pth = HDR.unpack_from(data, rec)
            ctx = (pth, tid, self.pid)
            body = rec + HDR.size
            if ev == EV_OPEN:
                out += self._open(ts, ctx, *OPEN.unpack_from(data, body))
            elif ev == EV_CLOSE_ENTER:
                ictx, _ = CLOSE.unpack_from(data, body)
                name = self.image(ictx)[0]
                out.append((ts, "librbd:close_image_enter", ctx,
                            (ictx, name, "")))
            elif ev == EV_CLOSE_EXIT:
                _, ret = CLOSE.unpack_from(data, body)
                out.append((ts, "librbd:close_image_exit", ctx, (ret,)))
            elif ev == EV_AIO_ENTER:
                out.append(self._aio(ts, ctx, tid,
                                     AIO.unpack_from(data, body)))
            elif ev == EV_AIO_EXIT:
                ret = AIO.unpack_from(data, body)[7]
                op = self.pending.pop(tid, "read")
                out.append((ts, EXIT[op], ctx, (ret,)))
            elif ev == EV_COMPLETE:
                comp, rval, _known = COMPLETE.unpack_from(data, body)
                out.append((ts, "librbd:aio_complete_enter", ctx,
                            (comp, rval)))
                out.append((ts, "librbd:aio_complete_exit", ctx, ()))
        return out

    def _open(self, ts, ctx, enter_ts, ictx, ret, name, snap, pool, ro):
        name = name.split(b"\0", 1)[0].decode("utf-8", "replace")
        snap = snap.split(b"\0", 1)[0].decode("utf-8", "replace")
        pool = pool.split(b"\0", 1)[0].decode("utf-8", "replace")
        if ret == 0:
            self.images[ictx] = (name, snap, ro)
        out = [(enter_ts, "librbd:open_image_enter", ctx,
                (ictx, name, "", snap, ro)),
               (ts, "librbd:open_image_exit", ctx, (ret,))]
        if ret == 0:
            out.append((ts, "rbdrecord:image_pool", ctx, (ictx, pool)))
        return out

    def _aio(self, ts, ctx, tid, v):
        ictx, off, length, data_len, buf, comp, flags, _, op = v
        op = OPS[op] if op < len(OPS) else "read"
        self.pending[tid] = op
        name, snap, ro = self.image(ictx)
        img = (ictx, name, snap, ro)
        if op in ("read", "read2"):
            vals = img + (off, length, comp) + ((flags,) if op == "read2"
                                                else ())
        elif op in ("write", "write2"):
            vals = img + (off, length, buf, int(buf == 0), length, comp) + \
                ((flags,) if op == "write2" else ())
        elif op == "discard":
            vals = img + (off, length, comp)
        elif op == "flush":
            vals = img + (comp,)
        elif op == "writesame":
            vals = img + (off, length, data_len, buf, int(buf == 0),
                          data_len, comp, flags)
        else:
            vals = img + (off, length, comp, flags)
        return (ts, ENTER[op], ctx, vals)


class EbpfRecorder:
    """Uprobes on the client's librbd/librados, drained into a trace."""

    POLL_S = 0.1

    def __init__(self, pid, out_dir, libs, bpf_dir, comm=None):
        self.pid, self.out_dir = pid, out_dir
        self.obj = bpf.BPFObject(os.path.join(bpf_dir, "rbdrecord.bpf.o"))
        self.obj.set_rodata(ctypes.c_uint32(pid))
        self.libs = libs
        self.bpf_dir = bpf_dir
        self.comm = comm
        self.reordered = 0
        self.counts = collections.Counter()
        self._last_ts = 0

    def start(self):
        self.obj.load()
        for lib, path in self.libs.items():
            with ElfSymbols(path) as elf:
                for plib, sym, prog, ret in PROBES:
                    found = elf.find(sym) if plib == lib else None
                    if not found:
                        continue    # e.g. rbd_aio_write_zeroes before 15.2
                    for p, is_ret in ((prog, False), (ret, True)):
                        if p:
                            self.obj.attach_uprobe(
                                p, path, found[0].offset, pid=self.pid,
                                retprobe=is_ret, what=sym)
        self.lib = lib = native.load(self.bpf_dir)
        self.h = lib.raw_open(self.obj.map("events").fd)
        if not self.h:
            raise UserError("cannot read the ring buffer")
        self.decoder = Decoder(self.pid)
        mono, wall = time.monotonic_ns(), time.time_ns()
        env = {"tool": "rbdrecord", "mode": "ebpf",
               "hostname": socket.gethostname(), "pid": self.pid,
               "procname": self.comm or "", "librbd": self.libs.get(
                   "librbd", "")}
        self.writer = ctf.Writer(self.out_dir, event_classes(), env=env,
                                 clock_offset_ns=wall - mono, force=True,
                                 event_context=CONTEXT, whole_packets=False)

    def poll(self):
        n = self.lib.raw_consume(self.h)
        if n < 0:
            raise UserError("reading the ring buffer failed: %s" %
                            os.strerror(-n))
        if not n:
            return 0
        data = ctypes.string_at(self.lib.raw_data(self.h), n)
        self.lib.raw_reset(self.h)
        evs = self.decoder.decode(data)
        evs.sort(key=lambda e: e[0])
        for ts, name, ctx, vals in evs:
            if ts < self._last_ts:       # raced the previous batch
                ts = self._last_ts
                self.reordered += 1
            self._last_ts = ts
            self.writer.write(name, ts, *vals, ctx=ctx)
            self.counts[name] += 1
        return len(evs)

    def lost(self):
        m = self.obj.map("lost")
        out = []
        for i in range(2):
            raw = m.lookup(struct.pack("<I", i), 8)
            out.append(struct.unpack("<Q", raw)[0] if raw else 0)
        return out

    def stop(self):
        """Detach, drain, close the trace. -> (counts, lost, reordered)"""
        self.obj.detach()
        self.poll()
        lost = self.lost()
        self.writer.close()
        self.lib.raw_close(self.h)
        self.obj.close()
        return self.counts, lost, self.reordered
