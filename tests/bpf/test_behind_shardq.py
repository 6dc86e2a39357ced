"""Whom a traced program's threads waited behind for a CPU (the report's
"behind" rows: probes/osdstage/sched.bpf.h behind_wait): the controlled
sharded queue (progs/shardq.cc) with its workers pinned on CPU 0, beside
a CPU hog pinned there too, in a cgroup of its own and at a higher
priority than the workers (nice -10), so that the workers wait for the
CPU mostly behind it.

- the hog is the workers' first row, named by its pid and its cgroup;
- the rows add up to the workers' run-queue waits as the kernel counted
  them (their schedstat, which the program reads between its "go" and
  its last item): no less, and no more than the waits outside that span
  (the tool's window holds the seconds before the "go" and after the
  end too);
- the hog's part is most of the waits, and no more than it ran (its
  schedstat) for each worker that can wait at once;
- the verdict's CPU line names it.
Each run three times in a row: a result that holds now and then is not
one."""
import json
import os
import subprocess

import pytest

from conftest import OSDSTAGE, PYTHON, wait_for_line
from shardq import SPEC, shardq_exe  # noqa: F401 (a fixture)


HOG_NICE = -10
RUNS = 3
# shardq: 2 shards of 2 workers, items with gaps and bursts of work
ARGS = ["2", "2", "240", "normal", "2000", "0", "20", "8", "300"]
WORKERS = 4


def _schedstat(pid):
    """(ns on a CPU, ns waiting for one) of task pid, as the kernel counts."""
    with open("/proc/%d/schedstat" % pid) as f:
        run, wait, _slices = (int(x) for x in f.read().split())
    return run, wait


def _hog(cgroup):
    """A busy loop pinned on CPU 0 at HOG_NICE, moved into `cgroup`."""
    hog = subprocess.Popen(["taskset", "-c", "0", "nice", "-n",
                            str(HOG_NICE), "sh", "-c", "while :; do :; done"])
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(hog.pid))
    return hog


def _run(shardq_exe, cgroup):
    """-> (the program's truth, the tool's report, the hog's pid, its time
    on the CPU over the program's span: from its "go" to its last item's
    end, when it prints its truth)"""
    hog = _hog(cgroup)
    prog = tool = None
    try:
        prog = subprocess.Popen(["taskset", "-c", "0", shardq_exe] + ARGS,
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        tool = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(prog.pid),
                                 "--probes", SPEC, "-j", "--behind"],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        wait_for_line(tool.stderr, "Tracing", 60)
        h0 = _schedstat(hog.pid)[0]
        prog.stdin.write("go\n")
        prog.stdin.flush()
        truth = json.loads(prog.stdout.readline())
        hog_ns = _schedstat(hog.pid)[0] - h0
        prog.wait(60)
        out, err = tool.communicate(timeout=60)
    finally:
        for p in (prog, tool, hog):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert tool.returncode == 0, err
    return truth, json.loads(out.splitlines()[-1]), hog.pid, hog_ns


@pytest.mark.parametrize("run", range(RUNS))
def test_the_workers_waited_behind_the_hog(shardq_exe, hog_cgroup, run):
    truth, rec, hog, hog_ns = _run(shardq_exe, hog_cgroup)
    assert rec["lost"]["behind_map_full"] == 0, rec["lost"]
    b = rec["behind"]["worker"]
    by = b["by"]
    top = by[0]
    what = json.dumps(b)
    assert top["kind"] == "process" and top["tgid"] == hog, what
    assert top["cgroup"] == "/" + os.path.basename(hog_cgroup), what
    assert top["process"] == "sh", what
    # the rows add up to the workers' waits, as the kernel counted them
    total = b["wait_us"]
    assert abs(sum(r["us"] for r in by) + b["other_us"] - total) <= \
        0.1 * (len(by) + 1), what
    runq = truth["workers_runq_us"]
    # no less than the kernel counted between the "go" and the end (the
    # rows count each wait whole, from its wake-up; the kernel's from
    # its enqueue on the run queue, a little later), but for a wait of
    # each worker cut at either end: the kernel counts it in part
    longest = rec["kernel"]["wakeup_delay"]["by_role"]["worker"]["max_us"]
    assert total >= runq - 2 * WORKERS * longest, (total, runq, what)
    # ... and no more than those of the tool's seconds outside the
    # program's span (before its "go", after its end): at most every
    # worker's whole time there
    outside_us = rec["interval_s"] * 1e6 - truth["span_us"]
    assert total <= runq + WORKERS * (max(outside_us, 0) + 2 * longest), \
        (total, runq, outside_us, what)
    # the hog's part: most of the waits (it takes most of the CPU), and
    # no more than it ran (its schedstat over the program's span, and the
    # seconds outside it) for each worker that can wait at once
    unknown = sum(r["share"] for r in by if r["kind"] == "unknown")
    print("hog %.1f %% of the waits (%.0f us; it ran %.0f us); unknown "
          "%.1f %%" % (100 * top["share"], top["us"], hog_ns / 1e3,
                       100 * unknown))
    assert top["share"] >= 0.5, what
    assert top["us"] <= WORKERS * (hog_ns / 1e3 + max(outside_us, 0)), (
        top["us"], hog_ns, what)
    # the verdict names it where it says the CPU's delay
    assert "behind sh (pid %d" % hog in " ".join(rec["verdict"].split()), \
        rec["verdict"]
