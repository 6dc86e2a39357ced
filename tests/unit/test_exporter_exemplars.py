"""The exporter's exemplars (--otlp; exporter/exemplars.py, collect.py,
traces.py, cli/exporter.py serve_http), without a tracer or root; the
pages read back with prometheus_client's own parsers:

- an op handed to the OTLP sender is an exemplar of each histogram
  series it has a time for, in the bucket the histogram counts that
  time in, with the trace id its spans were sent with, its value in
  seconds and its end as the timestamp; an op the sender's queue had no
  room for is none;
- the OpenMetrics page (a scraper asking for it as Prometheus does)
  carries them; the classic text page (the default) and an exporter
  without --otlp carry none;
- one exemplar per series bucket, the newest op's (an older op arriving
  late replaces nothing); none for a series the exporter does not have,
  none kept for an OSD no longer traced: many ops cost no more memory
  than the series' buckets;
- the lab tests' Prometheus (tests/promserver.py) can keep exemplars,
  and reads the exemplar query API's answer.
"""
import gzip
import os
import random
import subprocess
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import \
    text_string_to_metric_families as om_families

from conftest import REPO, need
from cephlat import abi
from cephlat.cli.exporter import serve_http
from cephlat.engine.traces import decoder
from cephlat.exporter import families as F
from cephlat.exporter.collect import (LE, NBUCKETS, OPENMETRICS, TEXT,
                                      Exported, exposition)
from cephlat.exporter.exemplars import bucket_index, exemplars_of, op_values
from cephlat.livetraces import Traces
from cephlat.model.hist import Hist
from cephlat.render.otlp import trace_id
import promserver
from promserver import ACCEPT_PROMETHEUS, free_port, get, parse

BUILD = os.path.join(REPO, "build")
MS = 1000000
VOCAB = SimpleNamespace(
    op_classes=["read", "write", "other"],
    queue_classes=["client", "background_recovery",
                   "background_best_effort", "immediate"])
# a struct op_trace as engine/traces.py decodes it: a replicated write's
# primary (osd.2 on slot 0) and a replica's op (osd.1 on slot 1)
PRIMARY = dict(op=0x7f00, req_num=4100, req_tid=77, req_inc=0, src=0,
               enq_ns=10 * MS, deq_ns=10 * MS + 50000, done_ns=18 * MS,
               msg_ns=100000, sub_ns=10 * MS + 300000, local_ns=13 * MS,
               bytes_in=4096, bytes_out=0, pg_pool=1, pg_seed=8, replies=2, rep_peer=[0, 1, 0, 0],
               rep_us=[4000, 7600, 0, 0], last_peer=1, sent_us=0,
               target=0, role=0, why=0, op_class=1, queue_class=0,
               req_type=8, dequeued=1, pad2=0, object="rbd_data.1.02")
REPLICA = dict(PRIMARY, op=0x7e00, src=2, enq_ns=5 * MS,
               deq_ns=5 * MS + 20000, done_ns=7 * MS, msg_ns=30000,
               sub_ns=0, local_ns=0, bytes_in=0, replies=0,
               rep_peer=[0] * 4,
               rep_us=[0] * 4, last_peer=0, target=1, role=1,
               op_class=2, queue_class=3)
REQ = "client.4100.0:77"
OFF_NS = 1796355170 * 10 ** 9           # wall - monotonic
INFO = ("1", "16.2.15", "pacific", "16.2", "true", "all")


class FakeTracer:
    def __init__(self):
        self.evs = []

    def take_traces(self):
        evs, self.evs = self.evs, []
        return evs


class FakeSender:
    """Takes `room` parts, then none (a full queue)."""

    def __init__(self, room=10 ** 9):
        self.room, self.got, self.error = room, [], None

    def offer(self, key, resource_spans, spans):
        if len(self.got) >= self.room:
            return False
        self.got.append((key, resource_spans))
        return True

    def counts(self):
        return {}, {}


def _series(ex, name, *keys):
    """Give OSD `name` the series `keys` ((family, label values)), as a
    refresh does, with one duration each."""
    with ex.lock:
        st = ex.osd(name)
        for fam, labels in keys:
            st.hist(fam, labels, Hist.from_ns([1000]))


def _setup(otlp=True, room=10 ** 9):
    """An exporter state with osd.2 (a primary, its stages split by op
    class where the lean tier's are) and osd.1 (a replica), a Traces fed
    by a fake tracer at a fake sender, and the registry."""
    ex = Exported(1.0, otlp=otlp)
    for name in ("osd.2", "osd.1"):
        ex.attached(name, INFO)
    _series(ex, "osd.2", *[(F.STAGE_LATENCY, (s, c)) for s in (
        "queue_wait", "op_total", "op_latency", "execute") for c in (
        "read", "write", "other")])
    _series(ex, "osd.2", (F.STAGE_LATENCY, ("replica_wait", "all")),
            (F.STAGE_LATENCY, ("local_commit", "all")),
            (F.REPLICA_WAIT, ("osd.0",)), (F.REPLICA_WAIT, ("osd.1",)),
            (F.SCHED_CLASS_QUEUE_WAIT, ("client",)))
    _series(ex, "osd.1", (F.STAGE_LATENCY, ("repop", "all")),
            (F.STAGE_LATENCY, ("queue_wait", "all")))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    ex.registry = reg
    sender = FakeSender(room)
    traces = Traces("http://127.0.0.1:4318/v1/traces", "h1", lambda m: None,
                    sender=sender, on_sent=exemplars_of(ex))
    runs = [SimpleNamespace(name=n, vocab=VOCAB, pid=10 + i)
            for i, n in enumerate(("osd.2", "osd.1"))]
    return ex, traces, sender, runs


def _take(traces, runs, *evs):
    tracer = FakeTracer()
    tracer.evs = [dict(e) for e in evs]
    traces.take(tracer, runs, "16.2.15")


def _exemplars(page):
    """{(family, labels without le, le): Exemplar} of an OpenMetrics page
    (prometheus_client's OpenMetrics parser)."""
    out = {}
    for fam in om_families(page.decode()):
        for s in fam.samples:
            if s.exemplar is not None:
                labels = dict(s.labels)
                le = labels.pop("le")
                out[(fam.name, tuple(sorted(labels.items())), le)] = \
                    s.exemplar
    return out


def _om(ex):
    ex.publish()
    return ex.page(fmt=OPENMETRICS)[0]


def _le(seconds):
    return LE[bucket_index(round(seconds * 1e9))]


def test_a_sent_ops_exemplars(monkeypatch):
    monkeypatch.setattr("cephlat.livetraces.real_offset_ns",
                        lambda: OFF_NS)
    ex, traces, sender, runs = _setup()
    _take(traces, runs, PRIMARY, REPLICA)
    got = _exemplars(_om(ex))
    # the trace id is the one the spans were sent with
    sent_ids = {s["traceId"] for _, rs in sender.got for r in rs
                for ss in r["scopeSpans"] for s in ss["spans"]}
    assert sent_ids == {trace_id(REQ)}
    end_p = (OFF_NS + PRIMARY["done_ns"]) / 1e9
    end_r = (OFF_NS + REPLICA["done_ns"]) / 1e9

    def d(**kw):
        return tuple(sorted(kw.items()))
    want = {
        # the primary: 50 us queued, 8 ms in all, 7.95 ms executing,
        # 8.1 ms from its message's arrival, the last reply at 7.6 ms,
        # its own commit 2.7 ms after the sub-ops went
        (F.STAGE_LATENCY, d(ceph_daemon="osd.2", stage="queue_wait",
                            op_class="write"), 50e-6, end_p),
        (F.STAGE_LATENCY, d(ceph_daemon="osd.2", stage="op_total",
                            op_class="write"), 8e-3, end_p),
        (F.STAGE_LATENCY, d(ceph_daemon="osd.2", stage="execute",
                            op_class="write"), 7.95e-3, end_p),
        (F.STAGE_LATENCY, d(ceph_daemon="osd.2", stage="op_latency",
                            op_class="write"), 8.1e-3, end_p),
        (F.STAGE_LATENCY, d(ceph_daemon="osd.2", stage="replica_wait",
                            op_class="all"), 7.6e-3, end_p),
        (F.STAGE_LATENCY, d(ceph_daemon="osd.2", stage="local_commit",
                            op_class="all"), 2.7e-3, end_p),
        (F.REPLICA_WAIT, d(ceph_daemon="osd.2", peer="osd.0"), 4e-3, end_p),
        (F.REPLICA_WAIT, d(ceph_daemon="osd.2", peer="osd.1"), 7.6e-3,
         end_p),
        (F.SCHED_CLASS_QUEUE_WAIT, d(ceph_daemon="osd.2",
                                     scheduler_class="client"), 50e-6,
         end_p),
        # the replica: 2 ms from its enqueue to its reply, 20 us queued
        # (its queue wait only where the series is every op's: all)
        (F.STAGE_LATENCY, d(ceph_daemon="osd.1", stage="repop",
                            op_class="all"), 2e-3, end_r),
        (F.STAGE_LATENCY, d(ceph_daemon="osd.1", stage="queue_wait",
                            op_class="all"), 20e-6, end_r),
    }
    assert len(got) == len(want)
    for fam, labels, v, at in want:
        e = got[(fam, labels, _le(v))]
        assert e.labels == {"trace_id": trace_id(REQ)}
        assert e.value == pytest.approx(v, rel=1e-9)
        assert float(e.timestamp.sec) + e.timestamp.nsec / 1e9 == \
            pytest.approx(at, abs=1e-5)
        # in its bucket: below its le, at or over the one before
        i = LE.index(_le(v))
        assert v < float(LE[i]) and (i == 0 or v >= float(LE[i - 1]))


def test_the_values_are_read_from_the_record_alone():
    """op_values reads only struct op_trace's members, as the build lays
    them out (engine/traces.py decodes them)."""
    need(os.path.exists(os.path.join(BUILD, "osdstage.abi.json")),
         "BPF objects not built (run: make)")
    built = abi.load("osdstage", BUILD)
    st = built.struct("op_trace")
    members = {m["name"] for m in st.members}
    assert set(PRIMARY) == members
    ev = decoder(built)(bytes(st.size))
    assert op_values(ev, VOCAB) == [
        (F.STAGE_LATENCY, (("op_total", "read"), ("op_total", "all")), 0)]


def test_none_without_otlp_in_the_classic_format_or_unsent():
    # no --otlp: none, whatever is handed over
    ex, traces, _, runs = _setup(otlp=False)
    _take(traces, runs, PRIMARY)
    assert not _exemplars(_om(ex))
    # --otlp: the classic text page (the default) has none and parses
    ex, traces, sender, runs = _setup()
    _take(traces, runs, PRIMARY)
    text, _ = ex.page()
    assert b"trace_id" not in text and b"# {" not in text
    assert parse(text.decode())
    assert _exemplars(ex.page(fmt=OPENMETRICS)[0])
    # an op the sender's queue had no room for: no trace, no exemplar
    ex, traces, sender, runs = _setup(room=0)
    _take(traces, runs, PRIMARY, REPLICA)
    assert not sender.got and not _exemplars(_om(ex))


def test_openmetrics_when_asked_classic_text_otherwise():
    """Over a real socket: Prometheus' Accept header gets OpenMetrics
    (with the exemplars; gzip too), no Accept header the classic text."""
    assert exposition("")[0] == TEXT
    assert exposition("text/plain;version=0.0.4")[0] == TEXT
    assert exposition(ACCEPT_PROMETHEUS)[0] == OPENMETRICS
    ex, traces, _, runs = _setup()
    _take(traces, runs, PRIMARY)
    ex.publish()
    port = free_port()
    httpd = serve_http(("127.0.0.1", port), ex)
    try:
        h, text = get(port)
        assert h["Content-Type"].startswith("text/plain; version=0.0.4")
        assert "Accept" in h["Vary"]
        assert b"trace_id" not in text
        for _ in range(2):          # the first gzip scrape, then rendered
            h, om = get(port, accept=ACCEPT_PROMETHEUS)
            assert h["Content-Type"].startswith(
                "application/openmetrics-text")
            assert om.endswith(b"# EOF\n")
            got = _exemplars(om)
            assert got and {e.labels["trace_id"] for e in got.values()} \
                == {trace_id(REQ)}
            hz, gz = get(port, gzip=True, accept=ACCEPT_PROMETHEUS)
            assert hz["Content-Encoding"] == "gzip"
            assert gzip.decompress(gz) == om
            ex.publish()
        # both formats, the same figures
        m = parse(text.decode())
        for fam in om_families(om.decode()):
            for s in fam.samples:
                if s.name.endswith("_bucket"):
                    key = (s.name, tuple(sorted(s.labels.items())))
                    assert m[key] == s.value, key
    finally:
        httpd.shutdown()
        httpd.server_close()


def _op(i, ns, role=0):
    """A primary's op `i` (its own request id) that took `ns` in all,
    ending at i ms."""
    end = (i + 1000) * MS
    return dict(PRIMARY, req_tid=i, enq_ns=end - ns, deq_ns=end - ns,
                done_ns=end, msg_ns=0, sub_ns=0, local_ns=0, replies=0,
                role=role)


def test_the_newest_op_of_a_bucket_stays(monkeypatch):
    monkeypatch.setattr("cephlat.livetraces.real_offset_ns",
                        lambda: OFF_NS)
    ex, traces, _, runs = _setup()
    key = (F.STAGE_LATENCY, (("ceph_daemon", "osd.2"), ("op_class",
                                                        "write"),
                             ("stage", "op_total")))
    # 5.0 and 6.0 ms: one bucket (4.096 - 8.192 ms); the later one stays
    _take(traces, runs, _op(1, 5 * MS))
    _take(traces, runs, _op(2, 6 * MS))
    e = _exemplars(_om(ex))[key + (_le(6e-3),)]
    assert e.labels["trace_id"] == trace_id("client.4100.0:2")
    assert e.value == pytest.approx(6e-3)
    # an older op handed over late replaces nothing
    _take(traces, runs, _op(0, 7 * MS))
    e = _exemplars(_om(ex))[key + (_le(6e-3),)]
    assert e.labels["trace_id"] == trace_id("client.4100.0:2")
    # another bucket's op leaves this one's be
    _take(traces, runs, _op(3, 100 * MS))
    got = _exemplars(_om(ex))
    assert got[key + (_le(6e-3),)].labels["trace_id"] == \
        trace_id("client.4100.0:2")
    assert got[key + (_le(0.1),)].labels["trace_id"] == \
        trace_id("client.4100.0:3")


def test_bounded_by_the_series_buckets():
    ex, traces, _, runs = _setup()
    rnd = random.Random(5)
    ops = []
    for i in range(20000):
        ns = int(10 ** rnd.uniform(3, 10.5))     # 1 us to 30 s
        op = _op(i, ns)
        op.update(op_class=rnd.randrange(3), target=rnd.randrange(3),
                  role=rnd.randrange(2), queue_class=rnd.randrange(4),
                  deq_ns=op["done_ns"] - ns // 2,
                  msg_ns=rnd.choice((0, 5000)))
        ops.append(op)
    for i in range(0, len(ops), 500):
        _take(traces, runs, *ops[i:i + 500])    # slot 2: no such run
    with ex.lock:
        n = 0
        for st in ex.osds.values():
            for key, buckets in st.exemplars.items():
                assert key in st.hists         # only series it has
                assert key[0] in F.EXEMPLARS
                assert set(buckets) <= set(range(NBUCKETS))
                n += len(buckets)
        series = sum(len(st.hists) for st in ex.osds.values())
    assert 0 < n <= series * NBUCKETS
    got = _exemplars(_om(ex))
    assert len(got) == n
    # an OSD no longer traced keeps none (its sums stay)
    ex.detached(["osd.2"])
    assert not ex.osds["osd.2"].exemplars
    assert all(dict(k[1])["ceph_daemon"] == "osd.1"
               for k in _exemplars(_om(ex)))
    # an OSD it does not trace gets none
    ex.add_exemplars("osd.9", [(trace_id(REQ), 1.0, op_values(
        dict(PRIMARY), VOCAB))])
    assert "osd.9" not in ex.osds


def test_the_tests_prometheus_keeps_exemplars():
    """tests/promserver.py (the lab tests' real Prometheus): exemplar
    storage on asking, with a flag the installed Prometheus knows (its
    --help: no server started), and the exemplar query API's answer read
    as Prometheus documents it."""
    need(os.access(promserver.PROMETHEUS, os.X_OK),
         "prometheus missing (apt-get install prometheus)")
    p = subprocess.run([promserver.PROMETHEUS, "--help"],
                       capture_output=True, text=True, timeout=60)
    assert "exemplar-storage" in p.stdout + p.stderr
    flag = promserver.EXEMPLAR_STORAGE
    assert flag in promserver.argv("p.yml", "data", 9090, exemplars=True)
    assert flag not in promserver.argv("p.yml", "data", 9090)
    data = [{"seriesLabels": {"__name__": F.STAGE_LATENCY + "_bucket",
                              "ceph_daemon": "osd.2", "le": "0.008192"},
             "exemplars": [{"labels": {"trace_id": trace_id(REQ)},
                            "value": "0.008", "timestamp": 1796355188.5}]}]
    assert promserver.exemplar_list(data) == [(
        data[0]["seriesLabels"],
        [({"trace_id": trace_id(REQ)}, 0.008, 1796355188.5)])]
