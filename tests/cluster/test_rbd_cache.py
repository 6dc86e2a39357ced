"""Real-cluster tier, multi-host lab (3 hosts, 1 ms links, the second
host's link slowed): end to end with librbd's cache as clients run it.
One osdstage tracer per host (-w), rbdrecord around a fio rbd client in
the client's namespace, `osdstage.py -r h1 h2 h3 client` over them, for
each cache policy:

- librbd's defaults (rbd_cache on, writearound; fio's direct=0 flushes
  the image as it opens it, so the cache acknowledges each write at
  once): the client's writes outrun the cluster;
- the same with rbd_cache_max_dirty small: the cache holds the client,
  and the verdict names the slowed host;
- rbd_cache=false, writethrough, writeback with fsyncs.

No segment is ever negative; the client's latency is fio's; the OSD side
behind the acknowledgement adds up to the OSD ops' own spans."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import (OSDSTAGE, PYTHON, RBDRECORD, REPO, fio_rbd_job,
                      net_delay, read_fio_lat_log, trace_hosts)

sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.ceph import objecter                       # noqa: E402
from cephlat.rbd.reader import RbdTrace                 # noqa: E402

DELAY_US = 1000          # the lab_hosts fixture's LAB_NET_DELAY
SLOW_US = 4000           # the slowed host's link
SLOW = 1                 # the slowed host: the second (its OSD: osd.1)
IOS, DEPTH = 2000, 8
# the policies' client settings ([client] lines), fio's direct and extra
# job lines
POLICIES = {
    "writearound": ([], 0, ""),
    "held": (["rbd_cache_max_dirty = 16384"], 0, ""),
    "off": (["rbd_cache = false"], 0, ""),
    "writethrough": (["rbd_cache_policy = writethrough"], 0, ""),
    "writeback": (["rbd_cache_policy = writeback"], 0, "fsync=16\n"),
}
# the kind of the end-to-end table that holds the application's writes
KIND = {"writearound": "write_acked", "held": "write_acked",
        "off": "write", "writethrough": "write"}
# a table's p50 against fio's: the table holds each op's first call (a
# merged op's others are left out) and fio's latency includes its own
# stamps around the call, a few us: at 0.1 ms, a few %
P50_TOLERANCE = 0.10
# the share of the writes that become ops of their own at least (the
# rest merged into an earlier write's op: _linked)
MERGED = 0.5
# a watch op's kind in the trace (CEPH_OSD_OP_WATCH)
WATCH = "0x220f"


@pytest.fixture(scope="module")
def slowed_link(lab_hosts):
    """The second host's link slowed to SLOW_US for the module: -> the
    OSD on it."""
    host = lab_hosts["netns"][SLOW]
    net_delay(host, SLOW_US)
    yield "osd.%d" % SLOW
    net_delay(host, DELAY_US)


def _run(lab_hosts, d, policy):
    """One capture set of `policy` -> {"e2e": osdstage -r's JSON, "text":
    its report, "summary": rbdrecord --summary's JSON, "fio", "calls":
    the trace's calls, "ops": its OSD ops, "fio_lat": {id(call): us}}"""
    conf, direct, extra = POLICIES[policy]
    got = trace_hosts(lab_hosts, d, fio_rbd_job(
        IOS, DEPTH, 5, rw="randwrite", lat_log=str(d / "fio"),
        direct=direct, extra=extra), conf=conf)
    args = got["caps"] + [got["trace"]]
    out = {}
    for key, more in (("e2e", ["-j"]), ("text", [])):
        p = subprocess.run([PYTHON, OSDSTAGE, "-r"] + args + more,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        out[key] = json.loads(p.stdout) if more else p.stdout
    p = subprocess.run([PYTHON, RBDRECORD, "--summary", got["trace"],
                        "--json"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    out["summary"] = json.loads(p.stdout)
    tr = RbdTrace(got["trace"])
    out["calls"] = tr.requests
    out["ops"] = tr.osd_ops
    out["fio"] = got["fio"]
    logged = read_fio_lat_log(str(d / "fio"))
    out["fio_lat"] = {}
    for r in sorted(tr.requests, key=lambda r: r.submit):
        if r.op == "write":
            out["fio_lat"][id(r)] = logged[("write", r.off)].pop(0) / 1000.0
    return out


@pytest.fixture(scope="module")
def runs(lab_hosts, slowed_link, tmp_path_factory):
    """Each policy's capture set; the defaults, the held client and
    writeback twice (their verdicts, and writeback's flush waves, are
    what can change from one run to the next)."""
    out = {}
    for policy in POLICIES:
        times = 2 if policy in ("writearound", "held", "writeback") else 1
        out[policy] = [_run(lab_hosts, tmp_path_factory.mktemp(
            "%s%d" % (policy, i)), policy) for i in range(times)]
    return out


def _tables(res):
    """Every segment table of an end-to-end result: (name, table)."""
    for kind, t in res["kinds"].items():
        yield kind, t
    if res.get("acked"):
        yield "behind", res["acked"]["behind"]


@pytest.mark.parametrize("policy", list(POLICIES))
def test_no_segment_is_ever_negative(runs, policy):
    for run in runs[policy]:
        res = run["e2e"]
        # every op completed on its primary but those answered with an
        # error (no completion, no latency counted by Ceph either): only
        # the image header's watch ops can be (seen once: the last op
        # before the image closed, dequeued and answered in 47 us), never
        # a data op
        u = res["unfinished"]
        assert res["joined"] + u["ops"] == res["client_ops"] > 0, res
        assert all(run["ops"][r].object.startswith("rbd_header.") and
                   run["ops"][r].kind == WATCH for r in u["reqids"]), [
            (r, run["ops"][r].object, run["ops"][r].kind)
            for r in u["reqids"]]
        for name, t in _tables(res):
            assert not t.get("out_of_order"), (name, t)
            for s in t["segments"]:
                for k in ("p50_us", "p99_us", "mean_us", "p99_ops_mean_us"):
                    assert s[k] >= 0, (policy, name, s)
        # nor in the report's text: no table row holds a minus sign
        for line in run["text"].splitlines():
            if line[:1].islower() and " -" in line:
                assert not any(w.startswith("-") and w[1:2].isdigit()
                               for w in line.split()), line


def _fio_p50(run, drained=DEPTH):
    """fio's p50 write latency (us), of the calls before its final drain
    (at the end fio waits for all in flight and stamps them then)."""
    v = [run["fio_lat"][id(r)] for r in sorted(
        run["calls"], key=lambda r: r.submit) if r.op == "write"]
    v = sorted(v[:-drained])
    return v[len(v) // 2]


@pytest.mark.parametrize("policy", list(KIND))
def test_the_clients_latency_is_fios(runs, policy):
    """The table of the application's writes (acknowledged by the cache
    or after the OSDs) has fio's p50; every call is inside fio's own
    latency of it."""
    for run in runs[policy]:
        t = run["e2e"]["kinds"][KIND[policy]]
        assert t["ops"] == len(_linked(run)) >= MERGED * IOS, t["ops"]
        total = [s for s in t["segments"] if s["segment"] == "total"][0]
        fio = _fio_p50(run)
        assert abs(total["p50_us"] - fio) <= P50_TOLERANCE * fio, (
            policy, total, fio)
        for r in run["calls"]:
            if r.op == "write":
                taken = r.released if r.released is not None else r.done
                assert (taken - r.submit) / 1000.0 <= \
                    run["fio_lat"][id(r)] + 0.1, (r.off, r.submit)
        other = {"write": "write_acked", "write_acked": "write"}
        assert other[KIND[policy]] not in run["e2e"]["kinds"], policy


def _linked(run):
    """The trace's data writes linked to their call, answered: each is
    a row of the end-to-end table. Under a flood librbd's I/O scheduler
    merges an object's adjacent queued writes into one op (the first
    write's): 157 of 2000 here unloaded, 333 beside a busy loop."""
    return [o for o in run["ops"].values()
            if o.data_object() and o.request is not None and
            o.flags & objecter.FLAG_WRITE and o.reply is not None and
            o.done is not None]


def _seg(t, name):
    return [s for s in t["segments"] if s["segment"] == name][0]


@pytest.mark.parametrize("policy", ["writearound", "held"])
def test_behind_the_ack_adds_up_to_the_osd_ops_own_spans(runs, policy):
    """Behind the acknowledgement, the OSD path (to the primary, its
    messenger, the primary, the reply) is each op's own span in the
    client's trace (send -> reply), mean for mean; and the call to the
    cache's done is the way it went: librbd, held, the client's queue,
    the OSD path, the cache seeing it done."""
    for run in runs[policy]:
        b = run["e2e"]["acked"]["behind"]
        a = run["e2e"]["kinds"]["write_acked"]
        spans = [(o.reply - o.send) / 1000.0 for o in _linked(run)]
        assert b["ops"] == a["ops"] == len(spans) >= MERGED * IOS, (
            b["ops"], a["ops"], len(spans))
        path = sum(_seg(b, k)["mean_us"] for k in ("to_osd", "messenger",
                                                   "osd", "to_client"))
        # each mean rounded to 0.1 us, each op's segment too
        assert abs(path - sum(spans) / len(spans)) <= 0.5, (
            path, sum(spans) / len(spans))
        way = _seg(a, "librbd")["mean_us"] + \
            _seg(a, "held_by_cache")["mean_us"] + path + sum(
                _seg(b, k)["mean_us"] for k in ("client_queue",
                                                "cache_done"))
        assert abs(way - _seg(b, "durable")["mean_us"]) <= 0.8, (
            way, _seg(b, "durable"))


def test_the_defaults_outrun_the_cluster_and_the_verdict_says_so(runs):
    """librbd's defaults: the cache acknowledges each write at once and
    hundreds go to the OSDs while fio waits for 8: the verdict is the
    flood (a queue at every primary), and the replicas' verdict does not
    contradict it."""
    for run in runs["writearound"]:
        c = run["summary"]["cache"]["images"]["img1"]
        assert c["policy"] == "writearound", c
        assert c["acked_early"] == c["writes"] == IOS, c
        a = run["e2e"]["acked"]
        v = a["verdict"]
        assert v["cause"] == "outran", v
        assert "outran the cluster" in v["words"]
        assert a["writes_in_flight"]["p50"] >= \
            4 * a["calls_in_flight"]["p50"], a
        assert a["calls_in_flight"]["max"] <= DEPTH, a
        # every primary the client's writes went to (the image's 16
        # objects fall in PGs of two OSDs or of all three: where CRUSH put
        # them)
        primaries = sorted({"osd.%d" % o.osd for o in _linked(run)})
        assert len(primaries) >= 2, primaries
        assert sorted(a["per_osd_in_flight"]) == primaries, a
        rv = run["e2e"]["replication"]["verdict"]
        assert rv["replica"] == v["replica"], (rv, v)


def test_a_client_held_by_the_cache_gets_the_slowed_host_named(
        runs, slowed_link):
    """rbd_cache_max_dirty of 4 writes: the cache holds the client, the
    verdict says so and names the slowed host's OSD and its network."""
    for run in runs["held"]:
        c = run["summary"]["cache"]["images"]["img1"]
        assert c["limit_bytes"] == 16384 and c["held"] >= 0.9 * IOS, c
        a = run["e2e"]["acked"]
        v = a["verdict"]
        assert v["cause"] == "behind" and v["replica"] == slowed_link, v
        assert "the cache's limit held the client" in v["words"]
        assert a["writes_in_flight"]["max"] <= 4, a
        rv = run["e2e"]["replication"]["verdict"]
        assert rv["replica"] == slowed_link and rv["cause"] == "network", rv
        held = _seg(run["e2e"]["kinds"]["write_acked"], "held_by_cache")
        assert held["p50_us"] >= 0.5 * _fio_p50(run), held


@pytest.mark.parametrize("policy", ["off", "writethrough"])
def test_writes_acked_after_the_osds_name_the_slowed_host(
        runs, slowed_link, policy):
    run = runs[policy][0]
    c = run["summary"]["cache"]["images"]["img1"]
    assert c["acked_early"] == 0, c
    if policy == "writethrough":
        assert c["policy"] == "writethrough" and \
            c["written_through"] == IOS, c
    assert "acked" not in run["e2e"]
    rv = run["e2e"]["replication"]["verdict"]
    assert rv["replica"] == slowed_link and rv["cause"] == "network", rv


def _median_within(values, p50, tol):
    """Is `p50` (fio's: the smallest value at least half the samples are
    at or below, to its histogram's resolution) a median of `values`
    within `tol`? Half of them at or below it, half at or above."""
    v = np.asarray(values)
    return np.sum(v <= p50 * (1 + tol)) >= 0.5 * len(v) and \
        np.sum(v < p50 * (1 - tol)) <= 0.5 * len(v)


@pytest.mark.parametrize("n", range(2))
def test_writeback_shows_the_writes_written_back_and_the_flushes(
        runs, slowed_link, n):
    """writeback: the application's writes are acknowledged from the
    ObjectCacher; it waits for the OSDs in its fsyncs (rbd_aio_flush):
    their latency is fio's, the cache's own writes have a table of their
    own, the replicas' verdict names the slowed host."""
    run = runs["writeback"][n]
    c = run["summary"]["cache"]["images"]["img1"]
    assert c["policy"] == "writeback" and c["acked_early"] == IOS, c
    syncs = run["fio"]["sync"]
    # the flush at open and fio's fsyncs
    assert c["user_flushes"] == syncs["total_ios"] + 1, (c, syncs)
    f = run["e2e"]["flushes"]
    assert f["calls"] == syncs["total_ios"], f
    # the flushes' table is the trace's flush calls ...
    spans = [(r.done - r.submit) / 1e3 for r in run["calls"]
             if r.op == "flush" and r.submit and r.done]
    assert len(spans) == f["calls"], (len(spans), f)
    assert abs(f["lat_us"]["p50"] - sorted(spans)[len(spans) // 2]) <= 0.1, (
        f, spans)
    # ... and those are fio's fsyncs: fio's median is theirs. (Not the
    # two p50s side by side: the flushes come in a few waves, 50 ms and
    # 350 ms long, and a median between two waves moves by a wave's step
    # with the rank a percentile is taken at: fio's is the lower of the
    # two middle ones, the table's the upper.)
    fio = syncs["lat_ns"]["percentile"]["50.000000"] / 1000.0
    assert _median_within(spans, fio, P50_TOLERANCE), (fio, spans)
    kinds = run["e2e"]["kinds"]
    assert "write_back" in kinds and "write" not in kinds, list(kinds)
    assert kinds["write_back"]["ops"] >= 0.5 * IOS, kinds["write_back"]
    assert "WRITES THE CACHE WROTE BACK" in run["text"]
    rv = run["e2e"]["replication"]["verdict"]
    assert rv["replica"] == slowed_link, rv
