"""Several captures (one per host) and clients' traces read as one
(osdstage -r A.ctf B.ctf client.ctf): their clocks lined up and checked,
one op's story end to end (--op REQID), and the end-to-end table of every
client call (and --slowest)."""
import json
import os
import sys

from ..clocks import duration_ns
from ..engine.session import TOOL
from ..errors import UserError
from ..model.e2e import (ReplicaRow, SegmentTable, client_segments,
                         replica_segments, replica_table, reqid_key)
from ..model.interval import RunInfo
from ..model.slowest import op_row
from ..render.text import print_end_to_end, print_op_story
from ..ceph import objecter
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
        match = [p for p in list(paths) + list(clients)
                 if os.path.realpath(p) == os.path.realpath(name)]
        if not match:
            raise UserError("--clock-offset %s: %s is none of -r's files "
                            "(%s)" % (spec, name, ", ".join(
                                list(paths) + list(clients))))
        out[match[0]] = duration_ns(dur, "--clock-offset " + spec)
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
    return int(round(cap.wall(ns) * 1e9))


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
    of p50, p99 and where the slowest ops' time went."""
    client = {}
    clients = [t.path for t in traces]
    for t in traces:
        ops = [o for o in t.osd_ops.values()
               if o.reply is not None and o.done is not None]
        # where the trace links ops to their librbd calls, the table is
        # of the calls' ops (image I/O, not the image header's)
        if any(o.request is not None for o in ops):
            ops = [o for o in ops if o.request is not None]
        client.update((o.reqid, o) for o in ops)
    if not client:
        raise UserError("%s: no OSD ops recorded (see rbdrecord(8): the "
                        "client's Objecter)" % ", ".join(clients))
    # each kind's table, and the slowest ops across both (a set of
    # several hosts holds hundreds of thousands of ops a minute: each
    # op's figures are kept as numbers, the ops themselves streamed)
    per_op = {"read": SegmentTable(), "write": SegmentTable()}
    slow = SegmentTable(args.slowest or 0)
    joined, unfinished = set(), set()
    replies, replicas = [], {}
    for c in caps:
        # streamed: each op as soon as nothing later can change it, in
        # the order their ends came (not all of them held and sorted)
        for _, o in c.op_stream(c.first_ns, c.last_ns,
                                keep=lambda o: o.req in client):
            if o.repop and not o.done:      # a replica's op
                # the first: an erasure-coded write's shard sees a second,
                # the roll-forward sent after the first one's commit
                replicas.setdefault((o.req, c.name), (_wall_ns(c, o.enq_ns),
                                                      o.repop["repop_ns"]))
                continue
            if not o.done:
                # enqueued on its primary, answered without completing
                # (an error reply: ENOENT for an object not yet written)
                unfinished.add(o.req)
                continue
            if o.req in joined:
                continue
            k = client[o.req]
            r = k.request
            enq = _wall_ns(c, o.enq_ns)
            if o.replies:
                last = max(ts for _, _, ts in o.replies)
                replies += [(o.req, sys.intern("osd.%d" % peer), wait,
                             _wall_ns(c, ts), ts == last, o.sent_us * 1000)
                            for peer, wait, ts in o.replies]
            first = enq - sum(o.msg.values()) if o.msg else None
            kind = "write" if k.flags & objecter.FLAG_WRITE else "read"
            seg = client_segments(
                {"send": k.send, "reply": k.reply, "done": k.done,
                 "call": {"submit": r.submit, "done": r.done,
                          "released": r.released}
                 if r is not None else None},
                enq, first, _wall_ns(c, o.done["ts"]))
            seg.update(reqid=o.req, kind=kind, primary=c.name,
                       object=k.object, call=None if r is None else {
                           "op": r.op, "offset": r.off, "length": r.len})
            per_op[kind].add(seg)
            slow.add(seg)
            joined.add(o.req)
    if not joined:
        raise UserError("none of the clients' %d OSD ops has its primary "
                        "in %s (request ids differ: another cluster or "
                        "time?)" % (len(client), args.read))
    rows, unknown, late = _replica_rows(replies, replicas)
    replies = replicas = None           # (their rows hold what is needed)
    unfinished -= joined
    res = {"type": "end_to_end", "client_ops": len(client),
           "joined": len(joined), "traces": list(clients),
           "unfinished": {"ops": len(unfinished),
                          "reqids": sorted(unfinished, key=reqid_key)},
           "kinds": {k: v.table() for k, v in per_op.items() if len(v)},
           "replication": dict(replica_table(rows), unknown=unknown,
                               sent_late=late),
           "clocks": clocks}
    if args.slowest:
        res["slowest"] = slow.slowest()
    if args.json:
        out.write(json.dumps(res) + "\n")
    else:
        print_end_to_end(out, res)
    return 0


def _replica_rows(replies, replicas):
    """Each reply a primary waited for (req, peer, wait ns, seen at: wall
    ns, last?, ns its sub-ops' sends can lie before the mark its wait
    runs from: an erasure-coded write's sent_within) with its
    replica's op ({(req, peer): (enqueued at: wall ns, repop ns)}): its
    way out, the replica, its way back -> (rows for replica_table, how
    many the clocks left unknown, how many erasure-coded sub-writes
    reached their shard before the mark the ways run from: their way out
    is not known)."""
    rows, unknown, late = [], 0, 0
    for req, peer, wait, seen, last, within in replies:
        rep = replicas.get((req, peer))
        row = ReplicaRow(req, peer, wait / 1000.0, last)
        if rep is not None:
            enq, repop = rep
            out_ns = enq - (seen - wait)
            back_ns = seen - enq - repop
            if back_ns >= 0 and -within <= out_ns < 0:
                late += 1       # the primary preempted after the sends
            elif out_ns < 0 or back_ns < 0:     # the clocks disagree
                unknown += 1
            else:
                row.out_us, row.back_us = out_ns / 1000.0, back_ns / 1000.0
                row.replica_us = repop / 1000.0
        rows.append(row)
    return rows, unknown, late


def _client_op(traces, reqid):
    """The op `reqid` in the clients' traces: {"send", "reply", "done"
    (wall ns), "osd", "object", "trace"}, or None."""
    for tr in traces:
        p = tr.path
        op = tr.osd_ops.get(reqid)
        if op is not None:
            r = op.request
            return {"send": op.send, "reply": op.reply, "done": op.done,
                    "osd": op.osd, "object": op.object, "trace": p,
                    "call": None if r is None else {
                        "op": r.op, "offset": r.off, "length": r.len,
                        "submit": r.submit, "done": r.done,
                        "released": r.released,
                        "osd_ops": [o.reqid for o in r.osd_ops]}}
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
