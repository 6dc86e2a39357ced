"""The ops of a capture that carry request ids, as columns: what the
end-to-end table joins with clients' traces (model/e2e_table.py; read
by cli/merged.py, handed in as columns), read with
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

from ..model.table import NONE, Table, concat_parts, give_back

NAMES = ("op_enqueue", "op_dequeue", "op_done", "repop_done",
         "replica_reply", "op_reqid")
_REQ = ("req_type", "req_num", "req_inc", "req_tid")
ENQ, DEQ, DONE, REPOP, REPLY, REQID = range(6)


class _Chunked:
    """The ops of one capture slot, its chunks fed in time order."""

    def __init__(self, skip=()):
        self.skip = np.array(skip, np.int64)
        self.n = 0              # ops kept so far
        self.carry = None       # open ops: addr, op, ts, key
        self.ops = []           # per chunk: op, req fields, enq ts, first
        self.rows = {k: [] for k in (DEQ, DONE, REPOP, REPLY, REQID)}

    def feed(self, cap, ch):
        """One chunk `ch` of capture `cap`: its enqueues become ops, the
        events naming their addresses the ops' rows."""
        parts = []              # (kind, records, keys) of each class
        for kind, n in enumerate(NAMES):
            cid = cap._cid.get(n)
            r = ch.recs.get(cid) if cid is not None else None
            if r is not None and len(r):
                parts.append((kind, r, ch.keys[cid]))
        e = next((r for kind, r, _ in parts if kind == ENQ), None)
        ids = None if e is None else self._enqueues(e)
        a = self._by_address(parts, ids)
        if a is None:
            return
        n = len(a["addr"])
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
        op = np.where(enq >= 0, a["row"][np.maximum(enq, 0)], -1)
        ok = ~starts & (enq >= 0) & (before < enq) & (op >= 0)
        byk = {kind: r for kind, r, _ in parts}
        for kind in self.rows:
            m = ok & (a["kind"] == kind)
            if m.any():
                self.rows[kind].append(self._rows(kind, byk[kind],
                                                  a["row"][m],
                                                  op[m].astype(np.int32),
                                                  a["ts"][m]))
        # carried on: each address's last op, unless it ended or is not
        # kept (what names its address before the next enqueue is its)
        last = np.ones(n, bool)
        last[:-1] = new[1:]
        q = enq[last]
        open_ = (q >= 0) & (last_end[last] < q)
        q = q[open_]
        q = q[a["row"][q] >= 0]
        self.carry = {"addr": a["addr"][q], "ts": a["ts"][q],
                      "key": a["key"][q], "op": a["row"][q]}

    def _enqueues(self, e):
        """A chunk's enqueues `e`: those kept become ops (their request
        ids, enqueue time, first stamp) -> each enqueue's op (-1: not
        kept)."""
        names = e.dtype.names
        keep = ~np.isin(e["msg_type"], self.skip) \
            if len(self.skip) and "msg_type" in names else \
            np.ones(len(e), bool)
        ids = np.full(len(e), -1, np.int64)
        ids[keep] = np.arange(self.n, self.n + int(keep.sum()))
        self.n += int(keep.sum())
        e = e[keep]
        msg = (e["throttle_wait_ns"].astype(np.int64) +
               e["recv_ns"].astype(np.int64) +
               e["dispatch_ns"].astype(np.int64)) \
            if "stamped" in names else None
        ts = e["_ts"].astype(np.int64)
        self.ops.append({
            "enq": ts,
            "first": np.where(e["stamped"] != 0, ts - msg, NONE)
            if msg is not None else np.full(len(e), NONE, np.int64),
            **{f: e[f].astype(t) if f in names else np.zeros(len(e), t)
               for f, t in zip(_REQ, (np.int8, np.int64, np.int32,
                                      np.int64))}})
        return ids

    def _by_address(self, parts, ids):
        """Every row of the chunk and the ops carried into it: columns
        addr, ts, key, kind (-1: carried), row (in its class; an
        enqueue's: its op, as a carried one's), sorted by address, time
        and key -> the columns, None when there is none."""
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
            cols["row"].append(ids if kind == ENQ else np.arange(len(r)))
        if not cols["addr"]:
            return None
        a = {k: np.concatenate(v) for k, v in cols.items()}
        o = np.lexsort((a["key"], a["ts"], a["addr"]))
        return {k: v[o] for k, v in a.items()}

    @staticmethod
    def _rows(kind, r, idx, op, ts):
        if kind == DEQ:
            return {"op": op}
        out = {"op": op, "ts": ts}
        if kind == REPOP:
            out["repop_ns"] = r["repop_ns"][idx].astype(np.int64)
        elif kind == REPLY:
            names = r.dtype.names
            out["peer"] = r["peer"][idx].astype(np.int32)
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
        """-> (ops Table of those with a request id: req fields, enq,
        first, done, repop_ns, repop_at, dequeued; their replies' Table
        (op: its row))"""
        if not self.n:
            return None, None
        rows = {k: concat_parts(v, list(v[0])) if v else None
                for k, v in self.rows.items()}
        self.rows = None
        req = concat_parts(self.ops, _REQ)
        r = rows[REQID]
        if r is not None:
            # the first op_reqid of an op that had none at its enqueue
            o = np.argsort(r["ts"], kind="stable")[::-1]
            late = r["op"][o]
            m = req["req_type"][late] == 0
            for f in _REQ:
                req[f][late[m]] = r[f][o][m]
        keep = np.flatnonzero(req["req_type"] != 0)
        row = np.full(self.n, -1, np.int64)
        row[keep] = np.arange(len(keep))
        out = {f: req.pop(f)[keep] for f in _REQ}
        for f in ("enq", "first"):
            out[f] = concat_parts(self.ops, (f,))[f][keep]
        self.ops = None
        for name, kind, col in (("done", DONE, "ts"),
                                ("repop_ns", REPOP, "repop_ns"),
                                ("repop_at", REPOP, "ts")):
            v = np.full(len(keep), NONE, np.int64)
            x = rows[kind]
            if x is not None:
                m = row[x["op"]] >= 0
                v[row[x["op"]][m]] = x[col][m]
            out[name] = v
        out["dequeued"] = np.zeros(len(keep), bool)
        if rows[DEQ] is not None:
            m = row[rows[DEQ]["op"]] >= 0
            out["dequeued"][row[rows[DEQ]["op"]][m]] = True
        rep = rows[REPLY]
        if rep is not None:
            m = row[rep["op"]] >= 0
            rep = Table(**{k: v[m] for k, v in rep.items()})
            rep.cols["op"] = row[rep.op]
        return Table(**out), rep


def read(cap, skip=()):
    """The ops of capture slot `cap` that carry a request id (client
    ops on their primary, replicas' ops, their replies), but those whose
    message is of a type in `skip` -> (ops Table:
    req_type, req_num, req_inc, req_tid, enq, first (the message's first
    stamp; NONE), done, repop_ns, repop_at (NONE), dequeued, with times
    on the capture's monotonic clock; the replies Table: op (its row),
    peer, wait, read, sent, ts), or (None, None) without ops."""
    c = _Chunked(skip)
    for i, ch in enumerate(cap.chunks(NAMES, cap.first_ns, cap.last_ns)):
        c.feed(cap, ch)
        if i % 16 == 15:
            give_back()
    out = c.result()
    give_back()
    return out
