"""Whom the real OSD's threads waited behind for a CPU (the report's
"behind" rows): a CPU hog of its own cgroup on each of the machine's CPUs
(real-time busy loops, 8 ms in every 10), beside 4 KiB reads on the lab's
OSD. A hog of the OSD's own priority is not enough: woken on its waker's
CPU, a worker waits mostly behind the OSD's own threads (74 % of its
waits, a hog at nice -10 beside 2 reads in flight: the report says so);
a real-time one runs before any of them.

- the shard workers (tp_osd_tp) waited for a CPU mostly behind the hogs:
  their first row is a hog, by its process and its cgroup; the rows add
  up to the workers' run-queue time the report's THREAD ROLE table has;
- the hogs' part is most of the waits, and no more than they ran (their
  schedstat) for each worker thread that can wait at once;
- the verdict's CPU line names a hog.
Three windows in a row, each with hogs of its own."""
import json
import os
import subprocess
import time

import pytest

from conftest import OSDSTAGE, PYTHON, Bench, prefill, wait_for_line

# reads in flight: few enough that the OSD alone does not keep both CPUs
# busy (with 16 its workers wait mostly behind its own other threads)
LOAD_THREADS = 2
WINDOW_S = 6
RUNS = 3


@pytest.fixture(scope="module")
def prefilled(lab):
    prefill(lab, 5)
    return lab


def _run_ns(pid):
    """Time on a CPU of every thread of process pid so far (schedstat)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


# each hog: a real-time busy loop (SCHED_FIFO: it runs whenever it wants
# a CPU, before any thread of the OSD) that spins ON_MS, then sleeps
# OFF_MS, so that the OSD keeps a part of each CPU
ON_MS, OFF_MS = 8, 2
HOG = """
import os, time
os.sched_setaffinity(0, {%d})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
while True:
    end = time.monotonic() + %g
    while time.monotonic() < end:
        pass
    time.sleep(%g)
"""


def _hogs(cgroup):
    """A duty-cycled real-time hog per CPU, pinned, in `cgroup`."""
    hogs = []
    for cpu in range(os.cpu_count()):
        h = subprocess.Popen([PYTHON, "-c", HOG % (cpu, ON_MS / 1e3,
                                                  OFF_MS / 1e3)])
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(h.pid))
        hogs.append(h)
    return hogs


@pytest.mark.parametrize("run", range(RUNS))
def test_the_workers_waited_behind_the_hogs(prefilled, hog_cgroup, run):
    lab = prefilled
    bench = Bench(lab, "rand", WINDOW_S + 40, threads=LOAD_THREADS)
    hogs, tool = [], None
    try:
        tool = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(lab["pid"]),
                                 "--behind", "-j", str(WINDOW_S), "1"],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        wait_for_line(tool.stderr, "Tracing", 60)
        # the hogs from the window's start on (not while the tool
        # attaches: they would starve it)
        t0 = time.monotonic()
        hogs = _hogs(hog_cgroup)
        h0 = [0] * len(hogs)
        line = tool.stdout.readline()
        secs = time.monotonic() - t0
        hog_ns = sum(_run_ns(h.pid) - a for h, a in zip(hogs, h0))
        _, err = tool.communicate(timeout=60)
    finally:
        for p in hogs + [tool]:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        bench.stop()
    assert tool.returncode == 0, err
    rec = json.loads(line)
    assert rec["lost"]["behind_map_full"] == 0, rec["lost"]
    worker = rec["worker_role"]
    b = rec["behind"][worker]
    what = json.dumps(b)
    pids = {h.pid for h in hogs}
    top = b["by"][0]
    assert top["kind"] == "process" and top["tgid"] in pids, what
    assert top["cgroup"] == "/" + os.path.basename(hog_cgroup), what
    # the rows add up to the workers' run-queue time (THREAD ROLE
    # %RUNQ: of the role's thread time, threads x the interval)
    assert abs(sum(r["us"] for r in b["by"]) + b["other_us"] -
               b["wait_us"]) <= 0.1 * (len(b["by"]) + 1), what
    t = rec["threads"][worker]
    runq_us = t["runq_pct"] / 100 * t["threads"] * rec["interval_s"] * 1e6
    # %RUNQ is rounded to a tenth of a point, and counts the waits in
    # progress at the window's two ends in part, which the rows count
    # whole when they end (in the window or the next): at most a wait
    # each thread, at each end, as long as the longest wake-up delay
    longest = rec["kernel"]["wakeup_delay"]["by_role"][worker]["max_us"]
    slack = t["threads"] * (0.0005 * rec["interval_s"] * 1e6 + 2 * longest)
    assert abs(b["wait_us"] - runq_us) <= slack, (b["wait_us"], runq_us,
                                                  slack, t)
    # the hogs' part: most of the waits (they take most of the CPUs),
    # and no more than they ran (schedstat) for each thread that can wait
    # at once
    hog_us = sum(r["us"] for r in b["by"] if r["tgid"] in pids)
    hog_share = sum(r["share"] for r in b["by"] if r["tgid"] in pids)
    print("hogs %.1f %% of the workers' waits (%.0f us; they ran %.0f us "
          "of %.0f)" % (100 * hog_share, hog_us, hog_ns / 1e3,
                        os.cpu_count() * secs * 1e6))
    assert hog_share >= 0.5, what
    assert hog_us <= t["threads"] * hog_ns / 1e3, (hog_us, hog_ns, what)
    assert "they were behind python3 (pid " in " ".join(
        rec["verdict"].split()), rec["verdict"]
