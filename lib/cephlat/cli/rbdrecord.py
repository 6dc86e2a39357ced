"""rbdrecord: record librbd client I/O for replay, and turn it into fio
jobs. The command line behind tools/rbdrecord.py: it parses arguments
and dispatches; the work is in lib/cephlat/rbd/, which takes plain values
(rbd/record.py's RecordTarget, rbd/fio.py's FioJob), not the namespace.

Modes:
  eBPF (default)  uprobes on librbd's C API in the client (-p PID, or
                  -- COMMAND which it starts), and on its Objecter (each
                  op to an OSD, by request id): rbd/record.py, rbd/ebpf.py
  --lttng         Ceph's documented LTTng recipe, run for the user, with
                  checks of what it needs first: rbd/lttng.py
  --to-fio TRACE  fio iolog (version 3, with timestamps) + a job file for
                  fio's rbd engine, one job per image: rbd/fio.py
  --summary TRACE per image: ops, bytes, sizes, hot zones, read/write mix;
                  per OSD, the client's ops and their replies:
                  rbd/summary.py
  --otlp URL      (eBPF mode) at the end of the recording, the client's
                  spans of the chosen ops to an OTLP collector, joining
                  the traces the OSD hosts' exporters send: rbd/traces.py
Traces of either mode are read with babeltrace2's Python bindings (bt2):
rbd/reader.py.

The modes' modules are imported when they run, so that --help and a
usage error (exit status 2: an option of another mode, a mode without
what it needs) need neither numpy nor bt2.
"""
import argparse
import sys

from .args import Parser, pid_arg, positive_float, positive_int
from ..errors import UsageError, run_cli
from ..rbd import TOOL
from . import otlpargs

DEFAULT_CLIENT = "admin"
DEFAULT_ZONES = 10

EXAMPLES = """examples:
  rbdrecord.py -o trace -- fio job.fio   # record fio's librbd I/O
  rbdrecord.py -o trace -p 4321 -d 60    # a running client, for 60 s
  babeltrace2 trace | head               # librbd:aio_write_enter ...
  rbdrecord.py --summary trace           # what the client did, per OSD
  rbdrecord.py --to-fio trace -o replay  # replay/job.fio + iologs
  fio replay/job.fio                     # replay it (same pool and image)
  rbdrecord.py --to-fio trace -o replay --image img2  # onto another image
  rbdrecord.py --lttng -o lt -- rbd bench --io-type write img1  # LTTng
  rbdrecord.py -o trace --otlp http://jaeger:4318 -- fio job.fio
                # and, when fio ends, the client's span of 1 op in 100
                # (the ops the OSD hosts' osdstage-exporter --otlp send)
                # to Jaeger: one trace per op, from librbd to the OSDs
exit status: 0 ok, 1 error, 2 usage, 3 (--lttng) librbd here has no LTTng
tracepoints or the client does not enable them
"""


class _Parser(Parser):
    tool = TOOL


def build_parser():
    p = _Parser(prog="rbdrecord.py",
                description="Record librbd client I/O (eBPF uprobes, or "
                            "LTTng) as a CTF trace\nwith librbd's tracepoint "
                            "names, summarize it, convert it to fio jobs.",
                epilog=EXAMPLES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    m = p.add_mutually_exclusive_group()
    m.add_argument("--lttng", action="store_true",
                   help="record with LTTng (librbd's own tracepoints; the "
                        "default when they are usable here)")
    m.add_argument("--ebpf", action="store_true",
                   help="record with eBPF uprobes (the default when librbd "
                        "has no usable tracepoints, as on Debian)")
    m.add_argument("--to-fio", metavar="TRACE",
                   help="convert TRACE to fio iologs and a job file in -o DIR")
    m.add_argument("--summary", metavar="TRACE",
                   help="per image: ops, bytes, sizes, hot zones, mix; per "
                        "OSD: the client's ops and their reply times")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="trace directory to write (with --to-fio: the job "
                        "directory)")
    p.add_argument("--force", action="store_true",
                   help="overwrite an output directory that rbdrecord wrote")
    p.add_argument("-p", "--pid", type=pid_arg,
                   help="record this running librbd client")
    p.add_argument("-d", "--duration", type=positive_float, metavar="SECS",
                   help="stop after SECS (default: when COMMAND exits, or "
                        "Ctrl-C)")
    p.add_argument("--no-checks", action="store_true",
                   help="--lttng: record even when the checks fail (e.g. "
                        "tracepoints from a preloaded librbd_tp.so)")
    p.add_argument("--image", metavar="NAME",
                   help="--to-fio: replay onto this image (one image traces)")
    p.add_argument("--pool", metavar="NAME",
                   help="--to-fio: pool (default: the recorded one, else rbd)")
    p.add_argument("--client", default=None, metavar="NAME",
                   help="--to-fio: cephx client name (default %s)"
                   % DEFAULT_CLIENT)
    p.add_argument("--no-timing", action="store_true",
                   help="--to-fio: replay as fast as possible "
                        "(replay_no_stall)")
    p.add_argument("--zones", type=positive_int, default=None, metavar="N",
                   help="--summary: offset zones of the heat-map (default "
                        "%d)" % DEFAULT_ZONES)
    p.add_argument("-j", "--json", action="store_true",
                   help="--summary as JSON")
    o = p.add_argument_group("traces (eBPF mode)")
    o.add_argument("--otlp", metavar="URL", default=None,
                   help="when the recording ends, send the client's spans "
                        "of the chosen ops as OTLP traces (OTLP/HTTP, JSON) "
                        "to the collector at URL (http://HOST:4318): the "
                        "librbd call and, under it, the op's send to its "
                        "reply, in the trace the OSD hosts' "
                        "osdstage-exporter --otlp send the op's OSD part "
                        "to (eBPF mode, the default with --otlp)")
    otlpargs.tuning_options(
        o, "with --otlp: every op of a call that took at least US "
           "microseconds too (submit to completion; an op of no call, its "
           "own; default: none)")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="-- COMMAND [ARGS]: start it and record it")
    return p


def main(argv=None):
    def body():
        args = build_parser().parse_args(argv)
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        return run(args)
    return run_cli(TOOL, body)


# each mode's options (dest -> as the user writes it); an option of
# another mode is refused rather than ignored
RECORD_OPTS = {"pid": "-p", "duration": "-d", "no_checks": "--no-checks",
               "command": "-- COMMAND", "otlp": "--otlp"}
OTLP_TUNING = {"otlp_sample": "--otlp-sample", "otlp_over": "--otlp-over"}
FIO_OPTS = {"image": "--image", "pool": "--pool", "client": "--client",
            "no_timing": "--no-timing"}
SUMMARY_OPTS = {"zones": "--zones", "json": "-j"}
OUTPUT_OPTS = {"output": "-o", "force": "--force"}


def _given(v, default):
    return not (v is None or v is False or v == [] or v == default)


def _refuse(args, mode, opts):
    p = build_parser()
    used = [opt for k, opt in opts.items()
            if _given(getattr(args, k), p.get_default(k))]
    if used:
        raise UsageError("%s is not an option of %s: drop it" % (used[0],
                                                                 mode))


def check(args):
    """Which mode, with what it needs and nothing of another mode's: a
    usage error (exit status 2) otherwise. Sets the modes' defaults."""
    if args.summary:
        _refuse(args, "--summary", dict(RECORD_OPTS, **FIO_OPTS,
                                        **OUTPUT_OPTS, **OTLP_TUNING))
    elif args.to_fio:
        _refuse(args, "--to-fio", dict(RECORD_OPTS, **SUMMARY_OPTS,
                                       **OTLP_TUNING))
        if not args.output:
            raise UsageError("--to-fio needs -o DIR for the job")
    else:
        _refuse(args, "recording", dict(FIO_OPTS, **SUMMARY_OPTS))
        if not args.output:
            raise UsageError("-o DIR is required to record")
        if bool(args.pid) == bool(args.command):
            raise UsageError("record what? give -p PID or -- COMMAND"
                             if not args.pid else
                             "-p PID and -- COMMAND: record one of them")
        if args.ebpf and args.no_checks:
            raise UsageError("--no-checks is for --lttng's checks: not with "
                             "--ebpf")
        otlpargs.check_tuning(args, build_parser())
        if args.otlp and (args.lttng or args.no_checks):
            raise UsageError("--otlp needs the OSD ops eBPF mode records "
                             "(their request ids): not with %s" % (
                                 "--lttng" if args.lttng else
                                 "--no-checks"))
    if args.client is None:
        args.client = DEFAULT_CLIENT
    if args.zones is None:
        args.zones = DEFAULT_ZONES


def run(args, out=None, err=None):
    # the streams as they are when it runs (not when it was imported)
    out, err = out or sys.stdout, err or sys.stderr
    check(args)
    if args.summary:
        from ..rbd.summary import summary
        return summary(args.summary, args.zones, args.json, out)
    if args.to_fio:
        from ..rbd.fio import FioJob, to_fio
        return to_fio(FioJob(trace=args.to_fio, output=args.output,
                             client=args.client, force=args.force,
                             image=args.image, pool=args.pool,
                             no_timing=args.no_timing), err)
    from ..rbd import lttng, outdir
    from ..rbd.record import RecordTarget, record_ebpf
    outdir.prepare(args.output, args.force)
    target = RecordTarget(pid=args.pid, command=tuple(args.command))
    if not args.lttng and not args.ebpf and not args.otlp:
        # LTTng when librbd's tracepoints are usable, else eBPF (with
        # --otlp, eBPF: the OSD ops' request ids name the traces)
        args.lttng = not lttng.lttng_checks(args.pid)
    if args.lttng:
        return lttng.record_lttng(target, args.output, args.duration,
                                  args.no_checks, err)
    status = record_ebpf(target, args.output, args.duration, err)
    if args.otlp:
        # the recording is written and its status stands, whatever the
        # collector does
        from ..rbd.traces import OtlpChoice, send_calls
        send_calls(args.output, OtlpChoice(url=args.otlp,
                                           every=args.otlp_sample,
                                           over_us=args.otlp_over), err)
    return status
