"""Real-cluster tier: osdstage.py against the lab's ceph-osd under load,
checked against Ceph's own perf counters over the same window."""
import json
import signal
import subprocess
import time

import pytest

from conftest import (OSDSTAGE, PYTHON, Bench, perf_counters, prefill,
                      wait_for_line)


def ops(dump):
    return dump["osd"]["op_r"] + dump["osd"]["op_w"]


def traced_window(lab, args, timeout=120):
    """Run osdstage with `args` (one report); take perf dumps when it says
    the probes are attached and as soon as its report arrives (before it
    detaches and exits). -> (stdout, stderr, before, after)"""
    p = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(lab["pid"])] + args,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        banner = wait_for_line(p.stderr, "Tracing", 30)
        before = perf_counters(lab["asok"])
        first = p.stdout.readline()
        after = perf_counters(lab["asok"])
        out = first + p.stdout.read()
        rest = p.stderr.read()
        p.wait(timeout)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, banner + rest
    return out, banner + rest, before, after


@pytest.fixture(scope="module")
def prefilled(lab):
    prefill(lab, 5)
    return lab


def test_do_op_count_matches_ceph_counters(prefilled):
    lab = prefilled
    bench = Bench(lab, "rand", 25)
    try:
        time.sleep(2)
        out, err, before, after = traced_window(lab, ["-j", "-S", "do_op",
                                                      "8", "1"])
    finally:
        bench.stop()
    rec = json.loads(out.strip().splitlines()[-1])
    assert rec["type"] == "interval" and rec["pid"] == lab["pid"]
    assert rec["ceph_version"].startswith("16.2.")
    assert 7.5 < rec["interval_s"] < 9.0
    got = rec["stages"]["do_op"]["count"]
    want = ops(after) - ops(before)
    assert want > 1000, "the workload did not run: %d ops" % want
    assert abs(got - want) <= 0.05 * want, (got, want)
    s = rec["stages"]["do_op"]
    assert 0 < s["p50_us"] <= s["p90_us"] <= s["p99_us"] <= s["max_us"]
    assert sum(c for _, _, c in s["hist"]) == got


def test_text_report_has_histogram_and_table(prefilled):
    lab = prefilled
    bench = Bench(lab, "rand", 15)
    try:
        time.sleep(2)
        out, err, _, _ = traced_window(lab, ["-S", "do_op", "-T", "3", "1"])
    finally:
        bench.stop()
    assert "Tracing 1 stage of ceph-osd %d (Ceph 16.2." % lab["pid"] in err
    lines = out.splitlines()
    assert "stage = do_op" in lines
    i = lines.index("stage = do_op")
    assert lines[i + 1].split() == ["usecs", ":", "count", "distribution"]
    assert any("|*" in l for l in lines[i + 2:])
    row = next(l for l in lines if l.startswith("do_op "))
    count = int(row.split()[1])
    assert count > 100
    # histogram counts add up to the table's count
    hist_total = sum(int(l.split(":")[1].split()[0]) for l in lines[i + 2:]
                     if "->" in l)
    assert hist_total == count


def test_ctrl_c_prints_what_was_collected(prefilled):
    lab = prefilled
    bench = Bench(lab, "rand", 15)
    try:
        time.sleep(1)
        p = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(lab["pid"]), "-j",
                              "-S", "do_op"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        wait_for_line(p.stderr, "Hit Ctrl-C to end", 30)
        time.sleep(3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        bench.stop()
    assert p.returncode == 0, err
    assert "Traceback" not in err
    rec = json.loads(out)
    assert rec["stages"]["do_op"]["count"] > 100
    assert 2.5 < rec["interval_s"] < 5
