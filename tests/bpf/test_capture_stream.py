"""BPF tier: the capture reader streams (capture/stream.py): a capture of
the controlled sharded queue made here reads to the same events and the
same reports however it is cut into rounds, and reading a capture twice
the size does not take twice the memory.

(That the reports are the ones the record-by-record reader gave is pinned
by tests/unit/test_capture_fixture.py on the format-0 fixtures and by
test_capture_shardq.py against the live run.)"""
import json
import os
import subprocess

import pytest

import shardq
from conftest import OSDSTAGE, PYTHON, run_tool, trace_until_exit

shardq_exe = shardq.shardq_exe          # the fixture, for this module too
SPEC = shardq.SPEC

# every offline view, as arguments after -r CAPTURE
VIEWS = [
    ["-j"],
    [],
    ["--from", "0.2", "--to", "0.9", "-j"],
    ["-S", "queue_wait,offcpu", "-j"],
    ["--thread-role", "worker", "-j"],
    ["--from", "0.1", "--thread-role", "worker", "--slowest", "4", "-j"],
    ["--slowest", "5", "-j"],
    ["--slowest", "5"],
]
PICTURES = [
    ["--html", "{d}/page.html", "--perfetto", "{d}/trace.json"],
    ["--from", "0.5", "--timeline-ms", "30", "--perfetto", "{d}/t2.json"],
]
_CAPS = {}


def record(exe, path, items):
    """A capture of the queue program: `items` items in bursts of 8,
    20 us apart (about 6 events per item), one report a second."""
    prog = subprocess.Popen([exe, "2", "2", str(items), "normal", "20", "0",
                             "20", "8", "0"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    _, _, err, status = trace_until_exit(
        prog, ["--probes", SPEC, "-j", "-w", path, "--ring-mb", "64", "1"])
    assert status == 0, err
    assert "capture %s:" % path in err, err
    return path


def size(cap):
    return sum(os.path.getsize(os.path.join(cap, f)) for f in os.listdir(cap))


@pytest.fixture(scope="module")
def captures(shardq_exe, tmp_path_factory):
    if not _CAPS:
        d = tmp_path_factory.mktemp("stream")
        # how many events an item makes depends on the host's load (busy
        # workers sleep less between items: fewer scheduler events), and
        # the small capture's fixed part (metadata, thread states, idle
        # scheduler events) weighs more: the large one is recorded with
        # more items until it is 2.5 times the small one's bytes (five
        # times the items gave 2.7x on a quiet host, three times 1.89x)
        _CAPS["small"] = record(shardq_exe, str(d / "small.ctf"), 20000)
        items = 100000
        for k in range(3):
            _CAPS["large"] = record(shardq_exe, str(d / ("large%d.ctf" % k)),
                                    items)
            if size(_CAPS["large"]) > 2.5 * size(_CAPS["small"]):
                break
            items *= 2
    return _CAPS


def read(cap, args, chunk_kb=None, cwd=None):
    env = dict(os.environ, TZ="UTC")
    if chunk_kb:
        env["OSDSTAGE_READ_CHUNK_KB"] = str(chunk_kb)
    p = run_tool([OSDSTAGE, "-r", cap] + args, env=env, cwd=cwd,
                 timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def test_streamed_events_are_the_record_by_record_ones(captures):
    """Every BPF event, in the same order with the same values, as the
    record-by-record CTF reader gives them, read in many small rounds."""
    from cephlat.capture import stream
    from cephlat.capture.ctf import Trace
    from cephlat.capture.reader import Capture
    cap = captures["small"]
    old = stream._ROUND_BYTES
    stream._ROUND_BYTES = 64 << 10
    try:
        c = Capture(cap)
        got = c.events
        n = 0
        for cls, ts, ctx, vals in Trace(cap).records():
            if cls.id >= c.n_bpf:
                continue
            name, ts2, d = next(got)
            assert (name, ts2) == (cls.name.split(":", 1)[1], ts)
            assert d == dict(zip(cls.names, vals))
            n += 1
        assert next(got, None) is None
        assert n > 50000
    finally:
        stream._ROUND_BYTES = old


@pytest.mark.parametrize("args", VIEWS + PICTURES,
                         ids=[" ".join(a) or "text" for a in
                              VIEWS + PICTURES])
def test_every_view_reads_the_same_in_any_rounds(captures, tmp_path, args):
    """Rounds of 64 KiB (a packet) and of the default size give the same
    reports, byte for byte."""
    outs = []
    for kb in (64, None):
        d = tmp_path / ("r%s" % kb)
        d.mkdir()
        p = read(captures["small"], [a.format(d=d) for a in args], kb)
        files = {f: (d / f).read_bytes() for f in sorted(os.listdir(d))}
        outs.append((p.stdout, p.stderr.replace(str(d), "D"), files))
    assert outs[0] == outs[1]
    if "-j" in args:
        for line in outs[0][0].splitlines():
            json.loads(line)


def _peak_rss_kb(cap, args):
    """Peak RSS of a child `osdstage.py -r cap args` (KB)."""
    code = ("import resource, subprocess, sys; "
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "assert p.returncode == 0; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    p = subprocess.run([PYTHON, "-c", code, PYTHON, OSDSTAGE, "-r", cap] +
                       args, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OSDSTAGE_READ_CHUNK_KB="1024"))
    assert p.returncode == 0, p.stderr
    return int(p.stdout)


@pytest.mark.parametrize("args", [["-j"], ["--slowest", "5", "-j"],
                                  ["--html", os.devnull]])
def test_memory_stays_bounded(captures, args):
    """A capture twice the size does not take twice the memory to read:
    what the reader holds is bounded by its rounds, not by the capture."""
    small = _peak_rss_kb(captures["small"], args)
    large = _peak_rss_kb(captures["large"], args)
    sizes = [size(c) for c in (captures["small"], captures["large"])]
    assert sizes[1] > 2 * sizes[0], sizes
    assert large < 1.4 * small, (small, large, sizes)


def test_timeline_states_from_snapshots_are_a_full_replays(captures):
    """The timeline's thread states at its start come from snapshots the
    window pass kept (Capture.sched_at): the same state and since when
    for every thread as replaying every scheduler event before it from
    no state (Capture.sched(recorded=False)), wherever the start is (the
    timeline sorts what it draws: the threads' order does not matter)."""
    from cephlat.capture import stream
    from cephlat.capture.reader import Capture
    old = stream._ROUND_BYTES
    stream._ROUND_BYTES = 64 << 10          # many chunks, many snapshots
    try:
        c = Capture(captures["small"])
        c.window(c.first_ns, c.last_ns)
        assert len(c._sched_snaps) > 4
        span = c.last_ns - c.first_ns
        for frac in (0, 0.01, 0.3, 0.5, 0.77, 0.999, 1):
            t = c.first_ns + int(span * frac)
            got = c.sched_at(t).t
            rp, chunks = c.sched(t, recorded=False)
            for _ in chunks:
                pass
            want = rp.t
            assert sorted(got.state.items()) == sorted(want.state.items())
            assert sorted(got.since.items()) == sorted(want.since.items())
    finally:
        stream._ROUND_BYTES = old


def _op_quantiles(cap, q0, q1):
    """The times by which fractions q0 and q1 of the capture's ops were
    queued: a window of a known share of the items, however long the
    capture idles before and after the program's run (a fraction of the
    capture's span once held 232 ops where 300 were asked for)."""
    import numpy as np
    ts = np.concatenate([ch.recs[c]["_ts"] for ch in
                         cap.chunks(["op_enqueue"]) for c in ch.recs])
    ts.sort()
    if q0 <= 0 and q1 >= 1:
        return cap.first_ns, cap.last_ns
    return (int(ts[int(q0 * (len(ts) - 1))]),
            int(ts[int(q1 * (len(ts) - 1))]))


def _slowest_rows(path, t0, t1, n, mode):
    """--slowest n of the ops queued between quantiles t0 and t1, as
    printed: mode "pick" (the ops SlowPick names), "all" (every op
    followed) or "wrong" (a bound the ops found do not hold: every op
    followed after all)."""
    from cephlat.capture import reader
    from cephlat.model.slowest import slowest
    c = reader.Capture(path)
    if mode == "all":
        c._stage_ops = lambda: False
    elif mode == "wrong":
        c._slow_pick = lambda *a: _WrongPick(c, *a)
    else:
        picks = []
        c._slow_pick = lambda *a: picks.append(
            reader.Capture._slow_pick(c, *a)) or picks[0]
    a, b = _op_quantiles(c, t0, t1)
    _, ops = c.window(a, b, slowest=n, spans=False)
    if mode == "pick":
        # the bound held: no pass of every op was needed
        assert picks and picks[0].addresses() is not None
        assert picks[0].holds(ops)
    return slowest(c, ops.by_rank(), n)


class _WrongPick:
    """A SlowPick whose bound nothing found holds: it names no address."""

    def __init__(self, cap, t0, t1, n):
        pass

    def addresses(self):
        import numpy as np
        return np.zeros(0, np.uint64)

    def holds(self, summary):
        assert not summary.heap
        return False


@pytest.mark.parametrize("n", [1, 5, 300])
@pytest.mark.parametrize("t0,t1", [(0, 1), (0.1, 0.4), (0.7, 0.75)])
def test_slowest_of_the_candidates_are_the_slowest_of_all(captures, n, t0,
                                                          t1):
    """--slowest follows only the ops whose address an event at the
    bound names (SlowPick): the same rows as following every op, and when
    the bound is wrong, the same rows again from every op."""
    path = captures["small"]
    want = _slowest_rows(path, t0, t1, n, "all")
    assert len(want) == n
    assert _slowest_rows(path, t0, t1, n, "pick") == want
    assert _slowest_rows(path, t0, t1, n, "wrong") == want


def test_slowest_follows_few_ops(captures):
    """The candidates of the 5 slowest are a few addresses, not the
    capture's ops: what makes --slowest as fast as -j."""
    from cephlat.capture.reader import Capture
    c = Capture(captures["small"])
    p = c._slow_pick(c.first_ns, c.last_ns, 5)
    addrs = p.addresses()
    ops = len(c._last_refs()[0])
    assert addrs is not None and 5 <= len(addrs) < 0.05 * ops, (
        len(addrs), ops)
