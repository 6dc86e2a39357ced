"""osdstage: per-stage latency of ops inside a running ceph-osd.

The logic behind tools/osdstage.py. Stages come from the probe table
(probetable.py) for the OSD's Ceph release; each is timed in the kernel by
probes/osdstage.bpf.c and aggregated into per-CPU histograms that this
module reads every interval.
"""
import argparse
import array
import json
import os
import signal
import sys
import time

from . import bpf, probetable
from .elfsym import ElfSymbols
from .errors import UserError
from .hist import HIST_SLOTS, Hist, render_log2
from .target import Target, require_btf, require_root, require_tracefs

TOOL = "osdstage"
MAX_STAGES = 16                      # probes/osdstage.h
COUNTER_NAMES = ["start_map_full", "no_start", "negative"]

EXAMPLES = """examples:
  osdstage.py -p 1234          # trace ceph-osd 1234 until Ctrl-C, then report
  osdstage.py -p 1234 5 3      # three 5-second reports
  osdstage.py -p 1234 -m 10 1  # one 10-second report, histograms in msecs
  osdstage.py -p 1234 -j 1     # one JSON object per second on stdout
  osdstage.py -p 1234 -T 1     # timestamp each report
  osdstage.py -p 1234 -S do_op,bluestore_read 5  # only these stages
"""


def default_bpf_dir():
    env = os.environ.get("CEPHLAT_BPF_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "build"))


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
    p.add_argument("-p", "--pid", type=pid_arg, required=True,
                   help="trace this ceph-osd process")
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
                   help="Ceph release to use the probe table of (default: "
                        "asked from the binary)")
    p.add_argument("--strict", action="store_true",
                   help="fail if any requested stage cannot be probed")
    p.add_argument("interval", nargs="?", type=positive_float, default=None,
                   help="seconds between reports (default: one report at Ctrl-C)")
    p.add_argument("count", nargs="?", type=positive_int, default=None,
                   help="number of reports (default: until Ctrl-C)")
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)


# --------------------------------------------------------------------------
# probe resolution

def resolve_stages(elf, table, wanted):
    """-> ([(stage, Symbol)], {stage: reason})"""
    found, unavailable = [], {}
    for stage in wanted:
        probe = table.get(stage)
        if probe is None:
            unavailable[stage] = "not in the probe table for this release"
            continue
        syms = elf.find(probe.func, probe.params)
        if not syms:
            unavailable[stage] = "function %s(%s) not found in %s" % (
                probe.func, probe.params.pattern.strip("^$"), elf.path)
            continue
        if len(syms) > 1:
            unavailable[stage] = "%s matches %d functions" % (probe.func,
                                                              len(syms))
            continue
        found.append((stage, syms[0]))
    return found, unavailable


# --------------------------------------------------------------------------
# reading the kernel side

class StatsReader:
    """Reads the per-CPU `stats` map and returns cumulative Hists."""

    def __init__(self, stats_map):
        self.map = stats_map
        self.ncpu = bpf.num_possible_cpus()
        self.stride = (stats_map.value_size + 7) // 8 * 8
        self.words = self.stride // 8

    def read(self, stage_id):
        import struct
        key = struct.pack("<I", stage_id)
        raw = self.map.lookup(key, self.stride * self.ncpu)
        h = Hist()
        if raw is None:
            return h
        a = array.array("Q")
        a.frombytes(raw)
        w = self.words
        slots = [0] * HIST_SLOTS
        for cpu in range(self.ncpu):
            base = cpu * w
            h.count += a[base]
            h.sum_ns += a[base + 1]
            h.max_ns = max(h.max_ns, a[base + 2])
            seg = a[base + 3:base + 3 + HIST_SLOTS]
            for i, c in enumerate(seg):
                if c:
                    slots[i] += c
        h.slots = slots
        return h


def hist_delta(cur, prev):
    """cur - prev for cumulative histograms (max is the interval's if it grew,
    else the cumulative max, which is an upper bound)."""
    if prev is None:
        return cur
    d = Hist(cur.count - prev.count, cur.sum_ns - prev.sum_ns, cur.max_ns,
             [a - b for a, b in zip(cur.slots, prev.slots)])
    return d


def read_counters(cmap):
    import struct
    ncpu = bpf.num_possible_cpus()
    out = {}
    for i, name in enumerate(COUNTER_NAMES):
        raw = cmap.lookup(struct.pack("<I", i), 8 * ncpu)
        out[name] = sum(struct.unpack("<%dQ" % ncpu, raw)) if raw else 0
    return out


# --------------------------------------------------------------------------
# output

def interval_record(args, target, version, hists, unavailable, lost, ts, secs):
    stages = {}
    for stage, h in hists.items():
        s = h.summary()
        s["hist"] = [[lo, hi, c] for lo, hi, c in h.log2_buckets(1)]
        stages[stage] = s
    return {
        "type": "interval",
        "ts": round(ts, 6),
        "interval_s": round(secs, 3),
        "pid": target.pid,
        "ceph_version": version,
        "stages": stages,
        "unavailable": unavailable,
        "lost": lost,
    }


def print_text(out, args, rec, hists):
    unit, unit_us = ("msecs", 1000) if args.milliseconds else ("usecs", 1)
    if args.timestamp:
        out.write("%s\n" % time.strftime("%H:%M:%S", time.localtime(rec["ts"])))
    for stage, h in hists.items():
        out.write("\nstage = %s\n" % stage)
        lines = render_log2(h.log2_buckets(unit_us), unit)
        out.write("\n".join(lines) + "\n" if lines else "     (no events)\n")
    div = 1000.0 if args.milliseconds else 1.0
    out.write("\n%-20s %9s %9s %9s %9s %9s %9s\n" % (
        "STAGE", "COUNT", "MEAN", "P50", "P90", "P99", "MAX"))
    fmt = "%-20s %9d %9.3f %9.3f %9.3f %9.3f %9.3f\n" if args.milliseconds \
        else "%-20s %9d %9.1f %9.1f %9.1f %9.1f %9.1f\n"
    for stage in hists:
        s = rec["stages"][stage]
        out.write(fmt % (stage, s["count"], s["mean_us"] / div,
                         s["p50_us"] / div, s["p90_us"] / div,
                         s["p99_us"] / div, s["max_us"] / div))
    out.write("(%s; %d ops over %.1f s)\n" % (
        "ms" if args.milliseconds else "us",
        max([s["count"] for s in rec["stages"].values()] or [0]),
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
    require_root(TOOL)
    target = Target(args.pid)
    require_btf()
    require_tracefs()
    version = args.release or target.ceph_version()
    if not version:
        raise UserError("cannot tell the Ceph release of ceph-osd %d (its "
                        "--version gave nothing); pass --release X.Y "
                        "(known: %s)" % (target.pid, probetable.known_releases()))
    table = probetable.table_for(version)
    if table is None:
        raise UserError("Ceph %s has no probe table; known releases: %s" % (
            version, probetable.known_releases()))

    wanted = args.stages or list(probetable.STAGES)
    with ElfSymbols(target.exe_path) as elf:
        found, unavailable = resolve_stages(elf, table, wanted)
    if unavailable and (args.strict or not found):
        stage, why = next(iter(unavailable.items()))
        raise UserError("stage %s unavailable: %s" % (stage, why))

    tracer = StageTracer(target.pid, target.exe_path, found)
    stopping = []

    def on_signal(signum, frame):
        # only note it: the loop notices within 0.2 s, prints what it has
        # and detaches (PEP 475 resumes the interrupted sleep)
        stopping.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        tracer.start()
        err.write("Tracing %d stage%s of ceph-osd %d (Ceph %s)... %s\n" % (
            len(found), "" if len(found) == 1 else "s", target.pid, version,
            "Hit Ctrl-C to end." if args.count is None else
            "%d report%s." % (args.count, "" if args.count == 1 else "s")))
        err.flush()
        return _loop(args, out, err, target, version, tracer, unavailable,
                     stopping)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        tracer.close()


class StageTracer:
    """Loads probes/osdstage.bpf.o and times `found` = [(stage, Symbol)] in
    process `pid` (whose executable is readable at `exe_path`)."""

    def __init__(self, pid, exe_path, found, bpf_dir=None):
        self.pid, self.exe_path, self.found = pid, exe_path, found
        self.obj = bpf.BPFObject(os.path.join(bpf_dir or default_bpf_dir(),
                                              "osdstage.bpf.o"))
        self.reader = None

    def start(self):
        import ctypes

        class Rodata(ctypes.Structure):
            _fields_ = [("targ_tgid", ctypes.c_uint32)]
        self.obj.set_rodata(Rodata(targ_tgid=self.pid))
        self.obj.load()
        for stage, sym in self.found:
            sid = probetable.STAGE_IDS[stage]
            for ret in (False, True):
                self.obj.attach_uprobe(
                    "stage_return" if ret else "stage_entry", self.exe_path,
                    sym.offset, pid=self.pid, retprobe=ret, cookie=sid,
                    what=sym.demangled)
        self.reader = StatsReader(self.obj.map("stats"))
        self.counters = self.obj.map("counters")

    def snapshot(self):
        """Cumulative ({stage: Hist}, {counter: n}) since start()."""
        hists = {stage: self.reader.read(probetable.STAGE_IDS[stage])
                 for stage, _ in self.found}
        return hists, read_counters(self.counters)

    def close(self):
        self.obj.close()


def _loop(args, out, err, target, version, tracer, unavailable, stopping):
    prev, prev_lost = {}, {}
    t_last = time.time()
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
            time.sleep(min(0.2, max(0.0, deadline - time.time())))
        now = time.time()
        cur, lost_cur = tracer.snapshot()
        hists = {stage: hist_delta(h, prev.get(stage)) for stage, h in cur.items()}
        lost = {k: v - prev_lost.get(k, 0) for k, v in lost_cur.items()}
        prev, prev_lost = cur, lost_cur
        rec = interval_record(args, target, version, hists, unavailable, lost,
                              now, now - t_last)
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
