"""exporter/tailwatch.py: the lean tier's op latency tail, watched every
refresh, fires when p99 jumps over its baseline (after a warm-up) or an
op is over the operator's threshold, once per quiet time an OSD
(QUIET_S, or --escalate-quiet; unless the tail gets worse again), and a
lasting change becomes the baseline; exporter/service.py asks the full
tier's duty cycle for an escalation, says it and counts it."""
import io
import types

import numpy as np
import pytest

from cephlat.exporter import families as F
from cephlat.exporter import service
from cephlat.exporter import tailwatch as tw
from cephlat.exporter.collect import Exported
from cephlat.exporter.config import ExporterConfig
from cephlat.model.hist import Hist

RNG = np.random.default_rng(7)


def _hists(p50_us, n=400, slow_us=None, stage="op_latency"):
    """An interval's hists: `n` reads and writes around p50_us (a
    lognormal spread), one op of slow_us if given."""
    ns = RNG.lognormal(np.log(p50_us * 1000.0), 0.3, n)
    if slow_us is not None:
        ns[0] = slow_us * 1000.0
    half = n // 2
    return {stage + ".read": Hist.from_ns(ns[:half]),
            stage + ".write": Hist.from_ns(ns[half:]),
            "queue_wait.read": Hist.from_ns(ns[:half] / 10)}


def _steady(w, name="osd.0", n=tw.WARMUP + 3, p50=800.0, t=0.0):
    for i in range(n):
        assert w.look(name, _hists(p50), t + i) is None
    return t + n


def test_a_jump_over_the_baseline_fires_once_then_goes_quiet():
    w = tw.TailWatch(2.0)
    t = _steady(w)
    reason, words = w.look("osd.0", _hists(4000.0), t)
    assert reason == "p99"
    assert words.startswith("op_latency p99 ") and "x its baseline" in words
    # the same slowdown, the next refreshes: quiet
    for i in range(1, 5):
        assert w.look("osd.0", _hists(4000.0), t + i) is None
    # after QUIET_S, still slow: fires again (the baseline has barely
    # moved: a fired interval weighs WEIGHT / 4)
    assert w.look("osd.0", _hists(4000.0), t + tw.QUIET_S + 1)[0] == "p99"


def test_the_operators_quiet_time():
    """--escalate-quiet: the same slowdown fires again after that long,
    not before (the default's 60 s would still be quiet)."""
    w = tw.TailWatch(2.0, quiet_s=20.0)
    t = _steady(w)
    assert w.look("osd.0", _hists(4000.0), t)[0] == "p99"
    assert w.look("osd.0", _hists(4000.0), t + 1) is None
    assert w.look("osd.0", _hists(4000.0), t + 19.9) is None
    assert w.look("osd.0", _hists(4000.0), t + 20)[0] == "p99"
    assert 20 < tw.QUIET_S


def test_a_worse_tail_fires_through_the_quiet():
    """A blip a little over the baseline fires; the slowdown that follows
    within QUIET_S, a p99 over factor x the blip's, fires too once the
    blip's escalation is over (and its own repeats do not); a queue
    filling up, its p99 climbing within one escalation, fires once."""
    w = tw.TailWatch(2.0)
    t = _steady(w)
    assert w.look("osd.0", _hists(2400.0), t)[0] == "p99"
    assert w.look("osd.0", _hists(2600.0), t + 1) is None      # same
    t += tw.ESCALATE_S
    reason, words = w.look("osd.0", _hists(100000.0), t)
    assert reason == "p99" and "x its baseline" in words
    for i in range(1, 20):
        assert w.look("osd.0", _hists(100000.0), t + i) is None
    w.forget("osd.0")
    assert "osd.0" not in w.fired_p99
    t = _steady(w, t=t + 100)
    assert w.look("osd.0", _hists(3000.0), t)[0] == "p99"
    for i, p50 in enumerate((8000.0, 30000.0, 100000.0), 1):
        assert w.look("osd.0", _hists(p50), t + i) is None


def test_a_lasting_change_becomes_the_baseline():
    w = tw.TailWatch(2.0)
    t = _steady(w)
    fired = 0
    for i in range(400):
        fired += w.look("osd.0", _hists(4000.0), t + i * 5.0) is not None
    assert 1 <= fired <= 6, fired
    assert w.look("osd.0", _hists(4000.0), t + 5000.0) is None


def test_no_fire_before_the_warm_up_or_on_a_few_ops_or_below_the_factor():
    w = tw.TailWatch(2.0)
    _steady(w, n=tw.WARMUP - 1)
    assert w.look("osd.0", _hists(8000.0), 100.0) is None   # warm-up
    w = tw.TailWatch(2.0)
    t = _steady(w)
    assert w.look("osd.0", _hists(8000.0, n=tw.MIN_OPS - 2), t) is None
    assert w.look("osd.0", _hists(1200.0), t + 1) is None   # 1.5 x
    # other OSDs have their own baselines
    assert w.look("osd.1", _hists(8000.0), t + 2) is None
    assert tw.TailWatch(0).look("osd.0", _hists(8000.0), 0) is None


def test_an_op_over_the_threshold_fires_at_once():
    w = tw.TailWatch(0, over_us=50000.0)
    assert w.look("osd.3", _hists(800.0, n=5), 0.0) is None
    reason, words = w.look("osd.3", _hists(800.0, n=5, slow_us=80000.0), 1.0)
    assert reason == "slow"
    assert words == "an op's op_latency 80.0 ms, over the threshold 50.0 ms"


def test_op_total_when_the_interval_has_no_op_latency():
    stage, h = tw.tail_hist(_hists(500.0, stage="op_total"))
    assert stage == "op_total" and h.count == 400
    assert tw.tail_hist({"queue_wait": Hist()}) == (None, None)


class _Cycle:
    reserve_s = 10.0

    def __init__(self, outcome):
        self.outcome, self.asked = outcome, 0
        self.switch_at = 0.0

    def escalate(self):
        self.asked += 1
        return self.outcome


@pytest.mark.parametrize("outcome,said", [
    ("attached", "the full tier attached at once, for up to 10 s"),
    ("already", "the full tier was attached: it stays on up to 10 s"),
    ("spent", "the budget is spent: the full tier comes on in its next "
              "window, in 0 s")])
def test_the_exporter_escalates_says_why_and_counts(outcome, said):
    err = io.StringIO()
    ex = service.Exporter(ExporterConfig(), Exported(1.0), err)
    assert ex.watch is not None, "on by default: both tiers, a bound"
    cycle = _Cycle(outcome)
    ex.tiers = [types.SimpleNamespace(name="full", cycle=cycle)]
    t = 0
    for t in range(tw.WARMUP + 2):
        ex.watch_tail("osd.2", types.SimpleNamespace(hists=_hists(700.0)))
    assert cycle.asked == 0
    ex.watch_tail("osd.2", types.SimpleNamespace(hists=_hists(9000.0)))
    assert cycle.asked == 1
    line = err.getvalue()
    assert line.startswith("osdstage-exporter: osd.2: op_latency p99 "), line
    assert line.rstrip().endswith(said), line
    key = (F.ESCALATIONS, ("p99", outcome))
    assert ex.exported.osds["osd.2"].counters[key] == 1


def test_no_watch_without_both_tiers_and_a_bound():
    for c in (ExporterConfig(tiers="full"), ExporterConfig(tiers="lean"),
              ExporterConfig(max_overhead=0),
              ExporterConfig(escalate_factor=0)):
        assert service.Exporter(c, Exported(1.0), io.StringIO()).watch \
            is None, c
    assert service.Exporter(ExporterConfig(escalate_factor=0,
                                           escalate_over=9e4),
                            Exported(1.0), io.StringIO()).watch is not None


def test_the_escalations_family_is_there_from_the_attach():
    """Every reason and outcome a zero series from the first refresh (a
    counter that appears later loses its first increase in rate())."""
    ex = Exported(1.0)
    ex.attached("osd.4", ("1", "", "pacific", "", "", ""))
    counters = ex.osds["osd.4"].counters
    got = {k[1] for k in counters if k[0] == F.ESCALATIONS}
    assert got == {(r, o) for r in tw.REASONS
                   for o in ("attached", "already", "spent")}
    assert all(counters[(F.ESCALATIONS, k)] == 0 for k in got)
