"""Reading a capture (osdstage -r): the live run's reports again, or one
report over a window (--from/--to) with filters, the slowest ops and the
timeline pictures. No root and no build needed: the capture describes
itself (capture/reader.py)."""
import json
import os
import sys
import time

from ..clocks import duration_ns
from ..errors import UserError, quiet_broken_pipe
from ..model.e2e import (client_segments, replica_segments,
                         replica_table, reqid_key, slowest_calls, table)
from ..model.interval import RunInfo, host_record, interval_record
from ..model.slowest import op_row, slowest
from ..model.timeline import host_timeline, timeline
from ..render.text import (emit, print_end_to_end, print_op_story,
                           print_slowest)
from ..capture.ops import OpSummary
from ..capture.ctf import trace_tool
from ..ceph import objecter
from ..capture.reader import Capture
from ..rbd.reader import RbdTrace

TOOL = "osdstage"
# the options that ask for a window report
OFFLINE_ONLY = {"t_from": "--from", "t_to": "--to",
                "thread_role": "--thread-role", "op_class": "--op-class",
                "slowest": "--slowest", "html": "--html",
                "perfetto": "--perfetto", "op_reqid": "--op"}


def check_names(args, vocab, whose):
    """-S and --op-class name stages and classes of this vocabulary."""
    if args.stages == "all":
        args.stages = None          # reading: every stage is shown anyway
    if args.stages:
        known = vocab.probed + vocab.kernel
        bad = [n for n in args.stages if n not in known]
        if bad:
            raise UserError("%s: unknown stage %s; %s stages: %s" % (
                TOOL, bad[0], whose, ", ".join(known)), status=2)
    if getattr(args, "op_class", None) and \
            args.op_class not in vocab.op_classes:
        raise UserError("%s: --op-class %s: %s classes are %s" % (
            TOOL, args.op_class, whose, ", ".join(vocab.op_classes)),
            status=2)


def _open(path, err):
    """One capture, opened with its warnings said."""
    cap = Capture(path)
    if cap.trace.truncated:
        err.write("%s: %s was cut short (%s ends inside a packet): read up "
                  "to the last complete packet\n" % (
                      TOOL, path, ", ".join(cap.trace.truncated_streams)))
    if cap.first_ns is None:
        raise UserError("%s holds no complete packet: nothing to read" %
                        path)
    if cap.end is None:
        err.write("%s: %s has no end marker (the recording was killed); "
                  "what follows its last report is rebuilt from the events"
                  "\n" % (TOOL, path))
    return cap


def _sort_inputs(paths):
    """-r's paths -> (osdstage captures, rbdrecord traces), each by what
    its metadata says it is."""
    caps, clients = [], []
    for p in paths:
        (clients if trace_tool(p) == "rbdrecord" else caps).append(p)
    if not caps:
        raise UserError("no osdstage capture among %s (an rbdrecord trace "
                        "is read with the captures of its OSDs)" %
                        ", ".join(paths))
    return caps, clients


def run(args, out, err):
    """Read the captures args.read: the live run's reports again, or one
    report over a window with filters, slowest ops and pictures; or, with
    several captures (one per host) and clients' traces, one op's story
    end to end (--op)."""
    paths, clients = _sort_inputs(args.read)
    if (len(paths) > 1 or clients) and not args.op_reqid and \
            (not clients or any(getattr(args, k) for k in OFFLINE_ONLY
                                if k != "slowest")):
        raise UserError("several captures, or a client's trace, are read "
                        "together for one op's story (--op REQID) or, "
                        "with a client's trace, the end-to-end table "
                        "(and --slowest); the other views read one "
                        "capture")
    shifts = _clock_offsets(args, paths, clients)
    opened = [_open(p, err) for p in paths]
    cap = opened[0]
    args.read = paths[0] if len(paths) == 1 else ", ".join(paths)
    check_names(args, cap.vocab, "the capture's")
    if args.thread_role and args.thread_role not in cap.roles.names:
        raise UserError("--thread-role %s: the capture's roles are %s" % (
            args.thread_role, ", ".join(cap.roles.names)))
    caps = [t for c, p in zip(opened, paths) for t in _targets(args, c, p)]
    for c in opened + caps:
        c.shift_ns = shifts.get(c.trace.path, 0)
    traces = [RbdTrace(p, shifts.get(p, 0)) for p in clients]
    clocks = _clock_check(err, opened, traces, shifts) \
        if len(paths) > 1 or clients else None
    window = any(getattr(args, k) for k in OFFLINE_ONLY)
    try:
        if args.op_reqid:
            return _op_story(args, out, caps, err, traces, clocks)
        if clients:
            return _end_to_end(args, out, caps, traces, clocks)
        if len(caps) > 1:
            return _many(args, out, err, caps, window)
        cap = caps[0]
        run_info = RunInfo.from_capture(cap)
        if not window:
            return _replay(args, out, cap, run_info)
        return _window(args, out, err, cap, run_info)
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0


def _clock_offsets(args, paths, clients):
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


def _clock_check(err, caps, traces, shifts):
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


def _targets(args, cap, path):
    """The capture's targets to show (--osd), each read as its own
    Capture (slot)."""
    names = [t["name"] for t in cap.targets]
    if args.osd is None or args.osd == "all":
        slots = range(len(names))
    else:
        slots = []
        for i in args.osd:
            if "osd." + i not in names:
                if args.op_reqid:       # several captures: any of them
                    continue
                raise UserError("--osd %s: the capture holds %s" % (
                    i, ", ".join(n or "pid %d" % t["pid"] for n, t in
                                 zip(names, cap.targets))))
            slots.append(names.index("osd." + i))
    return [cap if s == cap.slot else Capture(path, s) for s in slots]


def _many(args, out, err, caps, window):
    """Several OSDs of one capture: a report each and the host summary,
    per recorded report (or once over the window, with one timeline of
    them all for --html/--perfetto)."""
    runs = [RunInfo.from_capture(c) for c in caps]
    if window:
        # (rec, hists): _show_host takes pairs
        recs = [_window_record(args, c, r)[:2] for c, r in zip(caps, runs)]
        t1 = _bound(caps[0], args.t_to, caps[0].last_ns)
        _show_host(args, out, runs, recs, caps[0].wall(t1), recs[0][0][
            "interval_s"])
        if args.html or args.perfetto:
            _host_pictures(args, err, caps, [r[0] for r in recs])
        return 0
    per = [c.replay() for c in caps]
    for rows in zip(*per):
        recs = []
        for (cur, prev, r), run in zip(rows, runs):
            rec, hists = interval_record(run, cur, prev, r.wall_ts,
                                         r.interval_s, r.in_flight)
            rec.update(r.extra)
            recs.append((rec, hists))
        r = rows[0][2]
        _show_host(args, out, runs, recs, r.wall_ts, r.interval_s)
    return 0


def _op_story(args, out, caps, err=None, traces=(), clocks=None):
    """--op REQID: every op with that request id on every OSD of every
    capture: the client op on its primary (with its replicas' replies),
    the replica ops; with a client's trace that sent it, the client's
    send, reply and completion, and its latency split end to end. Times
    from the first event, on the wall clock (captures of several hosts)."""
    found = {}
    for c in caps:
        rows = c.ops(c.first_ns, c.last_ns,
                     keep=lambda o: o.req == args.op_reqid)
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

    def wall_ns(c, ns):
        return int(round(c.wall(ns) * 1e9))
    t0 = min(wall_ns(c, o.enq_ns) for c, rows in found.values()
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
            row["enqueued_at_us"] = round((wall_ns(c, o.enq_ns) - t0) /
                                          1000, 1)
            story["osds"][name].append(row)
            story.setdefault("pg", o.pg)
            if row["role"] == "primary" and o.done:
                first = min([s["start_us"] for s in row["stages"]
                             if s["start_us"] < 0], default=None)
                enq = wall_ns(c, o.enq_ns)
                primary_at = (name, enq, None if first is None else
                              enq + int(first * 1000),
                              wall_ns(c, o.done["ts"]))
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
        # on the first capture's clock: the others' moved to it by the
        # wall clock (several hosts' captures)
        deltas = _deltas(caps)
        d = {id(c): k for c, k in zip(caps, deltas)}
        a = min(o.enq_ns + d[id(c)] for c, rs in found.values() for o in rs)
        b = max(_end_ns(o) + d[id(c)] for c, rs in found.values()
                for o in rs)
        span = max(int(args.timeline_ms * 1e6), int((b - a) * 1.2))
        lo = _bound(caps[0], args.t_from, caps[0].first_ns)
        hi = _bound(caps[0], args.t_to, caps[0].last_ns)
        a = max(lo, (a + b) // 2 - span // 2)
        recs = []
        if args.html:
            recs = [_window_record(args, c, RunInfo.from_capture(c))[0]
                    for c in caps]
        client = None
        if traces:
            client = _client_ops(traces, caps[0].wall_offset_ns(
                caps[0].first_ns))
        _host_pictures(args, err or sys.stderr, caps, recs,
                       (a, min(hi, a + span)), args.op_reqid, deltas,
                       client)
    return 0


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


def _deltas(caps):
    """Per capture (slot), ns that move its timestamps to the first's
    clock by the wall clock: 0 for slots of one capture, and nearly so
    for captures of one kernel."""
    base = caps[0].wall_offset_ns(caps[0].first_ns)
    return [c.wall_offset_ns(c.first_ns) - base for c in caps]


def _end_to_end(args, out, caps, traces, clocks):
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
    per_op, joined, unfinished = {"read": [], "write": []}, set(), set()
    replies, replicas = [], {}

    def wall(c, ns):
        return int(round(c.wall(ns) * 1e9))
    for c in caps:
        for o in c.ops(c.first_ns, c.last_ns,
                       keep=lambda o: o.req in client):
            if o.repop and not o.done:      # a replica's op
                replicas[(o.req, c.name)] = (wall(c, o.enq_ns),
                                             o.repop["repop_ns"])
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
            enq = wall(c, o.enq_ns)
            if o.replies:
                last = max(ts for _, _, ts in o.replies)
                replies += [(o.req, "osd.%d" % peer, wait, wall(c, ts),
                             ts == last) for peer, wait, ts in o.replies]
            first = enq - sum(o.msg.values()) if o.msg else None
            kind = "write" if k.flags & objecter.FLAG_WRITE else "read"
            seg = client_segments(
                {"send": k.send, "reply": k.reply, "done": k.done,
                 "call": {"submit": r.submit, "done": r.done,
                          "released": r.released}
                 if r is not None else None},
                enq, first, int(round(c.wall(o.done["ts"]) * 1e9)))
            seg.update(reqid=o.req, kind=kind, primary=c.name,
                       object=k.object, call=None if r is None else {
                           "op": r.op, "offset": r.off, "length": r.len})
            per_op[kind].append(seg)
            joined.add(o.req)
    if not joined:
        raise UserError("none of the clients' %d OSD ops has its primary "
                        "in %s (request ids differ: another cluster or "
                        "time?)" % (len(client), args.read))
    rows, unknown = [], 0
    for req, peer, wait, seen, last in replies:
        rep = replicas.get((req, peer))
        row = {"req": req, "replica": peer, "wait_us": wait / 1000.0,
               "last": last,
               "out_us": None, "replica_us": None, "back_us": None}
        if rep is not None:
            enq, repop = rep
            out_us = (enq - (seen - wait)) / 1000.0
            back_us = (seen - enq - repop) / 1000.0
            if out_us < 0 or back_us < 0:       # the clocks disagree
                unknown += 1
            else:
                row.update(out_us=out_us, replica_us=repop / 1000.0,
                           back_us=back_us)
        rows.append(row)
    unfinished -= joined
    res = {"type": "end_to_end", "client_ops": len(client),
           "joined": len(joined), "traces": list(clients),
           "unfinished": {"ops": len(unfinished),
                          "reqids": sorted(unfinished, key=reqid_key)},
           "kinds": {k: table(v) for k, v in per_op.items() if v},
           "replication": dict(replica_table(rows), unknown=unknown),
           "clocks": clocks}
    if args.slowest:
        res["slowest"] = slowest_calls(
            [p for v in per_op.values() for p in v], args.slowest)
    if args.json:
        out.write(json.dumps(res) + "\n")
    else:
        print_end_to_end(out, res)
    return 0


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


def _show_host(args, out, runs, recs, ts, secs):
    for rec, _ in recs:
        _filter_stages(args, rec)
    pairs = [(rec, h) for rec, h, *_ in recs]
    emit(out, args, pairs, host_record(runs, pairs, ts, secs))


def _filter_stages(args, rec):
    if args.stages:
        keep = set(args.stages)
        rec["stages"] = {k: v for k, v in rec["stages"].items() if k in keep}
        if "kernel" in rec:
            rec["kernel"] = {k: v for k, v in rec["kernel"].items()
                             if k in keep}


def _emit(args, out, rec, hists):
    _filter_stages(args, rec)
    emit(out, args, [(rec, hists)])


def _replay(args, out, cap, run_info):
    """The live run's reports, rebuilt."""
    for cur, prev, r in cap.replay():
        rec, hists = interval_record(run_info, cur, prev, r.wall_ts,
                                     r.interval_s, r.in_flight)
        rec.update(r.extra)
        _emit(args, out, rec, hists)
    if cap.end is None:
        t0 = cap.reported_until() or cap.first_ns
        if cap.last_ns > t0:
            cur, _ = cap.window(t0, cap.last_ns, spans=False)
            rec, hists = interval_record(run_info, cur, None,
                                         cap.wall(cap.last_ns),
                                         (cap.last_ns - t0) / 1e9, None)
            rec["type"] = "window"
            _emit(args, out, rec, hists)
    return 0


def _bound(cap, t, default):
    if t is None:
        return default
    kind, v = t
    if kind == "rel":
        return cap.first_ns + int(v * 1e9)
    # wall clock of the capture's day (local time)
    day = time.localtime(cap.wall(cap.first_ns))
    midnight = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0,
                            0, 0, -1))
    return int((midnight + v) * 1e9) - cap.clock_offset_ns


def _window(args, out, err, cap, run_info):
    """One report over a window, with filters, slowest ops and pictures."""
    rec, hists, tl_args = _window_record(args, cap, run_info)
    _emit(args, out, rec, hists)
    if args.slowest and not args.json:
        print_slowest(out, rec["slowest"])
    if tl_args is not None:
        _write_pictures(args, err, rec, timeline(*tl_args), run_info)
    return 0


def _window_record(args, cap, run_info):
    """-> (the window's interval object, its histograms, the timeline's
    arguments or None)"""
    t0 = _bound(cap, args.t_from, cap.first_ns)
    t1 = _bound(cap, args.t_to, cap.last_ns)
    if t1 <= t0:
        raise UserError("empty window: --to is not after --from (the capture "
                        "spans %.1f s)" % ((cap.last_ns - cap.first_ns) / 1e9))
    cur, ops = cap.window(t0, t1, role=args.thread_role,
                          op_class=args.op_class,
                          slowest=args.slowest or 0,
                          spans=bool(args.html or args.perfetto))
    rec, hists = interval_record(run_info, cur, None, cap.wall(t1),
                                 (t1 - t0) / 1e9, None)
    rec["type"] = "window"
    rec["window"] = {"from": round(cap.wall(t0), 6),
                     "to": round(cap.wall(t1), 6),
                     "from_s": round((t0 - cap.first_ns) / 1e9, 6),
                     "to_s": round((t1 - cap.first_ns) / 1e9, 6)}
    rec["filters"] = {k: getattr(args, k) for k in ("thread_role",
                                                    "op_class")
                      if getattr(args, k)}
    if args.slowest:
        rec["slowest"] = slowest(cap, ops.by_rank(), args.slowest)
    tl_args = None
    if args.html or args.perfetto:
        a, b = _timeline_window(args, cap, ops, t0, t1)
        tl_args = (cap, a, b, cap.ops_overlapping(ops, t0, t1, a, b))
    return rec, hists, tl_args


def _end_ns(o):
    if o.done:
        return o.done["ts"]
    if o.repop:
        return o.repop["ts"]
    return o.stages[-1][2] if o.stages else o.deq["ts"] if o.deq else \
        o.enq_ns


def _overlaps(o, a, b):
    end = o.done["ts"] if o.done else (o.stages[-1][2] if o.stages else
                                       o.deq["ts"])
    return o.enq_ns <= b and end >= a


def _host_pictures(args, err, caps, recs, span=None, focus=None,
                   deltas=None, client=None):
    """--html/--perfetto of several OSDs: one timeline of them all, with
    the replicated writes' arrows between them, over `span` (default:
    --timeline-ms around the slowest op of any of them, or from --from);
    `recs` their window records for the page (html only); `focus` the
    request id the timeline is centred on (--op); `deltas` (ns) move
    each one's timestamps to the first's clock (captures of several
    hosts; span is on the first's); `client` a client's ops
    (_client_ops), drawn as a band of their own."""
    deltas = deltas or [0] * len(caps)
    t0 = _bound(caps[0], args.t_from, caps[0].first_ns)
    t1 = _bound(caps[0], args.t_to, caps[0].last_ns)
    per = []
    for c, d in zip(caps, deltas):
        ops = c.ops(t0 - d, t1 - d)
        if args.op_class:
            ops = [o for o in ops if o.op_class(c.rules) == args.op_class]
        per.append(ops)
    a, b = span or _timeline_window(args, caps[0],
                                    [o for ops in per for o in ops], t0, t1)
    tl = host_timeline(caps, a, b, [[o for o in ops
                                     if _overlaps(o, a - d, b - d)]
                                    for ops, d in zip(per, deltas)],
                       deltas=deltas, client=client)
    tl["focus"] = focus
    _write_pictures(args, err, [(c.name or "pid %d" % c.pid, r)
                                for c, r in zip(caps, recs)], tl, None)


def _timeline_window(args, cap, ops, t0, t1):
    span = int(args.timeline_ms * 1e6)
    if isinstance(ops, OpSummary):        # one OSD: what window() kept
        ops = [ops.slowest()] if ops.count else []
    if args.t_from is None and ops:
        o = max(ops, key=lambda o: o.key_ns())
        mid = o.enq_ns + o.key_ns() // 2
        a = max(t0, mid - span // 2)
    else:
        a = t0
    return a, min(t1, a + span)


def _write_pictures(args, err, rec, tl, run_info):
    from ..render import html as htmlreport, perfetto
    host = "osds" in tl             # several OSDs (_host_pictures)
    for path, what in ((args.html, "html"), (args.perfetto, "perfetto")):
        if not path:
            continue
        if what == "html":
            data = htmlreport.render_host(rec, tl) if host else \
                htmlreport.render(rec, tl)
        else:
            data = json.dumps(perfetto.render_host(tl) if host else
                              perfetto.render(tl, pid=run_info.pid))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(data)
        except OSError as e:
            raise UserError("cannot write %s: %s" % (path, e.strerror))
        if host:
            err.write("%s: wrote %s (%d OSDs, %d ops, %d threads, %d "
                      "replica arrows in the timeline)\n" % (
                          TOOL, path, len(tl["osds"]), sum(
                              len(o["timeline"]["ops"]) for o in tl["osds"]),
                          sum(len(o["timeline"]["lanes"])
                              for o in tl["osds"]), len(tl["flows"])))
            continue
        err.write("%s: wrote %s (%d ops, %d threads in the timeline)\n" % (
            TOOL, path, len(tl["ops"]), len(tl["lanes"])))

