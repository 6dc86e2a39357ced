"""Bounding what tracing costs the traced process: know the cost, and
attach only part of the time (duty cycles) so that it stays under a bound.

The cost is measured (RunCost): the kernel's BPF run statistics are held
on while attached (Tracer.measure_runs), so the time of every run of our
programs is known (scheduler and block programs in any task, uprobe
programs in the target's threads), and each uprobe run is also charged its
trap (the calibrated uprobe + uretprobe pair, at least MIN_UPROBE_COST_NS).
The fixed costs per hit below are the fallback where the kernel refuses
the statistics, and the reports' per-OSD split (scaled to the measure).
Measured on the 3-OSD lab: the scheduler programs take ~250 ns a run,
where TP_COST_NS and TP_FILTER_NS assume 150 and 40, and the block
programs (not in the fixed costs) ~250 ns.

The bound is held over the whole run, not window by window (DutyCycle): a
budget earned every second, spent as measured, the rest banked for a
while. A run that starts idle and then meets load stays under the bound
since its start.

Why duty cycles and not op sampling: a uprobe costs its trap (~1-2 us on
a 2-core Debian 12 VM, kernel 6.18) whether or not the BPF program then does anything, so
the only way to pay less is to have fewer probes attached. Attaching and
detaching take tens to hundreds of ms, so the cycle is seconds long:
histograms come from the attached windows, representative for a steady
workload.
"""
import os
import time

# What one scheduler/syscall tracepoint run costs (program plus dispatch),
# from `make bench` on that VM (programs' average ns per run).
TP_COST_NS = 150
# A scheduler program's run for another process's threads: it returns at
# the target filter and counts nothing, so such runs are taken from the
# host's context switches (/proc/stat ctxt) at this cost each.
TP_FILTER_NS = 40
MIN_UPROBE_COST_NS = 500
PERIOD_S = 10.0
MIN_ON_S = 1.0
# attached all the time (the cost under the bound): how often the cost is
# measured again, so that load arriving on an idle OSD is met within this
CHECK_S = 2.0
# attached with the bank paying for less than this: detach now
MIN_LOOK_S = 0.5
MARGIN = 0.8          # aim below the bound: the full-rate cost drifts
# budget left over (an idle OSD) is kept at most this many seconds' worth:
# it pays for load arriving, not for an hour at full rate after a night
CREDIT_S = 60.0
# the owner's own cost comes off the budget up to this share of it: the
# probes keep the rest (an exporter over the bound by itself says so)
OTHER_SHARE = 0.9
# an escalation (escalate(): the exporter's lean tier saw the tail move)
# keeps the probes on this long, paid from a reserve that the regular
# windows leave in the bank: that long at the last full-rate cost, at
# most RESERVE_SHARE of the bank's cap
ESCALATE_S = 10.0
RESERVE_SHARE = 0.5
# what escalate() answers
ESCALATION_OUTCOMES = ("attached", "already", "spent")


def ncpus():
    return os.cpu_count() or 1


def host_switches():
    """The host's context switches since boot (/proc/stat ctxt)."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("ctxt "):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class CostMeter:
    """Cost of the attached probes, as a % of the machine's CPU time."""

    def __init__(self, tracer):
        self.tracer = tracer
        self.uprobe_ns = max(tracer.call_bias_ns, MIN_UPROBE_COST_NS)
        # the hit counters at each price, as the header marks them
        self.uprobe_hits = tracer.vocab.uprobe_hits
        self.tp_hits = tracer.vocab.tp_hits

    def switches(self):
        """The host's context switches so far, where the scheduler
        programs are loaded (0 with --no-kernel)."""
        return host_switches() if getattr(self.tracer, "kernel", True) \
            else 0

    def cost_ns(self, counters):
        return (sum(counters.get(k, 0) for k in self.uprobe_hits) *
                self.uprobe_ns +
                sum(counters.get(k, 0) for k in self.tp_hits) * TP_COST_NS +
                counters.get("host_switches", 0) * TP_FILTER_NS)

    def pct(self, counters, attached_s):
        """Cost while attached, as % of all CPUs over attached_s."""
        if attached_s <= 0:
            return 0.0
        return 100.0 * self.cost_ns(counters) / (attached_s * 1e9 * ncpus())


class RunCost:
    """What our programs have cost since start(), in CPU ns: measured when
    the kernel's BPF run statistics are on (Tracer.measure_runs: every run
    of our programs timed, plus each uprobe run's trap at the calibrated
    uprobe + uretprobe cost), else the fixed costs per hit (CostMeter).
    Either way the fixed costs' estimate is kept too: `scale`, measured over
    fixed, scales the reports' per-OSD estimates to the measure.

    update() brings it to now; call it before the probes are attached or
    detached (the host's context switches count only while attached)."""

    def __init__(self, tracer):
        self.tracer = tracer
        self.meter = CostMeter(tracer)
        self.runs0, self.counters0, self._sw = None, {}, 0
        self.switches_attached = 0
        self.ns = self.fixed_ns = 0.0
        self.scale, self.measured = 1.0, False

    def start(self, counters):
        self.tracer.measure_runs()
        self.runs0 = self.tracer.run_totals()
        self.counters0 = dict(counters)
        self._sw = self.meter.switches()

    def update(self, counters):
        """`counters`: the tracer's, summed over its targets."""
        sw = self.meter.switches()
        if self.tracer.attached:
            self.switches_attached += max(0, sw - self._sw)
        self._sw = sw
        delta = {k: v - self.counters0.get(k, 0) for k, v in counters.items()}
        delta["host_switches"] = self.switches_attached
        self.fixed_ns = self.ns = float(self.meter.cost_ns(delta))
        runs = self.tracer.run_totals()
        if runs is None or self.runs0 is None:
            return
        self.ns = float(runs["prog_ns"] - self.runs0["prog_ns"] +
                        (runs["uprobe_runs"] - self.runs0["uprobe_runs"]) *
                        self.meter.uprobe_ns)
        if self.fixed_ns > 0:
            self.scale, self.measured = self.ns / self.fixed_ns, True


def pct_s(ns):
    """CPU ns as % of the machine x seconds."""
    return 100.0 * ns / (1e9 * ncpus())


class DutyCycle:
    """Attach and detach so that what the probes cost since the start, with
    the cycles' own cost and the owner's (other_pct), stays under the
    bound x MARGIN: a budget is earned every second and spent as measured
    (RunCost); what is left over is banked, at most CREDIT_S seconds'
    worth, and pays for staying attached when load arrives, until spent.
    Then on/(on+off) is the share the budget pays for.

    escalations: the regular windows leave a reserve in the bank
    (ESCALATE_S of a window), and escalate() spends the bank, at least
    the reserve's worth (borrowed when the bank holds less: the cycles'
    own attach and detach left it short): the probes come on at once and
    stay on for ESCALATE_S while that pays; the regular windows wait
    until the bank holds the reserve again, so the bound holds over the
    run."""

    def __init__(self, tracer, bound_pct, clock=time.monotonic,
                 escalations=False):
        self.tracer, self.bound, self.clock = tracer, bound_pct, clock
        self.reserve_s = ESCALATE_S if escalations else 0.0
        self.escalated_until = 0.0
        self.escalation_floor = 0.0     # the bank an escalation may spend to
        self.cost = RunCost(tracer)
        self.duty = 1.0
        self.full_pct = None
        self.on_s, self.off_s = MIN_ON_S, 0.0
        now = clock()
        self.switch_at = now + MIN_ON_S          # first window: measure
        self.window_start, self.window_ns = now, 0.0
        self.attached_total = 0.0                # attached seconds, running
        # what the cycles themselves cost: our CPU time attaching and
        # detaching (the kernel's uprobe (un)registration runs in our
        # process), total and for the last cycle
        self.cycle_cpu_s = 0.0
        self.last_cycle_cpu_s = 0.0
        self._cycle_cpu = 0.0
        # the owner's other CPU time, % of the machine's, kept off the
        # budget too (0 for osdstage; the exporter sets its own), at most
        # OTHER_SHARE of it
        self.other_pct = 0.0
        # the budget not spent yet, % of the machine x seconds (below 0:
        # overspent, paid back before the probes come on again)
        self.bank = 0.0
        self._settled = (now, 0.0, 0.0)         # time, cost ns, cycle CPU

    def start(self, counters):
        self.cost.start(counters)
        self.window_start = self.clock()
        self._settled = (self.window_start, 0.0, 0.0)

    def _rate(self):
        """Budget a second, % of the machine: the bound's, less the owner's
        share (that much is spent whatever the probes do)."""
        b = self.bound * MARGIN
        return b - min(self.other_pct, OTHER_SHARE * b)

    def _reserve(self):
        """What the regular windows leave in the bank for an escalation,
        % of the machine x seconds."""
        if not self.reserve_s or self.full_pct is None:
            return 0.0
        return min(max(0.0, self.full_pct - self._rate()) * self.reserve_s,
                   RESERVE_SHARE * self.bound * MARGIN * CREDIT_S)

    def escalate(self):
        """The probes on at once, for ESCALATE_S while the bank pays (at
        least the reserve's worth) -> "attached" (the next tick attaches
        them), "already" (they were: they stay on up to ESCALATE_S), or
        "spent" (even so, it cannot pay for MIN_ON_S: the next regular
        window comes at switch_at)."""
        now = self.clock()
        need = 0.0 if self.full_pct is None else \
            max(0.0, self.full_pct - self._rate()) * MIN_ON_S
        can = max(self.bank, self._reserve())
        if can < 0 or (need > 0 and can <= need):
            return "spent"
        self.escalation_floor = self.bank - can
        self.escalated_until = now + max(self.reserve_s, MIN_ON_S)
        if self.tracer.attached:
            return "already"
        self.switch_at = now
        return "attached"

    def _settle(self, counters):
        """Cost and bank up to now -> now."""
        self.cost.update(counters)
        now = self.clock()
        t, ns, cpu = self._settled
        spent = pct_s(self.cost.ns - ns) + \
            100.0 * (self.cycle_cpu_s - cpu) / ncpus()
        self.bank = min(self.bank + self._rate() * (now - t) - spent,
                        self.bound * MARGIN * CREDIT_S)
        self._settled = (now, self.cost.ns, self.cycle_cpu_s)
        return now

    def tick(self, counters):
        if self.clock() < self.switch_at:
            return
        now = self._settle(counters)
        if self.tracer.attached:
            span = now - self.window_start
            self.attached_total += span
            full = pct_s(self.cost.ns - self.window_ns) / max(span, 1e-3)
            # smooth a falling cost (the workload drifts slowly); a rising
            # one is taken at once
            self.full_pct = full if self.full_pct is None or \
                full > self.full_pct else 0.5 * self.full_pct + 0.5 * full
            rate = self._rate()
            self.duty = 1.0 if self.full_pct <= rate else \
                rate / self.full_pct
            self.window_start, self.window_ns = now, self.cost.ns
            # stay on while the bank pays for it (less the escalations'
            # reserve, unless one is on), looking again every CHECK_S
            # (load arriving is met there) or when it runs out
            usable = self.bank - self.escalation_floor \
                if now < self.escalated_until else \
                self.bank - self._reserve()
            left = CHECK_S if self.full_pct <= rate else \
                usable / (self.full_pct - rate)
            if left >= MIN_LOOK_S:
                self.switch_at = now + min(CHECK_S, left)
                return
            # detaching takes a while (uprobe unregistration waits for RCU)
            # and the probes fire until it is done: that counts as attached
            t0, c0 = self.clock(), time.process_time()
            self.tracer.detach()
            detach_s = self.clock() - t0
            spent = time.process_time() - c0
            self._cycle_cpu += spent
            self.cycle_cpu_s += spent
            self.last_cycle_cpu_s, self._cycle_cpu = self._cycle_cpu, 0.0
            self.attached_total += detach_s
            self._settle(counters)          # the detach's cost too
            # off until the bank pays for the next window and its cycle
            self.on_s = max(MIN_ON_S, self.duty * PERIOD_S)
            owe = (self.full_pct - rate) * self.on_s - self.bank + \
                self._reserve() + \
                100.0 * self.last_cycle_cpu_s / ncpus() + \
                self.full_pct * detach_s
            self.off_s = max(MIN_ON_S, owe / rate)
            self.switch_at = self.clock() + self.off_s
        else:
            c0 = time.process_time()
            self.tracer.attach()
            spent = time.process_time() - c0
            self._cycle_cpu += spent
            self.cycle_cpu_s += spent
            self.window_start, self.window_ns = self.clock(), self.cost.ns
            self.switch_at = self.window_start + min(self.on_s, CHECK_S)

    def attached_seconds(self):
        """Attached time so far, including the current window."""
        extra = self.clock() - self.window_start if self.tracer.attached \
            else 0.0
        return self.attached_total + extra


class Overhead:
    """What each report says about the cost: the estimate since the start
    (duty cycles are seconds long, an interval may hold only part of one),
    the attached share, and the interval's probe hits."""

    def __init__(self, tracer, bound_pct, first, cycle, t_start,
                 host_part=True, cost=None):
        # host_part: this estimate carries the host's share (the scheduler
        # programs' runs for other processes: once per run, not per OSD)
        self.host_part = host_part
        # a RunCost (the duty cycle's by default), kept up to date by the
        # owner: the estimate is scaled to what it measured
        self.cost = cost if cost is not None or cycle is None else cycle.cost
        self.meter = CostMeter(tracer)
        self.bound_pct, self.first, self.cycle = bound_pct, first, cycle
        self.t_start = t_start
        self.att_last = 0.0
        self.switches0 = self.switches_last = \
            self.meter.switches() if host_part else 0

    def record(self, cur, prev, now, t_last):
        """The report's "overhead" object for the interval prev -> cur."""
        cycle = self.cycle
        att = cycle.attached_seconds() if cycle else 0.0
        attached = (att - self.att_last) if cycle else (now - t_last)
        self.att_last = att
        hits = {k: cur.counters.get(k, 0) - prev.counters.get(k, 0)
                for k in self.meter.tracer.vocab.hits}
        frac = min(1.0, attached / max(now - t_last, 1e-9))
        total = {k: cur.counters.get(k, 0) - self.first.counters.get(k, 0)
                 for k in hits}
        elapsed = max(now - self.t_start, 1e-9)
        total_att = cycle.attached_seconds() if cycle else elapsed
        # the scheduler programs run (and return at once) for every other
        # context switch of the host while attached
        sw = self.meter.switches() if self.host_part else 0
        hits["host_switches"] = max(0, sw - self.switches_last)
        self.switches_last = sw
        total["host_switches"] = int(max(0, sw - self.switches0) *
                                     min(1.0, total_att / elapsed))
        scale = 1.0
        if self.cost is not None:
            # the fixed costs' estimate, scaled to the measure
            scale = self.cost.scale
            if self.host_part:
                total["host_switches"] = self.cost.switches_attached
        full = scale * self.meter.pct(total, total_att) if total_att > 0 \
            else 0.0
        # the duty cycles' own cost (attach/detach), over the whole run
        cycles_pct = 100.0 * cycle.cycle_cpu_s / (elapsed * ncpus()) \
            if cycle and self.host_part else 0.0
        return {
            "bound_pct": self.bound_pct,
            "attached_fraction": round(min(1.0, total_att / elapsed), 3),
            "interval_attached_fraction": round(frac, 3),
            "full_rate_pct": round(full, 3),
            "estimated_pct": round(full * min(1.0, total_att / elapsed) +
                                   cycles_pct, 3),
            "cycles_pct": round(cycles_pct, 3),
            "uprobe_cost_ns": self.meter.uprobe_ns,
            "hits": hits,
        }
