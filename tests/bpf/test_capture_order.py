"""BPF tier: captures every CTF reader takes, made under stress on purpose.

babeltrace2 merges a trace's streams by time and stops at the first
message older than one it has already given (its muxer). The recorder
(lib/native/recorder.c) must therefore write each stream in time order
across its packets, whatever order the records reach the ring in: a
program interrupted between reading the clock and reserving its record,
a task moving between CPUs, a ring that overflows. Here each happens on
purpose, run after run, and babeltrace2 must read every event we wrote.

(Until the recorder kept its stream's last timestamp across packets, a
record older than the previous packet's last one opened the next packet
back in time: babeltrace2 failed on 1 lab capture in a few, with "Youngest
upstream message iterator wrapper's timestamp is less than muxer's message
iterator's last returned timestamp".)"""
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

import shardq
from conftest import assert_ctf_readers_accept, need, trace_until_exit

shardq_exe = shardq.shardq_exe          # the fixture, for this module too
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def ringgen_obj(bpf_ready, tmp_path_factory):
    need(shutil.which("clang") is not None, "clang missing (run: make setup)")
    sys.path.insert(0, HERE)
    import ringgen
    return ringgen, ringgen.build(str(tmp_path_factory.mktemp("ringgen")))


@pytest.mark.parametrize("run", range(3))
def test_late_stamped_records_migrating_into_a_full_ring(ringgen_obj,
                                                         tmp_path, run):
    """Every 7th record stamped 20 us early (what an interrupted program
    does, ~800 records a packet: packets begin on one over and over), the
    generating thread moved to another CPU at every call, a 256 KB ring
    drained only every 0.1 s (it overflows). Every record written is read
    back by babeltrace2, in order."""
    ringgen, obj = ringgen_obj
    cap = str(tmp_path / "rg.ctf")
    res = ringgen.run(obj, 300000, 1.5, ring_mb=0.25, drain_us=None,
                      skew_every=7, skew_ns=20000, keep=cap, migrate=True)
    assert res["lost"] > 0, res                 # the ring overflowed
    assert res["reordered"] > 0, res            # late records were met
    streams = [f for f in os.listdir(cap) if f.startswith("stream_cpu")]
    assert len(streams) == min(2, len(os.sched_getaffinity(0))), streams
    assert assert_ctf_readers_accept(cap) == res["events"] > 0


def _migrate(pid, stop):
    """Move every thread of `pid` to the next CPU, every millisecond."""
    cpus = sorted(os.sched_getaffinity(0))
    i = 0
    while not stop.wait(0.001):
        i += 1
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            return
        for n, tid in enumerate(tids):
            try:
                os.sched_setaffinity(int(tid), {cpus[(i + n) % len(cpus)]})
            except OSError:
                pass


@pytest.mark.parametrize("run", range(2))
def test_osdstage_capture_migrating_into_a_full_ring(shardq_exe, tmp_path,
                                                     run):
    """The controlled queue at its top rate, its threads moved between
    CPUs every millisecond, every stage and the scheduler recorded into a
    4 KB ring (about 45 events): most events are lost, and counted; what
    was written, babeltrace2 reads whole."""
    cap = str(tmp_path / "q.ctf")
    prog = subprocess.Popen([shardq_exe, "2", "2", "20000", "normal", "0",
                             "0", "20", "64", "0"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    stop = threading.Event()
    mover = threading.Thread(target=_migrate, args=(prog.pid, stop))
    mover.start()
    try:
        truth, _, err, status = trace_until_exit(
            prog, ["--probes", shardq.SPEC, "-j", "--ring-mb", "0.004",
                   "-w", cap])
    finally:
        stop.set()
        mover.join()
    assert status == 0, err
    assert truth["items"] == 20000
    m = re.search(r"capture %s: (\d+) events, [\d.]+ MB; (\d+) events LOST"
                  % re.escape(cap), err)
    assert m, err
    # trace_until_exit had babeltrace2 read it: the count it read is ours
    assert assert_ctf_readers_accept(cap) >= int(m.group(1)) > 0
