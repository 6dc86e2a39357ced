"""The text report reads top down: a header (what was traced, the mode
and its cost, the source), then each report's verdict and what it rests
on, the tables, and the histograms last; --brief stops after the stage
table, an interval without ops is one line, the counts of what was under
way at attach are not losses, and a capture's report advises no option
of a live run."""
import io
import os
import re
import time
import types

import pytest

from cephlat.cli import header
from cephlat.model import costs, report
from cephlat.model.hist import Hist
from cephlat.model.interval import Interval
from cephlat.render import interval_text, text
from cephlat.render.options import TextOptions

from conftest import OSDSTAGE, REPO, run_tool

FIX = os.path.join(REPO, "tests", "fixtures")


def _read(cap, *args):
    p = run_tool([OSDSTAGE, "-r", os.path.join(FIX, cap + "-v0.ctf")] +
                 list(args), env=dict(os.environ, TZ="UTC"))
    assert p.returncode == 0, p.stderr
    return p.stdout


def _reports(out):
    """The report blocks of a text report (after the header): each starts
    with its time line."""
    blocks, cur = [], None
    for line in out.splitlines():
        if re.match(r"\d\d:\d\d:\d\d", line):
            cur = [line]
            blocks.append(cur)
        elif cur is not None:
            cur.append(line)
    return blocks


def _first(lines, prefix):
    return next(i for i, l in enumerate(lines) if l.startswith(prefix))


# the heads in the order a report prints them
ORDER = ["VERDICT (", "STAGE ", "QUEUE_WAIT ATTRIBUTION", "SHARD ",
         "THREAD ROLE", "stage = "]


@pytest.mark.parametrize("cap", ["lab", "shardq"])
def test_header_then_verdict_then_tables_then_histograms(cap):
    out = _read(cap)
    lines = out.splitlines()
    # the header: who, the mode and its measured cost, the capture
    assert lines[0].startswith("pid ") and " on vm" in lines[0]
    assert lines[1].startswith("mode: ")
    assert any(l.startswith("capture %s-v0.ctf: " % cap) for l in lines[:5])
    full = [b for b in _reports(out) if len(b) > 1]
    assert full
    for block in full:
        at = [_first(block, head) for head in ORDER]
        assert at == sorted(at), list(zip(ORDER, at))
        # the verdict right under the time line
        assert block[1].startswith("VERDICT (")
    assert all(len(l) <= 80 for l in lines), \
        [l for l in lines if len(l) > 80]


def test_the_header_names_the_mode_and_its_bench_cost():
    out = _read("lab")
    head = " ".join(out.split("\n\n")[0].split())
    mean, err = costs.PER_OP_US["default"]
    assert head.startswith("pid 16918 on vm, Ceph 16.2.15 (pacific) ")
    assert "mode: default (user-space and kernel stages): %.2f +- %.2f us " \
        "of OSD CPU per 4 KiB read (make bench, %s: %s)" % (
            mean, err, costs.MEASURED_AT, costs.MEASURED_ON) in head
    assert "capture lab-v0.ctf: " in head and ", 2 reports" in head
    # a probe spec's program: no Ceph release, no bench figure
    head = " ".join(_read("shardq").split("\n\n")[0].split())
    assert "Ceph" not in head and "program shardq" in head
    assert "not benchmarked" in head


def test_brief_is_the_header_the_verdict_and_the_stage_table():
    out = _read("lab", "--brief")
    assert out.startswith("pid 16918 on vm")
    blocks = _reports(out)
    assert len(blocks) == 2
    for block in blocks:
        assert block[1].startswith("VERDICT (")
        assert any(l.startswith("STAGE ") for l in block)
    for head in ("QUEUE_WAIT ATTRIBUTION", "SHARD ", "THREAD ROLE",
                 "SCHEDULER CLASS", "stage = ", "kernel stage = "):
        assert head not in out, head
    # the same figures as the full report's table
    full = _read("lab")
    rows = [l for l in out.splitlines() if l.startswith("queue_wait ")]
    assert rows and all(r in full.splitlines() for r in rows)


def test_explain_puts_a_line_under_each_table():
    out = _read("lab", "--explain")
    for key in ("stages", "attribution", "shards", "threads",
                "histograms"):
        assert interval_text.EXPLAIN[key] in out, key
    assert "(--explain:" not in out
    assert "(--explain:" in _read("lab")
    assert all(len(l) <= 80 for l in out.splitlines())


def test_an_interval_without_ops_is_one_line():
    out = _read("shardq")
    blocks = _reports(out)
    empty = [b for b in blocks if "no ops" in b[0]]
    # 28 of the capture's 33 reports saw no op
    assert len(blocks) == 33 and len(empty) == 28
    for b in empty:
        assert b[0].endswith("no ops") or "worker asleep" in b[0], b
        assert len([l for l in b if l.strip()]) == 1, b
    assert out.count("\nSTAGE ") == 5


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _rec(**kw):
    zero = dict(count=0, mean_us=0, p50_us=0, p90_us=0, p99_us=0,
                max_us=0)
    rec = {"ts": 1795416757.5, "interval_s": 1.0, "call_bias_us": 0.0,
           "stages": {"queue_wait": dict(zero)}, "unavailable": {},
           "lost": {}, "in_flight": 0, "cause": "none",
           "verdict": "no ops were dequeued in this interval.",
           "worker_role": "tp_osd_tp", "kernel": {},
           "threads": {"tp_osd_tp": {"threads": 5, "offcpu_pct": 99.4,
                                     "runq_pct": 0.1,
                                     "futex_pct_of_offcpu": 100.0,
                                     "wakeups": 3}}}
    rec.update(kw)
    return rec


def _iv(rec, hists=None):
    """A hand-made record as the Interval the text report takes."""
    return Interval(None, rec["interval_s"], rec,
                    hists or {"queue_wait": Hist()}, {}, {})


def _print(rec, **kw):
    out = io.StringIO()
    interval_text.print_interval(out, TextOptions(**kw), _iv(rec))
    return out.getvalue()


def test_no_ops_is_one_line_with_the_workers_sleep(utc):
    out = _print(_rec())
    assert out.splitlines() == [
        "06:52:36.5 to 06:52:37.5 (1 s): no ops; tp_osd_tp asleep 99 %"]
    # in flight, and what began before the probes attached: the same line
    out = _print(_rec(in_flight=8, lost={"op_unknown": 2}))
    first, *more = out.splitlines()
    assert all(l.startswith("  ") for l in more), out    # wrapped, one line
    out = " ".join(out.split())
    assert out.endswith("no ops (8 in flight); tp_osd_tp asleep 99 %; "
                        "op_unknown=2 begun before tracing")
    assert "lost" not in out
    # a verdict beyond "no ops" (a syncfs stall) is a report
    out = _print(_rec(cause="syncfs", verdict="no ops.\nsyncfs: stalls."))
    assert "VERDICT (syncfs stalls):" in out


def test_counts_at_attach_are_not_losses():
    lost = {k: 0 for k in report.LOSS_WORDS}
    lost.update(op_unknown=3, no_start=2, reply_unknown=1)
    some = dict(count=2, mean_us=5, p50_us=5, p90_us=6, p99_us=6, max_us=6)
    for capture in (False, True):
        out = _print(_rec(stages={"queue_wait": some}, lost=lost,
                          cause="idle", verdict="short waits."),
                     capture=capture)
        assert "lost" not in out
        for k in report.BEGUN_BEFORE:
            assert "before tracing started" in out and "(%s)" % k in out
    # the lab capture's first report: op_unknown=1, not called lost
    out = _read("lab")
    assert "ops begun before tracing started (not timed): 1 (op_unknown)" \
        in out and "lost" not in out


def test_a_captures_report_advises_no_live_option():
    lost = {k: 1 for k in report.LOSS_WORDS}
    some = dict(count=2, mean_us=5, p50_us=5, p90_us=6, p99_us=6, max_us=6)
    rec = _rec(stages={"queue_wait": some}, lost=lost, cause="idle",
               verdict="short waits.")
    live = " ".join(_print(rec).split())
    assert "raise --max-ops" in live and "raise --ring-mb" in live
    out = " ".join(_print(rec, capture=True).split())
    assert "raise" not in out
    # an option is named only as the recording's
    for m in re.finditer(r"--[a-z-]+", out):
        assert out[:m.start()].endswith("record again with a larger "), \
            out[m.start() - 60:m.end()]
    for k in ("op_map_full", "op_replaced", "events_lost", "op_aged_out",
              "bad_arg"):
        assert "%s=1: " % k in out


def _cap(**env):
    """A capture's metadata, as header.capture reads it."""
    return types.SimpleNamespace(
        info={"ceph_version": "16.2.15", "release": "pacific"},
        env=env, kernel=True, name=None, pid=42, first_ns=0,
        last_ns=2 * 10 ** 9, wall=lambda ns: 1795416757.0 + ns / 1e9)


def test_a_field_the_capture_lacks_is_left_out():
    opts = TextOptions(capture=True)
    out = io.StringIO()
    text.print_header(out, opts, header.capture(_cap(), "a/x.ctf/",
                                                reports=3))
    first = out.getvalue().splitlines()[0]
    assert first == "pid 42, Ceph 16.2.15 (pacific)"
    assert "capture x.ctf: " in out.getvalue()
    out = io.StringIO()
    text.print_header(out, opts, header.capture(_cap(hostname="h1"), "x",
                                                reports=3))
    assert out.getvalue().startswith("pid 42 on h1, Ceph 16.2.15")
    cap = _cap()
    cap.kernel = False
    out = io.StringIO()
    text.print_header(out, opts, header.capture(cap, "x", reports=1))
    assert "mode: user-space stages only: %.2f +- %.2f us" % \
        costs.PER_OP_US["userspace"] in " ".join(out.getvalue().split())


@pytest.mark.parametrize("flags,mode", [
    ({}, "default"), ({"no_kernel": True}, "userspace"),
    ({"lean": True}, "lean"), ({"probes": "q.json"}, "probes")])
def test_the_live_header(monkeypatch, flags, mode):
    monkeypatch.setattr(header.socket, "gethostname", lambda: "h1")
    a = dict(probes=None, lean=False, no_kernel=False, max_overhead=None,
             host_netns=None, interval=10.0, count=3, write=None)
    a.update(flags)
    args = types.SimpleNamespace(**a)
    choice = types.SimpleNamespace(
        version=None if mode == "probes" else "18.2.7",
        release=types.SimpleNamespace(name="q" if mode == "probes"
                                      else "reef"))
    targets = [types.SimpleNamespace(pid=7, osd_id="3")]
    hdr = header.live(args, targets, choice, lambda t: "osd.%s" % t.osd_id)
    assert hdr["mode"] == mode
    out = io.StringIO()
    text.print_header(out, TextOptions(), hdr)
    got = " ".join(out.getvalue().split())
    if mode == "probes":
        assert got.startswith("pid 7 on h1, program q ")
        assert "not benchmarked" in got
    else:
        assert got.startswith("osd.3 (pid 7) on h1, Ceph 18.2.7 (reef) ")
        assert "%.2f +- %.2f us" % costs.PER_OP_US[mode] in got
    assert "live: a report every 10 s, 3 in all" in got


def test_several_osds_summary_first_then_each_osd_top_down(utc):
    some = dict(count=2, mean_us=5, p50_us=5, p90_us=6, p99_us=6, max_us=6)
    busy = _rec(stages={"queue_wait": some}, cause="idle",
                verdict="queue waits under 50 us.", pid=11)
    idle = _rec(pid=12)
    host = {"ts": busy["ts"], "interval_s": 1.0, "osds": {
        "osd.0": busy, "osd.1": idle}, "summary": [
        dict(report.osd_summary("osd.0", busy)),
        dict(report.osd_summary("osd.1", idle))]}
    out = io.StringIO()
    interval_text.emit(out, TextOptions(), [_iv(busy), _iv(idle)], host)
    lines = out.getvalue().splitlines()
    assert lines[0] == "06:52:36.5 to 06:52:37.5 (1 s): 2 OSDs, 2 ops"
    at = [_first(lines, h) for h in (
        "HOST SUMMARY (2 OSDs)", "causes: osd.0 no queueing; osd.1 no ops",
        "========== osd.0 (pid 11) ========== 2 ops", "VERDICT (",
        "========== osd.1 (pid 12) ========== no ops; tp_osd_tp asleep")]
    assert at == sorted(at)
    assert all(len(l) <= 80 for l in lines)


def test_an_ops_listing_keeps_to_78_columns():
    """--slowest/--op: each op's title and lines wrap at 78 columns under
    their text (a request id, a PG and a long object name make a title
    of 130), and no word is lost."""
    import json
    with open(os.path.join(FIX, "expected", "lab.slowest.jsonl")) as f:
        rows = next(d["slowest"] for d in map(json.loads, f)
                    if d.get("slowest"))
    row = dict(rows[0], reqid="client.4154.0:634", pg="2.1f",
               object="rbd_data.10ab6b8b4567.0000000000000003_a_long_name",
               queue_class="background_best_effort")
    out = io.StringIO()
    text._print_ops(out, [row])
    got = out.getvalue()
    assert max(len(l) for l in got.splitlines()) <= 78, got
    assert len(text._op_title(row)) > 78
    assert " ".join(got.split()).startswith(
        "1. " + " ".join(text._op_title(row).split())), got
