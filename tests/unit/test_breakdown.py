"""The breakdown of a window's completed client ops by client, pool, PG
or image (osdstage -r --by): the ops read from a capture
(capture/doneops.py) are the window's op_total ops, each with its
enqueue's request id and PG; the model (model/breakdown.py) groups them,
its percentiles are the histograms' of each key's ops, the top K and
the other row add up, one key dominates only with half of both the ops
and the queue wait; the text (render/breakdown.py) fits 80 columns;
the command line refuses what it cannot do in one line."""
import io
import json
import os
import types

import numpy as np
import pytest

from cephlat.capture import doneops
from cephlat.capture.reader import Capture
from cephlat.capture.stream import Chunk
from cephlat.cli.args import BY_KEYS
from cephlat.model import breakdown
from cephlat.model.hist import Hist
from cephlat.model.interval import RunInfo, build_interval
from cephlat.render.breakdown import dominant_line, print_breakdown
from cephlat.render.options import TextOptions

from conftest import (OSDSTAGE, REPO, assert_one_line_error, report_errors,
                      run_tool)

FIX = os.path.join(REPO, "tests", "fixtures")
LAB = os.path.join(FIX, "lab-v0.ctf")
SHARDQ = os.path.join(FIX, "shardq-v0.ctf")


def _window(path, op_class=None):
    """(capture, t0, t1, the window's record) of a fixture's traced
    span."""
    cap = Capture(path)
    t0, t1 = cap.traced_span()
    cur, _ = cap.window(t0, t1, op_class=op_class, spans=False)
    iv = build_interval(RunInfo.from_capture(cap), cur, None, cap.wall(t1),
                        (t1 - t0) / 1e9, None)
    iv.record["type"] = "window"
    return cap, t0, t1, iv.record


def _key(addr):
    """A key of our own for the fixture's ops (they carry no request
    id): five clients, by address."""
    return "client.%d" % ((int(addr) >> 4) % 5)


@pytest.mark.parametrize("op_class", [None, "read", "write"])
def test_the_ops_are_the_windows_op_total_ops(op_class):
    cap, t0, t1, rec = _window(LAB, op_class)
    cols = doneops.read(cap, t0, t1, op_class)
    want = rec["stages"]["op_total"]["count"]
    assert want > 100
    assert len(cols["ts"]) == want
    # the lab's capture is of format 0: no request id, PG or object
    assert set(cols["client"].tolist()) == {None}
    assert set(cols["pg"].tolist()) == {None}
    assert set(cols["pool"].tolist()) == {-1}
    assert "object" not in cols
    # nor the bytes: not known, never 0
    assert set(cols["bytes_in"].tolist()) == {-1} == \
        set(cols["bytes_out"].tolist())
    bd = breakdown.build("client", [_key(a) for a in cols["op"]],
                         cols["total_ns"], cols["qwait_ns"],
                         cols["dequeued"], top=3, bytes_in=cols["bytes_in"],
                         bytes_out=cols["bytes_out"])
    assert {(r["bytes_in"], r["bytes_out"]) for r in bd.rows} == {
        (None, None)}
    assert bd.ops == want
    assert sum(r["ops"] for r in bd.rows) + bd.other["ops"] == want
    # every op's op_total is the histogram's: the same p50 and p99
    whole = breakdown.build("client", ["all"] * want, cols["total_ns"],
                            cols["qwait_ns"], cols["dequeued"])
    st = rec["stages"]["op_total"]
    assert (whole.rows[0]["op_total_p50_us"],
            whole.rows[0]["op_total_p99_us"]) == (st["p50_us"], st["p99_us"])


def test_a_capture_without_completions_has_no_ops():
    cap = Capture(SHARDQ)
    t0, t1 = cap.traced_span()
    cols = doneops.read(cap, t0, t1)
    assert len(cols["ts"]) == 0
    bd = breakdown.build("pg", breakdown.keys_of("pg", cols),
                         cols["total_ns"], cols["qwait_ns"],
                         cols["dequeued"])
    assert (bd.ops, bd.rows, bd.other, bd.dominant) == (0, [], None, None)
    assert dominant_line(bd) == "no client op completed in the window"


def test_each_keys_percentiles_are_its_own_ops_histogram():
    """Grouped and computed again from the ops OpTracker pieces together
    (capture/ops.py), not from the columns."""
    cap, t0, t1, _ = _window(LAB)
    cols = doneops.read(cap, t0, t1)
    bd = breakdown.build("client", [_key(a) for a in cols["op"]],
                         cols["total_ns"], cols["qwait_ns"],
                         cols["dequeued"], top=10)
    assert len(bd.rows) == 5 and bd.other is None
    per = {}
    for o in cap.ops(t0, t1):
        d = o.done
        if d and d["total_valid"] and t0 <= d["ts"] <= t1:
            per.setdefault(_key(o.op), []).append(d)
    assert sum(len(v) for v in per.values()) == bd.ops
    qw_all = sum(d["queue_wait_ns"] for v in per.values() for d in v
                 if d["dequeued"])
    for r in bd.rows:
        done = per[r["key"]]
        assert r["ops"] == len(done)
        tot = Hist.from_ns(d["op_total_ns"] for d in done)
        qw = Hist.from_ns(d["queue_wait_ns"] for d in done if d["dequeued"])
        p = [round(v, 3) for v in tot.percentiles_us((0.5, 0.99)) +
             qw.percentiles_us((0.5, 0.99))]
        assert [r["op_total_p50_us"], r["op_total_p99_us"],
                r["queue_wait_p50_us"], r["queue_wait_p99_us"]] == p
        assert r["queue_wait_pct"] == round(100.0 * qw.sum_ns / qw_all, 1)
        assert r["op_time_s"] == round(tot.sum_ns / 1e9, 6)
    # by total op time, largest first
    times = [r["op_time_s"] for r in bd.rows]
    assert times == sorted(times, reverse=True)


def test_top_k_and_the_other_row_add_up():
    keys = ["k%d" % (i % 7) for i in range(700)]
    total = [1000 * (1 + i % 7) + i for i in range(700)]
    qw = [10 * (i % 3) for i in range(700)]
    bd = breakdown.build("pg", keys, total, qw, [True] * 700, top=4)
    assert [r["key"] for r in bd.rows] == ["k6", "k5", "k4", "k3"]
    assert bd.other["keys"] == 3 and bd.other["key"] == "other"
    assert sum(r["ops"] for r in bd.rows) + bd.other["ops"] == 700
    assert sum(r["op_time_s"] for r in bd.rows) + bd.other["op_time_s"] == \
        pytest.approx(sum(total) / 1e9, abs=1e-5)
    assert sum(r["ops_pct"] for r in bd.rows) + bd.other["ops_pct"] == \
        pytest.approx(100, abs=0.3)
    assert sum(r["queue_wait_pct"] for r in bd.rows) + \
        bd.other["queue_wait_pct"] == pytest.approx(100, abs=0.3)
    # the other row's percentiles are its ops' together
    rest = [t for k, t in zip(keys, total) if k in ("k0", "k1", "k2")]
    assert bd.other["op_total_p99_us"] == \
        round(Hist.from_ns(rest).percentile_us(0.99), 3)
    # K at least the keys: no other row
    assert breakdown.build("pg", keys, total, qw, [True] * 700,
                           top=7).other is None


def _ops(spec):
    """[(key, count, queue wait ns each)] -> build()'s arguments."""
    keys, total, qw = [], [], []
    for k, n, w in spec:
        keys += [k] * n
        total += [100000] * n
        qw += [w] * n
    return keys, total, qw, [True] * len(keys)


def test_each_keys_bytes_are_its_ops():
    keys = ["a"] * 3 + ["b"] * 2 + ["c"]
    bd = breakdown.build("client", keys, [1000] * 6, [10] * 6, [True] * 6,
                         top=2, bytes_in=[4096] * 3 + [0] * 2 + [512],
                         bytes_out=[0] * 3 + [8192] * 2 + [1])
    got = {r["key"]: (r["bytes_in"], r["bytes_out"]) for r in bd.rows}
    assert got == {"a": (3 * 4096, 0), "b": (0, 2 * 8192)}
    assert (bd.other["bytes_in"], bd.other["bytes_out"]) == (512, 1)
    # an op whose bytes are not known: its key's are not either
    bd = breakdown.build("client", keys, [1000] * 6, [10] * 6, [True] * 6,
                         bytes_in=[4096] * 5 + [-1], bytes_out=[0] * 6)
    got = {r["key"]: (r["bytes_in"], r["bytes_out"]) for r in bd.rows}
    assert got == {"a": (3 * 4096, 0), "b": (2 * 4096, 0), "c": (None, 0)}
    # none given: none known
    bd = breakdown.build("client", keys, [1000] * 6, [10] * 6, [True] * 6)
    assert {r["bytes_in"] for r in bd.rows} == {None}


def test_one_key_dominates_with_half_of_both():
    bd = breakdown.build("client", *_ops([("client.4123", 81, 1000),
                                          ("client.9", 19, 800)]))
    assert bd.dominant == {"key": "client.4123", "ops_pct": 81.0,
                           "queue_wait_pct": 84.2}
    assert dominant_line(bd) == \
        "client.4123: 81 % of the ops and 84 % of the queue wait"
    # exactly half of both is half
    bd = breakdown.build("client", *_ops([("a", 50, 10), ("b", 50, 10)]))
    assert bd.dominant["key"] in ("a", "b")


@pytest.mark.parametrize("spec", [
    # most ops, little of the queue wait
    [("client.1", 80, 10), ("client.2", 20, 1000)],
    # most of the queue wait, few ops
    [("client.1", 20, 1000), ("client.2", 80, 10)],
    # spread
    [("client.%d" % i, 25, 100) for i in range(4)],
    # no queue wait at all
    [("client.1", 90, 0), ("client.2", 10, 0)],
])
def test_no_key_dominates_without_half_of_both(spec):
    bd = breakdown.build("client", *_ops(spec))
    assert bd.dominant is None
    assert dominant_line(bd) == \
        "no one client holds half of both the ops and the queue wait"


def test_unknown_ops_never_dominate():
    bd = breakdown.build("pool", *_ops([(None, 90, 100), ("pool 3", 10, 1)]))
    assert [r["key"] for r in bd.rows] == ["unknown", "pool 3"]
    assert bd.dominant is None


def test_keys_of_each_kind():
    cols = {"client": np.array(["client.4123", None], object),
            "pg": np.array(["3.1a", None], object),
            "pool": np.array([3, -1]),
            "object": np.array(["rbd_data.10226b8b4567.0000000000000002",
                                "rbd_header.10226b8b4567"], object)}
    assert breakdown.keys_of("client", cols).tolist() == ["client.4123",
                                                          None]
    assert breakdown.keys_of("pg", cols).tolist() == ["3.1a", None]
    assert breakdown.keys_of("pool", cols).tolist() == ["pool 3", None]
    assert breakdown.keys_of("image", cols).tolist() == ["10226b8b4567",
                                                         None]
    assert breakdown.image_of("rbd_data.2.10226b8b4567.0000000000000002") \
        == "2.10226b8b4567"
    assert breakdown.image_of("") is None
    assert tuple(BY_KEYS) == breakdown.KINDS


# ------------------------------------------- a capture with request ids

_ENQ = np.dtype([("_ts", "u8"), ("op", "u8"), ("req_type", "u1"),
                 ("req_num", "u8"), ("pg_pool", "u8"), ("pg_seed", "u4"),
                 ("pg_shard", "i1")])
_DONE = np.dtype([("_ts", "u8"), ("op", "u8"), ("op_total_ns", "u8"),
                  ("queue_wait_ns", "u8"), ("dequeued", "u1"),
                  ("total_valid", "u1"), ("op_class", "u1"),
                  ("object", "S64")])


def _fake_capture(enq, done, split):
    """A capture slot of op_enqueue and op_done events (tuples of _ENQ
    and _DONE), read in two chunks: before `split` and from it."""
    e = np.array(enq, _ENQ)
    d = np.array(done, _DONE)
    cls = {1: types.SimpleNamespace(names=_ENQ.names),
           2: types.SimpleNamespace(names=_DONE.names)}

    def chunks(names, t0=None, t1=None):
        for lo, hi in ((0, split - 1), (split, t1)):
            recs = {c: r[(r["_ts"] >= lo) & (r["_ts"] <= hi)]
                    for c, r in ((1, e), (2, d))}
            keys = {c: np.arange(len(r)) for c, r in recs.items()}
            yield Chunk(recs, keys)
    return types.SimpleNamespace(
        _cid={"op_enqueue": 1, "op_done": 2}, chunks=chunks,
        trace=types.SimpleNamespace(classes=cls),
        rules=types.SimpleNamespace(labels={"op_class": ["read", "write",
                                                         "other"]}))


def test_each_op_takes_its_own_enqueues_request_id_and_pg():
    obj = b"rbd_data.abc123.0000000000000001"
    cap = _fake_capture(
        enq=[(1, 0x400, 8, 7, 2, 0x5, -1),       # done before the window
             (2, 0x500, 0, 0, 0, 0, -1),         # says nothing of its op
             (3, 0x600, 8, 3, 3, 0x1, -1),       # op_total not valid
             (5, 0x300, 8, 1, 4, 0x2, -1),
             (10, 0x100, 8, 1, 3, 0x1a, -1),
             (30, 0x100, 8, 2, 3, 0x1a, 0)],     # the address again: a
        done=[(11, 0x400, 500, 50, 1, 1, 0, b""),  # new op, an EC shard
              (15, 0x300, 1000, 100, 1, 1, 0, obj),
              (20, 0x100, 2000, 200, 1, 1, 1, b""),
              (25, 0x500, 3000, 300, 0, 1, 0, b""),
              (26, 0x600, 4000, 400, 1, 0, 0, b""),
              (40, 0x200, 5000, 500, 1, 1, 1, b""),  # enqueued before
              (45, 0x400, 6000, 600, 1, 1, 0, b""),  # its enqueue ended
              (60, 0x100, 7000, 700, 1, 1, 1, obj)],
        split=50)
    cols = doneops.read(cap, 12, 100)
    assert cols["ts"].tolist() == [15, 20, 25, 40, 45, 60]
    assert cols["client"].tolist() == ["client.1", "client.1", None, None,
                                       None, "client.2"]
    assert cols["pg"].tolist() == ["4.2", "3.1a", None, None, None, "3.1a"]
    assert cols["pool"].tolist() == [4, 3, -1, -1, -1, 3]
    assert cols["object"].tolist() == [obj.decode(), None, None, None,
                                       None, obj.decode()]
    assert cols["dequeued"].tolist() == [True, True, False, True, True, True]
    assert doneops.read(cap, 12, 100, "write")["ts"].tolist() == [20, 40, 60]
    bd = breakdown.build("image", breakdown.keys_of("image", cols),
                         cols["total_ns"], cols["qwait_ns"],
                         cols["dequeued"])
    assert [(r["key"], r["ops"]) for r in bd.rows] == [("unknown", 4),
                                                       ("abc123", 2)]
    # the queue wait of the op never dequeued is not counted
    assert bd.queue_wait_ns == 100 + 200 + 500 + 600 + 700


# ------------------------------------------------------------- the text

def test_the_text_fits_80_columns():
    keys = ["client.%d" % (10 ** 15 + i % 13) for i in range(400)] + \
        ["rbd_data.%s" % ("f" * 40)] * 10
    # up to 13 s, and past 1000 s
    total = [10 ** 9 * (1 + i % 13) for i in range(400)] + [2 * 10 ** 12] * 10
    # and hundreds of TiB written
    bd = breakdown.build("client", keys, total, total, [True] * 410, top=10,
                         bytes_in=[2 ** 40] * 410, bytes_out=[0] * 410)
    for ms in (False, True):
        out = io.StringIO()
        print_breakdown(out, TextOptions(milliseconds=ms), bd, "osd.12")
        lines = out.getvalue().splitlines()
        assert lines[0] == "BY CLIENT, osd.12 (410 ops)"
        assert lines[1].startswith("no one client holds half")
        assert len([l for l in lines
                    if l.startswith(("client.", "rbd_data."))]) == 10
        assert any(l.startswith("other (4) ") for l in lines)
        assert all(len(l) <= 80 for l in lines), \
            [l for l in lines if len(l) > 80]


def test_clients_are_named_under_the_table():
    """A client key with its cephx name (or the tool's own look-up): the
    table's key is the entity, the names under the table, in 80
    columns."""
    names = {"clients": {"client.%d" % i: "client.vm-%d-with-a-long-name"
                         % i for i in range(10)},
             "selves": ["client.99"]}
    cols = {"client": np.array(["client.%d" % (i % 10) for i in range(50)]
                               + ["client.99"] * 3, object)}
    keys = breakdown.keys_of("client", cols, names)
    assert keys[0] == "client.0 (client.vm-0-with-a-long-name)", keys[0]
    bd = breakdown.build("client", keys.tolist(), [1000] * 53, [10] * 53,
                         [True] * 53, top=20)
    out = io.StringIO()
    print_breakdown(out, TextOptions(), bd)
    text = out.getvalue()
    lines = text.splitlines()
    assert all(len(l) <= 80 for l in lines), lines
    table = lines[3:lines.index(next(l for l in lines
                                     if l.startswith("(op_total")))]
    rows = [l.split()[0] for l in table]
    assert sorted(rows) == sorted(["client.%d" % i for i in range(10)] +
                                  ["client.99"]), lines
    legend = " ".join(text.split("(clients as the cluster knows them: ")[1]
                      .split())
    assert "client.3 client.vm-3-with-a-long-name," in legend, legend
    assert "client.99 osdstage's name look-up" in legend, legend


def test_the_record_is_the_schemas():
    cap, t0, t1, rec = _window(LAB)
    cols = doneops.read(cap, t0, t1)
    bd = breakdown.build("client", [_key(a) for a in cols["op"]],
                         cols["total_ns"], cols["qwait_ns"],
                         cols["dequeued"], top=2)
    rec["by"] = bd.record
    assert report_errors(rec) == []
    assert set(rec["by"]) >= {"key", "rows", "other", "dominant"}
    rec["by"]["rows"][0]["bytes"] = 1
    assert report_errors(rec)
    del rec["by"]["rows"][0]["bytes"]
    rec["by"]["rows"][0]["bytes_in"] = -1
    assert report_errors(rec)


# ------------------------------------------------------ the command line

@pytest.mark.parametrize("argv,fragment", [
    (["-r", LAB, "--by", "user"], "invalid choice: 'user'"),
    (["-p", "1", "--by", "pool", "--lean"], "not with --lean"),
    (["-p", "1", "--by", "client", "--otlp", "http://127.0.0.1:4318"],
     "not with --otlp"),
    (["-p", "1", "--top", "3"], "--top K goes with --by"),
    (["-r", LAB, "--top", "3"], "--top K goes with --by"),
    (["-r", LAB, "--by", "pg", "--top", "0"], "must be > 0"),
    (["-r", LAB, "--by", "pg", "--op", "client.1.0:1"], "use one of them"),
    (["-r", LAB, SHARDQ, "--by", "pg"], "holds no request ids"),
    (["-r", LAB, LAB, "--by", "pg", "--slowest", "3"],
     "--slowest reads one capture"),
    (["-r", LAB, "--by", "client"], "holds no request ids"),
    (["-r", LAB, "--by", "image"], "holds no object names"),
])
def test_what_by_cannot_do_is_one_line(argv, fragment):
    assert_one_line_error(run_tool([OSDSTAGE] + argv), fragment, status=2)


def _lab_with_clients(monkeypatch, dominant):
    """The lab's capture read as if its ops carried request ids: each op
    a client of _key's (dominant: most of them client.0's)."""
    read = doneops.read

    def with_clients(cap, t0, t1, op_class=None):
        cols = read(cap, t0, t1, op_class)
        keys = [_key(a) for a in cols["op"]]
        if dominant:
            keys = ["client.0" if i % 10 else k for i, k in enumerate(keys)]
        cols["client"] = np.array(keys, object)
        return cols
    monkeypatch.setattr(doneops, "has_reqids", lambda cap: True)
    monkeypatch.setattr(doneops, "read", with_clients)


@pytest.mark.parametrize("dominant", [False, True])
def test_by_client_after_the_windows_report(monkeypatch, dominant):
    from cephlat.cli import osdstage
    _lab_with_clients(monkeypatch, dominant)
    out, err = io.StringIO(), io.StringIO()
    assert osdstage.run(osdstage.parse_args(
        ["-r", LAB, "--by", "client", "--top", "3"]), out, err) == 0
    lines = out.getvalue().splitlines()
    at = lines.index("BY CLIENT (306 ops)")
    assert any(l.startswith("STAGE ") for l in lines[:at])
    if dominant:
        assert lines[at + 1].startswith("client.0: ")
        assert lines[at + 1].endswith(" of the queue wait")
    else:
        assert lines[at + 1] == \
            "no one client holds half of both the ops and the queue wait"
    assert lines[at + 2].split()[:3] == ["CLIENT", "OPS", "%OPS"]
    rows = lines[at + 3:at + 7]
    assert rows[-1].startswith("other (")
    assert sum(int(r[20:].split()[0]) for r in rows) == 306
    assert all(len(l) <= 80 for l in lines), \
        [l for l in lines if len(l) > 80]
    # -j: the window's "by", in the schema
    out = io.StringIO()
    assert osdstage.run(osdstage.parse_args(
        ["-r", LAB, "--by", "client", "--top", "3", "-j"]), out, err) == 0
    rec = json.loads(out.getvalue())
    assert report_errors(rec) == []
    by = rec["by"]
    assert by["key"] == "client" and len(by["rows"]) == 3
    assert sum(r["ops"] for r in by["rows"]) + by["other"]["ops"] == \
        rec["stages"]["op_total"]["count"] == by["ops"]
    assert (by["dominant"] or {}).get("key") == \
        ("client.0" if dominant else None)


def test_by_over_several_captures(monkeypatch):
    """One breakdown of every capture's ops (the lab's read twice: twice
    its ops), without the window reports."""
    from cephlat.cli import osdstage
    _lab_with_clients(monkeypatch, True)
    out, err = io.StringIO(), io.StringIO()
    assert osdstage.run(osdstage.parse_args(
        ["-r", LAB, LAB, "--by", "client"]), out, err) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "2 captures (lab-v0.ctf, lab-v0.ctf): 2 OSDs"
    assert lines[1] == "BY CLIENT, 2 OSDs (612 ops)"
    assert lines[2].startswith("client.0: ")
    assert not any(l.startswith("STAGE ") for l in lines)
    assert all(len(l) <= 80 for l in lines)
    out = io.StringIO()
    assert osdstage.run(osdstage.parse_args(
        ["-r", LAB, LAB, "--by", "client", "-j"]), out, err) == 0
    rec = json.loads(out.getvalue())
    assert report_errors(rec) == []
    assert rec["type"] == "breakdown" and rec["by"]["ops"] == 612
    assert sum(r["ops"] for r in rec["by"]["rows"]) == 612


def test_pools_and_images_by_the_names_the_capture_recorded():
    cols = {"pool": np.array([2, 3, -1, 2]),
            "object": ["rbd_data.1a2b.0000", "rbd_data.2.9f8e.0001",
                       "rbd_header.1a2b", "rbd_data.77aa.0002"]}
    names = {"fsid": "f", "pools": {"2": "rbd", "3": "ec-data"},
             "images": {"1a2b": "vm-17", "9f8e": "vm-18"}}
    assert breakdown.keys_of("pool", cols, names).tolist() == [
        "rbd", "ec-data", None, "rbd"]
    # an image with a separate data pool: rbd_data.<pool>.<id>.<n>; one
    # the names do not have (created since): its id
    assert breakdown.keys_of("image", cols, names).tolist() == [
        "vm-17", "vm-18", None, "77aa"]
    # without names: ids, as before
    assert breakdown.keys_of("pool", cols).tolist() == [
        "pool 2", "pool 3", None, "pool 2"]
    assert breakdown.keys_of("image", cols, {}).tolist() == [
        "1a2b", "2.9f8e", None, "77aa"]
    assert breakdown.image_name(None, names["images"]) is None
    # the capturing tool's own look-ups: said as such
    got = breakdown.keys_of("client", {"client": np.array(
        ["client.4", "client.9", None], object)}, {"selves": ["client.9"]})
    assert got.tolist() == ["client.4", "client.9" + breakdown.SELF, None]
