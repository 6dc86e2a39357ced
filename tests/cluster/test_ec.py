"""Erasure-coded writes on the 3-host lab (issue 26 item 5): image img1's
data in an EC pool k=2 m=1 (`make lab HOSTS=3 LAB_POOL=ec:2+1`), every
OSD traced at once. Each write waits on its shards like a replicated
write on its replicas: per peer, who was last, and a slowed host's OSD
named in its primaries' verdicts. Ground truth: each OSD's own op_w and
op_rw (every write to an EC pool waits on all k+m shards).
"""
import json
import os
import signal
import subprocess

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


def _traced_writes(lab, d, ios, seed):
    """osdstage --osd all -j around fio's random writes to img1 from the
    client's namespace -> (host record, [(before, after) perf dumps])."""
    t = subprocess.Popen([PYTHON, OSDSTAGE, "--osd", "all", "-j"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        wait_for_line(t.stderr, "Tracing", 60)
        before = [perf_counters(a) for a in lab["asoks"]]
        (d / "job.fio").write_text(fio_rbd_job(ios, 4, seed, rw="randwrite"))
        p = subprocess.run(
            ["nsenter", "--net=/run/netns/" + lab["client_netns"], "--",
             "fio", str(d / "job.fio")], capture_output=True, text=True,
            timeout=300, env=dict(os.environ, CEPH_CONF=lab["CEPH_CONF"]))
        assert p.returncode == 0, p.stderr
        after = [perf_counters(a) for a in lab["asoks"]]
    finally:
        t.send_signal(signal.SIGINT)
        out, err = t.communicate(timeout=60)
    assert t.returncode == 0, err
    return json.loads(out.splitlines()[0]), list(zip(before, after))


def _writes(dumps):
    """Each OSD's writes as primary: Ceph's op_w and op_rw (a write that
    reads too: librbd's to an object it may not have written yet)."""
    return [sum(a["osd"][k] - b["osd"][k] for k in ("op_w", "op_rw"))
            for b, a in dumps]


@pytest.mark.parametrize("run", range(3))
def test_each_write_waits_on_every_shard(ec_hosts, tmp_path, run):
    """Every write an OSD was primary of (Ceph's op_w, op_rw) waited on
    its two other shards: replica_wait and local_commit (its own shard) count
    them, each peer replied to each; the shards' sub-writes are replica
    ops there (the write's, and the roll-forward after it); nothing
    lost or unmatched."""
    rec, dumps = _traced_writes(ec_hosts, tmp_path, 150, 31 + run)
    writes = _writes(dumps)
    names = ["osd.%d" % i for i in range(len(writes))]
    # the pool's 16 PGs give each OSD its share of primaries (CRUSH: a
    # share, not an equal one)
    assert sum(1 for n in writes if n) >= 2, writes
    for name, n in zip(names, writes):
        r = rec["osds"][name]
        st = r["stages"]
        assert st["replica_wait"]["count"] == n, (name, n, st["replica_wait"])
        assert st["local_commit"]["count"] == n, (name, n)
        peers = st["replica_wait"]["by_peer"]
        assert sorted(peers) == [x for x in names if x != name], peers
        assert all(p["count"] == n for p in peers.values()), (n, peers)
        assert sum(p["last"] for p in peers.values()) == n, peers
        # the shard waits carry the links: out and back, at least
        assert all(p["p50_us"] >= 2 * DELAY_US for p in peers.values())
        assert not any(r["lost"].values()), (name, r["lost"])
    repops = sum(rec["osds"][x]["stages"]["repop"]["count"] for x in names)
    assert repops >= 2 * sum(writes), (repops, writes)


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
        assert rw["count"] == n, (name, n, rw)
        if not n:
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
