"""Stacks at waits (-w --stacks, -r --folded) on the controlled sharded
queue (progs/shardq.cc, built as Ceph is: -O2, no frame pointers), whose
waits and their code are known exactly:

- io: every item's work is a timed wait for a completion inside
  sim::dequeue (WORK_US long, woken by its timer): each such wait is
  recorded once, unwound from the thread's root through worker() and
  sim::dequeue to the condition variable's futex wait, with the kernel's
  futex wait under it and the timer's wake-up as its waker;
- lock: a worker that took an item waits for its PG's mutex, held by the
  other worker for WORK_US: unwound through worker() and sim::lock_pg to
  the mutex's lock, woken by the other worker's unlock (its user stack:
  worker() to sim::unlock_pg; its kernel stack: the futex wake), asleep
  most of the program's own time of those waits;
- normal, sampled on the CPUs (--on-cpu): the workers' samples are
  their own time on a CPU (the program's schedstat) at the sampling
  rate, within the count's own error, each unwound from the thread's
  root through worker() (its busy loop is sim::work's, clock_gettime in
  the vDSO under it), and sim::work is what they ran most, its share of
  their samples the program's own (its CPU clock in sim::work);
- the window's report names the workers' top place and function (the
  PG's lock, sim::work), and so does its verdict when its cause is
  theirs.

Each case twice; the unwinds are complete (they reach the thread's
first frame) and the asleep time is the program's own."""
import pytest

from cephlat.model.verdict import CPU_CAUSES
from cephlat.stacks.waits import UNSEEN_FRAME
from conftest import OSDSTAGE, check_reports, folded_stacks, in_order, \
    run_tool
from shardq import CASES, run_case, shardq_exe  # noqa: F401 (fixture)

MIN_US = 100            # --stacks: waits this long (the io and lock
#                         waits are WORK_US, 300)
HZ = 997                # --on-cpu: samples a second on each CPU
RUNS = 2


@pytest.fixture(scope="module", params=range(RUNS))
def stacked(request, shardq_exe, tmp_path_factory):  # noqa: F811
    d = tmp_path_factory.mktemp("stacks")
    got = {}
    for mode in ("io", "lock"):
        truth, rep, cap = run_case(shardq_exe, mode,
                                   str(d / (mode + ".ctf")),
                                   ["--stacks", str(MIN_US)])
        got[mode] = (truth, rep, folded_stacks(cap))
        got[mode + "-window"] = _window(cap)
    truth, rep, cap = run_case(shardq_exe, "normal",
                               str(d / "normal.ctf"), ["--on-cpu", str(HZ)])
    got["on-cpu"] = (truth, rep, folded_stacks(cap, "on-cpu"))
    got["on-cpu-window"] = _window(cap)
    return got


def _window(cap):
    """`osdstage -r CAP --from 0 -j`: the capture's window report."""
    p = run_tool([OSDSTAGE, "-r", cap, "--from", "0", "-j"], timeout=300)
    assert p.returncode == 0, p.stderr
    return check_reports(p.stdout)[0]



def test_each_completion_wait_is_unwound_from_the_threads_root(stacked):
    truth, rep, lines = stacked["io"]
    items = CASES["io"][0]
    mine = [(s, w, us) for s, w, us in lines
            if in_order(s[1:], ["worker", "sim::dequeue"])]
    # the thread's root (the unwind ended at its first frame: no
    # "[unwind: ...]" mark), then the program's frames, then the futex
    # wait in the kernel
    for s, w, us in mine:
        assert not any(f.startswith("[unwind") for f in s), s
        assert s[1] in ("clone3", "clone") or s[1].startswith("libc"), s
        assert any(f.startswith("futex_wait") and f.endswith("_[k]")
                   for f in s), s
        # woken by its timer (unless no probe saw its wake-up)
        assert w == [UNSEEN_FRAME] or any("hrtimer" in f for f in w), w
    # one line per distinct stack: the waits summed; each item waited
    # once inside sim::dequeue, asleep WORK_US at least (its deadline; the
    # timer's slack after it), within the program's own time of those
    # waits (which adds the wake-up and the time on a CPU around them)
    total_us = sum(us for _, _, us in mine)
    assert items * CASES["io"][5] <= total_us <= truth["io_total_us"], (
        total_us, truth)
    # and nothing else waited inside an item that long
    others = [(s, us) for s, _, us in lines
              if not in_order(s[1:], ["worker", "sim::dequeue"]) and
              us >= MIN_US and "sim::dequeue" in s]
    assert not others, others


def test_a_lock_wait_names_the_mutex_and_the_unlock_that_woke_it(stacked):
    truth, rep, lines = stacked["lock"]
    # the PG's lock (sim::lock_pg): its waits, woken by the other worker
    # releasing it (the shard's own lock, taken by the producer and the
    # workers alike, is waited for too: not these)
    locks = [(s, w, us) for s, w, us in lines
             if in_order(s[1:], ["worker", "sim::lock_pg"])]
    assert locks, lines
    for s, w, us in locks:
        assert not any(f.startswith("[unwind") for f in s), s
        assert any("mutex_lock" in f or "lll_lock" in f for f in s), s
        # its kernel wake-up by the unlock, under the other's worker()
        # (unless no probe saw its wake-up)
        if w == [UNSEEN_FRAME]:
            continue
        assert any(f.startswith("futex_wake") for f in w), w
        assert in_order(list(reversed(w)), ["worker", "sim::unlock_pg"]), w
    # the second item of each burst waited for the first's lock, WORK_US
    # or so: the program's own time of those waits (which adds the
    # wake-up and the time on a CPU around them), of which the time
    # asleep is most
    total_us = sum(us for _, _, us in locks)
    assert 0.5 * truth["pg_lock_wait_total_us"] <= total_us <= \
        truth["pg_lock_wait_total_us"], (total_us, truth)


def test_the_workers_lock_waits_are_named_where_they_waited(stacked):
    """The report's top place of the workers' lock waits is the PG's lock
    (most of their time waiting for a lock with stacks: the shard's own
    lock is waited for briefly), woken by the other worker's unlock; a
    verdict whose cause is the lock says so."""
    rec = stacked["lock-window"]
    top = rec["stacks"]["workers"]["lock"]
    assert top["where"][0] == "sim::lock_pg" and top["share"] >= 0.5, top
    assert top["woken_by"] == ["sim::unlock_pg"] and top["waker_is_osd"], \
        top
    if rec["cause"] == "lock":
        assert "waiting for a lock (waits recorded with stacks) was most " \
            "in sim::lock_pg" in rec["verdict"], rec["verdict"]


def test_the_workers_samples_are_their_cpu_time(stacked):
    truth, rep, lines = stacked["on-cpu"]
    mine = [(s, n) for s, _, n in lines if s[0] == "worker"]
    got = sum(n for _, n in mine)
    # what they ran, each sample 1/HZ of it: a count's error is its
    # square root
    want = truth["workers_cpu_us"] * HZ / 1e6
    assert abs(got - want) <= 3 * want ** 0.5 + 2, (got, want, truth)
    whole = sum(n for s, n in mine if not any(f.startswith("[unwind")
                                              for f in s))
    assert whole >= 0.9 * got, mine
    for s, n in mine:
        if not any(f.startswith("[unwind") for f in s):
            assert s[1] in ("clone3", "clone") or s[1].startswith("libc"), s
    assert sum(n for s, n in mine if "worker" in s[1:]) >= 0.9 * got, mine


def test_the_workers_top_function_is_their_work(stacked):
    """The items' work (sim::work: WORK_US on a CPU) is what the workers
    ran most: its share of their samples within 10 points of the
    program's own accounting (its time on a CPU in sim::work of the
    workers' whole time on a CPU), and a verdict whose cause is their
    time on a CPU names it."""
    truth, _, _ = stacked["on-cpu"]
    rec = stacked["on-cpu-window"]
    top = rec["stacks"]["workers"]["on_cpu"]
    want = truth["work_cpu_us"] / truth["workers_cpu_us"]
    assert top["function"] == "sim::work", top
    assert abs(top["share"] - want) <= 0.10, (top, truth)
    if rec["cause"] in CPU_CAUSES:
        assert "the workers' samples on a CPU were most in sim::work" in \
            rec["verdict"], rec["verdict"]
