"""The exporter's --by against many short-lived clients: on the 3-OSD
lab, the exporter (its full tier always attached, --by client, at most
TOP keys per OSD) while CLIENTS `rados put`s run one after another, each
a librados client of its own (their objects' PGs spread them over the
OSDs, not evenly). Each OSD's series stay bounded (TOP keys and other),
the rest summed as other; what the keys add up to is the client ops Ceph
counted as their primary (within 1 %), none missed, and the bytes they
wrote (its op_in_bytes). A client that stays connected (a write bench,
named byc-bench) across a read of the monitors' sessions has its name
as an info series beside its key. Twice."""
import os
import subprocess
import time

import pytest

from conftest import perf_counters
from test_exporter import Exporter, ceph_ops, metrics

from cephlat.exporter import families as F

CLIENTS = 200
TOP = 5
REFRESH_S = 1.0
POOL = "rbd"              # the lab's replicated pool
ROUNDS = 2
# a longer client: a write bench of its own name, past the exporter's
# reads of the monitors' sessions (every 10 s)
BENCH_ID = "byc-bench"
BENCH_S = 12


def _in_bytes(asok):
    """The bytes Ceph counted its client ops writing in this OSD."""
    return perf_counters(asok)["osd"]["op_in_bytes"]


def _put(lab, name, path):
    p = subprocess.run(["rados", "-p", POOL, "put", name, path], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ,
                                            CEPH_CONF=lab["CEPH_CONF"]))
    assert p.returncode == 0, p.stderr


def _by(m, family):
    """{osd: {key: value}} of `family`'s series."""
    out = {}
    for (name, labels), v in m.items():
        if name == family:
            d = dict(labels)
            assert d["by"] == "client", d
            out.setdefault(d["ceph_daemon"], {})[d["key"]] = v
    return out


@pytest.fixture(scope="module", params=range(ROUNDS))
def counted(lab3, tmp_path_factory, request):
    data = tmp_path_factory.mktemp("by-exporter") / "obj"
    data.write_bytes(os.urandom(4096))
    ex = Exporter("by", ["--tiers", "full", "--max-overhead", "0",
                         "--refresh", str(REFRESH_S), "--by", "client",
                         "--by-top", str(TOP)])
    osds = ["osd.%d" % i for i in range(3)]
    try:
        ex.wait_traced()
        time.sleep(2 * REFRESH_S)
        m0 = metrics(ex.port)
        c0 = dict(zip(osds, map(ceph_ops, lab3["asoks"])))
        b0 = dict(zip(osds, map(_in_bytes, lab3["asoks"])))
        # one client that stays connected past a read of the monitors'
        # sessions, under a name of its own (the lab's auth is none)
        bench = subprocess.Popen(
            ["rados", "--id", BENCH_ID, "-p", POOL, "bench",
             str(BENCH_S), "write", "-b", "4096", "-t", "1", "--run-name",
             "byc-bench-%d" % request.param], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, CEPH_CONF=lab3["CEPH_CONF"]))
        for i in range(CLIENTS):
            _put(lab3, "byc-%d-%d" % (request.param, i), str(data))
        _, err = bench.communicate(timeout=BENCH_S + 60)
        assert bench.returncode == 0, err
        # the last ops summed: the ring is read every turn, the page
        # made every refresh
        time.sleep(3 * REFRESH_S)
        m1 = metrics(ex.port)
        c1 = dict(zip(osds, map(ceph_ops, lab3["asoks"])))
        b1 = dict(zip(osds, map(_in_bytes, lab3["asoks"])))
        yield {"m0": m0, "m1": m1, "ceph": {o: c1[o] - c0[o] for o in osds},
               "ceph_bytes": {o: b1[o] - b0[o] for o in osds},
               "stderr": ex.stderr()}
    finally:
        ex.kill()
        for i in range(CLIENTS):
            subprocess.run(["rados", "-p", POOL, "rm",
                            "byc-%d-%d" % (request.param, i)],
                           capture_output=True, timeout=60,
                           env=dict(os.environ, CEPH_CONF=lab3["CEPH_CONF"]))


def test_the_series_stay_bounded_and_the_rest_is_other(counted):
    ops = _by(counted["m1"], F.OPS_BY_KEY)
    assert set(ops) == set(counted["ceph"]), (ops, counted["stderr"])
    for osd, keys in ops.items():
        for fam in (F.OPS_BY_KEY, F.OP_SECONDS_BY_KEY, F.QUEUE_WAIT_BY_KEY,
                    F.BYTES_IN_BY_KEY, F.BYTES_OUT_BY_KEY):
            assert len(_by(counted["m1"], fam)[osd]) <= TOP + 1, (fam, osd)
        clients = [k for k in keys if k.startswith("client.")]
        assert len(clients) <= TOP, keys
        # an OSD that saw more clients than TOP sums the rest
        if counted["ceph"][osd] > TOP + 10:
            assert keys.get("other", 0) > 0, (osd, keys)
    # every client wrote once, to one OSD: all but the (at most) TOP an
    # OSD keeps are summed as other
    other = sum(keys.get("other", 0) for keys in ops.values())
    assert other >= CLIENTS - len(ops) * TOP - 10, ops


def test_the_keys_add_up_to_cephs_count(counted):
    # every client's write, on its primary
    assert sum(counted["ceph"].values()) >= CLIENTS, counted["ceph"]
    before = _by(counted["m0"], F.OPS_BY_KEY)
    after = _by(counted["m1"], F.OPS_BY_KEY)
    for osd, want in counted["ceph"].items():
        got = sum(after[osd].values()) - sum(before.get(osd, {}).values())
        assert abs(got - want) <= 0.01 * want + 2, (osd, got, want)
    # and the bytes they wrote (each put its 4 KiB), as Ceph counted them
    before = _by(counted["m0"], F.BYTES_IN_BY_KEY)
    after = _by(counted["m1"], F.BYTES_IN_BY_KEY)
    for osd, want in counted["ceph_bytes"].items():
        got = sum(after[osd].values()) - sum(before.get(osd, {}).values())
        assert abs(got - want) <= 0.01 * want + 2 * 4096, (osd, got, want)
    assert sum(counted["ceph_bytes"].values()) >= CLIENTS * 4096
    missed = {dict(k[1])["ceph_daemon"]: v for k, v in counted["m1"].items()
              if k[0] == F.OPS_BY_KEY_MISSED}
    assert set(missed) == set(counted["ceph"]) and \
        not any(missed.values()), missed


def test_a_client_that_stayed_is_named(counted):
    """The bench's client, connected across a read of the monitors'
    sessions: an info series with the name it gave for its key on the
    OSDs where it has a series; every info is of a client with one."""
    infos = {}
    for (name, labels), v in counted["m1"].items():
        if name == F.CLIENT_INFO:
            d = dict(labels)
            assert v == 1, (labels, v)
            infos.setdefault(d["ceph_daemon"], {})[d["key"]] = d["name"]
    ops = _by(counted["m1"], F.OPS_BY_KEY)
    for osd, named in infos.items():
        assert set(named) <= set(ops.get(osd, {})), (osd, named, ops)
    bench = {osd: k for osd, named in infos.items()
             for k, n in named.items() if n == "client." + BENCH_ID}
    assert bench, (infos, counted["stderr"])
