"""A live osdstage run's --otlp without root (the BPF tier's
test_live_traces.py runs it against a controlled program):

- the --otlp options are one definition for a live run and -r: the same
  types and the same mistakes, each mode's defaults set after the check
  (a live run's those of the exporter's --otlp), each mode's own option
  refused in the other, --lean and --list refuse it;
- the end summary: each report's "otlp" object counts the ops the BPF
  programs chose since the start (each OSD's own, the host's every
  OSD's) and what became of them; the last report's counts are final
  (made after the bounded flush), every op offered is sent or dropped,
  the object is the schema's, and it is said in words (the reports'
  line, the end line on stderr);
- a collector that is down or stalls never holds the run: what it does
  not take is counted, its failure said once;
- a probe spec says where an item's request id is (reqid_offset)."""
import io
import threading
import time
from types import SimpleNamespace

import pytest

from cephlat.ceph import spec
from cephlat.cli import liveotlp, osdstage, otlpargs
from cephlat.errors import UsageError, UserError
from cephlat.exporter import config as exporter_config
from cephlat.livetraces import Traces
from otlpcollector import wait_until
from cephlat.model.interval import Interval
from cephlat.model.sample import TraceChoice
from cephlat.model.schema import schema
from cephlat.render import interval_text, text
from cephlat.render.otlp import trace_id
from cephlat.render.options import TextOptions
from cephlat.send.otlp import Sender

from conftest import REPO

URL = "http://127.0.0.1:4318"
CAP = REPO + "/tests/fixtures/lab-v0.ctf"


def _live(argv):
    args = osdstage.parse_args(argv)
    osdstage._check_live(args)
    return args


def _read(argv):
    args = osdstage.parse_args(argv)
    osdstage._check_reading(args)
    return args


# --- the options -----------------------------------------------------------
def test_one_definition_for_both_modes():
    p = osdstage.build_parser()
    for opt in ("--otlp", "--otlp-sample", "--otlp-over", "--otlp-rate",
                "--otlp-max"):
        assert [a for a in p._actions if opt in a.option_strings], opt
        assert len([a for a in p._actions if opt in a.option_strings]) == 1
    tail = ["--otlp", URL, "--otlp-sample", "0", "--otlp-over", "250"]
    live, read = _live(["-p", "1"] + tail), _read(["-r", CAP] + tail)
    for a in (live, read):
        assert (a.otlp, a.otlp_sample, a.otlp_over) == (URL, 0, 250.0)


def test_each_modes_defaults_after_the_check():
    a = osdstage.parse_args(["-p", "1", "--otlp", URL])
    assert a.otlp_sample is a.otlp_rate is a.otlp_max is None
    osdstage._check_live(a)
    assert (a.otlp_sample, a.otlp_rate, a.otlp_max) == (100, 50, None)
    # the exporter's defaults: the same ops chosen the same way
    assert a.otlp_sample == exporter_config.DEFAULT_OTLP_SAMPLE
    assert a.otlp_rate == exporter_config.DEFAULT_OTLP_RATE
    assert liveotlp.trace_choice(a) == TraceChoice(100, None, 50)
    r = _read(["-r", CAP, "--otlp", URL])
    assert (r.otlp_sample, r.otlp_rate, r.otlp_max) == (100, None, 200)
    # given ones are kept, a rate of 0 (no cap) too
    a = _live(["--osd", "0", "--otlp", URL, "--otlp-sample", "7",
               "--otlp-rate", "0"])
    assert liveotlp.trace_choice(a) == TraceChoice(7, None, 0)
    assert liveotlp.trace_choice(_live(["-p", "1"])) is None


@pytest.mark.parametrize("argv,fragment", [
    (["-p", "1", "--otlp-sample", "5"], "--otlp-sample is for --otlp URL"),
    (["-p", "1", "--otlp-over", "5"], "--otlp-over is for --otlp URL"),
    (["-p", "1", "--otlp-rate", "5"], "--otlp-rate is for --otlp URL"),
    (["-r", CAP, "--otlp-max", "5"], "--otlp-max is for --otlp URL"),
    (["-p", "1", "--otlp", "127.0.0.1:4318"], "--otlp 127.0.0.1:4318"),
    (["-r", CAP, "--otlp", "ftp://h:1"], "http://"),
    (["-p", "1", "--otlp", URL, "--otlp-sample", "0"], "--otlp-over"),
    (["-r", CAP, "--otlp", URL, "--otlp-sample", "0"], "--otlp-over"),
    (["-p", "1", "--otlp", URL, "--otlp-max", "3"],
     "--otlp-max reads a capture"),
    (["-r", CAP, "--otlp", URL, "--otlp-rate", "0"],
     "--otlp-rate is for live tracing"),
    (["-p", "1", "--lean", "--otlp", URL], "drop --otlp"),
    (["--list", "--otlp", URL], "drop --otlp"),
    (["-p", "1", "--bpftrace-args", "--otlp", URL], "drop --otlp"),
    (["-p", "1", "--otlp", URL, "--otlp-sample", "-1"], "--otlp-sample"),
])
def test_the_options_mistakes(argv, fragment, capsys):
    assert osdstage.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("osdstage: ") and fragment in err, err


def test_help_shows_a_live_example():
    helptext = osdstage.build_parser().format_help()
    assert "--osd 0 --otlp http://127.0.0.1:4318 10" in helptext
    assert "OTLP traces, live or from captures" in helptext


def test_the_choice_in_words():
    a = _live(["-p", "1", "--otlp", URL, "--otlp-over", "20000"])
    assert otlpargs.trace_words(a) == (
        "1 op in 100 by request id and the ops over 20000 us, at most 50 "
        "a second")
    a = _live(["-p", "1", "--otlp", URL, "--otlp-sample", "1",
               "--otlp-rate", "0"])
    assert otlpargs.trace_words(a) == "every op, no rate cap"


# --- the end summary -------------------------------------------------------
class _Collector:
    """A poster: takes, refuses or stalls (until released)."""

    def __init__(self):
        self.why, self.bodies = None, []
        self.stall = threading.Event()
        self.release = threading.Event()

    def __call__(self, url, body, timeout):
        if self.stall.is_set():
            self.release.wait(timeout)
            return "timed out"
        if self.why is None:
            self.bodies.append(body)
        return self.why


def _ev(tid, why=0, target=0):
    """A chosen op as engine/traces.py decodes a struct op_trace: a
    primary's client op client.4100.0:tid, dequeued: three spans."""
    t0 = 10 ** 9 + tid * 10 ** 6
    return {"op": 0x1000 + tid, "req_num": 4100, "req_tid": tid,
            "req_inc": 0, "req_type": 8, "src": 0, "enq_ns": t0,
            "deq_ns": t0 + 300000, "done_ns": t0 + 500000, "msg_ns": 0,
            "sub_ns": 0, "local_ns": 0, "pg_pool": 1, "pg_seed": tid,
            "replies": 0, "rep_peer": [0] * 4, "rep_us": [0] * 4,
            "last_peer": 0, "sent_us": 0, "target": target, "role": 0,
            "why": why, "op_class": 0, "queue_class": 0, "dequeued": 1,
            "object": ""}


class _Tracer:
    """take_traces(): the ops the test put in .evs, once."""

    def __init__(self):
        self.evs = []

    def take_traces(self):
        evs, self.evs = self.evs, []
        return evs


def _run(col, names=("osd.0",), argv=()):
    """A LiveTraces over a real Traces and Sender posting to `col`,
    stderr in .err, what Traces said in .said; the fake tracer's ring
    holds what the test puts in .evs."""
    args = _live(["-p", "1", "--otlp", URL] + list(argv))
    err = io.StringIO()
    sender = Sender(URL + "/v1/traces", max_spans=40, batch_spans=10,
                    timeout=0.5, poster=col).start()
    said = []
    traces = Traces(URL + "/v1/traces", "h1", said.append, sender=sender)
    lt = liveotlp.LiveTraces(args, err, "16.2.15", traces=traces)
    lt.said = said
    vocab = SimpleNamespace(op_classes=["read", "write", "other"],
                            queue_classes=["client"])
    runs = [SimpleNamespace(name=n, pid=i + 10, vocab=vocab)
            for i, n in enumerate(names)]
    return lt, _Tracer(), runs, err


def _iv():
    """An OSD's report, as the loop hands it: an Interval (its record
    empty)."""
    return Interval(None, 1.0, {}, {}, {}, {})


def _snaps(*counters):
    return [SimpleNamespace(counters=dict(c)) for c in counters]


def _counters(sample, slow=0, rate=0, ring=0, other=0):
    return {"trace_sample": sample, "trace_slow": slow,
            "trace_over_rate": rate, "trace_ring_full": ring,
            "op_unknown": other}


def _valid(obj):
    import jsonschema
    doc = dict(schema())
    jsonschema.validate(obj, {"$ref": "#/$defs/otlp", "$defs": doc["$defs"]})


def test_each_report_counts_since_the_start_and_the_last_is_final():
    col = _Collector()
    lt, tracer, runs, err = _run(col, names=("osd.0", "osd.3"))
    # counted before the run: not the run's
    lt.start(_snaps(_counters(5, other=9), _counters(1)))
    tracer.evs = [_ev(t) for t in (1, 2, 3)] + [_ev(4, why=1, target=1)]
    lt.take(tracer, runs)
    assert wait_until(lambda: lt.traces.sender.queued() == 0)
    recs = [_iv(), _iv()]
    host = {}
    # the programs' counters: osd.3 chose one more, over the rate cap
    lt.add(tracer, runs, recs, host,
           _snaps(_counters(8, other=10), _counters(2, slow=1, rate=1)),
           last=False)
    one, three = recs[0].record["otlp"], recs[1].record["otlp"]
    assert one == {"url": URL + "/v1/traces", "chosen": 3, "sample": 3,
                   "slow": 0, "sent": 3, "spans": 9,
                   "dropped": {"rate": 0, "ring": 0, "queue_full": 0,
                               "collector": 0}, "error": None}
    assert (three["chosen"], three["slow"], three["sent"],
            three["spans"]) == (2, 1, 1, 3)
    assert three["dropped"]["rate"] == 1
    assert (host["otlp"]["chosen"], host["otlp"]["sent"],
            host["otlp"]["dropped"]["rate"]) == (5, 4, 1)
    for o in (one, three, host["otlp"]):
        _valid(o)
    # the ids: the request id's trace, its op span first
    ops = [s for b in col.bodies for rs in b["resourceSpans"]
           for ss in rs["scopeSpans"] for s in ss["spans"]
           if s["name"].startswith("osd op")]
    assert sorted(s["traceId"] for s in ops) == sorted(
        trace_id("client.4100.0:%d" % t) for t in (1, 2, 3, 4))
    # the last report: the ring read and the queue flushed first
    tracer.evs = [_ev(5)]
    recs = [_iv(), _iv()]
    lt.add(tracer, runs, recs, None,
           _snaps(_counters(9, other=10), _counters(2, slow=1, rate=1)),
           last=True)
    o = recs[0].record["otlp"]
    assert o["sent"] == o["chosen"] == 4
    assert lt.closed
    lt.close()
    assert err.getvalue() == (
        "osdstage: otlp: 6 ops chosen, 5 sent as traces (15 spans) to "
        "%s/v1/traces; 1 dropped (1 over --otlp-rate)\n" % URL)
    assert lt.said == []


def test_a_collector_that_is_down_is_said_once_and_counted(monkeypatch):
    monkeypatch.setattr(Sender, "BACKOFF_S", 0.01)
    col = _Collector()
    col.why = "Connection refused"
    lt, tracer, runs, err = _run(col)
    lt.start(_snaps(_counters(0)))
    t0 = time.monotonic()
    for t in range(1, 31):
        tracer.evs = [_ev(t)]
        lt.take(tracer, runs)
    assert time.monotonic() - t0 < 0.5      # never waits for it
    assert wait_until(lambda: lt.traces.sender.queued() == 0)
    lt.take(tracer, runs)
    recs = [_iv()]
    lt.add(tracer, runs, recs, None, _snaps(_counters(30)), last=True)
    o = recs[0].record["otlp"]
    assert o["sent"] == 0 and o["error"] == "Connection refused"
    assert sum(o["dropped"].values()) == 30 == o["chosen"]
    assert o["dropped"]["collector"] > 0
    _valid(o)
    assert len(lt.said) == 1 and "Connection refused" in lt.said[0] and \
        "dropped (counted)" in lt.said[0]
    lt.close()
    line = err.getvalue()
    assert line.startswith("osdstage: otlp: 30 ops chosen, 0 sent as "
                           "traces (0 spans)")
    assert "not taken by the collector: Connection refused" in line


def test_the_flush_at_the_end_is_bounded(monkeypatch):
    """A collector that stalls: the end waits FLUSH_S, no more; what was
    being posted and what was queued are counted dropped."""
    monkeypatch.setattr(liveotlp, "FLUSH_S", 0.3)
    col = _Collector()
    col.stall.set()
    lt, tracer, runs, err = _run(col)
    lt.start(_snaps(_counters(0)))
    tracer.evs = [_ev(t) for t in range(1, 7)]
    lt.take(tracer, runs)
    assert wait_until(lambda: lt.traces.sender.queued() < 18)   # one posting
    recs = [_iv()]
    t0 = time.monotonic()
    lt.add(tracer, runs, recs, None, _snaps(_counters(6)), last=True)
    assert time.monotonic() - t0 < 1.0
    o = recs[0].record["otlp"]
    assert o["sent"] == 0 and o["chosen"] == 6
    d = o["dropped"]
    assert 1 <= d["collector"] <= 3         # the batch being posted
    assert d["collector"] + d["queue_full"] == 6    # and the queue's
    assert o["error"] == "no answer within 0.3 s of the end"
    col.release.set()
    time.sleep(0.1)
    # the post that ended after the flush is not counted twice
    assert lt.traces.summary(_counters(6)) == o
    lt.close()


def test_the_reports_line_and_the_header():
    rec = {"url": URL + "/v1/traces", "chosen": 40, "sample": 38, "slow": 2,
           "sent": 37, "spans": 111,
           "dropped": {"rate": 0, "ring": 1, "queue_full": 0,
                       "collector": 2}, "error": "HTTP 503 Unavailable"}
    out = io.StringIO()
    interval_text._otlp(out, {"otlp": rec})
    assert " ".join(out.getvalue().split()) == (
        "OTLP traces since the start: 40 ops chosen, 37 sent as traces "
        "(111 spans); 3 dropped (1 for a full traces ring, 2 not taken by "
        "the collector: HTTP 503 Unavailable)")
    out = io.StringIO()
    a = _live(["--osd", "0", "--otlp", URL, "10"])
    hdr = {"targets": [("osd.0", 42)], "mode": "default",
           "reports_words": "a report every 10 s until Ctrl-C",
           "otlp": __import__("cephlat.cli.header", fromlist=["x"])._otlp(a)}
    text.print_header(out, TextOptions(), hdr)
    assert "OTLP traces: 1 op in 100 by request id, at most 50 a second, " \
        "to %s/v1/traces" % URL in " ".join(out.getvalue().split())


# --- a probe spec's request ids ----------------------------------------------
def test_a_probe_spec_says_where_the_request_id_is():
    base = ('{"workers": "w", "enqueue": {"function": "a", "key_arg": 1}, '
            '"dequeue": {"function": "b", "key_arg": 1}')
    s = spec.parse(base + ', "reqid_offset": 40}')
    assert s.release.settings() == {"reqid_off": 40}
    assert spec.parse(base + "}").release.settings() == {}
    for bad in ('0', '"40"', 'true', '5000'):
        with pytest.raises(UserError) as e:
            spec.parse(base + ', "reqid_offset": %s}' % bad)
        assert "reqid_offset" in str(e.value)


def test_otlp_needs_request_ids():
    a = _live(["-p", "1", "--otlp", URL, "--probes", "q.json"])
    ses = SimpleNamespace(tracer=SimpleNamespace(settings={}))
    with pytest.raises(UserError) as e:
        liveotlp.check_reqids(ses, a)
    assert "q.json" in str(e.value) and "reqid_offset" in str(e.value)
    ses.tracer.settings["reqid_off"] = 40
    liveotlp.check_reqids(ses, a)
    assert not isinstance(e.value, UsageError)
