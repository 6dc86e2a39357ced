"""An eBPF-mode rbdrecord trace as columns: its librbd calls and its
Objecter's OSD ops, one numpy array a field, read in bulk
(capture/textstream.py) and paired with numpy (no Python object an
event or an op: a 10-minute trace holds millions of events).

Pairing, as the trace's events mean it (events.py):
- a call: its aio_*_enter, completed by the next aio_complete_enter of
  its completion handle (a handle reused after that starts another
  call), released by the next rbdrecord:aio_release after that;
- an OSD op (its request id: client, incarnation, tid): its last
  osd_op_send (a resend replaces the attempt before it), its reply and
  completion the last osd_op_reply / osd_op_done after that send.
Calls and ops are linked by link.py.
"""
import numpy as np

from .events import ENTER
from ..capture.textstream import TextStreams, strings
from ..ceph import objecter
from ..model.table import NONE, Table

# the call's events: name -> (op, offset field, length field)
REQUESTS = {
    ENTER["read"]: ("read", "offset", "length"),
    ENTER["read2"]: ("read", "offset", "length"),
    ENTER["write"]: ("write", "off", "len"),
    ENTER["write2"]: ("write", "off", "len"),
    ENTER["discard"]: ("discard", "off", "len"),
    ENTER["flush"]: ("flush", None, None),
    ENTER["writesame"]: ("writesame", "off", "len"),
    ENTER["write_zeroes"]: ("write_zeroes", "off", "len"),
}
CALL_OPS = sorted(set(v[0] for v in REQUESTS.values()))
_OP_KEY = ("client", "inc", "tid")


class Codes:
    """Strings kept once, named by their number (object names, sub-op
    kinds: a trace repeats a few hundred of them)."""

    def __init__(self):
        self.names, self._code = [], {}

    def of(self, buf, where):
        """Strings at `where` in buf -> their codes (an int32 array)."""
        s = strings(buf, where)
        if not len(s):
            return np.zeros(0, np.int32)
        u, inv = np.unique(s, return_inverse=True)
        codes = np.array([self._add(b) for b in u.tolist()], np.int32)
        return codes[inv.reshape(-1)]

    def _add(self, b):
        c = self._code.get(b)
        if c is None:
            c = self._code[b] = len(self.names)
            self.names.append(b.decode("utf-8", "replace"))
        return c


def _cat(parts, key, dtype):
    return np.concatenate([p[key] for p in parts]).astype(dtype) \
        if parts else np.zeros(0, dtype)


class ClientColumns:
    """calls: op (CALL_OPS index), image, off, len, tid, submit, done,
    rval, released (NONE), in the order they completed;
    ops: client, inc, tid, osd, pool, seed, obj (objects.names index),
    subop (kinds.names index: its first data sub-op), flags, attempts, offset, length, send,
    reply, done (NONE: not recorded), in the order of their last send;
    images: {imagectx: {"name", "snap", "ro", "pool"}}; unmatched:
    completions of no call; incomplete: calls never completed."""

    def __init__(self, trace, shift_ns=0):
        self.objects, self.kinds = Codes(), Codes()
        self.images = {}
        off = trace.clock_offset_ns - shift_ns
        want = {n: ("imagectx", "completion", "name", "_ctx0") +
                tuple(f for f in REQUESTS[n][1:] if f)
                for n in REQUESTS}
        want.update({
            "librbd:aio_complete_enter": ("completion", "rval"),
            "rbdrecord:aio_release": ("completion",),
            "rbdrecord:osd_op_send": _OP_KEY + (
                "osd", "pool", "seed", "object", "flags", "attempts",
                "first_op_name", "offset", "length"),
            "rbdrecord:osd_op_reply": _OP_KEY,
            "rbdrecord:osd_op_done": _OP_KEY,
            "librbd:open_image_enter": ("imagectx", "name", "snap_name",
                                        "read_only"),
            "rbdrecord:image_pool": ("imagectx", "pool")})
        ev = {n: [] for n in want}
        seq = 0             # the events' order in the trace (ties in time)
        for buf, out in TextStreams(trace).spans(want):
            for name, (ts, f) in out.items():
                d = {"ts": ts.astype(np.int64) + off,
                     "seq": np.arange(seq, seq + len(ts))}
                seq += len(ts)
                self._fields(name, buf, f, d)
                ev[name].append(d)
        self.calls, self.unmatched, self.incomplete = _calls(ev)
        self.ops = _ops(ev)

    def _fields(self, name, buf, f, d):
        """One span's records of event `name` into columns d."""
        for k, v in f.items():
            if not isinstance(v, tuple):
                d[k] = v
        if name in REQUESTS:
            op, fo, fl = REQUESTS[name]
            d["op"] = np.full(len(d["ts"]), CALL_OPS.index(op), np.int8)
            d["off"] = f[fo] if fo else np.zeros(len(d["ts"]), np.uint64)
            d["len"] = f[fl] if fl else np.zeros(len(d["ts"]), np.uint64)
            # an image opened before the recording: named by its I/O
            ictx, first = np.unique(f["imagectx"], return_index=True)
            names = strings(buf, (f["name"][0][first], f["name"][1][first]))
            for i, n in zip(ictx.tolist(), names.tolist()):
                self.images.setdefault(i, {}).setdefault(
                    "name", n.decode("utf-8", "replace"))
        elif name == "rbdrecord:osd_op_send":
            d["obj"] = self.objects.of(buf, f["object"])
            d["subop"] = self.kinds.of(buf, f["first_op_name"])
        elif name == "librbd:open_image_enter":
            names = strings(buf, f["name"]).tolist()
            snaps = strings(buf, f["snap_name"]).tolist()
            for i, n, s, ro in zip(f["imagectx"].tolist(), names, snaps,
                                   f["read_only"].tolist()):
                self.images.setdefault(i, {}).update(
                    name=n.decode("utf-8", "replace"),
                    snap=s.decode("utf-8", "replace"), ro=ro)
        elif name == "rbdrecord:image_pool":
            for i, p in zip(f["imagectx"].tolist(),
                            strings(buf, f["pool"]).tolist()):
                self.images.setdefault(i, {})["pool"] = p.decode(
                    "utf-8", "replace")

    def reqid(self, i):
        """Op i's request id as the OSDs print it (client.4161.0:11457)."""
        o = self.ops
        return "client.%d.%d:%d" % (o.client[i], o.inc[i], o.tid[i])

    def find(self, reqid):
        """The index of the op with request id `reqid`, or None."""
        from ..capture.ops import reqid_fields
        f = reqid_fields(reqid)
        if f is None or f[0] != 8:
            return None
        o = self.ops
        hit = np.flatnonzero((o.client == f[1]) & (o.inc == f[2]) &
                             (o.tid == f[3]))
        return int(hit[-1]) if len(hit) else None

    def is_write(self):
        return (self.ops.flags & objecter.FLAG_WRITE) != 0


def _group_last(key_cols, kind, ts, seq):
    """Events of several kinds grouped by key, in time order within a
    group -> (the order (lexsort), per event (in that order) the index of
    the latest event of kind 0 at or before it in its group (-1: none),
    its group's number, whether it is its group's last)."""
    o = np.lexsort((seq, ts) + tuple(reversed(key_cols)))
    n = len(o)
    pos = np.where(kind[o] == 0, np.arange(n), -1)
    np.maximum.accumulate(pos, out=pos)
    new = np.ones(n, bool)
    if n:
        same = np.ones(n - 1, bool)
        for c in key_cols:
            same &= c[o][1:] == c[o][:-1]
        new[1:] = ~same
    # a group's first kind-0 event is at or after its start
    start = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    pos[pos < start] = -1
    end = np.ones(n, bool)
    end[:-1] = new[1:]
    return o, pos, np.cumsum(new) - 1, end


def _stack(ev, names, cols):
    """Columns `cols` of events `names` (in that order: kind 0, 1, ...),
    concatenated, with kind, ts, seq."""
    parts = [(i, d) for i, n in enumerate(names) for d in ev[n]]
    out = {c: np.concatenate([d[c] for _, d in parts]) if parts
           else np.zeros(0, np.int64) for c in cols + ("ts", "seq")}
    out["kind"] = np.concatenate([np.full(len(d["ts"]), i, np.int8)
                                  for i, d in parts]) if parts \
        else np.zeros(0, np.int8)
    return out


def _calls(ev):
    """-> (calls Table, completions of no call, calls never completed)"""
    enter = [n for n in REQUESTS if ev[n]]
    e = _stack(ev, enter, ("completion", "imagectx", "off", "len", "_ctx0",
                           "op"))
    c = _stack(ev, ["librbd:aio_complete_enter"], ("completion", "rval"))
    r = _stack(ev, ["rbdrecord:aio_release"], ("completion",))
    ne, nc = len(e["ts"]), len(c["ts"])
    # enters (kind 0) then completions (1) of each handle: a completion
    # takes the latest enter before it when no completion came between
    comp = np.concatenate([e["completion"], c["completion"]])
    kind = np.concatenate([np.zeros(ne, np.int8), np.ones(nc, np.int8)])
    o, last, _, end = _group_last((comp,), kind,
                                  np.concatenate([e["ts"], c["ts"]]),
                                  np.concatenate([e["seq"], c["seq"]]))
    prev_enter = np.zeros(len(o), bool)
    prev_enter[1:] = kind[o][:-1] == 0
    isc = kind[o] == 1
    ok = isc & (last >= 0) & (last == np.arange(len(o)) - 1) & prev_enter
    ci = o[ok] - ne                     # completions that close a call
    ei = o[last[ok]]                    # their calls' enters
    unmatched = int(isc.sum() - ok.sum())
    # a handle whose last event is an enter: a call pending at the end
    incomplete = int((end & (kind[o] == 0)).sum())
    order = np.lexsort((c["seq"][ci], c["ts"][ci]))
    ci, ei = ci[order], ei[order]
    calls = Table(op=e["op"][ei], image=e["imagectx"][ei].astype(np.uint64),
                  off=e["off"][ei].astype(np.int64),
                  len=e["len"][ei].astype(np.int64),
                  tid=e["_ctx0"][ei].astype(np.uint64),
                  submit=e["ts"][ei], done=c["ts"][ci],
                  rval=c["rval"][ci].astype(np.int64),
                  released=_released(c["completion"][ci], c["ts"][ci],
                                     c["seq"][ci], r))
    return calls, unmatched, incomplete


def _released(comp, ts, seq, r):
    """The release of each completed call: the first aio_release of its
    handle after its completion and before the handle's next one."""
    n, nr = len(comp), len(r["ts"])
    k = np.concatenate([np.zeros(n, np.int8), np.ones(nr, np.int8)])
    o, last, _, _ = _group_last(
        (np.concatenate([comp, r["completion"]]),), k,
        np.concatenate([ts, r["ts"]]), np.concatenate([seq, r["seq"]]))
    out = np.full(n, NONE, np.int64)
    isr = k[o] == 1
    prev = np.zeros(len(o), bool)
    prev[1:] = k[o][:-1] == 0
    ok = isr & (last >= 0) & (last == np.arange(len(o)) - 1) & prev
    out[o[last[ok]]] = r["ts"][o[ok] - n]
    return out


def _ops(ev):
    """The OSD ops: each request id's last send, and the last reply and
    completion after it."""
    names = ["rbdrecord:osd_op_send", "rbdrecord:osd_op_reply",
             "rbdrecord:osd_op_done"]
    a = _stack(ev, names, _OP_KEY)
    s = _stack(ev, names[:1], _OP_KEY + (
        "osd", "pool", "seed", "obj", "subop", "flags", "attempts",
        "offset", "length"))
    keys = tuple(a[k].astype(np.int64) for k in _OP_KEY)
    o, last, gid, grp_end = _group_last(keys, a["kind"], a["ts"], a["seq"])
    kind = a["kind"][o]
    # each group's last send (the sends come first in `a`: the same index)
    final = np.full(int(gid[-1]) + 1 if len(o) else 0, -1, np.int64)
    final[gid[grp_end]] = last[grp_end]
    has = final >= 0
    si = o[final[has]]
    out = {k: s[k][si] for k in s if k not in ("kind", "seq")}
    reply = np.full(len(final), NONE, np.int64)
    done = np.full(len(final), NONE, np.int64)
    for kk, dst in ((1, reply), (2, done)):
        m = (kind == kk) & (last >= 0)
        m &= last == final[gid]         # after the group's last send
        g, t = gid[m], a["ts"][o[m]]
        dst[g] = t                      # (the last one wins: time order)
    order = np.argsort(a["ts"][si], kind="stable")
    cols = dict(client=out["client"].astype(np.int64),
                inc=out["inc"].astype(np.int64),
                tid=out["tid"].astype(np.int64),
                osd=out["osd"].astype(np.int32),
                pool=out["pool"].astype(np.int64),
                seed=out["seed"].astype(np.int64),
                obj=out["obj"], subop=out["subop"],
                flags=out["flags"].astype(np.int64),
                attempts=out["attempts"].astype(np.int32),
                offset=out["offset"].astype(np.int64),
                length=out["length"].astype(np.int64),
                send=out["ts"], reply=reply[has], done=done[has])
    return Table(**cols).take(order)
