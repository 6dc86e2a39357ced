"""Bounding what tracing costs the traced process: estimate the cost from
probe hits x cost per hit, and attach only part of the time (duty cycles)
so that the estimate stays under a bound.

Why duty cycles and not op sampling: a uprobe costs its trap (~1-2 us on
the development VM) whether or not the BPF program then does anything, so
the only way to pay less is to have fewer probes attached. Attaching and
detaching take tens to hundreds of ms, so the cycle is seconds long:
histograms come from the attached windows, representative for a steady
workload.
"""
import os
import time

# What one scheduler/syscall tracepoint run costs (program plus dispatch),
# from `make bench` on the development VM (programs' average ns per run).
TP_COST_NS = 150
# A scheduler program's run for another process's threads: it returns at
# the target filter and counts nothing, so such runs are taken from the
# host's context switches (/proc/stat ctxt) at this cost each.
TP_FILTER_NS = 40
MIN_UPROBE_COST_NS = 500
PERIOD_S = 10.0
MIN_ON_S = 1.0
MARGIN = 0.8          # aim below the bound: the full-rate cost drifts


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

    def switches(self):
        """The host's context switches so far, where the scheduler
        programs are loaded (0 with --no-kernel)."""
        return host_switches() if getattr(self.tracer, "kernel", True) \
            else 0

    def cost_ns(self, counters):
        return ((counters.get("hit_entry", 0) + counters.get("hit_return", 0))
                * self.uprobe_ns +
                (counters.get("hit_sched", 0) + counters.get("hit_syscall", 0))
                * TP_COST_NS +
                counters.get("host_switches", 0) * TP_FILTER_NS)

    def pct(self, counters, attached_s):
        """Cost while attached, as % of all CPUs over attached_s."""
        if attached_s <= 0:
            return 0.0
        return 100.0 * self.cost_ns(counters) / (attached_s * 1e9 * ncpus())


class DutyCycle:
    """Attach for `on` seconds, detach for `off`, with on/(on+off) chosen so
    that full-rate cost x duty <= bound."""

    def __init__(self, tracer, bound_pct):
        self.tracer, self.bound = tracer, bound_pct
        self.meter = CostMeter(tracer)
        self.duty = 1.0
        self.full_pct = None
        self.on_s, self.off_s = MIN_ON_S, 0.0
        now = time.monotonic()
        self.switch_at = now + MIN_ON_S          # first window: measure
        self.window_start = now
        self.window_counters = None
        self.attached_total = 0.0                # attached seconds, running
        # what the cycles themselves cost: our CPU time attaching and
        # detaching (the kernel's uprobe (un)registration runs in our
        # process), total and for the last cycle
        self.cycle_cpu_s = 0.0
        self.last_cycle_cpu_s = 0.0
        self._cycle_cpu = 0.0
        # the owner's other CPU time, % of the machine's, kept off the
        # budget too (0 for osdstage; the exporter sets its own)
        self.other_pct = 0.0

    def start(self, counters):
        self.window_counters = dict(counters,
                                    host_switches=self.meter.switches())
        self.window_start = time.monotonic()

    def tick(self, counters):
        counters = dict(counters, host_switches=self.meter.switches())
        now = time.monotonic()
        if now < self.switch_at:
            return
        if self.tracer.attached:
            span = now - self.window_start
            self.attached_total += span
            delta = {k: v - self.window_counters.get(k, 0)
                     for k, v in counters.items()}
            full = self.meter.pct(delta, span)
            # smooth: the full-rate cost of the workload drifts slowly
            self.full_pct = full if self.full_pct is None else \
                0.5 * self.full_pct + 0.5 * full
            # a cycle's own cost comes off the budget of its period, and
            # so does what the owner spends besides (other_pct: the
            # exporter's own CPU)
            cycle_pct = 100.0 * self.last_cycle_cpu_s / (PERIOD_S * ncpus())
            budget = max(self.bound * MARGIN - cycle_pct - self.other_pct,
                         0.1 * self.bound * MARGIN)
            self.duty = 1.0 if self.full_pct <= self.bound * MARGIN - \
                self.other_pct else min(1.0, budget / self.full_pct)
            if self.duty >= 1.0:
                self.switch_at = now + PERIOD_S
                self.window_start, self.window_counters = now, dict(counters)
                return
            # detaching takes a while (uprobe unregistration waits for RCU)
            # and the probes fire until it is done: that counts as attached
            t0, c0 = time.monotonic(), time.process_time()
            self.tracer.detach()
            detach_s = time.monotonic() - t0
            self._cycle_cpu += time.process_time() - c0
            self.cycle_cpu_s += time.process_time() - c0
            self.last_cycle_cpu_s, self._cycle_cpu = self._cycle_cpu, 0.0
            self.attached_total += detach_s
            self.on_s = max(MIN_ON_S, self.duty * PERIOD_S)
            self.off_s = (self.on_s + detach_s) * (1 - self.duty) / self.duty
            self.switch_at = time.monotonic() + self.off_s
        else:
            c0 = time.process_time()
            self.window_start = time.monotonic()
            self.tracer.attach()
            spent = time.process_time() - c0
            self._cycle_cpu += spent
            self.cycle_cpu_s += spent
            self.window_counters = dict(counters)
            self.switch_at = self.window_start + self.on_s

    def attached_seconds(self):
        """Attached time so far, including the current window."""
        extra = time.monotonic() - self.window_start if self.tracer.attached \
            else 0.0
        return self.attached_total + extra


HIT_COUNTERS = ("hit_entry", "hit_return", "hit_sched", "hit_syscall")


class Overhead:
    """What each report says about the cost: the estimate since the start
    (duty cycles are seconds long, an interval may hold only part of one),
    the attached share, and the interval's probe hits."""

    def __init__(self, tracer, bound_pct, first, cycle, t_start,
                 host_part=True):
        # host_part: this estimate carries the host's share (the scheduler
        # programs' runs for other processes: once per run, not per OSD)
        self.host_part = host_part
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
                for k in HIT_COUNTERS}
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
        full = self.meter.pct(total, total_att) if total_att > 0 else 0.0
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
