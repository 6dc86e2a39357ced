"""Erasure-coded pools on Reef's and Tentacle's 3-OSD container labs
(18.2.7 and 20.2.4, CET builds; 20.2 runs EC pools on its legacy
backend): a k=2 m=1 pool over the three OSDs (`make lab CEPH=reef OSDS=3
LAB_POOL=ec:2+1`, failure domain osd), written and read by rados bench
on the pool itself. Each write waits on every shard and each read on its
k data shards, as Ceph's own op_w and op_r count them: the probe table's
EC functions and offsets for those releases, live."""
import os
import subprocess
import warnings

import pytest

from conftest import CONTAINER_LAB, container_lab_env, refresh_container_osds
from test_ec import K, _nothing_lost, _traced, check_reads

POOL = "ec:2+1"


@pytest.fixture(scope="module", params=["reef", "tentacle"])
def lab3(request):
    return request.getfixturevalue("lab3_" + request.param)


def _up(lab, pool=None):
    """`container.sh RELEASE up` of 3-OSD lab `lab` with image img1's data
    in `pool` (None: replicated); an OSD it had to start again (not
    running: it exited) is named in a warning, and `lab`'s pids and admin
    sockets follow it (the next tests trace the running OSDs)."""
    env = dict(os.environ, LAB_OSDS="3")
    env.pop("LAB_POOL", None)
    if pool:
        env["LAB_POOL"] = pool
    p = subprocess.run(["bash", CONTAINER_LAB, lab["release"], "up"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    for osd, old, new in refresh_container_osds(lab):
        warnings.warn("%s lab: osd.%d was started again by `up` (pid %d -> "
                      "%d): it had exited\n%s" % (lab["release"], osd, old,
                                                  new, p.stderr[-2000:]))


def _bench(lab, *args):
    p = subprocess.run(["rados", "-p", "rbd-ec", "bench"] + list(args),
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, CEPH_CONF=lab["CEPH_CONF"]))
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture(scope="module")
def ec3(lab3):
    """lab3 with the EC pool and objects in it; its image replicated
    again afterwards."""
    _up(lab3, POOL)
    try:
        assert container_lab_env(lab3["release"])["LAB_POOL"] == POOL
        _bench(lab3, "4", "write", "-b", "4096", "-t", "8", "--no-cleanup")
        yield lab3
    finally:
        _up(lab3)


def _deltas(dumps, key):
    return [a["osd"][key] - b["osd"][key] for b, a in dumps]


@pytest.mark.parametrize("run", range(3))
def test_each_write_waits_on_every_shard(ec3, run):
    """rados bench's 4 KiB writes (new objects of the EC pool): each OSD's
    writes as primary (op_w) waited on its two other shards, each of which
    replied; its own shard's reply is its local commit."""
    check_writes(*_traced(ec3, lambda: _bench(ec3, "3", "write", "-b",
                                              "4096", "-t", "8",
                                              "--no-cleanup")))


def check_writes(rec, dumps):
    """Each OSD's writes as primary (op_w) waited on every other shard,
    each replied to each, one of them last; nothing lost."""
    writes = _deltas(dumps, "op_w")
    assert sum(1 for n in writes if n) >= 2, writes
    names = ["osd.%d" % i for i in range(len(writes))]
    for name, n in zip(names, writes):
        r = rec["osds"][name]
        rw = r["stages"]["replica_wait"]
        # the losses first: they say why a write would be missing
        assert rw["count"] == n, (name, n, rw["count"], r["lost"])
        _nothing_lost(name, r)
        if not n:
            continue
        assert r["stages"]["local_commit"]["count"] == n, name
        peers = rw["by_peer"]
        assert sorted(peers) == [x for x in names if x != name], peers
        assert all(p["count"] == n for p in peers.values()), (n, peers)
        assert sum(p["last"] for p in peers.values()) == n, peers


@pytest.mark.parametrize("run", range(3))
def test_each_read_waits_on_its_shards(ec3, run):
    """rados bench's random reads of those objects: each OSD's reads as
    primary (op_r) waited on their K data shards (20.2: on those holding
    the extent), one of them last."""
    rec, dumps = _traced(ec3, lambda: _bench(ec3, "3", "rand", "-t", "8"))
    # 20.2 reads only the shards that hold the extent asked for (a 4 KiB
    # object's data is all on its first shard)
    assert check_reads(rec, dumps, (1, K) if ec3["release"] == "tentacle"
                       else (K, K))
