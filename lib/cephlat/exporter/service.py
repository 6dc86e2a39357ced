"""The exporter's loop: find the host's OSDs, trace them all with one set of
BPF programs (engine/tracer.py, as `osdstage.py --osd all`), and every
refresh add each OSD's interval to the exported sums (exporter/collect.py).

OSDs come and go (restarts, new OSDs, removed ones): the set is looked at
every second, and when it changes the tracer is closed, after a last
refresh, and a new one is started for the new set. The sums live here,
not in the tracer, so Prometheus' counters never go backwards. A process
must have run for a second, and have daemonized, before it is traced: a
starting ceph-osd spends seconds (the monitors' config, the store's label)
before it forks; its first process then waits for the child and exits.

Cost: bounded by duty cycles (engine/duty.py) at --max-overhead, 1 % of the
host's CPU by default; the attached share is exported with the figures.
"""
import os
import signal
import time

from ..ceph.target import osd_id_of, pid_alive, read_cmdline, read_comm
from ..engine import duty
from ..engine.session import Session, Want
from ..engine.optable import table_size
from ..errors import UserError

TOOL = "osdstage_exporter"
LOOK_S = 1.0            # how often the host's OSDs are looked for
SETTLE_S = 1.0          # a process this young is looked at again later
RETRY_S = 2.0           # after a failed start
PREFORK_S = 20.0        # not forked after this: in the foreground by config
OWN_AFTER_S = 30.0      # the exporter's own share is judged after this
FOREGROUND = ("-f", "--foreground", "-d")


def _stat(pid):
    """(parent pid, seconds since the process started, session id), or
    None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return (int(fields[1]), up - int(fields[19]) / os.sysconf("SC_CLK_TCK"),
            int(fields[3]))


def daemonized(pid, sid, age):
    """Is this ceph-osd the process that will serve? One run in the
    foreground (-f, -d: containers, systemd units) is; a daemonizing one is
    once it has forked and its child called setsid() (it leads its session).
    Before that, the first process reads the monitors' config and the
    store's label, seconds of work, then forks: traced then, it would be
    traced twice. A process that has not forked after PREFORK_S is taken
    to run in the foreground by configuration (daemonize = false)."""
    if sid == pid or age >= PREFORK_S:
        return True
    try:
        return any(a in FOREGROUND for a in read_cmdline(pid))
    except OSError:
        return False


def own_share_note(own_cpu_s, elapsed_s, bound_pct, refresh_s):
    """One line when the exporter's own CPU (reading the maps every
    refresh, serving /metrics), as a share of the host's, leaves the
    bound unheld: over the bound by itself, or over what the duty cycle
    keeps off the probes' budget for it (duty.OTHER_SHARE of the bound
    less its margin), where the probes keep the rest and the two together
    pass the bound. None otherwise (no bound, too early to tell, or
    under it)."""
    if not bound_pct or elapsed_s < OWN_AFTER_S:
        return None
    pct = 100.0 * own_cpu_s / elapsed_s / duty.ncpus()
    if pct > bound_pct:
        return ("the exporter's own CPU is %.2f %% of the host's at "
                "--refresh %g, over the %g %% bound by itself: the probes "
                "are attached as little as they can be and the bound does "
                "not hold; a longer --refresh costs less" % (
                    pct, refresh_s, bound_pct))
    keep = duty.OTHER_SHARE * duty.MARGIN * bound_pct
    if pct > keep:
        return ("the exporter's own CPU is %.2f %% of the host's at "
                "--refresh %g, more than the %.2f %% the %g %% bound sets "
                "aside for it: the probes keep their least share and the "
                "bound may not hold; a longer --refresh costs less" % (
                    pct, refresh_s, keep, bound_pct))
    return None


class OsdScan:
    """The host's ceph-osd processes, for a loop that looks every second
    (as ceph/target.py's find_ceph_osds, reading less): a process's name
    is read when its pid is new, while it is young (a fork that has not
    exec'd ceph-osd yet) and always for ceph-osd processes; an older
    process of another name is not read again."""

    RECHECK_S = 10.0

    def __init__(self):
        self.seen = {}       # pid -> (first seen, monotonic; is ceph-osd)

    def osds(self):
        """[(pid, osd id or None)], by pid."""
        now = time.monotonic()
        seen, out = {}, []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            first, osd = self.seen.get(pid, (now, None))
            if osd is None or osd or now - first < self.RECHECK_S:
                try:
                    osd = read_comm(pid) == "ceph-osd"
                except OSError:
                    continue
            seen[pid] = (first, osd)
            if osd:
                try:
                    out.append((pid, osd_id_of(pid)))
                except OSError:
                    continue
        self.seen = seen
        return sorted(out)


def _id_order(osd_id):
    return (0, int(osd_id)) if osd_id and osd_id.isdigit() else (1, 0)


class Exporter:
    def __init__(self, args, exported, err):
        self.args, self.exported, self.err = args, exported, err
        self.tracer = None
        self.pids = ()          # what the tracer traces
        self.names = []
        self.runs = self.prevs = self.costs = self.run_cost = None
        self.cycle = None
        self.t_last = 0.0
        self.said_none = False
        self.gone = set()       # names of traced OSDs that exited
        self.scan = OsdScan()
        self.last_error = None
        self.own_s = 0.0        # own CPU and seconds since the first start
        self.own_since = None
        self.said_own = False

    def say(self, msg):
        self.err.write("%s: %s\n" % (TOOL, msg))
        self.err.flush()

    # --- which OSDs ------------------------------------------------------
    def wanted(self):
        """The pids to trace now, in OSD id order: every ceph-osd of the
        host (or those of --osd), each at least SETTLE_S old and
        daemonized(). A ceph-osd that daemonizes forks, and the parent
        waits for its child to be up before it exits: a process whose
        child is a ceph-osd of the same id is that parent, and is left
        alone."""
        found = []
        for pid, osd_id in self.scan.osds():
            if self.args.osd != "all" and osd_id not in self.args.osd:
                continue
            st = _stat(pid) if pid_alive(pid) else None
            if st is not None:
                found.append((pid, osd_id) + st)
        parents = {(ppid, osd_id) for _, osd_id, ppid, _, _ in found}
        out = [(osd_id, pid) for pid, osd_id, _, age, sid in found
               if (pid, osd_id) not in parents and
               (pid in self.pids or
                (age >= SETTLE_S and daemonized(pid, sid, age)))]
        return tuple(pid for osd_id, pid in
                     sorted(out, key=lambda o: (_id_order(o[0]), o[1])))

    # --- the tracer's life -----------------------------------------------
    def start(self, pids):
        a = self.args
        ses = Session(Want(pid=list(pids), stages=a.stages,
                           release=a.release, no_kernel=a.no_kernel,
                           max_ops=a.max_ops), self.err)
        targets, choice, plans, tracer = ses.targets, ses.choice, \
            ses.plans, ses.tracer
        try:
            tracer.start()
        except BaseException:
            tracer.close()
            raise
        rel = choice.release
        self.runs = ses.run_infos()
        self.names = [run.name for run in self.runs]
        for t, p, run in zip(targets, plans, self.runs):
            info = (str(t.pid), choice.version or "", rel.name,
                    rel.key if choice.exact is not None else "",
                    "" if choice.exact is None else str(bool(choice.exact))
                    .lower(), ",".join(p.stages))
            self.exported.attached(run.name, info)
        tracer.keep_cumulative = False      # the sums are collect.py's
        self.tracer, self.pids = tracer, tuple(pids)
        self.prevs = tracer.snapshots()
        self.cpu_last, self.cycles_last = time.process_time(), 0.0
        self.t_last = time.time()
        self.cycle = None
        # the published cost is measured, bounded or not (RunCost): an
        # exporter runs for good, its cost is one of its figures
        if a.max_overhead:
            self.cycle = duty.DutyCycle(tracer, a.max_overhead)
            self.run_cost = self.cycle.cost
            self.cycle.start(tracer.snapshot_counters())
        else:
            self.run_cost = duty.RunCost(tracer)
            self.run_cost.start(tracer.snapshot_counters())
        self.costs = [duty.Overhead(tracer, a.max_overhead, prev, self.cycle,
                                    self.t_last, host_part=slot == 0,
                                    cost=self.run_cost)
                      for slot, prev in enumerate(self.prevs)]
        self.exported.publish()
        self.say("tracing %s (Ceph %s, %d stages%s)" % (
            ", ".join("%s pid %d" % (n, p) for n, p in zip(self.names,
                                                          self.pids)),
            choice.version or rel.name, len(plans[0].stages),
            "" if a.no_kernel else " + kernel"))

    def stop(self):
        """A last refresh, then detach and close."""
        if self.tracer is None:
            return
        try:
            self.refresh()
        finally:
            self.tracer.close()
            self.exported.detached(self.names)
            self.tracer, self.pids, self.names = None, (), []
            self.gone = set()
            self.exported.publish()

    def abandon(self):
        """Close a failed tracer, keeping what can still be read."""
        try:
            self.stop()
        except UserError:
            if self.tracer is not None:
                self.tracer.close()
                self.exported.detached(self.names)
            self.tracer, self.pids, self.names = None, (), []
            self.gone = set()

    def refresh(self):
        """Every traced OSD's interval since the last refresh, summed."""
        tr = self.tracer
        now = time.time()
        curs = tr.snapshots()
        self.run_cost.update(tr.snapshot_counters())
        flying = tr.in_flight_by_slot()
        for slot, (cur, prev, run) in enumerate(zip(curs, self.prevs,
                                                    self.runs)):
            over = self.costs[slot].record(cur, prev, now, self.t_last)
            if run.name in self.gone:
                continue
            self.exported.add_interval(run.name, run, cur, prev,
                                       now - self.t_last, over,
                                       flying[slot])
        # the exporter's own CPU over the interval, attach cycles apart
        # (they are in the OSDs' estimates): off the duty cycle's budget
        cpu = time.process_time()
        cycles = self.cycle.cycle_cpu_s if self.cycle is not None else 0.0
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
        if self.cycle is not None:
            self.cycle.other_pct = own_pct
        ops = sum(flying) / float(table_size(tr.max_ops))
        full = {"ops": round(ops, 6)}
        if tr.kernel:
            # every thread is one slot's
            full["threads"] = round(sum(len(c.threads) for c in curs) /
                                    float(tr.threads.max_entries), 6)
        self.exported.set_host(len(self.pids) - len(self.gone), full,
                               own_pct / 100.0)
        self.prevs, self.t_last = curs, now

    def _judge_own(self, own, now):
        """Say once when the exporter's own share is over the bound."""
        if self.own_since is None:
            self.own_since = self.t_last
        self.own_s += own
        if self.said_own:
            return
        note = own_share_note(self.own_s, now - self.own_since,
                              self.args.max_overhead, self.args.refresh)
        if note:
            self.say(note)
            self.said_own = True

    # --- the loop --------------------------------------------------------
    def run(self, stopping):
        """Until `stopping` is set (then detach), or _Retry (a start
        failed: the caller waits and calls again)."""
        a = self.args
        next_look = next_refresh = 0.0
        next_age = time.monotonic() + min(10.0, a.op_timeout)
        while not stopping:
            mono = time.monotonic()
            if mono >= next_look:
                next_look = mono + LOOK_S
                self.look()
            if self.tracer is not None and self.cycle is not None and \
                    mono >= self.cycle.switch_at:
                # the counters are read only when the cycle switches
                self.cycle.tick(self.tracer.snapshot_counters())
            if mono >= next_refresh:
                next_refresh = mono + a.refresh
                if self.tracer is not None:
                    self.refresh()
                self.exported.publish()
            if self.tracer is not None:
                if mono >= next_age:
                    self.tracer.age_out(a.op_timeout)
                    if self.tracer.kernel:
                        self.tracer.prune_threads()
                    next_age = mono + min(10.0, a.op_timeout)
            time.sleep(0.2)
        self.stop()

    def look(self):
        """Start or restart tracing when an OSD process appeared; stop when
        none is left. An OSD that exited keeps its slot (nothing runs
        there) until a new process comes: the others stay attached."""
        want = self.wanted()
        gone = [n for n, p in zip(self.names, self.pids)
                if p not in want and n not in self.gone]
        if gone:
            self.say("%s exited; its figures stay, re-attaching when it is "
                     "back" % ", ".join(gone))
            self.gone.update(gone)
            self.exported.detached(gone)
        new = [p for p in want if p not in self.pids]
        if not want:
            if self.tracer is not None:
                self.stop()
            elif not self.said_none:
                self.say("no ceph-osd on this host yet: /metrics holds the "
                         "exporter's own figures; looking every %g s" %
                         LOOK_S)
                self.said_none = True
            self.exported.set_host(0, {})
            return
        if not new and self.tracer is not None:
            return
        if self.tracer is not None:
            self.say("new ceph-osd pid %s: re-attaching" % ", ".join(
                str(p) for p in new))
            self.stop()
        self.said_none = False
        try:
            self.start(want)
        except UserError as e:
            # a process that exits while being planned, a binary without a
            # probe table entry: tried again after a pause
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


def serve_forever(args, exported, err):
    """Until SIGINT/SIGTERM: keep the host's OSDs traced."""
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT,
                                                    signal.SIGTERM)}
    ex = Exporter(args, exported, err)
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
        if ex.tracer is not None:
            ex.stop()
    return 0
