"""The --otlp options of every tool, one definition: osdstage-exporter's
and rbdrecord's (tuning_options, check_tuning: their defaults set by the
parser) and osdstage's, for its two ways of sending ops as OTLP traces
(add_options, check): a live run (-p, --osd: the ops the BPF programs
choose at their end, sent while the reports run, as the exporter's
--otlp sends them: cli/live.py, livetraces.py) and reading captures
(-r: the ops chosen from the captures, each with its whole story, sent
after the report: cli/otlp.py). The choice is the same rule in both: 1
op in N by request id (model/sample.py), and the ops over a threshold;
a live run caps the rate, a read the number."""
from ..errors import UsageError, UserError
from ..exporter.config import DEFAULT_OTLP_RATE, DEFAULT_OTLP_SAMPLE
from .args import positive_float, positive_int, zero_or_more

# the defaults: 1 op in OTLP_SAMPLE by request id; a live run at most
# OTLP_RATE traces a second (both the exporter's), a read at most
# OTLP_MAX ops
OTLP_SAMPLE, OTLP_RATE, OTLP_MAX = DEFAULT_OTLP_SAMPLE, DEFAULT_OTLP_RATE, 200

# each mode's own option: dest -> (the option, the mode it is for)
LIVE_ONLY = {"otlp_rate": "--otlp-rate"}
READ_ONLY = {"otlp_max": "--otlp-max"}


def add_options(p):
    """--otlp and its tuning options, a group of `p`'s --help; each is
    None unless given (check() sets the defaults of the mode)."""
    o = p.add_argument_group(
        "OTLP traces, live or from captures (see osdstage(8), OTLP "
        "TRACES)")
    o.add_argument("--otlp", metavar="URL",
                   help="send ops as OTLP traces (OTLP/HTTP, JSON) to the "
                        "collector at URL (Jaeger, Tempo, an OpenTelemetry "
                        "collector: http://HOST:4318): a 1-in-N sample by "
                        "request id, the same on every host, and the ops "
                        "over --otlp-over. Live: chosen by the BPF "
                        "programs at each op's end and sent while the "
                        "reports run, each OSD's part of the op (as "
                        "osdstage-exporter --otlp); the reports say how "
                        "many were sent. With -r: each trace joins the "
                        "client's call and every OSD's part of the op")
    o.add_argument("--otlp-sample", type=zero_or_more, default=None,
                   metavar="N",
                   help="with --otlp: 1 op in N by request id (default "
                        "%d; 1: every op; 0: none, only those over "
                        "--otlp-over)" % OTLP_SAMPLE)
    o.add_argument("--otlp-over", type=positive_float, default=None,
                   metavar="US",
                   help="with --otlp: every op that took at least US "
                        "microseconds on its OSD (with -r: its primary) "
                        "too")
    o.add_argument("--otlp-rate", type=zero_or_more, default=None,
                   metavar="N",
                   help="live, with --otlp: at most N traces a second, a "
                        "second's worth at once (default %d; 0: no cap); "
                        "the others are counted" % OTLP_RATE)
    o.add_argument("--otlp-max", type=positive_int, default=None,
                   metavar="N",
                   help="with -r and --otlp: at most N ops, the slowest "
                        "first (default %d)" % OTLP_MAX)


def check(args, live):
    """--otlp's options in a live run (`live`) or a read: a usage error
    (one line, exit status 2) when a tuning option comes without --otlp,
    the URL is not a collector's or the sample is empty with no
    threshold; then the mode's defaults are set. (The other mode's own
    option is refused by cli/osdstage.py with the rest of that mode's.)"""
    mine = {**(LIVE_ONLY if live else READ_ONLY),
            "otlp_sample": "--otlp-sample", "otlp_over": "--otlp-over"}
    more = [opt for k, opt in mine.items() if getattr(args, k) is not None]
    if more and not args.otlp:
        raise UsageError("%s is for --otlp URL" % more[0])
    if not args.otlp:
        return
    _check_url_and_sample(args.otlp, args.otlp_sample, args.otlp_over)
    if args.otlp_sample is None:
        args.otlp_sample = OTLP_SAMPLE
    if live and args.otlp_rate is None:
        args.otlp_rate = OTLP_RATE
    if not live and args.otlp_max is None:
        args.otlp_max = OTLP_MAX


def trace_words(args):
    """A live run's choice in words (its header, its banner): '1 op in
    100 by request id and the ops over 20000 us, at most 50 a second'."""
    every = args.otlp_sample
    parts = ["every op" if every == 1 else "1 op in %d by request id"
             % every if every else ""]
    if args.otlp_over is not None:
        parts.append("the ops over %g us" % args.otlp_over)
    words = " and ".join(p for p in parts if p)
    return words + (", at most %d a second" % args.otlp_rate
                    if args.otlp_rate else ", no rate cap")


def _check_url_and_sample(url, sample, over):
    from ..send.otlp import endpoint
    try:
        endpoint(url)
    except UserError as e:      # a usage error: exit status 2
        raise UsageError(str(e)) from None
    if sample == 0 and over is None:
        raise UsageError("--otlp-sample 0 sends only the ops over "
                         "--otlp-over: give it")


def tuning_options(g, over_help):
    """--otlp-sample N and --otlp-over US in argument group `g`: the same
    names, defaults and meaning in the exporter and rbdrecord (each
    with its --otlp URL); over_help: what --otlp-over times there."""
    g.add_argument("--otlp-sample", type=zero_or_more,
                   default=OTLP_SAMPLE, metavar="N",
                   help="with --otlp: 1 op in N by request id, the same "
                        "ops on every host (default %d, as osdstage's; "
                        "1: every op; 0: none, only those over "
                        "--otlp-over)" % OTLP_SAMPLE)
    g.add_argument("--otlp-over", type=positive_float, default=None,
                   metavar="US", help=over_help)


def check_tuning(args, parser, more=()):
    """--otlp and its tuning options (--otlp-sample, --otlp-over and
    `more`: (dest, option) pairs) of a tool whose parser sets their
    defaults: a usage error (exit status 2, one line) when the URL is not
    a collector's, a tuning option comes without it, or --otlp-sample 0
    without --otlp-over."""
    used = [o for k, o in (("otlp_sample", "--otlp-sample"),
                           ("otlp_over", "--otlp-over")) + tuple(more)
            if getattr(args, k) != parser.get_default(k)]
    if used and not args.otlp:
        raise UsageError("%s is for --otlp URL" % used[0])
    if args.otlp:
        _check_url_and_sample(args.otlp, args.otlp_sample, args.otlp_over)
