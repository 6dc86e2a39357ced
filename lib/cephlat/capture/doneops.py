"""The client ops a window of a capture completed, as columns (the
breakdown by client, pool, PG or image: model/breakdown.py; osdstage -r
--by), read with numpy chunk by chunk, no Python object an op.

An op of the window is an op_done event in [t0, t1] whose op_total is
valid: the ops the window's op_total histogram counts
(model/events.py), so the breakdown's op counts are that stage's. Its
request id and PG are its op's enqueue's: the latest op_enqueue of its
address before it with no completion of that address in between (the
op OpTracker pieces together in capture/ops.py; an op enqueued before
the capture began has none). A client op's request id is read at its
enqueue; op_reqid events tell replica ops' (an erasure-coded
sub-write's), which complete with repop_done, not here.
"""
import numpy as np

from .ops import _ENTITY
from .stream import texts

NAMES = ("op_enqueue", "op_done")
# the bytes an op wrote and read (-1: the capture's completions do not
# carry them)
BYTES = ("bytes_in", "bytes_out")
# what an op's enqueue gives it, with its default when the capture's
# enqueue does not carry it (format 0)
_ENQ = (("req_type", np.int64, 0), ("req_num", np.int64, 0),
        ("pg_pool", np.int64, 0), ("pg_seed", np.int64, 0),
        ("pg_shard", np.int64, -1))


def _enq_cols(e):
    names = e.dtype.names
    return {f: e[f].astype(t) if f in names else np.full(len(e), d, t)
            for f, t, d in _ENQ}


class _Done:
    """The window's completed ops, the capture's chunks fed in time
    order; each address's open enqueue carried into the next chunk."""

    def __init__(self, cap, t0, t1, op_class):
        self.cap, self.t0, self.t1 = cap, t0, t1
        self.cls = None if op_class is None else \
            cap.rules.labels["op_class"].index(op_class)
        self.carry = None       # addr, ts, key and _ENQ of open enqueues
        self.parts = []

    def feed(self, ch):
        cap = self.cap
        ce, cd = cap._cid.get("op_enqueue"), cap._cid.get("op_done")
        e = ch.recs.get(ce) if ce is not None else None
        d = ch.recs.get(cd) if cd is not None else None
        enq = []                # (addr, ts, key, _ENQ columns)
        if self.carry is not None:
            enq.append(self.carry)
        if e is not None and len(e):
            enq.append(dict(addr=e["op"].astype(np.uint64),
                            ts=e["_ts"].astype(np.int64),
                            key=ch.keys[ce].astype(np.int64),
                            **_enq_cols(e)))
        if not enq and (d is None or not len(d)):
            return
        en = {k: np.concatenate([x[k] for x in enq])
              for k in enq[0]} if enq else None
        ne = len(en["addr"]) if en else 0
        nd = len(d) if d is not None else 0
        addr = np.concatenate([en["addr"] if ne else np.zeros(0, np.uint64),
                               d["op"].astype(np.uint64) if nd else
                               np.zeros(0, np.uint64)])
        ts = np.concatenate([en["ts"] if ne else np.zeros(0, np.int64),
                             d["_ts"].astype(np.int64) if nd else
                             np.zeros(0, np.int64)])
        key = np.concatenate([en["key"] if ne else np.zeros(0, np.int64),
                              ch.keys[cd].astype(np.int64) if nd else
                              np.zeros(0, np.int64)])
        is_done = np.concatenate([np.zeros(ne, bool), np.ones(nd, bool)])
        row = np.concatenate([np.arange(ne), np.arange(nd)])
        o = np.lexsort((key, ts, addr))
        addr, is_done, row = addr[o], is_done[o], row[o]
        n = len(addr)
        at = np.arange(n)
        new = np.ones(n, bool)
        new[1:] = addr[1:] != addr[:-1]
        grp = np.maximum.accumulate(np.where(new, at, 0))
        last_enq = np.maximum.accumulate(np.where(~is_done, at, -1))
        last_enq[last_enq < grp] = -1
        last_end = np.maximum.accumulate(np.where(is_done, at, -1))
        before = np.concatenate([[-1], last_end[:-1]])
        before[before < grp] = -1
        if nd:
            pos = np.flatnonzero(is_done)
            q = last_enq[pos]
            mine = (q >= 0) & (before[pos] < q)
            self._take(d, row[pos], np.where(mine, row[np.maximum(q, 0)],
                                             -1), en)
        # carried on: each address's last enqueue, unless it completed
        last = np.ones(n, bool)
        last[:-1] = new[1:]
        q = last_enq[last]
        q = q[(q >= 0) & (last_end[last] < q)]
        self.carry = {k: v[row[q]] for k, v in en.items()} if ne else None

    def _take(self, d, idx, enq_row, en):
        """Done events d[idx] (each's enqueue: row enq_row of en, -1:
        none): those of the window kept."""
        r = d[idx]
        keep = (r["_ts"] >= self.t0) & (r["_ts"] <= self.t1) & \
            (r["total_valid"] != 0)
        if self.cls is not None:
            keep &= r["op_class"] == self.cls
        if not keep.any():
            return
        r, enq_row = r[keep], enq_row[keep]
        part = {"ts": r["_ts"].astype(np.int64),
                "op": r["op"].astype(np.uint64),
                "total_ns": r["op_total_ns"].astype(np.int64),
                "qwait_ns": r["queue_wait_ns"].astype(np.int64),
                "dequeued": r["dequeued"] != 0,
                "has_enq": enq_row >= 0}
        for f, t, dflt in _ENQ:
            part[f] = np.where(enq_row >= 0, en[f][np.maximum(enq_row, 0)]
                               if en else dflt, dflt).astype(t)
        for f in BYTES:
            part[f] = r[f].astype(np.int64) if f in r.dtype.names else \
                np.full(len(r), -1, np.int64)
        if "object" in r.dtype.names:
            part["object"] = r["object"]
        self.parts.append(part)

    def result(self, has_object):
        keys = ("ts", "op", "total_ns", "qwait_ns", "dequeued",
                "has_enq") + BYTES + tuple(f for f, _, _ in _ENQ) + (
                    ("object",) if has_object else ())
        if not self.parts:
            return {k: np.zeros(0, np.dtype("S1") if k == "object" else
                                bool if k in ("dequeued", "has_enq") else
                                np.uint64 if k == "op" else np.int64) for k in keys}
        out = {k: np.concatenate([p[k] for p in self.parts]) for k in keys}
        o = np.argsort(out["ts"], kind="stable")
        return {k: v[o] for k, v in out.items()}


def _labels(codes, fmt):
    """Per op, fmt(unique value) (None where fmt gives None), made once
    per distinct value."""
    if not len(codes):
        return np.zeros(0, object)
    u, inv = np.unique(codes, return_inverse=True, axis=0)
    names = np.array([fmt(v) for v in u.tolist()] + [None], object)[:-1]
    return names[inv.reshape(-1)]


def has_reqids(cap):
    """Whether the capture's enqueues carry their op's request id and
    PG."""
    c = cap._cid.get("op_enqueue")
    return c is not None and "req_type" in cap.trace.classes[c].names


def has_objects(cap):
    """Whether the capture's completions carry their object's name."""
    c = cap._cid.get("op_done")
    return c is not None and "object" in cap.trace.classes[c].names


def read(cap, t0, t1, op_class=None):
    """The client ops completed in [t0, t1] (with op class `op_class`
    only, if given) -> columns in completion order: ts, op (its
    address), total_ns, qwait_ns (valid where dequeued), dequeued,
    bytes_in and bytes_out (-1: not in the capture), client (its request
    id's entity: client.4123; None: unknown), pool
    (-1: unknown), pg (3.1a, an erasure-coded shard's PG without its
    shard; None), object (the object's name; only when the capture's
    completions carry it: None where it was not read)."""
    has_object = has_objects(cap)
    c = _Done(cap, t0, t1, op_class)
    if "op_done" in cap._cid:
        for ch in cap.chunks(NAMES, None, t1):
            c.feed(ch)
    r = c.result(has_object)
    # as OpRec reads them: an enqueue with no request id and no shard
    # said nothing of its op
    known = r["has_enq"] & ((r["req_type"] != 0) | (r["pg_shard"] >= 0))
    rt = np.where(known & (r["req_type"] != 0), r["req_type"], 0)
    out = {k: r[k] for k in ("ts", "op", "total_ns", "qwait_ns",
                             "dequeued") + BYTES}
    out["client"] = _labels(
        np.stack([rt, r["req_num"]], axis=1),
        lambda v: None if not v[0] else "%s.%d" % (
            _ENTITY.get(v[0], "type%d" % v[0]), v[1]))
    out["pool"] = np.where(known, r["pg_pool"], -1)
    out["pg"] = _labels(
        np.stack([known.astype(np.int64), r["pg_pool"], r["pg_seed"]],
                 axis=1),
        lambda v: "%d.%x" % (v[1], v[2]) if v[0] else None)
    if has_object:
        obj = r["object"]
        u, inv = np.unique(obj, return_inverse=True)
        names = np.array([t or None for t in texts(u)] + [None],
                         object)[:-1]
        out["object"] = names[inv.reshape(-1)]
    return out
