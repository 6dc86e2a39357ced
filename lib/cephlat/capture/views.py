"""Reading a capture (osdstage -r): the live run's reports again, or one
report over a window (--from/--to) with filters, the slowest ops and the
timeline pictures. No root and no build needed: the capture describes
itself (capture/reader.py)."""
import json
import os
import time

from ..errors import UserError, quiet_broken_pipe
from ..model.interval import RunInfo, interval_record
from ..model.slowest import slowest
from ..model.timeline import timeline
from ..render.text import print_slowest, print_text
from .reader import Capture

TOOL = "osdstage"
# the options that ask for a window report
OFFLINE_ONLY = {"t_from": "--from", "t_to": "--to",
                "thread_role": "--thread-role", "op_class": "--op-class",
                "slowest": "--slowest", "html": "--html",
                "perfetto": "--perfetto"}


def check_names(args, vocab, whose):
    """-S and --op-class name stages and classes of this vocabulary."""
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


def run(args, out, err):
    """Read capture args.read: the live run's reports again, or one report
    over a window with filters, slowest ops and pictures."""
    cap = Capture(args.read)
    if cap.trace.truncated:
        err.write("%s: %s was cut short (%s ends inside a packet): read up "
                  "to the last complete packet\n" % (
                      TOOL, args.read, ", ".join(cap.trace.truncated_streams)))
    if cap.first_ns is None:
        raise UserError("%s holds no complete packet: nothing to read" %
                        args.read)
    if cap.end is None:
        err.write("%s: %s has no end marker (the recording was killed); "
                  "what follows its last report is rebuilt from the events"
                  "\n" % (TOOL, args.read))
    run_info = RunInfo.from_capture(cap)
    check_names(args, cap.vocab, "the capture's")
    if args.thread_role and args.thread_role not in cap.roles.names:
        raise UserError("--thread-role %s: the capture's roles are %s" % (
            args.thread_role, ", ".join(cap.roles.names)))
    window = any(getattr(args, k) for k in OFFLINE_ONLY)
    try:
        if not window:
            return _replay(args, out, cap, run_info)
        return _window(args, out, err, cap, run_info)
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0


def _emit(args, out, rec, hists):
    if args.stages:
        keep = set(args.stages)
        rec["stages"] = {k: v for k, v in rec["stages"].items() if k in keep}
        if "kernel" in rec:
            rec["kernel"] = {k: v for k, v in rec["kernel"].items()
                             if k in keep}
    if args.json:
        out.write(json.dumps(rec) + "\n")
        out.flush()
    else:
        print_text(out, args, rec, hists)


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
            cur, _ = cap.window(t0, cap.last_ns)
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
    t0 = _bound(cap, args.t_from, cap.first_ns)
    t1 = _bound(cap, args.t_to, cap.last_ns)
    if t1 <= t0:
        raise UserError("empty window: --to is not after --from (the capture "
                        "spans %.1f s)" % ((cap.last_ns - cap.first_ns) / 1e9))
    cur, ops = cap.window(t0, t1, role=args.thread_role,
                          op_class=args.op_class)
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
        rec["slowest"] = slowest(cap, ops, args.slowest)
    _emit(args, out, rec, hists)
    if args.slowest and not args.json:
        print_slowest(out, rec["slowest"])
    if args.html or args.perfetto:
        a, b = _timeline_window(args, cap, ops, t0, t1)
        tl = timeline(cap, a, b, [o for o in ops if _overlaps(o, a, b)])
        _write_pictures(args, err, rec, tl, run_info)
    return 0


def _overlaps(o, a, b):
    end = o.done["ts"] if o.done else (o.stages[-1][2] if o.stages else
                                       o.deq["ts"])
    return o.enq_ns <= b and end >= a


def _timeline_window(args, cap, ops, t0, t1):
    span = int(args.timeline_ms * 1e6)
    if args.t_from is None and ops:
        o = max(ops, key=lambda o: o.key_ns())
        mid = o.enq_ns + o.key_ns() // 2
        a = max(t0, mid - span // 2)
    else:
        a = t0
    return a, min(t1, a + span)


def _write_pictures(args, err, rec, tl, run_info):
    from ..render import html as htmlreport, perfetto
    for path, what in ((args.html, "html"), (args.perfetto, "perfetto")):
        if not path:
            continue
        if what == "html":
            data = htmlreport.render(rec, tl)
        else:
            data = json.dumps(perfetto.render(tl, pid=run_info.pid))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(data)
        except OSError as e:
            raise UserError("cannot write %s: %s" % (path, e.strerror))
        err.write("%s: wrote %s (%d ops, %d threads in the timeline)\n" % (
            TOOL, path, len(tl["ops"]), len(tl["lanes"])))

