"""The exporter's OTLP traces (--otlp) without a lab or root:

- the record the BPF programs write for a chosen op (probes/osdstage.h,
  struct op_trace) is decoded with the layout the build wrote, every
  member of it and nothing else (engine/traces.py), and the spans are
  made from those members only;
- the sample the programs take is model/sample.py's rule: the C source
  computes it with the same constant and shift, and the one-id copy
  (sampled_one, the BPF tier's ground truth) is the bulk one;
- a chosen op's spans (livetraces.py op_request): its trace id is
  the request id's (render/otlp.py trace_id), its ids stable, the ids of
  `osdstage -r --otlp` for the same op's story; the primary's op has the
  client's span (rbdrecord --otlp's) as its parent, and a replica's op,
  made on its own host, its primary's wait for it;
- the sender's queue is bounded: a collector that stalls or refuses
  never makes offer() wait; what does not fit or is refused is dropped
  and counted; a collector that comes back takes spans again;
- the families have series with --otlp only."""
import os
import re
import socket
import time

import numpy as np
import pytest

from conftest import REPO, need
from otlpcollector import Collector, wait_until

from cephlat import abi
from cephlat.engine.traces import decoder
from cephlat.livetraces import op_request
from cephlat.model import vocab as vocabmod
from cephlat.model.sample import _GOLDEN, sampled, sampled_one
from cephlat.render.otlp import (client_span_id, op_span_id,
                                 replica_wait_span_id, story_request,
                                 trace_id)
from cephlat.send.otlp import Sender

BUILD = os.path.join(REPO, "build")
REQ = "client.4100.0:77"


@pytest.fixture(scope="module")
def built():
    need(os.path.exists(os.path.join(BUILD, "osdstage.abi.json")),
         "BPF objects not built (run: make)")
    return abi.load("osdstage", BUILD)


@pytest.fixture(scope="module")
def vocab(built):
    return vocabmod.live(BUILD)


def _raw(built, **v):
    """A struct op_trace's bytes: scalars by name, arrays of u32, the
    object's name."""
    st = built.struct("op_trace")
    arrays = {k: v.pop(k) for k in ("rep_peer", "rep_us") if k in v}
    obj = v.pop("object", "")
    raw = bytearray(st.pack(**v))
    for k, xs in arrays.items():
        m = st.by_name[k]
        raw[m["offset"]:m["offset"] + 4 * len(xs)] = np.array(
            xs, "<u4").tobytes()
    m = st.by_name["object"]
    raw[m["offset"]:m["offset"] + len(obj)] = obj.encode()
    return bytes(raw)


MS = 1000000
PRIMARY = dict(op=0x7f00, req_num=4100, req_tid=77, req_inc=0, src=0,
               enq_ns=10 * MS, deq_ns=10 * MS + 50000, done_ns=18 * MS,
               msg_ns=100000, sub_ns=10 * MS + 300000,
               local_ns=13 * MS, pg_pool=1, pg_seed=8, replies=2,
               rep_peer=[0, 1, 0, 0], rep_us=[4000, 7600, 0, 0],
               last_peer=1, sent_us=0, target=1, role=0, why=0,
               op_class=1, queue_class=0, req_type=8, dequeued=1,
               object="rbd_data.1.0000000000000002")
REPLICA = dict(PRIMARY, op=0x7e00, src=2, enq_ns=5 * MS,
               deq_ns=5 * MS + 20000, done_ns=7 * MS, msg_ns=30000,
               sub_ns=0, local_ns=0, replies=0, rep_peer=[0] * 4,
               rep_us=[0] * 4, last_peer=0, target=0, role=1,
               op_class=2, queue_class=3)


class _Reads(dict):
    """A dict that records the keys read from it."""

    def __init__(self, d):
        super().__init__(d)
        self.read = set()

    def __getitem__(self, k):
        self.read.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.read.add(k)
        return super().get(k, default)


def test_the_record_is_decoded_with_the_builds_layout(built, vocab):
    st = built.struct("op_trace")
    members = {m["name"] for m in st.members}
    ev = decoder(built)(_raw(built, **dict(PRIMARY)))
    assert set(ev) == members          # every member, nothing else
    for k, v in PRIMARY.items():
        assert ev[k] == v, k
    # the spans are made of the record's members alone
    r = _Reads(ev)
    assert op_request(r, "osd.2", 0, vocab) is not None
    assert r.read <= members, r.read - members
    # the header's limits are the arrays' lengths
    assert len(ev["rep_peer"]) == built.const("TRACE_PEERS")
    assert st.by_name["object"]["size"] == built.const("OBJ_NAME_LEN")


def test_the_programs_sample_is_model_samples():
    """The C rule (probes/osdstage/ops.bpf.h trace_op) is model/sample.py's:
    the same constant, tid times it plus num, the high half mod N."""
    src = open(os.path.join(REPO, "probes", "osdstage", "ops.bpf.h")).read()
    const = re.search(r"#define SAMPLE_GOLDEN\s+(0x[0-9A-Fa-f]+)ULL", src)
    assert int(const.group(1), 16) == _GOLDEN
    assert "h = r.tid * SAMPLE_GOLDEN + r.num;" in src
    assert "(h >> 32) % trace_every == 0" in src
    rng = np.random.default_rng(7)
    num = rng.integers(4000, 1 << 40, 3000)
    tid = rng.integers(1, 1 << 62, 3000)
    for every in (1, 3, 100):
        bulk = sampled(num, tid, every)
        assert [sampled_one(int(n), int(t), every)
                for n, t in zip(num, tid)] == bulk.tolist()
    assert not sampled_one(4100, 1, 0)          # 0: no sample


def _spans(body):
    return [s for rs in body["resourceSpans"] for ss in rs["scopeSpans"]
            for s in ss["spans"]]


def _resource(body):
    return {a["key"]: list(a["value"].values())[0]
            for a in body["resourceSpans"][0]["resource"]["attributes"]}


def test_a_chosen_ops_spans(built, vocab):
    dec = decoder(built)
    off = 1796355170 * 10 ** 9            # wall - monotonic
    res = {"host.name": "h3", "ceph.version": "16.2.15", "process.pid": 9}
    body, n = op_request(dec(_raw(built, **dict(PRIMARY))), "osd.2", off,
                         vocab, res)
    again, _ = op_request(dec(_raw(built, **dict(PRIMARY))), "osd.2", off,
                          vocab, res)
    assert body == again                  # ids and all: stable
    spans = _spans(body)
    assert n == len(spans)
    assert {s["traceId"] for s in spans} == {trace_id(REQ)}
    by = {s["name"]: s for s in spans}
    op = by["osd op (primary)"]
    assert op["spanId"] == op_span_id(REQ, "osd.2")
    # its parent: the client's span (rbdrecord --otlp's, or a story's
    # root), derived from the request id alone
    assert op["parentSpanId"] == client_span_id(REQ)
    # from its message's arrival (0.1 ms before the enqueue) to done
    assert int(op["startTimeUnixNano"]) == off + 10 * MS - 100000
    assert int(op["endTimeUnixNano"]) == off + 18 * MS
    assert set(by) == {"osd op (primary)", "queue_wait", "messenger",
                       "execute", "replica_wait osd.0",
                       "replica_wait osd.1", "local_commit"}
    for name, s in by.items():
        if s is not op:
            assert s["parentSpanId"] == op["spanId"], name
    w1 = by["replica_wait osd.1"]
    assert w1["spanId"] == replica_wait_span_id(REQ, "osd.2", "osd.1")
    assert int(w1["startTimeUnixNano"]) == off + 10 * MS + 300000
    assert int(w1["endTimeUnixNano"]) == off + 10 * MS + 300000 + 7600000
    attrs = {a["key"]: list(a["value"].values())[0]
             for a in op["attributes"]}
    assert attrs["ceph.reqid"] == REQ and attrs["ceph.pg"] == "1.8"
    assert attrs["ceph.op_class"] == "write"
    assert attrs["ceph.queue_class"] == "client"
    assert attrs["osdstage.chosen"] == "sample"
    assert attrs["ceph.object"] == PRIMARY["object"]
    ra = _resource(body)
    assert ra["ceph_daemon"] == "osd.2" and ra["host.name"] == "h3"
    assert ra["service.name"] == "ceph-osd"

    # the replica's part, made on its own host: same trace, its parent
    # the primary's wait for it
    rbody, _ = op_request(dec(_raw(built, **dict(REPLICA))), "osd.1", off,
                          vocab)
    rop = next(s for s in _spans(rbody) if s["name"] == "osd op (replica)")
    assert rop["traceId"] == trace_id(REQ)
    assert rop["parentSpanId"] == w1["spanId"]
    assert rop["spanId"] == op_span_id(REQ, "osd.1")
    # not a client's request: nothing
    assert op_request(dict(dec(_raw(built, **dict(PRIMARY))), req_type=4),
                      "osd.2", off, vocab) is None


def test_the_ids_are_those_osdstage_r_otlp_sends(built, vocab):
    """The same op as a story (osdstage -r --otlp): the op, queue wait,
    replica waits and own commit have the same ids, and the replica's
    parent is the same span."""
    dec = decoder(built)
    p, _ = op_request(dec(_raw(built, **dict(PRIMARY))), "osd.2", 0, vocab)
    r, _ = op_request(dec(_raw(built, **dict(REPLICA))), "osd.1", 0, vocab)
    story = {"reqid": REQ, "osds": {
        "osd.2": [{"role": "primary", "enqueued_at_us": 100.0,
                   "enqueue": {"ts": 1.0}, "queue_wait_us": 50.0,
                   "total_us": 8000.0,
                   "replies": [{"peer": "osd.0", "at_us": 4300.0,
                                "wait_us": 4000.0},
                               {"peer": "osd.1", "at_us": 7900.0,
                                "wait_us": 7600.0}],
                   "local_commit_us": 3000.0,
                   "local_commit_wait_us": 2700.0}],
        "osd.1": [{"role": "replica", "enqueued_at_us": 400.0,
                   "queue_wait_us": 20.0, "repop_us": 2000.0}]}}
    s = {(x["name"], x["spanId"], x.get("parentSpanId"))
         for x in _spans(story_request(story))}
    ours = {(x["name"], x["spanId"], x.get("parentSpanId"))
            for x in _spans(p) + _spans(r)
            if x["name"] not in ("messenger", "execute")}
    assert ours <= s, ours - s
    assert len(ours) == 7


def _part(i):
    return [{"resource": {"attributes": []}, "scopeSpans": [
        {"scope": {"name": "t"}, "spans": [{"spanId": "%016x" % i}] * 5}]}]


def test_the_queue_is_bounded_and_never_waits(monkeypatch):
    monkeypatch.setattr(Sender, "BACKOFF_S", 0.05)
    monkeypatch.setattr(Sender, "BACKOFF_MAX_S", 0.1)
    col = Collector()
    snd = Sender(col.traces_url, max_spans=50, batch_spans=20, timeout=0.3).start()
    try:
        # a collector that takes them
        for i in range(4):
            assert snd.offer("osd.0", _part(i), 5)
        assert wait_until(lambda: snd.counts()[0].get("osd.0") == 20)
        assert snd.error is None
        # a collector that stalls: the producer never waits; beyond the
        # bound, dropped and counted; what was sent times out: counted
        col.stall.set()
        t0 = time.monotonic()
        ok = [snd.offer("osd.1", _part(i), 5) for i in range(200)]
        assert time.monotonic() - t0 < 0.5
        assert 0 < sum(ok) <= 14           # the bound, and a batch taken
        sent, dropped = snd.counts()
        assert dropped[("osd.1", "queue_full")] == 5 * ok.count(False)
        assert wait_until(lambda: snd.counts()[1].get(("osd.1", "collector")))
        assert snd.error and "timed out" in snd.error, snd.error
        assert snd.queued() <= 50
        col.stall.clear()
        # it is back: spans flow again
        before = snd.counts()[0].get("osd.1", 0)
        assert wait_until(lambda: snd.queued() == 0)
        snd.offer("osd.1", _part(999), 5)
        assert wait_until(lambda: snd.counts()[0].get("osd.1", 0) > before)
        assert wait_until(lambda: snd.error is None)
    finally:
        snd.stop(1.0)
        col.close()


def test_a_collector_that_is_gone_costs_drops_not_waits(monkeypatch):
    monkeypatch.setattr(Sender, "BACKOFF_S", 0.05)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                   # nobody listens there now
    snd = Sender("http://127.0.0.1:%d/v1/traces" % port, max_spans=30,
                 batch_spans=10, timeout=0.3).start()
    try:
        t0 = time.monotonic()
        for i in range(100):
            snd.offer("osd.2", _part(i), 5)
        assert time.monotonic() - t0 < 0.5
        assert wait_until(lambda: snd.counts()[1].get(("osd.2", "collector")))
        assert "refused" in snd.error.lower(), snd.error
        sent, dropped = snd.counts()
        assert not sent
        assert dropped[("osd.2", "queue_full")] >= 5 * (100 - 6 - 2)
    finally:
        snd.stop(0.5)
    # stopped: nothing is taken any more, all of it counted
    assert not snd.offer("osd.2", _part(0), 5)
    sent, dropped = snd.counts()
    assert sum(dropped.values()) == 505


def test_the_families_have_series_with_otlp_only():
    from cephlat.exporter import families as F
    from cephlat.exporter.collect import Exported
    for otlp in (False, True):
        ex = Exported(1.0, otlp=otlp)
        ex.set_spans({"osd.0": 12}, {("osd.0", "queue_full"): 3})
        # (prometheus_client names a counter's family without _total)
        got = {f.name + ("_total" if f.type == "counter" else ""):
               f.samples for f in ex.collect()}
        if not otlp:
            assert not got[F.OTLP_SPANS_SENT]
            continue
        assert [(s.labels, s.value) for s in got[F.OTLP_SPANS_SENT]] == \
            [({"ceph_daemon": "osd.0"}, 12)]
        assert sorted((s.labels["reason"], s.value)
                      for s in got[F.OTLP_SPANS_DROPPED]) == [
            ("collector", 0), ("queue_full", 3)]
