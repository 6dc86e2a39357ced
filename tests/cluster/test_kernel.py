"""Real-cluster tier: kernel stages, thread roles, queue-wait attribution
and the verdict on the lab OSD."""
import json
import os
import subprocess
import time

import pytest

from cephlat.ceph import probetable

from conftest import Bench, c_program, prefill
from test_osdstage_live import traced_window

HERE = os.path.dirname(os.path.abspath(__file__))


def traced(lab, mode, threads, secs="6", extra=()):
    bench = Bench(lab, mode, 20, threads=threads)
    try:
        time.sleep(3)
        out, err, _, _ = traced_window(lab, ["-j"] + list(extra) + [secs, "1"])
    finally:
        bench.stop()
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def filled(lab):
    """Objects for `rand` reads to find, whatever ran before (alone, a
    test of random reads would read nothing from a new lab)."""
    prefill(lab, 5)
    return lab


@pytest.fixture(scope="module")
def reads(filled):
    return traced(filled, "rand", 16)


def test_kernel_stages_and_roles(reads, lab):
    k = reads["kernel"]
    for stage in ("offcpu", "wakeup_delay", "futex_wait"):
        assert k[stage]["count"] > 1000, (stage, k[stage])
        assert "tp_osd_tp" in k[stage]["by_role"]
    t = reads["threads"]
    # Ceph 16.2 defaults for a file/loop-backed (hdd) OSD: 5 shards x 1
    assert t["tp_osd_tp"]["threads"] == 5
    assert t["msgr-worker"]["threads"] == 3
    assert t["bstore_kv_sync"]["threads"] == 1
    for role in t.values():
        assert 0 <= role["offcpu_pct"] <= 100
        assert 0 <= role["futex_pct_of_offcpu"] <= 100
    # shard workers sleep on their queue's condition variable: futex
    assert t["tp_osd_tp"]["futex_pct_of_offcpu"] > 90
    assert t["tp_osd_tp"]["wakeups"] > 1000


def test_attribution_adds_up(reads):
    qw = reads["stages"]["queue_wait"]
    a = reads["attribution"]
    total = sum(p["mean_us"] for p in a.values())
    assert abs(total - qw["mean_us"]) <= 0.05 * qw["mean_us"], (a, qw)
    assert abs(sum(p["share"] for p in a.values()) - 1) < 0.01
    w = reads["wakers"]
    # the messenger threads enqueue and wake the workers
    assert w["enqueuer"] > w["other"] and w["enqueuer"] > 100


def test_shards_are_the_osd_shards(reads):
    shards = [s for s in reads["shards"] if s["shard"] != "?"]
    assert len(shards) == 5
    assert all(s["workers"] == 1 for s in shards)
    # one interval, one snapshot: every map read for a report covers the
    # same ops (their programs write the interval's half of each map)
    n = reads["stages"]["queue_wait"]["count"]
    assert sum(s["ops"] for s in reads["shards"]) == n


def test_every_interval_is_one_snapshot(filled):
    lab = filled
    """Five 1-s reports under random reads: in each, the shards' ops are
    exactly queue_wait's count and the shards' wake-ups exactly the
    wakers' (the figures come from four maps read one after the other
    while ops go on)."""
    bench = Bench(lab, "rand", 20, threads=16)
    try:
        time.sleep(3)
        out, err, _, _ = traced_window(lab, ["-j", "1", "5"])
    finally:
        bench.stop()
    recs = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(recs) == 5, err
    for rec in recs:
        n = rec["stages"]["queue_wait"]["count"]
        assert n > 100, rec["stages"]["queue_wait"]
        assert sum(s["ops"] for s in rec["shards"]) == n, rec["shards"]
        for k in ("enqueuer", "other", "timeout"):
            assert sum(s["wake_" + k] for s in rec["shards"]) == \
                rec["wakers"][k], (k, rec["wakers"], rec["shards"])


def test_verdict_present(reads):
    assert reads["cause"] in ("busy", "lock", "blocked", "signal", "missed",
                              "runq", "storage", "idle")
    assert reads["verdict"].startswith("ops waited ")
    assert "workers slept" in reads["verdict"]


def test_block_requests_of_writes(lab):
    rec = traced(lab, "write", 8)
    br = rec["kernel"]["block_rq"]
    assert br["count"] > 100
    loop = subprocess.run(["losetup", "-j", "/var/tmp/osdstage-lab/disk/"
                           "osd-block.img", "-O", "MAJ:MIN", "-n"],
                          capture_output=True, text=True).stdout.split()[0]
    assert br["by_device"][loop.strip()]["count"] > 100
    # 4 KiB writes on a loop device wait for the commit far longer than in
    # the queues
    assert rec["cause"] == "storage", rec["verdict"]
    assert rec["verdict"].startswith("storage dominates")


def test_cpu_hog_shows_as_run_queue_delay(lab, tmp_path):
    """Two clients leave CPU to spare; a hog takes it in bursts on every
    CPU at a higher priority (SCHED_FIFO): a woken worker waits for the
    burst to end. (A plain busy loop at normal priority barely delays
    wake-ups on this kernel: EEVDF favours threads that slept.)"""
    exe = c_program(os.path.join(HERE, "progs", "cpuhog.c"), tmp_path)
    base = traced(lab, "rand", 2)
    hog = subprocess.Popen([exe, "30", "2", "2", "fifo"])
    try:
        hogged = traced(lab, "rand", 2)
    finally:
        hog.kill()
        hog.wait()
    r0 = base["attribution"]["runq"]["mean_us"]
    r1 = hogged["attribution"]["runq"]["mean_us"]
    assert r1 >= 2 * r0, (r0, r1)
    assert hogged["cause"] == "runq", hogged["verdict"]
    assert "CPU contention" in hogged["verdict"]


def test_text_report_has_the_tables(filled):
    lab = filled
    bench = Bench(lab, "rand", 12, threads=16)
    try:
        time.sleep(2)
        out, err, _, _ = traced_window(lab, ["3", "1"])
    finally:
        bench.stop()
    # the default stages; the probes: 6 on a read's path, bluestore_submit
    # (2), the replicated-write events (4), the erasure-coded pools' (7:
    # submit_transaction, a sub-write, its reply and commit, a sub-read
    # sent, replied and completed; none on a replicated op's path) and the
    # background items' entry and return (10: scrub's two overloads among
    # them; none on a client op's path)
    assert "Tracing %d stages + kernel of ceph-osd" % len(
        probetable.DEFAULT_STAGES) in err
    assert ", 29 probes)" in err, err
    for head in ("THREAD ROLE", "QUEUE_WAIT ATTRIBUTION", "SHARD", "VERDICT",
                 "kernel stage = offcpu", "kernel stage = wakeup_delay"):
        assert head in out, head
    assert all(len(l) <= 80 for l in out.splitlines()), \
        [l for l in out.splitlines() if len(l) > 80]
