"""A window of a capture, for the views of cli/views.py and
cli/merged.py: its bounds (--from/--to), its one report (build_interval
over the window, with the slowest ops and a timeline's arguments), and
the pictures drawn of it (--html, --perfetto; one OSD or several)."""
import json
import os
import time

import numpy as np

from ..engine import TOOL
from ..errors import UsageError, UserError
from ..model.interval import build_interval
from ..model import breakdown
from ..model.slowest import slowest
from ..model.timeline import host_timeline
from ..model.verdict import stack_line
from ..capture.ops import OpSummary
from ..capture import doneops
from ..stacks.waits import (StackReader, cpu_summary, has_stacks,
                            lock_shares, op_waits, sleep_notes, top_cpu,
                            top_wait, wait_summary)



def bound(cap, t, default):
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


def end_ns(o):
    if o.done:
        return o.done["ts"]
    if o.repop:
        return o.repop["ts"]
    return o.stages[-1][2] if o.stages else o.deq["ts"] if o.deq else \
        o.enq_ns


def overlaps(o, a, b):
    end = o.done["ts"] if o.done else (o.stages[-1][2] if o.stages else
                                       o.deq["ts"])
    return o.enq_ns <= b and end >= a


def _said(t):
    """--from/--to's value as the user gave it."""
    return getattr(t, "text", None) or "%g" % t[1]


def _at(cap, ns, wall):
    """A time of the capture, as --from/--to's form `wall` says it."""
    s = "%.1f s" % ((ns - cap.first_ns) / 1e9)
    if not wall:
        return s
    return "%s (%s)" % (time.strftime("%H:%M:%S", time.localtime(
        cap.wall(ns))), s)


def check_window(args, cap, t0, t1):
    """--from past the capture's end, --to before its start, or --to not
    after --from: a usage error, in words."""
    if args.t_from is not None and t0 >= cap.last_ns:
        raise UsageError("--from %s: the capture ends at %s" % (
            _said(args.t_from), _at(cap, cap.last_ns,
                                    args.t_from[0] == "wall")))
    if args.t_to is not None and args.t_to[0] == "wall" and \
            t1 <= cap.first_ns:
        raise UsageError("--to %s: the capture starts at %s" % (
            _said(args.t_to), _at(cap, cap.first_ns, True)))
    if t1 <= t0:
        raise UsageError("empty window: --to is not after --from (the "
                         "capture spans %.1f s)" % (
                             (cap.last_ns - cap.first_ns) / 1e9))


def traced(args, cap, t0, t1, err=None):
    """[t0, t1] within the part of the capture recorded with every probe
    attached (capture/window.py: traced_span): a figure of the rest
    would be of probes half attached or half detached. An explicit --to
    past the capture's last report is said on err."""
    a, b = cap.traced_span()
    if max(t0, a) >= min(t1, b):
        raise UserError("the window holds nothing the capture recorded with "
                        "all its probes attached (%.3f s to %.3f s of it: "
                        "before, they were being attached; after its last "
                        "report, detached)" % ((a - cap.first_ns) / 1e9,
                                               (b - cap.first_ns) / 1e9))
    if err is not None and args.t_to is not None and t1 > b:
        err.write("%s: the window ends at %.3f s, the capture's last "
                  "report: its probes were being detached after it\n" % (
                      TOOL, (b - cap.first_ns) / 1e9))
    return max(t0, a), min(t1, b)


def window_record(args, cap, run_info, err=None):
    """-> (the window's Interval, the timeline's arguments or None)"""
    t0 = bound(cap, args.t_from, cap.first_ns)
    t1 = bound(cap, args.t_to, cap.last_ns)
    check_window(args, cap, t0, t1)
    t0, t1 = traced(args, cap, t0, t1, err)
    cur, ops = cap.window(t0, t1, role=args.thread_role,
                          op_class=args.op_class,
                          slowest=args.slowest or 0,
                          spans=bool(args.html or args.perfetto))
    iv = build_interval(run_info, cur, None, cap.wall(t1), (t1 - t0) / 1e9,
                        None)
    rec = iv.record
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
        if has_stacks(cap):
            tops = sorted(ops.by_rank(), key=lambda o: o.key_ns(),
                          reverse=True)
            add_waits(cap, zip(tops, rec["slowest"]), t1)
    if getattr(args, "by", None):
        iv.by = by_keys(args, cap, t0, t1)
        rec["by"] = iv.by.record
    stacks = _stack_summary(cap, t0, t1, args.thread_role,
                            rec.get("worker_role"))
    if stacks:
        rec["stacks"] = stacks
        line = stack_line(rec.get("cause"), stacks["workers"])
        if line and rec.get("verdict") is not None:
            rec["verdict"] += "\n" + line
    tl_args = None
    if args.html or args.perfetto:
        a, b = timeline_window(args, cap, ops, t0, t1)
        tl_args = (cap, a, b, cap.ops_overlapping(ops, t0, t1, a, b))
    return iv, tl_args


def _stack_summary(cap, t0, t1, role, worker):
    """A capture with stacks (-w --stacks, --on-cpu): where the window's
    threads waited and what they ran, summed, and the top of each for
    the workers (role name `worker`): {"waits", "on_cpu", "oncpu_hz",
    "workers"}, or None."""
    waits, cpu = has_stacks(cap), has_stacks(cap, "cpu_sample")
    if not (waits or cpu):
        return None
    sr = StackReader(cap)
    top = dict.fromkeys(("lock", "locks", "blocked", "on_cpu"))
    try:
        out = {}
        if waits:
            ws = sr.waits(t0, t1, role)
            out["waits"] = wait_summary(ws)
            top["lock"] = top_wait(ws, worker, ("lock",))
            top["locks"] = lock_shares(ws, worker)
            top["blocked"] = top_wait(ws, worker, ("work",))
        if cpu:
            ss = sr.samples(t0, t1, role)
            out["on_cpu"] = cpu_summary(ss)
            out["oncpu_hz"] = int(cap.env.get("oncpu_hz") or 0) or None
            top["on_cpu"] = top_cpu(ss, worker)
    finally:
        sr.close()
    out["workers"] = top
    return out


def add_waits(cap, pairs, t1=None):
    """--slowest, --op of a capture with stacks (-w --stacks): each op's
    waits on its worker while it ran it, where it slept and who woke it.
    pairs: (OpRec, its op_row); t1: the last time to read (default: its
    ops' last end)."""
    pairs = [(o, row) for o, row in pairs
             if o.deq and (o.done or o.repop)]
    if not pairs:
        return
    ends = [(o.done or o.repop)["ts"] for o, _ in pairs]
    sr = StackReader(cap)
    try:
        # an op's span may begin before the window: its waits too
        waits = sr.waits(min(o.deq["ts"] for o, _ in pairs),
                         max(ends + ([t1] if t1 else [])))
    finally:
        sr.close()
    for (o, row), end in zip(pairs, ends):
        row["waits"] = op_waits(waits, o.deq["tid"], o.deq["ts"], end,
                                o.enq_ns, cap.comm)


def _by_columns(args, cap, t0, t1, path):
    """The columns --by reads of one capture slot's window (capture/
    doneops.py: read). A capture whose ops do not carry what --by's key
    is read from (older captures: no request ids, PGs or object names)
    is a usage error."""
    if args.by == "image" and not doneops.has_objects(cap):
        raise UsageError("--by image: %s holds no object names (captures "
                         "older than format 2 carry none), so no RBD "
                         "image" % path)
    if args.by != "image" and not doneops.has_reqids(cap):
        raise UsageError("--by %s: %s holds no request ids or PGs (captures "
                         "older than format 2 carry none)" % (args.by, path))
    cols = doneops.read(cap, t0, t1, args.op_class)
    cols["key"] = breakdown.keys_of(args.by, cols, cap.cluster_names)
    return cols


def _by_build(args, parts):
    """The Breakdown of the columns of one or more windows."""
    cols = {k: np.concatenate([p[k] for p in parts])
            for k in ("key", "total_ns", "qwait_ns", "dequeued",
                      "bytes_in", "bytes_out")}
    return breakdown.build(args.by, cols["key"], cols["total_ns"],
                           cols["qwait_ns"], cols["dequeued"],
                           args.top or breakdown.DEFAULT_TOP,
                           cols["bytes_in"], cols["bytes_out"])


def by_keys(args, cap, t0, t1):
    """--by KEY: the window's completed client ops broken down by KEY
    (model/breakdown.py) -> Breakdown."""
    return _by_build(args, [_by_columns(args, cap, t0, t1, args.read)])


def by_captures(args, caps, err):
    """--by KEY over several captures (a host's each): one breakdown of
    the ops of every OSD of every capture, each over its own window
    (--from/--to as for one capture: seconds from its own start, or the
    wall clock) -> Breakdown."""
    parts = []
    for c in caps:
        t0 = bound(c, args.t_from, c.first_ns)
        t1 = bound(c, args.t_to, c.last_ns)
        check_window(args, c, t0, t1)
        t0, t1 = traced(args, c, t0, t1, err)
        parts.append(_by_columns(args, c, t0, t1, c.trace.path))
    return _by_build(args, parts)


def timeline_window(args, cap, ops, t0, t1):
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


def host_pictures(args, err, caps, ivs, span=None, focus=None,
                   deltas=None, client=None):
    """--html/--perfetto of several OSDs: one timeline of them all, with
    the replicated writes' arrows between them, over `span` (default:
    --timeline-ms around the slowest op of any of them, or from --from);
    `ivs` their windows' Intervals for the page (html only); `focus` the
    request id the timeline is centred on (--op); `deltas` (ns) move
    each one's timestamps to the first's clock (captures of several
    hosts; span is on the first's); `client` a client's ops
    (_client_ops), drawn as a band of their own."""
    deltas = deltas or [0] * len(caps)
    t0 = bound(caps[0], args.t_from, caps[0].first_ns)
    t1 = bound(caps[0], args.t_to, caps[0].last_ns)
    # as its report's window: what the first was recording with every
    # probe attached
    t0, t1 = traced(args, caps[0], t0, t1)
    per = []
    for c, d in zip(caps, deltas):
        ops = c.ops(t0 - d, t1 - d)
        if args.op_class:
            ops = [o for o in ops if o.op_class(c.rules) == args.op_class]
        per.append(ops)
    a, b = span or timeline_window(args, caps[0],
                                    [o for ops in per for o in ops], t0, t1)
    tl = host_timeline(caps, a, b, [[o for o in ops
                                     if overlaps(o, a - d, b - d)]
                                    for ops, d in zip(per, deltas)],
                       deltas=deltas, client=client)
    tl["focus"] = focus
    write_pictures(args, err, [(c.name or "pid %d" % c.pid, iv)
                                for c, iv in zip(caps, ivs)], tl, None)


# a sleep begun in a timeline's window keeps its stacks when it ends
# after it (its stacks are recorded at its wake-up) up to this much later,
# or a window's length later, the longer
LATE_WAKE_NS = 1000000000


def add_sleep_stacks(tl, cap):
    """A one-OSD timeline `tl` of a capture with stacks (-w --stacks):
    its lanes' sleeps with their stacks (tl["stacks"]), for --perfetto
    and --html: those woken in its window, and those begun in it and woken
    after it (drawn clipped at its end)."""
    if not has_stacks(cap):
        return tl
    a, b = tl["window"]
    sr = StackReader(cap)
    try:
        waits = [w for w in sr.waits(a, b + max(b - a, LATE_WAKE_NS))
                 if w.ts <= b or w.ts - w.off_ns < b]
    finally:
        sr.close()
    tl["stacks"] = sleep_notes(waits, {ln["tid"] for ln in tl["lanes"]},
                               cap.comm)
    return tl


def write_pictures(args, err, iv, tl, run_info):
    """--html/--perfetto: the page of `iv`, the window's Interval (of
    several OSDs: [(name, Interval)]), and timeline `tl`."""
    from ..render import html as htmlreport, perfetto
    host = "osds" in tl             # several OSDs (host_pictures)
    for path, what in ((args.html, "html"), (args.perfetto, "perfetto")):
        if not path:
            continue
        if what == "html":
            data = htmlreport.render_host(iv, tl) if host else \
                htmlreport.render(iv, tl)
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
