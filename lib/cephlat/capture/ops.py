"""Following ops through a capture: each op's record from its events
(OpRec, request ids), the ops a window holds (OpTracker, fed chunk by
chunk), their summary and the slowest of them (OpSummary), and the bound
that lets --slowest follow only the ops that can be among the slowest
(SlowPick). Used by capture/reader.py's Capture."""
import array
import heapq

import numpy as np

from .stream import Chunk, dicts

_ENTITY = {1: "mon", 2: "mds", 4: "osd", 8: "client", 16: "mgr"}


def reqid_name(d):
    """The request id of an op_enqueue event as Ceph prints it
    (client.4123.0:77), or None when the capture has none."""
    t = d.get("req_type")
    if not t:
        return None
    return "%s.%d.%d:%d" % (_ENTITY.get(t, "type%d" % t), d["req_num"],
                            d["req_inc"], d["req_tid"])


def reqid_fields(reqid):
    """reqid_name's inverse: "client.4123.0:77" -> (req_type, req_num,
    req_inc, req_tid), or None when it is not a request id."""
    who, _, tid = reqid.rpartition(":")
    parts = who.split(".")
    types = {v: k for k, v in _ENTITY.items()}
    if len(parts) != 3 or not tid.isdigit() or parts[0] not in types or \
            not parts[1].isdigit() or not parts[2].lstrip("-").isdigit():
        return None
    return types[parts[0]], int(parts[1]), int(parts[2]), int(tid)


def merged_first(r, keys, idx, sub):
    """Where the first of events r[idx] lies in the merged order (and
    after it, `sub`: the order count() adds its keys in for one event)."""
    ts = r["_ts"][idx]
    t = ts.min()
    return (int(t), int(keys[idx][ts == t].min()), sub)


class OpRec:
    """One op's life, pieced together from its events."""
    __slots__ = ("op", "enq_ns", "enq_tid", "deq", "done", "stages", "tid",
                 "listed", "req", "pg", "replies", "local", "repop", "refs",
                 "rank", "enq_seen", "msg", "reads", "sent_us")

    def __init__(self, op, enq_ns, enq_tid, d=None, enq_seen=True):
        """enq_seen: its op_enqueue is in the capture (else enq_ns is
        worked out from its dequeue: enqueued before the capture)."""
        self.op, self.enq_ns, self.enq_tid = op, enq_ns, enq_tid
        self.enq_seen = enq_seen
        self.deq = self.done = None
        self.listed = False
        self.refs = 0             # how many maps of op_stream hold it
        self.rank = None
        self.stages = []
        self.tid = None
        self.req = reqid_name(d) if d else None
        # the PG as Ceph names it: 3.1, or 3.1s0 for an erasure-coded
        # pool's shard
        self.pg = None
        if d and d.get("pg_pool") is not None:
            self.pg = "%d.%x" % (d["pg_pool"], d["pg_seed"])
            if d.get("pg_shard", -1) >= 0:
                self.pg += "s%d" % d["pg_shard"]
        # its messenger stages {stage: ns} (the enqueue event's *_ns
        # fields, when its message's stamps were read), else None
        self.msg = {k[:-3]: v for k, v in d.items() if k.endswith("_ns")} \
            if d and d.get("stamped") else None
        # (peer osd id, ns since its sub-op went out, ts): primary (an
        # erasure-coded write's sub-writes go out after its pipeline's
        # wait, which the replica_reply event's wait_ns holds too)
        self.replies = []
        self.reads = []           # the same, an erasure-coded read's shards
        # an erasure-coded write: its sub-writes went out in the sent_us
        # before the mark its replies' waits start at (its own shard's
        # sub-write, applied right after they were handed on); 0: at it
        self.sent_us = 0
        self.local = None         # own commit event (primary)
        self.repop = None         # repop_done event (a replica op)

    def line_up(self):
        """Put its events' stamps where their own measures say they are.
        The recorder writes a record stamped before the one it wrote last
        on its CPU with that one's stamp (a program interrupted between
        its clock read and its ring reservation: counted as reordered), so
        a stamp can only be late, never early. The dequeue's queue wait,
        the completion's op_total and a replica op's repop time are each
        exact distances from the enqueue the probes saw: the earliest
        enqueue they and its own stamp give is the true one, and each of
        them is that plus its distance."""
        spans = []
        if self.deq:
            spans.append((self.deq, self.deq["queue_wait_ns"]))
        if self.done and self.done["total_valid"]:
            spans.append((self.done, self.done["op_total_ns"]))
        if self.repop and self.repop["repop_ns"]:
            spans.append((self.repop, self.repop["repop_ns"]))
        enq = min([self.enq_ns] + [d["ts"] - s for d, s in spans])
        self.enq_ns = enq
        for d, s in spans:
            d["ts"] = enq + s

    def partial(self):
        """Why the capture holds only part of this op, in words, or None:
        its enqueue came before the capture began, or it completed
        without a dequeue in the capture."""
        if not self.enq_seen:
            return "enqueued before the capture began"
        if self.done and not self.deq:
            return "completed, but its dequeue is not in the capture"
        return None

    def kind(self):
        """client (completed as a client op), repop (a replica op) or
        None (not known: not completed in the capture, or another op)."""
        return "client" if self.done else "repop" if self.repop else None

    def key_ns(self):
        if self.done and self.done["total_valid"]:
            return self.done["op_total_ns"]
        return self.deq["queue_wait_ns"] if self.deq else 0

    def op_class(self, rules):
        return rules.label("op_class", self.done["op_class"]) \
            if self.done else None


def op_end(o):
    """When op `o` ends for the timeline: done, else its last stage, else
    its dequeue."""
    return o.done["ts"] if o.done else (o.stages[-1][2] if o.stages else
                                        o.deq["ts"])


def _only_ops(ch, cids, addrs):
    """(records, keys) of chunk ch's classes cids: only the events naming
    one of addrs (sorted)."""
    recs, keys = {}, {}
    for c in cids:
        r = ch.recs.get(c)
        if r is None:
            continue
        if len(addrs):
            j = np.minimum(np.searchsorted(addrs, r["op"]), len(addrs) - 1)
            m = addrs[j] == r["op"]
        else:
            m = np.zeros(len(r), bool)
        recs[c], keys[c] = r[m], ch.keys[c][m]
    return recs, keys


class OpSummary:
    """What a window's ops are needed for, kept without holding them all:
    the n slowest (op_total, else queue_wait; ties: the first to enter
    the window), the slowest of all, and when each op was (for the
    timeline, which picks its ops once it knows its window; spans=False:
    no timeline, not kept)."""

    def __init__(self, n, spans=True):
        self.n = max(n, 1)
        self.heap = []          # ((key, -rank), rank, op): the slowest
        self.keep_spans = spans
        self.spans = array.array("q")   # rank, enq_ns, end per op
        self.addrs = array.array("Q")   # op address per op
        self.count = 0

    def add(self, o, ranked=True):
        """ranked: o is among the window's ops for the slowest (the stage
        it is ranked by ends in the window); else only its span is kept
        (the timeline draws every op it overlaps)."""
        if ranked:
            self.count += 1
            k = (o.key_ns(), -o.rank)
            if len(self.heap) < self.n:
                heapq.heappush(self.heap, (k, o.rank, o))
            elif k > self.heap[0][0]:
                heapq.heapreplace(self.heap, (k, o.rank, o))
        if not self.keep_spans:
            return
        try:
            end = op_end(o)
        except (TypeError, KeyError):
            end = -1
        self.spans.extend((o.rank, o.enq_ns, end))
        self.addrs.append(o.op)

    def by_rank(self):
        """The kept ops in the order they entered the window."""
        return [o for _, _, o in sorted(self.heap, key=lambda x: x[1])]

    def slowest(self):
        """The slowest op (the first to enter the window of equals)."""
        return max(self.heap, key=lambda x: x[0])[2] if self.heap else None

    def overlapping(self, a, b):
        """{(op address, enqueue ns): rank} of the ops whose span meets
        [a, b]."""
        assert self.keep_spans
        sp = np.frombuffer(self.spans, dtype=np.int64).reshape(-1, 3)
        hit = np.nonzero((sp[:, 1] <= b) & (sp[:, 2] >= a))[0]
        addrs = np.frombuffer(self.addrs, dtype=np.uint64)
        return dict(zip(zip(addrs[hit].tolist(), sp[hit, 1].tolist()),
                        sp[hit, 0].tolist()))


class SlowPick:
    """Which op addresses may hold one of the n slowest ops of [t0, t1]
    (OpRec.key_ns: op_total, else queue_wait), found from the dequeue and
    completion events alone, so that OpTracker need follow no other op.
    The bound: the n-th largest queue wait of the window's dequeues, or
    if larger the n-th largest valid total of its completions (of ops
    enqueued in the capture: OpTracker lists no other); each is n ops'
    (an op's key is its total, or its queue wait, which its total
    includes). Candidates: every address with an event at the bound or
    over it: an op whose key reaches the bound names one, whether or not
    the bound was right. holds() checks the bound on what was found: n
    ops, all at the bound or over it, are the n slowest of all (every
    other op's key is under it); else the caller follows every op."""

    def __init__(self, cap, t0, t1, n):
        self.t0, self.t1, self.n = t0, t1, n
        self.first = cap.first_ns
        self.deq = cap._cid.get("op_dequeue")
        self.done = cap._cid.get("op_done")
        # the n largest queue waits, totals of the window so far
        self.top = {self.deq: np.zeros(0, np.int64),
                    self.done: np.zeros(0, np.int64)}
        self.parts, self.held = [], 0       # (addresses, values) kept

    def floor(self):
        return max([int(t.min()) for t in self.top.values()
                    if len(t) >= self.n] or [0])

    def feed(self, c, r):
        if c == self.deq:
            v = r["queue_wait_ns"].astype(np.int64)
            bound = v
        elif c == self.done:
            v = np.where(r["total_valid"] != 0, r["op_total_ns"],
                         0).astype(np.int64)
            # an op enqueued before the capture is listed by nobody
            bound = np.where(r["_ts"].astype(np.int64) - v >= self.first,
                             v, 0)
        else:
            return
        ts = r["_ts"]
        w = bound[(ts >= self.t0) & (ts <= self.t1)]
        if len(w):
            top = np.concatenate([self.top[c], w])
            if len(top) > self.n:
                top = np.partition(top, len(top) - self.n)[-self.n:]
            self.top[c] = top
        m = v >= self.floor()
        self.parts.append((r["op"][m], v[m]))
        self.held += int(m.sum())
        if self.held > 1 << 20:
            self._trim()

    def _trim(self):
        f = self.floor()
        a = np.concatenate([x[0] for x in self.parts])
        v = np.concatenate([x[1] for x in self.parts])
        m = v >= f
        a, v = a[m], v[m]
        o = np.lexsort((v, a))          # each address once: its largest
        a, v = a[o], v[o]
        tail = np.ones(len(a), bool)
        tail[:-1] = a[1:] != a[:-1]
        self.parts = [(a[tail], v[tail])]
        self.held = int(tail.sum())

    def addresses(self):
        """The candidates' addresses (sorted), or None: all of them."""
        if self.floor() <= 0:
            return None
        self._trim()
        return self.parts[0][0]

    def holds(self, summary):
        keys = [o.key_ns() for _, _, o in summary.heap]
        return len(keys) == self.n and min(keys) >= self.floor()


class OpTracker:
    """Ops pieced together from their events, fed a chunk at a time: the
    ops dequeued or completed in [t0, t1], or with a call stage ending in
    it (those `keep` accepts), with
    their call stages: those naming the op (format 2: the op the thread
    was executing), else (older captures) those its worker ran between
    its dequeue and its next one. Only ops something may still change
    are held: feed() and finish() give (listing rank, OpRec) of the
    others, ranks in the order ops entered the window."""

    def __init__(self, cap, t0, t1, keep=None, only=None):
        """only: the op addresses (sorted array) to follow (None: all;
        SlowPick). Events of one address are followed all or none: what
        an op is made of is the same either way."""
        self.cap, self.t0, self.t1, self.keep = cap, t0, t1, keep
        self.only = only
        self.live, self.last_on, self.latest = {}, {}, {}
        self.rank = 0
        self.held = 0           # listed ops something may still change
        self.done = []
        self.stop = False
        self.refs = cap._last_refs(only)

    def _drop(self, o):
        if o is None:
            return
        o.refs -= 1
        if o.refs == 0 and o.listed:
            self.held -= 1
            self.done.append((o.rank, o))

    def _put(self, m, k, o):
        o.refs += 1
        self._drop(m.get(k))
        m[k] = o

    def _list(self, o):
        if self.keep is not None and not self.keep(o):
            return
        o.listed, o.rank = True, self.rank
        self.rank += 1
        self.held += 1

    def _rows(self, ch):
        """(name, ts, fields, whether no later event names its op
        address) of a chunk's op events, in time order. Fields: a dict of
        every field for the events an OpRec keeps (op_dequeue, op_done,
        repop_done, local_commit); for the others only what feed() reads:
        op_enqueue (op, tid, its fields when it carries a request id,
        else None), stage (op or None, tid, stage, duration_ns),
        replica_reply (op, peer, wait_ns, read, sent_us)."""
        cap = self.cap
        addrs, lts, lkeys = self.refs
        cids = [cap._cid[n] for n in cap.OP_EVENTS if n in cap._cid]
        if self.only is not None:
            ch = Chunk(*_only_ops(ch, cids, self.only))
        cids, o = ch.order(cids)
        if not cids:
            return
        bpf = cap._bpf
        rows, names = [], []
        for c in cids:
            r, k = ch.recs[c], ch.keys[c]
            fields = r.dtype.names
            if "op" in fields and len(addrs):
                j = np.minimum(np.searchsorted(addrs, r["op"]),
                               len(addrs) - 1)
                last = (addrs[j] == r["op"]) & (lts[j] == r["_ts"]) & \
                    (lkeys[j] == k)
            else:
                last = np.zeros(len(r), bool)
            name = bpf[c]
            if name == "op_enqueue":
                ds = [None] * len(r)
                if "req_type" in fields:
                    # a request id: OpRec reads it from the fields; an
                    # erasure-coded PG's op may learn its own later
                    # (op_reqid), its PG is read here
                    full = np.nonzero((r["req_type"] != 0) |
                                      (r["pg_shard"] >= 0))[0]
                    for i, d in zip(full.tolist(), dicts(
                            r[full], cap.trace.classes[c].names)):
                        ds[i] = d
                vals = zip(r["op"].tolist(), r["tid"].tolist(), ds)
            elif name == "stage":
                vals = zip(r["op"].tolist() if "op" in fields else
                           [None] * len(r), r["tid"].tolist(),
                           r["stage"].tolist(), r["duration_ns"].tolist())
            elif name == "replica_reply":
                old = [0] * len(r)          # fields not in older captures
                vals = zip(r["op"].tolist(), r["peer"].tolist(),
                           r["wait_ns"].tolist(),
                           r["read"].tolist() if "read" in fields else old,
                           r["sent_us"].tolist() if "sent_us" in fields
                           else old)
            else:
                vals = dicts(r, cap.trace.classes[c].names)
            rows.extend(zip(r["_ts"].tolist(), vals, last.tolist()))
            names.extend([name] * len(r))
        for i in o.tolist():
            ts, d, last = rows[i]
            yield names[i], ts, d, last

    def feed(self, ch):
        live, last_on, latest = self.live, self.last_on, self.latest
        put, drop, listed = self._put, self._drop, self._list
        t0, t1 = self.t0, self.t1
        label = self.cap.rules.label
        for name, ts, d, last in self._rows(ch):
            if ts > t1 and not self.held:
                self.stop = True    # nothing listed can change any more
                break
            if name == "op_enqueue":
                op, tid, fields = d
                o = OpRec(op, ts, tid, fields)
                put(live, op, o)
                put(latest, op, o)
            elif name == "op_dequeue":
                op = d["op"]
                o = live.get(op)
                if o is None:                   # enqueued before the capture
                    o = OpRec(op, ts - d["queue_wait_ns"], d["enq_tid"],
                              enq_seen=False)
                    put(live, op, o)
                    put(latest, op, o)
                d["ts"] = ts
                o.deq, o.tid = d, d["tid"]
                o.line_up()
                put(last_on, d["tid"], o)
                if t0 <= ts <= t1 and not o.listed:
                    listed(o)
            elif name == "stage":
                # an address is reused only once its op is freed, after the
                # call stages of its worker: the latest op there is it
                op, tid, stage, dur = d
                o = latest.get(op) if op is not None else last_on.get(tid)
                if o is not None:
                    o.stages.append((label("stage", stage), ts - dur, ts))
                    # a stage ending in the window is the window's, its
                    # op's dequeue and completion outside it or not
                    if t0 <= ts <= t1 and not o.listed:
                        listed(o)
            elif name in ("op_done", "repop_done"):
                op = d["op"]
                o = live.pop(op, None)
                if o is not None:
                    d["ts"] = ts
                    if name == "op_done":
                        o.done = d
                    else:
                        o.repop = d
                    o.line_up()
                    if not o.listed and t0 <= ts <= t1:
                        listed(o)
                    drop(o)
            elif name == "replica_reply":
                op, peer, wait, read, sent_us = d
                o = live.get(op)
                if o is not None:
                    (o.reads if read else o.replies).append(
                        (peer, max(0, wait - sent_us * 1000), ts))
                    if not read:
                        o.sent_us = max(o.sent_us, sent_us)
            elif name == "op_reqid":
                # a sub-write's request id, told once its shard applied it
                op = d["op"]
                o = live.get(op)
                if o is not None and o.req is None:
                    o.req = reqid_name(d)
                    if not o.listed and o.deq and \
                            t0 <= o.deq["ts"] <= t1:
                        listed(o)
            elif name == "local_commit":
                op = d["op"]
                o = live.get(op)
                if o is not None:
                    d["ts"] = ts
                    o.local = d
            else:
                op = d["op"]
            if last:
                # no later event names this address: what it holds is
                # final (the op may still be its worker's, below)
                drop(live.pop(op, None))
                drop(latest.pop(op, None))
        out, self.done = self.done, []
        return out

    def finish(self):
        seen, out = set(), self.done
        for m in (self.live, self.latest, self.last_on):
            for o in m.values():
                if o.listed and id(o) not in seen:
                    seen.add(id(o))
                    out.append((o.rank, o))
        out.sort(key=lambda x: x[0])
        self.done = []
        return out
