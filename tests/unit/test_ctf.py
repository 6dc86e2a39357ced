"""CTF writer: babeltrace2 reads what it writes, with readable field names;
our reader reads it back, survives truncation, rejects foreign files."""
import os
import shutil
import stat
import subprocess
import time

import pytest

from cephlat.capture.ctf import EventClass, Trace, Writer
from cephlat.errors import UserError

from conftest import need

CLASSES = [
    EventClass("osdstage:op", [("op", "u64"), ("tid", "u32"),
                               ("queue_wait_ns", "u64")]),
    EventClass("osdstage:thread", [("tid", "u32"), ("comm", "string"),
                                   ("role", "string"), ("prio", "s32")]),
]
N = 1000


def make(path, n=N, packet=4096):
    t0 = time.monotonic_ns()
    offset = time.time_ns() - t0
    with Writer(str(path), CLASSES, env={"pid": 1234, "ceph_version":
                                         "16.2.15"},
                clock_offset_ns=offset, packet_size=packet) as w:
        for i in range(n):
            w.write("osdstage:op", t0 + i * 1000, 0x5500 + i, 77, 1234 * i)
        w.write("osdstage:thread", t0 + n * 1000, 77, "tp_osd_tp", "worker",
                -5)
    return t0


def test_babeltrace2_reads_it(tmp_path):
    need(shutil.which("babeltrace2") is not None, "babeltrace2 missing "
         "(make setup)")
    make(tmp_path / "t")
    out = subprocess.run(["babeltrace2", str(tmp_path / "t")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == N + 1
    assert "osdstage:op:" in lines[0] and "queue_wait_ns = 0" in lines[0]
    assert "op = %d" % (0x5500 + 5) in lines[5]
    assert 'comm = "tp_osd_tp", role = "worker", prio = -5' in lines[-1]
    # wall-clock time from the clock offset: today's date
    info = subprocess.run(["babeltrace2", "--clock-date", str(tmp_path / "t")],
                          capture_output=True, text=True).stdout
    assert time.strftime("%Y-%m-%d") in info.splitlines()[0]


def test_files_are_private_and_not_overwritten(tmp_path):
    make(tmp_path / "t")
    for f in ("metadata", "stream_0"):
        assert stat.S_IMODE(os.stat(tmp_path / "t" / f).st_mode) == 0o600
    with pytest.raises(UserError) as e:
        make(tmp_path / "t")
    assert "exists" in str(e.value) and "--force" in str(e.value)


def test_round_trip_and_whole_packets(tmp_path):
    t0 = make(tmp_path / "t")
    size = os.path.getsize(tmp_path / "t" / "stream_0")
    assert size % 4096 == 0
    tr = Trace(str(tmp_path / "t"))
    ev = list(tr.events())
    assert len(ev) == N + 1 and not tr.truncated
    assert ev[3] == ("osdstage:op", t0 + 3000, {"op": 0x5503, "tid": 77,
                                                "queue_wait_ns": 3702})
    assert ev[-1][2] == {"tid": 77, "comm": "tp_osd_tp", "role": "worker",
                         "prio": -5}
    assert tr.env["pid"] == "1234" and tr.env["ceph_version"] == "16.2.15"
    assert tr.env["domain"] == tr.env["tracer_name"] == "osdstage"


def test_traces_naming_the_tool_cephlat_read_the_same(tmp_path):
    """The metadata's domain and tracer_name name the tool; a trace whose
    metadata says "cephlat" there (tests/fixtures/*-v0.ctf do) reads to
    the same events."""
    make(tmp_path / "t")
    want = list(Trace(str(tmp_path / "t")).events())
    meta = tmp_path / "t" / "metadata"
    text = meta.read_text()
    assert text.count('"osdstage";') == 2
    meta.write_text(text.replace('"osdstage";', '"cephlat";'))
    tr = Trace(str(tmp_path / "t"))
    assert tr.env["domain"] == tr.env["tracer_name"] == "cephlat"
    assert list(tr.events()) == want


@pytest.mark.parametrize("cut", [100, 4096, 4096 + 17, 3 * 4096 - 1])
def test_truncated_reads_whole_packets(tmp_path, cut):
    make(tmp_path / "t")
    with open(tmp_path / "t" / "stream_0", "r+b") as f:
        f.truncate(cut)
    tr = Trace(str(tmp_path / "t"))
    ev = list(tr.events())
    whole = cut // 4096
    assert tr.packets == whole
    assert tr.truncated == (cut % 4096 != 0)
    # every event of the complete packets, in order
    assert [e[2]["op"] for e in ev] == list(range(0x5500, 0x5500 + len(ev)))
    assert (len(ev) > 0) == (whole > 0)


def test_foreign_and_corrupt_files(tmp_path):
    d = tmp_path / "x"
    d.mkdir()
    (d / "metadata").write_bytes(os.urandom(300))
    with pytest.raises(UserError) as e:
        Trace(str(d))
    assert "not an osdstage CTF trace" in str(e.value)
    make(tmp_path / "t")
    with open(tmp_path / "t" / "stream_0", "r+b") as f:
        f.seek(4096)
        f.write(os.urandom(16))
    with pytest.raises(UserError) as e:
        list(Trace(str(tmp_path / "t")).events())
    assert "corrupt packet at byte 4096" in str(e.value)


def test_arrays_of_integers_and_bytes(tmp_path):
    """A stack copy's fields: addresses (x64[N]) and bytes (u8[N]) read
    back the same, by our reader, numpy's records and babeltrace2."""
    import numpy as np
    from cephlat.capture.stream import class_dtype
    from cephlat.capture.ctf import array_of
    cls = [EventClass("osdstage:stack", [("n", "u32"), ("k", "x64[4]"),
                                         ("u", "u8[16]"), ("m", "u8")])]
    assert array_of("x64[4]") == ("x64", 4) and array_of("u8") is None
    t0 = time.monotonic_ns()
    ks = (0xffffffff81000010, 2, 3, 0)
    mem = bytes(range(16))
    with Writer(str(tmp_path / "t"), cls, clock_offset_ns=0) as w:
        w.write("osdstage:stack", t0, 7, ks, mem, 9)
    tr = Trace(str(tmp_path / "t"))
    (name, ts, got), = list(tr.events())
    assert got == {"n": 7, "k": ks, "u": mem, "m": 9}
    c = next(iter(tr.classes.values()))
    assert [t for _, t, _ in c.fields] == ["u32", "x64[4]", "u8[16]", "u8"]
    dt = class_dtype(tr.context, c)
    assert dt["k"].shape == (4,) and dt["u"].shape == (16,)
    raw = np.zeros(1, dt)
    assert raw.itemsize == 4 + 8 + 4 + 4 * 8 + 16 + 1
    if shutil.which("babeltrace2"):
        out = subprocess.run(["babeltrace2", str(tmp_path / "t")],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert "[0] = 0xFFFFFFFF81000010" in out.stdout, out.stdout
