"""The probe table: one place, consistent with the BPF header, and every
16.2 function found exactly once in the installed ceph-osd."""
import os
import re


from cephlat.ceph import probetable
from cephlat.engine.elfsym import ElfSymbols
from cephlat.engine.tracer import COUNTER_NAMES, resolve

from conftest import REPO, header_enum, need

HEADER = open(os.path.join(REPO, "probes", "osdstage.h")).read()

def test_stage_ids_match_header():
    """Every id of probetable.STAGE_IDS is the header's enum value."""
    ids = header_enum("stage_id")
    by_id = {v: k for k, v in probetable.STAGE_IDS.items()}
    fixed = {k: v for k, v in ids.items() if v < ids["ST__FIXED"]}
    for name, v in fixed.items():
        want = "ST_" + by_id[v].lstrip("_").upper().replace(".", "_")
        assert name == want, (name, want)
    for stage, base in probetable.ROLE_STAGES:
        enum = {"offcpu": "ST_ROLE_OFFCPU", "wakeup_delay": "ST_ROLE_WAKEUP",
                "futex_wait": "ST_ROLE_FUTEX"}[stage]
        assert ids[enum] == base == probetable.STAGE_IDS[stage + ".0"]
    assert ids["ST__COUNT"] == probetable.N_STAGE_IDS
    max_stages = int(re.search(r"#define MAX_STAGES\s+(\d+)", HEADER).group(1))
    assert probetable.N_STAGE_IDS <= max_stages == probetable.MAX_STAGES


def test_counter_names_match_header():
    names = [n for n in header_enum("counter_id") if n != "CNT__MAX"]
    assert [n.lower() for n in names] == ["cnt_" + c for c in COUNTER_NAMES]


def test_stage_names_are_the_contract():
    assert list(probetable.STAGES) == [
        "queue_wait", "dequeue_op", "do_op", "get_object_context",
        "bluestore_read", "bluestore_submit", "op_total"]


def test_every_release_covers_every_role():
    roles = {r for s in probetable.STAGES.values() for r in s.roles()}
    for rel in probetable.RELEASES.values():
        assert roles <= set(rel.funcs), rel.key
        for role, f in rel.funcs.items():
            if any(role == r for s in probetable.STAGES.values()
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
