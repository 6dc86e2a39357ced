"""The waits of a capture with their stacks (osdstage -w --stacks) and
its samples of the threads on their CPUs (-w --on-cpu), unwound and
named: what -r --folded prints, --slowest lists and the timelines show.

Each wait_stack event holds the sleeper's user registers, the top of its
user stack and its kernel stack as it went to sleep, and the waker's as
it woke it (its user stack only when it is a thread of the target). User
stacks are unwound here (unwind.py) from the files the target mapped
(the capture's "mapping" events), found on this host by path and checked
by build id (a container's files through /proc/PID/root while it runs);
names come from each file's own symbols (.dynsym, .symtab where kept: no
debug package needed). Kernel addresses are named from /proc/kallsyms
when this is the boot that recorded them (the kernel's text address
matches), else shown as addresses.
"""
import bisect
import os
import platform
import tempfile

from ..engine.elfsym import ElfSymbols
from ..model.report import UNSEEN_WAKER
from .unwind import (COPY, END, VDSO, Mapping, Stack, Unwinder, build_id,
                     vdso_image)

# a kernel frame's mark in folded stacks (as flame graphs colour them)
KERNEL = "_[k]"
# between the sleeper's stack and the waker's, as offwaketime prints it
WAKER = "--"
# the waker's stack of a wait whose wake-up no probe saw
UNSEEN_FRAME = "[waker unseen]"


# a thread in a breakpoint's trap: a uprobe's (the kernel's entry for it);
# its ip is past the int3 until the uprobe's handling on the way back to
# user space (handle_swbp, in uprobe_notify_resume) has found the uprobe
# and set it back to the breakpoint's address: from the probes' programs
# (handler_chain) on, or the return probes' trampoline's handling; where
# the kernel's frames do not tell (uprobe_notify_resume alone), the ip that
# unwinds to the thread's root
TRAP = "asm_exc_int3"
TRAP_IP_RESET = ("handler_chain", "pre_ssout", "arch_uprobe_skip_sstep",
                 "arch_uprobe_optimize", "handle_trampoline",
                 "uprobe_handle_trampoline")
# the probes' own kernel frames on top of a stack taken at a tracepoint
# (the tracepoint's run of the BPF program, the program): not the thread's
TRACING = ("bpf_trace_run", "__bpf_trace_", "__traceiter_")


class Frame:
    """One frame: its address, file (None: kernel or unknown), the
    address in that file, and its function's name (None: unknown)."""
    __slots__ = ("pc", "path", "vaddr", "name", "cfa")

    def __init__(self, pc, path, name, vaddr=None, cfa=None):
        self.pc, self.path, self.name, self.vaddr = pc, path, name, vaddr
        self.cfa = cfa

    def label(self):
        if self.name:
            return self.name
        if self.path:
            return "%s+0x%x" % (os.path.basename(self.path),
                                self.vaddr if self.vaddr is not None
                                else self.pc)
        return "0x%x" % self.pc


class Wait:
    """One wait: ts (its wake-up, capture ns), tid, role (its name),
    kind (the sleep's: lock, work, ...), off_ns, the sleeper's user and
    kernel frames (innermost first), why its user unwind stopped, the
    waker's tid (0: not the target's) and frames, and whether its wake-up
    was unseen (no waker known)."""
    __slots__ = ("ts", "tid", "role", "kind", "off_ns", "user", "kernel",
                 "stopped", "waker_tid", "waker_user", "waker_kernel",
                 "unseen")

    def __init__(self):
        self.unseen = False

    def folded(self, waker=True):
        """Its folded stack: role, the sleeper's user frames from the
        thread's root down, its kernel frames, and (`waker`) the waker's
        from where it woke the sleeper up to its root (offwaketime's
        order; UNSEEN_FRAME for a wake-up no probe saw)."""
        parts = [self.role or "?"]
        if self.stopped != END and self.user:
            parts.append("[unwind: %s]" % self.stopped)
        parts += [f.label() for f in reversed(self.user)]
        parts += [f.label() + KERNEL for f in reversed(self.kernel)]
        if waker and self.unseen:
            parts += [WAKER, UNSEEN_FRAME]
        elif waker and (self.waker_kernel or self.waker_user):
            parts.append(WAKER)
            parts += [f.label() + KERNEL for f in self.waker_kernel]
            parts += [f.label() for f in self.waker_user]
        return ";".join(p.replace(";", ":") for p in parts)


class Sample:
    """A thread found on a CPU by the sampling clock: ts, tid, role (its
    name), in_op (running an op), its user and kernel frames (innermost
    first) and why its user unwind stopped."""
    __slots__ = ("ts", "tid", "role", "in_op", "user", "kernel", "stopped")

    def folded(self):
        """Role, the user frames from the thread's root, the kernel's."""
        parts = [self.role or "?"]
        if self.stopped != END and self.user:
            parts.append("[unwind: %s]" % self.stopped)
        parts += [f.label() for f in reversed(self.user)]
        parts += [f.label() + KERNEL for f in reversed(self.kernel)]
        return ";".join(p.replace(";", ":") for p in parts)


class KernelSymbols:
    """/proc/kallsyms, when this boot's kernel text is where the capture's
    was (`stext`, its env's kernel_stext); else no names."""

    def __init__(self, stext):
        self.addrs, self.names = [], []
        self.why = None
        try:
            rows = []
            with open("/proc/kallsyms") as f:
                for line in f:
                    a, t, name = line.split()[:3]
                    if t in "tTwW":
                        rows.append((int(a, 16), name))
        except (OSError, ValueError) as e:
            self.why = "/proc/kallsyms: %s" % e
            return
        rows.sort()
        here = next((a for a, n in rows if n == "_stext"), 0)
        # past the kernel's text (BPF programs, trampolines): no name
        self.end = next((a for a, n in rows if n == "_etext"), 0)
        self.init_end = next((a for a, n in rows if n == "_einittext"), 0)
        if not here or not rows[0][0]:
            self.why = "/proc/kallsyms hides its addresses (not root?)"
        elif stext and here != stext:
            self.why = "the kernel was booted again since the capture"
        else:
            self.addrs = [a for a, _ in rows]
            self.names = [n for _, n in rows]

    def name(self, pc):
        i = bisect.bisect_right(self.addrs, pc) - 1
        if i < 0 or self.names[i] in ("_etext", "_einittext"):
            return None
        return self.names[i]


class Files:
    """The capture's mapped files found on this host: path -> the path
    to open (None: not found, or not the same build). The vDSO is this
    process's own when this host runs the kernel release that recorded
    (`kernel`), copied to a file of ours for the time of the reading."""

    def __init__(self, mappings, pid, kernel=None):
        self.pid = pid
        self.kernel = kernel
        self.temp = []
        self.want = {}
        for m in mappings:
            self.want.setdefault(m["path"], m["build_id"])
        self.found = {}
        self.symbols = {}
        self.missing = []       # not at hand, and frames fell in them

    def close(self):
        for p in self.temp:
            try:
                os.unlink(p)
            except OSError:
                pass
        self.temp = []

    def _vdso(self):
        if self.kernel != platform.release():
            return None
        fd, p = tempfile.mkstemp(prefix="osdstage-vdso-")
        os.close(fd)
        self.temp.append(p)
        try:
            return vdso_image(p)
        except OSError:
            return None

    def local(self, path):
        if path == VDSO:
            if path not in self.found:
                self.found[path] = self._vdso()
            return self.found[path]
        if path not in self.found:
            bid = self.want.get(path)
            got = None
            for cand in (path, "/proc/%d/root%s" % (self.pid, path)):
                b = build_id(cand)
                if b is not None and (not bid or b == bid):
                    got = cand
                    break
            self.found[path] = got
        return self.found[path]

    def name(self, path, vaddr):
        local = self.local(path)
        if local is None or vaddr is None:
            return None
        syms = self.symbols.get(local)
        if syms is None:
            try:
                syms = ElfSymbols(local, debug=True)
            except Exception:       # noqa: BLE001 (any unreadable file)
                syms = False
            self.symbols[local] = syms
        return syms.function_at(vaddr) if syms else None


class StackReader:
    """Unwinds and names the stacks of one capture slot's waits."""

    def __init__(self, cap):
        self.cap = cap
        self.files = Files(cap.mappings, int(cap.pid or 0),
                           cap.env.get("kernel"))
        self.wanted = {}        # start -> the capture's path of a file
        #                         not at hand (frames fell in it)
        maps = []
        for m in cap.mappings:
            local = self.files.local(m["path"])
            if local is None:
                self.wanted[m["start"]] = m["path"]
            maps.append(Mapping(m["start"], m["end"], m["offset"], local))
        self.unwinder = Unwinder(maps)
        stext = cap.env.get("kernel_stext") or ""
        self.ksyms = KernelSymbols(int(stext, 16) if stext else 0)
        # a worker sleeps and is woken in a few places, over and over:
        # each kernel stack and each user frame's name is looked up once
        # (their Frames are shared, never changed)
        self._kstacks = {}
        self._names = {}

    def close(self):
        self.unwinder.close()
        for s in self.files.symbols.values():
            if s:
                s.close()
        self.files.close()

    def _user_over(self, e, kernel, pre=""):
        """_user's frames of a thread whose kernel frames are `kernel`:
        in a uprobe's trap, from the probed instruction."""
        names = {f.name for f in kernel}
        if TRAP not in names:
            return self._user(e, pre)
        trap = not names.intersection(TRAP_IP_RESET)
        got = self._user(e, pre, trap)
        if got[1] != END:
            other = self._user(e, pre, not trap)
            if other[1] == END:
                return other
        return got

    def _user(self, e, pre="", trap=False):
        """The user frames of event e's sleeper (pre "") or waker (pre
        "waker_"); `trap`: it was in a breakpoint's trap with its ip past
        the int3 (a uprobe's, the instruction there not run yet)."""
        ip, sp, bp = (int(e[pre + k]) for k in ("ip", "sp", "bp"))
        if not ip:
            return [], END
        if trap:
            ip -= 1
        n = int(e[pre + "urets"])
        returns = dict(zip(e[pre + "uret_slot"][:n].tolist(),
                           e[pre + "uret_addr"][:n].tolist()))
        data = e[pre + "ustack"][:int(e[pre + "ubytes"])].tobytes()
        frames, why = self.unwinder.unwind(ip, sp, bp,
                                           Stack(sp, data, returns))
        out = []
        for pc, m, vaddr, cfa in frames:
            if m is not None and m.path is None:
                gone = self.wanted[m.start]
                if gone not in self.files.missing:
                    self.files.missing.append(gone)
            path = m.path if m is not None else None
            named = self._names.get((path, vaddr))
            if named is None:
                orig = self._orig(path)
                named = self._names[(path, vaddr)] = (
                    orig, self.files.name(orig, vaddr) if path else None)
            out.append(Frame(pc, named[0], named[1], vaddr, cfa))
        return out, why

    def _orig(self, local):
        """The capture's path of a file opened here as `local`."""
        if local is None:
            return None
        for p, got in self.files.found.items():
            if got == local:
                return p
        return local

    def _kernel(self, addrs):
        """Kernel frames, innermost first, the probes' own left out."""
        key = tuple(addrs)
        got = self._kstacks.get(key)
        if got is None:
            frames = [Frame(a, None, self.ksyms.name(a)) for a in addrs]
            cut = max((i for i, f in enumerate(frames)
                       if f.name and f.name.startswith(TRACING)), default=-1)
            got = self._kstacks[key] = frames[cut + 1:]
        return list(got)

    def _labels(self, name):
        """{field: labels} of event class `name` (None: not in the
        capture)."""
        cls = next((c for c in self.cap.trace.classes.values()
                    if c.name == "osdstage:" + name), None)
        return None if cls is None else {n: lab for n, _, lab in cls.fields}

    def samples(self, t0=None, t1=None, role=None):
        """The slot's samples on a CPU in [t0, t1] (of role name `role`
        only, if given) -> [Sample], in time order."""
        out = []
        for e, rname, _ in self._events("cpu_sample", t0, t1, role):
            s = Sample()
            s.ts, s.tid, s.role = int(e["_ts"]), int(e["tid"]), rname
            s.in_op = bool(e["in_op"])
            s.kernel = self._kernel(e["kstack"][:int(e["kframes"])].tolist())
            s.user, s.stopped = self._user_over(e, s.kernel)
            out.append(s)
        out.sort(key=lambda s: s.ts)
        _stitch(out)
        return out

    def _events(self, name, t0, t1, role):
        """The slot's events of class `name` in [t0, t1] (of role name
        `role` only, if given) -> (record, its role's name, the class's
        {field: labels})"""
        labels = self._labels(name)
        if labels is None:
            return
        roles = labels["role"] or []
        for ch in self.cap.chunks((name,), t0, t1):
            for r in ch.recs.values():
                for e in r:
                    rname = roles[e["role"]] if e["role"] < len(roles) \
                        else None
                    if role is None or rname == role:
                        yield e, rname, labels

    def waits(self, t0=None, t1=None, role=None):
        """The slot's waits with stacks in [t0, t1] (of role name `role`
        only, if given) -> [Wait], in time order."""
        out = []
        for e, rname, labels in self._events("wait_stack", t0, t1, role):
            kinds = labels["sleep"]
            w = Wait()
            w.ts, w.tid, w.role = int(e["_ts"]), int(e["tid"]), rname
            w.kind = kinds[e["sleep"]] if kinds and \
                e["sleep"] < len(kinds) else str(int(e["sleep"]))
            w.off_ns = int(e["offcpu_ns"])
            w.kernel = self._kernel(e["kstack"][:int(e["kframes"])].tolist())
            w.user, w.stopped = self._user_over(e, w.kernel)
            w.waker_tid = int(e["waker_tid"])
            # (captures from before it have no such field)
            w.unseen = "unseen" in e.dtype.names and bool(e["unseen"])
            w.waker_kernel = self._kernel(
                e["waker_kstack"][:int(e["waker_kframes"])].tolist())
            w.waker_user, _ = self._user_over(e, w.waker_kernel, "waker_")
            out.append(w)
        out.sort(key=lambda w: w.ts)
        _stitch(out)
        return out


def _stitch(waits):
    """A thread's unwind cut short by its copy of the stack (a deep
    stack) ends in a frame that a whole unwind of the same thread may
    hold too, at the same place on the stack (its pc and CFA: the same
    call, still running): from there on they are the same frames, taken
    from that one. (Waits or samples.)"""
    whole = {}
    for w in waits:
        if w.stopped == END:
            for i, f in enumerate(w.user):
                if f.cfa is not None:
                    whole.setdefault((w.tid, f.pc, f.cfa), w.user[i + 1:])
    for w in waits:
        if w.stopped == COPY and w.user:
            last = w.user[-1]
            rest = whole.get((w.tid, last.pc, last.cfa))
            if rest is not None:
                w.user = w.user + rest
                w.stopped = END


# an op's wait in --slowest: its innermost user frames at most (the rest
# is the worker's loop, the same for every op), and the waker's
OP_FRAMES = 8
WAKER_FRAMES = 4


def has_stacks(cap, kind="wait_stack"):
    """Whether capture slot `cap` recorded stacks: of waits (-w --stacks;
    `kind` "wait_stack") or of samples on a CPU (-w --on-cpu;
    "cpu_sample")."""
    return bool(cap.mappings) and any(
        c.name == "osdstage:" + kind and c.id < cap.n_bpf
        for c in cap.trace.classes.values())


def _labels(frames, n):
    return [f.label() for f in frames[:n]]


def op_waits(waits, tid, start, end, enq_ns, comm):
    """The waits of thread `tid` (a Wait list, in time order) asleep
    within [start, end] (capture ns; an op's span on its worker) as
    JSON-able dicts: when it fell asleep (us from `enq_ns`), how long,
    its kind, its innermost user frames (else kernel ones), and the
    waker: its thread (comm(tid)) and its innermost user frames (else
    the kernel's)."""
    out = []
    for w in waits:
        a = w.ts - w.off_ns
        if w.tid != tid or a < start or w.ts > end:
            continue
        d = {"at_us": round((a - enq_ns) / 1000, 1),
             "us": round(w.off_ns / 1000, 1), "kind": w.kind,
             "frames": _labels(w.user, OP_FRAMES) or
             [f.label() + KERNEL for f in w.kernel[:OP_FRAMES]]}
        if w.stopped != END:
            d["unwind"] = w.stopped
        d["waker_tid"] = w.waker_tid or None
        d["waker"] = comm(w.waker_tid) if w.waker_tid else None
        if w.unseen:
            d["unseen"] = True
        d["waker_frames"] = _labels(w.waker_user, WAKER_FRAMES) or \
            [f.label() + KERNEL for f in w.waker_kernel[:WAKER_FRAMES]]
        out.append(d)
    return out


def sleep_notes(waits, tids, comm, frames=16):
    """The timeline's sleeps of threads `tids` with their stacks (-w
    --stacks): [{"tid", "start", "end" (capture ns), "kind", "stack" (the
    innermost frames first, "a < b < c"), "waker"}], what --perfetto and
    --html show on those sleeps."""
    out = []
    for w in waits:
        if w.tid not in tids:
            continue
        stack = _labels(w.user, frames) or \
            [f.label() + KERNEL for f in w.kernel[:frames]]
        waker = _labels(w.waker_user, WAKER_FRAMES) or \
            [f.label() + KERNEL for f in w.waker_kernel[:WAKER_FRAMES]]
        who = UNSEEN_WAKER if w.unseen else "%s (%d)" % (
            comm(w.waker_tid), w.waker_tid) if w.waker_tid else \
            "outside the OSD"
        out.append({"tid": w.tid, "start": w.ts - w.off_ns, "end": w.ts,
                    "kind": w.kind, "stack": " < ".join(stack),
                    "waker": who + (": " + " < ".join(waker)
                                    if waker else "")})
    return out


def folded(waits, waker=True):
    """Folded stacks (flame-graph input) of `waits`: {stack: us asleep},
    the waits of one stack summed."""
    out = {}
    for w in waits:
        k = w.folded(waker)
        out[k] = out.get(k, 0) + w.off_ns / 1000.0
    return out


def folded_samples(samples):
    """Folded stacks of samples on a CPU: {stack: samples}."""
    out = {}
    for s in samples:
        k = s.folded()
        out[k] = out.get(k, 0) + 1
    return out


# the system's libraries: where every wait and much work ends, not what
# an operator acts on; a summary names the first frame outside them
SYSTEM = ("libc.so", "libstdc++", "libpthread", "libgcc_s", "ld-linux",
          VDSO)
# frames a summary row names (the innermost first), rows it keeps
WHERE_FRAMES = 3
TOP = 5
# the OSD's locks by the innermost frame outside the system's libraries
# of a lock wait: PG::lock is a function of its own in Ceph's builds (a
# wait for a PG's lock has it on its stack); the shard's worker loop
# takes the shard's own mutexes inline (its queue's lock, the lock of its
# wait for work, its queue of completions'), so a lock wait there, with
# no PG::lock above it, is one of those
LOCKS = {
    "PG::lock": "the PG's lock",
    "OSD::ShardedOpWQ::_process": "the shard's own locks",
}


def _system(f):
    return f.path is not None and os.path.basename(f.path).startswith(
        SYSTEM)


def where(frames, n=WHERE_FRAMES):
    """The innermost `n` frames outside the system's libraries (the
    first n of all when every frame is theirs) -> [label]"""
    own = [f for f in frames if not _system(f)]
    return [f.label() for f in (own or frames)[:n]]


def lock_name(kind, where_):
    """A lock wait's lock, named from where it slept (LOCKS) -> str, or
    None (another kind of wait, or a place not known)."""
    return LOCKS.get(where_[0]) if kind == "lock" and where_ else None


def wait_summary(waits, top=TOP):
    """A window's waits with stacks summed by role, kind, where they
    slept (where()) and who woke them: the `top` by time asleep, as
    JSON-able dicts (a lock wait's with its lock's name where known;
    waker_is_osd None: waits whose wake-up no probe saw)."""
    rows = {}
    for w in waits:
        waker = (w.waker_user and where(w.waker_user, 1)) or \
            [f.label() + KERNEL for f in w.waker_kernel[:1]]
        key = (w.role, w.kind, tuple(where(w.user)) or tuple(
            f.label() + KERNEL for f in w.kernel[:WHERE_FRAMES]),
            None if w.unseen else w.waker_tid != 0, tuple(waker))
        us, n = rows.get(key, (0.0, 0))
        rows[key] = (us + w.off_ns / 1000.0, n + 1)
    out = [{"role": k[0], "kind": k[1], "where": list(k[2]),
            "lock": lock_name(k[1], k[2]),
            "woken_by": list(k[4]), "waker_is_osd": k[3],
            "us": round(us, 1), "waits": n}
           for k, (us, n) in rows.items()]
    return sorted(out, key=lambda r: -r["us"])[:top]


def cpu_summary(samples, top=TOP):
    """A window's samples on a CPU summed by role and the function
    running (the innermost user frame; a kernel one when the clock found
    it in the kernel), with the first caller outside the system's
    libraries: the `top` by samples, each with its share of its role's,
    as JSON-able dicts."""
    rows, per_role = {}, {}
    for s in samples:
        fn = s.kernel[0].label() + KERNEL if s.kernel else \
            s.user[0].label() if s.user else "?"
        own = where(s.user, 1)
        key = (s.role, fn, own[0] if own and own[0] != fn else None)
        rows[key] = rows.get(key, 0) + 1
        per_role[s.role] = per_role.get(s.role, 0) + 1
    out = [{"role": k[0], "function": k[1], "from": k[2], "samples": n,
            "role_pct": round(100.0 * n / per_role[k[0]], 1)}
           for k, n in rows.items()]
    return sorted(out, key=lambda r: -r["samples"])[:top]


def top_wait(waits, role, kinds):
    """Where the threads of `role` slept longest in their waits of
    `kinds` (a wait_summary row: where they slept, who woke them) with
    "share", its part of all those waits' time asleep -> dict or None
    (no such wait)."""
    ws = [w for w in waits if w.role == role and w.kind in kinds]
    total = sum(w.off_ns for w in ws)
    if not total:
        return None
    row = wait_summary(ws, top=1)[0]
    row["share"] = round(1000.0 * row["us"] / total, 3)
    return row


def lock_shares(waits, role):
    """The threads of `role`'s lock waits' time asleep by the lock named
    (LOCKS; the unnamed left out) -> {name: share of all their lock
    waits' time}, the largest first, or None (no lock wait)."""
    ws = [w for w in waits if w.role == role and w.kind == "lock"]
    total = sum(w.off_ns for w in ws)
    if not total:
        return None
    by = {}
    for w in ws:
        name = lock_name("lock", where(w.user, 1))
        if name:
            by[name] = by.get(name, 0) + w.off_ns
    return {k: round(v / total, 3)
            for k, v in sorted(by.items(), key=lambda kv: -kv[1])}


def top_cpu(samples, role):
    """What the threads of `role` ran most: their samples on a CPU summed
    by the innermost frame outside the system's libraries (where the
    time went in the code an operator can act on: the system's libraries
    and the kernel under it count for it; a sample with no user frame,
    by its kernel frame) -> {"function", "samples", "share" (of the
    role's samples), "kernel_share" (of its own, found in the kernel)}
    or None (no sample)."""
    rows = {}
    mine = [s for s in samples if s.role == role]
    for s in mine:
        own = where(s.user, 1)
        fn = own[0] if own else s.kernel[0].label() + KERNEL \
            if s.kernel else "?"
        n, k = rows.get(fn, (0, 0))
        rows[fn] = (n + 1, k + bool(s.kernel))
    if not rows:
        return None
    fn, (n, k) = max(rows.items(), key=lambda kv: kv[1][0])
    return {"function": fn, "samples": n,
            "share": round(n / len(mine), 3),
            "kernel_share": round(k / n, 3)}
