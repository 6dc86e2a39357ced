"""Real-cluster tier, multi-host lab (3 hosts, 1 ms links): one op end to
end. One osdstage tracer per host (its
namespace, -w), rbdrecord around a fio rbd client in the client's
namespace; `osdstage.py -r h1 h2 h3 client --op REQID` joins them by
request id: the client on the primary it sent to, the replicas on the two
other hosts, segments that add up to the client's own latency, and every
link crossed carrying its delay."""
import json
import os
import random
import sys

import pytest

from conftest import (OSDSTAGE, REPO, assert_one_line_error,
                      fio_rbd_job, lab_run, net_delay, read_fio_lat_log,
                      run_tool, trace_hosts)

sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.capture.reader import Capture              # noqa: E402
from cephlat.ceph import objecter                       # noqa: E402
from cephlat.model.breakdown import SELF, image_name    # noqa: E402
from cephlat.rbd.reader import RbdTrace                 # noqa: E402

DELAY_US = 1000          # the lab_hosts fixture's LAB_NET_DELAY


def _capture(lab_hosts, d, ios, depth, seed, rw="randrw", env_of=None):
    """One tracer per host (-w) around fio (fio_rbd_job(ios, depth, seed,
    rw=rw)) under rbdrecord in the client's namespace -> the captures,
    the trace and what they hold, fio's report and its latency of each
    call, and the wire's lateness ("late_us": the most, over the links,
    its wake-ups added per packet beyond the link's delay, mean). env_of:
    {host index: extra environment of its tracer}."""
    got = trace_hosts(lab_hosts, d, fio_rbd_job(
        ios, depth, seed, rw=rw, lat_log=str(d / "fio")), env_of=env_of)
    caps, trace, late = got["caps"], got["trace"], got["late_us"]
    tr = RbdTrace(trace)
    data = [o for o in tr.osd_ops.values() if o.data_object()]
    return {"caps": caps, "trace": trace, "ops": tr.osd_ops, "data": data,
            "requests": tr.requests, "osds": len(lab_hosts["netns"]),
            "fio": got["fio"],
            "fio_lat": _fio_per_call(tr.requests, str(d / "fio")),
            "depth": depth, "late_us": late}


def _fio_per_call(requests, prefix):
    """{id(call): fio's total latency of it, us}: fio's per-op log joined
    with the trace's calls by kind and offset, in submit order."""
    logged = read_fio_lat_log(prefix)
    got = {}
    for r in sorted(requests, key=lambda r: r.submit):
        values = logged.get((r.op, r.off))
        assert values, ("no fio latency for", r.op, r.off)
        got[id(r)] = values.pop(0) / 1000.0
    assert not any(logged.values()), "fio ops not in the trace"
    return got


@pytest.fixture(scope="module")
def e2e(lab_hosts, tmp_path_factory):
    return _capture(lab_hosts, tmp_path_factory.mktemp("e2e"),
                    400, 4, 7)


SLOW_US = 6000           # the slowed host's link


@pytest.fixture(scope="module")
def slowed(lab_hosts, tmp_path_factory):
    """The same with the last host's link slowed to SLOW_US: writes only.
    -> (its capture set, the OSD on that host)"""
    host = lab_hosts["netns"][-1]
    net_delay(host, SLOW_US)
    try:
        got = _capture(lab_hosts, tmp_path_factory.mktemp("slowed"),
                       240, 4, 11, rw="randwrite")
    finally:
        net_delay(host, DELAY_US)
    return got, "osd.%d" % (len(lab_hosts["netns"]) - 1)


@pytest.fixture(scope="module")
def unloaded(lab_hosts, tmp_path_factory):
    """e2e's ops one at a time (depth 1), 1-ms links: the network segments
    of ops that do not queue behind each other. (With e2e's 4 in flight a
    segment holds the messengers' queueing too, and its share changes
    with the delay: on the 2 cores the lab's wire, a process of its own,
    and the messengers took 470-860 us p50 on a replica's way out at 0 ms
    and 4 deep, 360-620 us on top of the delay at 1 ms, against 200-390
    us unloaded at 0 ms.)"""
    return _capture(lab_hosts, tmp_path_factory.mktemp("unloaded"),
                    400, 1, 7)


SKEW_MS = 50             # the skewed host's fake clock skew: far above
                         # any network segment here, so that its sign
                         # shows which ops crossed it


@pytest.fixture(scope="module")
def skewed(lab_hosts, tmp_path_factory):
    """e2e's ops one at a time (depth 1) with every link's delay at 0:
    the unloaded messengers' own time, the baseline of `unloaded` (below);
    the last host's tracer
    recording as if its wall clock were SKEW_MS ahead and its own (the
    lab's hosts share one kernel: a lab aid). -> (its capture set, that
    host's capture, its OSD)"""
    last = len(lab_hosts["netns"]) - 1
    net_delay("all", 0)
    try:
        got = _capture(lab_hosts, tmp_path_factory.mktemp("skewed"),
                       400, 1, 7,
                       env_of={last: {"OSDSTAGE_FAKE_CLOCK_SKEW":
                                      "%dms" % SKEW_MS}})
    finally:
        net_delay("all", DELAY_US)
    return got, got["caps"][last], "osd.%d" % last


CAP = 4                  # osd_client_message_cap of the capped run
CAPPED_DEPTH = 64


@pytest.fixture(scope="module")
def capped(lab_hosts, e2e, tmp_path_factory):
    """Random reads 64 deep (of the objects e2e's run wrote) with every
    OSD's osd_client_message_cap at 4: the client's ops wait for the
    OSD's messenger to take them (the throttle is full; its connection
    retries every 1 ms)."""
    def config(*args):
        p = lab_run(lab_hosts, "ceph", "config", *args)
        assert p.returncode == 0, p.stderr
    config("set", "osd", "osd_client_message_cap", str(CAP))
    try:
        return _capture(lab_hosts, tmp_path_factory.mktemp("capped"),
                        1200, CAPPED_DEPTH, 17, rw="randread")
    finally:
        config("rm", "osd", "osd_client_message_cap")


def story(e2e, reqid):
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] + [e2e["trace"], "--op",
                                                   reqid, "-j"], timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _pick(e2e, write, n=6):
    ops = [o for o in e2e["data"]
           if bool(o.flags & objecter.FLAG_WRITE) == write]
    assert len(ops) >= n, len(ops)
    return random.Random(5).sample(ops, n)


def taken(r):
    """When the application took the call's result: fio releases the
    completion when it reaps it, after librbd's callback."""
    return r.released if r.released is not None else r.done


def _check_client(s, op):
    c = s["client"]
    assert c["osd"] == "osd.%d" % op.osd and c["primary"] == c["osd"], c
    # the op's librbd call, from its call to the application's callback
    r = op.request
    assert r is not None and c["call"]["osd_ops"] == [op.reqid], c
    assert (c["call"]["offset"], c["call"]["length"]) == (r.off, r.len)
    # the segments add up to the call's latency, as the client saw it
    total = _latency_us(r)
    assert abs(c["total_us"] - total) <= 0.2, (c, total)
    parts = [g["us"] for g in c["segments"]]
    assert None not in parts, c
    assert abs(sum(parts) - c["total_us"]) <= 0.1 * len(parts), c
    assert c["clock_disagreement_us"] is None, c      # one host's clocks
    by = {g["segment"]: g["us"] for g in c["segments"]}
    assert [g["segment"] for g in c["segments"]] == [
        "librbd", "to_osd", "messenger", "osd", "to_client", "completion",
        "librbd_done", "application"], c
    # each crosses one delayed link (the sender's): the client's, then
    # the primary's
    assert by["to_osd"] >= DELAY_US, by
    assert by["to_client"] >= DELAY_US, by
    assert all(v >= 0 for v in by.values()), by
    return by


def test_a_write_end_to_end(e2e):
    """Several writes, each: the client on its primary, the two replicas
    on the other hosts with their way out and back over delayed links,
    the segments adding up to the client's latency."""
    for op in _pick(e2e, write=True):
        s = story(e2e, op.reqid)
        assert s["reqid"] == op.reqid
        by = _check_client(s, op)
        roles = {name: [r["role"] for r in rows]
                 for name, rows in s["osds"].items()}
        prim = "osd.%d" % op.osd
        assert "primary" in roles[prim], roles
        reps = {r["replica"]: r for r in s["replicas"]}
        assert set(reps) == {"osd.%d" % i for i in range(e2e["osds"])} - \
            {prim}, (reps, roles)
        assert sum(r["last"] for r in reps.values()) == 1
        for name, r in reps.items():
            assert "replica" in roles[name], roles
            assert r["out_us"] >= DELAY_US and r["back_us"] >= DELAY_US, r
            # out + replica + back is the primary's own wait for it
            assert abs(r["out_us"] + r["replica_us"] + r["back_us"] -
                       r["wait_us"]) <= 0.3, r
            assert r["wait_us"] <= by["osd"], (r, by)


def test_a_read_end_to_end(e2e):
    for op in _pick(e2e, write=False):
        s = story(e2e, op.reqid)
        _check_client(s, op)
        assert "replicas" not in s
        assert list(s["osds"]) == ["osd.%d" % op.osd], s["osds"].keys()


def test_text_names_the_segments(e2e):
    op = _pick(e2e, write=True, n=1)[0]
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] + [e2e["trace"], "--op",
                                                   op.reqid], timeout=120)
    assert p.returncode == 0, p.stderr
    for word in ("END TO END", "librbd write of 4096 bytes", "to_osd",
                 "to_client", "REPLICAS", "(last)"):
        assert word in p.stdout, p.stdout[:3000]


@pytest.mark.parametrize("client, extra", [
    (False, []), (False, ["--slowest", "3"]),
    (True, ["--op-class", "write"]), (True, ["--html", "x.html"]),
])
def test_several_inputs_take_op_or_the_table(e2e, client, extra):
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] +
                 ([e2e["trace"]] if client else []) + extra)
    assert_one_line_error(p, "read together for one op's story")


def test_a_client_trace_alone_is_refused(e2e):
    p = run_tool([OSDSTAGE, "-r", e2e["trace"], "--op", "client.1.0:1"])
    assert_one_line_error(p, "no osdstage capture")


def _latency_us(r):
    """A call's latency as the trace has it: the call -> the application
    taking the result."""
    return (taken(r) - r.submit) / 1000.0


def _drained(e):
    """The calls fio reaped in its final drain: at the end of a job fio
    waits for every op still in flight and stamps them all then, so
    their fio latency runs to the last one's end. Those released after
    fio's last call."""
    last = max(r.submit for r in e["requests"])
    return {id(r) for r in e["requests"] if taken(r) > last}


def _check_fio_per_call(e, calls):
    """fio's total latency of each call (its per-op log: from before its
    call into the engine to its completion stamp, on the traces' clock)
    holds the call's as the trace has it; over the calls not reaped in
    fio's final drain (at most its depth), p50 and p99 of each kind
    within 5 % of fio's. fio's clat would start once rbd_aio_* returned:
    a call that took long shows less there than the application waited
    (measured: 1.3 ms less, 64 in flight)."""
    fio = e["fio_lat"]
    short = [(r.op, r.off, _latency_us(r), fio[id(r)]) for r in calls
             if fio[id(r)] < _latency_us(r)]
    assert not short, short[:5]
    drained = _drained(e)
    assert 0 < len(drained) <= e["depth"], len(drained)
    for kind in sorted({r.op for r in calls}):
        kept = [r for r in calls if r.op == kind and id(r) not in drained]
        ours = sorted(_latency_us(r) for r in kept)
        theirs = sorted(fio[id(r)] for r in kept)
        for q in (0.5, 0.99):
            i = min(len(ours) - 1, int(len(ours) * q))
            assert abs(ours[i] - theirs[i]) <= 0.05 * theirs[i], (
                kind, q, ours[i], theirs[i])


def _table_calls(e, res, kind):
    """The latencies, rounded as the table rounds them, of the calls the
    end-to-end table counts under `kind`: those that became OSD ops, all
    of them finished."""
    unfinished = set(res["unfinished"]["reqids"])
    # tenths of a us, halves up, from the integer ns
    return sorted((taken(r) - r.submit + 50) // 100 / 10.0
                  for r in e["requests"]
                  if r.op == kind and r.osd_ops and
                  not any(o.reqid in unfinished for o in r.osd_ops))


def test_calls_match_fios_latency(e2e):
    """The calls' latencies as the trace has them (the call -> the
    application taking the result: fio releases the completion when it
    reaps it, after librbd's callback) are fio's own, call by call (fio's
    per-op log, joined by kind and offset)."""
    assert all(r.released is not None and r.released >= r.done
               for r in e2e["requests"])
    for kind in ("read", "write"):
        assert sum(1 for r in e2e["requests"] if r.op == kind) == \
            e2e["fio"][kind]["total_ios"], kind
    _check_fio_per_call(e2e, e2e["requests"])


def test_the_table_of_every_op(e2e):
    """-r CAPTURES TRACE: every call's op joined with its primary, reads
    and writes apart; each p50 of a network segment carries the link's
    delay; the total is the calls' latency as the trace has it (fio's:
    test_calls_match_fios_latency), exactly at p50 and p99."""
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] + [e2e["trace"], "-j"],
                 timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["type"] == "end_to_end"
    linked = [o for o in e2e["data"] if o.request is not None]
    assert linked == [o for o in e2e["data"]]
    # a read of an object never written has no op (object map)
    assert res["client_ops"] == len(linked) == sum(
        1 for r in e2e["requests"] if r.osd_ops)
    # the tracers ran the whole time: every op's primary is captured,
    # and each completed there, but reads of objects not yet written
    # (ENOENT: no completion, no latency counted by Ceph either)
    u = res["unfinished"]
    assert res["joined"] + u["ops"] == res["client_ops"], res
    kind = {o.reqid: o.kind for o in linked}
    assert all(kind[r] in ("read", "sparse-read") for r in u["reqids"]), (
        u, [kind[r] for r in u["reqids"]])
    for kind, t in res["kinds"].items():
        assert t["unknown"] == 0, t
        by = {g["segment"]: g for g in t["segments"]}
        assert list(by) == ["librbd", "to_osd", "messenger", "osd",
                            "to_client", "completion", "librbd_done",
                            "application",
                            "total"], list(by)
        assert by["to_osd"]["p50_us"] >= DELAY_US, by["to_osd"]
        assert by["to_client"]["p50_us"] >= DELAY_US, by["to_client"]
        lat = _table_calls(e2e, res, kind)
        assert len(lat) == t["ops"], (kind, len(lat), t["ops"])
        assert by["total"]["p50_us"] == lat[int(len(lat) * 0.5)], by
        assert by["total"]["p99_us"] == \
            lat[min(len(lat) - 1, int(len(lat) * 0.99))], by
        # the segments' means add up to the total's
        assert abs(sum(g["mean_us"] for k, g in by.items()
                       if k != "total") - by["total"]["mean_us"]) <= 1.0


def test_the_clients_slowest_are_the_merged_views_slowest(e2e):
    """--slowest with the captures and the trace: the ops of the
    client's slowest calls (its own latencies, from the trace alone),
    with the same request ids, in the same order, each split into
    segments that add up to its latency."""
    n = 10
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] +
                 [e2e["trace"], "--slowest", str(n), "-j"], timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    got, unfinished = res["slowest"], set(res["unfinished"]["reqids"])

    def key(o):
        # its latency in us to 0.1, halves up from the integer ns, as
        # every time the tool prints is (Python's round() takes a float's
        # halves to even: 19357.25 us to 19357.2)
        c, _, tid = o.reqid.rpartition(":")
        ns = int(taken(o.request) - o.request.submit)
        return (-((ns + 50) // 100) / 10.0, c, int(tid))
    want = sorted((o for o in e2e["data"] if o.request is not None and
                   o.reqid not in unfinished), key=key)[:n]
    assert [g["reqid"] for g in got] == [o.reqid for o in want], (got, want)
    for g, o in zip(got, want):
        assert g["total_us"] == -key(o)[0]
        assert g["primary"] == "osd.%d" % o.osd
        assert abs(sum(g["segments"].values()) - g["total_us"]) <= \
            0.1 * len(g["segments"]), g
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] +
                 [e2e["trace"], "--slowest", "3"], timeout=300)
    assert p.returncode == 0, p.stderr
    rows = p.stdout.split("SLOWEST CALLS")[1].splitlines()[2:5]
    assert [r.split()[0] for r in rows] == [g["reqid"] for g in got[:3]]


def test_a_slowed_hosts_replica_is_named_with_the_network(slowed):
    """One host's link slowed: the verdict names its OSD as the replica
    that held the writes up, and the network (its way back carries the
    slow link), not its queue."""
    e, slow_osd = slowed
    p = run_tool([OSDSTAGE, "-r"] + e["caps"] + [e["trace"], "-j"],
                 timeout=300)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)["replication"]
    v = rep["verdict"]
    assert v["replica"] == slow_osd and v["cause"] == "network", rep
    assert v["last_pct"] >= 90, rep
    slow = rep["replicas"][slow_osd]
    assert slow["back_p50_us"] >= SLOW_US, slow
    for name, d in rep["replicas"].items():
        if name != slow_osd:
            assert d["back_p50_us"] < SLOW_US, rep
            assert d["out_p50_us"] >= DELAY_US, rep
    p = run_tool([OSDSTAGE, "-r"] + e["caps"] + [e["trace"]], timeout=300)
    assert "VERDICT: %s was the last replica" % slow_osd in p.stdout
    assert "the time went to the network, not to its queue" in p.stdout


def _by(e, key):
    p = run_tool([OSDSTAGE, "-r"] + e["caps"] + ["--by", key, "-j"],
                 timeout=300)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["type"] == "breakdown", rec
    return rec["by"]


def test_by_client_image_and_pool_name_the_one_client(e2e):
    """The three hosts' captures broken down (--by): the one client's
    writes and reads are the data ops, on its image (the id of the
    trace's object names, by its name where the captures recorded the
    cluster's names) in one pool; it dominates each table."""
    data = [o for o in e2e["data"] if o.reply is not None]
    client = {o.reqid.rsplit(".", 1)[0] for o in data}
    names = Capture(e2e["caps"][0]).cluster_names
    image = {image_name(o.data_object()[0][len("rbd_data."):],
                        names.get("images", {})) for o in data}
    pool = {names.get("pools", {}).get(str(o.pgid).split(".")[0]) or
            "pool %d" % int(str(o.pgid).split(".")[0]) for o in data}
    assert len(client) == len(image) == len(pool) == 1, (client, image)
    by = _by(e2e, "client")
    # (the tracers' own look-ups of the cluster's names, when one came
    # after its tracer attached, are said as such)
    keys = {r["key"]: r for r in by["rows"] if not r["key"].endswith(SELF)}
    assert set(keys) <= client | {"unknown"}, keys
    row = keys[client.pop()]
    # every data op the client saw answered, and its header's and
    # open's ops (not data: an image's data ops are counted below)
    assert row["ops"] >= len(data), (row, len(data))
    assert by["dominant"]["key"] == row["key"], by
    by = _by(e2e, "image")
    keys = {r["key"]: r for r in by["rows"]}
    # a read of an object never written is answered (ENOENT) before it
    # runs: no op stats, as in Ceph's own op_r; every other data op is
    # the image's
    written, unwritten = set(), 0
    for o in sorted(data, key=lambda o: o.send):
        if o.flags & objecter.FLAG_WRITE:
            written.add(o.object)
        elif o.object not in written:
            unwritten += 1
    got = keys[image.pop()]["ops"]
    assert len(data) - unwritten <= got <= len(data), (keys, len(data),
                                                       unwritten)
    by = _by(e2e, "pool")
    assert [r["key"] for r in by["rows"]] == [pool.pop()], by
    assert by["rows"][0]["ops"] == by["ops"]


def test_no_replica_is_named_when_none_is_slow(e2e):
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] + [e2e["trace"], "-j"],
                 timeout=300)
    v = json.loads(p.stdout)["replication"]["verdict"]
    assert v["replica"] is None, v


def test_captures_of_one_kernel_line_up_without_a_warning(e2e):
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] + [e2e["trace"], "-j"],
                 timeout=300)
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr
    clocks = json.loads(p.stdout)["clocks"]
    assert [c["file"] for c in clocks] == e2e["caps"] + [e2e["trace"]]
    assert all(c["clock"] == "the first capture's" for c in clocks), clocks


def _e2e_json(e, extra=()):
    p = run_tool([OSDSTAGE, "-r"] + e["caps"] + [e["trace"], "-j"] +
                 list(extra), timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def test_a_skewed_hosts_clock_is_found_out_and_can_be_given(skewed):
    """A host whose wall clock was SKEW_MS ahead: without its offset, the
    merge says its clock is another one (and, where the host's time
    daemon does not vouch for it, warns in one line naming that capture
    alone), and every op that crossed it has a network segment below
    zero: those ops are left out and counted, never shown with a negative
    time, and the others are whole. Given the offset (--clock-offset
    FILE=+SKEW), the merge is whole again: no op left out, each network
    segment's p50 carrying the link's delay."""
    e, cap, osd = skewed
    res, err = _e2e_json(e)
    ck = {c["file"]: c for c in res["clocks"]}
    assert ck[cap]["clock"] == "another", ck
    assert all(c["clock"] == "the first capture's" for f, c in ck.items()
               if f != cap), ck
    if not ck[cap]["synced"]:
        assert err.count("\n") == 1 and "warning: %s: another host's " \
            "clock" % cap in err, err
    # the ops whose primary is on the skewed host: each has its to_client
    # below zero (the reply seems to arrive before it was sent)
    unfinished = set(res["unfinished"]["reqids"])
    through = sum(1 for o in e["data"] if o.request is not None and
                  "osd.%d" % o.osd == osd and o.reqid not in unfinished)
    assert through > 0
    assert sum(t["unknown"] for t in res["kinds"].values()) == through, res
    assert res["replication"]["unknown"] > 0, res["replication"]
    for t in res["kinds"].values():
        for g in t["segments"]:
            assert g["p50_us"] >= 0 and g["mean_us"] >= 0, g
    # given: all back, the network segments as on a lab of one clock
    res, err = _e2e_json(e, ["--clock-offset", "%s=+%dms" % (cap, SKEW_MS)])
    assert "warning" not in err, err
    assert [c["offset_given_us"] for c in res["clocks"]
            if c["file"] == cap] == [SKEW_MS * 1000.0]
    assert res["joined"] + res["unfinished"]["ops"] == res["client_ops"]
    assert res["joined"] == sum(t["ops"] for t in res["kinds"].values())
    assert res["replication"]["unknown"] == 0, res["replication"]
    for kind, t in res["kinds"].items():
        by = {g["segment"]: g for g in t["segments"]}
        for seg in ("to_osd", "to_client"):     # 0-delay links
            assert 0 <= by[seg]["p50_us"] < DELAY_US, (kind, by[seg])


def test_network_segments_carry_the_links_delay(unloaded, skewed):
    """Each network segment's p50 with 1-ms links carries the delay: at
    least the delay (each crosses one delayed link: nothing arrives
    sooner), at most its p50 with 0-ms links plus the delay, plus 20 %,
    both unloaded (one op at a time: the messengers' own time; the skewed
    run, its clock given): the client's way to its primary and back, and
    each replica's way out and back. (Not at least 80 % of the 0-ms p50
    plus the delay: with 0-ms links the next op comes sooner and the
    messengers' own time is longer, not a constant to add: a replica's
    way out took 686 us at 0 ms and 338 us on top of the delay at 1 ms
    in one run beside a busy loop.)"""
    base, _ = _e2e_json(skewed[0], ["--clock-offset", "%s=+%dms" % (
        skewed[1], SKEW_MS)])
    got, _ = _e2e_json(unloaded)

    def p50s(res):
        out = {}
        for kind, t in res["kinds"].items():
            for g in t["segments"]:
                if g["segment"] in ("to_osd", "to_client"):
                    out[(kind, g["segment"])] = g["p50_us"]
        for name, d in res["replication"]["replicas"].items():
            out[(name, "out")] = d["out_p50_us"]
            out[(name, "back")] = d["back_p50_us"]
        return out
    b, g = p50s(base), p50s(got)
    assert set(b) == set(g) and len(b) >= 4 + 2 * 3, (b, g)
    # plus, above, what the wire's wake-ups added to a packet (its own
    # counters: a busier or slower machine wakes it later, never earlier)
    late = unloaded["late_us"]
    for k in b:
        want = DELAY_US + b[k]
        assert DELAY_US <= g[k] <= 1.2 * want + late, (k, g[k], b[k],
                                                       late)


def test_a_client_held_by_the_osds_message_cap(capped):
    """osd_client_message_cap 4 under 64 reads in flight: the client's
    time goes before the OSD's clock starts (to_osd: its messenger,
    the network and the socket's queue before the primary reads the
    message; messenger: the throttle's wait), not to the OSD; and the
    segments still add up to the client's own latency: the calls' as the
    trace has them (to the application taking the result: fio's
    rbd_aio_release), exactly at p50 and p99; and those are fio's own,
    call by call (_check_fio_per_call). How much goes before the OSD
    follows from the cap (Little's law: a segment's mean is the ops in it
    over the rate): CAP ops are in the OSD's hands, the others of the
    depth in the client or waiting before the OSD, up to (depth - CAP) /
    CAP = 15 times the OSD's own time; at least twice it is asked (the
    client keeping 50 of the 64 leaves 10 before the OSD), not a share of
    the whole latency (a busy client spends longer in its own segments:
    55 % of the total once)."""
    res, _ = _e2e_json(capped)
    t = res["kinds"]["read"]
    assert t["unknown"] == 0, t
    assert res["joined"] + res["unfinished"]["ops"] == res["client_ops"]
    by = {g["segment"]: g for g in t["segments"]}
    total = by["total"]
    before = by["to_osd"]["mean_us"] + by["messenger"]["mean_us"]
    assert before >= 2 * by["osd"]["mean_us"], by
    assert by["osd"]["mean_us"] <= 0.25 * total["mean_us"], by
    assert by["to_osd"]["p50_us"] >= 2 * DELAY_US, by["to_osd"]
    assert abs(sum(g["mean_us"] for k, g in by.items() if k != "total")
               - total["mean_us"]) <= 1.0, by
    lat = _table_calls(capped, res, "read")
    assert len(lat) == t["ops"], (len(lat), t["ops"])
    assert total["p50_us"] == lat[int(len(lat) * 0.5)], total
    assert total["p99_us"] == lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    _check_fio_per_call(capped, capped["requests"])


def test_pictures_of_one_op_across_hosts(e2e, tmp_path):
    """--op REQID --perfetto/--html with a capture per host and the
    client's trace: a process per OSD on its host and one for the
    client, the client's arrows to its primary and back, the primary's
    to each replica; every arrow in time order on the wall clock (one
    kernel here: exact) and bound to a slice at its end."""
    from test_replica_pictures import (Flows, enclosing, flow_pairs,
                                       processes, slices)
    from cephlat.render import perfetto
    op = _pick(e2e, write=True, n=1)[0]
    pf, html = tmp_path / "op.json", tmp_path / "op.html"
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] + [
        e2e["trace"], "--op", op.reqid, "--perfetto", str(pf), "--html",
        str(html)], timeout=300)
    assert p.returncode == 0, p.stderr
    trace = json.loads(pf.read_text())
    assert perfetto.validate(trace) == []
    procs = processes(trace)
    osds = ["osd.%d" % i for i in range(e2e["osds"])]
    assert sorted(n for n in procs.values() if n.startswith("osd.")) == osds
    assert [n for n in procs.values() if n.startswith("client")], procs
    sl = slices(trace)
    for name in ("client request", "client response"):
        pairs = flow_pairs(trace, name)
        kind = name.split()[1]
        s, f = pairs["%s:%s" % (kind, op.reqid)]
        assert s["ts"] <= f["ts"], (name, s, f)
        assert enclosing(sl, f), (name, f)
    repops = {k: v for k, v in flow_pairs(trace, "repop").items()
              if op.reqid in k}
    assert len(repops) == e2e["osds"] - 1, repops
    for s, f in repops.values():
        assert s["ts"] <= f["ts"] and enclosing(sl, f), (s, f)
    page = Flows(html.read_text())
    assert sorted(page.bands) == osds
    mine = {a["data-flow"] for a in page.flows
            if a["data-reqid"] == op.reqid}
    assert {"request", "response", "repop"} <= mine, mine
