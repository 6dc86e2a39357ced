"""Several captures (one per host) and clients' traces read as one
(osdstage -r A.ctf B.ctf client.ctf): their clocks lined up and checked,
one op's story end to end (--op REQID), and the end-to-end table of every
client call (and --slowest)."""
import json
import os
import sys

import numpy as np

from ..clocks import duration_ns
from ..engine.session import TOOL
from ..errors import UserError
from ..model.e2e import (NONE, client_segments, replica_segments,
                         replica_table, replica_ways, reqid_key,
                         segment_columns,
                         segment_table, slowest_entry, slowest_rows)
from ..model.interval import RunInfo
from ..model.table import match
from ..model.slowest import op_row
from ..render.text import print_end_to_end, print_op_story
from ..capture import reqops
from ..ceph import objecter
from ..rbd.columns import CALL_OPS
from .windows import bound, end_ns, host_pictures, window_record



def clock_offsets(args, paths, clients):
    """--clock-offset FILE=DUR... -> {path: ns} of the files named, each
    one of -r's."""
    out = {}
    for spec in args.clock_offset or ():
        name, eq, dur = spec.rpartition("=")
        if not eq or not name:
            raise UserError("--clock-offset %s: give FILE=DURATION (e.g. "
                            "h2.ctf=+3ms)" % spec)
        hits = [p for p in list(paths) + list(clients)
                 if os.path.realpath(p) == os.path.realpath(name)]
        if not hits:
            raise UserError("--clock-offset %s: %s is none of -r's files "
                            "(%s)" % (spec, name, ", ".join(
                                list(paths) + list(clients))))
        out[hits[0]] = duration_ns(dur, "--clock-offset " + spec)
    if out and len(paths) + len(clients) < 2:
        raise UserError("--clock-offset lines several files up: -r names "
                        "one")
    return out


def clock_check(err, caps, traces, shifts):
    """Which clock each file's times are of, against the first capture's:
    files of one kernel share its monotonic clock and line up exactly;
    another host's line up as well as the wall clocks agree. A warning
    names the files of other clocks that were not kept synchronized and
    whose offset --clock-offset does not give. -> [{file, clock, synced,
    error_us, offset_given_us}] for the JSON views."""
    items = [(c.trace.path, c.clock()) for c in caps] + \
        [(t.path, t.clock()) for t in traces]
    ref = items[0][1]["id"] if items[0][1] else None
    out, doubt = [], []
    for i, (path, ck) in enumerate(items):
        same = i == 0 or ck is not None and ref is not None and \
            ck["id"] == ref
        given = shifts.get(path)
        err_ns = ck["error_ns"] if ck else None
        out.append({"file": path,
                    "clock": "the first capture's" if same else
                    "unknown" if ck is None else "another",
                    "synced": bool(ck and ck["synced"]),
                    "error_us": None if same or err_ns is None else
                    round(err_ns / 1000.0, 1),
                    "offset_given_us": None if given is None else
                    round(given / 1000.0, 1)})
        if not same and given is None and err_ns is None:
            doubt.append(path)
    if doubt:
        err.write("%s: warning: %s: %s not kept synchronized by a time "
                  "daemon (adjtimex): %s up with the others only as well "
                  "as the clocks happen to agree (a network segment that "
                  "comes out negative is printed as ?); give a known "
                  "offset with --clock-offset FILE=DURATION\n" % (
                      TOOL, ", ".join(doubt),
                      "another host's clock," if len(doubt) == 1 else
                      "other hosts' clocks,",
                      "its times line" if len(doubt) == 1 else
                      "their times line"))
    return out


def op_story(args, out, caps, err=None, traces=(), clocks=None):
    """--op REQID: every op with that request id on every OSD of every
    capture: the client op on its primary (with its replicas' replies),
    the replica ops; with a client's trace that sent it, the client's
    send, reply and completion, and its latency split end to end. Times
    from the first event, on the wall clock (captures of several hosts)."""
    found = {}
    for c in caps:
        rows = c.ops_of(args.op_reqid)
        if rows:
            found[c.name or "pid %d" % c.pid] = (c, rows)
    client = _client_op(traces, args.op_reqid)
    if not found:
        firsts = [c.first_op(c.first_ns, c.last_ns) for c in caps]
        if not any(o.req for o in firsts if o is not None):
            raise UserError("%s carries no request ids (recorded by an "
                            "older osdstage or without a probe table for "
                            "them)" % args.read)
        raise UserError("no op %s in %s (see --slowest for request ids)" % (
            args.op_reqid, args.read))

    t0 = min(_wall_ns(c, o.enq_ns) for c, rows in found.values()
             for o in rows)
    if client:
        t0 = min(t0, client["call"]["submit"] if client["call"] else
                 client["send"])
    story = {"type": "op", "reqid": args.op_reqid, "osds": {}}
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
    if args.json:
        out.write(json.dumps(story) + "\n")
    else:
        print_op_story(out, story)
    if args.html or args.perfetto:     # a timeline centred on the request
        _story_pictures(args, err, caps, traces, found, t0)
    return 0


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
    request ids (capture/reqops.py), joined by request id."""
    cl = _client_columns(traces)
    if not len(cl["send"]):
        raise UserError("%s: no OSD ops recorded (see rbdrecord(8): the "
                        "client's Objecter)" % ", ".join(
                            t.path for t in traces))
    keys = (cl["client"], cl["inc"], cl["tid"])
    prim, reps, unfinished, replies = [], [], [], []
    for ci, c in enumerate(caps):
        ops, rep = reqops.read(c)
        if ops is None:
            continue
        j = match(keys, (ops.req_num, ops.req_inc, ops.req_tid))
        j[ops.req_type != _CLIENT] = -1
        wall = c.wall_ns
        done, repop = ops.done != NONE, ops.repop_ns != NONE
        m = np.flatnonzero((j >= 0) & done)
        prim.append({"j": j[m], "cap": np.full(len(m), ci), "row": m,
                     "enq": wall(ops.enq[m]), "osd_done": wall(ops.done[m]),
                     "first": np.where(ops.first[m] != NONE,
                                       wall(ops.first[m]), NONE)})
        if rep is not None:
            replies.append((ci, rep, wall))
        m = np.flatnonzero((j >= 0) & ~done & repop)
        m = m[np.argsort(ops.repop_at[m], kind="stable")]
        reps.append({"j": j[m], "osd": np.full(len(m), _osd_id(c.name)),
                     "enq": wall(ops.enq[m]), "repop": ops.repop_ns[m]})
        unfinished.append(j[(j >= 0) & ~done & ~repop & ops.dequeued])
    p = _first_per_op(prim)
    if not len(p["j"]):
        raise UserError("none of the clients' %d OSD ops has its primary "
                        "in %s (request ids differ: another cluster or "
                        "time?)" % (len(cl["send"]), args.read))
    seg = segment_columns({
        "submit": cl["submit"][p["j"]], "call_done": cl["call_done"][p["j"]],
        "released": cl["released"][p["j"]], "send": cl["send"][p["j"]],
        "reply": cl["reply"][p["j"]], "done": cl["done"][p["j"]],
        "first": p["first"], "enq": p["enq"], "osd_done": p["osd_done"]})
    write = cl["write"][p["j"]]
    joined = np.zeros(len(cl["send"]), bool)
    joined[p["j"]] = True
    rows, unknown, late = _replica_rows(p, replies, reps)
    left = np.unique(np.concatenate(unfinished)) if unfinished else []
    left = [_reqid(cl, i) for i in left if not joined[i]]
    res = {"type": "end_to_end", "client_ops": len(cl["send"]),
           "joined": int(joined.sum()), "traces": [t.path for t in traces],
           "unfinished": {"ops": len(left),
                          "reqids": sorted(left, key=reqid_key)},
           "kinds": {k: segment_table(seg, m) for k, m in (
               ("read", ~write), ("write", write)) if m.any()},
           "replication": dict(replica_table(rows), unknown=unknown,
                               sent_late=late),
           "clocks": clocks}
    if args.slowest:
        res["slowest"] = _slowest(args.slowest, seg, cl, p, caps, write)
    if args.json:
        out.write(json.dumps(res) + "\n")
    else:
        print_end_to_end(out, res)
    return 0


_CLIENT = 8         # a request id's entity type: client


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
    header's), with their calls' times, as columns."""
    parts = []
    for ti, t in enumerate(traces):
        if t.cols is None:
            continue
        o, c = t.cols.ops, t.cols.calls
        m = (o.reply != NONE) & (o.done != NONE)
        if (m & (o.request >= 0)).any():
            m &= o.request >= 0
        i = np.flatnonzero(m)
        r = o.request[i]
        has = r >= 0
        call = (lambda col: np.where(has, col[np.maximum(r, 0)], NONE)
                if len(c) else np.full(len(i), NONE, np.int64))
        parts.append({
            "client": o.client[i], "inc": o.inc[i], "tid": o.tid[i],
            "send": o.send[i], "reply": o.reply[i], "done": o.done[i],
            "write": (o.flags[i] & objecter.FLAG_WRITE) != 0,
            "obj": o.obj[i], "trace": np.full(len(i), ti),
            "call": np.where(has, r, -1),
            "submit": call(c.submit), "call_done": call(c.done),
            "released": call(c.released)})
    if not parts:
        return {"send": []}
    out = {k: np.concatenate([x[k] for x in parts]) for k in parts[0]}
    out["traces"] = traces
    return out


def _reqid(cl, i):
    return "client.%d.%d:%d" % (cl["client"][i], cl["inc"][i], cl["tid"][i])


def _first_per_op(parts):
    """Each client op's first completion as a primary (captures in
    order, then by completion time)."""
    p = {k: np.concatenate([x[k] for x in parts]) for k in parts[0]}
    o = np.lexsort((p["osd_done"], p["cap"], p["j"]))
    p = {k: v[o] for k, v in p.items()}
    first = np.ones(len(o), bool)
    first[1:] = p["j"][1:] != p["j"][:-1]
    return {k: v[first] for k, v in p.items()}


def _replica_rows(p, replies, reps):
    """The replies the joined primaries (p) waited for, from each
    capture's (replies: (capture number, reqops replies, its wall_ns)),
    with the replicas' ops (reps) -> replica_ways()'s result."""
    cols = {"j": [], "peer": [], "wait": [], "seen": [], "within": [],
            "last": []}
    for ci, rep, wall in replies:
        # the replies of the ops joined as primaries on this capture
        mine = p["cap"] == ci
        row_of = np.full(int(rep.op.max()) + 1 if len(rep) else 0, -1,
                         np.int64)
        rows = p["row"][mine]
        row_of[rows[rows < len(row_of)]] = np.flatnonzero(mine)[
            rows < len(row_of)]
        k = row_of[rep.op] if len(rep) else np.zeros(0, np.int64)
        m = (k >= 0) & ~rep.read
        k, op = k[m], rep.op[m]
        wait = np.maximum(0, rep.wait[m] - rep.sent[m])
        ts, sent = rep.ts[m], rep.sent[m]
        # per op: its last reply, and its sub-ops' spread (sent_within)
        top = np.full(len(p["j"]), -1, np.int64)
        np.maximum.at(top, k, ts)
        within = np.zeros(len(p["j"]), np.int64)
        np.maximum.at(within, k, sent)
        cols["j"].append(p["j"][k])
        cols["peer"].append(rep.peer[m])
        cols["wait"].append(wait)
        cols["seen"].append(wall(ts))
        cols["within"].append(within[k])
        cols["last"].append(ts == top[k])
    c = {k: np.concatenate(v) if v else np.zeros(0, np.int64)
         for k, v in cols.items()}
    r = {k: np.concatenate([x[k] for x in reps]) for k in reps[0]} \
        if reps else {}
    return replica_ways(c, r)


def _slowest(n, seg, cl, p, caps, write):
    """--slowest: the n slowest joined ops, as slowest_entry()."""
    j = p["j"]
    rows = slowest_rows(seg, np.array(["client.%d.%d" % x for x in zip(
        cl["client"][j].tolist(), cl["inc"][j].tolist())]), cl["tid"][j], n)
    out = []
    for i in rows.tolist():
        k = int(j[i])
        tr = cl["traces"][int(cl["trace"][k])].cols
        call = None
        if cl["call"][k] >= 0:
            c = tr.calls
            r = int(cl["call"][k])
            call = {"op": CALL_OPS[c.op[r]], "offset": int(c.off[r]),
                    "length": int(c.len[r])}
        out.append(slowest_entry(
            seg, i, reqid=_reqid(cl, k),
            kind="write" if write[i] else "read",
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
        return {"send": int(o.send[i]), "reply": at(o.reply[i]),
                "done": at(o.done[i]), "osd": int(o.osd[i]),
                "object": cc.objects.names[o.obj[i]], "trace": tr.path,
                "call": call}
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
