"""The stage-timing engine: resolve the probe table against a binary, load
probes/osdstage.bpf.o, attach, and read the in-kernel aggregates.

Every id, layout and program name comes from the object itself
(build/osdstage.abi.json through cephlat.abi and model/vocab.py).
Used by the live tool and by the BPF test tier (which points it at a
small controlled program instead of ceph-osd).
"""
import os
import struct
import time

from .. import abi as abimod
from ..clocks import wall_minus_mono
from ..errors import UserError
from ..model import vocab as vocabmod
from ..model.report import AGED_OUT
from ..model.hist import Hist
from ..model.roles import CEPH_ROLES
from ..model.snapshot import Snapshot
from ..ceph import probetable
from ..ceph.target import pid_alive
from . import DEFAULT_MAX_OPS, DEFAULT_OP_TIMEOUT_S, bpf, bpfsys
from . import calibrate as calibration
from .loadtime import (apply_settings, attached_kernel_programs,
                       kernel_programs, lean_span, rodata_type,
                       sampling_programs, trace_ring_bytes, trace_settings)
from .mapread import MapReads
from .optable import OpTable, ReqIndex, table_size
from .stats import StatsReader, read_counters


# The stages the programs record per op class only (probes/osdstage.h):
# their op classes make them up, and the tracer adds them up. The lean
# tier's queue_wait too (StageTracer.summed); the full tier's counts every
# dequeued op, its class split only those that complete as client ops.
CLASS_SUMMED = ("op_total", "op_latency")


default_bpf_dir = abimod.default_bpf_dir


def real_offset_ns():
    """CLOCK_REALTIME - CLOCK_MONOTONIC now (bpf_ktime_get_ns is the
    monotonic clock, Ceph's stamps are wall clock)."""
    return wall_minus_mono()[1]


def tai_offset_ns():
    """CLOCK_TAI - CLOCK_REALTIME: whole seconds (the kernel's TAI offset,
    0 until a time daemon sets it), which the programs take off the TAI
    clock to read the wall clock (helpers.bpf.h wall_now)."""
    d = time.clock_gettime_ns(time.CLOCK_TAI) - time.time_ns()
    return round(d / 1e9) * 1000000000


# Ceph's threads (docs/ceph.md); role 1 are the shard workers.


def _per_target(value, n):
    return list(value) if isinstance(value, (list, tuple)) else [value] * n


class StageTracer(MapReads):
    """Times the plan's stages in process `pid`, whose executable is
    readable (and probed) at `exe_path`.

    Several processes at once (every OSD of a host): `pid` is a list, one
    target slot each in that order; `exe_path` and `plan` are one for all
    or a list of the same length. One set of BPF programs serves them all;
    statistics, counters, threads, shards and devices are per slot
    (snapshots())."""

    def __init__(self, pid, exe_path, plan, rmw=None, settings=None,
                 max_ops=DEFAULT_MAX_OPS,
                 bpf_dir=None, calibrate=True, kernel=False, roles=None,
                 ring_bytes=0, mclock=None, lean=False, traces=None,
                 behind=False, stacks_min_us=None, oncpu_hz=None):
        self.pids = list(pid) if isinstance(pid, (list, tuple)) else [pid]
        n = len(self.pids)
        self.exe_paths = _per_target(exe_path, n)
        self.plans = _per_target(plan, n)
        self.pid, self.exe_path, self.plan = (self.pids[0], self.exe_paths[0],
                                              self.plans[0])
        self.rmw = rmw
        self.settings = dict(settings or {})   # {.rodata name: value}
        self.kernel = kernel
        # whom the targets' threads wait behind for a CPU (ctl.behind: a
        # cost on every context switch of the host; kernel stages only)
        self.split_behind = bool(behind and kernel)
        # the stacks of the targets' threads' waits this long (us) or
        # longer, in the capture (kernel stages and a capture only)
        self.stacks_min_us = stacks_min_us if kernel and ring_bytes \
            else None
        # the targets' threads sampled on their CPUs this often, their
        # stacks in the capture (a capture only)
        self.oncpu_hz = oncpu_hz if ring_bytes else None
        self.roles = roles or CEPH_ROLES
        self.max_ops = max_ops
        self.bpf_dir = bpf_dir or default_bpf_dir()
        self.abi = abimod.load("osdstage", self.bpf_dir)
        self.vocab = vocabmod.live(self.bpf_dir)
        if n > self.abi.const("MAX_TARGETS"):
            raise UserError("at most %d processes can be traced at once "
                            "(%d asked)" % (self.abi.const("MAX_TARGETS"), n))
        self.want_calibration = calibrate
        self.cet = self.plan.cet   # calibrate on a function of this flavour
        self.calibrate_always = False
        self.calib = dict(calibration.NONE)   # struct ctl's call_* fields
        # the kernel's BPF run statistics, held on while attached when the
        # cost is measured (measure_runs(): duty cycles, the exporter)
        self.run_stats, self._stats_fd = False, None
        self.obj = bpf.BPFObject(os.path.join(self.bpf_dir, "osdstage.bpf.o"))
        self.reader = None
        self.aged_out = {}         # slot -> ops aged out
        # capture events: ring buffer size (0 = not recording)
        self.ring_bytes = ring_bytes
        # the targets whose OSD schedules with mClock (ctl.mclock)
        self.mclock = list(mclock or [False] * n)
        self.gen = 0
        self._cum = {}
        # snapshots() also sum every interval's histograms since start()
        # (Snapshot.hists); a caller that keeps its own sums (the exporter)
        # turns this off
        self.keep_cumulative = True
        # stages the programs record per op class only: the total is the
        # sum of the classes (probes/osdstage.h, the op-class stage ids);
        # the lean tier's queue_wait too, whose ops are all client ops
        self.summed = list(CLASS_SUMMED) + (["queue_wait"] if lean else [])
        self.lean = lean
        # ops sent as OTLP traces (model/sample.py's TraceChoice; None:
        # none): chosen by the programs at each op's end, read with
        # take_traces()
        self.traces = traces if traces and not lean and (
            traces.every or traces.over_us is not None) else None
        self.trace_ring = None

    def start(self):
        ro = rodata_type(self.abi)(calib_tgid=os.getpid())
        if self.rmw:
            ro.rmw_flags_off, ro.rmw_read_bit, ro.rmw_write_bit = self.rmw
        apply_settings(ro, self.settings)
        if self.lean:
            ro.lean_lo, ro.lean_span = lean_span(self.settings,
                                                 self.abi.const(
                                                     "LEAN_SPAN_MAX"))
        # the messenger stages cost two reads per op: only when traced
        if not any(st in p.stages for p in self.plans
                   for st in probetable.MESSENGER_STAGES):
            ro.msg_stamps_off = 0
        ro.ops_mask = table_size(self.max_ops) - 1
        self.roles.fill(ro)
        ro.record_events = 1 if self.ring_bytes else 0
        if self.stacks_min_us:
            ro.stack_min_ns = int(self.stacks_min_us * 1000)
        if self.traces:
            apply_settings(ro, trace_settings(self.traces))
        # with the dequeue function's return probed, a worker's sleep inside
        # it (I/O, locks) is work on an op, not idleness
        ro.track_in_op = int(any(st == "dequeue_op" for st, _ in
                                 self.plan.calls))
        self.obj.set_rodata(ro)
        n = len(self.pids)
        self.obj.set_max_entries("ops", table_size(self.max_ops))
        self.obj.set_max_entries("stats", 2 * self.vocab.max_stages * n)
        # a set of counters per target and interval half
        self.obj.set_max_entries("counters",
                                 self.abi.const("CNT__MAX") * n * 2)
        if self.ring_bytes:
            self.obj.set_max_entries("events", self.ring_bytes)
        if self.stacks_min_us:
            self.obj.set_max_entries("wait_stacks",
                                     self.abi.const("STACK_THREADS"))
        if self.traces:
            self.obj.set_max_entries("traces", trace_ring_bytes(
                self.traces, self.abi.struct("op_trace").size))
        self.kernel_progs = attached_kernel_programs(self.abi, self.pids) \
            if self.kernel else []
        for prog in kernel_programs(self.abi):
            if prog not in self.kernel_progs:
                self.obj.set_autoload(prog, False)
        if not self.oncpu_hz:
            for prog in sampling_programs(self.abi):
                self.obj.set_autoload(prog, False)
        if self.lean:
            # its one program and the calibration's: the verifier's time
            # for the others (~0.15 s) is spent at every (re)start of the
            # exporter's lean tier
            used = {prog for p in self.plans for _, prog, _, _ in
                    p.op_events} | {"stage_entry", "stage_return"}
            for prog in self.abi.programs_in("uprobe", "uretprobe"):
                if prog not in used:
                    self.obj.set_autoload(prog, False)
        # one uprobe_multi link per program, target and direction when the
        # kernel has them (>= 6.6), else one classic link per function; a
        # program loaded for uprobe_multi takes no classic uprobe, so the
        # choice is made here, once, for every uprobe program
        self.multi = bpfsys.uprobe_multi_supported()
        if self.multi:
            self.obj.use_uprobe_multi(self.abi.programs_in("uprobe",
                                                           "uretprobe"))
        self.obj.load()
        self.threads = self.obj.map("threads")
        self.shards = self.obj.map("shards")
        self.devs = self.obj.map("devs")
        self._write_ctl()
        if self.kernel:
            self._seed_threads()
        self.reader = StatsReader(self.obj.map("stats"), self.vocab,
                                  self.abi)
        if self.want_calibration and (self.plan.calls or self.calibrate_always):
            self.calib = calibration.calibrate(self)
            self._write_ctl()
        self.counters = self.obj.map("counters")
        self.ops = OpTable(self.obj.map("ops"), self.abi)
        self.reqidx = ReqIndex(self.obj.map("reqidx"), self.abi)
        self.peers = self.obj.map("peers")
        self.behind = self.obj.map("behind")
        if self.traces:
            from .traces import TraceRing
            self.trace_ring = TraceRing(self.obj.map("traces"), self.abi,
                                        self.bpf_dir)
        self._halves = {}       # map name -> {half: its state at closing}
        self.attach()

    @property
    def call_bias_ns(self):
        """What the probes add to a call on a warm CPU (calibrate)."""
        return self.calib["call_bias_ns"]

    def _write_ctl(self):
        # struct ctl, the whole .bss (tests/unit/test_layout.py)
        ctl = self.abi.struct("ctl")
        raw = bytearray(ctl.pack(
            gen=self.gen,
            real_off_ns=real_offset_ns(), tai_off_ns=tai_offset_ns(),
            mclock=sum(1 << i for i, m in enumerate(self.mclock) if m),
            behind=int(self.split_behind),
            **self.calib))
        at = ctl.offset("targets")
        raw[at:at + 4 * len(self.pids)] = struct.pack(
            "<%dI" % len(self.pids), *self.pids)
        self.obj.map(".bss").update(struct.pack("<I", 0), bytes(raw))

    # Kinds of probe, in attach order (see attach and detach)
    KERNEL, CALL_ENTRY, CALL_RETURN, OP_END, OP_MIDDLE, OP_START = range(-1, 5)
    OP_KINDS = {"op_done": OP_END, "rep_reply": OP_END,
                "rep_local_commit": OP_END, "repop_done": OP_END,
                "ec_reply": OP_END, "ec_committed": OP_END,
                "ec_read_reply": OP_END, "ec_read_done": OP_END,
                "ec_read_start": OP_MIDDLE,
                "op_dequeue": OP_MIDDLE, "rep_submit": OP_MIDDLE,
                "ec_sub_write": OP_MIDDLE,
                "op_enqueue": OP_START, "op_lean": OP_END}
    DETACH_ORDER = (OP_START, OP_END, OP_MIDDLE, CALL_RETURN, CALL_ENTRY,
                    KERNEL)

    def attach(self):
        """Attach every probe of the plans (and the kernel programs)."""
        # by kind, every target's at once: kernel, then the calls' entries,
        # their returns, then the op events (an op is followed only once
        # its calls are; a return probe fires only for calls entered after
        # it was attached, so with the entries already on, every return
        # has its start). The op events from the op's end back to its
        # start, op_enqueue last: an op followed from its enqueue meets
        # every later probe of its life already on (attached in pipeline
        # order, an op enqueued between the enqueue's and the dequeue's
        # attach completed with no dequeue in the capture). One link per
        # (kind, target, program, direction), all its functions in it
        # (uprobe_multi; per function on a kernel without it)
        links = []
        self._stats(self.run_stats)
        if self.kernel:
            for prog in self.kernel_progs:
                links.append(self.obj.attach(prog))
                links[-1].tag = self.KERNEL
        if self.oncpu_hz:
            for cpu in bpfsys.online_cpus():
                try:
                    pfd = bpfsys.cpu_clock(cpu, self.oncpu_hz)
                except OSError as e:
                    raise UserError("cannot open a sampling clock on CPU "
                                    "%d (--on-cpu): %s" % (cpu, e.strerror))
                links.append(self.obj.attach_perf_event(
                    "on_cpu_sample", pfd, "the sampling clock of CPU %d" %
                    cpu))
                links[-1].tag = self.KERNEL
        groups = {}
        for slot, plan in enumerate(self.plans):
            for prog, sym, cookie, ret in plan.uprobes(self.vocab.stage_ids,
                                                       self.abi):
                kind = {"stage_entry": self.CALL_ENTRY,
                        "stage_return": self.CALL_RETURN}.get(
                            prog, self.OP_KINDS.get(prog, self.OP_END))
                groups.setdefault((kind, slot, prog, ret), []).append(
                    (sym.probe_offset, cookie, sym.demangled))
        # stable: in plan order within a kind and target; a target that
        # has exited (duty cycles re-attach while the others run on) is
        # left out: its executable is gone with it
        for kind, slot, prog, ret in sorted(groups, key=lambda k: k[:2]):
            if not pid_alive(self.pids[slot]):
                continue
            try:
                new = self.obj.attach_uprobes(
                    prog, self.exe_paths[slot], groups[kind, slot, prog, ret],
                    pid=self.pids[slot], retprobe=ret)
            except UserError:
                if pid_alive(self.pids[slot]):
                    raise
                continue
            for link in new:
                link.tag = kind
                links.append(link)
        self.target_links = links
        self.attached = True

    def detach(self):
        """Detach the plan's probes (maps and calibration stay): nothing of
        ours runs in the target until attach() again.

        The op events go first, so no op is followed while its calls'
        probes come off one by one (unregistering a uprobe takes
        milliseconds): a capture's ops each have every stage they ran, not
        only the last probes'. Of those, op_enqueue first (no new op is
        followed), then the op's ends, then its middle (dequeue, sub-ops
        sent): an op in flight is then either seen to its end or seen
        dequeued and not completed, never completed without its dequeue.
        The calls' returns go before their entries: a return probe left on
        its own would fire, without a start, for every call entered after.

        Unregistering waits for RCU grace periods (~0.1 s a link here),
        and concurrent waits share them: the links of a kind (op events,
        call returns, call entries, kernel programs) are destroyed at
        once, from threads, the
        kinds one after another. uprobe_multi links gain most; the kernel
        serializes most of a classic (perf event) link's wait."""
        from concurrent.futures import ThreadPoolExecutor
        by_kind = {}
        for link in reversed(getattr(self, "target_links", [])):
            by_kind.setdefault(link.tag, []).append(link)
        kinds = [by_kind[k] for k in self.DETACH_ORDER if k in by_kind]
        with ThreadPoolExecutor(32) as pool:
            for links in kinds:
                list(pool.map(bpf.Link.destroy, links))
        self.target_links = []
        self.attached = False
        self._stats(False)

    def measure_runs(self):
        """From now on, hold the kernel's BPF run statistics on while the
        probes are attached (bpf.enable_run_stats: they cost each program
        run two clock reads, of every BPF program of the host): what our
        programs cost is then measured, run_totals(). Off while detached,
        when none of ours runs."""
        self.run_stats = True
        self._stats(self.attached)

    def _stats(self, on):
        if on and self._stats_fd is None:
            self._stats_fd = bpf.enable_run_stats()
        elif not on and self._stats_fd is not None:
            os.close(self._stats_fd)
            self._stats_fd = None

    def run_totals(self):
        """Our programs' runs so far while the run statistics were on:
        {"prog_ns": their time, "uprobe_runs": runs of the uprobe programs
        (each is a trap in the target)}; None unless measure_runs() was
        called, or while attached the kernel refused the statistics."""
        if not self.run_stats or (self.attached and self._stats_fd is None):
            return None
        tot = {"prog_ns": 0, "uprobe_runs": 0}
        for _, fd in self.obj.programs():
            info = bpfsys.prog_fdinfo("self", fd) if fd >= 0 else None
            if info is None:
                continue
            tot["prog_ns"] += info["run_time_ns"]
            if info["type"] == bpfsys.BPF_PROG_TYPE_KPROBE:
                tot["uprobe_runs"] += info["run_cnt"]
        return tot

    def snapshot_counters(self, slot=None):
        """Counters of target `slot`; None: summed over every target."""
        if slot is not None:
            return read_counters(self.counters, self.vocab, self.abi, slot)
        out = {}
        for s in range(len(self.pids)):
            for k, v in read_counters(self.counters, self.vocab, self.abi,
                                      s).items():
                out[k] = out.get(k, 0) + v
        return out

    def snapshot(self):
        """The one target's snapshots()[0] (a single-target tracer)."""
        if len(self.pids) != 1:
            raise ValueError("snapshot() of a tracer of %d targets: use "
                             "snapshots()" % len(self.pids))
        return self.snapshots()[0]

    def snapshots(self):
        """Per target slot: cumulative state since start(); .interval holds
        what was counted since the previous snapshot.

        The report interval ends here: the programs count into the other
        half of the stats, counters, shards, devices and peers maps from
        now on (probes/osdstage.h HALF_SHIFT). The old half is read once
        the programs that read the old interval number have finished (they
        run for microseconds): complete and still, so every figure of the
        report covers the same ops. The stats' half is cleared; the others
        keep counting up and are summed with the other half as it was when
        it closed."""
        gen = self.gen
        self.gen += 1
        self._write_ctl()
        mono = time.monotonic_ns()
        n = len(self.pids)
        aged = self.age_counts()
        time.sleep(0.002)
        half = gen & 1
        # the closed half of every map that feeds the report, summed with
        # the other half as it closed: each figure covers the same ops
        counters = self._closed("counters", half, lambda h: {
            s: {"": read_counters(self.counters, self.vocab, self.abi, s, h)}
            for s in range(n)})
        counters = [dict(counters.get(s, {}).get("", {})) for s in range(n)]
        # the lean tier's one program writes neither shards nor peers
        shards = self._closed("shards", half, self.read_shards) \
            if not self.lean else {}
        peers = self.take_peers(half) if not self.lean else {}
        threads = self.read_threads() if self.kernel else {}
        behind = self.take_behind(half) if self.split_behind else {}
        devs = self._closed("devs", half, self.read_devs) \
            if self.kernel else {}
        out = []
        for slot in range(n):
            counters[slot][AGED_OUT] = aged.get(slot, 0)
            hs = self.reader.read_all(half, slot)
            interval = {name: hs[sid]
                        for name, sid in self.vocab.stage_ids.items()}
            self.reader.clear(half, slot)
            self._add_up(interval)
            interval.update(peers.get(slot, {}))
            hists = {}
            if self.keep_cumulative:
                cum = self._cum.setdefault(slot, {})
                for name, h in interval.items():
                    cum.setdefault(name, Hist()).merge(h)
                hists = {name: Hist(h.count, h.sum_ns, h.max_ns,
                                    list(h.slots))
                         for name, h in cum.items()}
            snap = Snapshot(hists, counters[slot], threads.get(slot, {}),
                            shards.get(slot, {}), devs.get(slot, {}), mono,
                            interval, gen)
            snap.behind = behind.get(slot, {}) if self.split_behind \
                else None
            out.append(snap)
        return out

    def _add_up(self, interval):
        """The totals the programs leave to user space (self.summed):
        each the sum of its per-class parts."""
        for base in self.summed:
            total = Hist()
            for c in self.vocab.op_classes:
                total.merge(interval[base + "." + c])
            interval[base] = total
        if self.lean:
            interval["queue_wait.client"] = Hist(
                interval["queue_wait"].count, interval["queue_wait"].sum_ns,
                interval["queue_wait"].max_ns, interval["queue_wait"].slots)

    def age_out(self, timeout_s=DEFAULT_OP_TIMEOUT_S):
        """Drop ops idle for longer than timeout_s (never completed: client
        gone, op dropped); they are counted in `op_aged_out`."""
        now = time.monotonic_ns()     # same clock as bpf_ktime_get_ns()
        limit = int(timeout_s * 1e9)
        n = 0
        for slot, k in self.ops.age_out(now, limit).items():
            self.aged_out[slot] = self.aged_out.get(slot, 0) + k
            n += k
        # request ids of replicated writes whose op is gone
        self.reqidx.drop_unless(self.ops.keys)
        return n

    def age_counts(self):
        return dict(self.aged_out)

    def in_flight(self, slot=None):
        """Ops enqueued and not completed: of target `slot`, or all."""
        return self.ops.in_flight(slot)

    def in_flight_by_slot(self):
        """[in_flight(slot) for every slot], in one pass."""
        return self.ops.in_flight_by_slot(len(self.pids))

    def take_traces(self):
        """The ops the programs chose to send as traces since the last
        call (engine/traces.py: dicts of struct op_trace), oldest first;
        [] when no traces are asked for."""
        return self.trace_ring.take() if self.trace_ring else []

    def close(self):
        self._stats(False)
        if self.trace_ring is not None:
            self.trace_ring.close()
            self.trace_ring = None
        for table in (getattr(self, "ops", None),
                      getattr(self, "reqidx", None)):
            if table is not None:
                table.close()
        self.obj.close()
