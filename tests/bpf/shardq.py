"""The controlled sharded queue (progs/shardq.cc) traced by osdstage while
recording a capture: shared by test_shardq.py (attribution against the
program's own timestamps) and test_capture.py (the capture of the same
runs). The runs happen once per session.

Cases: (a) normal notify with bursts of work (workers busy), (b) the
producer never notifies (items wait for the timed wait: missed wake-ups),
(c) it notifies late by a known delay, (d) CPU hogs pinned on the workers'
CPU, (e) items are due only a known time after their enqueue and workers
wait for that with them queued, as mClock holds ops (traced with a spec
that says the scheduler is mClock), (f) a shard's items are one PG's: a
worker takes its PG's lock before it dequeues, as Ceph's do, and the
shard's other worker waits for it (lock), (g) the work is a wait for a
completion inside the dequeue function, as Ceph's reads from the disk are
inside dequeue_op, and the later items of a burst wait behind it (blocked),
(h) the same waits in items dequeued a second time (requeued, as Ceph
requeues an op that must wait for its PG).
"""
import json
import os
import subprocess

import pytest

from conftest import trace_until_exit

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "progs", "shardq.json")
SPECS = {"hold": os.path.join(HERE, "progs", "shardq-mclock.json")}
# the io and requeue cases' waits are inside the dequeue function: traced
# with its return, so that a sleep inside it is work on an item (not
# idleness)
STAGES = {mode: ["-S", "queue_wait,dequeue_op"] for mode in ("io", "requeue")}

CASES = {
    # mode: (items, gap_us, delay_us, timeout_ms, burst, work_us)
    "normal": (160, 2000, 0, 20, 8, 300),
    "forget": (60, 2000, 0, 20, 1, 0),
    "delay": (100, 2000, 2000, 50, 1, 0),
    "contend": (100, 2000, 0, 50, 1, 0),
    # delay_us: how long after its enqueue an item is due
    "hold": (80, 2000, 3000, 50, 4, 100),
    # two items a burst for two workers: the second waits for the first's
    # PG lock
    "lock": (80, 2000, 0, 50, 2, 300),
    # four items a burst for two workers: the last two wait while both
    # workers wait for their completions (work_us: the completion's time)
    "io": (80, 2000, 0, 50, 4, 300),
    # the same waits, in items taken a second time (requeued at the
    # queue's front, not enqueued again)
    "requeue": (80, 2000, 0, 50, 4, 300),
}
_RUNS = {}


def run_case(exe, mode, capture, extra=()):
    """-> (the program's truth, osdstage's JSON report, capture path)"""
    items, gap, delay, timeout, burst, work = CASES[mode]
    prog = subprocess.Popen([exe, "2", "2", str(items), mode, str(gap),
                             str(delay), str(timeout), str(burst), str(work)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    truth, out, err, status = trace_until_exit(
        prog, ["--probes", SPECS.get(mode, SPEC), "-j", "-w", capture] +
        STAGES.get(mode, []) + list(extra))
    assert status == 0, err
    assert "shardq %d exited; detached." % prog.pid in err
    assert "capture %s:" % capture in err and "none lost" in err, err
    return truth, json.loads(out), capture


@pytest.fixture(scope="module")
def shardq_exe(bpf_ready, cxx):
    return cxx(os.path.join(HERE, "progs", "shardq.cc"), "shardq",
               ("-O2", "-g", "-pthread"))


@pytest.fixture(scope="module")
def shardq_runs(shardq_exe, tmp_path_factory):
    if not _RUNS:
        exe = shardq_exe
        d = tmp_path_factory.mktemp("shardq")
        for mode in CASES:
            _RUNS[mode] = run_case(exe, mode, str(d / (mode + ".ctf")))
    return _RUNS
