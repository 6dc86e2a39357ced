"""The stage-timing engine: resolve the probe table against a binary, load
probes/osdstage.bpf.o, attach, and read the in-kernel aggregates.

Used by tools/osdstage.py and by the BPF test tier (which points it at a
small controlled program instead of ceph-osd).
"""
import array
import ctypes
import os
import struct
import time

from . import bpf

from ..ceph import probetable
from ..model.hist import HIST_SLOTS, Hist, slot_bounds_us

COUNTER_NAMES = ["start_map_full", "no_start", "negative", "op_map_full",
                 "op_unknown", "bad_arg", "op_replaced", "thread_map_full",
                 "attr_truncated", "wake_enqueuer", "wake_other",
                 "wake_timeout", "rq_map_full", "timeouts_with_work",
                 "hit_entry", "hit_return", "hit_sched", "hit_syscall",
                 "events_lost"]
# counters that are results, not losses
RESULT_COUNTERS = ("wake_enqueuer", "wake_other", "wake_timeout",
                   "timeouts_with_work", "hit_entry", "hit_return",
                   "hit_sched", "hit_syscall")
MAX_ROLES = 8
KERNEL_PROGRAMS = {
    # program: what it needs
    "on_switch": "tp_btf", "on_waking": "tp_btf",
    "on_futex_enter": "tracepoint", "on_futex_exit": "tracepoint",
    "on_syncfs_enter": "tracepoint", "on_syncfs_exit": "tracepoint",
    "on_rq_insert": "tp_btf", "on_rq_issue": "tp_btf",
    "on_rq_complete": "tp_btf",
}

# struct thread_state (probes/osdstage.h) up to the ring, then 16 x tring
_THREAD_FMT = "<QIIQQQQQQQQQQIIIIQQQII"
_THREAD_SIZE = struct.calcsize(_THREAD_FMT)
_TRING = 32
_TRING_SIZE = 32
_SHARD_FMT = "<11Q"
_DEV_FMT = "<4Q"
DEFAULT_MAX_OPS = 65536
DEFAULT_OP_TIMEOUT_S = 120.0


def default_bpf_dir():
    env = os.environ.get("CEPHLAT_BPF_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "build"))


def opcookie(event, arg, deref):
    return event | (arg << 8) | ((1 if deref else 0) << 12)


class Plan:
    """What to attach: resolved from a release's table and a binary."""

    def __init__(self):
        self.calls = []          # [(stage, Symbol)]
        self.op_events = []      # [(role, event, Symbol, (arg, deref))]
        self.stages = []         # available stages, in table order
        self.unavailable = {}    # stage -> reason
        self.symbols = {}        # role -> Symbol

    def probe_count(self):
        return 2 * len(self.calls) + len(self.op_events)


def resolve(elf, release, wanted):
    """Match the release's functions in `elf` for the `wanted` stages."""
    plan = Plan()
    missing = {}
    for stage in wanted:
        for role in probetable.STAGES[stage].roles():
            if role in plan.symbols or role in missing:
                continue
            func = release.funcs.get(role)
            if func is None:
                missing[role] = "no %s in the probe table for Ceph %s" % (
                    role, release.key)
                continue
            syms = elf.find(func.qualified, func.params)
            if len(syms) == 1:
                plan.symbols[role] = syms[0]
            elif not syms:
                missing[role] = "function %s(%s) not found in %s" % (
                    func.qualified, func.params.pattern.strip("^$"), elf.path)
            else:
                missing[role] = "%s(%s) matches %d functions" % (
                    func.qualified, func.params.pattern.strip("^$"), len(syms))
    seen_events = set()
    for stage in probetable.STAGE_NAMES:
        if stage not in wanted:
            continue
        st = probetable.STAGES[stage]
        gone = [r for r in st.roles() if r in missing]
        if gone:
            plan.unavailable[stage] = missing[gone[0]]
            continue
        plan.stages.append(stage)
        if st.kind == "call":
            plan.calls.append((stage, plan.symbols[st.func]))
        else:
            for role, ev in st.events:
                if (role, ev) in seen_events:
                    continue
                seen_events.add((role, ev))
                plan.op_events.append((role, ev, plan.symbols[role],
                                       release.funcs[role].op_arg))
    return plan


class _RolePrefix(ctypes.Structure):
    _fields_ = [("prefix", ctypes.c_char * 16),
                ("len", ctypes.c_uint32),
                ("role", ctypes.c_uint32)]


class _Rodata(ctypes.Structure):
    # the const volatile globals of probes/osdstage.bpf.c, at their .rodata
    # offsets (tests/unit/test_layout.py checks them against the object's BTF)
    _fields_ = [("targ_tgid", ctypes.c_uint32),
                ("rmw_flags_off", ctypes.c_uint32),
                ("rmw_read_bit", ctypes.c_uint32),
                ("rmw_write_bit", ctypes.c_uint32),
                ("calib_tgid", ctypes.c_uint32),
                ("worker_role", ctypes.c_uint32),
                ("track_in_op", ctypes.c_uint32),
                ("roles", _RolePrefix * MAX_ROLES),
                ("record_events", ctypes.c_uint32)]


class Roles:
    """Thread roles by name prefix: [(prefix, role name)]; role 0 = other.
    The BPF side classifies a thread when it first sees it (and when its
    name changes) with the same first-match rule."""

    def __init__(self, prefixes, worker=1):
        if len(prefixes) > MAX_ROLES - 1:
            raise ValueError("at most %d roles" % (MAX_ROLES - 1))
        self.prefixes = list(prefixes)
        self.names = ["other"] + [name for _, name in prefixes]
        self.worker = worker

    def classify(self, comm):
        for i, (prefix, _) in enumerate(self.prefixes):
            if comm.startswith(prefix):
                return i + 1
        return 0

    def fill(self, ro):
        for i, (prefix, _) in enumerate(self.prefixes):
            b = prefix.encode()[:15]
            ro.roles[i].prefix = b
            ro.roles[i].len = len(b)
            ro.roles[i].role = i + 1
        ro.worker_role = self.worker


# Ceph's threads (design.md §4); role 1 are the shard workers.
CEPH_ROLES = Roles([("tp_osd_tp", "tp_osd_tp"), ("msgr-worker-", "msgr-worker"),
                    ("ms_dispatch", "ms_dispatch"),
                    ("bstore_kv_sync", "bstore_kv_sync"),
                    ("bstore_aio", "bstore_aio"), ("rocksdb:", "rocksdb")])


class Snapshot:
    """Cumulative state read from the kernel at one moment; `interval`
    holds the histograms of the report interval it closed (exact: each
    measurement lands in one interval) and `gen` that interval's number."""

    def __init__(self, hists, counters, threads, shards, devs, mono_ns,
                 interval=None, gen=None):
        self.hists, self.counters = hists, counters
        self.threads, self.shards, self.devs = threads, shards, devs
        self.mono_ns = mono_ns
        self.interval, self.gen = interval, gen

    def __iter__(self):             # hists, counters = tracer.snapshot()
        return iter((self.hists, self.counters))


class StageTracer:
    """Times the plan's stages in process `pid`, whose executable is
    readable (and probed) at `exe_path`."""

    def __init__(self, pid, exe_path, plan, rmw=None, max_ops=DEFAULT_MAX_OPS,
                 bpf_dir=None, calibrate=True, kernel=False, roles=None,
                 ring_bytes=0):
        self.pid, self.exe_path, self.plan, self.rmw = pid, exe_path, plan, rmw
        self.kernel = kernel
        self.roles = roles or CEPH_ROLES
        self.max_ops = max_ops
        self.bpf_dir = bpf_dir or default_bpf_dir()
        self.want_calibration = calibrate
        self.calibrate_always = False
        self.call_bias_ns = 0
        self.obj = bpf.BPFObject(os.path.join(self.bpf_dir, "osdstage.bpf.o"))
        self.reader = None
        self.aged_out = 0
        # capture events: ring buffer size (0 = not recording)
        self.ring_bytes = ring_bytes
        self.gen = 0
        self._cum = {}

    def start(self):
        ro = _Rodata(targ_tgid=self.pid, calib_tgid=os.getpid())
        if self.rmw:
            ro.rmw_flags_off, ro.rmw_read_bit, ro.rmw_write_bit = self.rmw
        self.roles.fill(ro)
        ro.record_events = 1 if self.ring_bytes else 0
        # with the dequeue function's return probed, a worker's sleep inside
        # it (I/O, locks) is work on an op, not idleness
        ro.track_in_op = int(any(st == "dequeue_op" for st, _ in
                                 self.plan.calls))
        self.obj.set_rodata(ro)
        self.obj.set_max_entries("ops", self.max_ops)
        if self.ring_bytes:
            self.obj.set_max_entries("events", self.ring_bytes)
        if not self.kernel:
            for prog in KERNEL_PROGRAMS:
                self.obj.set_autoload(prog, False)
        self.obj.load()
        self.threads = self.obj.map("threads")
        self.shards = self.obj.map("shards")
        self.devs = self.obj.map("devs")
        if self.kernel:
            self._seed_threads()
        self.reader = StatsReader(self.obj.map("stats"))
        if self.want_calibration and (self.plan.calls or self.calibrate_always):
            self.call_bias_ns = self._calibrate()
            self._write_ctl()
        self.counters = self.obj.map("counters")
        self.ops = self.obj.map("ops")
        self.attach()

    def _write_ctl(self):
        # struct ctl, the whole .bss (tests/unit/test_layout.py)
        self.obj.map(".bss").update(struct.pack("<I", 0), struct.pack(
            "<QII", self.call_bias_ns, self.gen, 0))

    def attach(self):
        """Attach every probe of the plan (and the kernel programs)."""
        links = []
        if self.kernel:
            for prog in KERNEL_PROGRAMS:
                links.append(self.obj.attach(prog))
        for stage, sym in self.plan.calls:
            sid = probetable.STAGE_IDS[stage]
            for ret in (False, True):
                links.append(self.obj.attach_uprobe(
                    "stage_return" if ret else "stage_entry", self.exe_path,
                    sym.offset, pid=self.pid, retprobe=ret, cookie=sid,
                    what=sym.demangled))
        for role, ev, sym, (arg, deref) in self.plan.op_events:
            links.append(self.obj.attach_uprobe(
                "op_event", self.exe_path, sym.offset, pid=self.pid,
                cookie=opcookie(ev, arg, deref), what=sym.demangled))
        self.target_links = links
        self.attached = True

    def detach(self):
        """Detach the plan's probes (maps and calibration stay): nothing of
        ours runs in the target until attach() again."""
        for link in getattr(self, "target_links", []):
            link.destroy()
        self.target_links = []
        self.attached = False

    def _calibrate(self, calls=100, gap_s=0.0005):
        """What a uprobe + uretprobe pair adds to an entry -> return time
        here: the median time of a trivial function (build/
        libcephlat_calib.so; like Ceph's functions it starts with `push
        %rbp`) timed by the same programs, called from this process.

        The cost depends on the state of the CPU: on the development VM
        ~0.9 us in a busy loop, ~1.2-1.9 us when the thread slept between
        calls, ~2 us inside the loaded OSD (the excess of BlueStore::read
        over Ceph's own bluestore.read_lat, before compensation). OSD
        threads block between ops, so the calls here are spaced by sleeps
        of `gap_s`. The compensation is therefore conservative: it may leave
        a few hundred ns of probe cost in, never take real time out. The
        probes stay attached (detaching costs ~0.2 s); they fire only in
        this process. In ns; 0 when the library is missing or too few calls
        were seen."""
        lib_path = os.path.join(self.bpf_dir, "libcephlat_calib.so")
        if not os.path.exists(lib_path):
            return 0
        from .elfsym import ElfSymbols
        with ElfSymbols(lib_path) as elf:
            sym = elf.find("cephlat_calib_target")[0]
        fn = ctypes.CDLL(lib_path).cephlat_calib_target
        fn.restype, fn.argtypes = ctypes.c_long, [ctypes.c_long]
        sid = probetable.STAGE_IDS["_calib"]
        for ret in (False, True):
            self.obj.attach_uprobe("stage_return" if ret else "stage_entry",
                                   lib_path, sym.offset, pid=os.getpid(),
                                   retprobe=ret, cookie=sid, what=sym.name)
        fn(0)                          # first hit: page-in, not a sample
        base = self.reader.read(sid)
        for i in range(calls):
            time.sleep(gap_s)
            fn(i)
        h = hist_delta(self.reader.read(sid), base)
        if h.count < calls // 2:
            return 0
        return int(h.percentile_us(0.5) * 1000)

    def _seed_threads(self):
        """Enter the target's existing threads with their current state, so
        that a thread asleep for the whole run is counted as asleep."""
        now = time.monotonic_ns()
        task_dir = "/proc/%d/task" % self.pid
        for tid in os.listdir(task_dir):
            try:
                with open(os.path.join(task_dir, tid, "comm"), "rb") as f:
                    comm = f.read().rstrip(b"\n")
                with open(os.path.join(task_dir, tid, "stat")) as f:
                    st = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            state = 0 if st == "R" else 1
            c8 = (comm + b"\0" * 8)[:8]
            head = struct.pack(_THREAD_FMT, struct.unpack("<Q", c8)[0],
                               self.roles.classify(comm.decode("utf-8",
                                                               "replace")),
                               state, now, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                               1, now, 0, 0, 0, 0)
            ring = struct.pack("<QQQII", now, 0, 0, state, 0)
            ring += b"\0" * (_TRING_SIZE * (_TRING - 1))
            try:
                self.threads.update(struct.pack("<I", int(tid)), head + ring)
            except OSError:
                pass

    def read_threads(self):
        """{tid: dict} of the threads map, with in-progress time added."""
        now = time.monotonic_ns()
        out = {}
        size = self.threads.value_size
        for key in self.threads.keys():
            raw = self.threads.lookup(key, size)
            if raw is None:
                continue
            (comm8, role, state, since, cum_sleep, cum_runq, _cum_isleep,
             cum_futex, wake_ts, _oncpu, futex_start, cv, _sync, _waker, _to,
             wakeups, _head, born, died, queue_cv, _in_op,
             _pad) = struct.unpack_from(_THREAD_FMT, raw)
            if now > since:
                if state == 1:
                    cum_sleep += now - since
                elif state == 2:
                    cum_runq += now - since
            if futex_start and now > futex_start:
                cum_futex += now - futex_start
            out[struct.unpack("<I", key)[0]] = {
                "role": role, "state": state, "sleep_ns": cum_sleep,
                "runq_ns": cum_runq, "futex_ns": cum_futex,
                "wakeups": wakeups, "cv": queue_cv, "born": born,
                "died": died}
        return out

    def prune_threads(self):
        """Forget threads that have exited."""
        for key in self.threads.keys():
            tid = struct.unpack("<I", key)[0]
            if not os.path.exists("/proc/%d/task/%d" % (self.pid, tid)):
                self.threads.delete(key)

    def read_shards(self):
        out = {}
        for key in self.shards.keys():
            raw = self.shards.lookup(key, struct.calcsize(_SHARD_FMT))
            if raw is not None:
                v = struct.unpack(_SHARD_FMT, raw)
                out[struct.unpack("<Q", key)[0]] = dict(zip(
                    ("ops", "qwait_ns", "busy_ns", "signal_ns", "runq_ns",
                     "pickup_ns", "wake_enqueuer", "wake_other",
                     "wake_timeout", "qwait_max_ns", "timeouts_with_work"), v))
        return out

    def read_devs(self):
        out = {}
        for key in self.devs.keys():
            raw = self.devs.lookup(key, struct.calcsize(_DEV_FMT))
            if raw is not None:
                c, s_ns, b, mx = struct.unpack(_DEV_FMT, raw)
                dev = struct.unpack("<I", key)[0]
                out["%d:%d" % (dev >> 20, dev & 0xFFFFF)] = {
                    "count": c, "sum_ns": s_ns, "bytes": b, "max_ns": mx}
        return out

    def snapshot_counters(self):
        return read_counters(self.counters)

    def snapshot(self):
        """Cumulative state since start(); .interval holds what was counted
        since the previous snapshot.

        The report interval ends here: the programs count into the other
        half of the stats map from now on. Counters and shards are read at
        once, so they cover the same ops as the histograms; the old half is
        read (and cleared) once the programs that read the old interval
        number have finished (they run for microseconds)."""
        gen = self.gen
        self.gen += 1
        self._write_ctl()
        mono = time.monotonic_ns()
        counters = read_counters(self.counters)
        counters["op_aged_out"] = self.aged_out
        shards = self.read_shards()
        time.sleep(0.002)
        half = gen & 1
        interval = {name: self.reader.read(sid, half)
                    for name, sid in probetable.STAGE_IDS.items()
                    if not name.startswith("_")}
        self.reader.clear(half)
        for name, h in interval.items():
            self._cum.setdefault(name, Hist()).merge(h)
        hists = {name: Hist(h.count, h.sum_ns, h.max_ns, list(h.slots))
                 for name, h in self._cum.items()}
        threads = self.read_threads() if self.kernel else {}
        devs = self.read_devs() if self.kernel else {}
        return Snapshot(hists, counters, threads, shards, devs, mono,
                        interval, gen)

    def age_out(self, timeout_s=DEFAULT_OP_TIMEOUT_S):
        """Drop ops idle for longer than timeout_s (never completed: client
        gone, op dropped); they are counted in `op_aged_out`."""
        now = time.monotonic_ns()     # same clock as bpf_ktime_get_ns()
        limit = int(timeout_s * 1e9)
        n = 0
        for key in self.ops.keys():
            raw = self.ops.lookup(key, 32)
            if raw is None:
                continue
            enq, deq, _, _ = struct.unpack("<4Q", raw)
            if now - max(enq, deq) > limit and self.ops.delete(key):
                n += 1
        self.aged_out += n
        return n

    def in_flight(self):
        return len(self.ops.keys())

    def close(self):
        self.obj.close()


class StatsReader:
    """Reads the per-CPU `stats` map into cumulative Hists."""

    def __init__(self, stats_map):
        self.map = stats_map
        self.ncpu = bpf.num_possible_cpus()
        self.stride = (stats_map.value_size + 7) // 8 * 8
        self.words = self.stride // 8

    def read(self, stage_id, half=0):
        raw = self.map.lookup(struct.pack("<I", stage_id +
                                          half * probetable.MAX_STAGES),
                              self.stride * self.ncpu)
        h = Hist()
        if raw is None:
            return h
        a = array.array("Q")
        a.frombytes(raw)
        w = self.words
        slots = [0] * HIST_SLOTS
        for cpu in range(self.ncpu):
            base = cpu * w
            if not a[base]:
                continue
            h.count += a[base]
            h.sum_ns += a[base + 1]
            h.max_ns = max(h.max_ns, a[base + 2])
            for i, c in enumerate(a[base + 3:base + 3 + HIST_SLOTS]):
                if c:
                    slots[i] += c
        h.slots = slots
        return h


    def clear(self, half):
        zero = bytes(self.stride * self.ncpu)
        for sid in range(probetable.N_STAGE_IDS):
            self.map.update(struct.pack("<I", sid + half *
                                        probetable.MAX_STAGES), zero)


def read_counters(cmap):
    ncpu = bpf.num_possible_cpus()
    out = {}
    for i, name in enumerate(COUNTER_NAMES):
        raw = cmap.lookup(struct.pack("<I", i), 8 * ncpu)
        out[name] = sum(struct.unpack("<%dQ" % ncpu, raw)) if raw else 0
    return out


def hist_delta(cur, prev):
    """cur - prev of cumulative histograms. The interval's max is exact when
    the cumulative max grew in it; otherwise it is bounded by the top of the
    highest non-empty slot."""
    if prev is None:
        return cur
    slots = [a - b for a, b in zip(cur.slots, prev.slots)]
    mx = cur.max_ns
    if cur.max_ns == prev.max_ns:
        top = max((i for i, c in enumerate(slots) if c), default=None)
        mx = 0 if top is None else min(
            cur.max_ns, int(slot_bounds_us(top)[1] * 1000))
    return Hist(cur.count - prev.count, cur.sum_ns - prev.sum_ns, mx, slots)
