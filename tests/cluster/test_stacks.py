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
- each recorded wait has its waker's kernel stack;
- --perfetto and --html: the timeline's sleeps carry their stacks and
  waker (the pictures of the span of the workers' longest read from the
  disk);
- the window's summary (WHERE THREADS WAITED) puts the workers' reads
  first;
- the workers' top place asleep inside ops is that read, their top
  function on a CPU a named one, and the verdict names the one of its
  cause;
- --on-cpu: the workers' samples are their time on a CPU as the
  scheduler events measure it (the window's THREAD ROLE figures) at the
  sampling rate, never more, and fewer by at most a measured share not
  yet explained, and unwound from the thread's root through the shard
  queue's loop;
- --slowest: every sleep of a slow read's worker inside its read from
  the disk that lasted the threshold (as the capture's scheduler events
  have it) is in the read's listing, where it slept and who woke it (a
  long bluestore_read may be a short sleep and a long wait for a CPU),
  or, for a wake-up no probe saw (rebuilt at the thread's next
  switch-out, counted as the window's unseen wake-ups), that no waker is
  known.
Twice in a row, each a capture of its own."""
import subprocess

import pytest

from cephlat.capture.reader import Capture
from cephlat.cli.merged import mono_at
from cephlat.model.verdict import CPU_CAUSES
from cephlat.stacks.waits import UNSEEN_FRAME, StackReader

from conftest import (OSDSTAGE, PYTHON, Bench, check_reports,
                      folded_stacks, in_order, prefill, wait_for_line)

MIN_US = 100            # --stacks: a read from the lab's disk is longer
HZ = 499                # --on-cpu: samples a second on each CPU
WINDOW_S = 5
RUNS = 2
WORKER = "tp_osd_tp"
# the share of the workers' time on a CPU that --on-cpu's samples may miss
# when their reads go to the disk (measured, not explained yet: see
# test_the_workers_samples_are_their_time_on_a_cpu)
MISSED = 0.15


@pytest.fixture(scope="module")
def prefilled(lab):
    prefill(lab, 5)
    return lab


@pytest.fixture(scope="module", params=range(RUNS))
def stacked(request, prefilled, tmp_path_factory):
    lab = prefilled
    cap = str(tmp_path_factory.mktemp("stacks") / "osd.ctf")
    p = subprocess.run(["ceph", "--admin-daemon", lab["asok"], "cache",
                        "drop"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    bench = Bench(lab, "rand", WINDOW_S + 30, threads=4)
    try:
        p = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(lab["pid"]),
                              "-w", cap, "--stacks", str(MIN_US),
                              "--on-cpu", str(HZ), str(WINDOW_S), "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        wait_for_line(p.stderr, "Tracing", 60)
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    finally:
        bench.stop()
    assert "none lost" in err, err
    r = subprocess.run([PYTHON, OSDSTAGE, "-r", cap, "--slowest", "20",
                        "-j"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    slow = check_reports(r.stdout)[0]["slowest"]
    # the pictures around the longest of the workers' reads from the disk
    # (around the slowest op, the default, they may hold none: on a busy
    # machine the slowest op can be one that waited for a CPU)
    pictures = (cap + ".perfetto.json", cap + ".html")
    c = Capture(cap)
    sr = StackReader(c)
    try:
        reads = [w for w in sr.waits(*c.traced_span(), role=WORKER)
                 if any("IOContext::aio_wait" in f.label() for f in w.user)]
    finally:
        sr.close()
    assert reads, "no read from the disk among the workers' waits"
    w = max(reads, key=lambda w: w.off_ns)
    at = (w.ts - w.off_ns - c.first_ns) / 1e9
    r = subprocess.run([PYTHON, OSDSTAGE, "-r", cap, "--from",
                        "%.6f" % (at - 0.002), "--to", "%.6f" % (
                            at + w.off_ns / 1e9 + 0.002),
                        "--perfetto", pictures[0], "--html", pictures[1]],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([PYTHON, OSDSTAGE, "-r", cap, "--from", "0", "-j"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    window = check_reports(r.stdout)[0]
    return {"folded": folded_stacks(cap), "slow": slow, "cap": cap,
            "pictures": pictures, "window": window,
            "on_cpu": folded_stacks(cap, "on-cpu")}


def test_every_worker_stack_is_unwound_from_its_root(stacked):
    folded = stacked["folded"]
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
        # its waker's kernel stack, from its wake-up down (unless no
        # probe saw its wake-up)
        assert w == [UNSEEN_FRAME] or w and w[0].endswith("_[k]") and "try_to_wake_up_[k]" in w, w



def test_the_reads_wait_for_the_disk_inside_bluestore(stacked):
    folded = stacked["folded"]
    workers = [(s, us) for s, _, us in folded if s[0] == WORKER]
    total = sum(us for _, us in workers)
    reads = [(s, w, us) for s, w, us in folded if s[0] == WORKER and
             in_order(s, ["BlueStore::read", "IOContext::aio_wait"])]
    assert sum(us for _, _, us in reads) >= 0.5 * total, \
        sorted(workers, key=lambda x: -x[1])[:5]
    # woken by the completion of its I/O (those whose waker was seen)
    woken = sum(us for _, w, us in reads if "KernelDevice::_aio_thread" in w)
    assert woken >= 0.9 * sum(us for _, w, us in reads
                              if w != [UNSEEN_FRAME]), reads


def _sleeps(cap, tid, a_us, b_us, enq_wall):
    """The sleeps inside an op (the scheduler's waking events: kind work)
    of thread `tid` of at least MIN_US within [a_us, b_us] of the op's
    enqueue (wall-clock `enq_wall`) -> [(from its enqueue us, us, the
    waker's tid)]"""
    # (the reports' wall times: the offset interpolated between the
    # capture's clock samples, which a step of the wall clock moves)
    t = mono_at(cap, int(enq_wall * 1e9))
    out = []
    for _, ts, d in cap.iter_events(["waking"], t + int(a_us * 1000),
                                    t + int(b_us * 1000)):
        if d["tid"] == tid and d["offcpu_ns"] >= MIN_US * 1000 and \
                d["sleep"] == 0:
            start = (ts - d["offcpu_ns"] - t) / 1000
            if start >= a_us - 2:
                out.append((start, d["offcpu_ns"] / 1000,
                            int(d["waker_tid"])))
    return out


def test_a_slow_reads_listing_has_its_workers_wait_for_the_disk(stacked):
    from cephlat.capture.reader import Capture
    slow, cap = stacked["slow"], Capture(stacked["cap"])
    reads = [r for r in slow if r.get("class") == "read" and any(
        st["stage"] == "bluestore_read" for st in r["stages"])]
    seen = unseen = 0
    for r in reads:
        st = next(s for s in r["stages"] if s["stage"] == "bluestore_read")
        want = _sleeps(cap, r["dequeue"]["tid"], st["start_us"],
                       st["end_us"], r["enqueue"]["ts"])
        got = [w for w in r.get("waits", ())
               if st["start_us"] <= w["at_us"] <= st["end_us"]]
        assert len(got) == len(want), (want, got, r)
        for (at, us, waker), w in zip(want, got):
            assert abs(w["at_us"] - at) <= 3 and abs(w["us"] - us) <= 1, (
                (at, us), w)
            assert "IOContext::aio_wait" in w["frames"], w
            if w.get("unseen"):
                assert waker == 0 and w["waker_tid"] is None and \
                    not w["waker_frames"], (waker, w)
                unseen += 1
            else:
                assert w["waker"] == "bstore_aio" and \
                    "KernelDevice::_aio_thread" in w["waker_frames"], w
        seen += len(got)
    # the window's slowest reads held such waits
    assert seen >= 1, slow
    assert unseen <= stacked["window"]["kernel"]["wakeup_delay"].get(
        "unseen", 0), stacked["window"]["kernel"]["wakeup_delay"]


def test_the_timelines_sleeps_carry_their_stacks(stacked):
    import json
    from cephlat.render import perfetto
    perf, page = stacked["pictures"]
    with open(perf) as f:
        trace = json.load(f)
    assert perfetto.validate(trace) == []
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    slept = [e for e in events if e.get("args", {}).get("stack")]
    assert slept, "no sleep with its stacks in the timeline"
    for e in slept:
        # (clipped to the timeline's window at its edges)
        assert e["name"] == "sleeping" and e["dur"] > 0, e
        assert e["args"]["woken by"], e
    reads = [e for e in slept if "IOContext::aio_wait" in e["args"]["stack"]]
    assert reads and all("KernelDevice::_aio_thread" in e["args"]["woken by"]
                         for e in reads), slept
    with open(page) as f:
        html = f.read()
    # on the page, as the sleeps' titles (short states are drawn merged)
    assert "IOContext::aio_wait" in html


def test_the_summary_puts_the_workers_reads_first(stacked):
    st = stacked["window"]["stacks"]
    top = [w for w in st["waits"] if w["role"] == WORKER][0]
    assert top["kind"] == "work" and top["where"][0] == \
        "IOContext::aio_wait" and "BlueStore::read" in top["where"], st
    assert top["woken_by"] == ["KernelDevice::_aio_thread"] and \
        top["waker_is_osd"], top
    assert st["oncpu_hz"] == HZ and st["on_cpu"], st


def test_the_workers_top_wait_and_function_are_named(stacked):
    """The window's workers: their longest place asleep inside ops is the
    read from the disk (most of that time), what they ran most a named
    function (a symbol, not an address); the verdict names the one its
    cause is about."""
    rec = stacked["window"]
    top = rec["stacks"]["workers"]
    blocked, cpu = top["blocked"], top["on_cpu"]
    assert blocked["where"][0] == "IOContext::aio_wait" and \
        blocked["share"] >= 0.5, blocked
    assert cpu and "+0x" not in cpu["function"] and \
        not cpu["function"].startswith(("0x", "?")), cpu
    if rec["cause"] in ("blocked", "busy_or_blocked"):
        assert "asleep inside ops (waits recorded with stacks) was most " \
            "in IOContext::aio_wait" in rec["verdict"], rec["verdict"]
    elif rec["cause"] in CPU_CAUSES:
        assert "samples on a CPU were " in rec["verdict"] and \
            cpu["function"] in rec["verdict"], rec["verdict"]


def test_the_workers_samples_are_their_time_on_a_cpu(stacked):
    rec = stacked["window"]
    t = rec["threads"][WORKER]
    # on a CPU: neither asleep nor waiting for one, of every worker's
    # window (percentages to 0.1: each thread-window's 0.05 % of it)
    oncpu_s = t["threads"] * rec["interval_s"] * (
        100.0 - t["offcpu_pct"] - t["runq_pct"]) / 100.0
    want = oncpu_s * HZ
    got = sum(n for s, _, n in stacked["on_cpu"] if s[0] == WORKER)
    slack = 3 * want ** 0.5 + 2 + \
        t["threads"] * rec["interval_s"] * 0.0005 * HZ
    # never more samples than time on a CPU; fewer by a share not yet
    # explained when the reads go to the disk: 5 % measured by hand,
    # 9 to 11 % in this fixture (the same span, both sides; osdstage(8),
    # STACKS), up to the MISSED share below
    assert got <= want + slack, (got, want, slack, t)
    assert got >= want * (1 - MISSED) - slack, (got, want, slack, t)


def test_the_workers_samples_are_unwound_from_their_root(stacked):
    mine = [(s, n) for s, _, n in stacked["on_cpu"] if s[0] == WORKER]
    got = sum(n for _, n in mine)
    whole = [(s, n) for s, n in mine
             if not any(f.startswith("[unwind") for f in s)]
    assert sum(n for _, n in whole) >= 0.9 * got, mine[:5]
    for s, n in whole:
        assert "ShardedThreadPool::shardedthreadpool_worker" in s, s


def test_an_ops_story_has_the_same_waits_as_its_listing(stacked):
    """--op REQID tells the op's story with the waits --slowest lists."""
    row = next((r for r in stacked["slow"] if r.get("waits")), None)
    assert row is not None, stacked["slow"]
    p = subprocess.run([PYTHON, OSDSTAGE, "-r", stacked["cap"], "--op",
                        row["reqid"], "-j"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    story = check_reports(p.stdout)[0]
    mine = [r for rows in story["osds"].values() for r in rows
            if r["op"] == row["op"]]
    assert len(mine) == 1 and mine[0]["waits"] == row["waits"], (
        mine, row["waits"])
