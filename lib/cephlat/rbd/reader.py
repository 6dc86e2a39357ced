"""Traces of either mode (eBPF or LTTng) read back with babeltrace2's
Python bindings (bt2): images and requests, paired with completions."""
import bisect
import collections
import os
import sys

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
        self.osd_ops = []       # the OSD ops it became (RbdTrace.link)


class OsdOp:
    """One op the client's Objecter sent to an OSD (rbdrecord's eBPF mode):
    its request id, target, its data sub-op's kind and extent in the
    object, the times it was sent (the last attempt), its reply arrived
    and its completion had run, and the librbd request it is part of
    (RbdTrace.link)."""
    __slots__ = ("reqid", "osd", "pgid", "object", "flags", "attempts",
                 "send", "reply", "done", "kind", "offset", "length",
                 "request")

    def __init__(self, f, ts):
        # a trace holds every op of its run at once: the strings many ops
        # share (PG, object, op name) are kept once (sys.intern)
        self.reqid, self.osd = str(f["reqid"]), int(f["osd"])
        self.pgid = sys.intern(str(f["pgid"]))
        self.object = sys.intern(str(f["object"]))
        self.flags, self.attempts = int(f["flags"]), int(f["attempts"])
        self.send, self.reply, self.done = ts, None, None
        self.kind = sys.intern(str(f["first_op_name"])) \
            if "first_op_name" in f else ""
        self.offset = int(f["offset"]) if "offset" in f else 0
        self.length = int(f["length"]) if "length" in f else 0
        self.request = None

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


# event name -> (op, offset field, length field)
REQUESTS = {
    "librbd:aio_read_enter": ("read", "offset", "length"),
    "librbd:aio_read2_enter": ("read", "offset", "length"),
    "librbd:aio_write_enter": ("write", "off", "len"),
    "librbd:aio_write2_enter": ("write", "off", "len"),
    "librbd:aio_discard_enter": ("discard", "off", "len"),
    "librbd:aio_flush_enter": ("flush", None, None),
    "librbd:aio_writesame_enter": ("writesame", "off", "len"),
    "rbdrecord:aio_write_zeroes_enter": ("write_zeroes", "off", "len"),
}


class RbdTrace:
    """Images and requests of a librbd trace (eBPF or LTTng)."""

    def __init__(self, path, shift_ns=0):
        """shift_ns: how far the trace's host's wall clock was ahead (its
        times are moved back by it; osdstage -r --clock-offset). An
        eBPF-mode trace (written by capture/ctf.py) is read by its reader,
        an LTTng one by babeltrace2's (about ten times slower here)."""
        check_ctf(path)
        self.path = path
        self.shift_ns = shift_ns
        self.env = {}           # the trace's metadata env
        self.images = {}        # imagectx -> {"name", "snap", "pool", "ro"}
        self.requests = []
        self.unmatched = 0
        self.osd_ops = {}       # reqid -> OsdOp
        self._done = {}         # completion -> its completed Request
        pending = {}
        ours = _own_trace(path)
        if ours is not None:
            self._read_own(ours, pending)
        else:
            self._read_bt2(path, pending)
        self.incomplete = len(pending)
        if not self.requests and not self.images:
            raise UserError("%s holds no librbd events" % path)
        self.order = self.link()

    def _read_own(self, tr, pending):
        self.env = dict(tr.env)
        off = tr.clock_offset_ns - self.shift_ns
        ctx_names = tr.context.names
        for c, ts, ctx, vals in tr.records():
            self._event(c.name, ts + off, dict(zip(c.names, vals)),
                        dict(zip(ctx_names, ctx)), pending)

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

    # object sizes tried: 4 KiB to 64 MiB (rbd's --object-size range)
    ORDERS = range(12, 27)

    def link(self):
        """Each librbd request's OSD ops (Request.osd_ops, OsdOp.request):
        a data op belongs to the request whose image range holds the
        extent it carries (object number << order + offset in the object)
        and that was in progress when it was sent (the latest such
        request). The object size (order) is the one that links the most
        data ops. -> that order, or None (no data ops, or none linked)."""
        data = [(o, o.data_object()) for o in self.osd_ops.values()]
        data = [(o, d[1]) for o, d in data if d and o.length]
        reqs = [r for r in self.requests if r.len and r.done is not None]
        if not data or not reqs:
            return None
        buckets = collections.defaultdict(list)     # MiB -> requests
        for r in reqs:
            for mib in range(r.off >> 20, ((r.off + r.len - 1) >> 20) + 1):
                buckets[mib].append(r)
        # each MiB's requests by submit time (stable: the first to
        # complete first among equal times), with the longest one's
        # duration: an op's candidates lie within that of its send
        submits, longest = {}, {}
        for mib, rs in buckets.items():
            rs.sort(key=lambda r: r.submit)
            submits[mib] = [r.submit for r in rs]
            longest[mib] = max(r.done - r.submit for r in rs)

        def owner(o, no, order):
            """the latest request submitted before o was sent, in progress
            then and holding its extent (of equal submit times, the first
            to complete)"""
            x = (no << order) + o.offset
            mib = x >> 20
            rs = buckets.get(mib)
            if not rs:
                return None
            subs, floor = submits[mib], o.send - longest[mib]
            best = None
            i = bisect.bisect_right(subs, o.send)
            while i > 0:
                i -= 1
                r = rs[i]
                if r.submit < floor or \
                        (best is not None and r.submit < best.submit):
                    break
                if r.off <= x < r.off + r.len and o.send <= r.done:
                    best = r
            return best
        sample = data[:: max(1, len(data) // 200)]
        score = {order: sum(owner(o, no, order) is not None
                            for o, no in sample) for order in self.ORDERS}
        order = max(score, key=lambda k: (score[k], k == 22))
        if not score[order]:
            return None
        for o, no in data:
            r = owner(o, no, order)
            if r is not None:
                o.request = r
                r.osd_ops.append(o)
        return order

    def _event(self, name, ts, f, ctx, pending):
        """One event: its name, wall ns, payload and context (dicts, or
        babeltrace2's fields)."""
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
        elif name == "rbdrecord:osd_op_send":
            # a resend (attempts > 0) replaces the attempt before it
            self.osd_ops[str(f["reqid"])] = OsdOp(f, ts)
        elif name in ("rbdrecord:osd_op_reply", "rbdrecord:osd_op_done"):
            op = self.osd_ops.get(str(f["reqid"]))
            if op is not None:
                if name.endswith("reply"):
                    op.reply = ts
                else:
                    op.done = ts
        elif name == "librbd:aio_complete_enter":
            r = pending.pop(int(f["completion"]), None)
            if r is None:
                self.unmatched += 1
                return
            r.done, r.rval = ts, int(f["rval"])
            self.requests.append(r)
            self._done[int(f["completion"])] = r
        elif name == "rbdrecord:aio_release":
            r = self._done.pop(int(f["completion"]), None)
            if r is not None:
                r.released = ts

    def by_image(self):
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
        raise UserError("python3-bt2 is missing (make setup)")
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
