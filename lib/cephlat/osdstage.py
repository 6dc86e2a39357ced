"""osdstage: per-stage latency of ops inside a running ceph-osd.

The command-line logic behind tools/osdstage.py: target selection, the
report loop and output. The engine is stagetrace.py; stages and functions
come from probetable.py.
"""
import argparse
import json
import os
import signal
import sys
import time

from . import probetable
from .elfsym import ElfSymbols
from .errors import UserError
from .hist import render_log2
from .stagetrace import (DEFAULT_MAX_OPS, DEFAULT_OP_TIMEOUT_S, StageTracer,
                         hist_delta, resolve)
from .target import (Target, find_ceph_osds, require_btf, require_root,
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
    bad = [n for n in names if n not in probetable.STAGES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            "unknown stage %s; stages: %s" % (",".join(bad) or "''",
                                              ", ".join(probetable.STAGES)))
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
    p.add_argument("-m", "--milliseconds", action="store_true",
                   help="histograms in milliseconds")
    p.add_argument("-T", "--timestamp", action="store_true",
                   help="include a timestamp on each report")
    p.add_argument("-j", "--json", action="store_true",
                   help="print one JSON object per interval on stdout")
    p.add_argument("-S", "--stages", type=stage_list, default=None,
                   help="comma-separated stages to trace (default: all); "
                        "known: " + ", ".join(probetable.STAGES))
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

def interval_record(target, version, plan, hists, classes, lost, ts, secs,
                    in_flight, call_bias_ns=0):
    stages = {}
    for stage in plan.stages:
        h = hists[stage]
        s = h.summary()
        s["hist"] = [[lo, hi, c] for lo, hi, c in h.log2_buckets(1)]
        if stage in classes:
            s["by_class"] = {c: hists["%s.%s" % (stage, c)].summary()
                             for c in probetable.OP_CLASSES}
        stages[stage] = s
    return {
        "type": "interval",
        "ts": round(ts, 6),
        "interval_s": round(secs, 3),
        "pid": target.pid,
        "ceph_version": version,
        "stages": stages,
        "unavailable": dict(plan.unavailable),
        "lost": lost,
        "in_flight": in_flight,
        "call_bias_us": round(call_bias_ns / 1000.0, 3),
    }


def print_text(out, args, rec, hists):
    unit, unit_us = ("msecs", 1000) if args.milliseconds else ("usecs", 1)
    if args.timestamp:
        out.write("%s\n" % time.strftime("%H:%M:%S", time.localtime(rec["ts"])))
    for stage in rec["stages"]:
        out.write("\nstage = %s\n" % stage)
        lines = render_log2(hists[stage].log2_buckets(unit_us), unit)
        out.write("\n".join(lines) + "\n" if lines else "     (no events)\n")
    div = 1000.0 if args.milliseconds else 1.0
    out.write("\n%-20s %9s %9s %9s %9s %9s %9s\n" % (
        "STAGE", "COUNT", "MEAN", "P50", "P90", "P99", "MAX"))
    fmt = "%-20s %9d %9.3f %9.3f %9.3f %9.3f %9.3f\n" if args.milliseconds \
        else "%-20s %9d %9.1f %9.1f %9.1f %9.1f %9.1f\n"

    def row(name, s):
        out.write(fmt % (name, s["count"], s["mean_us"] / div,
                         s["p50_us"] / div, s["p90_us"] / div,
                         s["p99_us"] / div, s["max_us"] / div))
    for stage, s in rec["stages"].items():
        row(stage, s)
        for cls, cs in s.get("by_class", {}).items():
            if cs["count"]:
                row("  " + cls, cs)
    out.write("(%s; interval %.1f s)\n" % ("ms" if args.milliseconds else "us",
                                           rec["interval_s"]))
    for stage, why in rec["unavailable"].items():
        out.write("unavailable: %s: %s\n" % (stage, why))
    lost = {k: v for k, v in rec["lost"].items() if v}
    if lost:
        out.write("lost: %s\n" % ", ".join("%s=%d" % kv for kv in lost.items()))
    out.flush()


# --------------------------------------------------------------------------
# main

def run(args, out=sys.stdout, err=sys.stderr):
    if args.list:
        require_root(TOOL)
        return list_osds(args, out)
    require_root(TOOL)
    target = pick_target(args)
    require_btf()
    require_tracefs()
    version, rel = release_of(target, args.release)
    wanted = args.stages or list(probetable.STAGES)
    with ElfSymbols(target.exe_path) as elf:
        plan = resolve(elf, rel, wanted)
    if plan.unavailable and (args.strict or not plan.stages):
        stage, why = next(iter(plan.unavailable.items()))
        raise UserError("stage %s unavailable: %s" % (stage, why))

    tracer = StageTracer(target.pid, target.exe_path, plan, rmw=rel.rmw,
                         max_ops=args.max_ops)
    # the op class is read at completion: split only when that is probed
    done = any(ev == probetable.DONE for _, ev, _, _ in plan.op_events)
    classes = set(probetable.CLASS_SPLIT) if rel.rmw and done else set()
    stopping = []

    def on_signal(signum, frame):
        # only note it: the loop notices within 0.2 s, prints what it has
        # and detaches (PEP 475 resumes the interrupted sleep)
        stopping.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        tracer.start()
        n = len(plan.stages)
        err.write("Tracing %d stage%s of ceph-osd %d (Ceph %s, %d probes, "
                  "probe cost %.1f us/call subtracted)... %s\n" % (
                      n, "" if n == 1 else "s", target.pid, version,
                      plan.probe_count(), tracer.call_bias_ns / 1000.0,
                            "Hit Ctrl-C to end." if args.count is None else
                            "%d report%s." % (args.count,
                                              "" if args.count == 1 else "s")))
        err.flush()
        return _loop(args, out, err, target, version, tracer, classes, stopping)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        tracer.close()


def _loop(args, out, err, target, version, tracer, classes, stopping):
    prev, prev_lost = {}, {}
    t_last = time.time()
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
                ended = "ceph-osd %d exited" % target.pid
                break
            if time.monotonic() >= next_age:
                tracer.age_out(args.op_timeout)
                next_age = time.monotonic() + min(10.0, args.op_timeout)
            time.sleep(min(0.2, max(0.0, deadline - time.time())))
        now = time.time()
        cur, lost_cur = tracer.snapshot()
        hists = {k: hist_delta(h, prev.get(k)) for k, h in cur.items()}
        lost = {k: v - prev_lost.get(k, 0) for k, v in lost_cur.items()}
        prev, prev_lost = cur, lost_cur
        rec = interval_record(target, version, tracer.plan, hists, classes,
                              lost, now, now - t_last,
                              tracer.in_flight() if not ended else None,
                              tracer.call_bias_ns)
        t_last = now
        try:
            if args.json:
                out.write(json.dumps(rec) + "\n")
                out.flush()
            else:
                print_text(out, args, rec, hists)
        except BrokenPipeError:
            _quiet_broken_pipe()
            return 0
        reports += 1
        if ended:
            if ended != "interrupted":
                err.write("%s: %s; detached.\n" % (TOOL, ended))
            return 0
        if args.count is not None and reports >= args.count:
            return 0


def _quiet_broken_pipe():
    # stdout's reader went away (| head): silence the flush at exit
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def main(argv=None):
    try:
        args = parse_args(argv)
        return run(args)
    except UserError as e:
        msg = str(e)
        if not msg.startswith(TOOL + ":"):
            msg = "%s: %s" % (TOOL, msg)
        sys.stderr.write(msg + "\n")
        return e.status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet_broken_pipe()
        return 0
