"""One op end to end (osdstage -r ... --op REQID with a client's trace):
the client's send, reply and completion (rbdrecord's OSD-op events)
joined by request id with the op's rows on its primary and replicas, and
the client's latency split into segments that add up to it.

All times are wall-clock ns: each capture's and trace's own monotonic
stamps moved by its recorded offset, so that captures of different
hosts line up. A network segment computed across two clocks that comes
out negative means the clocks disagree by more than the segment: it is
reported as unknown, with the disagreement, never as a negative time.
A write librbd's cache acknowledged before the OSDs had it has segments
of its own (acked.py): no segment of any op is ever negative.
"""
import numpy as np

from . import acked as ackedmod
from .table import NONE, match, tenths_us

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


KEYS = [k for k, _ in SEGMENTS]
COLS = KEYS + ["total"]
_NET = (KEYS.index("to_osd"), KEYS.index("to_client"))
_PATH = [KEYS.index(k) for k in ("to_osd", "messenger", "osd", "to_client")]
_SINGLE = [j for j in range(len(KEYS)) if j not in _NET]


def segment_columns(t):
    """The segments of many ops at once. t: {name: int64 array} of wall
    ns (NONE where not recorded): "submit", "call_done", "released" of
    the librbd call each op is part of (NONE without one: the segments
    start at the send and end at the op's completion), the client's
    "send", "reply", "done", the primary's "first" (its message's first
    stamp; NONE without stamps), "enq" and "osd_done". -> {"us": ops x
    KEYS (nan: not on the op's path), "unknown": where a network segment
    came out negative (clocks that disagree: not a time), "total_us",
    "disagree_us" (nan: none)}, in us rounded to 0.1; and for writes
    acknowledged early (t's "write", and from the cache's records
    "cw_early", "cw_ts", "cw_held", "cw_release", "cw_done": acked.py)
    "acked", "inferred", their own segments ("acked_us", "behind_us",
    their "_unknown"), "order" (an op whose client events came out of
    an order librbd produces: its segments there unknown)."""
    call = t["call_done"] != NONE
    done = t["done"]
    # the Objecter's handler returns after it has handed the completion
    # on, and librbd may finish the call (and the application read its
    # result) on another thread before that
    op_done = np.where(call & (done != NONE),
                       np.minimum(done, t["call_done"]), done)
    rel = t["released"]
    rel_ok = call & (rel != NONE)
    end_call = np.where(rel_ok & (rel >= t["call_done"]), rel,
                        t["call_done"])
    first = t["first"] != NONE
    to_enq = np.where(first, t["first"], t["enq"])
    spans = [
        ("librbd", t["submit"], t["send"], call),
        ("to_osd", t["send"], to_enq, True),
        ("messenger", t["first"], t["enq"], first),
        ("osd", t["enq"], t["osd_done"], True),
        ("to_client", t["osd_done"], t["reply"], True),
        ("completion", t["reply"], op_done, op_done != NONE),
        ("librbd_done", op_done, t["call_done"], call & (op_done != NONE)),
        ("application", t["call_done"], end_call, rel_ok)]
    n = len(t["send"])
    us = np.full((n, len(KEYS)), np.nan)
    for j, (key, a, b, on) in enumerate(spans):
        if on is True:
            us[:, j] = tenths_us(b - a)
        else:
            i = np.flatnonzero(on)
            us[i, j] = tenths_us(b[i] - a[i])
    net = us[:, _NET]
    unknown = np.zeros(us.shape, bool)
    unknown[:, _NET] = net < 0
    neg = np.where(net < 0, -net, np.nan)
    disagree = np.full(n, np.nan)
    any_neg = (net < 0).any(axis=1)
    disagree[any_neg] = np.nanmax(neg[any_neg], axis=1)
    start = np.where(call, t["submit"], t["send"])
    end = np.where(call, end_call, np.where(done != NONE, done,
                                            t["reply"]))
    total = tenths_us(end - start)
    acked, inferred = ackedmod.which(t)
    extra = ackedmod.columns(t, acked, us[:, _PATH], unknown[:, _NET])
    # an acked write's path is behind its acknowledgement, not in it
    us[acked] = np.nan
    unknown[acked] = False
    # on one clock (the client's, or the primary's) a negative segment is
    # events out of the order they happen in: a link to the wrong op
    neg = us[:, _SINGLE] < 0
    unknown[:, _SINGLE] |= neg
    order = extra.pop("order") | neg.any(axis=1)
    total = np.where(acked, extra.pop("acked_total_us"), total)
    return dict(extra, us=us, unknown=unknown, total_us=total,
                disagree_us=disagree, acked=acked, inferred=inferred,
                order=order)


def _at(v):
    return NONE if v is None else v


def client_segments(client, enq_ns, first_stamp_ns, done_ns):
    """One op's segments (segment_columns for one). client: {"send",
    "reply", "done"} wall ns (done may be None), and "call": {"submit",
    "done", "released" (or None)} of the librbd call the op is part of
    (or None); enq_ns / first_stamp_ns / done_ns: the primary's enqueue,
    its message's first stamp (None without stamps) and its completion,
    wall ns. -> {"segments": [{"segment", "us" or None, "what"}],
    "total_us", "clock_disagreement_us" (or None)}"""
    call = client.get("call") or {}
    t = {"submit": call.get("submit"), "call_done": call.get("done"),
         "released": call.get("released"), "send": client["send"],
         "reply": client["reply"], "done": client["done"],
         "first": first_stamp_ns, "enq": enq_ns, "osd_done": done_ns}
    # the cache's record of the op (cw_*: acked.py), and whether it writes
    t.update(client.get("cache") or {})
    t["write"] = int(bool(client.get("write")))
    seg = segment_columns({k: np.array([_at(v)], np.int64)
                           for k, v in t.items()})
    return {"segments": _segment_list(seg, 0, first_stamp_ns is None),
            "total_us": float(seg["total_us"][0]),
            "acked": _acked_word(seg, 0),
            "clock_disagreement_us": _num(seg["disagree_us"][0])}


def _acked_word(seg, i):
    """None, "acked" (the cache's records say so) or "inferred"."""
    if seg.get("acked") is None or not seg["acked"][i]:
        return None
    return "inferred" if seg["inferred"][i] else "acked"


def _num(x):
    return None if np.isnan(x) else float(x)


def _segment_list(seg, i, no_stamps):
    if seg.get("acked") is not None and seg["acked"][i]:
        return [{"segment": k, "us": None if seg[g + "_unknown"][i, j]
                 else float(seg[g + "_us"][i, j]), "what": w,
                 "group": g}
                for g, segs in (("acked", ackedmod.ACKED_SEGMENTS),
                                ("behind", ackedmod.BEHIND_SEGMENTS))
                for j, (k, w) in enumerate(segs)
                if not np.isnan(seg[g + "_us"][i, j])]
    what = dict(SEGMENTS)
    if no_stamps:
        what["to_osd"] = ("the client's messenger, the network and the "
                          "primary's messenger, to its enqueue (the capture "
                          "has no message stamps)")
    us, unknown = seg["us"][i], seg["unknown"][i]
    return [{"segment": k, "us": None if unknown[j] else float(us[j]),
             "what": what[k]} for j, k in enumerate(KEYS)
            if not np.isnan(us[j])]


def _pct(vals, q):
    return vals[min(len(vals) - 1, int(len(vals) * q))]


def segment_table(seg, rows=None, group="path"):
    """The end-to-end table of the ops `rows` (a mask; None: all) of
    segment_columns()'s result: per segment (in order) its p50, p99 and
    mean over the ops, and its mean over the ops at or above the p99 of
    the total (where the slowest ops' time went); the total's the same.
    Ops with an unknown segment are left out and counted: "unknown" (the
    clocks disagree), "out_of_order" (the client's events); a segment
    not on an op's path counts 0 in it. group: the segments ("path",
    "acked", "behind": acked.group). A column at a time."""
    us, unk, keys_all, what, rank, has_total = ackedmod.group(
        seg, group, SEGMENTS)
    idx = np.arange(len(us)) if rows is None else np.flatnonzero(rows)
    bad = unk[idx].any(axis=1)
    order = bad & seg["order"][idx] if "order" in seg else bad & False
    known = ~bad
    out = {"ops": int(known.sum()), "unknown": int((bad & ~order).sum()),
           "out_of_order": int(order.sum()), "segments": []}
    if not known.any():
        return out
    idx = idx[known]
    # the segments of the op with the most of them (the first such)
    count = np.zeros(len(idx), np.int8)
    for j in range(len(keys_all)):
        count += ~np.isnan(us[idx, j])
    most = idx[int(count.argmax())]
    keys = [k for j, k in enumerate(keys_all) if not np.isnan(us[most, j])]
    total = np.nan_to_num(rank[idx], nan=0.0)
    p99 = _pct(np.sort(total), 0.99)
    tail = total >= p99
    for key in keys + (["total"] if has_total else []):
        col = total if key == "total" else \
            np.nan_to_num(us[idx, keys_all.index(key)], nan=0.0)
        vals = np.sort(col)
        out["segments"].append({
            "segment": key, "what": what.get(key, "the client's latency"),
            "p50_us": round(float(_pct(vals, 0.5)), 1),
            "p99_us": round(float(_pct(vals, 0.99)), 1),
            "mean_us": round(float(vals.mean()), 1),
            "p99_ops_mean_us": round(float(col[tail].mean()), 1)})
    out["p99_ops"] = int(tail.sum())
    return out


def slowest_rows(seg, client_rank, tids, n):
    """The n slowest ops of segment_columns()'s result by the client's
    latency (the call's, as the application saw it), slowest first; ties
    in request id order (client_rank: each op's client's place among the
    "client.N.inc" strings, tids: their tids). -> their row numbers"""
    total = seg["total_us"]
    if len(total) > 4 * n + 64:
        # only the ops as slow as the n-th slowest can be among them
        cut = np.partition(total, len(total) - n)[len(total) - n]
        cand = np.flatnonzero(total >= cut)
    else:
        cand = np.arange(len(total))
    o = np.lexsort((tids[cand], client_rank[cand], -total[cand]))
    return cand[o[:n]]


def slowest_entry(seg, i, **meta):
    """Row i of segment_columns()'s result as --slowest lists it, with
    meta: reqid, kind, primary, object, call."""
    return dict(meta, total_us=float(seg["total_us"][i]),
                clock_disagreement_us=_num(seg["disagree_us"][i]),
                segments={g["segment"]: g["us"]
                          for g in _segment_list(seg, i, False)})


def _from_dicts(per_op):
    """client_segments() results -> segment_columns()-like columns."""
    n = len(per_op)
    us = np.full((n, len(KEYS)), np.nan)
    unknown = np.zeros(us.shape, bool)
    for i, p in enumerate(per_op):
        for g in p["segments"]:
            if g.get("group"):          # an acked write's: not the path's
                continue
            j = KEYS.index(g["segment"])
            if g["us"] is None:
                unknown[i, j] = True
                us[i, j] = -1.0
            else:
                us[i, j] = g["us"]
    return {"us": us, "unknown": unknown,
            "total_us": np.array([p["total_us"] for p in per_op], float),
            "disagree_us": np.array([np.nan if p["clock_disagreement_us"]
                                     is None else p["clock_disagreement_us"]
                                     for p in per_op], float)}


def table(per_op):
    """per_op: [client_segments() results] -> segment_table()'s."""
    return segment_table(_from_dicts(per_op))


def reqid_key(reqid):
    """client.4160.0:14 -> ("client.4160.0", 14): request ids in the
    client's order (its tids as numbers)."""
    client, _, tid = reqid.rpartition(":")
    return (client, int(tid) if tid.isdigit() else 0)


def slowest_calls(per_op, n):
    """per_op: client_segments() results, each with its "reqid", "kind",
    "primary", "object" and "call" -> the n slowest by the client's
    latency (slowest_rows), as slowest_entry() gives them."""
    seg = _from_dicts(per_op)
    keys = [reqid_key(p["reqid"]) for p in per_op]
    rank = np.unique(np.array([k[0] for k in keys]),
                     return_inverse=True)[1].reshape(-1)
    rows = slowest_rows(seg, rank, np.array([k[1] for k in keys],
                                            np.int64), n)
    return [slowest_entry(seg, i, **{k: per_op[i][k] for k in (
        "reqid", "kind", "primary", "object", "call")})
        for i in rows.tolist()]


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


# a replica holds the writes up when it is the last of at least this
# share of them (two replicas each: half by chance) and takes this many
# times the others' time (way there and back, plus its own work) at p50
SLOW_LAST_PCT = 75.0
SLOW_RATIO = 1.2
# ... or when its way there and back alone takes this many times theirs
# (and more than its own work adds) and it is the last of at least this
# share: a slow link adds the same delay to every write, while the
# replicas' own times (their queues, under load) vary from write to write
# by more than that, so its replica is the last less often than one whose
# own queue is slow; and under load those queues can grow past any fixed
# share of the whole time, so the link is judged against the way it adds
# to, not against the whole
SLOW_LINK_LAST_PCT = 200.0 / 3


def replica_columns(rows):
    """replica_segments()-style dicts (with "req": the write's request id,
    "replica", "out_us", "replica_us", "back_us", "wait_us", "last") ->
    the columns replica_table() takes."""
    names = sorted({r["replica"] for r in rows})
    reqs = {}
    nan = (lambda v: np.nan if v is None else v)
    return {"names": names,
            "replica": np.array([names.index(r["replica"]) for r in rows],
                                np.int64),
            "req": np.array([reqs.setdefault(
                r.get("req", ("row", i)), len(reqs))
                for i, r in enumerate(rows)], np.int64),
            "last": np.array([bool(r["last"]) for r in rows], bool),
            **{k: np.array([nan(r[k]) for r in rows], float)
               for k in ("wait_us", "out_us", "replica_us", "back_us")}}


def replica_ways(c, r):
    """Each reply a primary waited for (c: {"j": its op, "peer": the
    replica's osd id, "wait": ns, "seen": wall ns, "within": ns its
    sub-ops' sends can lie before the mark its wait runs from (an
    erasure-coded write's sent_within), "last": the op's last reply?})
    with its replica's op (r: {"j", "osd", "enq": wall ns, "repop": ns};
    the first of each (op, replica): an erasure-coded write's shard sees
    a second, the roll-forward sent after the first one's commit): its
    way out, the replica, its way back -> (replica_table's columns, how
    many the clocks left unknown, how many erasure-coded sub-writes
    reached their shard before the mark the ways run from: their way out
    is not known)."""
    n = len(c["j"])
    at = match((r["j"], r["osd"]), (c["j"], c["peer"])) if r else \
        np.full(n, -1, np.int64)
    out_us, back_us, repl_us = (np.full(n, np.nan) for _ in range(3))
    has = np.flatnonzero(at >= 0)
    enq = r["enq"][at[has]] if len(has) else np.zeros(0, np.int64)
    repop = r["repop"][at[has]] if len(has) else np.zeros(0, np.int64)
    out_ns = enq - (c["seen"][has] - c["wait"][has])
    back_ns = c["seen"][has] - enq - repop
    # the primary preempted after the sends
    late = (back_ns >= 0) & (-c["within"][has] <= out_ns) & (out_ns < 0)
    bad = ~late & ((out_ns < 0) | (back_ns < 0))    # clocks disagree
    ok = ~late & ~bad
    idx = has[ok]
    out_us[idx] = out_ns[ok] / 1000.0
    back_us[idx] = back_ns[ok] / 1000.0
    repl_us[idx] = repop[ok] / 1000.0
    peers = sorted(set(c["peer"].tolist()))
    return ({"names": ["osd.%d" % x for x in peers],
             "replica": np.searchsorted(peers, c["peer"]),
             "req": c["j"], "last": np.asarray(c["last"], bool),
             "wait_us": c["wait"] / 1000.0, "out_us": out_us,
             "replica_us": repl_us, "back_us": back_us},
            int(bad.sum()), int(late.sum()))


def _paired(c, slow):
    """Replica `slow`'s way there and back and own time in each write
    that had another replica, and the other replicas' (their median) in
    the same writes: the same primary and the same moment, so that a slow
    primary's host, which slows every replica's way, is not counted
    against anyone. c: replica_table's columns, the rows with their ways
    known. -> four arrays (empty without such writes)"""
    way_all = c["out_us"] + c["back_us"]
    me = c["replica"] == slow
    # each write's first row of `slow`, and its others
    mine = np.unique(c["req"][me], return_index=True)
    reqs, at = mine[0], np.flatnonzero(me)[mine[1]]
    them = ~me & np.isin(c["req"], reqs)
    reqs = np.intersect1d(reqs, c["req"][them])
    at = at[np.isin(c["req"][at], reqs)]

    def median(v):
        """the others' (upper) median per write of `reqs`"""
        r, x = c["req"][them], v[them]
        o = np.lexsort((x, r))
        r, x = r[o], x[o]
        lo = np.searchsorted(r, reqs, "left")
        hi = np.searchsorted(r, reqs, "right")
        return x[lo + (hi - lo) // 2]
    return (way_all[at], c["replica_us"][at], median(way_all),
            median(c["replica_us"]))


def _p50(v):
    return _pct(np.sort(v), 0.5) if len(v) else 0.0


def replica_table(rows):
    """rows: replica_segments()-style dicts of every write joined, or
    their replica_columns() -> per replica its share of being last and
    the p50 / p99 of each part, and the verdict: which replica held the
    writes up, and whether its time went to the way there and back
    (network, messengers, the reply's queue on the primary) or to the
    replica itself (its queue, its commit)."""
    c = rows if isinstance(rows, dict) else replica_columns(rows)
    known = ~np.isnan(c["out_us"])
    c = {k: v[known] if isinstance(v, np.ndarray) else v
         for k, v in c.items()}
    names = c["names"]
    out = {"replicas": {}, "verdict": None}
    for i, name in enumerate(names):
        m = c["replica"] == i
        if not m.any():
            continue
        d = {"writes": int(m.sum()),
             "last_pct": round(100.0 * float(c["last"][m].sum()) /
                               int(m.sum()), 1)}
        for part in ("out_us", "replica_us", "back_us", "wait_us"):
            v = np.sort(c[part][m])
            d[part[:-3] + "_p50_us"] = round(float(_pct(v, 0.5)), 1)
            d[part[:-3] + "_p99_us"] = round(float(_pct(v, 0.99)), 1)
        v = np.sort(c["out_us"][m] + c["back_us"][m])
        d["way_p50_us"] = round(float(_pct(v, 0.5)), 1)
        out["replicas"][name] = d
    if len(out["replicas"]) < 2:
        return out
    code = {n: i for i, n in enumerate(names)}

    def ratio(k):
        sway, sown, way, own = (_p50(v) for v in _paired(c, code[k]))
        return (sway + sown) / (way + own) if way + own > 0 else 0.0
    # the candidate: of those last often enough, the one slowest against
    # the other replicas of its own writes; else the one last most often
    often = [k for k, d in out["replicas"].items()
             if d["last_pct"] >= SLOW_LAST_PCT]
    slow = max(often, key=ratio) if often else max(
        out["replicas"], key=lambda k: out["replicas"][k]["last_pct"])
    s = out["replicas"][slow]
    sway, sown, way, own = _paired(c, code[slow])
    if not len(sway):   # one replica per write: against the others' p50
        others = [d for k, d in out["replicas"].items() if k != slow]
        sway, sown = [s["way_p50_us"]], [s["replica_p50_us"]]
        way = [sorted(d["way_p50_us"] for d in others)[len(others) // 2]]
        own = [sorted(d["replica_p50_us"] for d in others)[len(others) // 2]]
    sway, sown, way, own = (round(float(_p50(np.asarray(v, float))), 1)
                            for v in (sway, sown, way, own))
    return _verdict(out, slow, s, sway, sown, way, own)


def _held_up(s, sway, sown, way, own):
    """Whether the replica (its replica_table row `s`, its p50s against
    the other replicas' of the same writes) held the writes up: SLOW_*
    above."""
    slow = sway + sown >= SLOW_RATIO * (way + own)
    if s["last_pct"] >= SLOW_LAST_PCT and slow:
        return True
    link = sway >= SLOW_RATIO * way and sway - way >= sown - own
    return s["last_pct"] >= SLOW_LINK_LAST_PCT and link


def _verdict(out, slow, s, sway, sown, way, own):
    extra_way, extra_own = sway - way, sown - own
    if not _held_up(s, sway, sown, way, own):
        out["verdict"] = {
            "replica": None, "cause": None,
            "words": "no replica held the writes up: the last one is "
                     "spread over them (%s), none took %.1f times the "
                     "others' time, nor its way there and back alone %.1f "
                     "times theirs." % (", ".join(
                         "%s %.0f %%" % (k, d["last_pct"]) for k, d in
                         out["replicas"].items()), SLOW_RATIO, SLOW_RATIO)}
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
