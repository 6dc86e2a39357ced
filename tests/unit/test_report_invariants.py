"""A report never contradicts itself: over hundreds of random windows
and filters of every fixture capture (tests/invariants.py says which
invariants and the window rule behind them), read through the library
itself; and the figures the fixtures once got wrong."""
import glob
import os

import pytest

from conftest import REPO
from invariants import _args, check_capture, check_record

from cephlat.capture.reader import Capture
from cephlat.cli.windows import window_record
from cephlat.model.interval import RunInfo

FIX = os.path.join(REPO, "tests", "fixtures")
CAPTURES = sorted(glob.glob(os.path.join(FIX, "*.ctf")))


@pytest.mark.parametrize("path", CAPTURES, ids=os.path.basename)
def test_every_window_agrees_with_itself(path):
    # every dequeue_op of the fixtures ran do_op (client ops only)
    assert check_capture(path, n=200, seed=20261201,
                         calls_match=True) >= 150


def _window(path, t0, t1, **kw):
    cap = Capture(path)
    rec = window_record(_args(t0, t1, **kw), cap,
                        RunInfo.from_capture(cap))[0].record
    check_record(rec, cap, calls_match=True)
    return rec, cap


LAB = os.path.join(FIX, "lab-v0.ctf")


def test_a_window_ends_at_the_last_report():
    """The lab capture's probes came off one kind after another for 1.2 s
    after its last report (0.52 s), the scheduler's first: ops there had
    their queue wait put down as worker busy (no state change seen) and
    lost their stages. A window stops at the last report."""
    rec, cap = _window(LAB, 0, None, slowest=3)
    assert rec["window"]["to_s"] == round(
        (cap.traced_span()[1] - cap.first_ns) / 1e9, 6)
    assert rec["stages"]["queue_wait"]["count"] == 306
    assert rec["attribution"]["busy"]["share"] < 0.5
    assert rec["stages"]["dequeue_op"]["count"] == \
        rec["stages"]["do_op"]["count"]


def test_write_window_counts_every_stage_by_its_end():
    rec, _ = _window(LAB, 0.1, 0.4, op_class="write")
    qw = rec["stages"]["queue_wait"]
    assert qw["by_class"]["write"]["count"] == qw["count"]
    assert rec["stages"]["do_op"]["count"] == \
        rec["stages"]["dequeue_op"]["count"]


def test_an_old_capture_cannot_call_workers_saturated():
    """Format 0 holds the sleeps inside ops in `busy`: the verdict says it
    cannot tell busy from blocked, never 'saturated'."""
    from cephlat.model import verdict
    attr = {p: {"mean_us": v, "p50_us": v, "p99_us": v, "share": s}
            for p, v, s in (("busy", 84, 0.84), ("signal", 2, 0.02),
                            ("runq", 12, 0.12), ("pickup", 2, 0.02))}
    from cephlat.model.hist import Hist
    qw = Hist.from_ns([100000] * 50)
    c, text = verdict.verdict({"queue_wait": qw}, {}, attr,
                              dict(enqueuer=1, other=0, timeout=0,
                                   timeouts_with_work=0),
                              {"w": {"offcpu_pct": 98.7, "runq_pct": 0.3}},
                              "w")
    assert c == "busy_or_blocked" and "saturated" not in text
    assert "84 % of it the worker was busy or blocked in earlier ops: this "\
        "capture cannot tell them apart" in " ".join(text.split())
    assert "workers slept 98.7 % of the time" in text


def test_slowest_names_the_gaps_of_an_op_while_probes_came_off():
    """The write of 13,974.8 us (enqueued 1.03 s in, past the last report)
    has no dequeue_op or do_op: their probes had come off. Its rows name
    the 11.9 ms no stage covers rather than leave it out; in a window's
    writes the gap after dequeue_op returned is the commit wait."""
    from cephlat.model.slowest import op_row
    cap = Capture(LAB)
    o = next(o for o in cap.ops(cap.first_ns, cap.last_ns)
             if o.done and o.done["op_total_ns"] == 13974751)
    row = op_row(cap, o)
    gaps = row["gaps"]
    assert gaps[0]["what"] == "detached" and gaps[0]["us"] == 11933.9
    assert gaps[0]["after"] == "the dequeue" and \
        gaps[0]["before"] == "get_object_context"
    rec, _ = _window(LAB, 0, None, slowest=3, op_class="write")
    for r in rec["slowest"]:
        assert r["gaps"][-1]["what"] == "commit", r["gaps"]
