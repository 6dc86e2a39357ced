"""osdstage agrees with Ceph's own accounting (issue: accuracy).

For a 4 KiB random-read run and a 4 KiB write run on the lab OSD, all
stages are traced for one interval while `perf dump` is taken just before
(probes attached) and just after (report printed); the stage numbers are
compared with the counters' deltas over the same window.
"""
import json
import time

import pytest

from cephlat.ceph import probetable

from conftest import Bench, in_report, lat_mean_us, prefill
from test_osdstage_live import traced_window

WINDOW = "8"


def run_traced(lab, mode):
    bench = Bench(lab, mode, 25)
    try:
        time.sleep(3)
        out, err, before, after = traced_window(lab, ["-j", "-S", "all",
                                                     "--by", "client",
                                                     WINDOW, "1"])
    finally:
        bench.stop()
    rec = json.loads(out.strip().splitlines()[-1])
    return rec, before, after


@pytest.fixture(scope="module")
def runs(lab):
    prefill(lab, 5)
    return {"read": run_traced(lab, "rand"), "write": run_traced(lab, "write")}


@pytest.mark.parametrize("mode", ["read", "write"])
def test_every_stage_reported(runs, mode):
    rec, _, _ = runs[mode]
    assert rec["unavailable"] == {}
    assert set(rec["stages"]) == set(probetable.STAGES)
    for k in ("start_map_full", "op_map_full", "bad_arg", "no_start"):
        assert rec["lost"][k] == 0, rec["lost"]


@pytest.mark.parametrize("mode", ["read", "write"])
def test_the_ops_bytes_are_cephs(runs, mode):
    """--by's bytes (each op's, the arguments Ceph's log_op_stats counts
    them from) add up to what Ceph counted its client ops writing and
    reading (op_in_bytes, op_out_bytes) over the report: within 3 %, and
    a few ops' 4 KiB at the report's edges."""
    rec, before, after = runs[mode]
    by = rec["by"]
    assert by["missed"] == 0, by
    rows = by["rows"] + ([by["other"]] if by["other"] else [])
    for ours, counter in (("bytes_in", "op_in_bytes"),
                          ("bytes_out", "op_out_bytes")):
        got = sum(r[ours] for r in rows)
        want = in_report(after["osd"][counter] - before["osd"][counter],
                         before, after, rec)
        assert abs(got - want) <= 0.03 * want + 16 * 4096, (ours, got, want)
        # the run's own direction: thousands of 4 KiB ops
        if ours == ("bytes_out" if mode == "read" else "bytes_in"):
            assert want >= 1000 * 4096, (ours, want)


def test_one_osd_writes_commit_locally_and_have_no_replicas(runs):
    """Pool size 1: every write is submitted and committed by its only
    OSD (local_commit), nothing waits for replicas, no replica ops."""
    rec, before, after = runs["write"]
    st = rec["stages"]
    writes = in_report(after["osd"]["op_w"] - before["osd"]["op_w"],
                       before, after, rec)
    assert writes > 1000
    assert abs(st["local_commit"]["count"] - writes) <= 0.03 * writes, (
        st["local_commit"], writes)
    assert st["local_commit"]["mean_us"] <= st["op_total"]["mean_us"]
    assert st["replica_wait"]["count"] == 0 and st["repop"]["count"] == 0
    assert st["replica_wait"]["by_peer"] == {}


@pytest.mark.parametrize("mode", ["read", "write"])
def test_do_op_count_within_3_percent(runs, mode):
    rec, before, after = runs[mode]
    want = in_report((after["osd"]["op_r"] + after["osd"]["op_w"]) -
                     (before["osd"]["op_r"] + before["osd"]["op_w"]),
                     before, after, rec)
    got = rec["stages"]["do_op"]["count"]
    assert want > 1000, want
    assert abs(got - want) <= 0.03 * want, (got, want)


def test_bluestore_read_mean_within_15_percent(runs):
    """bluestore_read's mean against Ceph's read_lat: within 15 %, plus
    the probe cost subtracted (call_bias_us). The lab's cached 4 KiB reads
    take ~2.7 us, as short as the probes' own cost, and that cost is
    calibrated in our process while the OSD's threads pay their own (0.9
    to 2 us here under load, by the state of the CPU; more on a cold one,
    which the calibration's cold calls correct: engine/calibrate.py): with a
    busy loop beside the lab the subtraction took 0.5 us too much (2.2
    against 2.7 us). Before the subtraction the figure is never below
    Ceph's: the probes only add time."""
    rec, before, after = runs["read"]
    want, n = lat_mean_us(before, after, "bluestore", "read_lat")
    got = rec["stages"]["bluestore_read"]["mean_us"]
    bias = rec["call_bias_us"]
    assert n > 1000
    assert bias > 0, rec["call_bias_us"]
    assert got + bias >= 0.85 * want, (got, bias, want)
    assert abs(got - want) <= 0.15 * want + bias, (got, bias, want)


def before_enqueue_us(rec):
    """The messenger stages' means summed: the op's message from its
    recv_stamp to OSD::enqueue_op, from the message's own stamps."""
    return sum(rec["stages"][s]["mean_us"]
               for s in probetable.MESSENGER_STAGES)


def assert_from_recv_stamp(rec, got, want):
    """Ceph's latencies start at the message's recv_stamp, ours at
    OSD::enqueue_op: Ceph's within 5 % of ours once the messenger stages
    (recv_stamp -> enqueue_op) are added (measured: 0.0-1.1 % under,
    Pacific, Reef and Tentacle, reads and writes; the rest is where
    Ceph's clock reads sit from our probes). The gap is messenger CPU and
    run-queue delay, which a slower or busier machine makes longer: a
    fixed share of Ceph's figure (70 % before) holds only on the machine
    it was chosen on. Ours is not also held below Ceph's: Ceph's mean is
    over the ops between two perf dumps, ours over the report's window,
    and the ops in flight at the edges differ (a full run had op_total
    of 4 ms writes 2 us above op_w_latency); the order is checked on the
    same ops (op_total against op_latency) instead."""
    full = got + before_enqueue_us(rec)
    assert abs(full - want) <= 0.05 * want, (got, full, want, {
        s: rec["stages"][s]["mean_us"] for s in probetable.MESSENGER_STAGES})


@pytest.mark.parametrize("mode", ["read", "write"])
def test_queue_wait_bounded_by_ceph(runs, mode):
    """queue_wait's mean against Ceph's time before dequeue
    (op_before_dequeue_op_lat: recv_stamp -> dequeue_op)."""
    rec, before, after = runs[mode]
    want, _ = lat_mean_us(before, after, "osd", "op_before_dequeue_op_lat")
    assert_from_recv_stamp(rec, rec["stages"]["queue_wait"]["mean_us"], want)


@pytest.mark.parametrize("mode,counter", [("read", "op_r_latency"),
                                          ("write", "op_w_latency")])
def test_op_total_bounded_by_ceph(runs, mode, counter):
    rec, before, after = runs[mode]
    want, _ = lat_mean_us(before, after, "osd", counter)
    s = rec["stages"]["op_total"]
    cls = s["by_class"][mode]
    # the class split finds the run's ops
    assert cls["count"] >= 0.97 * s["count"], s["by_class"]
    assert_from_recv_stamp(rec, cls["mean_us"], want)
    # op_latency is Ceph's figure itself (recv_stamp -> log_op_stats),
    # op_total its part from the enqueue: of the same ops (every one
    # stamped), never more
    lat = rec["stages"]["op_latency"]["by_class"][mode]
    assert rec["lost"]["msg_unstamped"] == 0, rec["lost"]
    assert lat["count"] == cls["count"], (lat, cls)
    assert cls["mean_us"] <= lat["mean_us"], (cls, lat)
    assert abs(lat["mean_us"] - want) <= 0.05 * want, (lat, want)


def test_stages_nest(runs):
    st = runs["read"][0]["stages"]
    assert st["bluestore_read"]["p50_us"] <= st["do_op"]["p50_us"] <= \
        st["dequeue_op"]["p50_us"]


@pytest.mark.parametrize("run", range(2))
def test_default_mode_spends_six_probe_hits_per_read(runs, lab, run):
    """Without -S: the default stages, and a 4 KiB read costs 6 uprobe
    hits (enqueue, dequeue, BlueStore::read entry and return,
    log_op_stats, dequeue_op's return), counted by the tool's own hit
    counters over Ceph's reads in the same window."""
    bench = Bench(lab, "rand", 12)
    try:
        time.sleep(3)
        out, err, before, after = traced_window(lab, ["-j", "4", "1"])
    finally:
        bench.stop()
    rec = json.loads(out.strip().splitlines()[-1])
    assert list(rec["stages"]) == probetable.DEFAULT_STAGES
    # dequeue_op's return is attached before op_dequeue, which starts it:
    # ops dequeued in between are not followed, and not counted lost
    assert rec["lost"]["no_start"] == 0, rec["lost"]
    reads = in_report(after["osd"]["op_r"] - before["osd"]["op_r"],
                      before, after, rec)
    writes = in_report(after["osd"]["op_w"] - before["osd"]["op_w"],
                       before, after, rec)
    assert reads > 1000 and writes < 0.01 * reads, (reads, writes)
    hits = rec["overhead"]["hits"]
    per_op = (hits["hit_entry"] + hits["hit_return"]) / reads
    assert 5.7 <= per_op <= 6.3, (hits, reads)
    # the dequeue_op stage, started by the op program, still covers
    # every op it dequeued
    st = rec["stages"]
    assert abs(st["dequeue_op"]["count"] - reads) <= 0.03 * reads
