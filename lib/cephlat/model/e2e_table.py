"""The end-to-end table (osdstage -r CAPTURES... TRACE): every op of the
clients' traces whose primary is in the captures, its latency split
into segments end to end (e2e.py); per kind of op (reads, writes acked
after the OSDs, writes librbd's cache acknowledged at once, writes it
wrote back) the p50, p99 and where the slowest ops' time went, the
writes the cache acknowledged (cacheview.py), the replicas and their
verdict, and (--slowest) the slowest calls.

Everything as columns (a set of several hosts holds hundreds of
thousands of ops a minute): the clients' ops (rbd/clientops.py:
client_columns) and each capture's ops with request ids
(capture/reqops.py, handed in as CaptureOps one capture at a time),
joined by request id (join), then the table (build_end_to_end); what is
done with is let go before the next part (the replicas' table last).
All times are wall-clock ns."""
from dataclasses import dataclass

import numpy as np

from .acked import CW
from .cacheview import acked_view, flushes, verdict as acked_verdict
from .e2e import (KEYS, NONE, replica_table, replica_ways, reqid_key,
                  segment_columns, segment_table, slowest_entry,
                  slowest_rows)
from .table import Matcher, concat_parts, give_back

CLIENT = 8          # a request id's entity type: client


@dataclass
class CaptureOps:
    """One capture slot's ops with request ids, as capture/reqops.py's
    read gives them: name ("osd.N" or None), ops (its ops Table, or None
    without ops), replies (its replies Table, or None), wall (its
    monotonic ns, an array, -> wall ns: the capture's wall_ns)."""
    name: str
    ops: object
    replies: object
    wall: object


@dataclass
class Join:
    """The clients' ops joined with the captures' (join): client (the
    clients' ops, client_columns'), names (each capture's, in order),
    joined (per client op: its primary found), parts (per capture with
    ops, _capture_part's). build_end_to_end lets client and parts go."""
    client: dict
    names: list
    joined: np.ndarray
    parts: list


@dataclass
class EndToEnd:
    """client_ops: the clients' ops answered and completed; joined: how
    many found their primary; traces: the traces' paths; unfinished:
    {"ops", "reqids"} of ops dequeued and never completed (an error
    reply); kinds: {kind: e2e.segment_table's dict}; replication:
    e2e.replica_table's dict with "unknown" and "sent_late"; clocks: the
    files' clocks (cli/lineup.py); acked: cacheview.acked_view's dict
    with its "verdict" (None without writes the cache acknowledged
    early); flushes: cacheview.flushes' dict (None without writeback);
    slowest: [e2e.slowest_entry's dict] (None when not asked). The parts
    are the JSON object's (model/report-schema.json), as built."""
    client_ops: int
    joined: int
    traces: list
    unfinished: dict
    kinds: dict
    replication: dict = None
    clocks: list = None
    acked: dict = None
    flushes: dict = None
    slowest: list = None

    @property
    def record(self):
        """The JSON object ("end_to_end")."""
        out = {"type": "end_to_end", "client_ops": self.client_ops,
               "joined": self.joined, "traces": self.traces,
               "unfinished": self.unfinished, "kinds": self.kinds,
               "replication": self.replication, "clocks": self.clocks}
        for k in ("acked", "flushes", "slowest"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out


def join(cl, captures):
    """The clients' ops `cl` (rbd/clientops.py: client_columns', at
    least one) joined by request id with the captures' (CaptureOps, an
    iterable read one at a time: each is let go once its part is taken)
    -> Join."""
    keys = Matcher((cl["client"], cl["inc"], cl["tid"]))
    joined = np.zeros(len(cl["send"]), bool)
    names, parts = [], []
    for ci, c in enumerate(captures):
        names.append(c.name)
        if c.ops is not None:
            parts.append(_capture_part(ci, c, keys, joined))
        c = None
        give_back()
    return Join(cl, names, joined, parts)


def build_end_to_end(j, traces, clocks=None, slowest=0):
    """The end-to-end table of Join `j` (at least one op joined) ->
    EndToEnd. traces: the traces' paths; clocks: the files' clocks;
    slowest: how many of the slowest calls to list (0: none). j's client
    columns and parts are let go as they are done with."""
    cl, parts, joined = j.client, j.parts, j.joined
    j.client = None
    p = concat_parts([x["prim"] for x in parts],
                     ("j", "cap", "enq", "osd_done", "first"))
    seg = _segments(cl, p)
    write = cl["write"][p["j"]]
    wb = cl["wb"][p["j"]]
    left = np.unique(np.concatenate([x["unfinished"] for x in parts]))
    left = [_reqid(cl, i) for i in left.tolist() if not joined[i]]
    res = EndToEnd(
        len(cl["send"]), int(joined.sum()), traces,
        {"ops": len(left), "reqids": sorted(left, key=reqid_key)},
        {k: segment_table(seg, m, g) for k, m, g in (
            ("read", ~write, "path"),
            ("write", write & ~seg["acked"] & ~wb, "path"),
            ("write_back", write & ~seg["acked"] & wb, "path"),
            ("write_acked", seg["acked"], "acked")) if m.any()},
        clocks=clocks)
    if seg["acked"].any():
        res.acked = acked_view(seg, cl, p, j.names, seg["acked"])
    if wb.any():
        res.flushes = flushes(cl, p["j"][write & wb])
    give_back()
    if slowest:
        res.slowest = _slowest(slowest, seg, cl, p, j.names, write)
    seg = cl = p = write = None
    give_back()
    rows, unknown, late = replica_ways(
        concat_parts([x["replies"] for x in parts],
                     ("j", "peer", "wait", "seen", "within", "last")),
        concat_parts([x["reps"] for x in parts], ("j", "osd", "enq",
                                                   "repop")))
    parts = j.parts = None
    res.replication = dict(replica_table(rows), unknown=unknown,
                           sent_late=late)
    if res.acked:
        _one_verdict(res.acked, res.replication)
    return res


def _one_verdict(acked, replication):
    """The verdict on the writes the cache acknowledged, and the
    replicas' kept in line with it."""
    v = acked["verdict"] = acked_verdict(acked, replication)
    rv = replication.get("verdict")
    if v["cause"] == "outran" and rv and rv.get("replica") and \
            not v["replica"]:
        # one verdict: under the flood this replica does not stand out
        replication["verdict"] = {
            "replica": None, "cause": "outran",
            "words": "no replica stands out of the queue the client's "
                     "writes built up (see the verdict on the writes "
                     "acked by the cache): %s" % rv["words"]}


def _capture_part(ci, c, keys, joined):
    """Capture c's part of the join (c: CaptureOps with ops): "prim"
    (the clients' ops it completed as their primary, each op's first
    completion: captures in order, the ops joined on an earlier one
    left out; `joined` is set for them), "replies" (their replicas'
    replies), "reps" (the replica ops it ran for the clients' ops: the
    first of each op) and "unfinished" (ops dequeued and never
    completed), wall ns."""
    # (the replies' own ops on the primary: the replies tell it all)
    ops, rep, wall = c.ops, c.replies, c.wall
    j = keys.find((ops.req_num, ops.req_inc, ops.req_tid))
    j[ops.req_type != CLIENT] = -1
    done, repop = ops.done != NONE, ops.repop_ns != NONE
    m = np.flatnonzero((j >= 0) & done)
    m = m[~joined[j[m]]]
    m = m[np.lexsort((ops.done[m], j[m]))]
    m = m[np.concatenate([[True], j[m][1:] != j[m][:-1]])] if len(m) else m
    joined[j[m]] = True
    j = j.astype(np.int32)
    out = {"prim": {"j": j[m], "cap": np.full(len(m), ci, np.int32),
                    "enq": wall(ops.enq[m]), "osd_done": wall(ops.done[m]),
                    "first": np.where(ops.first[m] != NONE,
                                      wall(ops.first[m]), NONE)},
           "replies": _replies(ops, rep, m, j, wall)}
    m = np.flatnonzero((j >= 0) & ~done & repop)
    m = m[np.lexsort((ops.repop_at[m], j[m]))]
    m = m[np.concatenate([[True], j[m][1:] != j[m][:-1]])] if len(m) else m
    out["reps"] = {"j": j[m], "osd": np.full(len(m), _osd_id(c.name),
                                            np.int32),
                   "enq": wall(ops.enq[m]), "repop": ops.repop_ns[m]}
    out["unfinished"] = j[(j >= 0) & ~done & ~repop & ops.dequeued]
    c.ops = c.replies = ops = rep = None
    give_back()
    return out


def _replies(ops, rep, rows, j, wall):
    """The replies the ops `rows` waited for as their primary: the
    client op (j), the replica's osd id, the wait (from the sub-op's
    send), when it was seen (wall ns), the op's sub-ops' spread
    (sent_within) and whether it was the op's last."""
    none = {k: np.zeros(0, np.int64) for k in ("j", "peer", "wait", "seen",
                                              "within", "last")}
    if rep is None or not len(rows):
        return none
    at = np.full(len(ops), -1, np.int64)
    at[rows] = np.arange(len(rows))
    k = at[rep.op]
    m = (k >= 0) & ~rep.read
    k, ts, sent = k[m], rep.ts[m], rep.sent[m]
    top = np.full(len(rows), -1, np.int64)
    np.maximum.at(top, k, ts)
    within = np.zeros(len(rows), np.int64)
    np.maximum.at(within, k, sent)
    return {"j": j[rows][k], "peer": rep.peer[m],
            "wait": np.maximum(0, rep.wait[m] - sent), "seen": wall(ts),
            "within": within[k], "last": ts == top[k]}


def _segments(cl, p):
    """segment_columns() of the joined ops (p), a slice at a time (its
    inputs are nine columns of them)."""
    n = len(p["j"])
    out = {"us": np.empty((n, len(KEYS))), "unknown": np.empty(
        (n, len(KEYS)), bool), "total_us": np.empty(n),
        "disagree_us": np.empty(n)}
    for a in range(0, n, 1 << 17):
        s = slice(a, min(n, a + (1 << 17)))
        j = p["j"][s]
        got = segment_columns(dict(
            _call_times(cl, j), send=cl["send"][j], reply=cl["reply"][j],
            done=cl["done"][j], first=p["first"][s], enq=p["enq"][s],
            osd_done=p["osd_done"][s], write=cl["write"][j],
            **{c: cl[c][j] for c in CW}))
        for k, v in got.items():
            if k not in out:
                out[k] = np.empty((n,) + v.shape[1:], v.dtype)
            out[k][s] = v
        got = None
        give_back()
    return out


def _osd_id(name):
    """osd.3 -> 3 (a capture slot's name), else -1."""
    try:
        return int(name.split(".", 1)[1]) if name.startswith("osd.") \
            else -1
    except (ValueError, AttributeError, IndexError):
        return -1


def _call_times(cl, j):
    """The times of the calls of client ops `j`: submit, call_done,
    released (NONE without a call)."""
    k = cl["call"][j]
    has = k >= 0
    c = cl["calls"]
    return {name: np.where(has, col[np.maximum(k, 0)], NONE)
            if len(c) else np.full(len(j), NONE, np.int64)
            for name, col in (("submit", c.submit), ("call_done", c.done),
                              ("released", c.released))}


def _reqid(cl, i):
    return "client.%d.%d:%d" % (cl["client"][i], cl["inc"][i], cl["tid"][i])


def _slowest(n, seg, cl, p, names, write):
    """--slowest: the n slowest joined ops, as slowest_entry() (names:
    the captures', by p["cap"])."""
    j = p["j"]
    # the clients in their request ids' (strings') order
    who, first, inv = np.unique(
        cl["client"][j] * (int(cl["inc"].max(initial=0)) + 1) +
        cl["inc"][j], return_index=True, return_inverse=True)
    clients = np.array([_reqid(cl, int(j[i])).rpartition(":")[0]
                        for i in first.tolist()])
    rank = np.argsort(np.argsort(clients))[inv.reshape(-1)]
    rows = slowest_rows(seg, rank, cl["tid"][j], n)
    out = []
    for i in rows.tolist():
        k = int(j[i])
        call = None
        if cl["call"][k] >= 0:
            c = cl["calls"]
            r = int(cl["call"][k])
            call = {"op": cl["call_ops"][c.op[r]], "offset": int(c.off[r]),
                    "length": int(c.len[r])}
        out.append(slowest_entry(
            seg, i, reqid=_reqid(cl, k),
            kind=("write, acked early" + (
                " (inferred)" if seg["inferred"][i] else "")
                if seg["acked"][i] else "write") if write[i] else "read",
            primary=names[int(p["cap"][i])],
            object=cl["objects"][int(cl["trace"][k])][int(cl["obj"][k])],
            call=call))
    return out
