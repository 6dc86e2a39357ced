"""Real-cluster tier, multi-host lab (3 hosts, 1 ms links): one op end to
end (issue 26 item 4, first part). One osdstage tracer per host (its
namespace, -w), rbdrecord around a fio rbd client in the client's
namespace; `osdstage.py -r h1 h2 h3 client --op REQID` joins them by
request id: the client on the primary it sent to, the replicas on the two
other hosts, segments that add up to the client's own latency, and every
link crossed carrying its delay."""
import json
import os
import random
import signal
import subprocess
import sys

import pytest

from conftest import (OSDSTAGE, PYTHON, REPO, assert_one_line_error,
                      fio_rbd_job, run_tool, wait_for_line)

sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.ceph import objecter                       # noqa: E402
from cephlat.rbd.reader import RbdTrace                 # noqa: E402

RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")
DELAY_US = 1000          # the lab_hosts fixture's LAB_NET_DELAY


@pytest.fixture(scope="module")
def e2e(lab_hosts, tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    caps = [str(d / ("h%d.ctf" % i)) for i in range(len(lab_hosts["netns"]))]
    tracers = []
    try:
        for ns, cap in zip(lab_hosts["netns"], caps):
            t = subprocess.Popen([PYTHON, OSDSTAGE, "--osd", "all",
                                  "--host-netns", ns, "-w", cap],
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            tracers.append(t)
            wait_for_line(t.stderr, "Tracing", 60)
        (d / "job.fio").write_text(fio_rbd_job(400, 4, 7))
        trace = str(d / "client")
        p = subprocess.run(
            ["nsenter", "--net=/run/netns/" + lab_hosts["client_netns"],
             "--", sys.executable, RBDRECORD, "-o", trace, "--", "fio",
             str(d / "job.fio")], capture_output=True, text=True,
            timeout=300, env=dict(os.environ,
                                  CEPH_CONF=lab_hosts["CEPH_CONF"]))
        assert p.returncode == 0, p.stderr
        assert "none lost" in p.stderr, p.stderr
    finally:
        for t in tracers:
            t.send_signal(signal.SIGINT)
        for t in tracers:
            t.communicate(timeout=60)
    assert [t.returncode for t in tracers] == [0] * len(tracers)
    ops = RbdTrace(trace).osd_ops
    data = [o for o in ops.values() if o.object.startswith("rbd_data.")]
    return {"caps": caps, "trace": trace, "ops": ops, "data": data,
            "osds": len(lab_hosts["netns"])}


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


def _check_client(s, op):
    c = s["client"]
    assert c["osd"] == "osd.%d" % op.osd and c["primary"] == c["osd"], c
    # the segments add up to the client's own send -> completion
    total = (op.done - op.send) / 1000.0
    assert abs(c["total_us"] - total) <= 0.2, (c, total)
    parts = [g["us"] for g in c["segments"]]
    assert None not in parts, c
    assert abs(sum(parts) - c["total_us"]) <= 0.1 * len(parts), c
    assert c["clock_disagreement_us"] is None, c      # one host's clocks
    by = {g["segment"]: g["us"] for g in c["segments"]}
    assert [g["segment"] for g in c["segments"]] == [
        "to_osd", "messenger", "osd", "to_client", "completion"], c
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
    for word in ("END TO END", "to_osd", "to_client", "REPLICAS", "(last)"):
        assert word in p.stdout, p.stdout[:3000]


@pytest.mark.parametrize("extra, fragment", [
    ([], "read together for one op's story"),
    (["--slowest", "3"], "read together for one op's story"),
])
def test_several_inputs_need_op(e2e, extra, fragment):
    p = run_tool([OSDSTAGE, "-r"] + e2e["caps"] + [e2e["trace"]] + extra)
    assert_one_line_error(p, fragment)


def test_a_client_trace_alone_is_refused(e2e):
    p = run_tool([OSDSTAGE, "-r", e2e["trace"], "--op", "client.1.0:1"])
    assert_one_line_error(p, "no osdstage capture")
