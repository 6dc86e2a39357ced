"""What to attach: the probe table's functions for the wanted stages,
found in a binary (engine/elfsym.py), as uprobes for the tracer."""
from ..ceph import probetable
from ..errors import UserError
from . import probesite


class Plan:
    """What to attach: resolved from a release's table and a binary."""

    def __init__(self):
        self.calls = []          # [(stage, Symbol)]
        self.op_events = []      # [(role, program, Symbol, (arg, deref))]
        self.stages = []         # available stages, in table order
        self.unavailable = {}    # stage -> reason
        self.symbols = {}        # role -> Symbol
        self.sites = {}          # function -> probesite.Site of its probes
        self.regs = {}           # function address -> the argument registers
                                 # (1..N) its op event's program reads

    def probe_count(self):
        return len(self.uprobes())

    def _merged_dequeue(self):
        """The dequeue_op stage starts in the op_dequeue program (same
        function): one probe hit per op instead of two."""
        return any(st == "dequeue_op" for st, _ in self.calls) and any(
            prog == "op_dequeue" for _, prog, _, _ in self.op_events)

    def uprobes(self, stage_ids=None, abi=None):
        """Every uprobe to attach, in attach order (calls, then op events:
        an op is followed only once its calls are): [(program, Symbol,
        cookie, retprobe)]. stage_ids, abi: for the cookies (None: 0)."""
        merged = self._merged_dequeue()
        calls = set(st for st, _ in self.calls)
        out = []
        for stage, sym in self.calls:
            sid = stage_ids[stage] if stage_ids else 0
            st = probetable.STAGES.get(stage)
            if not (merged and stage == "dequeue_op"):
                out.append(("stage_entry", sym, sid, False))
            # without the enclosing call traced, its own return ends it
            if st is None or st.ends_at not in calls:
                out.append(("stage_return", sym, sid, True))
        for role, prog, sym, (arg, deref) in self.op_events:
            cookie = 0
            if abi is not None:
                cookie = arg | (abi.const("OPARG_DEREF") if deref else 0)
                if merged and prog == "op_dequeue":
                    cookie |= abi.const("OPARG_STARTS_DEQUEUE")
            out.append((prog, sym, cookie, False))
        return out

    def single_steps(self):
        """The probed functions whose probe the kernel single-steps (its
        instruction cannot be emulated, and the probe cannot move):
        [(function, instruction)]."""
        return [(f, s.insn) for f, s in self.sites.items() if s.single_step]

    def moved(self):
        """The op events' probes moved past an entry the kernel would
        single-step: [(function, entry instruction, +bytes, instruction)]."""
        return [(f, s.entry_insn, s.offset, s.insn)
                for f, s in self.sites.items() if s.offset]

    @property
    def cet(self):
        """The probed functions start with endbr64 (a CET build)."""
        return any(s.cet for s in self.symbols.values())


def resolve(elf, release, wanted, settings=None, lean=False):
    """Match the release's functions in `elf` for the `wanted` stages.
    settings: the per-release offsets that will be used (stages that need
    one it lacks are unavailable); None: check functions only. lean: the
    lean tier's table (probetable.LEAN: every stage from one program)."""
    table = probetable.LEAN if lean else probetable.STAGES
    plan = Plan()
    missing = {}
    for stage in wanted:
        for role in table[stage].roles() + list(table[stage].also) + \
                [r for r, _, _ in table[stage].extra]:
            if role in plan.symbols or role in missing:
                continue
            func = release.funcs.get(role)
            if func is None:
                missing[role] = "no %s in the probe table for Ceph %s" % (
                    role, release.key)
                continue
            syms = elf.find(func.qualified, func.params)
            if len(syms) == 1:
                plan.symbols[role] = elf.mark_cet(syms[0])
            elif not syms:
                missing[role] = "function %s(%s) not found in %s" % (
                    func.qualified, func.params.pattern.strip("^$"), elf.path)
            else:
                missing[role] = "%s(%s) matches %d functions" % (
                    func.qualified, func.params.pattern.strip("^$"), len(syms))
    seen_events = set()
    for stage in table:
        if stage not in wanted:
            continue
        st = table[stage]
        gone = [r for r in st.roles() if r in missing]
        if gone:
            plan.unavailable[stage] = missing[gone[0]]
            continue
        lacking = [n for n in st.needs if settings is not None and
                   n not in settings]
        if lacking:
            plan.unavailable[stage] = (
                "no checked %s for Ceph %s in the probe table" % (
                    lacking[0], release.key))
            continue
        plan.stages.append(stage)
        if st.kind == "call":
            # and the stage's other functions the binary has (overloads)
            for role in (st.func,) + st.also:
                if role in plan.symbols:
                    plan.calls.append((stage, plan.symbols[role]))
        else:
            for role, ev in st.events:
                if (role, ev) in seen_events:
                    continue
                seen_events.add((role, ev))
                # no op_arg: the program takes the thread's current op
                _add_event(plan, release, role, ev)
            # the events it takes where the binary has their function and
            # the release their offsets (erasure-coded pools' sub-ops)
            for role, ev, needs in st.extra:
                if (role, ev) in seen_events or role not in plan.symbols or \
                        (settings is not None and
                         any(n not in settings for n in needs)):
                    continue
                seen_events.add((role, ev))
                _add_event(plan, release, role, ev)
    _place(elf, plan)
    return plan


def _add_event(plan, release, role, ev):
    func, sym = release.funcs[role], plan.symbols[role]
    # no op_arg: the program takes the thread's current op
    plan.op_events.append((role, ev, sym, func.op_arg or (0, False)))
    if func.regs:
        plan.regs[sym.addr] = tuple(range(1, func.regs + 1))


def _site(elf, sym, arg):
    skip = sym.probe_offset - sym.offset
    code = elf.read_at_vaddr(sym.addr + skip, max(sym.size - skip, 0))
    return probesite.place(code, sym.addr + skip, arg)


def _place(elf, plan):
    """Each probed function's probe site (engine/probesite.py): a call
    stage's stays at the entry (its return probe needs it), and so does an
    op event's on a function that also has one; an op event alone on a
    function whose entry the kernel would single-step moves to the first
    emulated instruction it safely can (before anything writes the
    argument registers its program reads: Plan.regs)."""
    entry = {sym.addr for _, sym in plan.calls}
    for _, sym in plan.calls:
        site = _site(elf, sym, None)
        if site is not None:
            plan.sites[sym.demangled] = site
    for k, (role, ev, sym, arg) in enumerate(plan.op_events):
        if sym.addr in entry:
            continue
        site = _site(elf, sym, plan.regs.get(sym.addr, arg[0]))
        if site is None:
            continue
        plan.sites[sym.demangled] = site
        if site.offset:
            plan.op_events[k] = (role, ev, sym.moved_by(site.offset), arg)



class Choice:
    """The probe table entry used for a binary: `exact` when it is the
    binary's own release; `notice` says why another one was taken."""

    def __init__(self, version, release, exact, notice=None):
        self.version, self.release = version, release
        self.exact, self.notice = exact, notice


def choose_release(elf, version, forced=None, what="ceph-osd"):
    """The probe table entry for `version` (found in the binary) or the
    one forced with --release X.Y. A release newer than the table takes
    the newest entry whose every function resolves in the binary, with a
    notice; an unknown older one is refused."""
    known = probetable.known_releases()
    if forced:
        rel = probetable.release_for(forced) or \
            probetable.RELEASES.get(forced)
        if rel is None:
            raise UserError("Ceph %s has no probe table; known releases: %s"
                            % (forced, known))
        return Choice(version or forced, rel, True)
    if not version:
        raise UserError("cannot tell the Ceph release of %s (no version "
                        "string in its binary, no answer on its admin "
                        "socket); pass --release X.Y (known: %s)" % (
                            what, known))
    rel = probetable.release_for(version)
    if rel is not None:
        return Choice(version, rel, True)
    if not probetable.newer_than_table(version):
        raise UserError("Ceph %s has no probe table; known releases: %s" % (
            version, known))
    for rel in probetable.newest_first():
        if not resolve(elf, rel, list(probetable.STAGES)).unavailable:
            return Choice(version, rel, False, (
                "Ceph %s is newer than the probe table: using the %s (%s) "
                "entry, whose every function resolves in this binary (no "
                "op-class split: its offset is unchecked for this release); "
                "--release X.Y forces one" % (version, rel.key, rel.name)))
    raise UserError("Ceph %s is newer than the probe table and no entry's "
                    "functions all resolve in its binary; known releases: "
                    "%s" % (version, known))
