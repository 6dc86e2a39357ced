"""One source for the contract between probes/osdstage.bpf.c and Python:
build/osdstage.abi.json is what the compiled object says about itself,
the report's names follow from it by the header's naming rules, and the
probe table agrees with it. The last tests are the worked example of
extending it: a new call stage, or a new per-release offset, is a change to
the header / BPF program and the probe table, nothing else."""
import json
import os
import shutil
import subprocess

import pytest

from cephlat import abi
from cephlat.capture import format as capture
from cephlat.ceph import probetable
from cephlat.engine import loadtime, plan
from cephlat.model.roles import Roles
from cephlat.engine.elfsym import ElfSymbols
from cephlat.errors import UserError
from cephlat.model.vocab import Vocab

from conftest import BUILD, PYTHON, REPO, need

OBJ = os.path.join(BUILD, "osdstage.bpf.o")
ABIGEN = os.path.join(REPO, "probes", "abigen.py")


@pytest.fixture(scope="module")
def built():
    need(os.path.exists(OBJ), "BPF objects not built (run: make)")
    return abi.load("osdstage", BUILD)


def _generate(obj):
    p = subprocess.run([PYTHON, ABIGEN, obj], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_abi_file_is_what_the_object_says(built):
    for name in ("osdstage", "rbdrecord"):
        with open(os.path.join(BUILD, name + ".abi.json")) as f:
            assert json.load(f) == _generate(os.path.join(
                BUILD, name + ".bpf.o")), "stale: run make"


def test_report_names_follow_the_header(built):
    v = Vocab(built.enums)
    # names are a contract (docs/stages.md): the header must keep them
    assert v.probed == list(probetable.STAGES)
    assert v.kernel == ["syncfs", "block_rq", "futex_wait", "offcpu",
                        "wakeup_delay"]
    assert v.class_split == ["queue_wait", "op_total", "op_latency"]
    assert v.op_classes == ["read", "write", "other"]
    assert v.attr_parts == ["held", "busy", "lock", "blocked", "signal",
                            "runq", "pickup"]
    assert v.wakes == ["none", "enqueuer", "other", "timeout"]
    assert v.states == ["run", "sleep", "runq", "dead"]
    ids = list(v.stage_ids.values()) + [v.calib_id, v.calib_entry_id]
    assert len(set(ids)) == len(ids)
    assert max(ids) < v.n_ids <= v.max_stages
    assert v.max_stages & (v.max_stages - 1) == 0       # masked with it
    for stage, base in v.role_stages:
        assert [v.stage_ids["%s.%d" % (stage, r)]
                for r in range(v.max_roles)] == list(
                    range(base, base + v.max_roles))


def test_counters_follow_the_header(built):
    v = Vocab(built.enums)
    ids = built.enum("counter_id")
    assert [ids["CNT_" + c.upper()] for c in v.counters] == \
        sorted(ids["CNT_" + c.upper()] for c in v.counters)
    assert max(ids.values()) == ids["CNT__MAX"]
    assert {"events_lost", "op_map_full", "op_unknown"} <= \
        set(v.counters) - v.result_counters
    # the hits by price as the header's markers split them: every hit
    # counter has one, and the rest of the results are the wake-ups, those
    # no program ran for (rebuilt, not lost), and the ops chosen to be
    # sent as traces (and those of them dropped: deliberately, not
    # figures lost)
    assert v.uprobe_hits == ("hit_entry", "hit_return")
    assert v.tp_hits == ("hit_sched", "hit_syscall")
    assert set(v.hits) | {"wake_" + w for w in v.wakers} | {
        "timeouts_with_work", "trace_sample", "trace_slow",
        "trace_over_rate", "trace_ring_full", "wake_unseen"} == \
        v.result_counters
    assert v.wakers == ("enqueuer", "other", "timeout")


def test_every_program_is_attached_by_someone(built):
    op_programs = {prog for s in probetable.STAGES.values()
                   for _, prog in s.events} | \
        {prog for s in probetable.STAGES.values() for _, prog, _ in s.extra}
    # the lean tier's one program serves all its stages
    assert probetable.LEAN_EVENT[1] not in op_programs
    op_programs.add(probetable.LEAN_EVENT[1])
    assert op_programs == {"op_enqueue", "op_dequeue", "op_done", "op_lean",
                           "rep_submit",
                           "rep_reply", "rep_local_commit", "repop_done",
                           "ec_sub_write", "ec_reply", "ec_committed",
                           "ec_read_start", "ec_read_reply", "ec_read_done"}
    kernel = set(loadtime.kernel_programs(built))
    # --on-cpu's, on each CPU's sampling clock
    sampling = set(loadtime.sampling_programs(built))
    assert sampling == {"on_cpu_sample"}
    assert set(built.programs) == {"stage_entry", "stage_return"} | \
        op_programs | kernel | sampling
    assert {built.programs[p].split("/")[0] for p in kernel} == {
        "tp_btf", "tracepoint"}


def test_role_prefixes_fill_the_rodata(built):
    ro = loadtime.rodata_type(built)()
    roles = Roles([("shardq-w", "worker"),
                          ("a-very-long-thread-name", "long")])
    roles.fill(ro)
    assert (ro.roles[0].prefix, ro.roles[0].len, ro.roles[0].role) == (
        b"shardq-w", 8, 1)
    assert ro.roles[1].prefix == b"a-very-long-thr" and ro.roles[1].len == 15
    assert ro.worker_role == 1


def test_thread_state_round_trips_by_name(built):
    ts = built.struct("thread_state")
    raw = ts.pack(role=3, state=1, since=5, cum_sleep=7, queue_cv=0x1230,
                  wakeups=9)
    assert len(raw) == ts.size
    t = ts.unpack(raw)
    assert (t["role"], t["state"], t["since"], t["cum_sleep"],
            t["queue_cv"], t["wakeups"], t["died"]) == (3, 1, 5, 7, 0x1230,
                                                        9, 0)
    with pytest.raises(KeyError):
        ts.pack(no_such_member=1)
    # a snapshot's thread row is read member by member by name
    from cephlat.model.vocab import THREAD_ROW
    members = {m["name"] for m in ts.members}
    assert {m for _, m in THREAD_ROW} <= members
    assert capture.THREAD_FIELDS == tuple(n for n, _ in THREAD_ROW)


# -------------------------------------------------------------------------
# the worked example: adding a call stage

NEW_FUNC = "cephlat_calib_target"       # any function of a small binary


@pytest.fixture(scope="module")
def object_with_a_new_stage(built, tmp_path_factory):
    """probes/ with one enumerator added to enum stage_id, compiled."""
    need(shutil.which("clang") is not None, "clang missing (make setup)")
    d = tmp_path_factory.mktemp("newstage")
    shutil.copytree(os.path.join(REPO, "probes"), str(d / "probes"))
    h = d / "probes" / "osdstage.h"
    text = h.read_text()
    anchor = "\tST__PROBED,"
    assert anchor in text
    h.write_text(text.replace(anchor, "\tST_NEW_CALL,\n" + anchor, 1))
    obj = str(d / "osdstage.bpf.o")
    p = subprocess.run(
        ["clang", "-target", "bpf", "-D__TARGET_ARCH_x86", "-g", "-O2",
         "-Wall", "-Werror", "-I" + BUILD, "-I" + str(d / "probes"), "-c",
         str(d / "probes" / "osdstage.bpf.c"), "-o", obj],
        capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([PYTHON, str(d / "probes" / "abigen.py"), obj],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return abi.Abi(json.loads(p.stdout))


def test_a_new_call_stage_needs_only_the_header_and_the_table(
        built, object_with_a_new_stage, monkeypatch):
    new = object_with_a_new_stage
    v, old = Vocab(new.enums), Vocab(built.enums)
    # the header's new enumerator is a stage, the last probed one, with
    # its id
    assert v.probed == old.probed + ["new_call"]
    assert v.stage_ids["new_call"] == new.const("ST_NEW_CALL")
    # ...that captures label by name
    stage_field = [f for f in capture.event_classes(new, v, ["other"])[0]
                   .fields if f[0] == "stage"][0]
    assert stage_field[2][v.stage_ids["new_call"]] == "new_call"
    # the probe table's entry: how to probe it, per release
    monkeypatch.setitem(probetable.STAGES, "new_call", probetable.Stage(
        "new_call", "call", "a new function entry -> return",
        func="new_call"))
    rel = probetable.Release("x", "example", dict(
        probetable.RELEASES["16.2"].funcs,
        new_call=probetable.Func(NEW_FUNC, r".*")))
    calib = os.path.join(BUILD, "libcephlat_calib.so")
    need(os.path.exists(calib), "build/libcephlat_calib.so missing (make)")
    with ElfSymbols(calib) as elf:
        p = plan.resolve(elf, rel, ["new_call"])
    assert p.stages == ["new_call"] and not p.unavailable
    assert [(s, sym.name) for s, sym in p.calls] == [
        ("new_call", NEW_FUNC)]
    # stage_entry/stage_return time it with its id as the cookie: nothing
    # else in Python or BPF names it


def test_a_new_per_release_offset_is_a_table_entry(built):
    """A release's offsets go into the .rodata globals of the same name
    (declared `const volatile` in osdstage.bpf.c and read by a program);
    a name the object lacks is refused."""
    rel = probetable.Release("x", "example", {}, rmw=(200, 0x2, 0x4),
                             offsets={"rmw_flags_off": 208})
    ro = loadtime.rodata_type(built)()
    loadtime.apply_settings(ro, rel.settings())
    assert (ro.rmw_flags_off, ro.rmw_read_bit, ro.rmw_write_bit) == (
        208, 0x2, 0x4)
    with pytest.raises(UserError):
        loadtime.apply_settings(ro, {"no_such_offset": 8})


def test_shard_and_waker_fields_are_the_headers(built):
    """The shard sums the model names from the vocabulary (attribution
    parts, wakers) are struct shard_stats member by member, and the waker
    counters are in enum counter_id: adding a part or a waker to the
    header adds its shard field and counter everywhere."""
    v = Vocab(built.enums)
    assert v.shard_fields == built.struct("shard_stats").scalars
    assert set(v.waker_counters) <= v.result_counters


def test_device_fields_are_the_headers(built):
    """A capture's snap_dev records (capture/format.py DEV_FIELDS) are
    struct dev_stats member by member, as the live run reads them: a
    member added to the header and not to the capture fails here."""
    assert capture.DEV_FIELDS == built.struct("dev_stats").scalars


def test_every_copy_of_the_headers_names_covers_them(built):
    """Where Python keeps words, colours or kinds for the header's names
    (the wakers of enum wake_kind, the queue-wait parts of ST_ATTR__*,
    the op programs), each name has exactly one entry: a name added to
    the header fails here until it has its words."""
    from cephlat.engine.tracer import StageTracer
    from cephlat.model import queue_words, report
    from cephlat.render import html
    v = Vocab(built.enums)
    assert set(report.WAKER_WORDS) == set(v.wakers)
    assert set(report.ATTR_LABELS) == set(v.attr_parts)
    assert set(html.ATTR_COLOURS) == set(v.attr_parts)
    assert sorted(queue_words.CAUSES + queue_words.NOT_CAUSES) == \
        sorted(v.attr_parts)
    op_programs = {prog for s in probetable.STAGES.values()
                   for _, prog in s.events} | \
        {prog for s in probetable.STAGES.values() for _, prog, _ in s.extra}
    op_programs.add(probetable.LEAN_EVENT[1])
    assert set(StageTracer.OP_KINDS) == op_programs


def test_the_reports_wakers_are_the_vocabularys(built):
    from cephlat.model import report
    from cephlat.model.hist import Hist
    v = Vocab(built.enums)
    hists = {"attr." + p: Hist() for p in v.attr_parts}
    counters = {c: i + 1 for i, c in enumerate(v.waker_counters)}
    _, w = report.attribution(hists, counters, v)
    assert list(w) == list(v.wakers) + ["timeouts_with_work"]
    assert [w[k] for k in w] == [counters[c] for c in v.waker_counters]


def test_a_program_the_build_lacks_is_one_clear_error(built):
    assert built.section("op_done").startswith("uprobe")
    with pytest.raises(UserError) as e:
        built.section("no_such_program")
    assert "older than this code (run: make)" in str(e.value)
    assert "\n" not in str(e.value)
