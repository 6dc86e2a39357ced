"""BPF tier: the capture recorder (lib/native/recorder.c) keeps up. The
controlled queue program, traced flat out into a ring buffer far smaller
than the default, gives a capture with every event it made (exact ground
truth: an op_enqueue and an op_dequeue per item), run after run; and the
recorder alone drains 500k events/s of osdstage-sized records losing none.

(Drained by Python's loop every 0.1 s, as before the recorder had a thread
of its own, the 1 MB ring lost about 13 % of the queue program's events
here.)"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import shardq
from conftest import need, trace_until_exit

shardq_exe = shardq.shardq_exe          # the fixture, for this module too
ITEMS = 50000


@pytest.mark.parametrize("run", range(3))
def test_burst_recorded_whole(shardq_exe, tmp_path, run):
    """Items in bursts of 64 with no gap: the program's top rate (100-200k
    events/s on the 2-core VM), into a 1 MB ring (12k events). The op table
    is sized so that no item goes untracked (op_map_full 0)."""
    cap = str(tmp_path / "c.ctf")
    prog = subprocess.Popen([shardq_exe, "2", "2", str(ITEMS), "normal", "0",
                             "0", "20", "64", "0"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    truth, out, err, status = trace_until_exit(
        prog, ["--probes", shardq.SPEC, "-j", "--no-kernel", "--max-ops",
               "1000000", "--ring-mb", "1", "-w", cap])
    assert status == 0, err
    assert truth["items"] == ITEMS
    rec = json.loads(out.splitlines()[-1])
    assert rec["lost"]["op_map_full"] == 0 and \
        rec["lost"]["events_lost"] == 0, rec["lost"]
    m = re.search(r"capture %s: (\d+) events, [\d.]+ MB, none lost" %
                  re.escape(cap), err)
    assert m, err
    assert int(m.group(1)) == 2 * ITEMS, err
    assert rec["stages"]["queue_wait"]["count"] == ITEMS


def test_recorder_alone_at_500k_events_per_s(bpf_ready, tmp_path):
    """progs/ringgen.bpf.c fills an 8 MB ring at 500k events/s for 2 s
    (80-byte records, as op_enqueue): every one written, none lost."""
    need(shutil.which("clang") is not None, "clang missing (run: make setup)")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ringgen
    res = ringgen.run(ringgen.build(str(tmp_path)), 500000, 2.0, ring_mb=8)
    assert res["lost"] == 0 and res["events"] == res["made"], res
    # the generator reached the rate (a starved host would make this moot)
    assert res["made"] >= 500000, res
