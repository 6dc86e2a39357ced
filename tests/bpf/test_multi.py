"""BPF tier: several processes traced by one set of BPF programs (what
`osdstage.py --osd all` does with every OSD of a host), on two copies of
the controlled sharded queue with known item counts: each target's
statistics are its own, the capture holds both and -r gives the same
reports, and the scheduler programs run once per context switch however
many processes are traced."""
import json
import os
import subprocess
import time

import pytest

from conftest import (OSDSTAGE, PYTHON, assert_ctf_readers_accept, run_tool,
                      wait_for_line)
from shardq import SPEC, shardq_exe  # noqa: F401

ITEMS = (40, 90)        # per process: known, different


def _start(exe, items):
    return subprocess.Popen([exe, "2", "2", str(items), "normal", "2000",
                             "0", "20", "1", "100"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _trace_both(exe, extra):
    progs = [_start(exe, n) for n in ITEMS]
    tool = subprocess.Popen(
        [PYTHON, OSDSTAGE, "-p", ",".join(str(p.pid) for p in progs),
         "--probes", SPEC] + extra, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_for_line(tool.stderr, "Tracing", 30)
        truths = []
        for p in progs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in progs:
            truths.append(json.loads(p.stdout.readline()))
            p.wait(60)
        out, err = tool.communicate(timeout=60)
    finally:
        for p in progs + [tool]:
            if p.poll() is None:
                p.kill()
    return progs, truths, out, err, tool.returncode


@pytest.mark.parametrize("run", range(3))
def test_each_target_counts_its_own_ops(shardq_exe, tmp_path, run):
    cap = str(tmp_path / "two.ctf")
    progs, truths, out, err, status = _trace_both(shardq_exe,
                                                  ["-j", "-w", cap])
    assert status == 0, err
    assert "every traced process exited" in err, err
    assert "none lost" in err, err
    assert_ctf_readers_accept(cap)      # several targets' streams in order
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(lines) == 1
    host = lines[0]
    assert host["type"] == "host"
    names = ["pid %d" % p.pid for p in progs]
    assert list(host["osds"]) == names
    for name, truth, items in zip(names, truths, ITEMS):
        rec = host["osds"][name]
        assert truth["items"] == items
        assert rec["pid"] == int(name.split()[1])
        # exact: every item of this process, none of the other's
        assert rec["stages"]["queue_wait"]["count"] == items
        assert rec["lost"]["op_unknown"] == 0
        w = rec["threads"]["worker"]
        assert w["threads"] == 4    # its own: 2 shards x 2 workers
    assert [r["osd"] for r in host["summary"]] == names
    # the capture holds both; read back, the same reports
    p = run_tool([OSDSTAGE, "-r", cap, "-j"])
    assert p.returncode == 0, p.stderr
    back = json.loads(p.stdout.splitlines()[0])
    assert back["osds"] == host["osds"]


def _run_cnt(obj, prog):
    fd = dict(obj.programs())[prog]
    with open("/proc/self/fdinfo/%d" % fd) as f:
        for line in f:
            if line.startswith("run_cnt:"):
                return int(line.split()[1])
    raise AssertionError("no run_cnt in fdinfo (bpf_stats_enabled?)")


def _ctxt():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])


@pytest.mark.parametrize("n_targets", [1, 3, 1, 3])
def test_scheduler_programs_run_once_per_switch(bpf_ready, n_targets):
    """sched_switch runs on_switch once whatever the number of targets:
    its run count over a second equals the host's context switches."""
    from cephlat.engine.tracer import StageTracer
    from cephlat.engine.plan import Plan
    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(n_targets)]
    # a quiet machine switches a few dozen times a second: make it busy
    # with a process that sleeps 1 ms at a time (two switches per sleep)
    sleepers.append(subprocess.Popen(
        [PYTHON, "-c", "import time\nwhile True: time.sleep(0.001)"]))
    targets = sleepers[:n_targets]
    path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(path) as f:
        old = f.read().strip()
    try:
        with open(path, "w") as f:
            f.write("1")
        tr = StageTracer([p.pid for p in targets],
                         ["/proc/%d/exe" % p.pid for p in targets],
                         Plan(), kernel=True, calibrate=False)
        tr.start()
        try:
            r0, c0 = _run_cnt(tr.obj, "on_switch"), _ctxt()
            time.sleep(1.0)
            r1, c1 = _run_cnt(tr.obj, "on_switch"), _ctxt()
        finally:
            tr.close()
    finally:
        with open(path, "w") as f:
            f.write(old)
        for p in sleepers:
            p.kill()
            p.wait()
    runs, switches = r1 - r0, c1 - c0
    assert switches > 500, switches
    assert 0.9 < runs / switches < 1.1, (runs, switches)
