"""engine/duty.py: the cost is measured (RunCost: the kernel's BPF run
statistics, plus a trap per uprobe run), the reports' estimate is scaled to
it, and the duty cycle holds the bound over the whole run: a budget earned
every second, spent as measured, the rest banked for CREDIT_S. Without the
statistics (an older kernel, or refused) the fixed costs stay.

The tracer here is a simulation on a clock of its own: while attached its
programs cost a set rate, so what the run spent is known exactly."""
import pytest

from cephlat.engine import duty
from cephlat.model.vocab import live as live_vocab

TRAP_NS = 1500          # the calibrated uprobe + uretprobe pair


class SimTracer:
    """What DutyCycle, RunCost and Overhead use of engine/tracer.py's
    Tracer, on a clock `t` moved by run(): while attached, `load` uprobe
    hits a second, each run of their programs `prog_ns`."""

    def __init__(self, stats=True):
        self.t = 1000.0
        self.attached, self.kernel, self.call_bias_ns = True, False, TRAP_NS
        self.stats, self.run_stats = stats, False
        self.totals = {"prog_ns": 0, "uprobe_runs": 0}
        self.hits = 0
        self.load, self.prog_ns = 0, 1000
        self.attaches = self.detaches = 0
        self.cpu = {"on": 0.0}             # % x s the probes cost, true
        self.vocab = live_vocab()          # the hit counters' prices

    def clock(self):
        return self.t

    def measure_runs(self):
        self.run_stats = True

    def run_totals(self):
        return dict(self.totals) if self.stats and self.run_stats else None

    def attach(self):
        self.attached, self.attaches = True, self.attaches + 1

    def detach(self):
        self.attached, self.detaches = False, self.detaches + 1

    def counters(self):
        return {"hit_entry": self.hits}

    def run(self, cycle, secs, step=0.2):
        """`secs` of the owner's loop: tick every `step`."""
        end = self.t + secs
        while self.t < end - 1e-9:
            self.t += step
            if self.attached:
                n = int(self.load * step)
                self.hits += n
                self.totals["uprobe_runs"] += n
                self.totals["prog_ns"] += n * self.prog_ns
                self.cpu["on"] += duty.pct_s(n * (self.prog_ns + TRAP_NS))
            cycle.tick(self.counters())

    def full_pct(self):
        """What the probes cost attached, % of the machine."""
        return duty.pct_s(self.load * (self.prog_ns + TRAP_NS))


def _cycle(bound, tr):
    c = duty.DutyCycle(tr, bound, clock=tr.clock)
    c.start(tr.counters())
    return c


def test_a_window_is_charged_what_it_measured():
    tr = SimTracer()
    tr.load = 100000 // duty.ncpus()
    cycle = _cycle(1.0, tr)
    assert tr.run_stats, "the duty cycle turns the run statistics on"
    tr.run(cycle, 1.0)
    assert cycle.full_pct == pytest.approx(tr.full_pct(), rel=0.01)
    # the fixed costs knew only the trap: measured / fixed
    assert cycle.cost.scale == pytest.approx((1000 + TRAP_NS) / TRAP_NS,
                                        rel=0.01)
    # over the bound: the probes come off
    assert tr.detaches == 1 and not tr.attached


@pytest.mark.parametrize("full", [2.0, 5.0, 20.0])
def test_the_bound_holds_over_the_whole_run(full):
    """Idle for a while, then load at `full` % of the machine attached:
    at every second what the probes spent since the start is within the
    bound x MARGIN (an overshoot of a look's worth, paid back), and in the
    long run the attached share is what the budget pays for."""
    tr = SimTracer()
    tr.load = 200
    cycle = _cycle(1.0, tr)
    tr.run(cycle, 20.0)
    assert tr.detaches == 0, "idle: attached all the time"
    tr.load = int(full / duty.pct_s(tr.prog_ns + TRAP_NS))
    t0, worst = tr.t - 21.0, 0.0
    on0 = cycle.attached_seconds()
    for _ in range(600):
        tr.run(cycle, 1.0)
        worst = max(worst, tr.cpu["on"] + 100.0 * cycle.cycle_cpu_s /
                    duty.ncpus() - duty.MARGIN * (tr.t - t0))
    slack = full * duty.CHECK_S
    assert worst <= slack, (worst, slack)
    mean = tr.cpu["on"] / (tr.t - t0)
    assert mean <= duty.MARGIN * 1.0 * 1.02, mean
    assert mean >= duty.MARGIN * 0.7, "the budget goes unspent"
    share = (cycle.attached_seconds() - on0) / 600.0
    assert share == pytest.approx(duty.MARGIN / full, rel=0.25)
    assert tr.detaches >= 600 / (duty.PERIOD_S + 60) and tr.attaches >= 5


def test_the_bank_pays_for_load_arriving_but_not_for_long():
    """After an hour idle the probes stay on under new load for as long as
    CREDIT_S seconds of budget pay, not for an hour."""
    tr = SimTracer()
    tr.load = 10
    cycle = _cycle(1.0, tr)
    tr.run(cycle, 3600.0, step=1.0)
    tr.load = int(5.0 / duty.pct_s(tr.prog_ns + TRAP_NS))
    start = tr.t
    while tr.attached and tr.t - start < 600:
        tr.run(cycle, 0.2)
    stayed = tr.t - start
    want = duty.MARGIN * duty.CREDIT_S / (5.0 - duty.MARGIN)
    assert want * 0.8 <= stayed <= want + duty.CHECK_S + 0.5, (stayed, want)


def test_the_owners_share_comes_off_the_budget():
    tr = SimTracer()
    tr.load = int(5.0 / duty.pct_s(tr.prog_ns + TRAP_NS))
    alone, shared = _cycle(1.0, tr), None
    tr.run(alone, 300.0)
    alone_on = alone.attached_seconds()
    tr2 = SimTracer()
    tr2.load = tr.load
    shared = _cycle(1.0, tr2)
    shared.other_pct = 0.4
    tr2.run(shared, 300.0)
    ratio = shared.attached_seconds() / alone_on
    assert ratio == pytest.approx((0.8 - 0.4) / 0.8, rel=0.25), ratio
    # an owner over the bound by itself leaves the probes OTHER_SHARE's
    # rest, not nothing
    tr3 = SimTracer()
    tr3.load = tr.load
    starved = _cycle(1.0, tr3)
    starved.other_pct = 5.0
    tr3.run(starved, 300.0)
    assert 0 < starved.attached_seconds() < 0.5 * ratio * alone_on


def test_the_reports_estimate_is_scaled_to_the_measure():
    tr = SimTracer()
    tr.load = 1000
    cycle = _cycle(50.0, tr)          # a bound the probes stay under

    class Snap:
        def __init__(self, hits):
            self.counters = {"hit_entry": hits}

    first = Snap(0)
    t_start = tr.t
    ov = duty.Overhead(tr, 50.0, first, cycle, t_start, host_part=False)
    ov.meter.switches = lambda: 0
    tr.run(cycle, 10.0)
    assert tr.detaches == 0
    rec = ov.record(Snap(tr.hits), first, tr.t, t_start)
    want = tr.cpu["on"] / (tr.t - t_start)
    assert rec["estimated_pct"] == pytest.approx(want, rel=0.05)


def test_without_run_statistics_the_fixed_costs_stay():
    tr = SimTracer(stats=False)
    tr.load = int(5.0 / duty.pct_s(tr.prog_ns + TRAP_NS))
    cycle = _cycle(1.0, tr)
    tr.run(cycle, 1.0)
    assert cycle.full_pct == pytest.approx(
        duty.pct_s(tr.load * TRAP_NS), rel=0.02)
    assert cycle.cost.scale == 1.0 and not cycle.cost.measured
    assert tr.detaches == 1


def test_load_arriving_in_a_window_is_met_within_a_look():
    """A window the bank planned for a light load ends within a look of
    the load growing, not when planned."""
    tr = SimTracer()
    per = duty.pct_s(tr.prog_ns + TRAP_NS)
    tr.load = int(1.5 / per)
    cycle = _cycle(1.0, tr)
    tr.run(cycle, 120.0)
    assert tr.detaches >= 3 and cycle.on_s > 2 * duty.CHECK_S
    while not tr.attached:
        tr.run(cycle, 0.2)
    tr.load = int(20.0 / per)
    on = tr.t
    while tr.attached:
        tr.run(cycle, 0.2)
    assert tr.t - on <= duty.CHECK_S + 0.5, (tr.t - on, cycle.on_s)


def _saturated(escalations, full=5.0, secs=300.0):
    tr = SimTracer()
    tr.load = int(full / duty.pct_s(tr.prog_ns + TRAP_NS))
    cycle = duty.DutyCycle(tr, 1.0, clock=tr.clock, escalations=escalations)
    cycle.start(tr.counters())
    tr.run(cycle, secs)
    return tr, cycle


def _until_detached(tr, cycle, most=600.0):
    start = tr.t
    while tr.attached and tr.t - start < most:
        tr.run(cycle, 0.2)
    return tr.t - start


def test_an_escalation_comes_on_at_once_and_stays_on_its_while():
    """At saturation (the probes cost 5 x the bound attached) the regular
    windows leave the reserve in the bank: an escalation while detached
    attaches at the next tick and stays on while the bank pays, up to
    ESCALATE_S (a look's worth more at most); one while attached says so
    and keeps them on as long."""
    tr, cycle = _saturated(True)
    _until_detached(tr, cycle)
    assert not tr.attached
    # ESCALATE_S at the full-rate cost, at most RESERVE_SHARE of the cap
    over = cycle.full_pct - cycle._rate()
    reserve = min(over * duty.ESCALATE_S, duty.RESERVE_SHARE * 1.0 *
                  duty.MARGIN * duty.CREDIT_S)
    assert cycle._reserve() == pytest.approx(reserve)
    assert cycle.bank >= 0.9 * reserve, (cycle.bank, reserve)
    # the bank, at least the reserve's worth
    want = min(duty.ESCALATE_S, max(cycle.bank, reserve) / over)
    assert cycle.escalate() == "attached"
    tr.run(cycle, 0.2)
    assert tr.attached, "on at the next tick"
    stayed = 0.2 + _until_detached(tr, cycle)
    assert want - 0.5 <= stayed <= want + duty.CHECK_S + 0.5, (stayed, want)
    # attached already: it stays on for the escalation's while
    while not tr.attached:
        tr.run(cycle, 0.2)
    tr.run(cycle, 60.0)       # the reserve refilled, on a regular window
    while not tr.attached:
        tr.run(cycle, 0.2)
    assert cycle.escalate() == "already"
    assert _until_detached(tr, cycle) >= want - 0.5


def test_escalations_keep_the_bound():
    """One escalation a minute for ten minutes at saturation: what the
    probes spent is still within the bound x MARGIN over the run (a look's
    worth of overshoot, paid back), and every escalation came on."""
    tr, cycle = _saturated(True, secs=60.0)
    t0, cpu0 = tr.t, tr.cpu["on"]
    outcomes = []
    for _ in range(10):
        outcomes.append(cycle.escalate())
        tr.run(cycle, 60.0)
    spent = tr.cpu["on"] - cpu0 + 100.0 * cycle.cycle_cpu_s / duty.ncpus()
    assert spent / (tr.t - t0) <= duty.MARGIN * 1.0 * 1.05, \
        spent / (tr.t - t0)
    assert outcomes.count("spent") == 0, outcomes


def test_an_escalation_borrows_the_reserve_a_short_bank_lacks():
    """The cycles' own attach and detach left the bank short of the
    reserve: the escalation still comes on, for the reserve's worth
    (borrowed), and the regular windows then wait until it is paid back
    and the reserve is there again."""
    tr, cycle = _saturated(True)
    _until_detached(tr, cycle)
    reserve = cycle._reserve()
    cycle.bank = 0.1 * reserve
    over = cycle.full_pct - cycle._rate()
    assert cycle.escalate() == "attached"
    tr.run(cycle, 0.2)
    assert tr.attached
    stayed = 0.2 + _until_detached(tr, cycle)
    want = min(duty.ESCALATE_S, reserve / over)
    assert want - 0.5 <= stayed <= want + duty.CHECK_S + 0.5, (stayed, want)
    assert cycle.bank < 0
    # off until the debt and the reserve are paid
    off = 0.0
    while not tr.attached and off < 600:
        tr.run(cycle, 0.2)
        off += 0.2
    assert cycle.bank >= 0.9 * reserve, (cycle.bank, reserve)


def test_without_the_reserve_an_escalation_finds_the_bank_spent():
    """The regular windows spend the bank down: right after one, there is
    nothing left for an escalation, and it says so (no probes on)."""
    tr, cycle = _saturated(False)
    _until_detached(tr, cycle)
    assert cycle.escalate() == "spent"
    tr.run(cycle, 0.2)
    assert not tr.attached
