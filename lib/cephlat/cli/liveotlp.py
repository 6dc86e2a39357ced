"""A live run's --otlp (osdstage -p/--osd ... --otlp URL): the tracer is
loaded with the choice (model/sample.py's TraceChoice, as the exporter's
full tier is: engine/session.py's Want.traces), its ring is read every
turn of the loop and the chosen ops go to the collector as the
exporter's do (livetraces.py's Traces: a bounded queue, a thread of its
own: a collector that is slow or down never holds the reports, what it
does not take is counted and said in one line). Each report carries
what became of the chosen ops since the start ("otlp"); at the end what
is queued is sent for at most FLUSH_S, so that the last report's counts
are final, and one line on stderr says them."""
import socket

from ..engine.session import TOOL
from ..errors import UserError
from ..livetraces import Traces
from ..model.sample import TraceChoice
from ..send.otlp import endpoint
from ..render.otlp import summary_words
from .otlpargs import trace_words

FLUSH_S = 2.0           # at the end: what is queued is sent this long


def trace_choice(args):
    """The ops to choose (Want.traces) of osdstage's options; None
    without --otlp."""
    if not args.otlp:
        return None
    return TraceChoice(args.otlp_sample, args.otlp_over, args.otlp_rate)


def check_reqids(ses, args, opt="--otlp"):
    """--otlp chooses ops by request id (and --by reads the client from
    it): a UserError when the run's programs cannot read one (a probe spec
    that does not say where an item's is, a table entry whose offsets are
    unchecked here)."""
    if ses.tracer.settings.get("reqid_off"):
        return
    if args.probes:
        raise UserError("%s reads each op's request id: the probe spec %s "
                        "does not say where an item's is (\"reqid_offset\"; "
                        "see osdstage(8), PROBE SPEC)" % (opt, args.probes))
    raise UserError("%s reads each op's request id, which this binary's "
                    "probe table entry (%s, its offsets not checked on "
                    "this build) does not locate" % (
                        opt, ses.choice.release.name))


class LiveTraces:
    """The chosen ops of one live run to the collector of args.otlp:
    start() with the first snapshots, take() every turn of the loop,
    add() to each report its "otlp" object (the last report: after the
    flush), close() at the end (said in one line)."""

    def __init__(self, args, err, version, traces=None):
        self.err, self.version = err, version
        self.url = endpoint(args.otlp)
        self.words = trace_words(args)
        self.traces = traces or Traces(self.url, args.host_netns or
                                       socket.gethostname(), self.say)
        self.firsts = None
        self.closed = False
        self.total = None           # the host's counters at the last report

    def say(self, msg):
        self.err.write("%s: %s\n" % (TOOL, msg))
        self.err.flush()

    def start(self, snaps):
        """The snapshots the run's counts start from."""
        self.firsts = [dict(s.counters) for s in snaps]

    def take(self, tracer, runs):
        """The ops chosen since the last take to the sender (never
        waits for the collector)."""
        if not self.closed:
            self.traces.take(tracer, runs, self.version)

    def add(self, tracer, runs, ivs, host, curs, last):
        """Each OSD's report (ivs: an Interval each, its record) and
        the host's (or None) get their "otlp" object, the counts since
        the start; `last`: the run's last report, whose counts are
        final: the ring is read a last time and what is queued is sent
        for at most FLUSH_S before."""
        self.take(tracer, runs)
        if last:
            self._flush()
        total = {}
        for iv, cur, first, run in zip(ivs, curs, self.firsts, runs):
            since = {k: v - first.get(k, 0) for k, v in cur.counters.items()
                     if k.startswith("trace_")}
            for k, v in since.items():
                total[k] = total.get(k, 0) + v
            iv.record["otlp"] = self.traces.summary(since, [run.name])
        self.total = total
        if host is not None:
            host["otlp"] = self.traces.summary(total)

    def _flush(self):
        if not self.closed:
            self.closed = True
            self.traces.close(FLUSH_S)

    def close(self):
        """The end of the run (also on an error's way out): the flush,
        if not done yet, and the run's counts in one line."""
        self._flush()
        if self.total is not None:
            self.say("otlp: " + summary_words(
                self.traces.summary(self.total), self.url))
