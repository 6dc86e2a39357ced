"""The probe table: one place, and every 16.2 function found exactly once
in the installed ceph-osd (its agreement with the BPF header is
tests/unit/test_abi.py's)."""
import os

from cephlat.ceph import probetable
from cephlat.engine.elfsym import ElfSymbols
from cephlat.engine.plan import resolve

from conftest import need

def test_stage_names_are_the_contract():
    assert list(probetable.STAGES) == [
        "throttle_wait", "recv", "dispatch",
        "queue_wait", "dequeue_op", "do_op", "get_object_context",
        "bluestore_read", "bluestore_submit", "op_total", "execute",
        "op_latency", "replica_wait", "local_commit", "repop", "shard_read",
        "recovery", "scrub", "snap_trim", "pg_delete"]
    # the header marks the background stages (ST__BACKGROUND)
    from cephlat.model import vocab
    assert vocab.live().background == ["recovery", "scrub", "snap_trim",
                                       "pg_delete"]


def test_messenger_stages_are_the_enqueue_events_fields():
    """The messenger stages come with op_enqueue (no probe of their own)
    and its capture event carries one <stage>_ns field each."""
    from cephlat import abi
    ev = abi.load("osdstage").struct("ev_op_enqueue")
    names = [m["name"] for m in ev.members if m["name"].endswith("_ns")]
    assert names == [s + "_ns" for s in probetable.MESSENGER_STAGES]
    for s in probetable.MESSENGER_STAGES:
        st = probetable.STAGES[s]
        assert st.events == [("enqueue_op", "op_enqueue")]
        assert "msg_stamps_off" in st.needs


def test_every_release_covers_every_role():
    roles = {r for s in probetable.STAGES.values() for r in s.roles()}
    for rel in probetable.RELEASES.values():
        assert roles <= set(rel.funcs), rel.key
        for role, f in rel.funcs.items():
            # rep_submit's program takes the op its thread is executing
            if role != "rep_submit" and any(
                    role == r for s in probetable.STAGES.values()
                    if s.kind == "op" for r, _ in s.events):
                assert f.op_arg is not None, (rel.key, role)


def test_release_lookup():
    assert probetable.release_for("16.2.15").name == "pacific"
    assert probetable.release_for("19.2.0").name == "squid"
    assert probetable.release_for("14.2.22") is None
    assert probetable.release_for(None) is None


def test_get_object_context_pattern_accepts_both_comparators():
    f = probetable.RELEASES["18.2"].funcs["get_object_context"]
    pacific = ("hobject_t const&, bool, std::map<std::__cxx11::basic_string"
               "<char>, ceph::buffer::v15_2_0::list, std::less<std::__cxx11::"
               "basic_string<char> >, std::allocator<int> > const*")
    assert f.params.search(pacific)
    assert f.params.search(pacific.replace(
        "std::less<std::__cxx11::basic_string<char> >", "std::less<void>"))


def test_pacific_table_resolves_on_the_installed_binary():
    need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed "
         "(make setup)")
    rel = probetable.RELEASES["16.2"]
    with ElfSymbols("/usr/bin/ceph-osd") as elf:
        plan = resolve(elf, rel, list(probetable.STAGES))
        assert plan.unavailable == {}
        assert plan.stages == list(probetable.STAGES)
        for role, f in rel.funcs.items():
            assert len(elf.find(f.qualified, f.params)) == 1, role


def test_scrub_probes_both_overloads_where_the_binary_has_them():
    """The scrub stage is PG::forward_scrub_event's two overloads (issue
    25: the one with an act token carries the scrub machine's replies):
    an entry and a return probe on each; a binary without the second
    still has the stage, on the first alone."""
    need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed "
         "(make setup)")
    rel = probetable.RELEASES["16.2"]
    with ElfSymbols("/usr/bin/ceph-osd") as elf:
        plan = resolve(elf, rel, ["scrub"])
        sites = [sym for st, sym in plan.calls if st == "scrub"]
        assert len(sites) == 2 and sites[0].addr != sites[1].addr
        assert [p for p, sym, _, ret in plan.uprobes() if sym in sites] == [
            "stage_entry", "stage_return"] * 2
        funcs = dict(rel.funcs)
        funcs["scrub_event_token"] = probetable.Func(
            "PG::no_such_overload", r"^$")
        older = probetable.Release("16.2", "pacific", funcs)
        plan = resolve(elf, older, ["scrub"])
        assert plan.stages == ["scrub"] and plan.unavailable == {}
        assert [sym.addr for st, sym in plan.calls] == [sites[0].addr]


def test_default_stages_leave_out_what_few_need():
    """Without -S: every stage but do_op and get_object_context (a probe
    hit each per op; the background stages hit per background item,
    none per client op); -S all: every stage; a stage ended by another's
    return brings that stage."""
    assert probetable.wanted_stages(None) == [
        "throttle_wait", "recv", "dispatch", "queue_wait", "dequeue_op",
        "bluestore_read", "bluestore_submit",
        "op_total", "execute", "op_latency", "replica_wait",
        "local_commit", "repop", "shard_read",
        "recovery", "scrub", "snap_trim", "pg_delete"]
    assert probetable.wanted_stages("all") == list(probetable.STAGES)
    assert probetable.wanted_stages(["do_op"]) == ["dequeue_op", "do_op"]
    assert probetable.wanted_stages(["get_object_context"]) == [
        "get_object_context"]


def _uprobes(stages):
    need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed "
         "(make setup)")
    from cephlat import abi
    from cephlat.model import vocab
    rel = probetable.RELEASES["16.2"]
    with ElfSymbols("/usr/bin/ceph-osd") as elf:
        plan = resolve(elf, rel, probetable.wanted_stages(stages),
                       rel.settings())
    ids = vocab.live().stage_ids
    return plan, [(prog, s.name, c, r) for prog, s, c, r in
                  plan.uprobes(ids, abi.load("osdstage"))], ids


def test_a_read_costs_six_probe_hits_by_default():
    """The default plan's probes on a 4 KiB read's path: enqueue_op,
    dequeue_op (one program starts both queue_wait's end and the
    dequeue_op stage), BlueStore::read entry and return, log_op_stats,
    dequeue_op's return: 6 hits."""
    from cephlat import abi
    a = abi.load("osdstage")
    plan, probes, ids = _uprobes(None)
    read_path = {"enqueue_op", "dequeue_op", "bluestore_read",
                 "log_op_stats"}
    roles = {sym.name: role for role, sym in plan.symbols.items()}
    hits = [p for p in probes if roles[p[1]] in read_path]
    assert len(hits) == 6, hits
    deq = [p for p in probes if roles[p[1]] == "dequeue_op"]
    assert sorted((prog, r) for prog, _, _, r in deq) == [
        ("op_dequeue", False), ("stage_return", True)]
    # the op program starts the call stage: its cookie says so
    (cookie,) = [c for prog, _, c, _ in deq if prog == "op_dequeue"]
    assert cookie & a.const("OPARG_STARTS_DEQUEUE")
    assert plan.probe_count() == len(probes)


def test_do_op_ends_at_dequeue_op_return():
    plan, probes, ids = _uprobes(["do_op"])
    roles = {sym.name: role for role, sym in plan.symbols.items()}
    got = sorted((roles[n], prog, r) for prog, n, c, r in probes
                 if roles[n] in ("do_op", "dequeue_op"))
    # do_op: an entry probe only; dequeue_op's entry is a stage_entry
    # here (queue_wait's op_dequeue is not wanted)
    assert got == [("dequeue_op", "stage_entry", False),
                   ("dequeue_op", "stage_return", True),
                   ("do_op", "stage_entry", False)]


def test_the_lean_tier_is_one_probe_on_log_op_stats():
    """--lean: every lean stage from one program on log_op_stats, one
    probe in all; a release without a checked dequeue-stamp offset has
    none of them, for that reason."""
    need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed "
         "(make setup)")
    from cephlat import abi
    from cephlat.model import vocab
    rel = probetable.RELEASES["16.2"]
    assert set(probetable.LEAN_STAGES) <= set(probetable.STAGES)
    with ElfSymbols("/usr/bin/ceph-osd") as elf:
        plan = resolve(elf, rel, probetable.LEAN_STAGES, rel.settings(),
                       lean=True)
        assert plan.stages == list(probetable.LEAN_STAGES)
        assert plan.unavailable == {}
        probes = plan.uprobes(vocab.live().stage_ids, abi.load("osdstage"))
        assert [(prog, sym.demangled.split("(")[0], ret)
                for prog, sym, _, ret in probes] == [
            ("op_lean", "PrimaryLogPG::log_op_stats", False)]
        unchecked = dict(rel.settings())
        del unchecked["deq_time_off"]
        plan = resolve(elf, rel, probetable.LEAN_STAGES, unchecked,
                       lean=True)
        assert plan.stages == [] and plan.uprobes() == []
        assert set(plan.unavailable) == set(probetable.LEAN_STAGES)
        assert "deq_time_off" in plan.unavailable["queue_wait"]
    # every release with a checked table has the lean tier's offsets
    for r in probetable.RELEASES.values():
        if r.verified:
            assert set(probetable.LEAN_NEEDS) <= set(r.settings()), r.key


def test_erasure_coded_events_come_where_the_release_has_their_offsets():
    """The replica stages take the erasure-coded pools' events as
    extras: on Pacific's binary with its checked offsets, each
    once; without the offsets the stages stand, without those events."""
    need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed "
         "(make setup)")
    rel = probetable.RELEASES["16.2"]
    stages = ["replica_wait", "local_commit", "repop"]
    ec = {"ec_sub_write", "ec_reply", "ec_committed"}
    with ElfSymbols("/usr/bin/ceph-osd") as elf:
        plan = resolve(elf, rel, stages, rel.settings())
        pairs = [(role, ev) for role, ev, _, _ in plan.op_events]
        assert ec <= {ev for _, ev in pairs}, pairs
        assert len(pairs) == len(set(pairs)), pairs
        # rep_submit serves both backends' submit_transaction
        submits = {sym.demangled.split("(")[0] for role, ev, sym, _ in
                   plan.op_events if ev == "rep_submit"}
        assert submits == {"ReplicatedBackend::submit_transaction",
                           "ECBackend::submit_transaction"}
        # the programs read several argument registers: the probes move
        # only past what writes none of them (16.2's all start with a
        # push: they stay)
        for role, ev, sym, _ in plan.op_events:
            if ev in ec:
                assert plan.regs[sym.addr] == tuple(
                    range(1, rel.funcs[role].regs + 1)), (ev, plan.regs)
                assert sym.probe_offset == sym.offset, (ev, sym)
        settings = {k: v for k, v in rel.settings().items()
                    if not k.startswith("ec")}
        plan = resolve(elf, rel, stages, settings)
        assert plan.stages == stages and plan.unavailable == {}
        assert not ec & {ev for _, ev, _, _ in plan.op_events}
    # the same offsets on every release the labs run (checked against each
    # one's DWARF): Ceph's EC message structs did not move
    ec_offsets = [{k: v for k, v in probetable.RELEASES[r].settings().items()
                   if k.startswith("ec")} for r in ("16.2", "18.2", "20.2")]
    assert ec_offsets[0] and ec_offsets[1:] == ec_offsets[:1] * 2
