"""The exporter's --by: each OSD's ops by key as counters whose series
are bounded (exporter/bykey.py, Exported.add_by): the first K keys get
their own, later ones are summed as other, an idle key's series go and
its place is taken; every kept series and other only grow."""
import types

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cephlat.exporter import families as F
from cephlat.model import breakdown
from cephlat.exporter.bykey import ByKeys, IDLE_S, key_sums, keep_or_other
from cephlat.exporter.collect import Exported


def _series(ex, fam):
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    text = generate_latest(reg).decode()
    name = fam[:-len("_total")]
    out = {}
    for f in text_string_to_metric_families(text):
        if f.name == name:
            for s in f.samples:
                if s.name == fam:
                    out[(s.labels["ceph_daemon"], s.labels["key"])] = s.value
    return out


def _rec(num, enq=0, deq=1000, done=5000, target=0, role=0):
    return {"target": target, "role": role, "req_type": 8, "req_num": num,
            "req_inc": 0, "req_tid": 1, "pg_pool": 3, "pg_seed": 1,
            "object": "", "enq_ns": enq, "deq_ns": deq, "done_ns": done,
            "dequeued": 1, "bytes_in": 4096, "bytes_out": 0}


def test_keys_beyond_the_cap_are_other_and_idle_ones_give_way():
    seen = {}
    assert keep_or_other(seen, "a", 2, 0) == ("a", [])
    assert keep_or_other(seen, "b", 2, 1) == ("b", [])
    assert keep_or_other(seen, "c", 2, 2) == ("other", [])
    assert keep_or_other(seen, "a", 2, 3) == ("a", [])
    # b idle long enough: c takes its place, b's series go
    assert keep_or_other(seen, "c", 2, 1 + IDLE_S) == ("c", ["b"])
    assert set(seen) == {"a", "c"}


def test_hundreds_of_clients_keep_the_series_bounded():
    ex = Exported(1.0, by="client")
    ex.attached("osd.0", ("1", "16.2.15", "pacific", "16.2", "true", ""))
    by = ByKeys("client", top=5)
    runs = [types.SimpleNamespace(name="osd.0")]
    # 300 short-lived clients, one op each, then one of them heavy
    recs = [_rec(4000 + i) for i in range(300)] + [_rec(4000)] * 50
    tracer = types.SimpleNamespace(take_traces=lambda: recs)
    by.take(tracer, runs, ex, 0.0)
    ops = _series(ex, F.OPS_BY_KEY)
    assert len(ops) == 6, ops                       # 5 keys and other
    assert sum(ops.values()) == 350
    # the busiest first: the heavy one has its own series
    assert ops[("osd.0", "client.4000")] == 51
    assert ops[("osd.0", "other")] == 350 - 51 - 4
    secs = _series(ex, F.OP_SECONDS_BY_KEY)
    assert abs(sum(secs.values()) - 350 * 5e-6) < 1e-12
    qw = _series(ex, F.QUEUE_WAIT_BY_KEY)
    assert abs(qw[("osd.0", "client.4000")] - 51 * 1e-6) < 1e-12
    # the bytes each op wrote (and read: none), under the same labels
    assert _series(ex, F.BYTES_IN_BY_KEY) == {k: v * 4096 for k, v in
                                              ops.items()}
    assert set(_series(ex, F.BYTES_OUT_BY_KEY).values()) == {0}
    # a replica op and an op of an OSD not traced count nowhere
    tracer.take_traces = lambda: [_rec(9, role=1), _rec(9, target=3)]
    by.take(tracer, runs, ex, 1.0)
    assert _series(ex, F.OPS_BY_KEY) == ops
    # later: new clients while the first five are idle take their places
    tracer.take_traces = lambda: [_rec(5000 + i) for i in range(7)]
    by.take(tracer, runs, ex, 2.0 + IDLE_S)
    after = _series(ex, F.OPS_BY_KEY)
    assert len(after) == 6, after
    assert after[("osd.0", "other")] == ops[("osd.0", "other")] + 2
    assert ("osd.0", "client.4000") not in after


def test_key_sums_name_the_unknown():
    recs = [_rec(1), dict(_rec(2), req_type=0)]
    got = key_sums(breakdown.TracedOps("client"), recs)
    assert got == {"client.1": (1, 5000, 1000, 4096, 0),
                   "unknown": (1, 5000, 1000, 4096, 0)}


class _Names:
    """A names look-up that hands its lines over once."""

    def __init__(self, *lines):
        self.lines = list(lines)

    def take(self, reader="capture"):
        got, self.lines = self.lines, []
        return got


def _infos(ex):
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    text = generate_latest(reg).decode()
    return {(s.labels["ceph_daemon"], s.labels["key"], s.labels["name"])
            for f in text_string_to_metric_families(text)
            if f.name == F.CLIENT_INFO for s in f.samples}


def test_a_clients_series_keeps_its_key_and_its_name_is_an_info():
    """A client named after its first ops keeps the series it had (the
    key is its entity), its name an info series of its own; a client in
    other has none, and the info goes with the client's series."""
    ex = Exported(1.0, by="client")
    ex.attached("osd.0", ("1", "16.2.15", "pacific", "16.2", "true", ""))
    by = ByKeys("client", top=2)
    runs = [types.SimpleNamespace(name="osd.0")]
    tracer = types.SimpleNamespace(take_traces=lambda: [_rec(4000)] * 3 +
                                   [_rec(4001)] * 2 + [_rec(4002)])
    by.lookup = _Names()
    by.take(tracer, runs, ex, 0.0)
    assert _infos(ex) == set()
    by.lookup = _Names({"clients": {"client.4000": "client.admin",
                                    "client.4002": "client.vm2"}})
    tracer.take_traces = lambda: [_rec(4000)]
    by.take(tracer, runs, ex, 1.0)
    assert _series(ex, F.OPS_BY_KEY) == {("osd.0", "client.4000"): 4,
                                         ("osd.0", "client.4001"): 2,
                                         ("osd.0", "other"): 1}
    # client.4002 counts in other: no info of its own
    assert _infos(ex) == {("osd.0", "client.4000", "client.admin")}
    # both idle: client.4002 takes a place, with its name
    tracer.take_traces = lambda: [_rec(4002)]
    by.take(tracer, runs, ex, 2.0 + IDLE_S)
    assert _infos(ex) == {("osd.0", "client.4002", "client.vm2")}
