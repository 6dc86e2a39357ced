"""End to end without a cluster: the segments of one op add up to its
latency and never show a negative network time; the table's percentiles
and tail; rbdrecord's reader links OSD ops to their librbd calls by
object number, extent and time, finding the object size."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))

from cephlat.model import e2e                            # noqa: E402

MS = 1000000


def _client(send, reply, done, call=None):
    return {"send": send, "reply": reply, "done": done, "call": call}


def test_segments_add_up_to_the_call():
    c = _client(10 * MS, 20 * MS, 20 * MS + 50000,
                call={"submit": 9 * MS, "done": 20 * MS + 90000})
    got = e2e.client_segments(c, enq_ns=12 * MS, first_stamp_ns=11 * MS,
                              done_ns=18 * MS)
    segs = [(g["segment"], g["us"]) for g in got["segments"]]
    assert segs == [("librbd", 1000.0), ("to_osd", 1000.0),
                    ("messenger", 1000.0), ("osd", 6000.0),
                    ("to_client", 2000.0), ("completion", 50.0),
                    ("librbd_done", 40.0)]
    assert got["total_us"] == 11090.0 == sum(u for _, u in segs)
    assert got["clock_disagreement_us"] is None


def test_the_applications_own_time_after_the_callback():
    # fio takes the result (rbd_aio_release) when it reaps: after the
    # callback, and its latency ends there
    c = _client(10 * MS, 20 * MS, 20 * MS + 50000,
                call={"submit": 9 * MS, "done": 20 * MS + 90000,
                      "released": 20 * MS + 390000})
    got = e2e.client_segments(c, enq_ns=12 * MS, first_stamp_ns=11 * MS,
                              done_ns=18 * MS)
    by = {g["segment"]: g["us"] for g in got["segments"]}
    assert list(by)[-2:] == ["librbd_done", "application"]
    assert by["application"] == 300.0
    assert got["total_us"] == 11390.0 == round(sum(by.values()), 1)


def test_a_call_done_before_the_objecters_handler_returned():
    # librbd completes the call (and the application reads its result)
    # on another thread while the Objecter's handler is still returning:
    # the op's completion ends at the call's end, librbd_done is 0, no
    # segment is negative and they still add up
    c = _client(10 * MS, 20 * MS, 20 * MS + 500000,
                call={"submit": 9 * MS, "done": 20 * MS + 70000})
    got = e2e.client_segments(c, enq_ns=12 * MS, first_stamp_ns=11 * MS,
                              done_ns=18 * MS)
    by = {g["segment"]: g["us"] for g in got["segments"]}
    assert by["completion"] == 70.0 and by["librbd_done"] == 0.0
    assert all(v >= 0 for v in by.values())
    assert got["total_us"] == 11070.0 == sum(by.values())


def test_without_stamps_or_call():
    c = _client(10 * MS, 20 * MS, 20 * MS + 50000)
    got = e2e.client_segments(c, 12 * MS, None, 18 * MS)
    assert [g["segment"] for g in got["segments"]] == [
        "to_osd", "osd", "to_client", "completion"]
    assert "no message stamps" in got["segments"][0]["what"]
    assert got["total_us"] == 10050.0


def test_a_negative_network_time_is_unknown_with_the_disagreement():
    # the primary's clock runs 3 ms ahead of the client's
    c = _client(10 * MS, 20 * MS, 20 * MS + 50000)
    got = e2e.client_segments(c, 12 * MS + 3 * MS, None, 18 * MS + 3 * MS)
    by = {g["segment"]: g["us"] for g in got["segments"]}
    assert by["to_osd"] == 5000.0 and by["to_client"] is None
    assert got["clock_disagreement_us"] == 1000.0
    assert all(v is None or v >= 0 for v in by.values())


def test_table_percentiles_and_where_the_tail_went():
    per = []
    for i in range(100):
        slow = i >= 98           # the two slowest: their time in "osd"
        c = _client(0, (10 if slow else 3) * MS, (10 if slow else 3) * MS)
        per.append(e2e.client_segments(c, MS, None,
                                       (9 if slow else 2) * MS))
    t = e2e.table(per)
    by = {g["segment"]: g for g in t["segments"]}
    assert t["ops"] == 100 and t["unknown"] == 0 and t["p99_ops"] == 2
    assert by["total"]["p50_us"] == 3000.0
    assert by["total"]["p99_us"] == 10000.0
    assert by["osd"]["p99_ops_mean_us"] == 8000.0
    assert by["to_osd"]["p99_ops_mean_us"] == 1000.0
    assert abs(sum(g["mean_us"] for k, g in by.items() if k != "total") -
               by["total"]["mean_us"]) < 0.5


def test_table_leaves_out_ops_with_unknown_segments():
    good = e2e.client_segments(_client(0, 3 * MS, 3 * MS), MS, None, 2 * MS)
    bad = e2e.client_segments(_client(0, 3 * MS, 3 * MS), 4 * MS, None,
                              5 * MS)
    t = e2e.table([good, bad])
    assert (t["ops"], t["unknown"]) == (1, 1)


def test_replica_segments_sum_to_the_primarys_wait():
    story = {"osds": {
        "osd.1": [{"role": "primary", "enqueued_at_us": 100.0, "replies": [
            {"peer": "osd.0", "at_us": 900.0, "wait_us": 800.0},
            {"peer": "osd.2", "at_us": 1500.0, "wait_us": 1400.0}]}],
        "osd.0": [{"role": "replica", "enqueued_at_us": 500.0,
                   "repop_us": 300.0}],
        "osd.2": [{"role": "replica", "enqueued_at_us": 700.0,
                   "repop_us": 200.0}]}}
    got = {r["replica"]: r for r in e2e.replica_segments(story)}
    assert got["osd.0"]["out_us"] == 300.0     # sent at +200
    assert got["osd.0"]["back_us"] == 200.0
    assert got["osd.2"]["last"] and not got["osd.0"]["last"]
    for r in got.values():
        assert r["out_us"] + r["replica_us"] + r["back_us"] == r["wait_us"]


def _ec_story(enq0, within):
    """An erasure-coded write on osd.1: its mark after the sends at +200
    (the sends up to `within` us before it), osd.0's shard enqueued at
    `enq0`, osd.2's at +700."""
    return {"osds": {
        "osd.1": [{"role": "primary", "enqueued_at_us": 100.0,
                   "sent_within_us": within, "replies": [
                       {"peer": "osd.0", "at_us": 900.0, "wait_us": 800.0},
                       {"peer": "osd.2", "at_us": 1500.0,
                        "wait_us": 1400.0}]}],
        "osd.0": [{"role": "replica", "enqueued_at_us": enq0,
                   "repop_us": 300.0}],
        "osd.2": [{"role": "replica", "enqueued_at_us": 700.0,
                   "repop_us": 200.0}]}}


def test_a_shard_enqueued_before_the_mark_has_no_way_out():
    # the primary was preempted after sending: osd.0 had its sub-write
    # 50 us before the mark, within the 80 us the sends can lie before it
    got = {r["replica"]: r for r in
           e2e.replica_segments(_ec_story(150.0, 80.0))}
    r = got["osd.0"]
    assert r["out_us"] is None and r["sent_late_us"] == 50.0
    assert (r["replica_us"], r["back_us"]) == (300.0, 550.0)
    assert "clock_disagreement_us" not in r
    assert got["osd.2"]["out_us"] == 500.0
    # further back than the sends can lie: the clocks disagree
    r = {r["replica"]: r for r in
         e2e.replica_segments(_ec_story(150.0, 40.0))}["osd.0"]
    assert r["out_us"] is None and r["clock_disagreement_us"] == 50.0
    assert "sent_late_us" not in r and r["back_us"] is None
    # a replicated write (no sent_within_us): the same
    story = _ec_story(150.0, 80.0)
    del story["osds"]["osd.1"][0]["sent_within_us"]
    r = {r["replica"]: r for r in e2e.replica_segments(story)}["osd.0"]
    assert r["clock_disagreement_us"] == 50.0


def test_the_tables_rows_tell_late_sends_from_clocks():
    import numpy as np
    us = 1000
    # sent (mark) at 200 us, seen at 1000 us: enqueued 50 us before the
    # mark with the sends up to 80 us before it, then up to 40 us
    a = (lambda *v: np.array(v, np.int64))
    reps = {"j": a(1, 2, 3), "osd": a(0, 0, 0),
            "enq": a(150 * us, 150 * us, 400 * us),
            "repop": a(300 * us, 300 * us, 300 * us)}
    rows = {"j": a(1, 2, 3, 4), "peer": a(0, 0, 0, 0),
            "wait": a(800 * us, 800 * us, 800 * us, 800 * us),
            "seen": a(1000 * us, 1000 * us, 1000 * us, 1000 * us),
            "within": a(80 * us, 40 * us, 0, 0),
            "last": np.ones(4, bool)}
    cols, unknown, late = e2e.replica_ways(rows, reps)
    assert (unknown, late) == (1, 1)
    # op 4: no replica's op in the captures (its way is not known)
    assert [None if np.isnan(x) else x for x in cols["out_us"]] == [
        None, None, 200.0, None]
    assert cols["back_us"][2] == 300.0 and cols["replica_us"][2] == 300.0
    assert cols["names"] == ["osd.0"] and cols["wait_us"][0] == 800.0


def _trace(tmp_path, order, calls, ops):
    """An rbdrecord trace of `calls` [(off, len, submit, done)] and OSD
    `ops` [(objno, off_in_object, len, send)] on objects of 2**order."""
    pytest.importorskip("bt2")
    from cephlat.rbd import events
    w = events.open_trace(str(tmp_path / "t"), {"pid": 1}, 0)
    ctx = (1, 1, 1)
    evs = []
    for i, (off, ln, sub, done) in enumerate(calls):
        comp = 0x1000 + i
        evs.append((sub, "librbd:aio_write_enter", (
            1, "img", "", 0, off, ln, 0, 0, ln, comp)))
        evs.append((done, "librbd:aio_complete_enter", (comp, 0)))
    for i, (no, eoff, ln, send) in enumerate(ops):
        rid = "client.9.0:%d" % (i + 1)
        evs.append((send, "rbdrecord:osd_op_send", (
            rid, 9, 0, i + 1, 0, 1, 0, "1.0",
            "rbd_data.ab12.%016x" % no, 30, 0x20, 0, 1, 0x2201, "write",
            eoff, ln)))
        evs.append((send + 10, "rbdrecord:osd_op_reply",
                    (rid, 9, 0, i + 1, 0)))
        evs.append((send + 20, "rbdrecord:osd_op_done",
                    (rid, 9, 0, i + 1, 0)))
    for ts, name, vals in sorted(evs, key=lambda e: e[0]):
        w.write(name, ts, *vals, ctx=ctx)
    w.close()
    from cephlat.rbd.reader import RbdTrace
    return RbdTrace(str(tmp_path / "t"))


def test_reader_links_ops_to_calls_and_finds_the_object_size(tmp_path):
    # 8-MiB objects (order 23): two calls in flight, each one op; a call
    # spanning two objects has two
    o = 1 << 23
    calls = [(3 * o + 4096, 4096, 100, 900),
             (5 * o + 8192, 8192, 200, 800),
             (2 * o - 4096, 8192, 300, 1000)]
    ops = [(5, 8192, 8192, 250), (3, 4096, 4096, 150),
           (1, o - 4096, 4096, 350), (2, 0, 4096, 360),
           (7, 0, 4096, 950)]            # no call in flight holds it
    tr = _trace(tmp_path, 23, calls, ops)
    assert tr.order == 23
    by = {(r.off, r.len): sorted(int(x.reqid.rsplit(":", 1)[1])
                                 for x in r.osd_ops) for r in tr.requests}
    assert by == {(3 * o + 4096, 4096): [2], (5 * o + 8192, 8192): [1],
                  (2 * o - 4096, 8192): [3, 4]}
    assert tr.osd_ops["client.9.0:5"].request is None


def _rows(slow, n=100, slow_back=6000.0):
    """Writes to replicas osd.0 .. osd.2, two each; `slow`'s way back
    takes slow_back us."""
    rows = []
    for i in range(n):
        pair = [("osd.0", "osd.1"), ("osd.1", "osd.2"),
                ("osd.0", "osd.2")][i % 3]
        got = []
        for name in pair:
            back = slow_back if name == slow else 1000.0
            got.append({"req": "client.1.0:%d" % i, "replica": name,
                        "out_us": 1000.0,
                        "replica_us": 400.0, "back_us": back,
                        "wait_us": 1400.0 + back})
        last = max(got, key=lambda r: r["wait_us"] + (i % 2) * (
            r["replica"] == pair[1]))
        for r in got:
            r["last"] = r is last
        rows += got
    return rows


def test_replica_table_names_the_slow_replica_and_the_network():
    t = e2e.replica_table(_rows("osd.2"))
    v = t["verdict"]
    assert v["replica"] == "osd.2" and v["cause"] == "network", v
    assert v["last_pct"] == 100.0
    assert t["replicas"]["osd.2"]["back_p50_us"] == 6000.0
    assert "the time went to the network, not to its queue" in v["words"]


def test_a_slow_primary_host_is_not_counted_against_the_others():
    # osd.2's host is slow both ways: as a replica its way is slow, and
    # as the primary of most writes it slows the way of the replicas it
    # sends to. Compared write by write, osd.2 still stands out
    rows = []
    for i in range(120):
        prim, pair = [("osd.2", ("osd.0", "osd.1")),
                      ("osd.2", ("osd.0", "osd.1")),
                      ("osd.0", ("osd.1", "osd.2"))][i % 3]
        got = []
        for name in pair:
            slow = prim == "osd.2" or name == "osd.2"
            back = 6000.0 if slow else 1000.0
            got.append({"req": "client.1.0:%d" % i, "replica": name,
                        "out_us": 6000.0 if slow else 1000.0,
                        "replica_us": 400.0, "back_us": back,
                        "wait_us": 1400.0 + back + (name == "osd.2")})
        last = max(got, key=lambda r: r["wait_us"] + (i % 2) * (
            r["replica"] == pair[1]))
        for r in got:
            r["last"] = r is last
        rows += got
    t = e2e.replica_table(rows)
    assert t["replicas"]["osd.0"]["way_p50_us"] == 12000.0    # confounded
    v = t["verdict"]
    assert v["replica"] == "osd.2" and v["cause"] == "network", v
    assert v["others_way_p50_us"] == 2000.0 and v["way_p50_us"] == 12000.0


def test_replica_table_names_no_one_when_none_is_slow():
    v = e2e.replica_table(_rows(None))["verdict"]
    assert v["replica"] is None and "no replica held" in v["words"]


def _queued_rows(slow, n=300):
    """Writes to two of osd.0 .. osd.2 each, under load: both replicas of
    a write queue for the same 10 to 40 ms (the waves of a flood, shared
    by every OSD), each adds up to 10 ms of its own; `slow`'s link adds
    3 ms to its way back."""
    import random
    rnd = random.Random(5)
    rows = []
    for i in range(n):
        pair = [("osd.0", "osd.1"), ("osd.1", "osd.2"),
                ("osd.0", "osd.2")][i % 3]
        queue = rnd.uniform(10000.0, 40000.0)
        got = []
        for name in pair:
            back = 1000.0 + 3000.0 * (name == slow)
            own = queue + rnd.uniform(0.0, 10000.0)
            got.append({"req": "client.1.0:%d" % i, "replica": name,
                        "out_us": 1000.0, "replica_us": own,
                        "back_us": back, "wait_us": 1000.0 + own + back})
        last = max(got, key=lambda r: r["wait_us"])
        for r in got:
            r["last"] = r is last
        rows += got
    return rows


def test_a_slow_link_is_named_when_queues_outgrow_it():
    """A 3-ms slower link under queues of tens of ms: its replica is the
    last of most (not all) of its writes and takes well under 1.2 times
    the others' whole time, but its way there and back is theirs plus the
    link's delay: the link is named. The same queues without the slow
    link name no one."""
    t = e2e.replica_table(_queued_rows("osd.1"))
    v = t["verdict"]
    assert e2e.SLOW_LINK_LAST_PCT <= t["replicas"]["osd.1"]["last_pct"] < 90, t
    whole = (v["way_p50_us"] + v["replica_p50_us"]) / (
        v["others_way_p50_us"] + v["others_replica_p50_us"])
    assert whole < e2e.SLOW_RATIO, v
    assert v["replica"] == "osd.1" and v["cause"] == "network", v
    v = e2e.replica_table(_queued_rows(None))["verdict"]
    assert v["replica"] is None and "nor its way there and back" in \
        v["words"], v


def test_replica_table_blames_the_replica_when_its_own_work_is_slow():
    rows = _rows(None)
    for r in rows:
        if r["replica"] == "osd.1":
            r["replica_us"] = 5000.0
            r["wait_us"] += 4600.0
    for i in range(0, len(rows), 2):
        a, b = rows[i], rows[i + 1]
        a["last"], b["last"] = a["wait_us"] > b["wait_us"], \
            b["wait_us"] >= a["wait_us"]
    v = e2e.replica_table(rows)["verdict"]
    assert v["replica"] == "osd.1" and v["cause"] == "replica", v


def test_slowest_calls_rank_by_the_calls_latency():
    per = []
    for i, total in enumerate([5.0, 9.0, 9.0, 1.0]):
        c = _client(0, MS, MS, call={"submit": 0, "done": int(total * MS)})
        p = e2e.client_segments(c, MS // 4, None, MS // 2)
        p.update(reqid="client.1.0:%d" % (10 - i), kind="write",
                 primary="osd.0", object="o", call=None)
        per.append(p)
    got = e2e.slowest_calls(per, 3)
    # the two 9-ms ops of one call: by their request ids (tid 8 < 9)
    assert [g["reqid"] for g in got] == ["client.1.0:8", "client.1.0:9",
                                         "client.1.0:10"]
    assert got[0]["total_us"] == 9000.0
    assert sum(got[0]["segments"].values()) == 9000.0


def test_slowest_of_many_ties_in_request_id_order():
    """--slowest over many ops with ties: the n slowest of all by the
    call's latency, ties by request id (client, then tid as a number)."""
    import random
    rnd = random.Random(7)
    per = []
    for i in range(5000):
        total = float(rnd.randrange(1, 400))     # many ties
        c = _client(0, MS, MS, call={"submit": 0,
                                     "done": int(total * 1000)})
        p = e2e.client_segments(c, MS // 4, None, MS // 2)
        p.update(reqid="client.%d.0:%d" % (rnd.choice((1, 12)),
                                           rnd.randrange(10 ** 6)),
                 kind="read", primary="osd.0", object="o", call=None)
        per.append(p)
    want = sorted(per, key=lambda p: (-p["total_us"],) +
                  e2e.reqid_key(p["reqid"]))[:7]
    assert [g["reqid"] for g in e2e.slowest_calls(per, 7)] == [
        p["reqid"] for p in want]


def test_replica_columns_give_the_dicts_table():
    """model/e2e_table.py hands replica_table columns (replica_ways'):
    the table and verdict are those of the dicts they stand for."""
    rows = _rows("osd.2")
    assert e2e.replica_table(e2e.replica_columns(rows)) == \
        e2e.replica_table(rows)
    assert e2e.replica_table(rows)["verdict"]["replica"] == "osd.2"


@pytest.mark.parametrize("ns,us", [(9394450, 9394.5), (9394449, 9394.4),
                                   (1050, 1.1), (1150, 1.2), (-1050, -1.0),
                                   (0, 0.0)])
def test_tenths_are_rounded_from_the_integers_halves_up(ns, us):
    """9394.45 us is not a float: rounding it as one went down or up by
    its binary error, the table and its ops then disagreeing by 0.1."""
    assert float(e2e.tenths_us(ns)) == us
    c = _client(10 * MS, 10 * MS + ns if ns > 0 else 10 * MS, None)
    if ns > 0:
        got = e2e.client_segments(c, enq_ns=10 * MS, first_stamp_ns=None,
                                  done_ns=10 * MS)
        assert got["total_us"] == us


@pytest.mark.parametrize("last,way,own,named", [
    # a slow link (the figures of a writeback client on the 3-host lab,
    # its host's link 4 ms against 1 ms): the last of 74 % only, its way
    # 2.8 ms longer than the others' in 11.5 ms of their whole time
    (73.8, (8550.3, 5739.4), (5477.9, 5798.5), "network"),
    # a flood's busiest replica: the last of 67 %, its own queue, not its
    # way, makes it slower: not named at that share
    (67.1, (75231.2, 54675.5), (170488.7, 46584.6), None),
    # its own queue at 80 %: named
    (80.0, (5000.0, 5000.0), (9000.0, 5000.0), "replica"),
    # a longer way at 60 %: not named
    (60.0, (8500.0, 5700.0), (5500.0, 5800.0), None)])
def test_a_slow_link_is_named_below_a_slow_replicas_share(last, way, own,
                                                            named):
    out = {"replicas": {"osd.1": {"last_pct": last}}, "verdict": None}
    v = e2e._verdict(out, "osd.1", out["replicas"]["osd.1"], way[0],
                     own[0], way[1], own[1])["verdict"]
    assert v["cause"] == named, v
    assert (v["replica"] == "osd.1") == (named is not None), v
