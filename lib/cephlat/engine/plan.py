"""What to attach: the probe table's functions for the wanted stages,
found in a binary (engine/elfsym.py), as uprobes for the tracer."""
from ..ceph import probetable


class Plan:
    """What to attach: resolved from a release's table and a binary."""

    def __init__(self):
        self.calls = []          # [(stage, Symbol)]
        self.op_events = []      # [(role, program, Symbol, (arg, deref))]
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
    for stage in probetable.STAGES:
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

