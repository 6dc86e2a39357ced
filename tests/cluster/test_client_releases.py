"""Real-cluster tier, container labs (Reef 18.2, Tentacle 20.2): rbdrecord
records the OSD ops of a client of the release's own librbd -- `rbd bench`
inside the container, recorded by PID from the host, its hidden Objecter
copies found through the container's debug files (container.sh RELEASE
client-debug) -- with that release's Objecter offsets
(lib/cephlat/ceph/objecter.py). Against the OSD's own OpTracker: the same
request ids, PGs and objects; reads and writes told apart by their first
sub-op as by their flags. Three recordings per release."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import CONTAINER_LAB, REPO, container_process
from test_client_osdops import clear_history, historic, history_size, osd_ops

sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.ceph import objecter                       # noqa: E402
from cephlat.ceph.adminsock import command              # noqa: E402

RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")
SECS = 2
READS = {objecter.OSD_OPS[k] for k in ("CEPH_OSD_OP_READ",
                                       "CEPH_OSD_OP_SPARSE_READ")}
WRITES = {objecter.OSD_OPS["CEPH_OSD_OP_WRITE"]}
OBJECT_SIZE = 4 << 20           # rbd's default object size


@pytest.fixture(scope="module")
def ctr_recorded(container_lab, tmp_path_factory):
    lab = container_lab
    p = subprocess.run(["bash", CONTAINER_LAB, lab["release"],
                        "client-debug"], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr
    d = tmp_path_factory.mktemp("ctrops")
    before = command(lab["asok"], "config get", var="osd_op_history_size")[
        "osd_op_history_size"]
    runs = []
    try:
        for i in range(3):      # a behaviour that can fail now and then
            clear_history([lab["asok"]], 100000)
            runs.append(_record(lab, d / ("trace%d" % i)))
    finally:
        history_size(lab["asok"], before)
    return runs


def _record(lab, out):
    """rbd bench (4 KiB random reads and writes) in the container, recorded
    for SECS from the host by its PID; then stopped. -> (ops, history,
    rbdrecord's stderr)"""
    bench = subprocess.Popen(
        list(lab["exec"]) + ["rbd", "bench", "--io-type", "readwrite",
                             "--io-size", "4096", "--io-threads", "4",
                             "--io-total", "4G", "--io-pattern", "rand",
                             "--rw-mix-read", "50", "rbd/img1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        pid = container_process(lab["pid"], "rbd", bench)
        time.sleep(0.5)             # its image open, its ops flowing
        p = subprocess.run([sys.executable, RBDRECORD, "-p", str(pid), "-d",
                            str(SECS), "-o", str(out), "--force"],
                           capture_output=True, text=True, timeout=120)
    finally:
        try:
            os.kill(container_process(lab["pid"], "rbd", bench, 5),
                    signal.SIGINT)
        except AssertionError:
            pass
        bench.wait(timeout=60)
    assert p.returncode == 0, p.stderr
    assert "not recorded" not in p.stderr, p.stderr
    assert "none lost" in p.stderr, p.stderr
    return osd_ops(out)[0], historic(lab["asok"]), p.stderr


def _whole(ops):
    """The ops seen sent, replied and completed (not cut by the window)."""
    return {k: r for k, r in ops.items()
            if len(r["send"]) == len(r["reply"]) == len(r["done"]) == 1}


def test_client_ops_are_the_osds_own(ctr_recorded, container_lab):
    """Each op the client sent and saw completed within the recording is
    in the OSD's OpTracker under the same request id, PG and object
    (a wrong Objecter or Messenger offset gives other ids, or none)."""
    for ops, hist, err in ctr_recorded:
        whole = _whole(ops)
        assert len(whole) >= 100, (len(ops), len(whole), err)
        clients = {r["send"][0]["client"] for r in whole.values()}
        assert len(clients) == 1, clients
        for reqid, r in whole.items():
            s = r["send"][0]
            assert re.match(r"^client\.\d+\.\d+:\d+$", reqid), reqid
            assert reqid in hist, (container_lab["release"], reqid,
                                   sorted(hist)[:5])
            pgid, obj = hist[reqid]
            assert pgid == s["pgid"], (reqid, hist[reqid], s)
            assert obj in (None, s["object"]), (reqid, hist[reqid], s)
            assert s["osd"] == 0 and r["reply"][0]["osd"] == 0, r


def test_first_sub_op_matches_the_flags(ctr_recorded):
    """A data op's first data sub-op (read at OSDOp's size along the ops
    vector) is a read for a read op and a write for a write op, at a 4 KiB
    aligned extent; both kinds are there. A read is one 4 KiB read; a write
    is 4 KiB, or a few 4 KiB writes that touched each other within one
    object: librbd's default I/O scheduler (rbd_io_scheduler simple) merges
    those before they are sent -- most are single."""
    for ops, hist, err in ctr_recorded:
        kinds = {"read": 0, "write": 0, "merged": 0}
        for r in _whole(ops).values():
            s = r["send"][0]
            if not s["object"].startswith("rbd_data."):
                continue
            assert s["offset"] % 4096 == 0, s
            if s["flags"] & objecter.FLAG_WRITE:
                assert s["first_op"] in WRITES, s
                assert s["length"] in range(4096, OBJECT_SIZE + 1, 4096), s
                kinds["write"] += 1
                kinds["merged"] += s["length"] > 4096
            else:
                assert s["first_op"] in READS, s
                assert s["length"] == 4096, s
                kinds["read"] += 1
        assert kinds["read"] >= 20 and kinds["write"] >= 20, kinds
        assert kinds["merged"] <= kinds["write"] // 10, kinds
