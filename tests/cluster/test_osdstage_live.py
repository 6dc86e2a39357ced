"""Real-cluster tier: osdstage.py against the lab's ceph-osd under load,
checked against Ceph's own perf counters over the same window."""
import json
import signal
import subprocess
import time

import pytest

from cephlat.ceph import probetable

from conftest import (OSDSTAGE, PYTHON, Bench, CounterPoll, check_reports,
                      in_report, prefill, wait_for_line)


def ops(dump):
    return dump["osd"]["op_r"] + dump["osd"]["op_w"]


def traced_window(lab, args, timeout=120, target=None, asoks=None,
                  polls=None):
    """Run osdstage with `args` (one report) on the lab's OSD (or on
    `target`, e.g. ["--osd", "all"]); Ceph's counters at the first
    report's window edges (perf dumps polled from before it starts until
    its report arrives, CounterPoll): of the
    lab's OSD, or a list, one per admin socket of `asoks`; `polls`, a
    list, gets the CounterPoll (its bracket() of the first report).
    -> (stdout, stderr, before, after)"""
    target = target or ["-p", str(lab["pid"])]
    # polled from before the tool starts: the window's start lies between
    # two dumps (interpolated), however late a busy machine lets the
    # tool's banner or the poll's first dump come
    poll = CounterPoll(asoks or [lab["asok"]]).start()
    if polls is not None:
        polls.append(poll)
    p = subprocess.Popen([PYTHON, OSDSTAGE] + target + args,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        try:
            banner = wait_for_line(p.stderr, "Tracing", 60)
            first = p.stdout.readline()
        finally:
            poll.stop()
        before, after = poll.window(first)
        if asoks is None:
            before, after = before[0], after[0]
        out = first + p.stdout.read()
        rest = p.stderr.read()
        p.wait(timeout)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, banner + rest
    if "-j" in args or "--json" in args:
        check_reports(out)
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
    want = in_report(ops(after) - ops(before), before, after, rec)
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
    # do_op ends at dequeue_op's return: -S do_op traces both
    assert "Tracing 2 stages + kernel of ceph-osd %d (Ceph 16.2." % \
        lab["pid"] in err
    lines = out.splitlines()
    assert "stage = do_op" in lines
    i = lines.index("stage = do_op")
    assert lines[i + 1].split() == ["usecs", ":", "count", "distribution"]
    assert any("|*" in l for l in lines[i + 2:])
    row = next(l for l in lines if l.startswith("do_op "))
    count = int(row.split()[1])
    assert count > 100
    # histogram counts add up to the table's count
    end = lines.index("", i + 2)              # the histogram ends at a blank
    hist_total = sum(int(l.split(":")[1].split()[0]) for l in lines[i + 2:end]
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


def test_osd_id_selects_the_lab_osd(prefilled):
    lab = prefilled
    p = subprocess.Popen([PYTHON, OSDSTAGE, "--osd", "0", "-j", "-S", "do_op",
                          "0.5", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert json.loads(out)["pid"] == lab["pid"]


def test_osd_id_missing(lab):
    p = subprocess.run([PYTHON, OSDSTAGE, "--osd", "77", "1", "1"],
                       capture_output=True, text=True)
    from conftest import assert_one_line_error
    assert_one_line_error(p, "no running ceph-osd with id 77", "--list")


def test_list_shows_the_lab_osd(lab):
    p = subprocess.run([PYTHON, OSDSTAGE, "--list"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["OSD", "PID", "VERSION", "RELEASE", "TABLE",
                                "CET", "STAGES"]
    row = next(l.split() for l in lines[1:] if l.split()[1] == str(lab["pid"]))
    assert row[0] == "0" and row[2].startswith("16.2.") and \
        row[3] == "pacific" and row[4:] == ["16.2", "no", "all",
                                             str(len(probetable.STAGES))]
    p = subprocess.run([PYTHON, OSDSTAGE, "--list", "-j"], capture_output=True,
                       text=True, timeout=60)
    osds = json.loads(p.stdout)["osds"]
    me = next(o for o in osds if o["pid"] == lab["pid"])
    assert set(me["stages"].values()) == {"ok"} and \
        len(me["stages"]) == len(probetable.STAGES)
    assert (me["probe_table"], me["probe_table_exact"], me["cet"]) == (
        "16.2", True, False)


def test_closed_pipe_exits_quietly(lab):
    """osdstage -j ... | head -1: no traceback, no error, exit 0."""
    p = subprocess.run("%s %s -p %d -j -S do_op 0.3 20 | head -1" % (
        PYTHON, OSDSTAGE, lab["pid"]), shell=True, capture_output=True,
        text=True, timeout=60, executable="/bin/bash")
    assert json.loads(p.stdout)["type"] == "interval"
    assert "Traceback" not in p.stderr and "Error" not in p.stderr, p.stderr
    p = subprocess.run("set -o pipefail; %s %s -p %d -j -S do_op 0.3 20 | "
                       "head -1 >/dev/null" % (PYTHON, OSDSTAGE, lab["pid"]),
                       shell=True, capture_output=True, text=True, timeout=60,
                       executable="/bin/bash")
    assert p.returncode == 0, p.stderr


def test_osd_all_leaves_out_what_it_cannot_trace(prefilled, tmp_path,
                                                 spawn):
    """--osd all beside another program named ceph-osd (a shell run
    through a link of that name): the lab's OSD is traced, the other is
    left out with one line saying why."""
    link = tmp_path / "ceph-osd"
    link.symlink_to("/bin/sh")
    fake = spawn([str(link), "-c", "sleep 60; :", "x", "-i", "91"])
    time.sleep(0.5)
    p = subprocess.run([PYTHON, OSDSTAGE, "--osd", "all", "-j", "-S",
                        "do_op", "0.5", "1"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    recs = check_reports(p.stdout)
    pids = {r["pid"] for rec in recs
            for r in ([rec] if rec.get("pid") else
                      rec.get("osds", {}).values())}
    assert prefilled["pid"] in pids and fake.pid not in pids, recs
    left = [l for l in p.stderr.splitlines() if "leaving" in l]
    assert len(left) == 1 and "leaving osd.91 (pid %d) out: " % fake.pid \
        in left[0], p.stderr
