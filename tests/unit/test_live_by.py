"""A live run's --by: each report's completed client ops of each OSD from
the records the programs hand over at each op's end (cli/liveby.py),
broken down as -r --by breaks a window's down."""
import types

import jsonschema

from cephlat.cli.liveby import LiveBy
from cephlat.model.schema import schema


def _rec(target, num, obj, enq, deq, done, role=0, req_type=8, pool=3,
         seed=0x1a, dequeued=1, bytes_in=4096, bytes_out=0):
    return {"target": target, "role": role, "req_type": req_type,
            "req_num": num, "req_inc": 0, "req_tid": 1, "pg_pool": pool,
            "pg_seed": seed, "object": obj, "enq_ns": enq, "deq_ns": deq,
            "done_ns": done, "dequeued": dequeued, "bytes_in": bytes_in,
            "bytes_out": bytes_out}


class _Tracer:
    def __init__(self, batches):
        self.batches = list(batches)

    def take_traces(self):
        return self.batches.pop(0) if self.batches else []


class _Lookup:
    def __init__(self, got):
        self.got = got

    def take(self, reader="capture"):
        got, self.got = self.got, None
        return [got] if got is not None else []


def _iv():
    return types.SimpleNamespace(record={"type": "interval"}, by=None)


def _snap(full):
    return types.SimpleNamespace(counters={"trace_ring_full": full})


def test_each_report_has_its_own_ops_by_key():
    heavy = "rbd_data.abc123.0000000000000001"
    light = "rbd_data.def456.0000000000000002"
    first = [_rec(0, 4100, heavy, 0, 1000, 5000 + i) for i in range(8)] + \
        [_rec(0, 4200, light, 0, 100, 2000),
         _rec(0, 4100, heavy, 0, 0, 3000, role=1),   # a replica op
         _rec(1, 4300, light, 0, 10, 900)]           # the other OSD
    tracer = _Tracer([first[:5], first[5:], []])
    by = LiveBy("image", None, 2, _Lookup({"images": {"abc123": "vm-17"},
                                           "pools": {"3": "rbd"}}))
    by.take(tracer)                 # a turn of the loop
    ivs = [_iv(), _iv()]
    by.add(tracer, ivs, [_snap(7), _snap(0)], [_snap(5), _snap(0)])
    bd = ivs[0].by
    assert bd.ops == 9
    assert [(r["key"], r["ops"]) for r in bd.rows] == [("vm-17", 8),
                                                       ("def456", 1)]
    # each op's bytes, from its record
    assert [(r["bytes_in"], r["bytes_out"]) for r in bd.rows] == [
        (8 * 4096, 0), (4096, 0)]
    assert bd.dominant["key"] == "vm-17"
    # queue waits from the dequeue: 8 x 1000 + 100
    assert bd.queue_wait_ns == 8100
    assert ivs[0].record["by"]["missed"] == 2
    assert ivs[1].by.ops == 1 and ivs[1].record["by"]["missed"] == 0
    # the report format's "by", with what was missed
    jsonschema.validate(ivs[0].record["by"], {"$defs": schema()["$defs"],
                                              "$ref": "#/$defs/by"})
    # the next report starts afresh
    ivs = [_iv(), _iv()]
    by.add(tracer, ivs, [_snap(7), _snap(0)], [_snap(7), _snap(0)])
    assert ivs[0].by.ops == 0 and ivs[0].record["by"]["rows"] == []


def test_by_client_and_pool_and_pg():
    recs = [_rec(0, 4100, "", 0, 10, 100), _rec(0, 4100, "", 0, 10, 100),
            _rec(0, 0, "", 0, 10, 100, req_type=0, pool=0, seed=0,
                 dequeued=0)]
    for kind, want in (("client", [("client.4100", 2), ("unknown", 1)]),
                       ("pool", [("rbd", 2), ("unknown", 1)]),
                       ("pg", [("3.1a", 2), ("unknown", 1)])):
        by = LiveBy(kind, 5, 1, _Lookup({"pools": {"3": "rbd"}}))
        ivs = [_iv()]
        by.add(_Tracer([recs]), ivs, [_snap(0)], [_snap(0)])
        assert [(r["key"], r["ops"]) for r in ivs[0].by.rows] == want, kind
        # the op never dequeued has no queue wait
        assert ivs[0].by.queue_wait_ns == 20
