"""An eBPF-mode rbdrecord trace as columns: its librbd calls and its
Objecter's OSD ops, one numpy array a field, read in bulk
(capture/textstream.py) and paired with numpy (no Python object an
event or an op: a 10-minute trace holds millions of events).

Pairing, as the trace's events mean it (events.py):
- a call: its aio_*_enter, completed by the next aio_complete_enter of
  its completion handle (a handle reused after that starts another
  call), released by the next rbdrecord:aio_release after that;
- an OSD op (its request id: client, incarnation, tid): its last
  osd_op_send (a resend replaces the attempt before it), its completion
  the first osd_op_done after that send, its reply the last
  osd_op_reply between them (an op completed is the Objecter's no more:
  a reply after that is a duplicate to a forgotten tid).
Calls and ops are linked by link.py.
"""
import numpy as np

from . import cache as cachemod
from .events import ENTER
from ..capture.textstream import TextStreams, strings
from ..model.table import NONE, Table, concat_parts, give_back

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


class ClientColumns:
    """calls: op (CALL_OPS index), image, off, len, tid, submit, done,
    rval, released (NONE), in the order they completed;
    ops: client, inc, tid, osd, pool, seed, obj (objects.names index),
    subop (kinds.names index: its first data sub-op), flags, attempts,
    offset, length, send, reply, done (NONE: not recorded), and request
    (link.py: its call, or -1), in the order of their last send;
    images: {imagectx: {"name", "snap", "ro", "pool"}}; unmatched:
    completions of no call; incomplete: calls never completed;
    cache: librbd's cache's writes (cache.py; empty without its
    records), flushes: {imagectx: [rbd_flush entry times]}."""

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
            "rbdrecord:image_pool": ("imagectx", "pool"),
            "rbdrecord:cache_write": cachemod.WRITE_FIELDS,
            "rbdrecord:cache_write_done": cachemod.DONE_FIELDS,
            "librbd:flush_enter": ("imagectx",)})
        ev = {n: [] for n in want}
        self._kept = {n: [] for n in _KEPT}
        self.flushes = {}
        done, open_ = [], None      # OSD ops completed; still open
        calls, spans = _Calls(), 0
        for buf, out in TextStreams(trace).spans(want):
            for name, (ts, f) in out.items():
                # seq: the event's place in the trace (ties in time)
                d = {"ts": ts.astype(np.int64) + off, "seq": f.pop("_at")}
                self._fields(name, buf, f, d)
                ev[name].append(d)
            # a span's ops as one row each, those completed set aside as
            # final (a trace holds millions of their events)
            r = _reduce_ops(_cat_rows([open_, _op_rows(ev)]))
            calls.feed(ev)
            for n in _KEPT:
                self._kept[n] += ev[n]
            ev = {n: [] for n in want}
            spans += 1
            if spans % 16 == 0:
                give_back()
            if r is not None:
                fin = r["has_send"] & (r["done"] != NONE)
                done.append(_final_ops(r, fin))
                open_ = {k: v[~fin] for k, v in r.items()}
        if open_ is not None:
            done.append(_final_ops(open_, open_["has_send"]))
        self.calls, self.unmatched, self.incomplete = calls.result()
        self.ops = _cat_ops(done)
        self._cache_table()
        give_back()

    def _cache_table(self):
        """The cache's writes (paired, linked to their calls), and the
        user flushes per image."""
        cols = ("ts",) + cachemod.WRITE_FIELDS[:-1] + ("state",)
        w = _cat(self._kept["rbdrecord:cache_write"], cols)
        d = _cat(self._kept["rbdrecord:cache_write_done"],
                 ("ts",) + cachemod.DONE_FIELDS)
        self.cache_unknown_states = 0
        if len(w["ts"]):
            ok = w["state"] >= 0
            self.cache_unknown_states = int((~ok).sum())
            w = {k: v[ok] for k, v in w.items()}
            self.cache = cachemod.table(w, d)
            cachemod.link_calls(self.cache, self.calls)
        else:
            self.cache = cachemod.empty()
        for f in self._kept["librbd:flush_enter"]:
            for i, t in zip(f["imagectx"].tolist(), f["ts"].tolist()):
                self.flushes.setdefault(i, []).append(t)
        self._kept = None

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
        elif name == "rbdrecord:cache_write":
            names = strings(buf, f["state_name"]).tolist()
            d["state"] = np.array([
                cachemod.STATES.index(x.decode()) if x.decode() in
                cachemod.STATES else -1 for x in names], np.int8)
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


def _cat(parts, cols):
    """Dicts of columns `cols`, concatenated (None parts skipped)."""
    parts = [p for p in parts if p is not None and len(p["ts"])]
    if not parts:
        return {c: np.zeros(0, np.int64) for c in cols}
    return {c: np.concatenate([p[c] for p in parts]) for c in cols}


_ENTER = ("completion", "imagectx", "off", "len", "_ctx0", "op", "ts",
          "seq")
# the events kept whole until the end (a few a write: the cache's)
_KEPT = ("rbdrecord:cache_write", "rbdrecord:cache_write_done",
         "librbd:flush_enter")


def _pairs(a, b):
    """Events a (kind 0) and b (kind 1), each with "completion", "ts",
    "seq": grouped by handle in time order, each b that directly follows
    an a of its handle takes it. -> (the a and b indices paired, how
    many b took none, the indices of a that end their handle's events)"""
    na = len(a["ts"])
    kind = np.concatenate([np.zeros(na, np.int8),
                           np.ones(len(b["ts"]), np.int8)])
    o, last, _, end = _group_last(
        (np.concatenate([a["completion"], b["completion"]]),), kind,
        np.concatenate([a["ts"], b["ts"]]),
        np.concatenate([a["seq"], b["seq"]]))
    prev = np.zeros(len(o), bool)
    prev[1:] = kind[o][:-1] == 0
    isb = kind[o] == 1
    ok = isb & (last >= 0) & (last == np.arange(len(o)) - 1) & prev
    return (o[last[ok]], o[ok] - na, int(isb.sum() - ok.sum()),
            o[end & (kind[o] == 0)])


class _Calls:
    """The calls paired span by span (fed in trace order): an enter
    waits for its handle's next completion (a later enter of the handle
    replaces it), a completed call for its handle's next release (a
    later completion replaces it); what waits is carried on."""

    def __init__(self):
        self.pend = None            # enters waiting, one per handle
        self.wait = None            # completed calls waiting for release
        self.parts, self.rel = [], []
        self.n = self.unmatched = 0

    def feed(self, ev):
        e = _cat([self.pend] + [d for n in REQUESTS for d in ev[n]],
                 _ENTER)
        c = _cat(ev["librbd:aio_complete_enter"],
                 ("completion", "rval", "ts", "seq"))
        ei, ci, unmatched, waiting = _pairs(e, c)
        self.unmatched += unmatched
        self.pend = {k: v[waiting] for k, v in e.items()}
        order = np.lexsort((c["seq"][ci], c["ts"][ci]))
        ci, ei = ci[order], ei[order]
        idx = np.arange(self.n, self.n + len(ci))
        self.n += len(ci)
        self.parts.append(dict(
            op=e["op"][ei].astype(np.int8),
            image=e["imagectx"][ei].astype(np.uint64),
            off=e["off"][ei].astype(np.int64),
            len=e["len"][ei].astype(np.int64),
            tid=e["_ctx0"][ei].astype(np.uint64), submit=e["ts"][ei],
            done=c["ts"][ci], rval=c["rval"][ci].astype(np.int64),
            completion=e["completion"][ei].astype(np.uint64)))
        # completed calls (those waiting, these) and releases
        w = _cat([self.wait, {"completion": c["completion"][ci],
                              "ts": c["ts"][ci], "seq": c["seq"][ci],
                              "call": idx}],
                 ("completion", "ts", "seq", "call"))
        r = _cat(ev["rbdrecord:aio_release"], ("completion", "ts", "seq"))
        wi, ri, _, waiting = _pairs(w, r)
        self.rel.append((w["call"][wi], r["ts"][ri]))
        self.wait = {k: v[waiting] for k, v in w.items()}

    def result(self):
        """-> (calls Table, completions of no call, calls never
        completed)"""
        cols = ("op", "image", "off", "len", "tid", "submit", "done", "rval",
                "completion")
        t = concat_parts([p for p in self.parts if len(p["op"])], cols)
        self.parts = []
        t["released"] = np.full(self.n, NONE, np.int64)
        for i, ts in self.rel:
            t["released"][i] = ts
        return Table(**t), self.unmatched, \
            len(self.pend["ts"]) if self.pend else 0


_OP_EVENTS = ("rbdrecord:osd_op_send", "rbdrecord:osd_op_reply",
              "rbdrecord:osd_op_done")
# a send's fields kept with its op, and their types
_SEND = (("osd", np.int32), ("pool", np.int64), ("seed", np.uint32),
         ("obj", np.int32), ("subop", np.int16), ("flags", np.uint32),
         ("attempts", np.int32), ("offset", np.int64),
         ("length", np.int64))


def _op_rows(ev):
    """A span's OSD-op events as op rows (what _reduce_ops takes): a
    send row holds its fields and its time, a reply or completion row
    its time in "reply" or "done"."""
    parts = []
    for i, n in enumerate(_OP_EVENTS):
        for d in ev[n]:
            k = len(d["ts"])
            row = {c: d[c].astype(np.int64) for c in _OP_KEY}
            row["seq"] = d["seq"]
            row["has_send"] = np.full(k, i == 0)
            row["send"] = d["ts"] if i == 0 else np.full(k, NONE, np.int64)
            row["reply"] = d["ts"] if i == 1 else np.full(k, NONE, np.int64)
            row["done"] = d["ts"] if i == 2 else np.full(k, NONE, np.int64)
            for c, t in _SEND:
                row[c] = d[c].astype(t) if i == 0 else np.zeros(k, t)
            parts.append(row)
    return _cat_rows(parts)


def _cat_rows(parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _reduce_ops(rows):
    """Op rows (_op_rows, or rows this made) -> one row per request id:
    its last send (a resend replaces the attempt before it) with the
    first completion after it and the last reply after it and not after
    that completion (an op completed is the Objecter's no more: what
    comes after names no op of ours); without a send, the same of its
    replies and completions (a send of an earlier span takes them).
    Rows in order (seq: their last event's)."""
    if rows is None:
        return None
    keys = tuple(rows[k] for k in _OP_KEY)
    o = np.lexsort((rows["seq"],) + tuple(reversed(keys)))
    r = {k: v[o] for k, v in rows.items()}
    n = len(o)
    new = np.ones(n, bool)
    same = np.ones(max(n - 1, 0), bool)
    for k in _OP_KEY:
        same &= r[k][1:] == r[k][:-1]
    new[1:] = ~same
    at = np.arange(n)
    grp = np.maximum.accumulate(np.where(new, at, 0))
    last_send = np.maximum.accumulate(np.where(r["has_send"], at, -1))
    last_send[last_send < grp] = -1
    end = np.ones(n, bool)
    end[:-1] = new[1:]
    gid = np.cumsum(new) - 1
    s = last_send[end]                  # each group's last send, or -1
    ng = len(s)
    out = {k: r[k][end] for k in _OP_KEY + ("seq",)}
    src = np.where(s >= 0, s, np.flatnonzero(end))
    for c in ("has_send", "send") + tuple(c for c, _ in _SEND):
        out[c] = r[c][src]
    after = at >= np.where(s >= 0, s, 0)[gid]
    big = np.iinfo(np.int64).max
    done = np.full(ng, big, np.int64)
    m = after & (r["done"] != NONE)
    np.minimum.at(done, gid[m], r["done"][m])
    reply = np.full(ng, NONE, np.int64)
    m = after & (r["reply"] <= done[gid])
    np.maximum.at(reply, gid[m], r["reply"][m])
    out["done"] = np.where(done == big, NONE, done)
    out["reply"] = reply
    return out


_COLS = _OP_KEY + ("send", "reply", "done") + tuple(c for c, _ in _SEND)


def _final_ops(r, keep):
    """Reduced rows `keep` (a mask; those with a send) as op columns."""
    return {c: r[c][keep] for c in _COLS}


def _cat_ops(parts):
    """The ops Table (by send time) of _final_ops parts."""
    return Table(**concat_parts([p for p in parts if len(p["send"])],
                                _COLS, key="send"))
