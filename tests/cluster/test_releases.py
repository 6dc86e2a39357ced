"""The tracer on Ceph as operators run it: Reef (18.2.7, Debian trixie)
and Tentacle (20.2.4, Debian sid) OSDs in podman containers (the
container_lab fixture: once per release). Their binaries are CET builds
and cannot run on this Debian 12 host, whose own /usr/bin/ceph-osd at the
same path is Pacific's: everything below is read through /proc/PID.

Against each: the release is found in the binary, every stage resolves,
the probes go after endbr64, the op-class offsets are the binary's own
(machine code), and under 4 KiB random reads and writes the stages agree
with Ceph's own counters as in the Pacific tests; the kernel view,
attribution and verdict are there; -w then -r gives the identical report;
the bpftrace scripts attach and print."""
import json
import os
import subprocess
import time

import pytest

from cephlat.ceph import probetable
from cephlat.engine.elfsym import ElfSymbols

from conftest import (OSDSTAGE, PYTHON, Bench, assert_ctf_readers_accept,
                      in_report, prefill, run_tool, wait_for_line)

RBDRECORD = os.path.join(os.path.dirname(OSDSTAGE), "rbdrecord.py")
# the Pacific lab's accuracy tests, run here on this module's `runs`
from test_accuracy import (run_traced, test_op_total_bounded_by_ceph,  # noqa: F401
                           test_queue_wait_bounded_by_ceph,
                           test_the_ops_bytes_are_cephs)
from test_bpftrace import hist_total, kernel_scripts
from test_offsets import _check as offsets_match


def test_release_found_in_a_binary_that_cannot_run_here(container_lab):
    pid, version = container_lab["pid"], container_lab["version"]
    with ElfSymbols("/usr/bin/ceph-osd") as host:
        assert host.version_string().startswith("16.2.")   # not this one
    p = run_tool([OSDSTAGE, "--list", "-j"])
    assert p.returncode == 0, p.stderr
    row = next(o for o in json.loads(p.stdout)["osds"] if o["pid"] == pid)
    assert row["ceph_version"].startswith(version), row
    assert (row["probe_table"], row["probe_table_exact"], row["cet"]) == (
        version[:-1], True, True), row
    assert set(row["stages"].values()) == {"ok"}, row["stages"]
    # every probe of an op's path on an instruction the kernel emulates:
    # 20.2's two replica functions start with `sub $N,%rsp` and their
    # probes move to their first jcc (docs/ceph.md), and so do two of each
    # of its erasure-coded backends'; 18.2's all start with a push. 20.2's scrub
    # and snap-trim functions start with `sub` too, and a call stage's
    # entry cannot move (its return probe needs it): those two
    # single-step, once per background item, never per op; and its EC
    # shards' sub_write_committed (its tid is written before the first
    # emulated instruction), once per EC sub-write, never on a replicated
    # pool: its legacy backend's and its optimized one's.
    steps = {s["function"].split("(")[0] for s in row["probes_single_step"]}
    assert steps == ({"PG::forward_scrub_event",
                      "PrimaryLogPG::snap_trimmer",
                      "ECLegacy::ECBackendL::sub_write_committed",
                      "ECBackend::sub_write_committed"}
                     if version.startswith("20.2") else set()), row
    assert all(s["at"].startswith("sub rsp,")
               for s in row["probes_single_step"]), row
    moved = {m["function"].split("(")[0]: m for m in row["probes_moved"]}
    assert set(moved) == ({"ReplicatedBackend::do_repop_reply",
                           "ReplicatedBackend::op_commit",
                           "ECLegacy::ECBackendL::handle_sub_write_reply",
                           "ECLegacy::ECBackendL::handle_sub_read_reply",
                           "ECBackend::handle_sub_write_reply",
                           "ECBackend::handle_sub_read_reply"}
                          if version.startswith("20.2") else set()), moved
    for m in moved.values():
        assert m["entry"].startswith("sub rsp,") and m["at"][0] == "j", m
    p = run_tool([OSDSTAGE, "--list"])
    line = next(l.split() for l in p.stdout.splitlines()[1:]
                if l.split()[1] == str(pid))
    assert line[2].startswith(version) and line[4:6] == [version[:-1],
                                                         "yes"]
    notes = [l for l in p.stdout.splitlines() if "probe moved" in l]
    assert len(notes) == len(moved), p.stdout


def test_op_class_offsets_are_the_binarys_own(container_lab):
    assert offsets_match(container_lab["pid"]).key == \
        container_lab["version"][:-1]


@pytest.fixture(scope="module")
def runs(container_lab):
    prefill(container_lab, 5)
    return {"read": run_traced(container_lab, "rand"),
            "write": run_traced(container_lab, "write")}


@pytest.mark.parametrize("mode", ["read", "write"])
def test_every_stage_and_the_kernel_view(runs, container_lab, mode):
    rec, _, _ = runs[mode]
    assert rec["ceph_version"].startswith(container_lab["version"])
    assert rec["probe_table"] == container_lab["version"][:-1]
    assert rec["probe_table_exact"] is True
    assert rec["unavailable"] == {}
    assert set(rec["stages"]) == set(probetable.STAGES)
    for k in ("start_map_full", "op_map_full", "bad_arg", "no_start"):
        assert rec["lost"][k] == 0, rec["lost"]
    for stage in ("offcpu", "wakeup_delay", "futex_wait", "block_rq"):
        assert rec["kernel"][stage]["count"] > 0, stage
    assert rec["threads"]["tp_osd_tp"]["threads"] >= 1
    assert sum(v["share"] for v in rec["attribution"].values()) > 0.99
    assert rec["shards"] and rec["cause"] and rec["verdict"]


@pytest.mark.parametrize("mode", ["read", "write"])
def test_do_op_and_class_counts_within_3_percent(runs, mode):
    rec, before, after = runs[mode]

    def delta(name):
        return in_report(after["osd"][name] - before["osd"][name],
                         before, after, rec)
    want = delta("op_r") + delta("op_w")
    assert want > 1000, want
    got = rec["stages"]["do_op"]["count"]
    assert abs(got - want) <= 0.03 * want, (got, want)
    by = rec["stages"]["op_total"]["by_class"]
    for cls, counter in (("read", "op_r"), ("write", "op_w")):
        n = delta(counter)
        assert abs(by[cls]["count"] - n) <= max(0.03 * n, 3), (cls, by, n)




def test_capture_reads_back_identically(container_lab, tmp_path):
    cap = str(tmp_path / "osd.ctf")
    bench = Bench(container_lab, "rand", 15, threads=8)
    try:
        time.sleep(2)
        p = run_tool([OSDSTAGE, "-p", str(container_lab["pid"]), "-j", "-w",
                      cap, "2", "2"], timeout=120)
    finally:
        bench.stop()
    assert p.returncode == 0 and "none lost" in p.stderr, p.stderr
    assert_ctf_readers_accept(cap)
    r = run_tool([OSDSTAGE, "-r", cap, "-j"])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.splitlines() == p.stdout.splitlines()


def test_bpftrace_scripts_attach_and_print(container_lab):
    """The kernel scripts and osdstages.bt (with the arguments osdstage.py
    gives for the release's binary) on the container lab's OSD, at once
    under reads (blockrq.bt under writes after them)."""
    _, out = kernel_scripts(container_lab, 50, osdstages=True)
    for stage in ("queue_wait", "dequeue_op", "do_op", "bluestore_read"):
        assert hist_total(out, stage + "_us") > 100, (stage, out)


CLIENT = r"""
import os, rados, rbd, sys
N = int(sys.argv[1])
with rados.Rados(conffile=os.environ["CEPH_CONF"]) as c, \
        c.open_ioctx("rbd") as io:
    try:
        rbd.RBD().remove(io, "cetimg")
    except rbd.ImageNotFound:
        pass
    rbd.RBD().create(io, "cetimg", 64 << 20)
    print("ready", flush=True)
    sys.stdin.readline()            # recorded from here: open, I/O, close
    with rbd.Image(io, "cetimg") as img:
        done = []
        comps = [img.aio_write(b"x" * 4096, i * 4096,
                               lambda c: done.append(c)) for i in range(N)]
        for c in comps:
            c.wait_for_complete_and_cb()
        comps = [img.aio_read(i * 4096, 4096, lambda c, buf: done.append(c))
                 for i in range(N)]
        for c in comps:
            c.wait_for_complete_and_cb()
        print("done", len(done), flush=True)
"""


def _host_pid_of(marker):
    """The host pid of the python3 client carrying `marker` (not the
    `podman exec` that started it, whose command line has it too)."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv and \
                    os.path.basename(argv[0]).startswith(b"python3"):
                return int(name)
    return None


def test_rbdrecord_on_the_containers_librbd(container_lab, tmp_path):
    """rbdrecord on a librbd client in the container (python3-rbd: librbd's
    C API, a CET build): every aio request recorded, probes after
    endbr64."""
    n = 40
    marker = "osdstage-cet-client-%d" % os.getpid()
    # -i: podman exec passes stdin on only when asked
    exe = container_lab["exec"]
    exe = exe[:2] + ["-i"] + exe[2:] if exe[:2] == ["podman", "exec"] \
        else exe
    client = subprocess.Popen(
        exe + ["env", "CEPH_CONF=" +
                                 container_lab["CEPH_CONF"], "python3", "-c",
                                 CLIENT, str(n), marker],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rec = None
    try:
        assert client.stdout.readline().strip() == "ready"
        pid = _host_pid_of(marker)
        assert pid, "the client's host pid"
        trace = str(tmp_path / "trace")
        rec = subprocess.Popen([PYTHON, RBDRECORD, "-p", str(pid),
                                "-o", trace], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        wait_for_line(rec.stderr, "Recording", 30)
        client.stdin.write("go\n")
        client.stdin.flush()
        assert client.stdout.readline().split() == ["done", str(2 * n)]
        client.stdin.close()
        client.wait(30)
        out, err = rec.communicate(timeout=60)     # ends with the client
        assert rec.returncode == 0, err
    finally:
        for p in (client, rec):
            if p is not None and p.poll() is None:
                p.kill()
    s = run_tool([RBDRECORD, "--summary", trace, "-j"])
    assert s.returncode == 0, s.stderr
    img = json.loads(s.stdout)["images"]["cetimg"]
    assert img["ops"]["write"] == n and img["ops"]["read"] == n, img
