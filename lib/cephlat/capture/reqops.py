"""The ops of a capture that carry request ids, as columns: what the
end-to-end table joins with clients' traces (cli/merged.py), read with
numpy chunk by chunk (no Python object an event or an op: a 10-minute
capture of a busy OSD holds tens of millions of events).

An op is its op_enqueue (its address, request id, message stamps) and
the events that name its address after it: op_dequeue, replica_reply,
op_reqid (an erasure-coded sub-write told its request id late), up to
its end: op_done (completed as the primary) or repop_done (a replica's
op). Events of an address after its op's end and before its next enqueue
belong to no op (capture/ops.py's OpTracker reads them the same way).
An op still open at a chunk's end is carried into the next.
"""
import numpy as np

from ..model.table import NONE, Table, match

NAMES = ("op_enqueue", "op_dequeue", "op_done", "repop_done",
         "replica_reply", "op_reqid")
_REQ = ("req_type", "req_num", "req_inc", "req_tid")
ENQ, DEQ, DONE, REPOP, REPLY, REQID = range(6)


class _Chunked:
    """The ops of one capture slot, its chunks fed in time order."""

    def __init__(self):
        self.n = 0              # ops so far
        self.carry = None       # open ops: addr, op, ts, key
        self.ops = []           # per chunk: op, req fields, enq ts, first
        self.rows = {k: [] for k in (DEQ, DONE, REPOP, REPLY, REQID)}

    def feed(self, cap, ch):
        cid = {n: cap._cid.get(n) for n in NAMES}
        parts = []
        for kind, n in enumerate(NAMES):
            r = ch.recs.get(cid[n]) if cid[n] is not None else None
            if r is not None and len(r):
                parts.append((kind, r, ch.keys[cid[n]]))
        e = next((r for kind, r, _ in parts if kind == ENQ), None)
        base = self.n
        if e is not None:
            names = e.dtype.names
            self.n += len(e)
            msg = (e["throttle_wait_ns"].astype(np.int64) +
                   e["recv_ns"].astype(np.int64) +
                   e["dispatch_ns"].astype(np.int64)) \
                if "stamped" in names else None
            ts = e["_ts"].astype(np.int64)
            self.ops.append({
                "enq": ts,
                "first": np.where(e["stamped"] != 0, ts - msg, NONE)
                if msg is not None else np.full(len(e), NONE, np.int64),
                **{f: e[f].astype(np.int64) if f in names else
                   np.zeros(len(e), np.int64) for f in _REQ}})
        # every row: addr, ts, key, kind, row (in its class), op (enqueue)
        cols = {"addr": [], "ts": [], "key": [], "kind": [], "row": []}
        if self.carry is not None:
            c = self.carry
            cols["addr"].append(c["addr"])
            cols["ts"].append(c["ts"])
            cols["key"].append(c["key"])
            cols["kind"].append(np.full(len(c["addr"]), -1, np.int8))
            cols["row"].append(c["op"])
        for kind, r, k in parts:
            cols["addr"].append(r["op"].astype(np.uint64))
            cols["ts"].append(r["_ts"].astype(np.int64))
            cols["key"].append(k.astype(np.int64))
            cols["kind"].append(np.full(len(r), kind, np.int8))
            cols["row"].append(np.arange(len(r)) + (base if kind == ENQ
                                                    else 0))
        if not cols["addr"]:
            return
        a = {k: np.concatenate(v) for k, v in cols.items()}
        o = np.lexsort((a["key"], a["ts"], a["addr"]))
        a = {k: v[o] for k, v in a.items()}
        n = len(o)
        at = np.arange(n)
        starts = (a["kind"] == ENQ) | (a["kind"] == -1)
        new = np.ones(n, bool)
        new[1:] = a["addr"][1:] != a["addr"][:-1]
        grp = np.maximum.accumulate(np.where(new, at, 0))
        enq = np.maximum.accumulate(np.where(starts, at, -1))
        enq[enq < grp] = -1
        # the last end (done, repop_done) strictly before each row
        ends = (a["kind"] == DONE) | (a["kind"] == REPOP)
        last_end = np.maximum.accumulate(np.where(ends, at, -1))
        before = np.concatenate([[-1], last_end[:-1]])
        before[before < grp] = -1
        ok = ~starts & (enq >= 0) & (before < enq)
        op = np.where(enq >= 0, a["row"][np.maximum(enq, 0)], -1)
        byk = {kind: r for kind, r, _ in parts}
        for kind in self.rows:
            m = ok & (a["kind"] == kind)
            if m.any():
                self.rows[kind].append(self._rows(kind, byk[kind],
                                                  a["row"][m], op[m],
                                                  a["ts"][m]))
        # carried on: each address's last op, unless it ended
        last = np.ones(n, bool)
        last[:-1] = new[1:]
        q = enq[last]
        open_ = (q >= 0) & (last_end[last] < q)
        q = q[open_]
        self.carry = {"addr": a["addr"][q], "ts": a["ts"][q],
                      "key": a["key"][q], "op": a["row"][q]}

    @staticmethod
    def _rows(kind, r, idx, op, ts):
        out = {"op": op, "ts": ts}
        if kind == REPOP:
            out["repop_ns"] = r["repop_ns"][idx].astype(np.int64)
        elif kind == REPLY:
            names = r.dtype.names
            out["peer"] = r["peer"][idx].astype(np.int64)
            out["wait"] = r["wait_ns"][idx].astype(np.int64)
            out["read"] = r["read"][idx].astype(bool) if "read" in names \
                else np.zeros(len(idx), bool)
            out["sent"] = r["sent_us"][idx].astype(np.int64) * 1000 \
                if "sent_us" in names else np.zeros(len(idx), np.int64)
        elif kind == REQID:
            for f in _REQ:
                out[f] = r[f][idx].astype(np.int64)
        return out

    def result(self):
        """-> (ops Table: req fields, enq, first, done, repop_ns,
        dequeued; {kind: Table of its rows})"""
        cat = (lambda parts, k: np.concatenate([p[k] for p in parts]))
        if not self.ops:
            return None, None
        ops = {k: cat(self.ops, k) for k in self.ops[0]}
        rows = {k: Table(**{f: cat(v, f) for f in v[0]}) if v else None
                for k, v in self.rows.items()}
        n = len(ops["enq"])
        ops["done"] = np.full(n, NONE, np.int64)
        ops["repop_ns"] = np.full(n, NONE, np.int64)
        ops["repop_at"] = np.full(n, NONE, np.int64)
        ops["dequeued"] = np.zeros(n, bool)
        if rows[DONE] is not None:
            ops["done"][rows[DONE].op] = rows[DONE].ts
        if rows[REPOP] is not None:
            ops["repop_ns"][rows[REPOP].op] = rows[REPOP].repop_ns
            ops["repop_at"][rows[REPOP].op] = rows[REPOP].ts
        if rows[DEQ] is not None:
            ops["dequeued"][rows[DEQ].op] = True
        r = rows[REQID]
        if r is not None:
            # the first op_reqid of an op that had none at its enqueue
            o = np.argsort(r.ts, kind="stable")[::-1]
            late = r.op[o]
            m = ops["req_type"][late] == 0
            for f in _REQ:
                ops[f][late[m]] = r.cols[f][o][m]
        return Table(**ops), rows


def read(cap):
    """The ops of capture slot `cap` that carry a request id (client
    ops on their primary, replicas' ops, their replies) -> (ops Table:
    req_type, req_num, req_inc, req_tid, enq, first (the message's first
    stamp; NONE), done, repop_ns, repop_at (NONE), dequeued, with times
    on the capture's monotonic clock; the replies Table: op (its row),
    peer, wait, read, sent, ts), or (None, None) without ops."""
    c = _Chunked()
    for ch in cap.chunks(NAMES, cap.first_ns, cap.last_ns):
        c.feed(cap, ch)
    ops, rows = c.result()
    if ops is None:
        return None, None
    keep = ops.req_type != 0
    idx = np.flatnonzero(keep)
    remap = np.full(len(ops), -1, np.int64)
    remap[idx] = np.arange(len(idx))
    rep = rows[REPLY]
    if rep is not None:
        rep = rep.take(np.flatnonzero(keep[rep.op]))
        rep.cols["op"] = remap[rep.op]
    return ops.take(idx), rep
