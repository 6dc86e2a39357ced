"""osdstage_exporter's command line: serve every OSD's per-stage latency,
queue-wait attribution, thread times and the tool's own cost to
Prometheus (exporter/service.py traces, exporter/collect.py keeps the
sums and answers scrapes). Behind tools/osdstage_exporter.py. What
runs is imported only when it runs: --help and a usage error (exit
status 2) need neither numpy, pyelftools nor prometheus_client."""
import argparse
import dataclasses
import errno
import socket
import sys
import threading
from wsgiref.simple_server import (WSGIRequestHandler, WSGIServer,
                                   make_server)

from ..ceph.target import require_btf, require_root, require_tracefs
from ..engine import DEFAULT_MAX_OPS, DEFAULT_OP_TIMEOUT_S
from ..errors import UsageError, UserError, run_cli
from ..exporter.config import (DEFAULT_BY_TOP as BY_TOP,
                               DEFAULT_ESCALATE_FACTOR,
                               DEFAULT_ESCALATE_QUIET_S, DEFAULT_MAX_OVERHEAD,
                               DEFAULT_OTLP_RATE, DEFAULT_REFRESH_S,
                               ExporterConfig)
from ..send.otlp import endpoint
from .args import BY_KEYS, Parser
from .args import percent_or_zero, positive_float, positive_int, zero_or_more
from .osdstage import check_live_stages, osd_list, stage_list
from . import otlpargs

TOOL = "osdstage-exporter"
DEFAULT_LISTEN = "127.0.0.1:9929"
# The interpreter's thread switch interval while serving (Python's default
# 5 ms): a scrape's thread waits up to this for the interpreter lock each
# time it wakes (accept, read, write) while the loop reads the maps or
# renders the page, tens of ms a scrape on the loaded lab
SWITCH_S = 0.0005


class _Parser(Parser):
    tool = TOOL


EXAMPLES = """examples:
  osdstage_exporter.py                  # every OSD of this host, on
                                        # http://127.0.0.1:9929/metrics
  osdstage_exporter.py --listen :9929   # every address of the host
  osdstage_exporter.py --listen 10.0.0.5:9929 --max-overhead 0.5
  osdstage_exporter.py --osd 0,2        # only osd.0 and osd.2
  osdstage_exporter.py --no-kernel      # user-space stages only (cheaper)
  osdstage_exporter.py --tiers lean     # the lean tier alone: every op,
                                        # one probe hit each
  curl -s 127.0.0.1:9929/metrics | grep osdstage_stage_latency
  osdstage_exporter.py --otlp http://jaeger:4318 --otlp-over 20000
                                        # also 1 op in 100 and every op
                                        # over 20 ms as OTLP traces (one
                                        # trace per op across the hosts)
  osdstage_exporter.py --escalate-over 50000
                                        # the full tier on at once when an
                                        # op takes 50 ms (and when p99
                                        # doubles, as by default)
  osdstage_exporter.py --by image --by-top 20
                                        # whose ops: ops, op time and queue
                                        # wait per RBD image, 20 at most

Prometheus: add a scrape job for HOST:9929 (deploy/README.md); the Grafana
dashboard is deploy/grafana/osdstage.json; systemd, podman and Kubernetes
examples are in deploy/.
"""


def factor_arg(s):
    """0 (never) or a number over 1."""
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number: %r" % s)
    if v != 0 and not v > 1:
        raise argparse.ArgumentTypeError("0 (never) or over 1: %r" % s)
    return v


def listen_arg(s):
    """ADDR:PORT, [V6ADDR]:PORT, :PORT (every address) or PORT."""
    host, sep, port = s.rpartition(":")
    if not sep:
        host, port = "", s
    host = host.strip("[]")
    try:
        p = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError("not ADDR:PORT: %r" % s)
    if not 0 < p < 65536:
        raise argparse.ArgumentTypeError("port out of range: %r" % s)
    return (host or "0.0.0.0", p)


def build_parser():
    p = _Parser(
        prog="osdstage_exporter.py",
        description="Trace every ceph-osd of this host (as osdstage.py "
                    "--osd all) and serve\nper-stage latency histograms, "
                    "queue-wait attribution, thread times and the\ntool's "
                    "own cost on /metrics for Prometheus. Follows OSDs that "
                    "restart,\nappear or disappear.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", type=listen_arg, default=DEFAULT_LISTEN,
                   metavar="ADDR:PORT",
                   help="where to serve /metrics (default %s; :PORT for "
                        "every address)" % DEFAULT_LISTEN)
    p.add_argument("--tiers", choices=("both", "lean", "full"),
                   default="both",
                   help="both (default): the lean tier (one probe hit per "
                        "op: messenger stages, queue_wait, execute, "
                        "op_total, op_latency) attached all the time and "
                        "the full tier (every stage, kernel, attribution) "
                        "in duty cycles; lean: the lean tier alone; full: "
                        "the full tier alone, in duty cycles")
    p.add_argument("--max-overhead", type=percent_or_zero,
                   default=DEFAULT_MAX_OVERHEAD, metavar="PCT",
                   help="keep the measured cost since the start (the lean "
                        "tier's, the exporter's own and the full tier's) "
                        "under PCT %%%% of the host's CPU time by attaching "
                        "the full tier only part of the time (duty cycles; "
                        "default %g; at most 100; 0: no bound, the full "
                        "tier always on)"
                        % DEFAULT_MAX_OVERHEAD)
    p.add_argument("--refresh", type=positive_float,
                   default=DEFAULT_REFRESH_S, metavar="SECS",
                   help="how often the kernel's figures are read into "
                        "/metrics (default %g)" % DEFAULT_REFRESH_S)
    p.add_argument("--osd", metavar="ID|all", type=osd_list, default="all",
                   help="the OSDs to trace: ID,ID,... or all (default)")
    p.add_argument("-S", "--stages", type=stage_list, default=None,
                   metavar="STAGE[,STAGE...]|all",
                   help="user-space stages to trace (default: every stage "
                        "but do_op and get_object_context; all: every one)")
    p.add_argument("--no-kernel", action="store_true",
                   help="no scheduler/futex/block/syncfs tracepoints: user-"
                        "space stages only, no queue-wait attribution")
    p.add_argument("--behind", action="store_true",
                   help="the full tier also tells whom the OSD's threads "
                        "waited behind for a CPU (%s; a cost on every "
                        "context switch of the host)" %
                        "osdstage_thread_runqueue_behind_seconds_total")
    p.add_argument("--host-netns", metavar="NAME", default=None,
                   help="a lab aid: the host is the network namespace NAME "
                        "(ip netns): trace only its ceph-osd processes, as "
                        "on a real host the exporter sees its own")
    p.add_argument("--release", default=None, metavar="X.Y",
                   help="use this Ceph release's probe table (default: asked "
                        "from each binary)")
    p.add_argument("--max-ops", type=positive_int, default=DEFAULT_MAX_OPS,
                   metavar="N", help="slots of the table of ops in flight, a "
                   "power of two (default %d)" % DEFAULT_MAX_OPS)
    p.add_argument("--op-timeout", type=positive_float,
                   default=DEFAULT_OP_TIMEOUT_S, metavar="SECS",
                   help="forget (and count) ops idle this long (default %g)"
                   % DEFAULT_OP_TIMEOUT_S)
    o = p.add_argument_group(
        "escalation (the lean tier watching the tail, --tiers both with a "
        "cost bound)")
    o.add_argument("--escalate-factor", type=factor_arg, default=None,
                   metavar="X",
                   help="bring the full tier on at once (out of its duty "
                        "cycle, within the same bound) when an OSD's op "
                        "latency p99 in the lean tier over a refresh is "
                        "over X times its baseline (default %g; 0: never)"
                        % DEFAULT_ESCALATE_FACTOR)
    o.add_argument("--escalate-over", type=positive_float, default=None,
                   metavar="US",
                   help="and when an op took at least US microseconds "
                        "(default: no threshold)")
    o.add_argument("--escalate-quiet", type=positive_float, default=None,
                   metavar="SECS",
                   help="after an OSD's tail brought the full tier on, let "
                        "its same slowdown be this long before it does "
                        "again (default %g; a tail that gets worse still "
                        "does)" % DEFAULT_ESCALATE_QUIET_S)
    o = p.add_argument_group("whose ops")
    o.add_argument("--by", choices=BY_KEYS, metavar="KEY", default=None,
                   help="count each OSD's completed client ops by KEY: "
                        "client, pool, pg or image (an RBD image, named "
                        "where this host can read the cluster): ops, "
                        "op_total and queue wait summed per key "
                        "(osdstage_by_key_*), every op the full tier sees "
                        "handed over at its end (a cost per op: see "
                        "BENCHMARKS.md)")
    o.add_argument("--by-top", type=positive_int, default=None, metavar="K",
                   help="with --by: at most K keys with series of their own "
                        "per OSD, later ones summed as other until a key "
                        "is idle for 10 minutes (default %d)" % BY_TOP)
    o = p.add_argument_group("traces")
    o.add_argument("--otlp", metavar="URL", default=None,
                   help="also send ops as OTLP traces (OTLP/HTTP, JSON) to "
                        "the collector at URL (Jaeger, Tempo, an "
                        "OpenTelemetry collector: http://HOST:4318): chosen "
                        "by the full tier's programs at each op's end, a "
                        "1-in-N sample by request id (the same ops on every "
                        "host: each host's exporter sends its OSDs' part of "
                        "the same traces) and the ops over --otlp-over; "
                        "those ops are also exemplars of the latency "
                        "histograms (OpenMetrics scrapes only)")
    otlpargs.tuning_options(
        o, "with --otlp: every op that took at least US microseconds on "
           "its OSD too (default: none)")
    o.add_argument("--otlp-rate", type=zero_or_more,
                   default=DEFAULT_OTLP_RATE, metavar="N",
                   help="with --otlp: at most N traces a second from this "
                        "exporter, a second's worth at once (default %d; 0: "
                        "no cap); the others are counted"
                        % DEFAULT_OTLP_RATE)
    return p


def check_by(args):
    """--by and --by-top: a usage error when they cannot go with the rest;
    --by-top's default."""
    if args.by_top is not None and not args.by:
        raise UsageError("--by-top K goes with --by KEY")
    if args.by and args.tiers == "lean":
        raise UsageError("--by: the ops are handed over by the full tier's "
                         "programs, which --tiers lean does not run")
    if args.by and args.otlp:
        raise UsageError("--by takes every op the full tier sees and --otlp "
                         "a sample of them: one of them")
    if args.by_top is None:
        args.by_top = BY_TOP


def check_otlp(args):
    """--otlp's options (cli/otlpargs.py's check_tuning, with
    --otlp-rate): a usage error (exit status 2, one line) when the URL is
    not a collector's or a tuning option comes without it."""
    otlpargs.check_tuning(args, build_parser(),
                          (("otlp_rate", "--otlp-rate"),))
    if args.otlp and args.tiers == "lean":
        raise UsageError("--otlp: the ops are chosen by the full tier's "
                         "programs, which --tiers lean does not run")


def check_escalation(args):
    """--escalate-*: the lean tier watches, the full tier comes on: both
    tiers and a bound needed."""
    given = [o for o, v in (("--escalate-factor", args.escalate_factor),
                            ("--escalate-over", args.escalate_over),
                            ("--escalate-quiet", args.escalate_quiet))
             if v is not None]
    if given and (args.tiers != "both" or not args.max_overhead):
        raise UsageError("%s: the lean tier watches the tail and brings the "
                         "full tier on out of its duty cycle: needs --tiers "
                         "both and a cost bound (--max-overhead over 0)"
                         % given[0])


def exporter_config(args):
    """The parsed command line as exporter/config.py's ExporterConfig
    (each field the option of that name; --escalate-factor,
    --escalate-quiet and --by-top not given: their defaults)."""
    c = {f.name: getattr(args, f.name)
         for f in dataclasses.fields(ExporterConfig)}
    if c["escalate_factor"] is None:
        c["escalate_factor"] = DEFAULT_ESCALATE_FACTOR
    if c["escalate_quiet"] is None:
        c["escalate_quiet"] = DEFAULT_ESCALATE_QUIET_S
    if c["by_top"] is None:
        c["by_top"] = BY_TOP
    return ExporterConfig(**c)


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def serve_http(listen, exported):
    """Serve /metrics from a thread: exported.page(), the state of the
    last refresh (prometheus_client's formats and content types: the
    OpenMetrics one, with exemplars, when the Accept header asks for it,
    as Prometheus does, else the classic text one; gzip as its own
    server does it). A bad address or a port in use is one line."""
    from prometheus_client.exposition import gzip_accepted
    from ..exporter.collect import exposition
    addr, port = listen

    def app(environ, start_response):
        if environ.get("PATH_INFO") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type",
                                              "text/plain")])
            return [b"not found: try /metrics\n"]
        fmt, ctype = exposition(environ.get("HTTP_ACCEPT", ""))
        body, encoding = exported.page(
            gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")), fmt)
        headers = [("Content-Type", ctype),
                   ("Content-Length", str(len(body))),
                   ("Vary", "Accept, Accept-Encoding")]
        if encoding:
            headers.append(("Content-Encoding", encoding))
        start_response("200 OK", headers)
        return [body]

    try:
        family = socket.getaddrinfo(addr, port)[0][0]

        class Server(WSGIServer):
            # one thread serves every scrape (a page is a copy of bytes):
            # a thread per scrape grew the process by a malloc arena each
            # (+15 MB over a 30-min soak); a stuck client times out
            address_family = family
            timeout = 10

            def get_request(self):
                conn, addr = super().get_request()
                conn.settimeout(10)
                return conn, addr

        httpd = make_server(addr, port, app, Server, handler_class=_Quiet)
    except socket.gaierror as e:
        raise UserError("cannot listen on %s:%d: %s" % (addr, port,
                                                        e.strerror))
    except OSError as e:
        why = {errno.EADDRINUSE: "port %d is in use (another exporter?)"
               % port,
               errno.EADDRNOTAVAIL: "%s is not an address of this host"
               % addr,
               errno.EACCES: "permission denied"}.get(e.errno, e.strerror)
        raise UserError("cannot listen on %s:%d: %s" % (addr, port, why))
    threading.Thread(target=httpd.serve_forever, daemon=True,
                     name="metrics").start()
    return httpd


def run(args, err=sys.stderr):
    if args.tiers == "lean" and (args.stages or args.no_kernel or
                                 args.behind):
        raise UsageError("--tiers lean traces a fixed set of stages with no "
                         "kernel programs: -S, --no-kernel and --behind are "
                         "the full tier's")
    if args.behind and args.no_kernel:
        raise UsageError("--behind splits the kernel's run-queue waits: not "
                         "with --no-kernel")
    check_live_stages(args.stages)
    check_otlp(args)
    check_escalation(args)
    check_by(args)
    require_root(TOOL)
    require_btf()
    require_tracefs()
    try:
        from prometheus_client import CollectorRegistry
        from prometheus_client import (GC_COLLECTOR, PLATFORM_COLLECTOR,
                                       PROCESS_COLLECTOR)
    except ImportError:
        raise UserError("python3-prometheus-client is not installed (apt-get "
                        "install python3-prometheus-client)")
    from ..exporter.collect import Exported
    from ..exporter.service import serve_forever
    from .. import abi
    abi.load("osdstage")            # the build is there (else one line)
    exported = Exported(args.max_overhead, otlp=bool(args.otlp),
                        by=args.by)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exported)
    for c in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(c)
    exported.registry = registry
    exported.publish()
    sys.setswitchinterval(SWITCH_S)
    serve_http(args.listen, exported)
    err.write("%s: serving http://%s:%d/metrics (cost bound %s)%s\n" % (
        TOOL, args.listen[0] if ":" not in args.listen[0] else
        "[%s]" % args.listen[0], args.listen[1],
        "%g %%" % args.max_overhead if args.max_overhead else "none",
        "; traces to %s (%s%s, at most %s a second)" % (
            endpoint(args.otlp), "1 op in %d" % args.otlp_sample
            if args.otlp_sample else "no sample",
            ", ops over %g us" % args.otlp_over
            if args.otlp_over is not None else "",
            args.otlp_rate or "any number") if args.otlp else "" +
        ("; ops by %s (at most %d keys per OSD)" % (args.by, args.by_top)
         if args.by else "")))
    err.flush()
    return serve_forever(exporter_config(args), exported, err)


def main(argv=None):
    return run_cli(TOOL, lambda: run(build_parser().parse_args(argv)))
