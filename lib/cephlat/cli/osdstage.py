"""osdstage's command line: the arguments, which of them go together,
and which part of the package runs them (cli/live.py traces,
cli/views.py reads a capture, engine/inventory.py lists OSDs). Behind
tools/osdstage.py. What runs them is imported only when they run, so
that --help and a usage error need neither numpy nor pyelftools.

Every mistake of the command line itself (an option's value, options
that do not go together) is a UsageError: one line, exit status 2."""
import argparse
import json
import os
import sys

from ..ceph import probetable
from ..ceph.target import netns_id, require_root
from ..engine import DEFAULT_MAX_OPS, DEFAULT_OP_TIMEOUT_S, TOOL
from ..errors import UserError, UsageError, run_cli
from ..model import vocab
from ..model.schema import json_line, schema
from .args import (BY_KEYS, OFFLINE_ONLY, Parser, percent, pid_arg,
                   positive_float, positive_int)
from . import otlpargs

DEFAULT_TIMELINE_MS = 50.0

# the options of a live run, refused with -r (a capture is read as it was
# recorded): dest -> the option as the user writes it. Those with a
# default are None unless given (the defaults are set after the check)
LIVE_ONLY = {"lean": "--lean", "no_kernel": "--no-kernel",
             "behind": "--behind", "stacks": "--stacks",
             "on_cpu": "--on-cpu",
             "max_overhead": "--max-overhead", "ring_mb": "--ring-mb",
             "max_ops": "--max-ops", "op_timeout": "--op-timeout",
             "probes": "--probes", "bpftrace_args": "--bpftrace-args",
             "strict": "--strict", "release": "--release",
             "force": "--force", **otlpargs.LIVE_ONLY}
# the options of reading a capture, refused in a live run (--by and --top
# are both's)
READ_ONLY = {k: v for k, v in dict(
    OFFLINE_ONLY, clock_offset="--clock-offset",
    timeline_ms="--timeline-ms", **otlpargs.READ_ONLY).items() if k != "by"}


class _Parser(Parser):
    tool = TOOL


EXAMPLES = """examples:
  osdstage.py -p 1234          # trace ceph-osd 1234 until Ctrl-C, then report
  osdstage.py --osd 0 5 3      # osd.0: three 5-second reports
  osdstage.py --osd all 10 1   # every OSD of this host: a report each and
                               # a host summary (also --osd 0,2, -p 12,34)
  osdstage.py -p 1234 -m 10 1  # one 10-second report, histograms in msecs
  osdstage.py -p 1234 -j 1     # one JSON object per second on stdout
  osdstage.py -p 1234 --brief 5  # every 5 s: the verdict and stage table
  osdstage.py -p 1234 --explain 10 1  # a line under each table: what it shows
  osdstage.py -p 1234 -S do_op,bluestore_read 5  # only these stages
  osdstage.py --list           # every ceph-osd here and what can be probed
  osdstage.py -p 1234 --no-kernel 5   # user-space stages only (cheaper)
  osdstage.py --osd 0 --behind 10 1   # and whom its threads waited behind
                                      # for a CPU (process, cgroup, unit)
  osdstage.py --osd 0 --by image 10   # every 10 s: whose ops, by RBD image
  osdstage.py --osd all --lean 10     # one probe hit per op: stages from
                               # Ceph's own stamps, cheap enough to leave on
  osdstage.py -p 4321 --probes myqueue.json 5  # any producer/consumer program
  osdstage.py --host-netns host1 --osd all 10  # a lab whose hosts are
                               # network namespaces: only host1's OSDs
  osdstage.py --osd 0 --otlp http://127.0.0.1:4318 10
                               # reports every 10 s, and 1 op in 100 (at
                               # most 50 a second) as OTLP traces meanwhile
  bpftrace -p 1234 probes/osdstages.bt $(osdstage.py -p 1234 --bpftrace-args)

capture now, analyse later (anywhere, no root needed to read):
  osdstage.py -p 1234 -w incident.ctf 10 6   # record 1 minute, 6 reports
  osdstage.py -r incident.ctf                # the same 6 reports again
  osdstage.py -r incident.ctf -j             # ... as JSON
  osdstage.py -r incident.ctf --brief        # ... verdicts and stage tables
  babeltrace2 incident.ctf | head            # it is a CTF trace
  osdstage.py -r incident.ctf --from 20 --to 25 --op-class write
  osdstage.py -r incident.ctf --slowest 5    # the 5 slowest ops, every stage
  osdstage.py -r incident.ctf --osd 2        # one OSD of a many-OSD capture
  osdstage.py -r incident.ctf --by client --top 5  # whose ops: the 5
                                    # clients with the most op time
  osdstage.py -r h1.ctf h2.ctf h3.ctf --by pool  # ... every host's OSDs
  osdstage.py -r incident.ctf --op client.4123.0:77  # one write, every OSD
  osdstage.py -r h1.ctf h2.ctf h3.ctf client.trace  # end to end: where
                                    # the client's p50 and p99 went
  osdstage.py -r h1.ctf h2.ctf h3.ctf client.trace --slowest 10
                                    # ... and its 10 slowest calls
  osdstage.py -r h1.ctf h2.ctf h3.ctf client.trace --op client.4123.0:77
  osdstage.py -r incident.ctf --thread-role tp_osd_tp --stage offcpu
  osdstage.py -r incident.ctf --html report.html --perfetto trace.json
  osdstage.py -r h1.ctf h2.ctf h3.ctf client.trace --otlp http://127.0.0.1:4318
                                    # 1 op in 100 and the ops over
                                    # --otlp-over as traces, to Jaeger/Tempo
"""


class TimeArg(tuple):
    """("rel", secs) or ("wall", secs since midnight); .text: as given."""

    def __new__(cls, kind, secs, text):
        t = super().__new__(cls, (kind, secs))
        t.text = text
        return t


def time_arg(s):
    """seconds (from the capture's start) or HH:MM:SS[.f] (wall clock):
    -> TimeArg ("rel", secs) or ("wall", secs since midnight)"""
    if ":" in s:
        parts = s.split(":")
        try:
            if len(parts) != 3:
                raise ValueError
            h, m, sec = int(parts[0]), int(parts[1]), float(parts[2])
        except ValueError:
            raise argparse.ArgumentTypeError("not a time: %r (HH:MM:SS)" % s)
        return TimeArg("wall", h * 3600 + m * 60 + sec, s)
    try:
        v = float(s.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError("not a time: %r" % s)
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0: %r" % s)
    return TimeArg("rel", v, s)


def pid_list(s):
    return [pid_arg(x) for x in s.split(",")]


def osd_list(s):
    """--osd: "all" or OSD ids, comma separated."""
    if s.strip() == "all":
        return "all"
    ids = [x.strip() for x in s.split(",")]
    bad = [x for x in ids if not x.isdigit()]
    if bad:
        raise argparse.ArgumentTypeError(
            "not an OSD id: %r (ID, ID,ID,... or all)" % bad[0])
    return ids


def stage_list(s):
    """-S: stage names, comma separated, or "all". Which names are
    known is for run() to say: a live run's are the probe table's, a
    capture's its own."""
    if s.strip() == "all":
        return "all"
    names = [n.strip() for n in s.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("no stage named: %r" % s)
    return names


def check_live_stages(names):
    """-S of a live run (osdstage's, the exporter's) names user-space
    stages: the probe table's, known without the build. A kernel stage
    (always traced) is said to be one when the build is there to tell."""
    if names in (None, "all"):
        return
    user = list(probetable.STAGES)
    try:
        kernel = vocab.live().kernel
    except UserError:               # not built: the probe table's alone
        kernel = ()
    for n in names:
        if n in kernel:
            raise UsageError("-S %s: kernel stages are always traced "
                             "(unless --no-kernel); -S selects user-space "
                             "stages" % n)
        if n not in user:
            raise UsageError("-S: unknown stage %s; the user-space stages "
                             "are %s (kernel stages are always traced)"
                             % (n, ", ".join(user)))


def build_parser():
    p = _Parser(
        prog="osdstage.py",
        description="Summarize where ops spend their time inside a running "
                    "ceph-osd,\nper stage, as latency histograms (eBPF uprobes "
                    "aggregated in the kernel).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    # the order of the calls is the order of --help
    _target_options(p)
    _output_options(p)
    _stage_options(p)
    _tracer_options(p)
    _capture_options(p)
    _reading_options(p)
    otlpargs.add_options(p)
    p.add_argument("interval", nargs="?", type=positive_float, default=None,
                   help="seconds between reports (default: one report at "
                        "Ctrl-C)")
    p.add_argument("count", nargs="?", type=positive_int, default=None,
                   help="number of reports (default: until Ctrl-C)")
    return p


def _target_options(p):
    """What to trace (or read): one of -p, --list, -r; --osd."""
    t = p.add_mutually_exclusive_group()
    t.add_argument("-p", "--pid", type=pid_list, metavar="PID[,PID...]",
                   help="trace this ceph-osd process (several: one report "
                        "each and a host summary)")
    p.add_argument("--osd", metavar="ID|all", type=osd_list,
                   help="trace the ceph-osd started with --id/-i ID; "
                        "ID,ID,...: those; all: every ceph-osd of this host. "
                        "With -r: show only this OSD of the capture")
    t.add_argument("--list", action="store_true",
                   help="list every ceph-osd on this host: id, pid, release "
                        "and which stages can be probed")
    t.add_argument("-r", "--read", metavar="CAPTURE", nargs="+",
                   help="analyse a capture made with -w (no root needed); "
                        "several (one per host) with clients' rbdrecord "
                        "traces: end to end (alone, or with --op). The "
                        "options of a live run (interval, count, --lean, "
                        "--max-ops, ...) are refused with it")


def _output_options(p):
    p.add_argument("-m", "--milliseconds", action="store_true",
                   help="histograms in milliseconds")
    p.add_argument("-T", "--timestamp", action="store_true",
                   help="include a timestamp on each report (every text "
                        "report now starts with its time: kept for "
                        "scripts)")
    p.add_argument("-j", "--json", action="store_true",
                   help="print one JSON object per interval on stdout")
    p.add_argument("--json-schema", action="store_true",
                   help="print the JSON Schema of the JSON objects (each "
                        "carries its \"type\" and \"schema\", the "
                        "format's version) and exit")
    p.add_argument("--brief", action="store_true",
                   help="text: the header, each report's verdict and its "
                        "stage table only")
    p.add_argument("--explain", action="store_true",
                   help="text: a line under each table saying what its "
                        "columns mean")


def _stage_options(p):
    """Which stages, from which probe table, on which host."""
    p.add_argument("-S", "--stages", "--stage", type=stage_list,
                   default=None,
                   help="comma-separated stages to trace (with -r: to show; "
                        "kernel stages too), or all (default: every stage "
                        "but %s: each costs a probe hit per op); known: " % (
                            ", ".join(n for n, st in probetable.STAGES.items()
                                      if not st.default)) +
                        ", ".join(probetable.STAGES))
    p.add_argument("--release", default=None, metavar="X.Y",
                   help="use this Ceph release's probe table (default: asked "
                        "from the binary)")
    p.add_argument("--host-netns", metavar="NAME", default=None,
                   help="a lab aid: the host is the network namespace NAME "
                        "(ip netns): --osd, --list and -p see only its "
                        "ceph-osd processes, as on a real host the tool "
                        "sees its own")
    p.add_argument("--bpftrace-args", action="store_true",
                   help="print the arguments of probes/osdstages.bt for this "
                        "OSD (its binary and probe addresses) and exit")
    p.add_argument("--strict", action="store_true",
                   help="fail if any requested stage cannot be probed")


def _tracer_options(p):
    """How the tracer runs: its tables, its tiers, its cost bound, any
    program by a probe spec."""
    p.add_argument("--max-ops", type=positive_int, default=None,
                   metavar="N", help="slots of the table of ops between "
                   "enqueue and completion, a power of two (default %d)" %
                   DEFAULT_MAX_OPS)
    p.add_argument("--op-timeout", type=positive_float,
                   default=None, metavar="SECS",
                   help="forget (and count) ops idle this long (default %g)"
                   % DEFAULT_OP_TIMEOUT_S)
    p.add_argument("--no-kernel", action="store_true",
                   help="no scheduler/futex/block/syncfs tracepoints: user-"
                        "space stages only, no queue-wait attribution")
    p.add_argument("--behind", action="store_true",
                   help="also tell whom the OSD's threads waited behind "
                        "for a CPU: each process that ran instead, with "
                        "its cgroup and its systemd unit or container (a "
                        "cost on every context switch of the host: see "
                        "osdstage(8), Kernel stages)")
    p.add_argument("--by", choices=BY_KEYS, metavar="KEY",
                   help="break the completed client ops down by "
                        "KEY: client, pool, pg or image (an RBD image, "
                        "from its objects' names): ops, op_total and "
                        "queue_wait p50/p99, share of the queue wait, "
                        "and whether one key dominates. Live: each report's "
                        "(every op handed over at its end: a cost per op, "
                        "see BENCHMARKS.md); -r: the window's, and with "
                        "several captures one table of them all")
    p.add_argument("--top", type=positive_int, metavar="K",
                   help="with --by: the K keys with the most op time "
                        "(default 10), the rest as one row")
    p.add_argument("--lean", action="store_true",
                   help="the lean tier: one probe hit per op (on "
                        "PrimaryLogPG::log_op_stats) gives the messenger "
                        "stages, queue_wait, execute, op_total and "
                        "op_latency per op class from the stamps Ceph keeps "
                        "in the op; no kernel stages, no attribution, no "
                        "capture (see osdstage(8), TIERS)")
    p.add_argument("--max-overhead", type=percent, metavar="PCT",
                   help="keep the measured cost since the start under PCT "
                        "%% (more than 0, at most 100) of the machine's CPU "
                        "time by attaching only part of the time (duty "
                        "cycles; see osdstage(8), OVERHEAD)")
    p.add_argument("--probes", metavar="FILE",
                   help="trace any program (not only ceph-osd) from a probe "
                        "spec: enqueue/dequeue functions and worker threads "
                        "(see osdstage(8), PROBE SPEC)")


def _capture_options(p):
    w = p.add_argument_group("capture (see osdstage(8), CAPTURE FILES)")
    w.add_argument("-w", "--write", metavar="CAPTURE",
                   help="also record every measurement to CAPTURE (a CTF "
                        "trace directory, mode 0600) for -r or babeltrace2")
    w.add_argument("--force", action="store_true",
                   help="overwrite an existing CAPTURE")
    w.add_argument("--ring-mb", type=positive_float, default=None,
                   metavar="MB",
                   help="ring buffer between the probes and the recorder "
                        "(default 32 per traced OSD)")
    w.add_argument("--stacks", type=positive_float, default=None,
                   metavar="US",
                   help="also record where the OSD's threads waited: the "
                        "user and kernel stacks of each wait of at least "
                        "US microseconds (1000 is a good start) for a lock "
                        "or inside an op (I/O, a completion), and the "
                        "waker's; -r --folded prints them (a cost per such "
                        "sleep: see osdstage(8), STACKS)")
    w.add_argument("--on-cpu", type=positive_int, default=None,
                   metavar="HZ",
                   help="also sample the OSD's threads on their CPUs HZ "
                        "times a second per CPU (99 is a good start), "
                        "each sample's user and kernel stack recorded: "
                        "what busy workers run; -r --folded --on-cpu "
                        "prints them (see osdstage(8), STACKS)")


def _reading_options(p):
    o = p.add_argument_group("reading a capture (-r)")
    o.add_argument("--from", dest="t_from", type=time_arg, metavar="T",
                   help="start of the window: seconds from the capture's "
                        "start, or wall-clock HH:MM:SS[.f]")
    o.add_argument("--to", dest="t_to", type=time_arg, metavar="T",
                   help="end of the window (same forms)")
    o.add_argument("--thread-role", metavar="ROLE",
                   help="kernel stages and thread times of this thread role "
                        "only (e.g. tp_osd_tp)")
    o.add_argument("--op-class", metavar="CLASS",
                   help="ops of this class only: read, write or other")
    o.add_argument("--slowest", type=positive_int, metavar="N",
                   help="list the N slowest ops: every stage, the worker, "
                        "how it was woken; with captures and a client's "
                        "trace, the N slowest calls by the client's "
                        "latency, each split end to end")
    o.add_argument("--op", metavar="REQID", dest="op_reqid",
                   help="one op's whole story on every OSD of the capture, "
                        "by its request id (client.4123.0:77, as Ceph and "
                        "--slowest print it)")
    o.add_argument("--clock-offset", metavar="FILE=DUR", action="append",
                   help="with several files: FILE's host clock was DUR "
                        "ahead of the first capture's (e.g. h2.ctf=+3ms, "
                        "as chronyc tracking or ntpq says); its times are "
                        "moved back by it. Repeatable")
    o.add_argument("--folded", nargs="?", const="waits",
                   choices=("waits", "on-cpu"), metavar="waits|on-cpu",
                   help="print the window's stacks as folded stacks, one "
                        "line each (flame-graph input): the waits recorded "
                        "with --stacks (the default: the microseconds "
                        "asleep summed; role, the sleeper's stack from its "
                        "thread's root, then after -- the waker's), or "
                        "the samples recorded with --on-cpu (counted; "
                        "role, the stack from its thread's root)")
    o.add_argument("--html", metavar="FILE",
                   help="write a self-contained HTML report with a timeline")
    o.add_argument("--perfetto", metavar="FILE",
                   help="write the timeline as Chrome trace-event JSON "
                        "(opens in the Perfetto UI)")
    o.add_argument("--timeline-ms", type=positive_float, default=None,
                   metavar="MS",
                   help="length of the timeline (default %g ms: from "
                        "--from, else around the slowest op)"
                   % DEFAULT_TIMELINE_MS)


def parse_args(argv=None):
    return build_parser().parse_args(argv)


def run(args, out=sys.stdout, err=sys.stderr):
    if args.json_schema:
        out.write(json.dumps(schema(), indent=1) + "\n")
        return 0
    if not (args.pid or args.osd or args.list or args.read):
        used = [opt for k, opt in READ_ONLY.items() if _given(args, k)]
        if used:
            raise UsageError("%s reads a capture: use it with -r CAPTURE"
                             % used[0])
        raise UsageError("name what to trace: -p PID, --osd ID|all, --list "
                         "or -r CAPTURE (see --help)")
    if args.osd and (args.pid or args.list):
        raise UsageError("--osd and %s name the target twice: use one"
                         % ("-p" if args.pid else "--list"))
    if args.read:
        _check_reading(args)
        from . import views
        return views.run(args, out, err)
    _check_live(args)
    if args.list:
        require_root(TOOL)
        from ..engine import inventory
        from ..render.text import print_list
        rows = inventory.osd_rows(args.release, netns_id(args.host_netns)
                                  if args.host_netns else None)
        if args.json:
            out.write(json_line({"type": "list", "osds": rows}))
        else:
            print_list(out, rows)
        return 0
    require_root(TOOL)
    from . import live
    if args.bpftrace_args:
        out.write(" ".join(live.bpftrace_args(args, err)) + "\n")
        return 0
    return live.run(args, out, err)


def _number(s):
    try:
        float(s.rstrip("s"))
    except ValueError:
        return False
    return True


def _check_reading(args):
    """-r: the options of a live run are refused, naming the first; a
    number among -r's files is an interval or count given to -r."""
    if args.write:
        raise UsageError("-w records and -r reads: use one of them")
    if args.host_netns:
        raise UsageError("--host-netns picks live OSDs: not with -r")
    for p in args.read:
        if _number(p) and not os.path.exists(p):
            raise UsageError("-r reads captures: %r is not a file; interval "
                             "and count are for live tracing" % p)
    if args.interval is not None:
        raise UsageError("interval and count are for live tracing: not "
                         "with -r (a capture is read as it was recorded)")
    used = [opt for k, opt in LIVE_ONLY.items() if _given(args, k)]
    if used:
        raise UsageError("%s is for live tracing: not with -r (a capture "
                         "is read as it was recorded)" % used[0])
    if args.timeline_ms is None:
        args.timeline_ms = DEFAULT_TIMELINE_MS
    if args.top is not None and not args.by:
        raise UsageError("--top K goes with --by KEY")
    if args.by and args.op_reqid:
        raise UsageError("--by breaks a window's ops down and --op tells "
                         "one op's story: use one of them")
    if args.folded:
        clash = [opt for opt, on in (
            ("-j", args.json), ("--by", args.by), ("--op", args.op_reqid),
            ("--slowest", args.slowest), ("--html", args.html),
            ("--perfetto", args.perfetto)) if on]
        if clash:
            raise UsageError("--folded prints folded stacks alone: drop %s"
                             % clash[0])
    otlpargs.check(args, live=False)


def _given(args, dest):
    """Whether option `dest` was given (its default is None, or False for
    a flag; a 0 given is given)."""
    v = getattr(args, dest)
    return v is not None and v is not False


def _check_live(args):
    """A live run (or --list): the options of reading a capture are
    refused, and those that do not go together; then the defaults of
    the live-only options are set."""
    used = [opt for k, opt in READ_ONLY.items() if _given(args, k)]
    if used:
        raise UsageError("%s reads a capture: use it with -r CAPTURE"
                         % used[0])
    if args.list:
        clash = [opt for opt, on in (
            ("-w", args.write), ("interval", args.interval is not None),
            ("--bpftrace-args", args.bpftrace_args), ("--otlp", args.otlp))
            if on]
        if clash:
            raise UsageError("--list lists the OSDs once: drop %s"
                             % clash[0])
    if args.top is not None and not args.by:
        raise UsageError("--top K goes with --by KEY")
    if args.by and (args.lean or args.otlp or args.bpftrace_args):
        raise UsageError("--by takes every op from the full tier's programs "
                         "at its end: not with %s" % (
                             "--lean" if args.lean else "--otlp (a capture, "
                             "-w, then -r --by, breaks its ops down)"
                             if args.otlp else "--bpftrace-args"))
    if args.stacks is not None and (args.lean or args.no_kernel or
                                    not args.write):
        raise UsageError("--stacks records the waits' stacks in a capture "
                         "from the kernel's scheduler events: %s" % (
                             "not with --lean" if args.lean else
                             "not with --no-kernel" if args.no_kernel else
                             "with -w CAPTURE"))
    if args.on_cpu is not None and (args.lean or not args.write):
        raise UsageError("--on-cpu records the samples' stacks in a "
                         "capture: %s" % ("not with --lean" if args.lean
                                          else "with -w CAPTURE"))
    if args.behind and (args.lean or args.no_kernel):
        raise UsageError("--behind splits the kernel's run-queue waits: not "
                         "with %s" % ("--lean" if args.lean else
                                      "--no-kernel"))
    if args.lean:
        clash = [opt for opt, on in (
            ("-S", args.stages), ("-w", args.write), ("--probes", args.probes),
            ("--bpftrace-args", args.bpftrace_args),
            ("--max-overhead", args.max_overhead),
            ("--otlp (the ops are chosen by the full tier's programs)",
             args.otlp)) if on]
        if clash:
            raise UsageError("--lean traces a fixed set of stages from one "
                             "probe, with nothing to record: drop %s" %
                             clash[0])
    if args.bpftrace_args:
        clash = [opt for opt, on in (
            ("--probes", args.probes), ("-w", args.write),
            ("interval", args.interval is not None), ("--otlp", args.otlp))
            if on]
        if clash:
            raise UsageError("--bpftrace-args prints the arguments of "
                             "probes/osdstages.bt for one ceph-osd and "
                             "exits: drop %s" % clash[0])
    if args.probes and args.pid is None:
        raise UsageError("--probes needs -p PID")
    alone = [opt for opt, on in (("--ring-mb", args.ring_mb is not None),
                                 ("--force", args.force)) if on]
    if alone and not args.write:
        raise UsageError("%s is for a capture: give -w CAPTURE too"
                         % alone[0])
    named = args.pid or (args.osd if args.osd != "all" else None) or []
    if len(set(named)) != len(named):
        raise UsageError("%s names a target twice: %s" % (
            "-p" if args.pid else "--osd", ",".join(str(x) for x in named)))
    if args.bpftrace_args and (args.osd == "all" or len(named) > 1):
        raise UsageError("--bpftrace-args is for one ceph-osd: name one with "
                         "-p PID or --osd ID")
    check_live_stages(args.stages)
    otlpargs.check(args, live=True)
    if args.max_ops is None:
        args.max_ops = DEFAULT_MAX_OPS
    if args.op_timeout is None:
        args.op_timeout = DEFAULT_OP_TIMEOUT_S


def main(argv=None):
    return run_cli(TOOL, lambda: run(parse_args(argv)))
