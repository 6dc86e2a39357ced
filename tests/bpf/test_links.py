"""BPF tier: how the tracer attaches its uprobes. With uprobe_multi (Linux
>= 6.6) one link per (program, target, direction) holds all that program's
functions in that process, so a duty cycle's detach waits for one RCU
grace period per link instead of one per function; without it (the
fallback) one classic link per function. Either way, attaching and
detaching again and again leaves the counts exact.

The controlled program is tests/bpf/progs/opqueue.cc (two processes at
once), with its three op events plus two call stages on functions each
op calls once, so that stage_entry and stage_return each hold two
functions per process. The kernel's own view of the links is read back
from /proc/self/fdinfo (link_type, pid, uprobe_cnt, cookies)."""
import contextlib
import os
import subprocess

import pytest

from cephlat.engine import bpfsys
from cephlat.engine.elfsym import ElfSymbols
from cephlat.engine.plan import resolve
from cephlat.engine.tracer import StageTracer
from cephlat.errors import UserError
from test_opqueue import SIM

HERE = os.path.dirname(os.path.abspath(__file__))
N_OPS = (40, 70)          # per process: known, different
CALLS = {"bluestore_read": "enqueue_op", "bluestore_submit": "log_op_stats"}


@pytest.fixture(scope="module")
def opqueue_exe(bpf_ready, cxx):
    return cxx(os.path.join(HERE, "progs", "opqueue.cc"), "opqueue-links",
               ("-O2", "-g", "-pthread", "-fcf-protection=none"))


@pytest.fixture(params=["multi", "classic"])
def mode(request, monkeypatch):
    """uprobe_multi when this kernel has it; classic: the fallback, as on
    a kernel without it."""
    if request.param == "multi":
        assert bpfsys.uprobe_multi_supported(), \
            "kernel %s has no uprobe_multi links" % os.uname().release
    else:
        monkeypatch.setattr(bpfsys, "_multi_ok", False)
    return request.param


def _plan(exe):
    with ElfSymbols(exe) as elf:
        plan = resolve(elf, SIM, ["queue_wait", "op_total"])
    assert plan.stages == ["queue_wait", "op_total"], plan.unavailable
    for stage, role in CALLS.items():
        plan.calls.append((stage, plan.symbols[role]))
        plan.stages.append(stage)
    return plan


def _start(exe, n):
    p = subprocess.Popen([exe, str(n), "300", "100"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    p.stdout.readline()            # "rmw OFFSET": ready, waiting for "go"
    return p


@contextlib.contextmanager
def _traced(exe):
    """(tracer, processes): the queue program started N_OPS times, each
    waiting for "go", traced by one started tracer; all closed after."""
    procs = [_start(exe, n) for n in N_OPS]
    try:
        exes = ["/proc/%d/exe" % p.pid for p in procs]
        tr = StageTracer([p.pid for p in procs], exes,
                         [_plan(e) for e in exes], kernel=False)
        tr.start()
        try:
            yield tr, procs
        finally:
            tr.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def _run_ops(procs):
    """Let every process run its ops, and wait for it to end."""
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p, n in zip(procs, N_OPS):
        assert p.stdout.readline().strip() == "done %d" % n
        p.wait(30)


def _kernel_links():
    """This process's uprobe_multi links as the kernel shows them:
    [{link_type, pid, uprobe_cnt, cookies}]"""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd) != "anon_inode:bpf_link":
                continue
            with open("/proc/self/fdinfo/" + fd) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        info = dict(l.split(":\t", 1) for l in lines if ":\t" in l)
        if info.get("link_type") not in ("uprobe_multi", "uretprobe_multi"):
            continue
        at = lines.index("cookie\t offset\t ref_ctr_offset")
        out.append({"type": info["link_type"], "pid": int(info["pid"]),
                    "cnt": int(info["uprobe_cnt"]),
                    "cookies": sorted(int(l.split()[0])
                                      for l in lines[at + 1:] if l.strip())})
    return out


def test_one_link_per_program_target_and_direction(opqueue_exe, mode):
    """Attach, detach, attach ... three times over, on two processes:
    the links are per program, target and direction (multi) or per
    function (classic), and every op of each process is still counted
    exactly, in every stage."""
    with _traced(opqueue_exe) as (tr, procs):
        uprobes = tr.plans[0].uprobes()
        assert len(uprobes) == 7          # 2 + 2 calls, 3 op events
        per_target = {(prog, ret) for prog, _, _, ret in uprobes}
        assert len(per_target) == 5
        assert tr.multi == (mode == "multi")
        for cycle in range(3):
            tr.detach()
            assert tr.target_links == [] and not tr.attached
            assert not [l for l in _kernel_links()
                        if l["pid"] != os.getpid()]
            tr.attach()
        links = tr.target_links
        # the object keeps no destroyed links (a duty cycle's, for
        # hours): the targets' and the calibration's two
        assert all(l.alive for l in tr.obj.links)
        assert len(tr.obj.links) <= len(links) + 2
        theirs = [l for l in _kernel_links() if l["pid"] != os.getpid()]
        if mode == "multi":
            assert len(links) == len(per_target) * len(procs)
            assert all(l.multi for l in links)
            assert sum(l.n for l in links) == len(uprobes) * len(procs)
            # the kernel's view: 5 links in each process, two of them
            # (stage_entry, stage_return) with two functions each
            for p in procs:
                mine = [l for l in theirs if l["pid"] == p.pid]
                assert sorted(l["cnt"] for l in mine) == [1, 1, 1, 2, 2]
                assert sum(l["type"] == "uretprobe_multi"
                           for l in mine) == 1
                sids = sorted(tr.vocab.stage_ids[s] for s in CALLS)
                assert [l["cookies"] for l in mine
                        if l["type"] == "uretprobe_multi"] == [sids]
        else:
            assert len(links) == len(uprobes) * len(procs)
            assert not any(l.multi for l in links) and theirs == []
        _run_ops(procs)
        snaps = tr.snapshots()
        assert tr.in_flight() == 0
        tr.detach()
    for (hists, counters, *_), n in zip(snaps, N_OPS):
        for stage in ["queue_wait", "op_total"] + list(CALLS):
            assert hists[stage].count == n, (stage, hists[stage].count, n)
        assert counters["op_unknown"] == 0 and counters["op_map_full"] == 0


def test_run_statistics_count_every_uprobe_run(opqueue_exe):
    """measure_runs() (duty cycles): while attached the kernel's run
    statistics are on, and run_totals() counts every run of our uprobe
    programs, as many as the hits the programs count themselves, with
    their time; detached, nothing runs and nothing is added."""
    with _traced(opqueue_exe) as (tr, procs):
        assert tr.run_totals() is None      # not asked for
        tr.measure_runs()
        assert tr._stats_fd is not None
        tr.detach()
        assert tr._stats_fd is None          # off while detached
        tr.attach()
        t0 = tr.run_totals()
        c0 = tr.snapshot_counters()
        _run_ops(procs)
        t1 = tr.run_totals()
        c1 = tr.snapshot_counters()
        tr.detach()
        assert tr.run_totals() == t1
    hits = sum(c1.get(k, 0) - c0.get(k, 0) for k in c1
               if k.startswith("hit_"))
    # 3 op events and 2 calls (entry and return) per op
    assert t1["uprobe_runs"] - t0["uprobe_runs"] == 7 * sum(N_OPS)
    assert hits == 7 * sum(N_OPS), c1
    assert t1["prog_ns"] - t0["prog_ns"] > 7 * sum(N_OPS) * 20


def _hist(h):
    return h.count, h.sum_ns, h.max_ns, h.slots


def test_batch_reads_are_the_key_by_key_ones(opqueue_exe):
    """The counters and the stats map are read in one batch call per
    target (BPF_MAP_LOOKUP_BATCH: an exporter's refresh reads them all):
    on this kernel the batch is taken, gives what key-by-key lookups give,
    and a batch clear leaves every key zero."""
    from cephlat.engine import stats
    with _traced(opqueue_exe) as (tr, procs):
        _run_ops(procs)
        rd, n = tr.reader, tr.vocab.n_ids
        size = rd.stride * rd.ncpu
        for slot in range(len(procs)):
            batch = stats.read_counters(tr.counters, tr.vocab, tr.abi,
                                        slot)
            real = tr.counters.lookup_range
            try:
                tr.counters.lookup_range = lambda *a: None
                single = stats.read_counters(tr.counters, tr.vocab,
                                             tr.abi, slot)
            finally:
                tr.counters.lookup_range = real
            assert batch == single and batch["hit_entry"] > 0, batch
            for half in (0, 1):
                first = rd.map.lookup_range(rd.index(0, half, slot), n,
                                            size)
                assert first is not None, "no batch lookups here"
                got = rd.read_all(half, slot)
                want = [rd.read(sid, half, slot) for sid in range(n)]
                assert [_hist(h) for h in got] == \
                    [_hist(h) for h in want]
            assert sum(h.count for half in (0, 1)
                       for h in rd.read_all(half, slot)) > 0
            for half in (0, 1):
                rd.clear(half, slot)
                assert all(rd.read(sid, half, slot).count == 0
                           for sid in range(n))


def test_attach_errors_are_one_line(opqueue_exe):
    """A refused uprobe_multi link says what and why on one line."""
    assert bpfsys.uprobe_multi_supported()
    p = _start(opqueue_exe, 1)
    try:
        exe = "/proc/%d/exe" % p.pid
        tr = StageTracer(p.pid, exe, _plan(exe), kernel=False,
                         calibrate=False)
        tr.start()
        try:
            with pytest.raises(UserError) as e:
                tr.obj.attach_uprobe_multi("op_done", exe, [1 << 40], [0],
                                           pid=p.pid, what="nowhere")
            msg = str(e.value)
            assert "\n" not in msg and "nowhere" in msg and exe in msg, msg
            gone = subprocess.Popen(["true"])
            gone.wait()
            with pytest.raises(UserError) as e:
                tr.obj.attach_uprobe_multi("op_done", exe, [0x1000], [0],
                                           pid=gone.pid, what="op_done")
            assert "has exited" in str(e.value), str(e.value)
        finally:
            tr.close()
    finally:
        p.kill()
        p.wait()
