"""Writes librbd's cache acknowledged before the OSDs had them, read
back and end to end: the cache's records paired, linked to their calls
and ops, summarized; segments that add up to the application's latency
and are never negative, whatever the inputs; the inference without the
cache's records; the verdict's words."""
import numpy as np

from conftest import need  # noqa: F401  (the path set-up)

from cephlat.model.table import NONE  # noqa: E402


def _writes(**kw):
    from cephlat.rbd import cache
    n = len(kw["ts"])
    w = {k: np.zeros(n, np.int64) for k in (
        "completion", "imagectx", "cache", "object_no", "offset", "length",
        "in_flight", "max_dirty", "init_max_dirty", "op_flags")}
    w.update({k: np.asarray(v) for k, v in kw.items()})
    w["state"] = np.array([cache.STATES.index(s) for s in kw["state"]],
                          np.int8)
    return w


def test_cache_writes_pair_in_order_link_and_name_who_let_a_held_go():
    """Two writes of one extent: the first done is the first's; a held
    write is let go by the completion just before its op's send."""
    from cephlat.model.table import Table
    from cephlat.rbd import cache
    w = _writes(ts=[100, 200, 300], completion=[11, 12, 13],
                object_no=[0, 0, 1], offset=[0, 0, 0], length=[4096] * 3,
                cache=[9, 9, 9], max_dirty=[8192] * 3,
                state=["acked", "queued", "through"])
    d = {"ts": np.array([500, 900]), "cache": np.array([9, 9]),
         "object_no": np.array([0, 0]), "offset": np.array([0, 0]),
         "length": np.array([4096, 4096]), "r": np.array([0, -5])}
    cw = cache.table(w, d)
    assert cw.done.tolist() == [500, 900, NONE]
    assert cw.r.tolist() == [0, -5, 0]
    calls = Table(completion=np.array([11, 12, 13, 12], np.uint64),
                  submit=np.array([90, 190, 290, 1000]),
                  done=np.array([150, 520, 800, 1100]))
    cache.link_calls(cw, calls)
    assert cw.call.tolist() == [0, 1, 2]
    ops = Table(send=np.array([110, 505, 310]),
                offset=np.array([0, 0, 0]), length=np.array([4096] * 3))
    op_cw = cache.link_ops(cw, ops, np.array([0, 0, 1]))
    assert op_cw.tolist() == [0, 1, 2]
    cache.releases(cw, op_cw, ops.send)
    assert cw.release.tolist() == [110, 505, 310]
    assert cw.held_by.tolist() == [-1, 0, -1]


def _inputs(n, rng, acked=None, recorded=True):
    """Random segment inputs on two clocks that may disagree, events in
    any order: what a wrong link or a skewed host can hand the model."""
    t0 = 10 ** 12
    sub = t0 + rng.integers(0, 10 ** 6, n)
    pts = {k: sub + rng.integers(-2000, 400000, n) for k in (
        "send", "reply", "done", "first", "enq", "osd_done", "call_done",
        "released", "cw_ts", "cw_release", "cw_done")}
    t = dict(pts, submit=sub, write=rng.random(n) < 0.7)
    for k in ("first", "released", "cw_release", "cw_done"):
        t[k] = np.where(rng.random(n) < 0.2, NONE, t[k])
    t["cw_early"] = rng.integers(-1, 2, n) if recorded else \
        np.full(n, -1)
    if acked is not None:
        t["cw_early"] = np.full(n, acked)
    t["cw_held"] = rng.random(n) < 0.3
    t["cw_ts"] = np.where(t["cw_early"] < 0, NONE, t["cw_ts"])
    return t


def test_no_segment_is_ever_negative():
    from cephlat.model.e2e import segment_columns, segment_table
    rng = np.random.default_rng(7)
    for recorded in (True, False):
        seg = segment_columns(_inputs(5000, rng, recorded=recorded))
        for g in ("", "acked_", "behind_"):
            us, unk = seg[g + "us"], seg[g + "unknown"]
            assert not (us[~unk] < 0).any(), g
        for rows, group in ((~seg["acked"], "path"),
                            (seg["acked"], "acked"),
                            (seg["acked"], "behind")):
            t = segment_table(seg, rows, group)
            assert t["ops"] + t["unknown"] + t["out_of_order"] == rows.sum()
            for s in t["segments"]:
                assert s["p50_us"] >= 0 and s["mean_us"] >= 0, (group, s)


def test_acked_segments_add_up_to_the_applications_latency():
    """A write the cache held: submit 0, taken 10, let go 60 (its op's
    send), acked 80, released 90; the reply 400, the cache's done 410."""
    from cephlat.model.e2e import segment_columns

    def a(v):
        return np.array([v], np.int64)
    t = {"submit": a(0), "cw_ts": a(10_000), "cw_release": a(60_000),
         "send": a(60_000), "call_done": a(80_000), "released": a(90_000),
         "first": a(100_000), "enq": a(110_000), "osd_done": a(390_000),
         "reply": a(400_000), "cw_done": a(410_000), "done": a(420_000),
         "write": np.array([True]), "cw_early": a(1),
         "cw_held": np.array([True])}
    seg = segment_columns(t)
    assert seg["acked"][0] and not seg["inferred"][0]
    assert seg["acked_us"][0].tolist() == [10.0, 50.0, 20.0, 10.0]
    assert seg["total_us"][0] == 90.0 == seg["acked_us"][0].sum()
    assert np.isnan(seg["us"][0]).all()
    b = seg["behind_us"][0]
    assert b.tolist() == [320.0, 410.0, 0.0, 40.0, 10.0, 280.0, 10.0, 10.0]
    # durable: the call to the cache's done, along the way it went
    assert b[1] == seg["acked_us"][0][:2].sum() + b[2:].sum()
    # not held: taken 10, sent 60 -> 50 in the client's queue
    t["cw_held"] = np.array([False])
    b = segment_columns(t)["behind_us"][0]
    assert b[2] == 50.0 and b[1] == 10.0 + b[2:].sum()


def test_without_cache_records_an_early_ack_is_inferred():
    """The call completed before its op's reply: acked early, inferred;
    a read that does the same is out of order, never negative."""
    from cephlat.model.e2e import segment_columns, segment_table

    def a(*v):
        return np.array(v, np.int64)
    t = {"submit": a(0, 0), "send": a(10_000, 10_000),
         "call_done": a(50_000, 50_000), "released": a(NONE, NONE),
         "first": a(NONE, NONE), "enq": a(100_000, 100_000),
         "osd_done": a(200_000, 200_000), "reply": a(300_000, 300_000),
         "done": a(310_000, 310_000), "write": np.array([True, False])}
    seg = segment_columns(t)
    assert seg["acked"].tolist() == [True, False]
    assert seg["inferred"].tolist() == [True, False]
    assert seg["acked_us"][0, :3].tolist()[0] == 10.0
    assert seg["behind_us"][0, 0] == 250.0
    assert seg["order"].tolist() == [False, True]
    t2 = segment_table(seg, np.array([False, True]))
    assert t2["ops"] == 0 and t2["out_of_order"] == 1


def _view(**kw):
    v = {"ops": 100, "inferred": 0, "in_flight_bytes": None,
         "limit_bytes": None, "writes_in_flight": None, "held": 0,
         "held_pct": 0.0, "held_us": None, "held_by": {},
         "calls_in_flight": None, "per_osd_in_flight": {},
         "behind": {"segments": [{"segment": "behind", "p50_us": 300.0,
                                  "p99_us": 900.0}]}}
    v.update(kw)
    return v


def _rep(name, last, way, own, oway, oown):
    return {"verdict": {"replica": name, "last_pct": last,
                        "way_p50_us": way, "replica_p50_us": own,
                        "others_way_p50_us": oway,
                        "others_replica_p50_us": oown,
                        "words": "%s was the last" % name}}


def test_verdict_says_the_writes_outran_the_cluster_in_a_flood():
    from cephlat.model.cacheview import verdict
    flood = _view(writes_in_flight={"p50": 40, "p99": 60, "max": 64},
                  calls_in_flight={"p50": 3, "p99": 8, "max": 8},
                  per_osd_in_flight={"osd.0": 20, "osd.1": 18})
    v = verdict(flood, {"verdict": {"replica": None, "words": "x"}})
    assert v["cause"] == "outran" and v["replica"] is None
    assert "outran the cluster" in v["words"]
    assert "3 calls in flight" in v["words"]
    assert "not one slow replica" in v["words"]
    # a replica last of 98 % at 1.5 times the others: not out of the queue
    v = verdict(flood, _rep("osd.2", 98.0, 300.0, 300.0, 200.0, 200.0))
    assert v["cause"] == "outran" and v["replica"] is None
    assert "osd.2" not in v["words"]
    # last of 98 % at 3 times the others: named
    v = verdict(flood, _rep("osd.2", 98.0, 900.0, 300.0, 200.0, 200.0))
    assert v["replica"] == "osd.2"
    assert "one stands out of it: osd.2 was the last" in v["words"]
    assert "not one slow replica" not in v["words"]
    # the application kept as many in flight as went to the OSDs: no flood
    for calm in (dict(flood, calls_in_flight={"p50": 40, "p99": 60,
                                              "max": 64}),
                 dict(flood, per_osd_in_flight={"osd.0": 39, "osd.1": 1}),
                 dict(flood, writes_in_flight={"p50": 4, "p99": 4,
                                               "max": 4})):
        assert verdict(calm, None)["cause"] == "behind"
    held = dict(flood, writes_in_flight={"p50": 4, "p99": 4, "max": 4},
                limit_bytes=16384, held=10, held_pct=10.0,
                held_us={"p50": 50.0, "p99": 80.0, "max": 90.0})
    v = verdict(held, _rep("osd.1", 99.0, 600.0, 200.0, 300.0, 200.0))
    assert v["cause"] == "behind" and v["replica"] == "osd.1"
    assert "300.0 us after it at p50" in v["words"]
    assert "the cache's limit held the client: 10 % of the writes waited " \
        "50.0 us" in v["words"]
    assert "(rbd_cache_max_dirty 16384 bytes)" in v["words"]
    assert "of the replicas, osd.1 was the last" in v["words"]


def test_ops_find_their_cache_write_behind_a_long_object_queue():
    """An object's writes held below the cache, sent one op at a
    time long after dozens more were taken, two merged into one op: each
    op finds the earliest write within its extent not done before it."""
    from cephlat.model.table import Table
    from cephlat.rbd import cache
    n = 60
    ts = np.arange(n) * 10
    w = _writes(ts=ts, completion=np.arange(n) + 1,
                object_no=np.zeros(n, np.int64),
                offset=np.arange(n) * 8192, length=[4096] * n,
                cache=[9] * n, state=["acked"] * n)
    w["offset"][31] = w["offset"][30] + 4096    # merged with write 30
    d = {"ts": 10_000 + np.arange(n) * 100, "cache": np.full(n, 9),
         "object_no": np.zeros(n, np.int64), "offset": w["offset"],
         "length": np.full(n, 4096), "r": np.zeros(n)}
    cw = cache.table(w, d)
    keep = [i for i in range(n) if i != 31]
    send = np.array([9_950 + i * 100 for i in keep])
    off = np.array([w["offset"][i] for i in keep])
    ln = np.array([8192 if i == 30 else 4096 for i in keep])
    ops = Table(send=send, offset=off, length=ln)
    got = cache.link_ops(cw, ops, np.zeros(len(keep), np.int64))
    assert got.tolist() == keep


def test_flushes_time_the_calls_and_the_writes_they_waited_for():
    from cephlat.model.cacheview import flushes
    from cephlat.model.table import Table
    from cephlat.rbd.columns import CALL_OPS
    fl, wr = CALL_OPS.index("flush"), CALL_OPS.index("write")
    calls = Table(op=np.array([wr, fl, fl], np.int8),
                  submit=np.array([0, 1000, 50_000]),
                  done=np.array([10, 21_000, 60_000]))
    cl = {"calls": calls, "send": np.array([500, 1500, 30_000, 55_000]),
          "reply": np.array([2500, 9500, 31_000, 58_000]),
          "call_ops": CALL_OPS}
    f = flushes(cl, np.arange(4))
    assert f["calls"] == 2 and f["writes"] == 2 and f["of"] == 4
    assert f["lat_us"]["max"] == 20.0
    assert f["write_us"]["max"] == 8.0


def test_summary_counts_the_cache_per_image():
    from cephlat.rbd import cache, cachesummary
    from cephlat.model.table import Table

    class CC:
        pass
    cc = CC()
    w = _writes(ts=[100, 200, 300, 50], completion=[11, 12, 13, 14],
                object_no=[0, 0, 1, 2], offset=[0] * 4, length=[4096] * 4,
                cache=[9] * 4, imagectx=[5] * 4, max_dirty=[8192] * 3 + [0],
                in_flight=[0, 8192, 0, 0],
                state=["acked", "queued", "acked", "through"])
    d = {"ts": np.array([500, 900]), "cache": np.array([9, 9]),
         "object_no": np.array([0, 0]), "offset": np.array([0, 0]),
         "length": np.array([4096, 4096]), "r": np.array([0, 0])}
    cc.cache = cache.table(w, d)
    cc.calls = Table(completion=np.array([14, 11, 12, 13], np.uint64),
                     submit=np.array([40, 90, 190, 290]),
                     done=np.array([60, 150, 520, 800]))
    cache.link_calls(cc.cache, cc.calls)
    # rows in the order taken: through 50, acked 100, queued 200, acked 300
    cc.cache.cols["release"] = np.array([52, 110, 505, 310])
    s = cachesummary._image(cc, np.arange(4), cc.calls)
    assert s["policy"] == "writearound"
    assert (s["acked_early"], s["written_through"], s["held"]) == (3, 1, 1)
    assert s["held_us"]["p50"] == 0.3
    # done - call done: 500 - 150 and 900 - 520 ns; the last never done
    assert s["behind_us"]["p50"] == 0.4 and s["behind_us"]["max"] == 0.4


def test_writeback_calls_have_no_op_of_their_own():
    """writeback: the ObjectCacher acknowledged the call from its memory;
    the op that wrote its data back is the cache's, even when it was sent
    while the call was still running and covers its extent."""
    from types import SimpleNamespace
    from cephlat.ceph import objecter
    from cephlat.model.table import Table
    from cephlat.rbd import cache
    from cephlat.rbd.link import link_cache
    w = _writes(ts=[100, 200], completion=[11, 12], object_no=[0, 0],
                offset=[0, 8192], length=[4096, 4096], cache=[9, 9],
                state=["writeback", "acked"])
    cw = cache.table(w, {k: np.zeros(0, np.int64) for k in
                         ("ts", "cache", "object_no", "offset", "length",
                          "r")})
    cw.cols["call"] = np.array([0, 1])
    # both ops linked to their call by extent and time
    ops = Table(obj=np.array([0, 0]), send=np.array([150, 250]),
                offset=np.array([0, 8192]), length=np.array([4096, 4096]),
                flags=np.full(2, objecter.FLAG_WRITE, np.int64),
                request=np.array([0, 1], np.int32))
    cc = SimpleNamespace(ops=ops, cache=cw, objects=SimpleNamespace(
        names=["rbd_data.abc.0000000000000000"]))
    link_cache(cc)
    assert ops.cw.tolist() == [-1, 1]
    assert ops.request.tolist() == [-1, 1]


def test_one_ops_story_has_the_acked_segments():
    """--op of a write the cache acknowledged: its story's segments are
    the application's part and what went on behind it, never the path
    of a write acked after the OSDs (whose completion would be
    negative)."""
    from cephlat.model.e2e import client_segments
    c = {"send": 60_000, "reply": 400_000, "done": 420_000, "write": True,
         "call": {"submit": 0, "done": 80_000, "released": 90_000},
         "cache": {"cw_early": 1, "cw_ts": 10_000, "cw_held": 1,
                   "cw_release": 60_000, "cw_done": 410_000}}
    got = client_segments(c, 110_000, 100_000, 390_000)
    assert got["acked"] == "acked"
    seg = {s["segment"]: s["us"] for s in got["segments"]}
    assert [s["group"] for s in got["segments"]][:4] == ["acked"] * 4
    assert seg["held_by_cache"] == 50.0 and seg["behind"] == 320.0
    assert got["total_us"] == 90.0
    assert all(v is None or v >= 0 for v in seg.values())
    c["write"] = False        # a read: the path, not acked
    c.pop("cache")
    assert client_segments(c, 110_000, 100_000, 390_000)["acked"] is None


def test_flushes_of_a_writeback_client_that_never_flushed():
    from cephlat.model.cacheview import flushes
    from cephlat.model.table import Table
    from cephlat.rbd.columns import CALL_OPS
    calls = Table(op=np.array([CALL_OPS.index("write")], np.int8),
                  submit=np.array([0]), done=np.array([10]))
    f = flushes({"calls": calls, "send": np.array([500, 900]),
                 "reply": np.array([2500, 1900]), "call_ops": CALL_OPS},
                np.arange(2))
    assert f["calls"] == 0 and f["writes"] == 0 and f["lat_us"] is None
    assert f["write_us"]["max"] == 2.0
