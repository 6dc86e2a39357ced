"""Where the real OSD's threads waited (-w --stacks, -r --folded): the
lab's OSD (Pacific, on this host: its ceph-osd has no frame pointers)
under 4 KiB random reads, whose shard workers read from the disk inside
their ops (BlueStore's direct I/O, waited for on a condition variable).

- every stack of a shard worker is unwound from the thread's root (none
  cut short: a copy of the stack that ends before the root is completed
  from a whole unwind of the same thread, at the same frame) through the
  shard queue's worker loop and the op's processing to where it slept,
  with the kernel's stack under it;
- the reads' waits are there, inside BlueStore's read for its I/O, woken
  by the thread that completes it, and their time is most of the
  workers' recorded waits (the OSD's caches dropped before each window:
  the reads go to the disk);
- each recorded wait has its waker's kernel stack.
Twice in a row, each a capture of its own."""
import subprocess

import pytest

from conftest import (OSDSTAGE, PYTHON, Bench, folded_stacks, in_order,
                      prefill, wait_for_line)

MIN_US = 100            # --stacks: a read from the lab's disk is longer
WINDOW_S = 5
RUNS = 2
WORKER = "tp_osd_tp"


@pytest.fixture(scope="module")
def prefilled(lab):
    prefill(lab, 5)
    return lab


@pytest.fixture(scope="module", params=range(RUNS))
def folded(request, prefilled, tmp_path_factory):
    lab = prefilled
    cap = str(tmp_path_factory.mktemp("stacks") / "osd.ctf")
    p = subprocess.run(["ceph", "--admin-daemon", lab["asok"], "cache",
                        "drop"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    bench = Bench(lab, "rand", WINDOW_S + 30, threads=4)
    try:
        p = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(lab["pid"]),
                              "-w", cap, "--stacks", str(MIN_US),
                              str(WINDOW_S), "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        wait_for_line(p.stderr, "Tracing", 60)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    finally:
        bench.stop()
    assert "none lost" in err, err
    return folded_stacks(cap)


def test_every_worker_stack_is_unwound_from_its_root(folded):
    workers = [(s, w, us) for s, w, us in folded if s[0] == WORKER]
    assert len(workers) >= 5, folded
    for s, w, us in workers:
        assert not any(f.startswith("[unwind") for f in s), s
        assert "ShardedThreadPool::shardedthreadpool_worker" in s, s
        assert "OSD::ShardedOpWQ::_process" in s, s
        # the user stack from the root, then the kernel's, where it slept
        k = [i for i, f in enumerate(s) if f.endswith("_[k]")]
        assert k and k == list(range(k[0], len(s))), s
        assert "schedule_[k]" in s or any(f.startswith("__schedule")
                                          for f in s), s
        # its waker's kernel stack, from its wake-up down
        assert w and w[0].endswith("_[k]") and "try_to_wake_up_[k]" in w, w



def test_the_reads_wait_for_the_disk_inside_bluestore(folded):
    workers = [(s, us) for s, _, us in folded if s[0] == WORKER]
    total = sum(us for _, us in workers)
    reads = [(s, w, us) for s, w, us in folded if s[0] == WORKER and
             in_order(s, ["BlueStore::read", "IOContext::aio_wait"])]
    assert sum(us for _, _, us in reads) >= 0.5 * total, \
        sorted(workers, key=lambda x: -x[1])[:5]
    # woken by the completion of its I/O
    woken = sum(us for _, w, us in reads if "KernelDevice::_aio_thread" in w)
    assert woken >= 0.9 * sum(us for _, _, us in reads), reads
