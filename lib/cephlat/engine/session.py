"""Setting tracing up, the same for every front end (osdstage.py's live
run, the exporter): which processes (Want: -p, --osd, a probe spec), the
probe table of their release, a plan of probes per target, the tracer,
and after its start each target's RunInfo (what the report model needs to
know of the run)."""
import os

from ..ceph import probetable, spec
from ..ceph.target import (Target, find_ceph_osds, netns_id, netns_of,
                           pid_alive, require_btf, require_tracefs,
                           still_an_osd)
from ..errors import UsageError, UserError
from ..model.interval import RunInfo
from ..model import vocab
from ..model.roles import CEPH_ROLES, Roles
from .elfsym import ElfSymbols
from .plan import Choice, choose_release, resolve
from .loadtime import ring_bytes
from .tracer import DEFAULT_MAX_OPS, StageTracer
from . import TOOL


class Want:
    """What to trace and how (osdstage.py's options of those names, or the
    exporter's)."""

    # ring_mb: the capture ring buffer (None: no capture), else
    # ring_mb_per_target for each target; traces: the ops to send as
    # OTLP traces (model/sample.py's TraceChoice; None: none; the full
    # tier's only); behind: whom the threads wait behind for a CPU
    # (--behind); stacks: the stacks of waits of at least this many us
    # are captured (--stacks; None: none); on_cpu: the threads on their
    # CPUs sampled this many times a second, with their stacks (--on-cpu)
    FIELDS = dict(pid=None, osd=None, probes=None, stages=None,
                  release=None, strict=False, no_kernel=False, lean=False,
                  max_ops=DEFAULT_MAX_OPS, ring_mb=None,
                  ring_mb_per_target=0, host_netns=None, traces=None,
                  behind=False, stacks=None, on_cpu=None)

    def __init__(self, **kw):
        unknown = set(kw) - set(self.FIELDS)
        if unknown:
            raise TypeError("Want has no %s" % unknown.pop())
        for k, v in self.FIELDS.items():
            setattr(self, k, kw.get(k, v))


class Session:
    """The targets of `want`, their release's probe table, one plan per
    target and the tracer (not started: .tracer.start() attaches)."""

    def __init__(self, want, err):
        self.targets, self.choice, self.roles, self.plans = \
            plan_targets(want, err)
        rel = self.choice.release
        # an inexact table entry's offsets are unchecked for this binary
        self.exact = self.choice.exact is not False
        mb = want.ring_mb or want.ring_mb_per_target * len(self.targets)
        self.tracer = StageTracer(
            [t.pid for t in self.targets],
            [t.exe_path for t in self.targets], self.plans,
            settings=rel.settings() if self.exact else {},
            max_ops=want.max_ops,
            kernel=not (want.no_kernel or want.lean),
            roles=self.roles, mclock=[t.mclock() for t in self.targets],
            ring_bytes=ring_bytes(mb) if mb else 0, lean=want.lean,
            traces=want.traces, behind=want.behind,
            stacks_min_us=want.stacks if mb else None,
            oncpu_hz=want.on_cpu if mb else None)
        # the cost estimate needs the measured cost of a uprobe hit
        self.tracer.calibrate_always = True
        # the op class is read at completion: split only when it is probed
        done = any(prog in ("op_done", "op_lean")
                   for _, prog, _, _ in self.plans[0].op_events)
        self.classes = set(self.tracer.vocab.class_split) \
            if rel.rmw and done and self.exact else set()

    def run_infos(self):
        """Each target's RunInfo (once the tracer has started: the probe
        cost it measured goes in)."""
        tr, choice = self.tracer, self.choice
        out = []
        for t, p in zip(self.targets, self.plans):
            # the probe cost is subtracted from call stages only
            run = RunInfo(t.pid, choice.version, p.stages, p.unavailable,
                          self.classes, tr.call_bias_ns if p.calls else 0,
                          tr.kernel,
                          self.roles or CEPH_ROLES, tr.vocab, t.scheduler())
            if choice.exact is not None:
                run.probe_table = (choice.release.key, choice.exact)
            run.name = target_name(t)
            run.partitioned = set(tr.summed)
            out.append(run)
        return out


def _one_osd(osds, osd_id, where="on this host"):
    found = [pid for pid, i in osds if i == osd_id]
    if not found:
        raise UserError("no running ceph-osd with id %s %s (see: "
                        "osdstage.py --list)" % (osd_id, where))
    if len(found) > 1:
        raise UserError("several ceph-osd processes have id %s: pids %s; use "
                        "-p" % (osd_id, ", ".join(str(p) for p in found)))
    return found[0]


def pick_targets(want, allow_any=False):
    """The processes to trace, in slot order: -p PID[,PID...] or --osd
    ID[,ID...] or --osd all (every ceph-osd of the host, by id); with
    host_netns, the host is that network namespace (a lab aid)."""
    netns = netns_id(want.host_netns) if want.host_netns else None
    where = "in network namespace %s" % want.host_netns if netns else \
        "on this host"
    if want.pid is not None:
        pids = want.pid
        for pid in pids if netns is not None else ():
            try:
                ours = netns_of(pid) == netns
            except OSError:
                continue            # gone: Target says so
            if not ours:
                raise UserError("pid %d is not in network namespace %s"
                                % (pid, want.host_netns))
    else:
        osds = find_ceph_osds(netns)
        if want.osd == "all":
            if not osds:
                raise UserError("no running ceph-osd %s" % where)
            osds.sort(key=lambda o: (o[1] is None, int(o[1]) if o[1] and
                                     o[1].isdigit() else 0, o[0]))
            pids = [pid for pid, _ in osds]
        else:
            pids = [_one_osd(osds, i, where) for i in want.osd]
    if len(set(pids)) != len(pids):
        raise UserError("the same process is named twice: %s" % ",".join(
            str(p) for p in pids))
    if want.pid is not None:
        return [Target(p, allow_any=allow_any) for p in pids]
    out = []
    for p in pids:
        try:
            out.append(Target(p, allow_any=allow_any))
        except UserError:
            if pid_alive(p):
                raise
            # found by name and gone since (a one-shot run that ended)
    if not out:
        raise UserError("no running ceph-osd %s" % where)
    return out


def target_name(t):
    """osd.N for a ceph-osd, else "pid N" (a --probes target)."""
    return "osd.%s" % t.osd_id if getattr(t, "osd_id", None) else \
        "pid %d" % t.pid


def pick_target(want):
    targets = pick_targets(want)
    if len(targets) > 1:
        raise UserError("this needs one OSD: name one with -p or --osd")
    return targets[0]


def _binary_key(path):
    """The identity of an executable file (device, inode, size, mtime), or
    None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def spec_roles(sp, path):
    """A probe spec's thread roles, bounded by the build's MAX_ROLES (role
    0 is "other") -> Roles"""
    max_roles = vocab.live().max_roles
    if len(sp.role_prefixes) > max_roles - 1:
        raise UserError("%s: \"roles\" maps at most %d name prefixes to role "
                        "names" % (path, max_roles - 2))
    return Roles(sp.role_prefixes)


def _resolve(target, want, wanted, spec_choice):
    """-> (the release choice, the plan) of one target's binary
    (spec_choice: a probe spec's, else the binary's release is read)."""
    with ElfSymbols(target.exe_path) as elf:
        choice = spec_choice or choose_release(
            elf, target.ceph_version(elf), want.release,
            "ceph-osd %d, %s" % (target.pid, target.exe))
        # an inexact table entry's offsets are unchecked for this binary
        return choice, resolve(elf, choice.release, wanted,
                               choice.release.settings()
                               if choice.exact is not False else {},
                               lean=want.lean)


def plan_targets(want, err):
    """-> (targets, release choice, roles, plans: one per target)."""
    if want.probes:
        sp = spec.load(want.probes)
        if want.pid is None:
            raise UsageError("--probes needs -p PID")
        targets = pick_targets(want, allow_any=True)
        for t in targets:
            t.set_scheduler(sp.scheduler)
        spec_choice, roles = Choice(None, sp.release, None), \
            spec_roles(sp, want.probes)
        wanted = sp.stages() if want.stages in (None, "all") else \
            want.stages
    else:
        targets = pick_targets(want)
        spec_choice, roles = None, CEPH_ROLES
        wanted = list(probetable.LEAN_STAGES) if want.lean else \
            probetable.wanted_stages(want.stages)
    require_btf()
    require_tracefs()
    plans, first = [], None
    # OSDs of one binary (a host's, a container image's) resolve once: the
    # ELF's symbol tables take ~0.1 s to read, paid at every (re)start of
    # the exporter's tiers
    resolved, gone, skipped = {}, [], []
    for target in targets:
        key = _binary_key(target.exe_path)
        if key is not None and key in resolved:
            choice, plan = resolved[key]
            plans.append(plan)
            continue
        try:
            choice, plan = _resolve(target, want, wanted, spec_choice)
        except UserError as e:
            if want.pid is None and not still_an_osd(target):
                # found by name, gone or another program since (a helper
                # an OSD forked, now exec'd; a one-shot run that ended)
                gone.append(target)
                continue
            if want.osd == "all":
                # every OSD of the host: those that can be traced are,
                # one that cannot (another program named ceph-osd, a
                # build without symbols) is said and left out
                gone.append(target)
                skipped.append((target, e))
                continue
            raise
        if first is None and choice.notice:
            err.write("%s: %s\n" % (TOOL, choice.notice))
        plans.append(plan)
        resolved[key] = (choice, plans[-1])
        if first is None:
            first = choice
        elif (choice.release.key, choice.exact) != (first.release.key,
                                                    first.exact):
            raise UserError(
                "%s is Ceph %s and %s is Ceph %s: trace OSDs of different "
                "releases in separate runs" % (
                    target_name(targets[0]), first.version or "?",
                    target_name(target), choice.version or "?"))
    if gone:
        targets = [t for t in targets if t not in gone]
        if not targets:
            raise skipped[0][1] if skipped else \
                UserError("no running ceph-osd on this host")
    for t, e in skipped:
        err.write("%s: leaving %s (pid %d) out: %s\n" % (
            TOOL, target_name(t), t.pid, e))
    plan = plans[0]
    if plan.unavailable and (want.strict or not plan.stages):
        stage, why = next(iter(plan.unavailable.items()))
        raise UserError("stage %s unavailable: %s" % (stage, why))
    if not plan.stages and want.no_kernel:
        raise UserError("nothing to trace: the probe spec has no enqueue/"
                        "dequeue and --no-kernel is set")
    return targets, first, roles, plans
