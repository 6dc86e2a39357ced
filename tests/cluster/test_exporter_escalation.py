"""The exporter's full tier comes on when the tail moves: on Reef's lab
(mClock) under 16 concurrent 4 KiB reads, the exporter (both tiers, a
5 % bound: its full tier in duty cycles; at 2 % the lean tier and the
exporter themselves took 2.6 % of the host's CPU here, more than the
bound sets aside for them, and the full tier had no budget left to
escalate with) learns each OSD's op latency
baseline; then the client class is limited to half the OSD's capacity
(test_mclock.py's settings: a queue wait of about 100 ms) and the lean
tier's p99 jumps. Twice in a row, the OSD's quiet time apart (30 s here,
--escalate-quiet): the exporter says why within a few refreshes, counts
it, and its full tier is attached right after; under the steady load
before, it does not fire (once at most). A blip that fired just before the limit (a busy machine's) holds a
slowdown's line back until that blip's escalation is over (the tail
watch's rule: one escalation at a time): the time allowed then runs from
its end."""
import re
import time

import pytest

from conftest import Bench, prefill
from test_exporter import Exporter, info_pids, metrics
from test_mclock import SETTINGS, _config

from cephlat.engine.duty import ESCALATE_S
from cephlat.exporter import families as F
from cephlat.exporter.tailwatch import WARMUP

REFRESH_S = 1.0
BOUND_PCT = 5
# baselines trusted (WARMUP refreshes), the first full-rate window's cost
# measured (the escalation reserve is that cost's), and calm seconds
# enough for a false escalation to show
WARM_S = 40.0
ROUNDS = 2
QUIET_S = 30.0          # --escalate-quiet: an OSD that fired is quiet so long
# from the limit in force (the command that sets it returned) to the
# line: the queue fills at once, the refresh that holds the slowed ops
# ends within a refresh, and one more for a refresh that runs late on a
# busy machine. The `ceph config set` commands themselves (a second
# each on a busy machine) are not the exporter's time.
WITHIN_S = 3 * REFRESH_S + 1.0
LOOK_S = 6.0            # the full tier's attached time read over this
LINE = re.compile(r"osdstage-exporter: osd\.0: (op_latency|op_total) p99 "
                  r"\S+ \S+, [0-9.]+ x its baseline \S+ \S+: (.*)$", re.M)


def _lines(ex):
    return LINE.findall(ex.stderr())


class _Seen:
    """When each of the exporter's escalation lines was first seen (polled
    every 0.1 s)."""

    def __init__(self, ex):
        self.ex, self.at = ex, []

    def poll(self):
        n = len(_lines(self.ex))
        self.at += [time.time()] * (n - len(self.at))
        return n

    def sleep(self, secs):
        end = time.time() + secs
        while time.time() < end:
            self.poll()
            time.sleep(0.1)


def _total(m, family, **labels):
    return sum(v for (name, ls), v in m.items() if name == family and
               all(dict(ls).get(k) == x for k, x in labels.items()))


def _unlimit(lab):
    # the class's settings first, the profile last (test_mclock.py says
    # why)
    for k in reversed(list(SETTINGS)):
        _config(lab, "rm", "osd", k)


@pytest.fixture(scope="module")
def escalated(lab_reef):
    lab = lab_reef
    prefill(lab, 3)
    assert WARM_S > 4 * WARMUP * REFRESH_S
    ex = Exporter("escalation", ["--refresh", str(REFRESH_S),
                                 "--max-overhead", str(BOUND_PCT),
                                 "--escalate-quiet", str(QUIET_S)])
    seen = _Seen(ex)
    bench = None
    try:
        deadline = time.time() + 60
        while True:
            try:
                if info_pids(metrics(ex.port)):
                    break
            except OSError:
                pass            # not listening yet
            assert ex.proc.poll() is None, ex.stderr()
            assert time.time() < deadline, ex.stderr()
            time.sleep(0.5)
        bench = Bench(lab, "rand", int(WARM_S + ROUNDS * (
            QUIET_S + 30)), threads=16)
        seen.sleep(WARM_S)
        calm = _lines(ex)
        rounds = []
        for r in range(ROUNDS):
            m0 = metrics(ex.port)
            n0 = seen.poll()
            for k, v in SETTINGS.items():
                _config(lab, "set", "osd", k, str(v))
            # the last setting is the limit: in force once it returned
            t0 = time.time()
            # a line of a blip just before (its escalation runs on)
            blip = seen.at[n0 - 1] if n0 and \
                seen.at[n0 - 1] > t0 - ESCALATE_S - WITHIN_S else None
            try:
                while seen.poll() == n0 and time.time() - t0 < 30:
                    time.sleep(0.1)
                took = (seen.at[n0] if len(seen.at) > n0 else
                        time.time()) - t0
                a0 = _total(metrics(ex.port), F.ATTACHED, tier="full")
                time.sleep(LOOK_S)
                m1 = metrics(ex.port)
            finally:
                _unlimit(lab)
            rounds.append({
                "took": took, "lines": _lines(ex)[n0:],
                "allowed": WITHIN_S if blip is None else max(
                    WITHIN_S, blip + ESCALATE_S + WITHIN_S - t0),
                "attached_s": _total(m1, F.ATTACHED, tier="full") - a0,
                "counted": {o: _total(m1, F.ESCALATIONS, reason="p99",
                                      outcome=o) -
                            _total(m0, F.ESCALATIONS, reason="p99",
                                   outcome=o)
                            for o in ("attached", "already", "spent")}})
            # the next round fires after the OSD's quiet time, on a
            # baseline back to the calm one
            if r + 1 < ROUNDS:
                seen.sleep(QUIET_S + 5 - LOOK_S)
        yield {"calm": calm, "rounds": rounds, "stderr": ex.stderr()}
    finally:
        if bench is not None:
            bench.stop()
        _unlimit(lab)
        ex.kill()


def test_a_steady_load_does_not_escalate(escalated):
    assert len(escalated["calm"]) <= 1, escalated["stderr"]


@pytest.mark.parametrize("r", range(ROUNDS))
def test_the_full_tier_comes_on_when_the_tail_moves(escalated, r):
    got = escalated["rounds"][r]
    assert got["lines"], escalated["stderr"]
    assert got["took"] <= got["allowed"], (got, escalated["stderr"])
    _, outcome = got["lines"][0]
    # the reserve pays for it: never "spent"
    assert outcome.startswith(("the full tier attached at once",
                               "the full tier was attached")), got
    assert got["counted"]["spent"] == 0 and \
        got["counted"]["attached"] + got["counted"]["already"] == 1, got
    # and it is on right after: most of the next seconds
    assert got["attached_s"] >= 0.6 * LOOK_S, got
