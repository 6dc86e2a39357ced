"""Traces of either mode read back: eBPF-mode traces (rbdrecord's own
CTF writer) as columns (columns.py, link.py), LTTng ones with
babeltrace2's Python bindings (bt2): images and requests, paired with
completions, and (eBPF mode) the OSD ops each request became."""
import collections
import os

from .columns import CALL_OPS, NONE, REQUESTS, ClientColumns
from .link import link, link_cache
from ..errors import UserError


class Request:
    """One librbd call: submitted, completed (librbd's callback: the first
    rbd_aio_get_return_value, else the release) and released by the
    application after that (rbd_aio_release: fio, when it reaps; None
    where the completion was the release, or LTTng traces)."""
    __slots__ = ("op", "image", "off", "len", "tid", "submit", "done",
                 "rval", "osd_ops", "released")

    def __init__(self, op, image, off, length, tid, submit):
        self.op, self.image, self.off, self.len = op, image, off, length
        self.tid, self.submit = tid, submit
        self.done = self.rval = self.released = None
        self.osd_ops = []       # the OSD ops it became (link.py)


class OsdOp:
    """One op the client's Objecter sent to an OSD (rbdrecord's eBPF mode):
    its request id, target, its data sub-op's kind and extent in the
    object, the times it was sent (the last attempt), its reply arrived
    and its completion had run, and the librbd request it is part of."""
    __slots__ = ("reqid", "osd", "pgid", "object", "flags", "attempts",
                 "send", "reply", "done", "kind", "offset", "length",
                 "request")

    def data_object(self):
        """(image data prefix, object number) of an image data object
        (rbd_data.<id>.<number, hex>), else None."""
        if not self.object.startswith("rbd_data."):
            return None
        prefix, _, no = self.object.rpartition(".")
        try:
            return prefix, int(no, 16)
        except ValueError:
            return None


class RbdTrace:
    """Images and requests of a librbd trace (eBPF or LTTng)."""

    def __init__(self, path, shift_ns=0):
        """shift_ns: how far the trace's host's wall clock was ahead (its
        times are moved back by it; osdstage -r --clock-offset). An
        eBPF-mode trace (written by capture/ctf.py) is read as columns
        (columns.py: .cols, its calls linked to their OSD ops), an LTTng
        one by babeltrace2 (about ten times slower here; no OSD ops).
        .requests and .osd_ops: the calls and ops as objects, made when
        first asked for."""
        check_ctf(path)
        self.path = path
        self.shift_ns = shift_ns
        self.env = {}           # the trace's metadata env
        self.images = {}        # imagectx -> {"name", "snap", "pool", "ro"}
        self.cols = None
        self.order = None
        self._requests = self._osd_ops = None
        ours = _own_trace(path)
        if ours is not None:
            self.env = dict(ours.env)
            self.cols = ClientColumns(ours, shift_ns)
            self.images = self.cols.images
            self.unmatched = self.cols.unmatched
            self.incomplete = self.cols.incomplete
            self.order = link(self.cols)
            link_cache(self.cols)
            empty = not len(self.cols.calls)
        else:
            self.unmatched = 0
            self._requests, self._osd_ops, self._done = [], {}, {}
            pending = {}
            self._read_bt2(path, pending)
            self.incomplete = len(pending)
            empty = not self._requests
        if empty and not self.images:
            raise UserError("%s holds no librbd events" % path)

    @property
    def requests(self):
        if self._requests is None:
            self._objects()
        return self._requests

    @property
    def osd_ops(self):
        if self._osd_ops is None:
            self._objects()
        return self._osd_ops

    def _objects(self):
        """The columns as Request and OsdOp objects (for the summary, the
        fio job, the pictures: not a merged read's table)."""
        cc = self.cols
        c, o = cc.calls, cc.ops
        reqs = []
        for op, img, off, ln, tid, sub, done, rval, rel in zip(
                c.op.tolist(), c.image.tolist(), c.off.tolist(),
                c.len.tolist(), c.tid.tolist(), c.submit.tolist(),
                c.done.tolist(), c.rval.tolist(), c.released.tolist()):
            r = Request(CALL_OPS[op], img, off, ln, tid, sub)
            r.done, r.rval = done, rval
            r.released = None if rel == NONE else rel
            reqs.append(r)
        ops = {}
        for i, (osd, pool, seed, obj, flags, att, send, reply, done, kind,
                off, ln, req) in enumerate(zip(
                    o.osd.tolist(), o.pool.tolist(), o.seed.tolist(),
                    o.obj.tolist(), o.flags.tolist(), o.attempts.tolist(),
                    o.send.tolist(), o.reply.tolist(), o.done.tolist(),
                    o.subop.tolist(), o.offset.tolist(), o.length.tolist(),
                    o.request.tolist())):
            x = OsdOp()
            x.reqid, x.osd, x.pgid = cc.reqid(i), osd, "%d.%x" % (pool, seed)
            x.object, x.flags, x.attempts = cc.objects.names[obj], flags, att
            x.send = send
            x.reply = None if reply == NONE else reply
            x.done = None if done == NONE else done
            x.kind, x.offset, x.length = cc.kinds.names[kind], off, ln
            x.request = None if req < 0 else reqs[req]
            if req >= 0:
                reqs[req].osd_ops.append(x)
            ops[x.reqid] = x
        self._requests, self._osd_ops = reqs, ops

    def _read_bt2(self, path, pending):
        bt2 = _bt2()
        try:
            it = bt2.TraceCollectionMessageIterator(path)
            for msg in it:
                if type(msg) is bt2._StreamBeginningMessageConst and \
                        not self.env:
                    self.env = {str(k): v for k, v in
                                msg.stream.trace.environment.items()}
                if type(msg) is not bt2._EventMessageConst:
                    continue
                ev = msg.event
                self._event(ev.name, msg.default_clock_snapshot.
                            ns_from_origin - self.shift_ns,
                            ev.payload_field, ev.common_context_field,
                            pending)
        except Exception as e:          # bt2 raises its own error types
            if isinstance(e, UserError):
                raise
            first = str(e).strip().splitlines()
            raise UserError("cannot read %s as a CTF trace: %s" % (
                path, first[0] if first else type(e).__name__))

    def clock(self):
        """{"id", "synced", "error_ns"} of the trace's clock, from its
        metadata (None where it does not say: LTTng traces, older ones)."""
        if "clock_id" not in self.env:
            return None
        synced = bool(int(self.env.get("clock_synced", 0)))
        return {"id": str(self.env["clock_id"]), "synced": synced,
                "error_ns": int(self.env.get("clock_read_ns", 0)) + int(
                    self.env.get("clock_esterror_ns", 0)) if synced
                else None}

    def _event(self, name, ts, f, ctx, pending):
        """One event of an LTTng trace: its name, wall ns, payload and
        context (babeltrace2's fields)."""
        if name == "librbd:open_image_enter":
            self.images.setdefault(int(f["imagectx"]), {}).update(
                name=str(f["name"]), snap=str(f["snap_name"]),
                ro=int(f["read_only"]))
        elif name == "rbdrecord:image_pool":
            self.images.setdefault(int(f["imagectx"]), {})["pool"] = \
                str(f["pool"])
        elif name in REQUESTS:
            op, fo, fl = REQUESTS[name]
            ictx = int(f["imagectx"])
            img = self.images.setdefault(ictx, {})
            img.setdefault("name", str(f["name"]))
            tid = int(ctx["pthread_id"]) if ctx is not None and \
                "pthread_id" in ctx else 0
            r = Request(op, ictx, int(f[fo]) if fo else 0,
                        int(f[fl]) if fl else 0, tid, ts)
            pending[int(f["completion"])] = r
        elif name == "librbd:aio_complete_enter":
            r = pending.pop(int(f["completion"]), None)
            if r is None:
                self.unmatched += 1
                return
            r.done, r.rval = ts, int(f["rval"])
            self._requests.append(r)
            self._done[int(f["completion"])] = r
        elif name == "rbdrecord:aio_release":
            r = self._done.pop(int(f["completion"]), None)
            if r is not None:
                r.released = ts

    def by_image(self):
        """{imagectx: its calls in submit order}"""
        out = collections.OrderedDict()
        for r in sorted(self.requests, key=lambda r: r.submit):
            out.setdefault(r.image, []).append(r)
        return out

    def image_name(self, ictx):
        return self.images.get(ictx, {}).get("name") or "image-%x" % ictx


def _own_trace(path):
    """An eBPF-mode rbdrecord trace, opened by capture/ctf.py's reader,
    or None (an LTTng trace: babeltrace2 reads it)."""
    from ..capture import ctf
    try:
        tr = ctf.Trace(path)
    except UserError:
        return None
    return tr if tr.env.get("tool") == "rbdrecord" else None


def _bt2():
    """babeltrace2's Python bindings (Debian's python3-bt2)."""
    try:
        import bt2
    except ImportError:
        raise UserError("python3-bt2 is not installed (apt-get install "
                        "python3-bt2)")
    return bt2


METADATA_MAGIC = b"\x57\x1d\xd1\x75"    # packetized metadata (LTTng)


def check_ctf(path):
    """Fail with one line unless `path` holds CTF traces: babeltrace2's
    Python bindings abort the process on some foreign files."""
    if not os.path.isdir(path):
        raise UserError("cannot read %s: not a trace directory" % path)
    found = False
    for root, _, files in os.walk(path):
        if "metadata" not in files:
            continue
        try:
            with open(os.path.join(root, "metadata"), "rb") as f:
                head = f.read(16)
        except OSError as e:
            raise UserError("cannot read %s: %s" % (path, e.strerror))
        if not (head.startswith(b"/* CTF 1.8") or
                head.startswith(METADATA_MAGIC)):
            raise UserError("cannot read %s: %s is not CTF metadata" % (
                path, os.path.join(root, "metadata")))
        found = True
    if not found:
        raise UserError("cannot read %s: no CTF trace in it" % path)


def trace_counts(path):
    """Events per name, as babeltrace2 sees them."""
    bt2 = _bt2()
    counts = collections.Counter()
    for msg in bt2.TraceCollectionMessageIterator(path):
        if type(msg) is bt2._EventMessageConst:
            counts[msg.event.name] += 1
    return counts
