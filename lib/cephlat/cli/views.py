"""Reading a capture (osdstage -r): the live run's reports again, or one
report over a window (--from/--to) with filters, the slowest ops and the
timeline pictures (cli/windows.py); several captures and clients' traces
read together are cli/merged.py's. No root and no build needed: the
capture describes itself (capture/reader.py)."""
import os

from ..engine import TOOL
from ..errors import UsageError, UserError, quiet_broken_pipe
from ..model.interval import RunInfo, build_interval, host_record
from ..model.schema import json_line
from ..model.timeline import timeline
from ..render.breakdown import print_breakdown
from ..render.interval_text import emit
from ..render.text import print_header, print_stacks
from ..capture.ctf import trace_tool
from ..capture.reader import Capture
from ..rbd.reader import RbdTrace
from .args import OFFLINE_ONLY, text_options
from . import header, otlp
from .lineup import clock_check, clock_offsets
from .merged import end_to_end, op_story
from .windows import (add_sleep_stacks, bound, by_captures, check_window,
                      host_pictures, traced, window_record,
                      write_pictures)


def check_names(args, vocab, whose):
    """-S and --op-class name stages and classes of this vocabulary."""
    if args.stages == "all":
        args.stages = None          # reading: every stage is shown anyway
    if args.stages:
        known = vocab.probed + vocab.kernel
        bad = [n for n in args.stages if n not in known]
        if bad:
            raise UsageError("%s: unknown stage %s; %s stages: %s" % (
                TOOL, bad[0], whose, ", ".join(known)))
    if getattr(args, "op_class", None) and \
            args.op_class not in vocab.op_classes:
        raise UsageError("%s: --op-class %s: %s classes are %s" % (
            TOOL, args.op_class, whose, ", ".join(vocab.op_classes)))


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
        raise UsageError("no osdstage capture among %s (an rbdrecord trace "
                         "is read with the captures of its OSDs)" %
                         ", ".join(paths))
    return caps, clients


def run(args, out, err):
    """Read the captures args.read: the live run's reports again, or one
    report over a window with filters, slowest ops and pictures; or, with
    several captures (one per host) and clients' traces, one op's story
    end to end (--op); several captures' ops broken down together
    (--by)."""
    paths, clients = _sort_inputs(args.read)
    if args.by and len(paths) > 1:
        alone = [opt for k, opt in (("slowest", "--slowest"),
                                    ("html", "--html"),
                                    ("perfetto", "--perfetto"))
                 if getattr(args, k)]
        if alone:
            raise UsageError("--by over several captures prints their "
                             "breakdown alone: %s reads one capture" %
                             alone[0])
    if args.by and clients:
        raise UsageError("--by reads OSD captures only: drop the client's "
                         "trace %s (--by image reads the object names the "
                         "OSDs' ops carry)" % clients[0])
    if (len(paths) > 1 or clients) and not args.op_reqid and \
            not args.by and \
            (not clients or any(getattr(args, k) for k in OFFLINE_ONLY
                                if k != "slowest")):
        raise UsageError("several captures, or a client's trace, are read "
                         "together for one op's story (--op REQID) or, "
                         "with a client's trace, the end-to-end table "
                         "(and --slowest); the other views read one "
                         "capture")
    shifts = clock_offsets(args, paths, clients)
    opened = [_open(p, err) for p in paths]
    cap = opened[0]
    args.read = paths[0] if len(paths) == 1 else ", ".join(paths)
    check_names(args, cap.vocab, "the capture's")
    if args.thread_role and args.thread_role not in cap.roles.names:
        raise UsageError("--thread-role %s: the capture's roles are %s" % (
            args.thread_role, ", ".join(cap.roles.names)))
    caps = [t for c, p in zip(opened, paths) for t in _targets(args, c, p)]
    for c in opened + caps:
        c.shift_ns = shifts.get(c.trace.path, 0)
    traces = [RbdTrace(p, shifts.get(p, 0)) for p in clients]
    # --by reads each capture's ops on its own clock: none to line up
    clocks = clock_check(err, opened, traces, shifts) \
        if (len(paths) > 1 or clients) and not args.by else None
    window = any(getattr(args, k) for k in OFFLINE_ONLY)
    opts = text_options(args)
    if getattr(args, "otlp", None):
        # before the views: the end-to-end table lets the traces go
        otlp.send(args, err, caps, traces, clocks)
    try:
        if args.op_reqid:
            return op_story(args, opts, out, caps, err, traces, clocks)
        if clients:
            return end_to_end(args, opts, out, caps, traces, clocks)
        if args.by and len(paths) > 1:
            return _by_captures(args, opts, out, err, paths, caps)
        if args.folded:
            return _folded(args, out, err, caps)
        if len(caps) > 1:
            return _many(args, opts, out, err, caps, window)
        cap = caps[0]
        run_info = RunInfo.from_capture(cap)
        if not window:
            return _replay(args, opts, out, cap, run_info)
        return _window(args, opts, out, err, cap, run_info)
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0


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
                raise UsageError("--osd %s: the capture holds %s" % (
                    i, ", ".join(n or "pid %d" % t["pid"] for n, t in
                                 zip(names, cap.targets))))
            slots.append(names.index("osd." + i))
    return [cap if s == cap.slot else Capture(path, s) for s in slots]


def _many(args, opts, out, err, caps, window):
    """Several OSDs of one capture: a report each and the host summary,
    per recorded report (or once over the window, with one timeline of
    them all for --html/--perfetto)."""
    runs = [RunInfo.from_capture(c) for c in caps]
    if window:
        ivs = [window_record(args, c, r)[0] for c, r in zip(caps, runs)]
        _header(args, opts, out, caps[0], caps, window=ivs[0].record)
        t1 = bound(caps[0], args.t_to, caps[0].last_ns)
        _show_host(args, opts, out, runs, ivs, caps[0].wall(t1),
                   ivs[0].record["interval_s"])
        if not opts.json:
            for c, iv in zip(caps, ivs):
                if iv.by is not None:
                    print_breakdown(out, opts, iv.by,
                                    c.name or "pid %d" % c.pid)
        if args.html or args.perfetto:
            host_pictures(args, err, caps, ivs)
        return 0
    per = [c.replay() for c in caps]
    _header(args, opts, out, caps[0], caps,
            reports=min(len(p) for p in per))
    for rows in zip(*per):
        ivs = []
        for (cur, prev, r), run in zip(rows, runs):
            iv = build_interval(run, cur, prev, r.wall_ts, r.interval_s,
                                r.in_flight)
            iv.record.update(r.extra)
            ivs.append(iv)
        r = rows[0][2]
        _show_host(args, opts, out, runs, ivs, r.wall_ts, r.interval_s)
    return 0


def _by_captures(args, opts, out, err, paths, caps):
    """--by over several captures: one breakdown of every OSD's ops of
    them all (no window report: each capture's is read alone)."""
    bd = by_captures(args, caps, err)
    names = [c.name or "pid %d" % c.pid for c in caps]
    if opts.json:
        out.write(json_line({"type": "breakdown", "captures": paths,
                             "osds": names, "by": bd.record}))
        return 0
    line = "%d captures (%s): %d OSDs" % (
        len(paths), ", ".join(os.path.basename(os.path.normpath(p))
                              for p in paths), len(caps))
    out.write((line if len(line) <= 80 else "%d captures: %d OSDs" % (
        len(paths), len(caps))) + "\n")
    print_breakdown(out, opts, bd, "%d OSDs" % len(caps))
    return 0


def _show_host(args, opts, out, runs, ivs, ts, secs):
    for iv in ivs:
        _filter_stages(args, iv.record)
    emit(out, opts, ivs, host_record(runs, ivs, ts, secs))


def _filter_stages(args, rec):
    if args.stages:
        keep = set(args.stages)
        rec["stages"] = {k: v for k, v in rec["stages"].items() if k in keep}
        if "kernel" in rec:
            rec["kernel"] = {k: v for k, v in rec["kernel"].items()
                             if k in keep}


def _emit(args, opts, out, iv):
    _filter_stages(args, iv.record)
    emit(out, opts, [iv])


def _header(args, opts, out, cap, caps=None, reports=None, window=None):
    """The text report's head (not with -j): the capture's host,
    targets, release and mode, and its span or the window read."""
    if opts.json:
        return
    print_header(out, opts, header.capture(
        cap, args.read, caps, reports,
        window and window.get("window"), header.filter_words(args)))


def _replay(args, opts, out, cap, run_info):
    """The live run's reports, rebuilt."""
    reps = cap.replay()
    t0 = cap.reported_until() or cap.first_ns
    rebuilt = cap.end is None and cap.last_ns > t0
    _header(args, opts, out, cap, reports=len(reps) + rebuilt)
    for cur, prev, r in reps:
        iv = build_interval(run_info, cur, prev, r.wall_ts, r.interval_s,
                            r.in_flight)
        iv.record.update(r.extra)
        _emit(args, opts, out, iv)
    if rebuilt:
        cur, _ = cap.window(t0, cap.last_ns, spans=False)
        iv = build_interval(run_info, cur, None, cap.wall(cap.last_ns),
                            (cap.last_ns - t0) / 1e9, None)
        iv.record["type"] = "window"
        _emit(args, opts, out, iv)
    return 0


def _folded(args, out, err, caps):
    """--folded: the window's waits with stacks, each stack's time summed,
    or (--folded on-cpu) its samples on a CPU, counted (with several
    OSDs, each line starts with its name); the window is within the
    capture's traced span, as a report's."""
    from ..stacks.waits import (StackReader, folded, folded_samples,
                                has_stacks)
    cpu = args.folded == "on-cpu"
    any_stacks = False
    for cap in caps:
        if not has_stacks(cap, "cpu_sample" if cpu else "wait_stack"):
            continue
        any_stacks = True
        t0 = bound(cap, args.t_from, cap.first_ns)
        t1 = bound(cap, args.t_to, cap.last_ns)
        check_window(args, cap, t0, t1)
        # the window every view reads: what was recorded with every probe
        # attached (the report's stack summary is of the same span)
        t0, t1 = traced(args, cap, t0, t1, err)
        sr = StackReader(cap)
        try:
            lines = folded_samples(sr.samples(t0, t1, args.thread_role)) \
                if cpu else folded(sr.waits(t0, t1, args.thread_role))
        finally:
            sr.close()
        name = cap.targets[cap.slot].get("name") if len(caps) > 1 else None
        for stack, us in sorted(lines.items(), key=lambda kv: -kv[1]):
            out.write("%s%s %d\n" % (name + ";" if name else "", stack,
                                      round(us)))
        if sr.files.missing:
            err.write("%s: %s: not on this host as recorded (its build id "
                      "differs or it is gone): its frames are addresses\n"
                      % (TOOL, ", ".join(sr.files.missing)))
        if sr.ksyms.why:
            err.write("%s: kernel frames are addresses: %s\n" % (
                TOOL, sr.ksyms.why))
    if not any_stacks:
        raise UserError("%s holds no %s: record them with -w CAPTURE %s" % (
            args.read, "samples on a CPU" if cpu else "stacks of waits",
            "--on-cpu HZ" if cpu else "--stacks US"))
    return 0


def _window(args, opts, out, err, cap, run_info):
    """One report over a window, with filters, slowest ops and pictures."""
    iv, tl_args = window_record(args, cap, run_info, err)
    _header(args, opts, out, cap, window=iv.record)
    _emit(args, opts, out, iv)
    if iv.by is not None and not opts.json:
        print_breakdown(out, opts, iv.by)
    if iv.record.get("stacks") and not opts.json:
        print_stacks(out, opts, iv.record["stacks"])
    if tl_args is not None:
        write_pictures(args, err, iv, add_sleep_stacks(
            timeline(*tl_args), cap), run_info)
    return 0


