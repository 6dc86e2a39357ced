"""A live run of osdstage: pick the targets (one OSD, several, or every
OSD of the host) and their probe table, attach, report every interval
until the count, Ctrl-C, SIGTERM or the targets' exit, and record a
capture alongside when asked (-w).

One target: one report per interval (text, or the interval object as
JSON). Several: a report per OSD and a host summary (JSON: {"type":
"host", "osds": {"osd.0": interval object, ...}, "summary": [...]}).
With --otlp the ops the programs choose are sent as OTLP traces while
the reports run (cli/liveotlp.py), each report saying how many.

Reports are built by model/interval.py (an Interval per OSD) and printed
by render/interval_text.py (or as JSON); the cost accounting is
engine/duty.py's.
"""
import functools
import os
import signal
import time

from ..capture import format as capture
from ..ceph import clusternames
from ..engine import duty
from ..engine.btargs import binary_of, bt_args
from ..engine.elfsym import ElfSymbols
from ..engine.plan import choose_release
from ..engine.session import TOOL, Session, Want, pick_target, target_name
from ..errors import UsageError, UserError, quiet_broken_pipe
from ..model.interval import build_interval, host_record
from ..model.sample import EVERY_OP
from ..model.snapshot import Snapshot
from ..render.breakdown import print_breakdown
from ..render.interval_text import emit
from ..render.text import print_header
from . import header, liveby
from .args import text_options
from .liveotlp import LiveTraces, check_reqids, trace_choice

DEFAULT_RING_MB = 32          # capture ring buffer per traced OSD


def want_of(args):
    """The Want of osdstage.py's options named as its fields."""
    return Want(**{k: getattr(args, k) for k in Want.FIELDS
                   if hasattr(args, k)})


def bpftrace_args(args, err):
    """The arguments of probes/osdstages.bt for the target OSD."""
    if args.probes:
        raise UsageError("--bpftrace-args is for ceph-osd: drop --probes")
    target = pick_target(want_of(args))
    with ElfSymbols(target.exe_path) as elf:
        choice = choose_release(elf, target.ceph_version(elf), args.release,
                                "ceph-osd %d" % target.pid)
        if choice.notice:
            err.write("%s: %s\n" % (TOOL, choice.notice))
        return bt_args(binary_of(target.pid), elf, choice, target.pid,
                       warn=lambda text: err.write("%s: %s\n" % (TOOL, text)))


def _banner(args, err, targets, version, rel, plan, otlp=None):
    n = len(plan.stages)
    target = targets[0]
    if len(targets) > 1:
        what = "%d OSDs: %s (Ceph %s" % (
            len(targets), ", ".join("%s pid %d" % (target_name(t), t.pid)
                                    for t in targets), version or rel.name)
    elif version:
        what = "ceph-osd %d (Ceph %s" % (target.pid, version)
    else:
        what = "%s %d (%s" % (target.comm, target.pid, rel.name)
    err.write("Tracing %d stage%s%s of %s, %d probes)... %s\n" % (
                  n, "" if n == 1 else "s",
                  " (lean tier)" if args.lean else
                  "" if args.no_kernel else " + kernel", what,
                  plan.probe_count() * len(targets),
                  "Hit Ctrl-C to end." if args.count is None else
                  "%d report%s." % (args.count,
                                    "" if args.count == 1 else "s")))
    if otlp is not None:
        err.write("Sending as OTLP traces: %s, to %s.\n" % (otlp.words,
                                                           otlp.url))
    if args.by:
        err.write("Breaking each report's ops down by %s: every op handed "
                  "over at its end.\n" % args.by)
    for f, insn in plan.single_steps():
        err.write("note: the probe on %s single-steps its first instruction "
                  "(%s): ~10 times the cost of a hit.\n" % (
                      f.split("(", 1)[0], insn))
    err.flush()


def run(args, out, err):
    """Trace until the count, Ctrl-C, SIGTERM or the target's exit."""
    want = want_of(args)
    # a ring buffer only for a capture (--ring-mb needs -w: _check_live)
    want.ring_mb = args.ring_mb
    want.ring_mb_per_target = DEFAULT_RING_MB if args.write else 0
    # --otlp: the programs choose the ops to send, as the exporter's do;
    # --by: every op (the two do not go together: _check_live)
    want.traces = EVERY_OP if args.by else trace_choice(args)
    ses = Session(want, err)
    if want.traces:
        try:
            check_reqids(ses, args, "--by" if args.by else "--otlp")
        except UserError:
            ses.tracer.close()
            raise
    targets, choice, plans, tracer = ses.targets, ses.choice, ses.plans, \
        ses.tracer
    plan = plans[0]
    version, rel = choice.version, choice.release
    stopping = []
    writer = otlp = None

    def on_signal(signum, frame):
        # only note it: the loop notices within 0.2 s, prints what it has
        # and detaches (PEP 475 resumes the interrupted sleep)
        stopping.append(signum)

    # before anything is attached: fail early on a bad output path
    created = args.write and capture.prepare(args.write, args.force)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT,
                                                    signal.SIGTERM)}
    # the cluster's pool, image and client names, for -r --by and a live
    # --by pool|image|client: the first look-up before the probes are
    # attached (its reads are not in the capture)
    names = clusternames.NamesLookup(targets[0].pid) if args.write or \
        args.by in ("pool", "image", "client") else None
    by = liveby.LiveBy(args.by, args.top, len(targets), names) \
        if args.by else None
    try:
        if names is not None:
            names.first()
        tracer.start()
        runs = ses.run_infos()
        if args.write:
            info = dict(runs[0].info(), release=rel.name,
                        probes={role: sym.demangled for role, sym in
                                plan.symbols.items()},
                        targets=[{"pid": t.pid, "name": target_name(t),
                                  "scheduler": t.scheduler()}
                                 for t in targets])
            writer = capture.CaptureWriter(args.write, tracer, info,
                                           runs[0].call_bias_ns)
            _name_threads(writer, targets, time.monotonic_ns())
            writer.lookup = names if args.write else None
            _write_names(writer)
        if args.otlp:
            otlp = LiveTraces(args, err, version)
        _banner(args, err, targets, version, rel, plan, otlp)
        opts = text_options(args)
        if not opts.json:
            print_header(out, opts, header.live(args, targets, choice,
                                                target_name))
        return _loop(args, opts, out, err, targets, tracer, runs, writer,
                     stopping, otlp, by)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if otlp is not None:
            otlp.close()        # flushed (at most FLUSH_S) and said
        if writer is not None:
            # nothing of ours runs in the target any more: drain everything
            tracer.detach()
            try:
                _close_capture(writer, tracer, args.write, err)
            except UserError as e:
                err.write("%s: %s\n" % (TOOL, e))
        elif created:
            try:
                os.rmdir(args.write)      # nothing was recorded
            except OSError:
                pass
        if names is not None:
            names.stop()
        tracer.close()


def _name_threads(writer, targets, ts):
    for slot, t in enumerate(targets):
        writer.threads(capture.thread_names(t.pid), ts, slot)
        if writer.tracer.stacks_min_us or writer.tracer.oncpu_hz:
            _mappings(writer, t.pid, slot)


def _mappings(writer, pid, slot):
    """--stacks: the files target `slot` maps into its capture (its
    paths as the process sees them; read through /proc/PID/root)."""
    from ..stacks.unwind import build_id, read_maps
    try:
        maps = read_maps(pid)
    except OSError:
        return                      # gone: its last ones are written
    writer.mappings(maps, lambda path: build_id("/proc/%d/root%s" % (
        pid, path)), slot)


def _write_names(writer):
    """The cluster's names into the capture, each time they were read."""
    for got in writer.lookup.take() if writer.lookup is not None else ():
        writer.names(got)


def _close_capture(writer, tracer, path, err):
    _write_names(writer)
    if writer.lookup is not None:
        writer.lookup.stop()
    if not writer.named and writer.lookup is not None and \
            writer.lookup.why:
        err.write("%s: capture %s: no pool, image or client names (%s): "
                  "-r --by pool|image|client shows their ids\n" % (
                      TOOL, path, writer.lookup.why))
    lost = tracer.snapshot_counters().get("events_lost", 0)
    st = writer.close("end", lost)
    err.write("%s: capture %s: %d events, %.1f MB%s\n" % (
        TOOL, path, st["events"], st["bytes"] / 1e6,
        "; %d events LOST (ring buffer full: raise --ring-mb)" % lost
        if lost else ", none lost"))


def _wait(args, err, targets, gone, tracer, writer, stopping, cycle,
          deadline, ages, take=None):
    """Until the deadline: keep the duty cycle, age out ops, drain the
    capture and (take) the ops chosen as traces. -> why the run ends, or
    None (the run ends when every target has exited; one exiting is said
    once and the rest go on)."""
    while time.time() < deadline:
        if stopping:
            return "interrupted"
        alive = [t for t in targets if t.alive()]
        if len(alive) < len(targets) - len(gone) and alive:
            for t in targets:
                if t not in alive and t.pid not in gone:
                    gone.add(t.pid)
                    err.write("%s: %s (pid %d) exited; the others are still "
                              "traced\n" % (TOOL, target_name(t), t.pid))
        if not alive:
            t = targets[0]
            return "%s %d exited" % (t.comm, t.pid) if len(targets) == 1 \
                else "every traced process exited"
        if cycle is not None and cycle.clock() >= cycle.switch_at:
            # the counters are read only when the cycle switches or looks
            cycle.tick(tracer.snapshot_counters())
        if time.monotonic() >= ages[0]:
            tracer.age_out(args.op_timeout)
            if tracer.kernel:
                tracer.prune_threads()
            ages[0] = time.monotonic() + min(10.0, args.op_timeout)
        if writer is not None:
            writer.poll()
            _write_names(writer)
        if take is not None:
            take()
        time.sleep(min(0.1 if writer else 0.2,
                       max(0.0, deadline - time.time())))
    return None


def _throttles(targets, snaps):
    """Each OSD's messenger throttle counters, read with its snapshot."""
    for t, snap in zip(targets, snaps):
        snap.throttles = t.throttles()


def _loop(args, opts, out, err, targets, tracer, runs, writer, stopping,
          otlp=None, by=None):
    # the window starts when its counters are read, not after the admin
    # sockets' throttles (a busy OSD answers late: a recovery window
    # counted 0.2 s of items before its printed start)
    t_last = time.time()
    prevs = tracer.snapshots()
    _throttles(targets, prevs)
    take = None
    if otlp is not None:
        otlp.start(prevs)
        take = functools.partial(otlp.take, tracer, runs)
    elif by is not None:
        take = functools.partial(by.take, tracer)
    if writer is not None:
        for slot, prev in enumerate(prevs):
            writer.snapshot(prev, None, slot)
    cycle = None
    if args.max_overhead:
        cycle = duty.DutyCycle(tracer, args.max_overhead)
        cycle.start(tracer.snapshot_counters())
    t0 = time.time()
    costs = [duty.Overhead(tracer, args.max_overhead, prev, cycle, t0,
                           host_part=slot == 0)
             for slot, prev in enumerate(prevs)]
    host_cost = duty.Overhead(tracer, args.max_overhead, host_sum(prevs),
                              cycle, t0) if len(targets) > 1 else None
    ages = [time.monotonic() + min(10.0, args.op_timeout)]
    reports = 0
    gone = set()
    while True:
        deadline = t_last + (args.interval if args.interval else 1e12)
        ended = _wait(args, err, targets, gone, tracer, writer, stopping,
                      cycle, deadline, ages, take)
        now = time.time()
        curs = tracer.snapshots()
        _throttles(targets, curs)
        ivs = []
        for slot, (cur, prev, run_info) in enumerate(zip(curs, prevs, runs)):
            iv = build_interval(
                run_info, cur, prev, now, now - t_last,
                tracer.in_flight(slot) if not ended else None)
            iv.record["overhead"] = costs[slot].record(cur, prev, now, t_last)
            ivs.append(iv)
            if writer is not None:
                writer.snapshot(cur, iv.record, slot)
        if writer is not None:
            _name_threads(writer, targets, curs[0].mono_ns)
        host = None
        if host_cost is not None:
            host = host_record(runs, ivs, now, now - t_last,
                               host_cost.record(host_sum(curs),
                                                host_sum(prevs), now, t_last))
        if otlp is not None:
            otlp.add(tracer, runs, ivs, host, curs, bool(ended) or (
                args.count is not None and reports + 1 >= args.count))
        if by is not None:
            by.add(tracer, ivs, curs, prevs)
        prevs = curs
        t_last = now
        try:
            emit(out, opts, ivs, host)
            if by is not None and not opts.json:
                for t, iv in zip(targets, ivs):
                    print_breakdown(out, opts, iv.by, target_name(t)
                                    if len(targets) > 1 else None,
                                    missed=iv.record["by"]["missed"])
        except BrokenPipeError:
            quiet_broken_pipe()
            return 0
        reports += 1
        if ended:
            if ended != "interrupted":
                err.write("%s: %s; detached.\n" % (TOOL, ended))
            return 0
        if args.count is not None and reports >= args.count:
            return 0


def host_sum(snaps):
    """The host's counters (every target's summed) as a snapshot, for the
    host's cost estimate."""
    total = {}
    for snap in snaps:
        for k, v in snap.counters.items():
            total[k] = total.get(k, 0) + v
    return Snapshot(None, total, {}, {}, {}, snaps[0].mono_ns)

