"""rbdrecord without root: BPF records decoded with the build's layouts
into a trace, as eBPF mode writes it (rbd/records.py, rbd/events.py),
read back with babeltrace2, summarized and converted to fio; --force
replaces only what rbdrecord wrote."""
import json
import os
import shutil
import struct
import subprocess

import pytest

from conftest import (BUILD, PYTHON, REPO, assert_one_line_error, check_reports,
                      need)

RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")
PID, TID, PTHREAD = 4242, 4243, 0x7f0012345600
IMAGE, COMP = 0x55aa00, 0x66bb00


def _abi():
    need(os.path.exists(os.path.join(BUILD, "rbdrecord.abi.json")),
         "BPF objects not built (run: make)")
    from cephlat import abi
    return abi.load("rbdrecord", BUILD)


def client_records(a):
    """What the ring buffer holds (lib/native/recorder.c's raw drain) for
    a client that opens rbd/img1, reads 4 KiB at 8 KiB, writes 16 KiB at
    1 MiB, flushes, closes."""
    from cephlat.rbd.records import Layout
    ev, op = a.enum("rbd_ev"), a.enum("rbd_op")
    out = []

    def rec(layout, kind, ts, **values):
        raw = Layout(a, layout).pack(**{"h.ev": ev[kind], "h.tid": TID,
                                        "h.ts": ts, "h.pthread_id": PTHREAD},
                                     **values)
        out.append(struct.pack("<II", len(raw), 0) + raw +
                   bytes(-len(raw) % 8))

    rec("rbd_open_rec", "RBD_OPEN_IMAGE", 1000, enter_ts=900,
        imagectx=IMAGE, **{"img.name": b"img1", "img.pool": b"rbd"})
    for i, (o, off, n) in enumerate((("RBD_OP_READ", 8192, 4096),
                                     ("RBD_OP_WRITE", 1 << 20, 16384),
                                     ("RBD_OP_FLUSH", 0, 0))):
        t = 2000 + 1000 * i
        rec("rbd_aio_rec", "RBD_AIO_ENTER", t, imagectx=IMAGE, off=off,
            len=n, buf=0x1000, completion=COMP + i, op=op[o])
        rec("rbd_aio_rec", "RBD_AIO_EXIT", t + 10)
        rec("rbd_complete_rec", "RBD_AIO_COMPLETE", t + 500,
            completion=COMP + i, rval=n, rval_known=1)
    rec("rbd_close_rec", "RBD_CLOSE_IMAGE_ENTER", 9000, imagectx=IMAGE)
    rec("rbd_close_rec", "RBD_CLOSE_IMAGE_EXIT", 9100)
    return b"".join(out)


def test_records_decode_to_librbd_events():
    from cephlat.rbd.records import Decoder
    evs = Decoder(PID, _abi()).decode(client_records(_abi()))
    ctx = (PTHREAD, TID, PID)
    assert evs[:3] == [
        (900, "librbd:open_image_enter", ctx, (IMAGE, "img1", "", "", 0)),
        (1000, "librbd:open_image_exit", ctx, (0,)),
        (1000, "rbdrecord:image_pool", ctx, (IMAGE, "rbd"))]
    img = (IMAGE, "img1", "", 0)
    assert evs[3:6] == [
        (2000, "librbd:aio_read_enter", ctx, img + (8192, 4096, COMP)),
        (2010, "librbd:aio_read_exit", ctx, (0,)),
        (2500, "librbd:aio_complete_enter", ctx, (COMP, 4096))]
    assert evs[7][1:] == ("librbd:aio_write_enter", ctx, img + (
        1 << 20, 16384, 0x1000, 0, 16384, COMP + 1))
    assert evs[11][1:] == ("librbd:aio_flush_enter", ctx, img + (COMP + 2,))
    assert evs[-2:] == [
        (9000, "librbd:close_image_enter", ctx, (IMAGE, "img1", "")),
        (9100, "librbd:close_image_exit", ctx, (0,))]


def write_trace(path):
    """The client's trace, written the way eBPF mode writes it."""
    from cephlat.rbd import events
    from cephlat.rbd.records import Decoder
    w = events.open_trace(path, {"pid": PID}, 0)
    for ts, name, ctx, vals in Decoder(PID, _abi()).decode(
            client_records(_abi())):
        w.write(name, ts, *vals, ctx=ctx)
    w.close()
    return path


@pytest.fixture
def trace(tmp_path):
    pytest.importorskip("bt2", reason="python3-bt2 missing (make setup)")
    return write_trace(str(tmp_path / "trace"))


def test_trace_reads_back_summarizes_and_converts(trace, tmp_path):
    from cephlat.rbd.reader import RbdTrace
    tr = RbdTrace(trace)
    assert tr.images[IMAGE]["name"] == "img1"
    assert tr.images[IMAGE]["pool"] == "rbd"
    assert [(r.op, r.off, r.len, r.done - r.submit, r.tid)
            for r in tr.requests] == [
        ("read", 8192, 4096, 500, PTHREAD),
        ("write", 1 << 20, 16384, 500, PTHREAD), ("flush", 0, 0, 500, PTHREAD)]
    p = subprocess.run([PYTHON, RBDRECORD, "--summary", trace, "-j"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    s = check_reports(p.stdout)[0]["images"]["img1"]
    assert s["ops"] == {"read": 1, "write": 1, "flush": 1}
    assert s["pool"] == "rbd" and s["read_pct"] == 50.0
    job = str(tmp_path / "job")
    p = subprocess.run([PYTHON, RBDRECORD, "--to-fio", trace, "-o", job],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "img1: 3 requests, 1 thread, 1 lane (most in flight 1)" in \
        p.stderr
    with open(os.path.join(job, "img1.t0.0.iolog")) as f:
        assert f.read().splitlines() == [
            "fio version 3 iolog", "1 rbd add", "1 rbd open",
            "1 rbd read 8192 4096", "2 rbd write 1048576 16384",
            "3 rbd sync 0 0", "3 rbd close"]
    text = open(os.path.join(job, "job.fio")).read()
    assert "[img1.t0.0]" in text and "iodepth=1" in text


def _refused(argv, fragment):
    p = subprocess.run([PYTHON, RBDRECORD] + argv, capture_output=True,
                       text=True)
    assert_one_line_error(p, "rbdrecord: ", fragment, "not overwriting it",
                          status=1)


def test_force_refuses_what_rbdrecord_did_not_write(trace, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    capture = tmp_path / "capture"            # osdstage -w wrote it
    shutil.copytree(os.path.join(REPO, "tests", "fixtures", "lab-v0.ctf"),
                    capture)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "metadata").write_bytes(os.urandom(2000))
    for d, why in ((notes, "(it holds todo.txt)"),
                   (capture, "(its metadata says osdstage wrote it)"),
                   (foreign, "(its metadata is not a CTF trace's)")):
        before = sorted(os.listdir(d))
        for mode in ([], ["--ebpf"], ["--lttng"]):
            _refused(["-o", str(d), "--force"] + mode + ["--", "true"],
                     "%s is not a trace rbdrecord wrote %s" % (d, why))
        _refused(["--to-fio", trace, "-o", str(d), "--force"],
                 "%s is not a fio job rbdrecord wrote" % d)
        assert sorted(os.listdir(d)) == before
    assert (notes / "todo.txt").read_text() == "keep me"
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.fio").write_text("[global]\nioengine=rbd\n")
    _refused(["--to-fio", trace, "-o", str(job), "--force"],
             "(its job.fio is another's)")
    assert (job / "job.fio").exists()


def test_force_replaces_what_rbdrecord_wrote(trace, tmp_path):
    from cephlat.rbd import outdir
    outdir.prepare(trace, True)                   # an eBPF-mode trace
    assert not os.path.exists(trace)
    empty = tmp_path / "empty"
    empty.mkdir()
    outdir.prepare(str(empty), True)
    assert not empty.exists()
    job = str(tmp_path / "job")                   # a --to-fio job, twice
    again = write_trace(str(tmp_path / "again"))
    for argv in (["-o", job], ["-o", job, "--force"]):
        p = subprocess.run([PYTHON, RBDRECORD, "--to-fio", again] + argv,
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(job)) == ["img1.t0.0.iolog", "job.fio"]


def test_force_knows_an_lttng_trace_of_its_session(tmp_path):
    """What `lttng create rbdrecord-PID --output=DIR` leaves (per-user
    buffers): replaced; another session's, or with a stranger, kept."""
    from cephlat.errors import UserError
    from cephlat.rbd import outdir

    def lttng_trace(name, session, extra=None):
        top = tmp_path / name
        d = top / "ust" / "uid" / "0" / "64-bit"
        (d / "index").mkdir(parents=True)
        (d / "metadata").write_bytes(
            b"\x57\x1d\xd1\x75" + bytes(33) + b'/* CTF 1.8 */\nenv {\n'
            b'\tdomain = "ust";\n\ttracer_name = "lttng-ust";\n'
            b'\ttrace_name = "%s";\n};\n' % session.encode())
        for f in ("channel0_0", "channel0_1", "index/channel0_0.idx"):
            (d / f).write_bytes(bytes(64))
        if extra:
            (top / extra).write_text("x")
        return top

    ours = lttng_trace("lt", "rbdrecord-4242")
    outdir.prepare(str(ours), True)
    assert not ours.exists()
    for top, why in (
            (lttng_trace("other", "auto-20260101"),
             "ust/uid/0/64-bit/metadata is another LTTng session's"),
            (lttng_trace("extra", "rbdrecord-1", "ust/notes"),
             "it holds ust/notes")):
        with pytest.raises(UserError) as e:
            outdir.prepare(str(top), True)
        assert "(%s); not overwriting it" % why in str(e.value)
        assert (top / "ust" / "uid" / "0" / "64-bit" / "metadata").exists()


def test_lanes_keep_concurrency_without_overlap():
    """--to-fio deals a thread's requests into lanes replayed at iodepth
    1: as many lanes as requests were in flight at most, and no lane holds
    two requests that overlapped in time."""
    from cephlat.rbd.fio import lanes
    from cephlat.rbd.reader import Request
    import random
    rnd = random.Random(7)
    reqs, t = [], 0
    for i in range(2000):
        t += rnd.randint(0, 300)
        r = Request("read", 1, i * 4096, 4096, 1, t)
        r.done = t + rnd.randint(50, 3000)
        reqs.append(r)
    out = lanes(reqs)
    edges = sorted([(r.submit, 1) for r in reqs] +
                   [(r.done, -1) for r in reqs])
    cur = most = 0
    for _, d in edges:
        cur += d
        most = max(most, cur)
    assert len(out) == most > 1
    assert sorted(r.off for lane in out for r in lane) == \
        [r.off for r in reqs]
    for lane in out:
        for a, b in zip(lane, lane[1:]):
            assert a.done <= b.submit and a.submit < b.submit
