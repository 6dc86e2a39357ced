"""osdstage: per-stage latency of ops inside a running ceph-osd.

The command-line logic behind tools/osdstage.py: target selection, the
report loop and output. The engine is stagetrace.py; stages and functions
come from probetable.py.
"""
import argparse
import json
import os
import signal
import textwrap
import sys
import time

from ..capture import format as capture

from ..engine import duty

from ..capture import reader as offline

from ..ceph import probetable

from ..model import report

from ..ceph import spec
from ..engine.elfsym import ElfSymbols
from ..errors import UserError, quiet_broken_pipe, run_cli
from ..model.hist import render_log2
from ..engine.tracer import (CEPH_ROLES, DEFAULT_MAX_OPS, DEFAULT_OP_TIMEOUT_S,
                         StageTracer, resolve)
from ..ceph.target import (Target, find_ceph_osds, require_btf, require_root,
                     require_tracefs)

TOOL = "osdstage"

EXAMPLES = """examples:
  osdstage.py -p 1234          # trace ceph-osd 1234 until Ctrl-C, then report
  osdstage.py --osd 0 5 3      # osd.0: three 5-second reports
  osdstage.py -p 1234 -m 10 1  # one 10-second report, histograms in msecs
  osdstage.py -p 1234 -j 1     # one JSON object per second on stdout
  osdstage.py -p 1234 -T 1     # timestamp each report
  osdstage.py -p 1234 -S do_op,bluestore_read 5  # only these stages
  osdstage.py --list           # every ceph-osd here and what can be probed
  osdstage.py -p 1234 --no-kernel 5   # user-space stages only (cheaper)
  osdstage.py -p 4321 --probes myqueue.json 5  # any producer/consumer program

capture now, analyse later (anywhere, no root needed to read):
  osdstage.py -p 1234 -w incident.ctf 10 6   # record 1 minute, 6 reports
  osdstage.py -r incident.ctf                # the same 6 reports again
  osdstage.py -r incident.ctf -j             # ... as JSON
  babeltrace2 incident.ctf | head            # it is a CTF trace
  osdstage.py -r incident.ctf --from 20 --to 25 --op-class write
  osdstage.py -r incident.ctf --slowest 5    # the 5 slowest ops, every stage
  osdstage.py -r incident.ctf --thread-role tp_osd_tp --stage offcpu
  osdstage.py -r incident.ctf --html report.html --perfetto trace.json
"""


def positive_float(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number: %r" % s)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0: %r" % s)
    return v


def positive_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % s)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0: %r" % s)
    return v


def time_arg(s):
    """seconds (from the capture's start) or HH:MM:SS[.f] (wall clock):
    -> ("rel", secs) or ("wall", secs since midnight)"""
    if ":" in s:
        parts = s.split(":")
        try:
            if len(parts) != 3:
                raise ValueError
            h, m, sec = int(parts[0]), int(parts[1]), float(parts[2])
        except ValueError:
            raise argparse.ArgumentTypeError("not a time: %r (HH:MM:SS)" % s)
        return ("wall", h * 3600 + m * 60 + sec)
    try:
        v = float(s.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError("not a time: %r" % s)
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0: %r" % s)
    return ("rel", v)


def pid_arg(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("not a pid: %r" % s)
    if v <= 0:
        raise argparse.ArgumentTypeError("not a pid: %r" % s)
    return v


def stage_list(s):
    names = [n.strip() for n in s.split(",") if n.strip()]
    known = list(probetable.STAGES) + probetable.KERNEL_STAGES
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            "unknown stage %s; stages: %s" % (",".join(bad) or "''",
                                              ", ".join(known)))
    return names


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # one line, argparse's exit status 2
        raise UserError("%s: %s (see --help)" % (TOOL, message), status=2)


def build_parser():
    p = _Parser(
        prog="osdstage.py",
        description="Summarize where ops spend their time inside a running "
                    "ceph-osd,\nper stage, as latency histograms (eBPF uprobes "
                    "aggregated in the kernel).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    t = p.add_mutually_exclusive_group(required=True)
    t.add_argument("-p", "--pid", type=pid_arg,
                   help="trace this ceph-osd process")
    t.add_argument("--osd", metavar="ID",
                   help="trace the ceph-osd started with --id/-i ID")
    t.add_argument("--list", action="store_true",
                   help="list every ceph-osd on this host: id, pid, release "
                        "and which stages can be probed")
    t.add_argument("-r", "--read", metavar="CAPTURE",
                   help="analyse a capture made with -w (no root needed)")
    p.add_argument("-m", "--milliseconds", action="store_true",
                   help="histograms in milliseconds")
    p.add_argument("-T", "--timestamp", action="store_true",
                   help="include a timestamp on each report")
    p.add_argument("-j", "--json", action="store_true",
                   help="print one JSON object per interval on stdout")
    p.add_argument("-S", "--stages", "--stage", type=stage_list,
                   default=None,
                   help="comma-separated stages to trace (with -r: to show; "
                        "kernel stages too) (default: all); known: " +
                        ", ".join(probetable.STAGES))
    p.add_argument("--release", default=None, metavar="X.Y",
                   help="use this Ceph release's probe table (default: asked "
                        "from the binary)")
    p.add_argument("--strict", action="store_true",
                   help="fail if any requested stage cannot be probed")
    p.add_argument("--max-ops", type=positive_int, default=DEFAULT_MAX_OPS,
                   metavar="N", help="ops tracked at once between enqueue and "
                   "completion (default %d)" % DEFAULT_MAX_OPS)
    p.add_argument("--op-timeout", type=positive_float,
                   default=DEFAULT_OP_TIMEOUT_S, metavar="SECS",
                   help="forget (and count) ops idle this long (default %g)"
                   % DEFAULT_OP_TIMEOUT_S)
    p.add_argument("--no-kernel", action="store_true",
                   help="no scheduler/futex/block/syncfs tracepoints: user-"
                        "space stages only, no queue-wait attribution")
    p.add_argument("--max-overhead", type=positive_float, metavar="PCT",
                   help="keep the estimated cost under PCT %% of the "
                        "machine's CPU time by attaching only part of the "
                        "time (duty cycles; see osdstage(8), OVERHEAD)")
    p.add_argument("--probes", metavar="FILE",
                   help="trace any program (not only ceph-osd) from a probe "
                        "spec: enqueue/dequeue functions and worker threads "
                        "(see osdstage(8), PROBE SPEC)")
    w = p.add_argument_group("capture (see osdstage(8), CAPTURE FILES)")
    w.add_argument("-w", "--write", metavar="CAPTURE",
                   help="also record every measurement to CAPTURE (a CTF "
                        "trace directory, mode 0600) for -r or babeltrace2")
    w.add_argument("--force", action="store_true",
                   help="overwrite an existing CAPTURE")
    w.add_argument("--ring-mb", type=positive_float, default=16, metavar="MB",
                   help="ring buffer between the probes and the recorder "
                        "(default 16)")
    o = p.add_argument_group("reading a capture (-r)")
    o.add_argument("--from", dest="t_from", type=time_arg, metavar="T",
                   help="start of the window: seconds from the capture's "
                        "start, or wall-clock HH:MM:SS[.f]")
    o.add_argument("--to", dest="t_to", type=time_arg, metavar="T",
                   help="end of the window (same forms)")
    o.add_argument("--thread-role", metavar="ROLE",
                   help="kernel stages and thread times of this thread role "
                        "only (e.g. tp_osd_tp)")
    o.add_argument("--op-class", choices=probetable.OP_CLASSES,
                   help="ops of this class only")
    o.add_argument("--slowest", type=positive_int, metavar="N",
                   help="list the N slowest ops: every stage, the worker, "
                        "how it was woken")
    o.add_argument("--html", metavar="FILE",
                   help="write a self-contained HTML report with a timeline")
    o.add_argument("--perfetto", metavar="FILE",
                   help="write the timeline as Chrome trace-event JSON "
                        "(opens in the Perfetto UI)")
    o.add_argument("--timeline-ms", type=positive_float, default=50.0,
                   metavar="MS",
                   help="length of the timeline (default 50 ms: from --from, "
                        "else around the slowest op)")
    p.add_argument("interval", nargs="?", type=positive_float, default=None,
                   help="seconds between reports (default: one report at "
                        "Ctrl-C)")
    p.add_argument("count", nargs="?", type=positive_int, default=None,
                   help="number of reports (default: until Ctrl-C)")
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)


# --------------------------------------------------------------------------
# target and release

def release_of(target, override=None):
    version = override or target.ceph_version()
    if not version:
        raise UserError("cannot tell the Ceph release of ceph-osd %d (its "
                        "--version gave nothing); pass --release X.Y "
                        "(known: %s)" % (target.pid, probetable.known_releases()))
    rel = probetable.release_for(version)
    if rel is None:
        raise UserError("Ceph %s has no probe table; known releases: %s" % (
            version, probetable.known_releases()))
    return version, rel


def pick_target(args):
    if args.pid is not None:
        return Target(args.pid)
    osds = [o for o in find_ceph_osds() if o[1] == str(args.osd)]
    if not osds:
        raise UserError("no running ceph-osd with id %s (see: osdstage.py "
                        "--list)" % args.osd)
    if len(osds) > 1:
        raise UserError("several ceph-osd processes have id %s: pids %s; use "
                        "-p" % (args.osd, ", ".join(str(o[0]) for o in osds)))
    return Target(osds[0][0])


def list_osds(args, out):
    rows = []
    for pid, osd_id in find_ceph_osds():
        row = {"pid": pid, "osd": osd_id, "ceph_version": None,
               "release": None, "stages": {}}
        try:
            t = Target(pid)
            version = args.release or t.ceph_version()
            row["ceph_version"] = version
            rel = probetable.release_for(version)
            if rel is None:
                row["error"] = "no probe table for Ceph %s" % version
            else:
                row["release"] = rel.name
                with ElfSymbols(t.exe_path) as elf:
                    plan = resolve(elf, rel, list(probetable.STAGES))
                for s in probetable.STAGES:
                    row["stages"][s] = "ok" if s in plan.stages else \
                        plan.unavailable.get(s, "?")
        except UserError as e:
            row["error"] = str(e)
        rows.append(row)
    if args.json:
        out.write(json.dumps({"type": "list", "osds": rows}) + "\n")
        return 0
    if not rows:
        out.write("no ceph-osd process is running\n")
        return 0
    out.write("%-6s %-8s %-10s %-9s %s\n" % ("OSD", "PID", "VERSION",
                                             "RELEASE", "STAGES"))
    for r in rows:
        ok = [s for s, v in r["stages"].items() if v == "ok"]
        stages = "all %d" % len(ok) if ok and len(ok) == len(r["stages"]) \
            else (",".join(ok) or "-")
        out.write("%-6s %-8d %-10s %-9s %s\n" % (
            r["osd"] or "?", r["pid"], r["ceph_version"] or "?",
            r["release"] or "?", stages))
        if r.get("error"):
            out.write("       %s\n" % r["error"])
        for s, v in r["stages"].items():
            if v != "ok":
                out.write("       %s: %s\n" % (s, v))
    return 0


# --------------------------------------------------------------------------
# output

def _summary_with_hist(h):
    s = h.summary()
    s["hist"] = [[lo, hi, c] for lo, hi, c in h.log2_buckets(1)]
    return s


class RunInfo:
    """What a report needs to know about the run: from the live tracer, or
    from a capture's metadata (the same fields, recorded)."""

    def __init__(self, pid, version, stages, unavailable, classes,
                 call_bias_ns, kernel, roles):
        self.pid, self.version = pid, version
        self.stages, self.unavailable = list(stages), dict(unavailable)
        self.classes = set(classes)
        self.call_bias_ns, self.kernel, self.roles = call_bias_ns, kernel, roles

    def info(self):
        """The recorded part (capture metadata)."""
        return {"pid": self.pid, "ceph_version": self.version,
                "stages": self.stages, "unavailable": self.unavailable,
                "classes": sorted(self.classes)}

    @classmethod
    def from_capture(cls, cap):
        i = cap.info
        return cls(i["pid"], i["ceph_version"], i["stages"],
                   i["unavailable"], i["classes"], cap.call_bias_ns,
                   cap.kernel, cap.roles)


def interval_record(run, cur, prev, ts, secs, in_flight):
    """One interval's JSON object from two snapshots."""
    hists, counters = report.interval_deltas(cur, prev)
    stages = {}
    for stage in run.stages:
        s = _summary_with_hist(hists[stage])
        if stage in run.classes:
            s["by_class"] = {c: hists["%s.%s" % (stage, c)].summary()
                             for c in probetable.OP_CLASSES}
        stages[stage] = s
    rec = {
        "type": "interval",
        "ts": round(ts, 6),
        "interval_s": round(secs, 3),
        "pid": run.pid,
        "ceph_version": run.version,
        "stages": stages,
        "unavailable": dict(run.unavailable),
        "lost": report.split_counters(counters),
        "in_flight": in_flight,
        "call_bias_us": round(run.call_bias_ns / 1000.0, 3),
    }
    if not run.kernel:
        return rec, hists
    roles = run.roles
    kst, per_role = report.kernel_stages(hists, roles)
    kernel = {}
    for name in probetable.KERNEL_STAGES:
        s = _summary_with_hist(kst[name])
        if name in per_role:
            s["by_role"] = {r: _summary_with_hist(rh)
                            for r, rh in per_role[name].items()}
        kernel[name] = s
    kernel["block_rq"]["by_device"] = {
        dev: {"count": d["count"] - p.get("count", 0),
              "mean_us": round((d["sum_ns"] - p.get("sum_ns", 0)) /
                               max(1, d["count"] - p.get("count", 0)) / 1000,
                               1),
              "bytes": d["bytes"] - p.get("bytes", 0)}
        for dev, d in cur.devs.items()
        for p in [prev.devs.get(dev, {}) if prev else {}]
        if d["count"] - p.get("count", 0)}
    threads = report.thread_table(cur, prev, roles, secs)
    rec["kernel"] = kernel
    rec["threads"] = threads
    worker = roles.names[roles.worker]
    attr = wakers = None
    if "queue_wait" in run.stages:
        attr, wakers = report.attribution(hists, counters)
        rec["attribution"] = attr
        rec["wakers"] = wakers
        rec["shards"] = report.shard_table(cur, prev, cur.threads)
        rec["worker_sleep_pct"] = threads.get(worker, {}).get("offcpu_pct")
    stage_hists = {k: hists[k] for k in run.stages}
    cause, text = report.verdict(stage_hists, kst, attr, wakers, threads,
                                 worker)
    rec["cause"] = cause
    rec["verdict"] = text
    hists.update({"kernel." + k: v for k, v in kst.items()})
    for stage, per in per_role.items():
        hists.update({"role.%s.%s" % (stage, r): h for r, h in per.items()})
    rec["worker_role"] = worker
    return rec, hists


def _row(out, fmt, div, name, s):
    out.write(fmt % (name, s["count"], s["mean_us"] / div, s["p50_us"] / div,
                     s["p90_us"] / div, s["p99_us"] / div, s["max_us"] / div))


def print_text(out, args, rec, hists):
    unit, unit_us = ("msecs", 1000) if args.milliseconds else ("usecs", 1)
    if args.timestamp:
        out.write("%s\n" % time.strftime("%H:%M:%S", time.localtime(rec["ts"])))
    for stage in rec["stages"]:
        out.write("\nstage = %s\n" % stage)
        lines = render_log2(hists[stage].log2_buckets(unit_us), unit)
        out.write("\n".join(lines) + "\n" if lines else "     (no events)\n")
    worker = rec.get("worker_role")
    for stage in ("offcpu", "wakeup_delay", "block_rq", "syncfs"):
        if not rec.get("kernel", {}).get(stage, {}).get("count"):
            continue
        out.write("\nkernel stage = %s\n" % stage)
        out.write("\n".join(render_log2(
            hists["kernel." + stage].log2_buckets(unit_us), unit)) + "\n")
        wh = hists.get("role.%s.%s" % (stage, worker))
        if wh is not None and wh.count:
            out.write("\nkernel stage = %s, %s threads only\n" % (stage,
                                                                  worker))
            out.write("\n".join(render_log2(wh.log2_buckets(unit_us),
                                             unit)) + "\n")
    div = 1000.0 if args.milliseconds else 1.0
    out.write("\n%-20s %9s %9s %9s %9s %9s %9s\n" % (
        "STAGE", "COUNT", "MEAN", "P50", "P90", "P99", "MAX"))
    fmt = "%-20s %9d %9.3f %9.3f %9.3f %9.3f %9.3f\n" if args.milliseconds \
        else "%-20s %9d %9.1f %9.1f %9.1f %9.1f %9.1f\n"
    for stage, s in rec["stages"].items():
        _row(out, fmt, div, stage, s)
        for cls, cs in s.get("by_class", {}).items():
            if cs["count"]:
                _row(out, fmt, div, "  " + cls, cs)
    for stage, s in rec.get("kernel", {}).items():
        if s["count"]:
            _row(out, fmt, div, stage, s)
    out.write("(%s; interval %.1f s%s)\n" % (
        "ms" if args.milliseconds else "us", rec["interval_s"],
        "; probe cost %.1f us/call subtracted" % rec["call_bias_us"]
        if rec["call_bias_us"] and rec["stages"] else ""))
    ov = rec.get("overhead")
    if ov:
        out.write("estimated tracing cost: %.2f %% of CPU time%s\n" % (
            ov["estimated_pct"],
            " (bound %g %%: attached %d %% of the time, %.2f %% at full "
            "rate)" % (ov["bound_pct"], round(100 * ov["attached_fraction"]),
                       ov["full_rate_pct"]) if ov["bound_pct"] else ""))
    if rec.get("threads"):
        out.write("\n%-16s %7s %8s %8s %12s %9s\n" % (
            "THREAD ROLE", "THREADS", "%OFFCPU", "%RUNQ", "%FUTEX/OFF",
            "WAKEUPS"))
        for role, t in rec["threads"].items():
            out.write("%-16s %7d %8.1f %8.1f %12.1f %9d\n" % (
                role, t["threads"], t["offcpu_pct"], t["runq_pct"],
                t["futex_pct_of_offcpu"], t["wakeups"]))
    if rec.get("attribution"):
        a, w = rec["attribution"], rec["wakers"]
        out.write("\n%-26s %9s %9s %9s %7s\n" % (
            "QUEUE_WAIT ATTRIBUTION", "MEAN", "P50", "P99", "SHARE"))
        labels = {"busy": "worker busy", "signal": "signal delay (asleep)",
                  "runq": "run-queue delay", "pickup": "pickup"}
        for part in probetable.ATTR_PARTS:
            v = a[part]
            out.write("%-26s %9.1f %9.1f %9.1f %6.0f%%\n" % (
                labels[part], v["mean_us"], v["p50_us"], v["p99_us"],
                100 * v["share"]))
        out.write("workers that slept with the op queued were woken by: the "
                  "enqueuer %d,\nanother thread %d, their timed wait %d; "
                  "timed waits that found work: %d\n" % (
                      w["enqueuer"], w["other"], w["timeout"],
                      w["timeouts_with_work"]))
        if rec.get("shards"):
            out.write("\n%-6s %7s %8s %9s %6s %6s %6s %6s %8s\n" % (
                "SHARD", "WORKERS", "OPS", "QWAIT_US", "BUSY", "SIGNAL",
                "RUNQ", "PICKUP", "TIMEOUTS"))
            for r in rec["shards"]:
                out.write("%-6s %7d %8d %9.1f %5.0f%% %5.0f%% %5.0f%% %5.0f%% "
                          "%8d\n" % (
                              r["shard"], r["workers"], r["ops"],
                              r["queue_wait_mean_us"], 100 * r["busy"],
                              100 * r["signal"], 100 * r["runq"],
                              100 * r["pickup"], r["timeouts_with_work"]))
    if rec.get("verdict"):
        out.write("\nVERDICT (%s):\n" % report.CAUSES.get(rec["cause"],
                                                         rec["cause"]))
        for line in rec["verdict"].splitlines():
            out.write(textwrap.fill(line, 78, initial_indent="  ",
                                    subsequent_indent="    ") + "\n")
    for stage, why in rec["unavailable"].items():
        out.write("unavailable: %s: %s\n" % (stage, why))
    lost = {k: v for k, v in rec["lost"].items() if v}
    if lost:
        out.write("lost: %s\n" % ", ".join("%s=%d" % kv for kv in lost.items()))
    out.flush()


# --------------------------------------------------------------------------
# main

OFFLINE_ONLY = {"t_from": "--from", "t_to": "--to",
                "thread_role": "--thread-role", "op_class": "--op-class",
                "slowest": "--slowest", "html": "--html",
                "perfetto": "--perfetto"}


def run(args, out=sys.stdout, err=sys.stderr):
    if args.read:
        if args.write:
            raise UserError("-w records and -r reads: use one of them")
        return run_offline(args, out, err)
    used = [opt for k, opt in OFFLINE_ONLY.items() if getattr(args, k)]
    if used:
        raise UserError("%s reads a capture: use it with -r CAPTURE" % used[0])
    if args.stages:
        kst = [s for s in args.stages if s in probetable.KERNEL_STAGES]
        if kst:
            raise UserError("-S %s: kernel stages are always traced (unless "
                            "--no-kernel); -S selects user-space stages" %
                            kst[0])
    if args.list:
        if args.write:
            raise UserError("--list does not record: drop -w")
        require_root(TOOL)
        return list_osds(args, out)
    require_root(TOOL)
    if args.probes:
        sp = spec.load(args.probes)
        if args.pid is None:
            raise UserError("--probes needs -p PID")
        target = Target(args.pid, allow_any=True)
        rel, roles, version = sp.release, sp.roles, None
        wanted = args.stages or sp.stages()
    else:
        target = pick_target(args)
        version, rel = release_of(target, args.release)
        roles = CEPH_ROLES
        wanted = args.stages or list(probetable.STAGES)
    require_btf()
    require_tracefs()
    with ElfSymbols(target.exe_path) as elf:
        plan = resolve(elf, rel, wanted)
    if plan.unavailable and (args.strict or not plan.stages):
        stage, why = next(iter(plan.unavailable.items()))
        raise UserError("stage %s unavailable: %s" % (stage, why))
    if not plan.stages and args.no_kernel:
        raise UserError("nothing to trace: the probe spec has no enqueue/"
                        "dequeue and --no-kernel is set")

    tracer = StageTracer(target.pid, target.exe_path, plan, rmw=rel.rmw,
                         max_ops=args.max_ops, kernel=not args.no_kernel,
                         roles=roles,
                         ring_bytes=capture.ring_bytes(args.ring_mb)
                         if args.write else 0)
    # the cost estimate needs the measured cost of a uprobe hit
    tracer.calibrate_always = True
    # the op class is read at completion: split only when that is probed
    done = any(ev == probetable.DONE for _, ev, _, _ in plan.op_events)
    classes = set(probetable.CLASS_SPLIT) if rel.rmw and done else set()
    stopping = []
    writer = None

    def on_signal(signum, frame):
        # only note it: the loop notices within 0.2 s, prints what it has
        # and detaches (PEP 475 resumes the interrupted sleep)
        stopping.append(signum)

    # before anything is attached: fail early on a bad output path
    created = args.write and capture.prepare(args.write, args.force)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        tracer.start()
        run_info = RunInfo(target.pid, version, plan.stages, plan.unavailable,
                           classes, tracer.call_bias_ns, tracer.kernel, roles)
        if args.write:
            info = dict(run_info.info(), release=rel.name,
                        probes={role: sym.demangled for role, sym in
                                plan.symbols.items()})
            writer = capture.CaptureWriter(args.write, tracer, info)
            writer.threads(capture.thread_names(target.pid),
                           time.monotonic_ns())
        n = len(plan.stages)
        what = "ceph-osd %d (Ceph %s" % (target.pid, version) if version else \
            "%s %d (%s" % (target.comm, target.pid, rel.name)
        err.write("Tracing %d stage%s%s of %s, %d probes)... %s\n" % (
                      n, "" if n == 1 else "s",
                      "" if args.no_kernel else " + kernel", what,
                      plan.probe_count(),
                      "Hit Ctrl-C to end." if args.count is None else
                      "%d report%s." % (args.count,
                                        "" if args.count == 1 else "s")))
        err.flush()
        return _loop(args, out, err, target, tracer, run_info, writer,
                     stopping)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if writer is not None:
            # nothing of ours runs in the target any more: drain everything
            tracer.detach()
            try:
                _close_capture(writer, tracer, args.write, err)
            except UserError as e:
                err.write("%s: %s\n" % (TOOL, e))
        elif created:
            try:
                os.rmdir(args.write)      # nothing was recorded
            except OSError:
                pass
        tracer.close()


def _close_capture(writer, tracer, path, err):
    lost = tracer.snapshot_counters().get("events_lost", 0)
    st = writer.close("end", lost)
    err.write("%s: capture %s: %d events, %.1f MB%s\n" % (
        TOOL, path, st["events"], st["bytes"] / 1e6,
        "; %d events LOST (ring buffer full: raise --ring-mb)" % lost
        if lost else ", none lost"))


def _loop(args, out, err, target, tracer, run_info, writer, stopping):
    prev = tracer.snapshot()
    if writer is not None:
        writer.snapshot(prev, None)
    t_last = time.time()
    meter = duty.CostMeter(tracer)
    cycle = None
    if args.max_overhead:
        cycle = duty.DutyCycle(tracer, args.max_overhead)
        cycle.start(prev.counters)
    att_last = 0.0
    t_start, first = time.time(), prev
    next_age = time.monotonic() + min(10.0, args.op_timeout)
    reports = 0
    ended = None
    while True:
        deadline = t_last + (args.interval if args.interval else 1e12)
        while time.time() < deadline:
            if stopping:
                ended = "interrupted"
                break
            if not target.alive():
                ended = "%s %d exited" % (target.comm, target.pid)
                break
            if cycle is not None:
                cycle.tick(tracer.snapshot_counters())
            if time.monotonic() >= next_age:
                tracer.age_out(args.op_timeout)
                if tracer.kernel:
                    tracer.prune_threads()
                next_age = time.monotonic() + min(10.0, args.op_timeout)
            if writer is not None:
                writer.poll()
            time.sleep(min(0.1 if writer else 0.2,
                           max(0.0, deadline - time.time())))
        now = time.time()
        cur = tracer.snapshot()
        rec, hists = interval_record(run_info, cur, prev, now, now - t_last,
                                     tracer.in_flight() if not ended else None)
        att = cycle.attached_seconds() if cycle else 0.0
        attached = (att - att_last) if cycle else (now - t_last)
        att_last = att
        hits = {k: cur.counters.get(k, 0) - prev.counters.get(k, 0)
                for k in ("hit_entry", "hit_return", "hit_sched",
                          "hit_syscall")}
        frac = min(1.0, attached / max(now - t_last, 1e-9))
        # since the start: duty cycles are seconds long, an interval may
        # hold only part of one
        total = {k: cur.counters.get(k, 0) - first.counters.get(k, 0)
                 for k in hits}
        elapsed = max(now - t_start, 1e-9)
        total_att = cycle.attached_seconds() if cycle else elapsed
        full = meter.pct(total, total_att) if total_att > 0 else 0.0
        rec["overhead"] = {
            "bound_pct": args.max_overhead,
            "attached_fraction": round(min(1.0, total_att / elapsed), 3),
            "interval_attached_fraction": round(frac, 3),
            "full_rate_pct": round(full, 3),
            "estimated_pct": round(full * min(1.0, total_att / elapsed), 3),
            "uprobe_cost_ns": meter.uprobe_ns,
            "hits": hits,
        }
        if writer is not None:
            writer.threads(capture.thread_names(target.pid), cur.mono_ns)
            writer.snapshot(cur, rec)
        prev = cur
        t_last = now
        try:
            if args.json:
                out.write(json.dumps(rec) + "\n")
                out.flush()
            else:
                print_text(out, args, rec, hists)
        except BrokenPipeError:
            quiet_broken_pipe()
            return 0
        reports += 1
        if ended:
            if ended != "interrupted":
                err.write("%s: %s; detached.\n" % (TOOL, ended))
            return 0
        if args.count is not None and reports >= args.count:
            return 0


# --------------------------------------------------------------------------
# reading a capture

def run_offline(args, out, err):
    cap = offline.Capture(args.read)
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
        rec["slowest"] = offline.slowest(cap, ops, args.slowest)
    _emit(args, out, rec, hists)
    if args.slowest and not args.json:
        print_slowest(out, rec["slowest"])
    if args.html or args.perfetto:
        a, b = _timeline_window(args, cap, ops, t0, t1)
        tl = cap.timeline(a, b, [o for o in ops if _overlaps(o, a, b)])
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
    from ..render import html as htmlreport
    from ..render import perfetto
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


def print_slowest(out, rows):
    out.write("\nSLOWEST OPS (times in us from the enqueue)\n")
    for i, r in enumerate(rows, 1):
        out.write("%d. op %s%s: %s, queue_wait %s us\n" % (
            i, r["op"], " " + r["class"] if r["class"] else "",
            "%s us in all" % r["total_us"] if r["total_us"] is not None
            else "completion not probed",
            r.get("queue_wait_us", "?")))
        out.write("   enqueued %s by %s (%d)\n" % (
            time.strftime("%H:%M:%S", time.localtime(r["enqueue"]["ts"])) +
            ("%.6f" % (r["enqueue"]["ts"] % 1))[1:],
            r["enqueue"]["thread"], r["enqueue"]["tid"]))
        if "dequeue" in r:
            w = r["woken"]
            how = ("how it was woken is unknown (no kernel stages)"
                   if w["by"] is None else
                   "was running (worker busy %s us)" % w["busy_us"]
                   if w["by"] == "none" else
                   "woken by %s%s: signal %s us, run queue %s us, pickup %s "
                   "us" % ({"enqueuer": "the enqueuer", "other": "another "
                            "thread", "timeout": "its timed wait expiring "
                            "(timeout)"}[w["by"]],
                           " %s (%d)" % (w["waker"], w["waker_tid"])
                           if w["waker_tid"] and w["by"] != "timeout" else "",
                           w["signal_us"], w["runq_us"], w["pickup_us"]))
            out.write("   +%s dequeued by %s (%d); %s\n" % (
                r["dequeue"]["at_us"], r["dequeue"]["thread"],
                r["dequeue"]["tid"], how))
        for st in r["stages"]:
            out.write("   +%s..+%s %s\n" % (st["start_us"], st["end_us"],
                                            st["stage"]))
        if "done_us" in r:
            out.write("   +%s done\n" % r["done_us"])
    out.flush()


def main(argv=None):
    return run_cli(TOOL, lambda: run(parse_args(argv)))
