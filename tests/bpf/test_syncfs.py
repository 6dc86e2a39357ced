"""BPF tier: the syncfs and block_rq kernel stages on a program that calls
syncfs(2) on a busy file system (BlueStore itself never calls syncfs), with
the program's own timing as ground truth; a kernel-stages-only probe spec."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import REPO, need, trace_until_exit, wait_for_line

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def syncer(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("syncer") / "syncer")
    subprocess.run(["gcc", "-O2", "-o", exe,
                    os.path.join(HERE, "progs", "syncer.c")], check=True)
    return exe


def start_syncer(exe, calls, mb):
    """-> (process waiting for its "go", its data directory)"""
    data = tempfile.mkdtemp(prefix="syncer-", dir="/var/tmp")
    prog = subprocess.Popen([exe, data, str(calls), str(mb)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    return prog, data


def test_syncfs_measured(bpf_ready, syncer):
    prog, data = start_syncer(syncer, 20, 8)
    try:
        truth, out, err, status = trace_until_exit(
            prog, ["--probes", os.path.join(HERE, "progs", "syncer.json"),
                   "-j"], banner="Tracing 0 stages + kernel")
    finally:
        os.rmdir(data)
    assert status == 0, err
    rec = json.loads(out)
    sf = rec["kernel"]["syncfs"]
    assert sf["count"] == truth["calls"] == 20
    assert abs(sf["mean_us"] - truth["mean_us"]) <= 0.10 * truth["mean_us"]
    # syncfs wrote the dirty data: block requests issued by this process
    br = rec["kernel"]["block_rq"]
    assert br["count"] > 0 and br["by_device"]
    assert sum(d["bytes"] for d in br["by_device"].values()) >= 8 << 20
    assert rec["threads"]["worker"]["threads"] == 1
    assert "syncfs: 20 calls" in rec["verdict"]


def test_syncfs_bt(bpf_ready, syncer):
    need(shutil.which("bpftrace") is not None, "bpftrace missing")
    prog, data = start_syncer(syncer, 5, 4)
    bt = subprocess.Popen(["bpftrace", os.path.join(REPO, "probes",
                                                    "syncfs.bt"),
                           str(prog.pid)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        wait_for_line(bt.stdout, "Hit Ctrl-C", 60)
        prog.stdin.write("go\n")
        prog.stdin.flush()
        prog.wait(60)
        time.sleep(0.5)
        bt.send_signal(signal.SIGINT)
        out, _ = bt.communicate(timeout=60)
    finally:
        for p in (prog, bt):
            if p.poll() is None:
                p.kill()
        os.rmdir(data)
    assert "syncfs calls: 5" in out
    assert "@syncfs_us[syncer]:" in out
