"""A live run of osdstage: pick the target and its probe table, attach,
report every interval until the count, Ctrl-C, SIGTERM or the target's
exit, and record a capture alongside when asked (-w).

Reports are built by model/interval.py and printed by render/text.py (or
as JSON); the cost accounting is engine/duty.py's.
"""
import json
import os
import signal
import time

from ..capture import format as capture
from ..ceph import probetable, spec
from ..ceph.target import (Target, find_ceph_osds, require_btf,
                           require_tracefs)
from ..errors import UserError, quiet_broken_pipe
from ..model.interval import RunInfo, interval_record
from ..render.text import print_text
from . import duty
from .btargs import binary_of, bt_args
from .elfsym import ElfSymbols
from ..model.roles import CEPH_ROLES
from .plan import Choice, choose_release, resolve
from .tracer import StageTracer

TOOL = "osdstage"


def pick_target(args):
    if args.pid is not None:
        return Target(args.pid)
    osds = [o for o in find_ceph_osds() if o[1] == str(args.osd)]
    if not osds:
        raise UserError("no running ceph-osd with id %s (see: osdstage.py "
                        "--list)" % args.osd)
    if len(osds) > 1:
        raise UserError("several ceph-osd processes have id %s: pids %s; use "
                        "-p" % (args.osd, ", ".join(str(o[0]) for o in osds)))
    return Target(osds[0][0])


def _plan(args, err):
    """-> (target, release choice, roles, plan) for the arguments."""
    if args.probes:
        sp = spec.load(args.probes)
        if args.pid is None:
            raise UserError("--probes needs -p PID")
        target = Target(args.pid, allow_any=True)
        choice, roles = Choice(None, sp.release, None), sp.roles
        wanted = args.stages or sp.stages()
    else:
        target = pick_target(args)
        roles = CEPH_ROLES
        wanted = args.stages or list(probetable.STAGES)
    require_btf()
    require_tracefs()
    with ElfSymbols(target.exe_path) as elf:
        if not args.probes:
            choice = choose_release(elf, target.ceph_version(), args.release,
                                    "ceph-osd %d" % target.pid)
            if choice.notice:
                err.write("%s: %s\n" % (TOOL, choice.notice))
        plan = resolve(elf, choice.release, wanted)
    if plan.unavailable and (args.strict or not plan.stages):
        stage, why = next(iter(plan.unavailable.items()))
        raise UserError("stage %s unavailable: %s" % (stage, why))
    if not plan.stages and args.no_kernel:
        raise UserError("nothing to trace: the probe spec has no enqueue/"
                        "dequeue and --no-kernel is set")
    return target, choice, roles, plan


def bpftrace_args(args, err):
    """The arguments of probes/osdstages.bt for the target OSD."""
    if args.probes:
        raise UserError("--bpftrace-args is for ceph-osd: drop --probes")
    target = pick_target(args)
    with ElfSymbols(target.exe_path) as elf:
        choice = choose_release(elf, target.ceph_version(), args.release,
                                "ceph-osd %d" % target.pid)
        if choice.notice:
            err.write("%s: %s\n" % (TOOL, choice.notice))
        return bt_args(binary_of(target.pid), elf, choice)


def _banner(args, err, target, version, rel, plan):
    n = len(plan.stages)
    what = "ceph-osd %d (Ceph %s" % (target.pid, version) if version else \
        "%s %d (%s" % (target.comm, target.pid, rel.name)
    err.write("Tracing %d stage%s%s of %s, %d probes)... %s\n" % (
                  n, "" if n == 1 else "s",
                  "" if args.no_kernel else " + kernel", what,
                  plan.probe_count(),
                  "Hit Ctrl-C to end." if args.count is None else
                  "%d report%s." % (args.count,
                                    "" if args.count == 1 else "s")))
    err.flush()


def run(args, out, err):
    """Trace until the count, Ctrl-C, SIGTERM or the target's exit."""
    target, choice, roles, plan = _plan(args, err)
    version, rel = choice.version, choice.release
    # an inexact table entry's offsets are unchecked for this binary
    exact = choice.exact is not False
    tracer = StageTracer(target.pid, target.exe_path, plan,
                         settings=rel.settings() if exact else {},
                         max_ops=args.max_ops, kernel=not args.no_kernel,
                         roles=roles,
                         ring_bytes=capture.ring_bytes(args.ring_mb)
                         if args.write else 0)
    # the cost estimate needs the measured cost of a uprobe hit
    tracer.calibrate_always = True
    # the op class is read at completion: split only when that is probed
    done = any(prog == "op_done" for _, prog, _, _ in plan.op_events)
    classes = set(tracer.vocab.class_split) if rel.rmw and done and exact \
        else set()
    stopping = []
    writer = None

    def on_signal(signum, frame):
        # only note it: the loop notices within 0.2 s, prints what it has
        # and detaches (PEP 475 resumes the interrupted sleep)
        stopping.append(signum)

    # before anything is attached: fail early on a bad output path
    created = args.write and capture.prepare(args.write, args.force)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT,
                                                    signal.SIGTERM)}
    try:
        tracer.start()
        run_info = RunInfo(target.pid, version, plan.stages, plan.unavailable,
                           classes, tracer.call_bias_ns, tracer.kernel, roles,
                           tracer.vocab)
        if choice.exact is not None:
            run_info.probe_table = (rel.key, choice.exact)
        if args.write:
            info = dict(run_info.info(), release=rel.name,
                        probes={role: sym.demangled for role, sym in
                                plan.symbols.items()})
            writer = capture.CaptureWriter(args.write, tracer, info)
            writer.threads(capture.thread_names(target.pid),
                           time.monotonic_ns())
        _banner(args, err, target, version, rel, plan)
        return _loop(args, out, err, target, tracer, run_info, writer,
                     stopping)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
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
        tracer.close()


def _close_capture(writer, tracer, path, err):
    lost = tracer.snapshot_counters().get("events_lost", 0)
    st = writer.close("end", lost)
    err.write("%s: capture %s: %d events, %.1f MB%s\n" % (
        TOOL, path, st["events"], st["bytes"] / 1e6,
        "; %d events LOST (ring buffer full: raise --ring-mb)" % lost
        if lost else ", none lost"))


def _wait(args, target, tracer, writer, stopping, cycle, deadline, ages):
    """Until the deadline: keep the duty cycle, age out ops, drain the
    capture. -> why the run ends, or None."""
    while time.time() < deadline:
        if stopping:
            return "interrupted"
        if not target.alive():
            return "%s %d exited" % (target.comm, target.pid)
        if cycle is not None:
            cycle.tick(tracer.snapshot_counters())
        if time.monotonic() >= ages[0]:
            tracer.age_out(args.op_timeout)
            if tracer.kernel:
                tracer.prune_threads()
            ages[0] = time.monotonic() + min(10.0, args.op_timeout)
        if writer is not None:
            writer.poll()
        time.sleep(min(0.1 if writer else 0.2,
                       max(0.0, deadline - time.time())))
    return None


def _loop(args, out, err, target, tracer, run_info, writer, stopping):
    prev = tracer.snapshot()
    if writer is not None:
        writer.snapshot(prev, None)
    t_last = time.time()
    cycle = None
    if args.max_overhead:
        cycle = duty.DutyCycle(tracer, args.max_overhead)
        cycle.start(prev.counters)
    cost = duty.Overhead(tracer, args.max_overhead, prev, cycle, time.time())
    ages = [time.monotonic() + min(10.0, args.op_timeout)]
    reports = 0
    while True:
        deadline = t_last + (args.interval if args.interval else 1e12)
        ended = _wait(args, target, tracer, writer, stopping, cycle,
                      deadline, ages)
        now = time.time()
        cur = tracer.snapshot()
        rec, hists = interval_record(run_info, cur, prev, now, now - t_last,
                                     tracer.in_flight() if not ended else None)
        rec["overhead"] = cost.record(cur, prev, now, t_last)
        if writer is not None:
            writer.threads(capture.thread_names(target.pid), cur.mono_ns)
            writer.snapshot(cur, rec)
        prev = cur
        t_last = now
        try:
            if args.json:
                out.write(json.dumps(rec) + "\n")
                out.flush()
            else:
                print_text(out, args, rec, hists)
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
