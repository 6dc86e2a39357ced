"""Traces with string fields read in bulk (capture/textstream.py) give
what the record-by-record reader gives, also where bytes inside a
record look like a record's header; a damaged packet is one clear
error. rbdrecord's trace as columns (rbd/columns.py) pairs calls and
OSD ops as its events mean: a resend replaces the attempt before it, an
op ends at its completion, a completion handle reused starts another
call, a completion of no call and a call never completed are
counted."""
import os
import random
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))

from cephlat.capture import ctf                                # noqa: E402
from cephlat.capture.textstream import TextStreams, strings    # noqa: E402
from cephlat.errors import UserError                           # noqa: E402

CLASSES = [("a", [("x", "u32"), ("t", "u64"), ("s", "string")]),
           ("b", [("s", "string"), ("y", "s32"), ("u", "string"),
                  ("z", "u64")]),
           ("c", [("x", "u32")])]


def _write(path, n, seed, packet_size=1024, ordered=True):
    """n events of CLASSES with random strings (some longer than 32
    bytes); every fifth 'a' holds a fake header in its fixed fields: a
    u32 class id then the event's own timestamp. Not `ordered`: the
    timestamps shuffled (a packet's begin and end, its first and last
    event's, then miss some of its events)."""
    rnd = random.Random(seed)
    stamps = [1000000 + i * 7 for i in range(n)]
    if not ordered:
        rnd.shuffle(stamps)
    w = ctf.Writer(path, [ctf.EventClass(c, f) for c, f in CLASSES],
                   packet_size=packet_size, force=True,
                   event_context=[("tid", "u32")], whole_packets=False)
    want = []
    for i in range(n):
        ts = stamps[i]
        name = rnd.choice("abc")
        s = "".join(rnd.choice("xyz:.0123") for _ in range(
            rnd.choice((0, 3, 20, 45, 90))))
        if name == "a":
            vals = (1, ts, s) if i % 5 == 0 else (rnd.randrange(1 << 32),
                                                   rnd.randrange(1 << 64), s)
        elif name == "b":
            vals = (s, -i, s[::-1], i * 3)
        else:
            vals = (i,)
        w.write(name, ts, *vals, ctx=(i % 4,))
        want.append((name, ts, (i % 4,) + vals))
    w.close()
    return want


def _read(path):
    tr = ctf.Trace(path)
    want = {c: ("_ctx0",) + tuple(n for n, _ in f) for c, f in CLASSES}
    got = []
    for buf, out in TextStreams(tr).spans(want):
        for name, (ts, f) in out.items():
            cols = []
            for k in want[name]:
                v = f[k]
                cols.append([b.decode() for b in strings(buf, v).tolist()]
                            if isinstance(v, tuple) else v.tolist())
            got += [(name, t) + tuple(row) for t, *row in
                    zip(ts.tolist(), *cols)]
    return sorted(got, key=lambda g: g[1])


@pytest.mark.parametrize("seed,ordered", [(1, True), (2, True), (3, True),
                                         (4, False)])
def test_bulk_read_is_the_record_by_record_read(tmp_path, seed, ordered):
    path = str(tmp_path / "t")
    want = _write(path, 3000, seed, ordered=ordered)
    got = _read(path)
    assert got == sorted([(n, ts) + v for n, ts, v in want],
                         key=lambda g: g[1])
    # the record-by-record reader agrees with what was written
    rec = [(c.name, ts) + ctx + vals
           for c, ts, ctx, vals in ctf.Trace(path).records()]
    assert sorted(rec, key=lambda g: g[1]) == got


def test_a_damaged_packet_is_one_clear_error(tmp_path):
    path = str(tmp_path / "t")
    _write(path, 500, 4)
    stream = os.path.join(path, "stream_0")
    data = bytearray(open(stream, "rb").read())
    # the second packet's first event's class id: no class has it
    size = int.from_bytes(data[ctf._HDR.size + 24:ctf._HDR.size + 32],
                          "little") // 8
    data[size + ctf.PACKET_HEAD] = 0xee
    open(stream, "wb").write(bytes(data))
    with pytest.raises(UserError, match="corrupt event at byte %d" % (
            size + ctf.PACKET_HEAD)):
        _read(path)


# ------------------------------------------------------- rbdrecord's pairing
def _client_trace(path, events):
    from cephlat.rbd import events as rbdev
    w = rbdev.open_trace(path, {"pid": 1}, 0)
    for ts, name, vals in sorted(events, key=lambda e: e[0]):
        w.write(name, ts, *vals, ctx=(1, 1, 1))
    w.close()
    from cephlat.rbd.reader import RbdTrace
    return RbdTrace(path)


def _enter(ts, comp, off):
    return (ts, "librbd:aio_read_enter", (1, "img", "", 0, off, 4096, comp))


def _op(ts, kind, tid, attempts=0):
    rid = "client.9.0:%d" % tid
    if kind == "send":
        return (ts, "rbdrecord:osd_op_send", (
            rid, 9, 0, tid, 2, 1, 0, "1.0", "rbd_data.ab.%016x" % tid, 27,
            0x10, attempts, 1, 0x1201, "read", 0, 4096))
    return (ts, "rbdrecord:osd_op_" + kind, (rid, 9, 0, tid, 2))


def test_calls_and_ops_pair_as_their_events_mean(tmp_path):
    tr = _client_trace(str(tmp_path / "t"), [
        _enter(100, 0xa, 0),
        (200, "librbd:aio_complete_enter", (0xa, 4096)),
        (250, "rbdrecord:aio_release", (0xa,)),
        _enter(300, 0xa, 8192),             # the handle reused
        (400, "librbd:aio_complete_enter", (0xa, 4096)),
        (450, "librbd:aio_complete_enter", (0xb, 0)),   # of no call
        _enter(500, 0xc, 4096),             # never completed
        _op(110, "send", 1), _op(120, "reply", 1),
        _op(130, "send", 1, attempts=1),    # a resend: replaces it
        _op(140, "reply", 1), _op(150, "done", 1),
        _op(310, "send", 2), _op(320, "reply", 2), _op(330, "done", 2),
        _op(340, "reply", 2)])  # after its completion: not its own
    calls = [(r.off, r.submit, r.done, r.released) for r in tr.requests]
    assert calls == [(0, 100, 200, 250), (8192, 300, 400, None)]
    assert (tr.unmatched, tr.incomplete) == (1, 1)
    one, two = tr.osd_ops["client.9.0:1"], tr.osd_ops["client.9.0:2"]
    assert (one.send, one.reply, one.done, one.attempts) == (130, 140, 150,
                                                             1)
    assert (two.send, two.reply, two.done) == (310, 320, 330)
    assert two.object == "rbd_data.ab.%016x" % 2 and two.kind == "read"
    assert two.pgid == "1.0" and two.osd == 2
    assert tr.cols.find("client.9.0:2") == 1
    assert tr.cols.find("client.9.0:3") is None
