"""Erasure-coded writes on the 3-host lab: image img1's
data in an EC pool k=2 m=1 (`make lab HOSTS=3 LAB_POOL=ec:2+1`), every
OSD traced at once. Each write waits on its shards like a replicated
write on its replicas: per peer, who was last, and a slowed host's OSD
named in its primaries' verdicts; reads wait on their k data shards the
same way. Ground truth: each OSD's own op_w and op_rw (every write waits
on all k+m shards, or on its replicas: librbd's header updates; the
watch's pings are writes without a transaction) and op_r (rados bench's
reads of objects of the EC pool itself).
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import (LAB, OSDSTAGE, PYTHON, fio_rbd_job, lab_env,
                      perf_counters, wait_for_line)

POOL = "ec:2+1"
SLOW_US = 6000           # the slowed host's link
DELAY_US = 1000          # lab_hosts' links


def _up(pool=None):
    env = dict(os.environ, LAB_HOSTS="3", LAB_NET_DELAY="1ms",
               CEPH="pacific")
    env.pop("LAB_POOL", None)
    if pool:
        env["LAB_POOL"] = pool
    p = subprocess.run(["bash", LAB, "up"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture(scope="module")
def ec_hosts(lab_hosts):
    """lab_hosts with img1's data in the EC pool; back to a replicated
    image afterwards (the tests after these use lab_hosts as it was)."""
    _up(POOL)
    try:
        assert lab_env()["LAB_POOL"] == POOL
        p = subprocess.run(["rbd", "info", "rbd/img1"], capture_output=True,
                           text=True, timeout=60,
                           env=dict(os.environ,
                                    CEPH_CONF=lab_hosts["CEPH_CONF"]))
        assert "data_pool: rbd-ec" in p.stdout, p.stdout + p.stderr
        yield lab_hosts
    finally:
        _up()


def _net_delay(who, us):
    p = subprocess.run(["bash", LAB, "net-delay", who, "%dus" % us],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def _traced_writes(lab, d, ios, seed, extra=()):
    """osdstage --osd all -j around fio's random writes to img1 from the
    client's namespace -> (host record, [(before, after) perf dumps])."""
    (d / "job.fio").write_text(fio_rbd_job(ios, 4, seed, rw="randwrite"))

    def run():
        p = subprocess.run(
            ["nsenter", "--net=/run/netns/" + lab["client_netns"], "--",
             "fio", str(d / "job.fio")], capture_output=True, text=True,
            timeout=300, env=dict(os.environ, CEPH_CONF=lab["CEPH_CONF"]))
        assert p.returncode == 0, p.stderr
    return _traced(lab, run, extra)


def _rados(lab, *args, timeout=120):
    """rados in the client's namespace."""
    p = subprocess.run(["nsenter", "--net=/run/netns/" + lab["client_netns"],
                        "--", "rados"] + list(args), capture_output=True,
                       text=True, timeout=timeout,
                       env=dict(os.environ, CEPH_CONF=lab["CEPH_CONF"]))
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def _traced(lab, run, extra=()):
    """osdstage --osd all -j (and `extra`) around run() -> (host record,
    [(before, after) perf dumps of each OSD])."""
    t = subprocess.Popen([PYTHON, OSDSTAGE, "--osd", "all", "-j"] +
                         list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        wait_for_line(t.stderr, "Tracing", 60)
        before = [perf_counters(a) for a in lab["asoks"]]
        run()
        after = [perf_counters(a) for a in lab["asoks"]]
    finally:
        t.send_signal(signal.SIGINT)
        out, err = t.communicate(timeout=60)
    assert t.returncode == 0, err
    return json.loads(out.splitlines()[0]), list(zip(before, after))


@pytest.fixture(scope="module")
def ec_objects(ec_hosts):
    """4 KiB objects in the EC pool itself (rados bench, kept): reads of
    them go to the pool's shards only, no replicated pool's op among
    them."""
    _rados(ec_hosts, "-p", "rbd-ec", "bench", "4", "write", "-b", "4096",
           "-t", "8", "--no-cleanup")
    return ec_hosts


EDGES = ("op_replaced", "op_unknown", "reply_unknown")


def _nothing_lost(name, rec):
    """Nothing unread and no table full; at the window's edges an op or
    sub-op seen only in part (its enqueue or its send before the attach)
    or never completed (its OpRequest freed and the address reused): at
    most 1 % of the ops (before the EC messages handled inside dequeue_op
    were forgotten there, replaced ops were a third of the replica
    ops)."""
    lost = {k: v for k, v in rec["lost"].items() if v}
    edges = sum(lost.pop(k, 0) for k in EDGES)
    assert not lost, (name, lost)
    ops = rec["stages"]["op_total"]["count"] + \
        rec["stages"]["repop"]["count"]
    assert edges <= 0.01 * ops, (name, rec["lost"], ops)


def _reads(lab):
    _rados(lab, "-p", "rbd-ec", "bench", "3", "rand", "-t", "8")


def _writes(dumps):
    """Each OSD's writes as primary: Ceph's op_w and op_rw (a write that
    reads too: librbd's to an object it may not have written yet)."""
    return [sum(a["osd"][k] - b["osd"][k] for k in ("op_w", "op_rw"))
            for b, a in dumps]


PING_S = 5.0             # the Objecter pings a watch this often


def _pings(before, after):
    """At most how many watch pings an OSD took in the window: op_w counts
    them (a watch is a write op) and no transaction follows. fio's
    librbd watches its image's header, in pool rbd (replicated)."""
    return int((after["_t"] - before["_t"]) / PING_S) + 1


def _writes_waited(rw, n, before, after):
    """The writes that waited on their shards or replicas: Ceph's, but
    for the watch pings among them."""
    return n - _pings(before, after) <= rw["count"] <= n


@pytest.mark.parametrize("run", range(3))
def test_each_write_waits_on_every_shard(ec_hosts, tmp_path, run):
    """Every write an OSD was primary of (Ceph's op_w, op_rw) waited on
    its two other shards: replica_wait and local_commit (its own shard) count
    them, each peer replied to each; the shards' sub-writes are replica
    ops there (the write's, and the roll-forward after it); nothing
    lost or unmatched. And the capture taken with it follows a write
    over its three OSDs (--op): the shards' sub-writes carry the client's
    request id only in ECSubWrite (op_reqid events)."""
    cap = str(tmp_path / "w.ctf")
    rec, dumps = _traced_writes(ec_hosts, tmp_path, 150, 31 + run,
                                ["-w", cap])
    writes = _writes(dumps)
    names = ["osd.%d" % i for i in range(len(writes))]
    # the pool's 16 PGs give each OSD its share of primaries (CRUSH: a
    # share, not an equal one)
    assert sum(1 for n in writes if n) >= 2, writes
    for name, n, (b, a) in zip(names, writes, dumps):
        r = rec["osds"][name]
        st = r["stages"]
        assert _writes_waited(st["replica_wait"], n, b, a), (
            name, n, st["replica_wait"])
        n = st["replica_wait"]["count"]
        if not n:
            continue
        assert st["local_commit"]["count"] == n, (name, n)
        peers = st["replica_wait"]["by_peer"]
        assert sorted(peers) == [x for x in names if x != name], peers
        assert all(p["count"] == n for p in peers.values()), (n, peers)
        assert sum(p["last"] for p in peers.values()) == n, peers
        # the shard waits carry the links: out and back, at least
        assert all(p["p50_us"] >= 2 * DELAY_US for p in peers.values())
        _nothing_lost(name, r)
    repops = sum(rec["osds"][x]["stages"]["repop"]["count"] for x in names)
    assert repops >= 2 * sum(writes), (repops, writes)
    _follow_writes(cap, names)


def _read_capture(*args):
    p = subprocess.run([PYTHON, OSDSTAGE, "-r"] + list(args) + ["-j"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def _follow_writes(cap, names):
    """The slowest write of each primary, followed with --op: its primary
    row waited on the two other OSDs, whose sub-writes are there as
    replica ops of the same request id, each in the replicas table."""
    # of each OSD's few slowest, the first that is a write with shards
    # (a watch's ping, also a write, waits on none)
    host = _read_capture(cap, "--from", "0", "--slowest", "4")[0]
    reqids = [next((o["reqid"] for o in r.get("slowest", [])
                    if o.get("class") == "write" and o.get("replies")), None)
              for r in host["osds"].values()]
    reqids = [q for q in reqids if q is not None]
    assert len(reqids) >= 2, host["osds"]
    for reqid in reqids:
        story = _read_capture(cap, "--op", reqid)[0]
        rows = {n: [r["role"] for r in rs] for n, rs in
                story["osds"].items()}
        primary = [n for n, roles in rows.items() if "primary" in roles]
        assert len(primary) == 1, rows
        assert sorted(rows) == names, rows
        for n in names:
            if n != primary[0]:
                assert "replica" in rows[n], rows
        reps = story["replicas"]
        assert sorted(r["replica"] for r in reps) == \
            [n for n in names if n != primary[0]], reps
        # the sub-writes went out in the sent_within_us before the mark
        # the ways are measured from (docs/stages.md): the way out is
        # over a 1-ms link from the send, the way back from the shard's
        # reply on
        within = [r.get("sent_within_us", 0) for r in
                  story["osds"][primary[0]] if r["role"] == "primary"][0]
        for r in reps:
            assert r["replica_us"] and r["back_us"] is not None, reps
            assert r["back_us"] >= DELAY_US, reps
            if r["out_us"] is None:
                # the primary preempted after sending: the shard had its
                # sub-write before the mark, no more than `within` before
                assert 0 < r["sent_late_us"] <= within, (within, reps)
                continue
            assert r["out_us"] + within >= DELAY_US, (within, reps)
        assert story["pg"] and "s" not in story["pg"], story["pg"]
    _sub_writes_sent(cap)


def _sub_writes_sent(cap):
    """Each reply to an EC write (its primary's op in a PG with shards)
    says when its sub-writes went out (sent_us: the primary applied its
    own shard's), within the wait; a replicated write's (librbd's header
    object, pool rbd) says 0."""
    from cephlat.capture.reader import Capture
    first = Capture(cap)
    seen = {"ec": 0, "replicated": 0}
    for slot in range(len(first.targets)):
        c = first if slot == 0 else Capture(cap, slot)
        shard = {}
        for name, _, d in c.iter_events(["op_enqueue", "replica_reply"]):
            if name == "op_enqueue":
                shard[d["op"]] = d["pg_shard"]
            elif not d["read"] and d["op"] in shard:
                ec = shard[d["op"]] >= 0
                seen["ec" if ec else "replicated"] += 1
                if ec:
                    assert 0 < d["sent_us"] * 1000 <= d["wait_ns"], d
                else:
                    assert d["sent_us"] == 0, d
    assert seen["ec"] > 100, seen


@pytest.mark.parametrize("run", range(2))
def test_a_slowed_hosts_shard_is_named(ec_hosts, tmp_path, run):
    """The last host's link at SLOW_US: the writes of the two other
    primaries (those that were primary of some) wait on that host's
    shard last, and their verdicts name its OSD as the slow one."""
    slow = "osd.%d" % (len(ec_hosts["netns"]) - 1)
    _net_delay(ec_hosts["netns"][-1], SLOW_US)
    try:
        rec, dumps = _traced_writes(ec_hosts, tmp_path, 240, 41 + run)
    finally:
        _net_delay(ec_hosts["netns"][-1], DELAY_US)
    writes = _writes(dumps)
    named = 0
    for i, n in enumerate(writes[:-1]):
        name = "osd.%d" % i
        r = rec["osds"][name]
        rw = r["stages"]["replica_wait"]
        assert _writes_waited(rw, n, *dumps[i]), (name, n, rw)
        if not rw["count"]:
            continue
        named += 1
        assert r["cause"] == "replica" and rw["last_peer"] == slow, (
            name, r["verdict"])
        peer = rw["by_peer"][slow]
        assert peer["last_pct"] >= 70, rw["by_peer"]
        # out over the primary's link, back over the slowed one
        assert peer["p50_us"] >= SLOW_US + DELAY_US, peer
        assert "look at %s" % slow in r["verdict"], r["verdict"]
    assert named, writes


K = 2                    # the pool's data shards: a read waits for K


def check_reads(rec, dumps, per_read):
    """Each OSD's reads as primary (Ceph's op_r) in shard_read, with
    per_read = (least, most) shard replies each, one of them last,
    nothing lost. -> [(OSD, shard_read's by_peer)] of those that read."""
    reads = [a["osd"]["op_r"] - b["osd"]["op_r"] for b, a in dumps]
    assert sum(1 for n in reads if n) >= 2, reads
    out = []
    for i, n in enumerate(reads):
        name = "osd.%d" % i
        r = rec["osds"][name]
        sr = r["stages"]["shard_read"]
        assert sr["count"] == n, (name, n, sr)
        _nothing_lost(name, r)
        if not n:
            continue
        peers = sr["by_peer"]
        replies = sum(p["count"] for p in peers.values())
        assert per_read[0] * n <= replies <= per_read[1] * n, peers
        assert sum(p["last"] for p in peers.values()) == n, peers
        out.append((name, peers))
    return out


@pytest.mark.parametrize("run", range(3))
def test_each_read_waits_on_its_shards(ec_objects, tmp_path, run):
    """Every read an OSD was primary of (Ceph's op_r: rados bench's, all
    in the EC pool) waited on its K data shards: shard_read counts them,
    K replies each (the primary's own shard among them where it holds
    one, usually first), one of them last; the remote ones carry the
    links there and back. The capture taken with it reads back to the
    same shard_read, per peer too (its replica_reply and shard_read
    events)."""
    cap = str(tmp_path / "r.ctf")
    rec, dumps = _traced(ec_objects, lambda: _reads(ec_objects),
                         ["-w", cap])
    for name, peers in check_reads(rec, dumps, (K, K)):
        for peer, p in peers.items():
            if peer != name:
                assert p["p50_us"] >= 2 * DELAY_US, (peer, p)
    back = _read_capture(cap)
    assert len(back) == 1, len(back)
    for name, r in rec["osds"].items():
        got = back[0]["osds"][name]["stages"]["shard_read"]
        want = r["stages"]["shard_read"]
        assert got == want, (name, got, want)


@pytest.mark.parametrize("run", range(2))
def test_a_slowed_hosts_read_shard_is_named(ec_objects, run):
    """The last host's link at SLOW_US: the other primaries' reads that
    need its shard wait on it last, and their verdicts name its OSD."""
    slow = "osd.%d" % (len(ec_objects["netns"]) - 1)
    _net_delay(ec_objects["netns"][-1], SLOW_US)
    try:
        rec, dumps = _traced(ec_objects, lambda: _reads(ec_objects))
    finally:
        _net_delay(ec_objects["netns"][-1], DELAY_US)
    reads = [a["osd"]["op_r"] - b["osd"]["op_r"] for b, a in dumps]
    named = 0
    for i, n in enumerate(reads[:-1]):
        name = "osd.%d" % i
        r = rec["osds"][name]
        sr = r["stages"]["shard_read"]
        assert sr["count"] == n, (name, n, sr)
        peer = sr["by_peer"].get(slow)
        others = [p for q, p in sr["by_peer"].items()
                  if q not in (slow, name)]
        if not n or peer is None or not others:
            continue        # no read of this primary needed that shard
        named += 1
        # last in (nearly) every read that needed it: the other shard's
        # reply is late by the slowed link's extra only when that host
        # stalls, which a loaded 2-core lab does now and then
        assert peer["last"] >= 0.95 * peer["count"], sr["by_peer"]
        assert peer["p50_us"] >= SLOW_US + DELAY_US, peer
        assert r["cause"] == "replica", r["verdict"]
        assert "look at %s." % slow in r["verdict"], r["verdict"]
    assert named, (reads, {n: r["stages"]["shard_read"].get("by_peer")
                           for n, r in rec["osds"].items()})


def test_the_exporter_exports_each_reads_shards(ec_objects):
    """The exporter (every OSD of the lab, no cost bound: always
    attached) counts each read an OSD was primary of (Ceph's op_r) in
    osdstage_shard_read_last_reply_total, over its peers, and each of the
    K shard replies of each in osdstage_shard_read_wait_seconds."""
    from cephlat.exporter import families as F
    from test_exporter import Exporter, metrics
    e = Exporter("ec", ["--refresh", "1", "--max-overhead", "0"])
    try:
        e.wait_traced()
        before = [perf_counters(a) for a in ec_objects["asoks"]]
        _reads(ec_objects)
        after = [perf_counters(a) for a in ec_objects["asoks"]]
        time.sleep(2.5)             # two refreshes: the last reads in
        m = metrics(e.port)
        assert e.proc.poll() is None, e.stderr()
    finally:
        e.kill()
    reads = [a["osd"]["op_r"] - b["osd"]["op_r"]
             for b, a in zip(before, after)]
    assert sum(1 for n in reads if n) >= 2, reads
    for i, n in enumerate(reads):
        name = "osd.%d" % i

        def per_peer(fam):
            return {dict(k[1])["peer"]: v for k, v in m.items()
                    if k[0] == fam and dict(k[1])["ceph_daemon"] == name}
        last = per_peer(F.SHARD_READ_LAST_REPLY)
        waits = per_peer(F.SHARD_READ_WAIT + "_count")
        assert sum(last.values()) == n, (name, n, last)
        assert sum(waits.values()) == K * n, (name, n, waits)
        assert set(last) <= set(waits), (last, waits)
