"""The exporter's loop: find the host's OSDs, trace them all (engine/
session.py, as `osdstage.py --osd all`) in two tiers, and every refresh add
each OSD's interval to the exported sums (exporter/collect.py).

The tiers (docs/stages.md, Tiers): the lean one (`osdstage.py --lean`: one
probe hit per op) is attached all the time, so its stages count every op;
the full one (every stage, the kernel's, the queue-wait attribution) is
attached in duty cycles under the bound, so its figures are a sample of
the attached seconds. A stage both give is exported from the lean tier
(`osdstage_stage_tier_info` says which tier feeds each stage).

OSDs come and go (restarts, new OSDs, removed ones): the set is looked at
every second, and when it changes the tracers are closed, after a last
refresh, and new ones are started for the new set. A new process that
cannot be traced (it exited while being planned, a binary no probe table
knows) is held back for HOLD_S, said once, and never makes the OSDs
already traced detach: each new one is planned alone before they are.
The sums live here, not in the tracer, so Prometheus' counters never go
backwards. A process must have run for a second, and have daemonized,
before it is traced: a starting ceph-osd spends seconds (the monitors'
config, the store's label) before it forks; its first process then waits
for the child and exits.

Cost: the full tier's duty cycles (engine/duty.py) keep the whole (the
lean tier's measured cost, the exporter's own CPU and the full tier's)
under --max-overhead, 1 % of the host's CPU by default, where the lean
tier and the exporter leave it room; the attached seconds of each tier
are exported with the figures.

Escalation: every refresh the lean tier's op latency of each OSD is
watched (exporter/tailwatch.py); when its tail moves the full tier comes
on at once, out of its duty cycle, paid from a reserve its regular
windows leave in the budget (DutyCycle.escalate), and the exporter says
why (a line, and osdstage_full_tier_escalations_total).
"""
import io
import signal
import time

from .budget import lean_share_note, own_share_note, whole_share_note
from .bykey import ByKeys
from .collect import SCHED_CLASSES
from .exemplars import exemplars_of
from .osds import OsdScan, wanted
from .tailwatch import TailWatch
from ..ceph.clusternames import NamesLookup
from ..ceph.target import netns_id
from ..engine import duty
from ..engine.session import Session, Want, plan_targets
from ..engine.optable import table_size
from ..livetraces import Traces
from ..model.interval import build_interval
from ..model.sample import EVERY_OP, TraceChoice
from ..send.otlp import endpoint
from ..errors import UserError

TOOL = "osdstage-exporter"
LOOK_S = 1.0            # how often the host's OSDs are looked for
RETRY_S = 2.0           # after a failed start
HOLD_S = 30.0           # a process that could not be planned, left alone
# --tiers: the tiers run, in attach order
TIER_SETS = {"both": ("lean", "full"), "lean": ("lean",), "full": ("full",)}


class Tier:
    """One tier's tracer over the host's OSDs (a Session's, started), its
    runs, the last snapshots and what it costs: measured all the time
    (RunCost); cycled under `bound_pct` (DutyCycle) when `cycled`."""

    def __init__(self, name, ses, bound_pct, cycled, t0, escalations=False):
        self.name, self.tracer, self.plans = name, ses.tracer, ses.plans
        self.runs = ses.run_infos()
        self.tracer.keep_cumulative = False     # the sums are collect.py's
        self.prevs = self.tracer.snapshots()
        self.t0 = t0
        counters = self.tracer.snapshot_counters()
        self.cycle = duty.DutyCycle(self.tracer, bound_pct,
                                    escalations=escalations) if cycled \
            else None
        self.cost = self.cycle.cost if cycled else duty.RunCost(self.tracer)
        if cycled:
            self.cycle.start(counters)
        else:
            self.cost.start(counters)
        self.overheads = [duty.Overhead(self.tracer, bound_pct, prev,
                                        self.cycle, t0, host_part=slot == 0,
                                        cost=self.cost)
                          for slot, prev in enumerate(self.prevs)]

    def pct(self, now):
        """Its measured cost since its start, % of the host's CPU."""
        return duty.pct_s(self.cost.ns) / max(now - self.t0, duty.PERIOD_S)

    def cycle_cpu_s(self):
        return self.cycle.cycle_cpu_s if self.cycle is not None else 0.0


class Exporter:
    """The loop over the host's OSDs, as `config` (ExporterConfig) says;
    each refresh into `exported` (collect.py's Exported); what it has to
    say to `err`."""

    def __init__(self, config, exported, err):
        self.config, self.exported, self.err = config, exported, err
        # the tiers to run, in attach order (--tiers)
        self.tier_names = TIER_SETS[config.tiers]
        self.tiers = []         # Tier, started, in tier_names' order
        self.pids = ()          # what the tracers trace
        self.names = []
        self.t_last = 0.0
        self.said_none = False
        self.gone = set()       # names of traced OSDs that exited
        self.scan = OsdScan(netns_id(config.host_netns)
                            if config.host_netns else None)
        self.last_error = None
        self.held = {}          # pid -> monotonic time it is tried again
        self.said_held = set()
        self.own_s = 0.0        # own CPU and seconds since the first start
        self.own_since = None
        self.said_own = self.said_lean = self.said_no_lean = False
        self.said_whole = False
        self.version = None     # the traced OSDs' Ceph version
        # --otlp: the full tier's chosen ops to the collector
        # (livetraces.py; the ops it sent become exemplars: exemplars.py)
        self.traces = Traces(
            endpoint(config.otlp), config.host_netns, self.say,
            on_sent=exemplars_of(exported)) if config.otlp else None
        # --by: the full tier's ops by key (exporter/bykey.py); the
        # cluster's names looked up once an OSD is traced (its ceph.conf)
        self.by = ByKeys(config.by, config.by_top) if config.by else None
        # the lean tier watching the tail, the full tier escalating: with
        # both tiers and a bound (else the full tier is always on, or
        # there is no lean tier to watch)
        watched = (config.escalate_factor or
                   config.escalate_over is not None) and \
            config.tiers == "both" and config.max_overhead
        self.watch = TailWatch(config.escalate_factor, config.escalate_over,
                               config.escalate_quiet) if watched else None

    def say(self, msg):
        self.err.write("%s: %s\n" % (TOOL, msg))
        self.err.flush()

    @property
    def full(self):
        """The full tier (None when --tiers lean, or before a start)."""
        return next((t for t in self.tiers if t.name == "full"), None)

    @property
    def lean(self):
        return next((t for t in self.tiers if t.name == "lean"), None)

    @property
    def cycle(self):
        """The full tier's duty cycle (None: no bound, or no full tier)."""
        full = self.full
        return full.cycle if full is not None else None

    # --- which OSDs ------------------------------------------------------
    def wanted(self):
        """The pids to trace now (osds.wanted)."""
        return wanted(self.scan, self.config.osd, self.pids)

    # --- the tracers' life -----------------------------------------------
    def _want(self, pids, name):
        c = self.config
        lean = name == "lean"
        # the ops to send as traces: chosen by the full tier's programs
        traces = TraceChoice(c.otlp_sample, c.otlp_over, c.otlp_rate) \
            if c.otlp and not lean else EVERY_OP if c.by and not lean \
            else None
        return Want(pid=list(pids), stages=None if lean else c.stages,
                    release=c.release, no_kernel=c.no_kernel, lean=lean,
                    max_ops=c.max_ops, host_netns=c.host_netns,
                    traces=traces, behind=c.behind and not lean)

    def _session(self, pids, name):
        return Session(self._want(pids, name), self.err)

    def start(self, pids):
        """One tracer per tier over `pids`, the lean one first: a tier
        that cannot be planned (the lean tier on a binary whose table has
        not its offsets) is said once and left out while another can run."""
        bound = self.config.max_overhead
        tiers, sessions = [], []
        try:
            for name in self.tier_names:
                try:
                    ses = self._session(pids, name)
                except UserError as e:
                    if len(self.tier_names) == 1 or name != "lean":
                        raise
                    if not self.said_no_lean:
                        self.say("no lean tier: %s; the full tier alone" % e)
                        self.said_no_lean = True
                    continue
                sessions.append(ses)
                ses.tracer.start()
                cycled = name == "full" and bool(bound)
                tiers.append(Tier(name, ses, bound, cycled, time.time(),
                                  escalations=self.watch is not None))
        except BaseException:
            for ses in sessions:
                ses.tracer.close()
            raise
        self.tiers, self.pids = tiers, tuple(pids)
        self.names = [run.name for run in tiers[0].runs]
        if self.by is not None and self.by.lookup is None and \
                self.config.by in ("pool", "image", "client"):
            self.by.lookup = NamesLookup(self.pids[0])
        # each stage from the first tier that gives it: the lean one's
        # count every op; the scheduler classes' figures (held time) are
        # the full tier's op_dequeue's
        sources = {}
        for t in tiers:
            for st in t.plans[0].stages:
                sources.setdefault(st, t.name)
        stages = list(sources)
        sources[SCHED_CLASSES] = tiers[-1].name
        self.sources = sources
        choice = sessions[0].choice
        rel = choice.release
        self.version = choice.version
        for t, run in zip(sessions[0].targets, tiers[0].runs):
            info = (str(t.pid), choice.version or "", rel.name,
                    rel.key if choice.exact is not None else "",
                    "" if choice.exact is None else str(bool(choice.exact))
                    .lower(), ",".join(stages))
            self.exported.attached(run.name, info, sources)
        self.t_last = time.time()
        self.cpu_last, self.cycles_last = time.process_time(), 0.0
        self.exported.publish()
        self.say("tracing %s (Ceph %s; %s)" % (
            ", ".join("%s pid %d" % (n, p) for n, p in zip(self.names,
                                                          self.pids)),
            choice.version or rel.name, "; ".join(
                "%s tier: %d stages%s%s" % (
                    t.name, len(t.plans[0].stages),
                    " + kernel" if t.tracer.kernel else "",
                    ", always attached" if t.cycle is None else
                    ", in duty cycles" + (
                        " and at once when the lean tier sees the tail move"
                        if t.cycle.reserve_s else "")) for t in tiers)))

    def _close_all(self):
        for t in self.tiers:
            t.tracer.close()
        self.exported.detached(self.names)
        self.tiers, self.pids, self.names = [], (), []
        self.gone = set()

    def stop(self):
        """A last refresh, then detach and close."""
        if not self.tiers:
            return
        try:
            self.refresh()
        finally:
            self._close_all()
            self.exported.publish()

    def abandon(self):
        """Close a failed tracer, keeping what can still be read."""
        try:
            self.stop()
        except UserError:
            if self.tiers:
                self._close_all()

    def refresh(self):
        """Every traced OSD's interval since the last refresh, summed, for
        each tier."""
        now = time.time()
        full = self.full
        flying = None
        curs_by = {}
        probes_pct = 0.0       # the OSDs' estimates (overhead metrics)
        for tier in self.tiers:
            tr = tier.tracer
            curs = curs_by[tier.name] = tr.snapshots()
            tier.cost.update(tr.snapshot_counters())
            # ops in flight: the full tier's op table (the lean tier has
            # none)
            fly = tr.in_flight_by_slot() if tier is full else \
                [None] * len(curs)
            if tier is full:
                flying = fly
            for slot, (cur, prev, run) in enumerate(zip(curs, tier.prevs,
                                                        tier.runs)):
                over = tier.overheads[slot].record(cur, prev, now,
                                                   self.t_last)
                if run.name in self.gone:
                    continue
                probes_pct += over["estimated_pct"]
                iv = build_interval(run, cur, prev, now, now - self.t_last,
                                    fly[slot])
                self.exported.add_interval(
                    run.name, iv, over, tier=tier.name, sources=self.sources,
                    traced=tier is self.tiers[0], threads=cur.threads)
                if tier.name == "lean":
                    self.watch_tail(run.name, iv)
            tier.prevs = curs
        # the exporter's own CPU over the interval, attach cycles apart
        # (they are in the OSDs' estimates): off the duty cycle's budget
        cpu = time.process_time()
        cycles = sum(t.cycle_cpu_s() for t in self.tiers)
        own = max(0.0, (cpu - self.cpu_last) - (cycles - self.cycles_last))
        self.cpu_last, self.cycles_last = cpu, cycles
        self._judge_own(own, now)
        # the share since the start, over at least a duty period: one
        # short interval (the first refresh comes at once, its one-off
        # work in milliseconds) read 180 % and kept the probes off for a
        # minute. Published as is: the overhead ratios are since the
        # start too, and their sum is what the bound holds (a last
        # refresh's share beside them once summed to 1.25 % at a 1 % bound
        # where the mean was under it)
        own_pct = 100.0 * self.own_s / max(now - self.own_since,
                                           duty.PERIOD_S) / duty.ncpus()
        lean = self.lean
        lean_pct = lean.pct(now) if lean is not None else 0.0
        if self.cycle is not None:
            # spent whatever the full tier does: off its budget
            self.cycle.other_pct = own_pct + lean_pct
        self._judge_lean(lean_pct, own_pct, now)
        self._judge_whole(probes_pct, own_pct, now)
        fill = {}
        if full is not None:
            fill["ops"] = round(sum(flying) /
                                float(table_size(full.tracer.max_ops)), 6)
            if full.tracer.kernel:
                # every thread is one slot's
                fill["threads"] = round(
                    sum(len(c.threads) for c in curs_by["full"]) /
                    float(full.tracer.threads.max_entries), 6)
        self.exported.set_host(len(self.pids) - len(self.gone), fill,
                               own_pct / 100.0)
        self.take_traces()
        self.t_last = now

    def watch_tail(self, name, iv):
        """OSD `name`'s lean interval `iv` to the tail watch: when it
        fires, the full tier is asked for at once; said, and counted."""
        cycle = self.cycle
        if self.watch is None or cycle is None:
            return
        got = self.watch.look(name, iv.hists, time.monotonic())
        if got is None:
            return
        reason, words = got
        outcome = cycle.escalate()
        self.exported.escalated(name, reason, outcome)
        self.say("%s: %s: %s" % (name, words, {
            "attached": "the full tier attached at once, for up to %g s" %
                        cycle.reserve_s,
            "already": "the full tier was attached: it stays on up to %g s"
                       % cycle.reserve_s,
            "spent": "the budget is spent: the full tier comes on in its "
                     "next window, in %.0f s" % max(
                         0.0, cycle.switch_at - time.monotonic())}[outcome]))

    def take_traces(self):
        """--otlp: the ops the full tier chose since the last time, to
        the sender (never waits for the collector); its counts to
        /metrics. --by: the full tier's ops by key, to /metrics."""
        full = self.full
        if self.by is not None and full is not None:
            self.by.take(full.tracer, full.runs, self.exported,
                         time.monotonic())
        if self.traces is None:
            return
        if full is not None:
            self.traces.take(full.tracer, full.runs, self.version)
        self.exported.set_spans(*self.traces.counts())

    def _judge_own(self, own, now):
        """Say once when the exporter's own share is over the bound."""
        if self.own_since is None:
            self.own_since = self.t_last
        self.own_s += own
        if self.said_own:
            return
        self.said_own = self._said(own_share_note(
            self.own_s, now - self.own_since, self.config.max_overhead,
            self.config.refresh))

    def _judge_lean(self, lean_pct, own_pct, now):
        """Say once when the lean tier leaves the full tier no room."""
        if self.said_lean or self.said_own or self.full is None or \
                self.lean is None:
            return
        self.said_lean = self._said(lean_share_note(
            lean_pct, own_pct, now - self.own_since,
            self.config.max_overhead))

    def _judge_whole(self, probes_pct, own_pct, now):
        """Say once when the probes and the exporter passed the bound
        (unless a note said already why it may not hold)."""
        if self.said_whole or self.said_own or self.said_lean:
            return
        self.said_whole = self._said(whole_share_note(
            probes_pct, own_pct, now - self.own_since,
            self.config.max_overhead))

    def _said(self, note):
        """Say `note` (None: nothing to say) -> whether it was said."""
        if note:
            self.say(note)
        return bool(note)

    # --- the loop --------------------------------------------------------
    def run(self, stopping):
        """Until `stopping` is set (then detach), or _Retry (a start
        failed: the caller waits and calls again)."""
        c = self.config
        next_look = next_refresh = 0.0
        next_age = time.monotonic() + min(10.0, c.op_timeout)
        while not stopping:
            mono = time.monotonic()
            if mono >= next_look:
                next_look = mono + LOOK_S
                self.look()
            cycle = self.cycle
            if cycle is not None and mono >= cycle.switch_at:
                # the counters are read only when the cycle switches
                cycle.tick(self.full.tracer.snapshot_counters())
            if mono >= next_refresh:
                next_refresh = mono + c.refresh
                if self.tiers:
                    self.refresh()
                self.exported.publish()
            full = self.full
            # the traces ring: every turn (its records wait for no
            # refresh; a turn's are a few at the rate cap, every op's
            # with --by)
            if self.traces is not None and full is not None:
                self.traces.take(full.tracer, full.runs, self.version)
            if self.by is not None and full is not None:
                self.by.take(full.tracer, full.runs, self.exported, mono)
            if full is not None and mono >= next_age:
                full.tracer.age_out(c.op_timeout)
                if full.tracer.kernel:
                    full.tracer.prune_threads()
                next_age = mono + min(10.0, c.op_timeout)
            time.sleep(0.2)
        self.stop()

    def unplannable(self, pids):
        """{pid: why} of the `pids` that cannot be traced, each planned
        alone in every tier the tracers run (its probes placed, nothing
        loaded or attached); the lean tier's reason counts only while the
        lean tier runs (else start() runs the full tier alone)."""
        running = [t.name for t in self.tiers] or list(self.tier_names)
        bad = {}
        for pid in pids:
            for name in running:
                try:
                    # (what the plan says, the start that follows says)
                    plan_targets(self._want((pid,), name), io.StringIO())
                except UserError as e:
                    if name == "lean" and not self.tiers and \
                            len(running) > 1:
                        continue
                    bad[pid] = str(e)
                    break
        return bad

    def hold(self, bad):
        """Leave the pids of {pid: why} alone for HOLD_S (then they are
        planned again), said once each."""
        again = time.monotonic() + HOLD_S
        for pid, why in sorted(bad.items()):
            if pid not in self.said_held:
                self.said_held.add(pid)
                self.say("ceph-osd pid %d not traced: %s; %strying it again "
                         "in %g s" % (pid, why, "the other OSDs stay traced; "
                                      if self.tiers else "", HOLD_S))
            self.held[pid] = again

    def look(self):
        """Start or restart tracing when an OSD process appeared; stop when
        none is left. An OSD that exited keeps its slot (nothing runs
        there) until a new process comes: the others stay attached. A new
        process that cannot be planned is held back (hold), the others
        traced as they were."""
        now = time.monotonic()
        self.held = {p: t for p, t in self.held.items() if t > now}
        want = tuple(p for p in self.wanted() if p not in self.held)
        gone = [n for n, p in zip(self.names, self.pids)
                if p not in want and n not in self.gone]
        if gone:
            self.say("%s exited; its figures stay, re-attaching when it is "
                     "back" % ", ".join(gone))
            self.gone.update(gone)
            self.exported.detached(gone)
        new = [p for p in want if p not in self.pids]
        if not want:
            if self.tiers:
                self.stop()
            elif not self.said_none:
                self.say("no ceph-osd on this host yet: /metrics holds the "
                         "exporter's own figures; looking every %g s" %
                         LOOK_S)
                self.said_none = True
            self.exported.set_host(0, {})
            return
        if not new and self.tiers:
            return
        if self.tiers:
            # planned alone first: one that cannot be traced leaves the
            # others attached
            bad = self.unplannable(new)
            if bad:
                self.hold(bad)
                new = [p for p in new if p not in bad]
                want = tuple(p for p in want if p not in bad)
                if not new:
                    return
            self.say("new ceph-osd pid %s: re-attaching" % ", ".join(
                str(p) for p in new))
            self.stop()
        self.said_none = False
        try:
            self.start(want)
        except UserError as e:
            # which of them cannot be traced (a process that exited while
            # being planned, a binary without a probe table entry): the
            # others are traced now, those held back
            bad = self.unplannable(want) if len(want) > 1 else {}
            rest = tuple(p for p in want if p not in bad)
            if bad and rest:
                self.hold(bad)
                try:
                    self.start(rest)
                    self.last_error = None
                    return
                except UserError as e2:
                    e = e2
            self.pids = ()
            msg = "cannot trace pid %s: %s" % (",".join(str(p) for p in want),
                                               e)
            if msg != self.last_error:
                self.say(msg + "; trying again")
                self.last_error = msg
            raise _Retry()
        self.last_error = None


class _Retry(Exception):
    pass


def serve_forever(config, exported, err):
    """Until SIGINT/SIGTERM: keep the host's OSDs traced, as `config`
    (ExporterConfig) says."""
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT,
                                                    signal.SIGTERM)}
    ex = Exporter(config, exported, err)
    try:
        while not stopping:
            try:
                ex.run(stopping)
            except UserError as e:
                # the tracer failed under us (an attach racing an exiting
                # OSD, a map read): start again from what the host has
                ex.say("%s; tracing again" % e)
                ex.abandon()
                time.sleep(0.5)
            except _Retry:
                t = time.monotonic() + RETRY_S
                while not stopping and time.monotonic() < t:
                    time.sleep(0.2)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if ex.tiers:
            ex.stop()
        if ex.traces is not None:
            ex.traces.close()
        if ex.by is not None:
            ex.by.stop()
    return 0
