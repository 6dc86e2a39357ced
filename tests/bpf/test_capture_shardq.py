"""BPF tier: captures (-w) of the controlled sharded queue read back (-r):
the same report, readable by babeltrace2, the slowest ops of the
missed-wake-up case show the timeout, cut files still read, bad files get
one error line."""
import collections
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import time

import pytest

from conftest import (OSDSTAGE, PYTHON, assert_ctf_readers_accept,
                      assert_one_line_error, need, run_tool, wait_for_line)
from shardq import CASES, SPEC, shardq_exe, shardq_runs  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))


def read(cap, *args):
    return run_tool([OSDSTAGE, "-r", cap] + list(args))


def babeltrace_counts(cap):
    need(shutil.which("babeltrace2") is not None, "babeltrace2 missing "
         "(make setup)")
    p = subprocess.run(["babeltrace2", cap], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    counts = collections.Counter()
    for line in p.stdout.splitlines():
        # [time] (+delta) host osdstage:NAME: { cpu_id = N }, ...
        name = line.split(" osdstage:", 1)[1].split(":", 1)[0]
        counts[name] += 1
    return counts, p.stdout


@pytest.mark.parametrize("mode", list(CASES))
def test_read_back_is_the_live_report(shardq_runs, mode):
    _, live, cap = shardq_runs[mode]
    p = read(cap, "-j")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0]) == live


@pytest.mark.parametrize("mode", ["normal", "forget"])
def test_babeltrace2_reads_it_and_counts_match(shardq_runs, mode):
    truth, live, cap = shardq_runs[mode]
    counts, text = babeltrace_counts(cap)
    # every op of the run was enqueued and dequeued after the first snapshot
    assert counts["op_enqueue"] == counts["op_dequeue"] == truth["items"]
    assert live["stages"]["queue_wait"]["count"] == counts["op_dequeue"]
    woken = sum(live["kernel"]["wakeup_delay"]["by_role"][r]["count"]
                for r in live["kernel"]["wakeup_delay"]["by_role"])
    assert counts["switch_in"] >= woken > 0
    assert counts["snap_thread"] > 0 and counts["end"] == 1
    assert counts["clock"] == 2          # the wall clock at start and end
    # readable names: enums print their labels
    assert 'role = ( "worker" : container = 1 )' in text
    # the same events as our own reader sees
    from cephlat.capture.ctf import Trace
    ours = collections.Counter(n.split(":", 1)[1]
                               for n, _, _ in Trace(cap).events())
    assert ours == counts


def test_capture_is_private(shardq_runs):
    _, _, cap = shardq_runs["forget"]
    assert stat.S_IMODE(os.stat(cap).st_mode) == 0o700
    files = os.listdir(cap)
    assert "metadata" in files and "stream_meta" in files
    assert any(f.startswith("stream_cpu") for f in files)
    for f in files:
        assert stat.S_IMODE(os.stat(os.path.join(cap, f)).st_mode) == 0o600


def test_slowest_ops_of_missed_wakeups_show_the_timeout(shardq_runs):
    truth, _, cap = shardq_runs["forget"]
    p = read(cap, "--slowest", "5", "-j")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["type"] == "window"
    assert rec["stages"]["queue_wait"]["count"] == truth["items"]
    rows = rec["slowest"]
    assert len(rows) == 5
    waits = [r["queue_wait_us"] for r in rows]
    assert waits == sorted(waits, reverse=True)
    for r in rows:
        assert r["woken"]["by"] == "timeout", r
        assert r["dequeue"]["thread"].startswith("shardq-w")
        # asleep with the item queued until the 20 ms timed wait expired
        assert r["woken"]["signal_us"] > 0.5 * r["queue_wait_us"] > 2000
    # an op's listing is wrapped at 78 columns: its words, not its lines
    text = " ".join(read(cap, "--slowest", "2").stdout.split())
    assert "SLOWEST OPS" in text and "its timed wait expiring (timeout)" \
        in text


def _perfetto(cap, path):
    """The whole capture's timeline as Perfetto JSON -> (trace, thread
    names by (pid, tid))"""
    p = read(cap, "--from", "0", "--timeline-ms", "600000", "--perfetto",
             str(path))
    assert p.returncode == 0, p.stderr
    with open(str(path)) as f:
        tr = json.load(f)
    names = {(e["pid"], e["tid"]): e["args"]["name"]
             for e in tr["traceEvents"] if e["name"] == "thread_name"}
    return tr, names


def test_holds_drawn_on_the_worker_lanes(shardq_runs, tmp_path):
    """mClock's holds on the timeline: a worker's hold waits are "held"
    slices of its cpu track, as long in all as the program's own hold
    waits (less what each wait spends outside the futex sleep: on the
    way in and out, and runnable once woken); every op says its
    scheduler class and what of its queue wait was held. The other
    cases draw no hold."""
    truth, live, cap = shardq_runs["hold"]
    tr, names = _perfetto(cap, tmp_path / "hold.json")
    held = [e for e in tr["traceEvents"]
            if e.get("cat") == "sched" and e["name"].startswith("held")]
    assert held, "no hold drawn"
    for e in held:
        assert names[(e["pid"], e["tid"])].startswith("shardq-w"), e
    drawn_us = sum(e["dur"] for e in held)
    # each wait's time outside the sleep: its way in and out (a probe
    # pair's traps: the futex probes) and runnable once woken, which the
    # tool measured (its p99 bounds every wait's)
    runq = live["kernel"]["wakeup_delay"]["p99_us"]
    outside = truth["hold_waits"] * (runq + 2 * live["call_bias_us"])
    want = truth["hold_waits_total_us"]
    print("holds drawn %.0f us in %d slices; the program's %d waits %.0f us "
          "(outside the sleep at most %.0f us)" % (
              drawn_us, len(held), truth["hold_waits"], want, outside))
    # the sleeps lie inside the program's waits (1 ns of rounding a slice)
    assert want - outside <= drawn_us <= want + 1e-3 * len(held), (
        drawn_us, want, outside)
    ops = [e for e in tr["traceEvents"]
           if e["ph"] == "b" and e["name"] == "queue_wait"]
    assert len(ops) == truth["items"]
    assert {e["args"]["queue_class"] for e in ops} == {"client"}
    op_held = sum(e["args"]["held_us"] for e in ops)
    a = live["attribution"]["held"]
    assert abs(op_held - a["mean_us"] * truth["items"]) <= \
        0.01 * op_held + truth["items"], (op_held, a)
    # --slowest says it too: the slowest op waited for its due time
    text = read(cap, "--slowest", "1").stdout
    held_us = re.search(r"held by the op scheduler ([0-9.]+) us", text)
    assert held_us, text
    assert float(held_us.group(1)) >= 0.5 * truth["not_due_mean_us"], text
    for mode in ("normal", "forget"):
        tr, _ = _perfetto(shardq_runs[mode][2], tmp_path / (mode + ".json"))
        assert not [e for e in tr["traceEvents"] if e.get("cat") == "sched"
                    and e["name"].startswith("held")], mode


def test_lock_waits_drawn_on_the_worker_lanes(shardq_runs, tmp_path):
    """A worker's waits for the PG's lock are "waiting for a lock" slices
    of its cpu track: each lies inside the queue wait of the item its
    worker took before it locked, so together they are the items' lock
    part (the live report's, over every item). Waits for a completion
    (the io case, on a condition variable) are no lock: plain sleep. A
    worker's mutex wait (the program has its queues' mutexes) is a lock
    wait by the rule: the io case can draw one, a futex wait of some
    10 us that is no cv's, far shorter than a completion; so can the
    producer's (the main thread, "shardq"), whose enqueue waited for a
    shard queue's mutex that a worker held (one of 92 us on a busy
    machine): drawn on its own lane, not among the workers'."""
    truth, live, cap = shardq_runs["lock"]
    tr, names = _perfetto(cap, tmp_path / "lock.json")
    locks = [e for e in tr["traceEvents"] if e.get("cat") == "sched" and
             e["name"] == "waiting for a lock"]
    assert locks, "no lock wait drawn"
    lane = {id(e): names[(e["pid"], e["tid"])] for e in locks}
    assert set(lane.values()) <= {"shardq-w0 cpu", "shardq-w1 cpu",
                                  "shardq cpu"}, set(lane.values())
    locks = [e for e in locks if lane[id(e)].startswith("shardq-w")]
    drawn_us = sum(e["dur"] for e in locks)
    want = live["attribution"]["lock"]["mean_us"] * truth["items"]
    assert abs(drawn_us - want) <= 0.01 * want + len(locks) * 1e-3, (
        drawn_us, want)
    tr, names = _perfetto(shardq_runs["io"][2], tmp_path / "io.json")
    completion_us = CASES["io"][-1]
    for e in tr["traceEvents"]:
        if e.get("cat") == "sched" and e["name"] == "waiting for a lock":
            assert names[(e["pid"], e["tid"])].startswith("shardq"), e
            assert e["dur"] < completion_us, e


def test_window_and_filters(shardq_runs):
    _, live, cap = shardq_runs["contend"]
    whole = json.loads(read(cap, "-j", "--from", "0").stdout)
    n = whole["stages"]["queue_wait"]["count"]
    assert n == live["stages"]["queue_wait"]["count"]
    from cephlat.capture.ctf import Trace
    ev = list(Trace(cap).events())
    deq = [ts for name, ts, _ in ev if name == "osdstage:op_dequeue"]
    mid = (deq[len(deq) // 2] - ev[0][1]) / 1e9
    half = json.loads(read(cap, "-j", "--to", "%.6f" % mid).stdout)
    assert abs(half["stages"]["queue_wait"]["count"] - n // 2) <= 2
    hog = json.loads(read(cap, "-j", "--thread-role", "hog").stdout)
    assert set(hog["threads"]) == {"hog"}
    assert hog["kernel"]["wakeup_delay"]["by_role"].keys() <= {"hog"}
    only = json.loads(read(cap, "-j", "--stage", "queue_wait,offcpu").stdout)
    assert set(only["stages"]) == {"queue_wait"}
    assert set(only["kernel"]) == {"offcpu"}
    p = read(cap, "--thread-role", "nosuch")
    assert_one_line_error(p, "the capture's roles are", status=2)
    p = read(cap, "--from", "%.6f" % mid, "--to", "%.6f" % (mid / 2))
    assert_one_line_error(p, "empty window", status=2)
    p = read(cap, "--from", "100000")
    assert_one_line_error(p, "--from 100000: the capture ends at", status=2)


def _packets(path):
    """Byte offsets where the packets of a stream file start."""
    out, pos, data = [], 0, open(path, "rb").read()
    while pos < len(data):
        out.append(pos)
        size_bits = struct.unpack_from("<Q", data, pos + 24 + 24)[0]
        pos += size_bits // 8
    return out


def _dequeues(cap, streams=None):
    """op_dequeue records in `cap` (its stream files `streams`, else all),
    read by the CTF module alone: each is one queue_wait of the report."""
    from cephlat.capture.ctf import Trace
    t = Trace(cap)
    if streams is not None:
        t.streams = list(streams)
    return sum(1 for c, _, _, _ in t.records()
               if c.name.endswith(":op_dequeue"))


def test_truncated_capture_reads_up_to_the_cut(shardq_runs, tmp_path):
    """A stream file cut anywhere: the report holds every queue_wait of
    the complete packets, no fewer (counted from the cut files by the CTF
    module alone) and, when the cut took some away, fewer than the live
    run's. The file cut is the CPU stream with the most dequeues (a cut
    at byte 40 takes them all), not the largest: on a slower machine the
    largest can be one whose last packet holds no dequeue."""
    _, live, cap = shardq_runs["normal"]
    full = live["stages"]["queue_wait"]["count"]
    assert _dequeues(cap) == full
    per = {f: _dequeues(cap, [f]) for f in os.listdir(cap)
           if f.startswith("stream_cpu")}
    big = max(per, key=per.get)
    assert per[big] > 0, per
    starts = _packets(os.path.join(cap, big))
    size = os.path.getsize(os.path.join(cap, big))
    # a short run: maybe one packet per CPU; the lab's capture (cluster
    # tier) has many
    cuts = [40, size // 2 + 3, size - 5] + starts[1:2]
    for cut in cuts:
        d = tmp_path / ("cut%d" % cut)
        shutil.copytree(cap, d)
        with open(d / big, "r+b") as f:
            f.truncate(cut)
        p = read(str(d), "-j")
        assert p.returncode == 0, p.stderr
        assert "Traceback" not in p.stderr
        if cut not in starts:
            assert "was cut short (%s ends inside a packet)" % big in p.stderr
        rec = json.loads(p.stdout.splitlines()[-1])
        kept = _dequeues(str(d))
        assert rec["stages"]["queue_wait"]["count"] == kept, (cut, kept)
        if cut == 40:
            assert kept == full - per[big], (kept, full, per[big])
    # the user-space stream cut too: no end marker, reports from events
    d = tmp_path / "nometa"
    shutil.copytree(cap, d)
    with open(d / "stream_meta", "r+b") as f:
        f.truncate(_packets(str(d / "stream_meta"))[1])
    p = read(str(d), "-j")
    assert p.returncode == 0 and "no end marker" in p.stderr, p.stderr
    rec = json.loads(p.stdout.splitlines()[-1])
    assert rec["stages"]["queue_wait"]["count"] == full


def test_bad_captures_get_one_error_line(shardq_runs, tmp_path):
    _, _, cap = shardq_runs["forget"]
    assert_one_line_error(read(str(tmp_path / "nope")), "cannot read",
                          "No such file or directory")
    f = tmp_path / "file"
    f.write_bytes(os.urandom(4096))
    assert_one_line_error(read(str(f)), "is not a capture")
    d = tmp_path / "random"
    d.mkdir()
    (d / "metadata").write_bytes(os.urandom(4096))
    (d / "stream_cpu0").write_bytes(os.urandom(65536))
    assert_one_line_error(read(str(d)), "not an osdstage CTF trace")
    d = tmp_path / "corrupt"
    shutil.copytree(cap, d)
    with open(d / "stream_meta", "r+b") as f:
        f.write(os.urandom(8))
    assert_one_line_error(read(str(d)), "stream_meta: corrupt packet at "
                          "byte 0")
    d = tmp_path / "foreign"
    d.mkdir()
    shutil.copy(os.path.join(cap, "metadata"), d / "metadata")
    text = (d / "metadata").read_text().replace('tool = "osdstage"',
                                                'tool = "other"')
    (d / "metadata").write_text(text)
    assert_one_line_error(read(str(d)), "not an osdstage capture")


@pytest.fixture
def sleeper(bpf_ready):
    p = subprocess.Popen(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


def record(pid, cap, *extra):
    return run_tool([OSDSTAGE, "-p", str(pid), "--probes",
                     os.path.join(HERE, "progs", "syncer.json"), "-j", "-w",
                     cap] + list(extra) + ["0.3", "1"])


def test_overwrite_needs_force_and_paths_are_checked(sleeper, tmp_path):
    cap = str(tmp_path / "c.ctf")
    p = record(sleeper, cap)
    assert p.returncode == 0, p.stderr
    assert_one_line_error(record(sleeper, cap), "exists; pass --force")
    p = record(sleeper, cap, "--force")
    assert p.returncode == 0 and "capture %s" % cap in p.stderr, p.stderr
    assert_ctf_readers_accept(cap)
    assert json.loads(read(cap, "-j").stdout) == json.loads(p.stdout)
    assert_one_line_error(record(sleeper, "/nonexistent/dir/c.ctf"),
                          "no directory /nonexistent/dir")
    f = tmp_path / "plain"
    f.write_text("x")
    assert_one_line_error(record(sleeper, str(f), "--force"),
                          "not a capture directory")
    assert_one_line_error(record(sleeper, "/proc/1/c.ctf"), "cannot write")


def _start_recording(exe, cap, items):
    prog = subprocess.Popen([exe, "2", "2", str(items), "normal", "1000",
                             "0", "20", "1", "0"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    tool = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(prog.pid),
                             "--probes", SPEC, "-j", "-w", cap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    wait_for_line(tool.stderr, "Hit Ctrl-C to end", 30)
    prog.stdin.write("go\n")
    prog.stdin.flush()
    return prog, tool


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_recording_until_stopped(shardq_exe, tmp_path, sig):
    """Without a count it records until Ctrl-C, then reports and closes the
    capture; killed with -9 the capture still reads (its last report is
    rebuilt from the events)."""
    cap = str(tmp_path / "c.ctf")
    prog, tool = _start_recording(shardq_exe, cap, 3000)
    try:
        time.sleep(2.5)
        tool.send_signal(sig)
        out, err = tool.communicate(timeout=60)
    finally:
        prog.kill()
        prog.wait()
    p = read(cap, "-j")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    # killed too: whole packets only, each stream in order
    assert_ctf_readers_accept(cap)
    rec = json.loads(p.stdout.splitlines()[-1])
    n = rec["stages"]["queue_wait"]["count"]
    if sig == signal.SIGINT:
        assert tool.returncode == 0 and "none lost" in err, err
        assert p.stderr == "" and json.loads(out) == rec
        assert n > 500
    else:
        assert tool.returncode == -signal.SIGKILL
        assert "no end marker" in p.stderr
        # events reach the files at least every second
        assert n > 300 and rec["type"] == "window"


def test_capture_names_its_format_and_vocabulary(shardq_runs):
    from cephlat.capture.format import FORMAT
    from cephlat.model.vocab import live
    _, _, cap = shardq_runs["normal"]
    from cephlat.capture.ctf import Trace
    env = Trace(cap).env
    assert int(env["format"]) == FORMAT
    assert json.loads(env["vocab"]) == live().enums


@pytest.mark.parametrize("run", range(3))
def test_slowest_ties_call_stages_to_their_op_exactly(shardq_exe, tmp_path,
                                                      run):
    """Call stages carry the op their thread executes: with four workers
    taking ops in bursts, every op listed by --slowest has exactly the one
    dequeue_op call it ran, inside its own dequeue -> next dequeue."""
    from shardq import run_case
    _, live, cap = run_case(shardq_exe, "normal", str(tmp_path / "c.ctf"),
                            ["-S", "queue_wait,dequeue_op"])
    items = live["stages"]["queue_wait"]["count"]
    assert live["stages"]["dequeue_op"]["count"] == items
    p = read(cap, "--slowest", str(items), "-j")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["slowest"]
    assert len(rows) == items
    for r in rows:
        names = [s["stage"] for s in r["stages"]]
        assert names == ["dequeue_op"], r


def test_capture_samples_its_wall_clock_at_start_and_end(shardq_runs):
    """Format 3: the wall clock against the timestamps at the start and at
    the end (capture/clock.py), for captures of several hosts: the start's
    offset is the metadata's, both brackets are those of three clock reads,
    the two offsets differ by no more than a time daemon may slew the
    clock (500 ppm) over the capture, and the host's NTP state is the
    kernel's (adjtimex)."""
    from cephlat.capture import clock
    from cephlat.capture.reader import Capture
    for case in ("normal", "hold"):
        _, _, path = shardq_runs[case]
        cap = Capture(path)
        assert len(cap.clocks) == 2, cap.clocks
        a, b = cap.clocks
        assert a["offset_ns"] == cap.clock_offset_ns
        # the start's sample is taken as the writer opens (the ring may
        # already hold events from the attach just before); the end's
        # before the end marker
        assert a["mono_ns"] < b["mono_ns"] <= cap.last_ns
        for s in (a, b):
            assert 0 < s["read_ns"] < 10 ** 6, s
            assert s["maxerror_ns"] >= s["esterror_ns"] >= 0, s
        assert abs(b["offset_ns"] - a["offset_ns"]) <= \
            500e-6 * (b["mono_ns"] - a["mono_ns"]) + a["read_ns"] + \
            b["read_ns"], (a, b)
        now = clock.ntp_state()
        assert a["synced"] == b["synced"] == now["synced"], (a, b, now)
        # wall time of the end sample: its own offset
        assert cap.wall(b["mono_ns"]) == (b["mono_ns"] + b["offset_ns"]) / 1e9
        assert cap.clock_error_ns() == (clock.uncertainty_ns([a, b]))


def test_window_reports_agree_with_themselves(shardq_runs):
    """The unit tier's invariants (tests/invariants.py: per-class rows add
    up, the attribution adds up, the verdict quotes the tables and calls
    no sleeping workers saturated, --slowest rows account for their span)
    over random windows and filters of the captures made here."""
    from invariants import check_capture
    for mode in ("normal", "hold", "lock", "io"):
        assert check_capture(shardq_runs[mode][2], n=30) > 0, mode
