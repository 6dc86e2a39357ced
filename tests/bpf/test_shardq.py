"""BPF tier: queue-wait attribution and verdict on a controlled sharded
queue (tests/bpf/progs/shardq.cc) whose own timestamps are the ground truth.

Four cases: (a) normal notify with bursts of work (workers busy),
(b) the producer never notifies (items wait for the timed wait: missed
wake-ups), (c) it notifies late by a known delay, (d) CPU hogs pinned on
the workers' CPU. The program cannot see when the kernel woke a worker,
only when the worker resumed, so its "wake" time is compared with the
tool's signal delay + run-queue delay.
"""
import json
import os
import subprocess
import time

import pytest

from conftest import OSDSTAGE, PYTHON, wait_for_line

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "progs", "shardq.json")

CASES = {
    # mode: (items, gap_us, delay_us, timeout_ms, burst, work_us)
    "normal": (160, 2000, 0, 20, 8, 300),
    "forget": (60, 2000, 0, 20, 1, 0),
    "delay": (100, 2000, 2000, 50, 1, 0),
    "contend": (100, 2000, 0, 50, 1, 0),
}
CAUSE = {"normal": "busy", "forget": "missed", "delay": "signal",
         "contend": "runq"}


@pytest.fixture(scope="module")
def shardq(cxx):
    return cxx(os.path.join(HERE, "progs", "shardq.cc"), "shardq",
               ("-O2", "-g", "-pthread"))


def run_case(exe, mode):
    items, gap, delay, timeout, burst, work = CASES[mode]
    prog = subprocess.Popen([exe, "2", "2", str(items), mode, str(gap),
                             str(delay), str(timeout), str(burst), str(work)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    tool = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(prog.pid), "--probes",
                             SPEC, "-j"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for_line(tool.stderr, "Tracing", 30)
        prog.stdin.write("go\n")
        prog.stdin.flush()
        truth = json.loads(prog.stdout.readline())
        prog.wait(60)
        out, err = tool.communicate(timeout=60)   # ends when shardq exits
    finally:
        for p in (prog, tool):
            if p.poll() is None:
                p.kill()
    assert tool.returncode == 0, err
    assert "shardq %d exited; detached." % prog.pid in err
    return truth, json.loads(out)


@pytest.fixture(scope="module")
def results(bpf_ready, shardq):
    return {mode: run_case(shardq, mode) for mode in CASES}


def within(got, want, tol=0.10):
    return abs(got - want) <= tol * want


@pytest.mark.parametrize("mode", list(CASES))
def test_queue_wait_matches_the_program(results, mode):
    truth, rec = results[mode]
    qw = rec["stages"]["queue_wait"]
    assert qw["count"] == truth["items"]
    assert within(qw["mean_us"], truth["queue_wait_mean_us"]), (qw, truth)


@pytest.mark.parametrize("mode", ["forget", "delay", "contend"])
def test_wake_delay_matches_the_program(results, mode):
    truth, rec = results[mode]
    a = rec["attribution"]
    assert truth["asleep_items"] == truth["items"]
    got = a["signal"]["mean_us"] + a["runq"]["mean_us"]
    assert within(got, truth["wake_mean_us"]), (a, truth)


@pytest.mark.parametrize("mode", list(CASES))
def test_parts_add_up(results, mode):
    _, rec = results[mode]
    a = rec["attribution"]
    total = sum(p["mean_us"] for p in a.values())
    assert within(total, rec["stages"]["queue_wait"]["mean_us"], 0.01)
    assert abs(sum(p["share"] for p in a.values()) - 1) < 0.01


def test_missed_wakeups_counted_exactly(results):
    truth, rec = results["forget"]
    assert truth["timeouts_with_work"] == truth["items"]
    assert rec["wakers"]["timeouts_with_work"] == truth["timeouts_with_work"]
    assert sum(s["timeouts_with_work"] for s in rec["shards"]) == \
        truth["timeouts_with_work"]
    for mode in ("normal", "delay", "contend"):
        truth, rec = results[mode]
        assert rec["wakers"]["timeouts_with_work"] == \
            truth["timeouts_with_work"], mode


@pytest.mark.parametrize("mode", list(CASES))
def test_verdict_names_the_cause(results, mode):
    _, rec = results[mode]
    assert rec["cause"] == CAUSE[mode], rec["verdict"]
    words = {"busy": "saturated", "missed": "missed", "signal": "asleep",
             "runq": "CPU contention"}[CAUSE[mode]]
    assert words in rec["verdict"]


def test_shards_and_roles(results):
    _, rec = results["normal"]
    shards = [s for s in rec["shards"] if s["shard"] != "?"]
    assert len(shards) == 2
    assert all(s["workers"] == 2 for s in shards)
    # ops taken before a worker's queue was known are in the "?" row
    assert sum(s["ops"] for s in rec["shards"]) == \
        rec["stages"]["queue_wait"]["count"]
    assert rec["threads"]["worker"]["threads"] == 4
    _, rec = results["contend"]
    assert rec["threads"]["hog"]["threads"] >= 2
    # the hogs never sleep; the workers mostly do
    assert rec["threads"]["hog"]["offcpu_pct"] < 5
    assert rec["threads"]["worker"]["offcpu_pct"] > 50
