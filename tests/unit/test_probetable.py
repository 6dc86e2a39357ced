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
        "queue_wait", "dequeue_op", "do_op", "get_object_context",
        "bluestore_read", "bluestore_submit", "op_total", "replica_wait",
        "local_commit", "repop"]


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
