"""One op end to end (osdstage -r ... --op REQID with a client's trace):
the client's send, reply and completion (rbdrecord's OSD-op events)
joined by request id with the op's rows on its primary and replicas, and
the client's latency split into segments that add up to it.

All times are wall-clock ns: each capture's and trace's own monotonic
stamps moved by its recorded offset, so that captures of different
hosts line up. A network segment computed across two clocks that comes
out negative means the clocks disagree by more than the segment: it is
reported as unknown, with the disagreement, never as a negative time.
"""
from array import array

import numpy as np

# the segments, in order: (key, what it holds)
SEGMENTS = [
    ("librbd", "the librbd call to the op's send: librbd's own work and "
               "queues, the Objecter's"),
    ("to_osd", "the client's messenger and the network, to the message's "
               "first stamp on the primary"),
    ("messenger", "the primary's messenger: first stamp to its enqueue"),
    ("osd", "the primary: queue, execute, replicas, to its reply"),
    ("to_client", "the reply: the network and the client's messenger"),
    ("completion", "the Objecter handling the reply and handing the op's "
                   "completion on (to the call's end when librbd finished "
                   "the call before the Objecter's handler returned)"),
    ("librbd_done", "librbd's completion of the call after the Objecter's "
                    "handler returned, to the application's callback"),
    ("application", "the application's callback to its taking the result "
                    "(rbd_aio_release: fio, when it reaps the completion)"),
]


def client_segments(client, enq_ns, first_stamp_ns, done_ns):
    """client: {"send", "reply", "done"} wall ns (done may be None), and
    "call": {"submit", "done", "released" (or None)} of the librbd call
    the op is part of (or None: the segments start at the send and end
    at the op's completion);
    enq_ns / first_stamp_ns / done_ns: the primary's enqueue, its
    message's first stamp (None without stamps) and its completion, wall
    ns. -> {"segments": [{"segment", "us" or None, "what"}],
    "total_us", "clock_disagreement_us" (or None)}"""
    call = client.get("call")
    op_done = client["done"]
    if call and op_done is not None:
        # the Objecter's handler returns after it has handed the
        # completion on, and librbd may finish the call (and the
        # application read its result) on another thread before that
        op_done = min(op_done, call["done"])
    marks = ([("librbd", call["submit"])] if call else []) + [
        ("to_osd", client["send"]),
        ("messenger", first_stamp_ns if first_stamp_ns is not None
         else enq_ns),
        ("osd", enq_ns), ("to_client", done_ns),
        ("completion", client["reply"])] + (
        [("librbd_done", op_done)] + (
            [("application", call["done"])]
            if call.get("released") is not None else []) +
        [(None, _released(call))] if call
        else [(None, client["done"])])
    if first_stamp_ns is None:
        marks = [m for m in marks if m[0] != "messenger"]
    what = dict(SEGMENTS)
    if first_stamp_ns is None:
        what["to_osd"] = ("the client's messenger, the network and the "
                          "primary's messenger, to its enqueue (the capture "
                          "has no message stamps)")
    segs, worst = [], None
    for (key, a), (_, b) in zip(marks, marks[1:]):
        if a is None or b is None:
            continue
        us = (b - a) / 1000.0
        if us < 0 and key in ("to_osd", "to_client"):
            worst = min(worst or 0.0, us)
            us = None
        segs.append({"segment": key, "us": None if us is None else
                     round(us, 1), "what": what[key]})
    start = call["submit"] if call else client["send"]
    end = _released(call) if call else client["done"] \
        if client["done"] is not None else client["reply"]
    return {"segments": segs,
            "total_us": round((end - start) / 1000.0, 1),
            "clock_disagreement_us": None if worst is None else
            round(-worst, 1)}


def _released(call):
    """When the application took the call's result: its release when
    recorded after the callback, else the callback."""
    rel = call.get("released")
    return rel if rel is not None and rel >= call["done"] else call["done"]


def replica_segments(story):
    """Per replica of the story's primary row: the sub-op's way out
    (sub-ops sent -> the replica's enqueue: both messengers and the
    network), the replica (enqueue -> its commit reply sent), the way
    back (-> the primary handling the reply: the network, the primary's
    messenger and the reply's own queue) and which replica was last.
    Story-relative us, as the rows have them. -> [dict] ([] when the
    story has no primary row with replies)."""
    prim = next((r for rows in story["osds"].values() for r in rows
                 if r["role"] == "primary" and r.get("replies")), None)
    if prim is None:
        return []
    base = prim["enqueued_at_us"]
    # an erasure-coded write's ways run from a mark just after the sends,
    # which lie up to this much before it (docs/stages.md)
    within = prim.get("sent_within_us", 0)
    last = max(prim["replies"], key=lambda r: r["at_us"])["peer"]
    out = []
    for rep in prim["replies"]:
        sent = base + rep["at_us"] - rep["wait_us"]
        seen = base + rep["at_us"]
        row = next((r for r in story["osds"].get(rep["peer"], [])
                    if r["role"] == "replica"), None)
        seg = {"replica": rep["peer"], "wait_us": rep["wait_us"],
               "last": rep["peer"] == last, "out_us": None,
               "replica_us": None, "back_us": None}
        if row is not None and row.get("repop_us") is not None:
            enq = row["enqueued_at_us"]
            way = (round(enq - sent, 1), round(seen - enq - row["repop_us"],
                                               1))
            if way[1] >= 0 and -within <= way[0] < 0:
                # an erasure-coded write whose primary thread was
                # preempted between the sends and the mark: the way out
                # is not known, the rest is
                seg["sent_late_us"] = -way[0]
                seg["back_us"], seg["replica_us"] = way[1], row["repop_us"]
            elif min(way) < 0:      # across two clocks that disagree
                seg["clock_disagreement_us"] = -min(way)
            else:
                seg["out_us"], seg["back_us"] = way
                seg["replica_us"] = row["repop_us"]
        out.append(seg)
    return out


def _pct(vals, q):
    return vals[min(len(vals) - 1, int(len(vals) * q))]


class SegmentTable:
    """The end-to-end table built op by op, in fixed memory per op: each
    joined op's segments as one row of numbers (a set of several hosts'
    captures holds hundreds of thousands of ops a minute; their
    client_segments() dicts would take kilobytes each), and the `n`
    slowest ops whole for --slowest. add() each op, then table() and
    slowest()."""
    COLS = [k for k, _ in SEGMENTS] + ["total"]

    def __init__(self, n=0):
        self.rows = array("d")          # len(COLS) numbers per whole op
        self.unknown = 0
        self.keys = []                  # the longest segment list seen
        self.n = n
        self.top = []                   # candidates for slowest()

    def __len__(self):
        """The ops added (those with an unknown segment too)."""
        return len(self.rows) // len(self.COLS) + self.unknown

    def add(self, p):
        """p: a client_segments() result (with "reqid", "kind", "primary",
        "object" and "call" for slowest())."""
        if self.n:
            self.top.append(p)
            if len(self.top) >= 4 * self.n + 64:
                self.top = sorted(self.top, key=_slow_key)[:self.n]
        segs = p["segments"]
        if any(g["us"] is None for g in segs):
            self.unknown += 1
            return
        if len(segs) > len(self.keys):
            self.keys = [g["segment"] for g in segs]
        row = dict.fromkeys(self.COLS, 0.0)
        row.update((g["segment"], g["us"]) for g in segs)
        row["total"] = p["total_us"]
        self.rows.extend(row[k] for k in self.COLS)

    def table(self):
        """-> table()'s result over the ops added."""
        m = np.frombuffer(self.rows, dtype=np.float64).reshape(
            -1, len(self.COLS))
        out = {"ops": len(m), "unknown": self.unknown, "segments": []}
        if not len(m):
            return out
        col = {k: m[:, i] for i, k in enumerate(self.COLS)}
        p99 = _pct(np.sort(col["total"]), 0.99)
        tail = col["total"] >= p99
        what = dict(SEGMENTS)
        for key in self.keys + ["total"]:
            vals = np.sort(col[key])
            out["segments"].append({
                "segment": key, "what": what.get(key, "the client's latency"),
                "p50_us": round(float(_pct(vals, 0.5)), 1),
                "p99_us": round(float(_pct(vals, 0.99)), 1),
                "mean_us": round(float(vals.mean()), 1),
                "p99_ops_mean_us": round(float(col[key][tail].mean()), 1)})
        out["p99_ops"] = int(tail.sum())
        return out

    def slowest(self):
        """-> slowest_calls()'s result: the n slowest ops added."""
        return [{"reqid": p["reqid"], "kind": p["kind"],
                 "primary": p["primary"], "object": p["object"],
                 "call": p["call"], "total_us": p["total_us"],
                 "clock_disagreement_us": p["clock_disagreement_us"],
                 "segments": {g["segment"]: g["us"] for g in p["segments"]}}
                for p in sorted(self.top, key=_slow_key)[:self.n]]


def table(per_op):
    """per_op: [client_segments() results] of every op joined -> the
    end-to-end table: per segment (in order) its p50, p99 and mean over
    all ops, and its mean over the ops at or above the p99 of the total
    (where the slowest ops' time went); the total's the same. Ops with
    an unknown segment (clocks) are left out and counted."""
    t = SegmentTable()
    for p in per_op:
        t.add(p)
    return t.table()


def reqid_key(reqid):
    """client.4160.0:14 -> ("client.4160.0", 14): request ids in the
    client's order (its tids as numbers)."""
    client, _, tid = reqid.rpartition(":")
    return (client, int(tid) if tid.isdigit() else 0)


def _slow_key(p):
    return (-p["total_us"],) + reqid_key(p["reqid"])


def slowest_calls(per_op, n):
    """per_op: client_segments() results, each with its "reqid", "kind",
    "primary", "object" and "call" -> the n slowest by the client's
    latency (the call's, as the application saw it), slowest first;
    ops of one call (one per object it spans) are ranked by the call's
    latency, and ties keep their request ids' order."""
    t = SegmentTable(n)
    for p in per_op:
        t.add(p)
    return t.slowest()


# a replica holds the writes up when it is the last of at least this
# share of them (two replicas each: half by chance) and takes this many
# times the others' time (way there and back, plus its own work) at p50
SLOW_LAST_PCT = 75.0
SLOW_RATIO = 1.2


class ReplicaRow:
    """One reply a primary waited for, as replica_table() takes it: read
    like the dict it stands for (row["out_us"]); a small object, as a set
    of several hosts holds one per replica of every write."""
    __slots__ = ("req", "replica", "wait_us", "last", "out_us",
                 "replica_us", "back_us")

    def __init__(self, req, replica, wait_us, last, out_us=None,
                 replica_us=None, back_us=None):
        self.req, self.replica, self.wait_us, self.last = (
            req, replica, wait_us, last)
        self.out_us, self.replica_us, self.back_us = (
            out_us, replica_us, back_us)

    def __getitem__(self, key):
        return getattr(self, key)

    def get(self, key, default=None):
        return getattr(self, key, default)


def _paired(rows, slow):
    """`slow`'s way there and back and own time in each write that had
    another replica, and the other replicas' (their median) in the same
    writes: the same primary and the same moment, so that a slow
    primary's host, which slows every replica's way, is not counted
    against anyone. -> four lists (empty without such writes)"""
    by = {}
    for i, r in enumerate(rows):
        if r["out_us"] is not None:
            req = r.get("req")
            by.setdefault(("row", i) if req is None else req, []).append(r)
    sway, sown, way, own = [], [], [], []
    for rs in by.values():
        me = next((r for r in rs if r["replica"] == slow), None)
        them = [r for r in rs if r["replica"] != slow]
        if me is None or not them:
            continue
        sway.append(me["out_us"] + me["back_us"])
        sown.append(me["replica_us"])
        w = sorted(r["out_us"] + r["back_us"] for r in them)
        o = sorted(r["replica_us"] for r in them)
        way.append(w[len(w) // 2])
        own.append(o[len(o) // 2])
    return sway, sown, way, own


def replica_table(rows):
    """rows: replica_segments()-style dicts of every write joined (with
    "req" (the write's request id), "replica", "out_us", "replica_us",
    "back_us", "wait_us", "last") ->
    per replica its share of being last and the p50 / p99 of each part,
    and the verdict: which replica held the writes up, and whether its
    time went to the way there and back (network, messengers, the reply's
    queue on the primary) or to the replica itself (its queue, its
    commit)."""
    per = {}
    for r in rows:
        if r["out_us"] is None:
            continue
        per.setdefault(r["replica"], []).append(r)
    out = {"replicas": {}, "verdict": None}
    for name, rs in sorted(per.items()):
        d = {"writes": len(rs),
             "last_pct": round(100.0 * sum(r["last"] for r in rs) /
                               len(rs), 1)}
        for part in ("out_us", "replica_us", "back_us", "wait_us"):
            v = sorted(r[part] for r in rs)
            d[part[:-3] + "_p50_us"] = round(_pct(v, 0.5), 1)
            d[part[:-3] + "_p99_us"] = round(_pct(v, 0.99), 1)
        v = sorted(r["out_us"] + r["back_us"] for r in rs)
        d["way_p50_us"] = round(_pct(v, 0.5), 1)
        out["replicas"][name] = d
    if len(out["replicas"]) < 2:
        return out
    def ratio(k):
        sway, sown, way, own = (_pct(sorted(v), 0.5) if v else 0.0
                                for v in _paired(rows, k))
        return (sway + sown) / (way + own) if way + own > 0 else 0.0
    # the candidate: of those last often enough, the one slowest against
    # the other replicas of its own writes; else the one last most often
    often = [k for k, d in out["replicas"].items()
             if d["last_pct"] >= SLOW_LAST_PCT]
    slow = max(often, key=ratio) if often else max(
        out["replicas"], key=lambda k: out["replicas"][k]["last_pct"])
    s = out["replicas"][slow]
    sway, sown, way, own = _paired(rows, slow)
    if not sway:        # one replica per write: against the others' p50
        others = [d for k, d in out["replicas"].items() if k != slow]
        sway, sown = [s["way_p50_us"]], [s["replica_p50_us"]]
        way = [sorted(d["way_p50_us"] for d in others)[len(others) // 2]]
        own = [sorted(d["replica_p50_us"] for d in others)[len(others) // 2]]
    sway, sown, way, own = (round(_pct(sorted(v), 0.5), 1)
                            for v in (sway, sown, way, own))
    extra_way, extra_own = sway - way, sown - own
    if s["last_pct"] < SLOW_LAST_PCT or sway + sown < \
            SLOW_RATIO * (way + own):
        out["verdict"] = {
            "replica": None, "cause": None,
            "words": "no replica held the writes up: the last one is "
                     "spread over them (%s), none took %.1f times the "
                     "others' time." % (", ".join(
                         "%s %.0f %%" % (k, d["last_pct"]) for k, d in
                         out["replicas"].items()), SLOW_RATIO)}
        return out
    where = "network" if extra_way >= extra_own else "replica"
    out["verdict"] = {
        "replica": slow, "last_pct": s["last_pct"], "cause": where,
        "way_p50_us": sway, "others_way_p50_us": way,
        "replica_p50_us": sown, "others_replica_p50_us": own,
        "words": "%s was the last replica of %.0f %% of its writes: its way "
                 "there and back took %.0f us at p50 against %.0f us for "
                 "the other replicas of the same writes (the network, the "
                 "messengers, the reply's queue on the primary), its own "
                 "work (queue, commit) %.0f us against %.0f us: the time "
                 "went to %s." % (
                     slow, s["last_pct"], sway, way, sown, own,
                     "the network, not to its queue" if where == "network"
                     else "the replica itself (its queue and commit), not "
                     "to the network")}
    return out
