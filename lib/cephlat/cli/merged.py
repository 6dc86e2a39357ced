"""Several captures (one per host) and clients' traces read as one
(osdstage -r A.ctf B.ctf client.ctf), their clocks lined up (cli/lineup.py):
one op's story end to end (--op REQID), and the end-to-end table of every
client call (and --slowest)."""
import os
import sys

import numpy as np

from ..errors import UserError
from ..model.e2e import (KEYS, NONE, client_segments, replica_segments,
                         replica_table, replica_ways, reqid_key,
                         segment_columns,
                         segment_table, slowest_entry, slowest_rows)
from ..model.interval import RunInfo
from ..model.schema import json_line
from ..model.table import Matcher, Table, concat_parts, give_back
from ..model.slowest import op_row
from ..render.text import print_end_to_end, print_op_story
from ..capture import reqops
from ..ceph import messages, objecter
from ..rbd.cache import STATES, ops_early
from ..rbd.columns import CALL_OPS
from .cacheview import acked_view, flushes, verdict as acked_verdict
from .windows import bound, end_ns, host_pictures, window_record


def op_story(args, out, caps, err=None, traces=(), clocks=None):
    """--op REQID: every op with that request id on every OSD of every
    capture: the client op on its primary (with its replicas' replies),
    the replica ops; with a client's trace that sent it, the client's
    send, reply and completion, and its latency split end to end. Times
    from the first event, on the wall clock (captures of several hosts)."""
    client = _client_op(traces, args.op_reqid)
    if not (args.html or args.perfetto or getattr(args, "otlp", None)):
        # the pictures draw the clients' other ops; the story needs no
        # more of the traces than this op (tens of MB a long trace)
        for t in traces:
            t.cols = None
        give_back()
    story, found, t0 = build_story(args.op_reqid, caps, client, clocks)
    if story is None:
        firsts = [c.first_op(c.first_ns, c.last_ns) for c in caps]
        if not any(o.req for o in firsts if o is not None):
            raise UserError("%s carries no request ids (recorded by an "
                            "older osdstage or without a probe table for "
                            "them)" % args.read)
        raise UserError("no op %s in %s (see --slowest for request ids)" % (
            args.op_reqid, args.read))
    if args.json:
        out.write(json_line(story))
    else:
        print_op_story(out, story)
    if args.html or args.perfetto:     # a timeline centred on the request
        _story_pictures(args, err, caps, traces, found, t0)
    return 0


def build_story(reqid, caps, client=None, clocks=None):
    """The story of request id `reqid` (client: its op in the clients'
    traces, _client_op's) -> (the story dict, {osd: (capture, ops)}, its
    time 0 on the wall clock), or (None, {}, None) when no capture has
    it."""
    found = {}
    for c in caps:
        rows = c.ops_of(reqid)
        if rows:
            found[c.name or "pid %d" % c.pid] = (c, rows)
    if not found:
        return None, found, None
    t0 = min(_wall_ns(c, o.enq_ns) for c, rows in found.values()
             for o in rows)
    if client:
        t0 = min(t0, client["call"]["submit"] if client["call"] else
                 client["send"])
    story = {"type": "op", "reqid": reqid, "osds": {}}
    if clocks is not None:
        story["clocks"] = clocks
    primary_at = None
    for name, (c, rows) in found.items():
        story["osds"][name] = []
        primary = any(o.done or o.replies for o in rows)
        for o in sorted(rows, key=lambda o: o.enq_ns):
            row = op_row(c, o)
            # a replica's reply is an op of its own on the primary
            row["role"] = "primary" if o.done or o.replies else \
                "replica" if o.repop else "reply" if primary else "other"
            row["enqueued_at_us"] = round((_wall_ns(c, o.enq_ns) - t0) /
                                          1000, 1)
            story["osds"][name].append(row)
            if o.pg and (row["role"] == "primary" or "pg" not in story):
                story["pg"] = o.pg.split("s")[0]    # the PG, not a shard
            if row["role"] == "primary" and o.done:
                first = min([s["start_us"] for s in row["stages"]
                             if s["start_us"] < 0], default=None)
                enq = _wall_ns(c, o.enq_ns)
                primary_at = (name, enq, None if first is None else
                              enq + int(first * 1000),
                              _wall_ns(c, o.done["ts"]))
    if client:
        story["client"] = _client_block(client, t0, primary_at)
    reps = replica_segments(story)
    if reps:
        story["replicas"] = reps
    return story, found, t0


def _story_pictures(args, err, caps, traces, found, t0):
    """--html/--perfetto of --op: the captures' timeline around the op's
    rows (`found`: {name: (capture, OpRecs)}; t0: its first event's wall
    ns), on the first capture's clock: the others moved to it by the wall
    clock (several hosts' captures), each clock's offset taken where the
    op is (clocks drift apart over a long capture)."""
    deltas = _deltas(caps, mono_at(caps[0], t0))
    d = {id(c): k for c, k in zip(caps, deltas)}
    a = min(o.enq_ns + d[id(c)] for c, rs in found.values() for o in rs)
    b = max(end_ns(o) + d[id(c)] for c, rs in found.values() for o in rs)
    span = max(int(args.timeline_ms * 1e6), int((b - a) * 1.2))
    lo = bound(caps[0], args.t_from, caps[0].first_ns)
    hi = bound(caps[0], args.t_to, caps[0].last_ns)
    a = max(lo, (a + b) // 2 - span // 2)
    recs = []
    if args.html:
        recs = [window_record(args, c, RunInfo.from_capture(c))[0]
                for c in caps]
    client = None
    if traces:
        client = _client_ops(traces, caps[0].wall_offset_ns(a))
    host_pictures(args, err or sys.stderr, caps, recs,
                  (a, min(hi, a + span)), args.op_reqid, deltas, client)


def _client_ops(traces, base):
    """The clients' OSD ops for client_band: times on the first
    capture's clock (wall ns less its offset `base`)."""
    def at(ns):
        return None if ns is None else ns - base
    ops, pids = [], []
    for t in traces:
        pids.append(str(t.env.get("pid", "?")))
        for o in t.osd_ops.values():
            r = o.request
            ops.append({"reqid": o.reqid, "osd": "osd.%d" % o.osd,
                        "send": at(o.send), "reply": at(o.reply),
                        "done": at(o.done), "call": None if r is None else {
                            "op": r.op, "length": r.len,
                            "submit": at(r.submit), "done": at(r.done),
                            "released": at(r.released)}})
    name = "client (%s pid %s)" % (
        ", ".join(os.path.basename(t.path.rstrip("/")) for t in traces),
        ", ".join(pids))
    pid = int(pids[0]) if len(pids) == 1 and pids[0].isdigit() else 0
    return {"name": name, "pid": pid, "ops": ops}


def _wall_ns(cap, ns):
    """Timestamp `ns` of capture `cap` as wall-clock ns."""
    return ns + cap.wall_offset_ns(ns)


def mono_at(cap, wall_ns):
    """`cap`'s monotonic ns at wall-clock ns `wall_ns`, with its clock's
    offset taken there (interpolated between its samples): each step
    takes the offset where the last one landed (a clock drifts by ppm:
    three steps leave well under a ns)."""
    mono = wall_ns - cap.wall_offset_ns(cap.first_ns)
    for _ in range(3):
        mono = wall_ns - cap.wall_offset_ns(mono)
    return mono


def _deltas(caps, at):
    """Per capture (slot), ns that move its timestamps to the first's
    clock by the wall clock, at `at` (the first's ns: where the pictures
    are; two hosts' clocks drift apart by up to ~100 ppm, tens of ms over
    a long capture, so an offset taken at the capture's start would not
    do): 0 for slots of one capture, and nearly so for captures of one
    kernel."""
    wall = at + caps[0].wall_offset_ns(at)
    return [0 if c.trace is caps[0].trace else at - mono_at(c, wall)
            for c in caps]


def end_to_end(args, out, caps, traces, clocks):
    """-r CAPTURES... TRACE: every op of the clients' traces whose
    primary is in the captures, its latency split end to end; the table
    of p50, p99 and where the slowest ops' time went. Everything as
    columns (a set of several hosts holds hundreds of thousands of ops a
    minute): the clients' ops (rbd/columns.py), each capture's ops with
    request ids (capture/reqops.py), joined by request id; what is
    done with is let go before the next part (the replicas' table last)."""
    cl = _client_columns(traces)
    if not len(cl["send"]):
        raise UserError("%s: no OSD ops recorded (see rbdrecord(8): the "
                        "client's Objecter)" % ", ".join(
                            t.path for t in traces))
    keys = Matcher((cl["client"], cl["inc"], cl["tid"]))
    joined = np.zeros(len(cl["send"]), bool)
    parts = [x for x in (_capture_part(ci, c, keys, joined)
                         for ci, c in enumerate(caps)) if x is not None]
    keys = None
    if not joined.any():
        raise UserError("none of the clients' %d OSD ops has its primary "
                        "in %s (request ids differ: another cluster or "
                        "time?)" % (len(cl["send"]), args.read))
    p = concat_parts([x["prim"] for x in parts],
                     ("j", "cap", "enq", "osd_done", "first"))
    seg = _segments(cl, p)
    write = cl["write"][p["j"]]
    wb = cl["wb"][p["j"]]
    left = np.unique(np.concatenate([x["unfinished"] for x in parts]))
    left = [_reqid(cl, i) for i in left.tolist() if not joined[i]]
    res = {"type": "end_to_end", "client_ops": len(cl["send"]),
           "joined": int(joined.sum()), "traces": [t.path for t in traces],
           "unfinished": {"ops": len(left),
                          "reqids": sorted(left, key=reqid_key)},
           "kinds": {k: segment_table(seg, m, g) for k, m, g in (
               ("read", ~write, "path"),
               ("write", write & ~seg["acked"] & ~wb, "path"),
               ("write_back", write & ~seg["acked"] & wb, "path"),
               ("write_acked", seg["acked"], "acked")) if m.any()},
           "replication": None, "clocks": clocks}
    if seg["acked"].any():
        res["acked"] = acked_view(seg, cl, p, caps, seg["acked"])
    if wb.any():
        res["flushes"] = flushes(cl, p["j"][write & wb])
    give_back()
    if args.slowest:
        res["slowest"] = _slowest(args.slowest, seg, cl, p, caps, write)
    seg = cl = p = write = None
    give_back()
    rows, unknown, late = replica_ways(
        concat_parts([x["replies"] for x in parts],
                     ("j", "peer", "wait", "seen", "within", "last")),
        concat_parts([x["reps"] for x in parts], ("j", "osd", "enq",
                                                   "repop")))
    parts = None
    res["replication"] = dict(replica_table(rows), unknown=unknown,
                              sent_late=late)
    if res.get("acked"):
        v = res["acked"]["verdict"] = acked_verdict(res["acked"],
                                                    res["replication"])
        rv = res["replication"].get("verdict")
        if v["cause"] == "outran" and rv and rv.get("replica") and \
                not v["replica"]:
            # one verdict: under the flood this replica does not stand out
            res["replication"]["verdict"] = {
                "replica": None, "cause": "outran",
                "words": "no replica stands out of the queue the client's "
                         "writes built up (see the verdict on the writes "
                         "acked by the cache): %s" % rv["words"]}
    if args.json:
        out.write(json_line(res))
    else:
        print_end_to_end(out, res)
    return 0


_CLIENT = 8         # a request id's entity type: client


def _capture_part(ci, c, keys, joined):
    """Capture c's part of the join, its ops read and let go: "prim"
    (the clients' ops it completed as their primary, each op's first
    completion: captures in order, the ops joined on an earlier one
    left out; `joined` is set for them), "replies" (their replicas'
    replies), "reps" (the replica ops it ran for the clients' ops: the
    first of each op) and "unfinished" (ops dequeued and never
    completed), wall ns; or None (no op with a request id)."""
    # (the replies' own ops on the primary: the replies tell it all)
    ops, rep = reqops.read(c, skip=messages.SUBOP_REPLIES)
    if ops is None:
        return None
    j = keys.find((ops.req_num, ops.req_inc, ops.req_tid))
    j[ops.req_type != _CLIENT] = -1
    wall = c.wall_ns
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
    ops = rep = None
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
            **{c: cl[c][j] for c in _CW}))
        for k, v in got.items():
            if k not in out:
                out[k] = np.empty((n,) + v.shape[1:], v.dtype)
            out[k][s] = v
        got = None
        give_back()
    return out


_CW = ("cw_early", "cw_ts", "cw_held", "cw_release", "cw_done")


def _osd_id(name):
    """osd.3 -> 3 (a capture slot's name), else -1."""
    try:
        return int(name.split(".", 1)[1]) if name.startswith("osd.") \
            else -1
    except (ValueError, AttributeError, IndexError):
        return -1


def _client_columns(traces):
    """The clients' OSD ops answered and completed (where a trace links
    ops to their librbd calls, those of calls: image I/O, not the image
    header's), as columns; "call": the op's call in "calls" (the traces'
    calls, one Table), or -1."""
    parts, calls, base, base_ops = [], [], 0, 0
    for ti, t in enumerate(traces):
        if t.cols is None:
            continue
        o, c = t.cols.ops, t.cols.calls
        m = (o.reply != NONE) & (o.done != NONE)
        if (m & (o.request >= 0)).any():
            m &= o.request >= 0
        i = np.flatnonzero(m)
        r = o.request[i]
        parts.append({
            "client": o.client[i], "inc": o.inc[i], "tid": o.tid[i],
            "send": o.send[i], "reply": o.reply[i], "done": o.done[i],
            "write": (o.flags[i] & objecter.FLAG_WRITE) != 0,
            "obj": o.obj[i], "trace": np.full(len(i), ti, np.int16),
            "call": np.where(r >= 0, r + base, -1).astype(np.int32)})
        parts[-1].update(_cache_columns(t.cols, i))
        # an op of no call in a trace whose cache wrote back: the cache's
        parts[-1]["wb"] = (r < 0) & bool(
            (t.cols.cache.state == STATES.index("writeback")).any())
        # the op that let a held write go, as a row of the clients' ops
        pos = np.full(len(o) + 1, -1, np.int64)
        pos[i] = np.arange(len(i)) + base_ops
        parts[-1]["cw_held_by"] = pos[parts[-1]["cw_held_by"]]
        base_ops += len(i)
        calls.append(Table(**{k: c.cols[k] for k in (
            "op", "off", "len", "submit", "done", "released")}))
        base += len(c)
        # the table keeps its own columns of what it needs: the trace's
        # (tens of MB a 10-minute trace) go
        t.cols.ops = t.cols.calls = None
    if not parts:
        return {"send": []}
    out = concat_parts(parts, list(parts[0]))
    out["traces"] = traces
    out["calls"] = calls[0] if len(calls) == 1 else Table(**concat_parts(
        [dict(c.cols) for c in calls], list(calls[0].cols)))
    return out


def _cache_columns(cc, i):
    """The cache's record of client ops `i` of a trace: early (1: acked before the OSDs, 0:
    not, -1: no record), taken, held (the cache held it), released, done
    (NONE: not recorded), the bytes in flight as it was taken and the
    limit, and the op (the trace's row; -1: none) of the write whose
    completion let a held one go."""
    n = len(i)
    cw = cc.cache
    k = cc.ops.cols.get("cw")
    k = k[i] if k is not None and len(cw) else np.full(n, -1, np.int64)
    has = k >= 0
    s = np.maximum(k, 0)

    def col(c, fill=NONE):
        return np.where(has, cw.cols[c][s], fill) if len(cw) else \
            np.full(n, fill, np.int64)
    first = np.full(len(cw), -1, np.int64)
    m = cc.ops.cols.get("cw", np.zeros(0, np.int64)) >= 0
    if len(cw) and m.any():
        o = np.flatnonzero(m)[::-1]
        first[cc.ops.cw[o]] = o          # the first op of each write
    hb = col("held_by", -1)
    return {"cw_early": ops_early(cw, k),
            "cw_ts": col("ts"), "cw_release": col("release"),
            "cw_done": col("done"),
            "cw_held": col("state", -1) == STATES.index("queued"),
            "cw_in_flight": col("in_flight", -1),
            "cw_max_dirty": col("max_dirty", -1),
            "cw_held_by": np.where(hb >= 0, first[np.maximum(hb, 0)],
                                   -1) if len(cw) else hb}


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


def _slowest(n, seg, cl, p, caps, write):
    """--slowest: the n slowest joined ops, as slowest_entry()."""
    j = p["j"]
    # the clients in their request ids' (strings') order
    who, first, inv = np.unique(
        cl["client"][j] * (int(cl["inc"].max(initial=0)) + 1) +
        cl["inc"][j], return_index=True, return_inverse=True)
    names = np.array([_reqid(cl, int(j[i])).rpartition(":")[0]
                      for i in first.tolist()])
    rank = np.argsort(np.argsort(names))[inv.reshape(-1)]
    rows = slowest_rows(seg, rank, cl["tid"][j], n)
    out = []
    for i in rows.tolist():
        k = int(j[i])
        tr = cl["traces"][int(cl["trace"][k])].cols
        call = None
        if cl["call"][k] >= 0:
            c = cl["calls"]
            r = int(cl["call"][k])
            call = {"op": CALL_OPS[c.op[r]], "offset": int(c.off[r]),
                    "length": int(c.len[r])}
        out.append(slowest_entry(
            seg, i, reqid=_reqid(cl, k),
            kind=("write, acked early" + (
                " (inferred)" if seg["inferred"][i] else "")
                if seg["acked"][i] else "write") if write[i] else "read",
            primary=caps[int(p["cap"][i])].name,
            object=tr.objects.names[int(cl["obj"][k])], call=call))
    return out


def _client_op(traces, reqid):
    """The op `reqid` in the clients' traces: {"send", "reply", "done"
    (wall ns), "osd", "object", "trace"}, or None."""
    def at(v):
        return None if v == NONE else int(v)
    for tr in traces:
        cc = tr.cols
        i = cc.find(reqid) if cc is not None else None
        if i is None:
            continue
        o, c = cc.ops, cc.calls
        r = int(o.request[i])
        call = None
        if r >= 0:
            call = {"op": CALL_OPS[c.op[r]], "offset": int(c.off[r]),
                    "length": int(c.len[r]), "submit": int(c.submit[r]),
                    "done": int(c.done[r]), "released": at(c.released[r]),
                    "osd_ops": [cc.reqid(k) for k in
                                np.flatnonzero(o.request == r).tolist()]}
        # what librbd's cache did with it (an acknowledgement before the
        # OSDs had it gives the story the acked segments)
        cache = {k: int(v[0]) for k, v in _cache_columns(
            cc, np.array([i])).items() if k in _CW}
        return {"send": int(o.send[i]), "reply": at(o.reply[i]),
                "done": at(o.done[i]), "osd": int(o.osd[i]),
                "object": cc.objects.names[o.obj[i]], "trace": tr.path,
                "call": call, "cache": cache,
                "write": bool(o.flags[i] & objecter.FLAG_WRITE)}
    return None


def _client_block(client, t0, primary_at):
    """The story's "client": when it sent, got the reply and completed
    the op, and (with the primary's row) the segments end to end."""
    def at(ns):
        return None if ns is None else round((ns - t0) / 1000, 1)
    block = {"trace": client["trace"], "osd": "osd.%d" % client["osd"],
             "object": client["object"], "sent_at_us": at(client["send"]),
             "reply_at_us": at(client["reply"]),
             "done_at_us": at(client["done"])}
    call = client["call"]
    if call:
        # the librbd call the op is part of (rbdrecord links them)
        block["call"] = {"op": call["op"], "offset": call["offset"],
                         "length": call["length"],
                         "called_at_us": at(call["submit"]),
                         "completed_at_us": at(call["done"]),
                         "released_at_us": at(call["released"]),
                         "osd_ops": call["osd_ops"]}
    if client["reply"] is None:
        block["segments"] = None
        return block
    if primary_at is None:
        block["segments"] = None
        block["why"] = "its primary's completion is not in the captures"
        return block
    name, enq, first, done = primary_at
    block["primary"] = name
    block.update(client_segments(client, enq, first, done))
    return block
