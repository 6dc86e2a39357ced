"""Whose ops: two clients (two fio processes, fio's rbd engine: a
librados client each) write to two RBD images of the lab at rates four
to one, under a capture of the lab's OSD (-w). The capture records the
cluster's names (its pool and images by name), and -r --by image |
client | pool counts each image's and client's ops as fio did (within
1 %: an image's data ops are fio's writes; a client's are those and its
image's header ops at open and close), each image's bytes are its writes'
(and the window's, Ceph's op_in_bytes), their ratio is the rates', and
the heavy one dominates the table when it holds half of the queue wait
too (it holds its share, read op by op); the live run's own breakdown
(--by image beside -w) counts the same. Each client is named by the name it
authenticated as (admin, byc-light). Twice, on fresh images each
time."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import OSDSTAGE, PYTHON, run_tool, wait_for_line

from cephlat.capture.reader import Capture
from cephlat.ceph.adminsock import find_osd_socket, perf_dump

RATES = (200, 50)           # writes a second: the heavy one, the light
BS = 4096                   # each write's bytes
SECS = 20
WITHIN = 0.01
# a client's ops besides its writes: opening and closing its image
# (header reads, its watch, the object map's), at most
CLIENT_EXTRA = 40
ROUNDS = 2


# the name each client authenticates as (the lab's auth is none: the
# name it gives), the heavy one's and the light one's
NAMES = ("admin", "byc-light")


def _job(image, rate, seed, name):
    return ("[global]\nioengine=rbd\nclientname=%s\npool=rbd\n"
            "rbdname=%s\ndirect=1\n[w]\nrw=randwrite\nbs=%d\nsize=64m\n"
            "rate_iops=%d\nruntime=%d\ntime_based=1\niodepth=4\n"
            "randseed=%d\n" % (name, image, BS, rate, SECS, seed))


def _rbd(lab, *args):
    p = subprocess.run(["rbd"] + list(args), capture_output=True, text=True,
                       timeout=60, env=dict(os.environ,
                                            CEPH_CONF=lab["CEPH_CONF"]))
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.fixture(scope="module", params=range(ROUNDS))
def two_clients(lab, tmp_path_factory, request):
    d = tmp_path_factory.mktemp("by-clients-%d" % request.param)
    images = ["byc%d-heavy" % request.param, "byc%d-light" % request.param]
    for img in images:
        _rbd(lab, "create", "rbd/" + img, "--size", "128M")
    try:
        ids = {img: json.loads(_rbd(lab, "info", "rbd/" + img, "--format",
                                    "json"))["block_name_prefix"]
               [len("rbd_data."):] for img in images}
        cap = str(d / "cap.ctf")
        # Ceph's own count of the bytes its client ops wrote and read
        asok = find_osd_socket(lab["pid"], "0")
        before = perf_dump(asok)["osd"]
        # the capture, and the live breakdown of the same run (one report,
        # at the end)
        tracer = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(lab["pid"]),
                                   "-w", cap, "--by", "image", "-j", "1000"],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            wait_for_line(tracer.stderr, "Tracing", 60)
            fios = []
            for i, (img, rate) in enumerate(zip(images, RATES)):
                job = d / ("%s.fio" % img)
                job.write_text(_job(img, rate, 11 + i, NAMES[i]))
                fios.append(subprocess.Popen(
                    ["fio", "--output-format=json",
                     "--output=%s" % (d / ("%s.json" % img)), str(job)],
                    env=dict(os.environ, CEPH_CONF=lab["CEPH_CONF"]),
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    text=True))
            for f in fios:
                _, err = f.communicate(timeout=SECS + 120)
                assert f.returncode == 0, err
            time.sleep(1)           # the last commits
        finally:
            tracer.send_signal(2)
            out, err = tracer.communicate(timeout=60)
        assert tracer.returncode == 0, err
        after = perf_dump(asok)["osd"]
        assert "no pool, image or client names" not in err, err
        writes = {img: json.load(open(d / ("%s.json" % img)))["jobs"][0][
            "write"]["total_ios"] for img in images}
        live = [json.loads(line) for line in out.splitlines()]
        got = {"cap": cap, "images": images, "ids": ids, "writes": writes,
               "live": live, "ceph_bytes": tuple(
                   after[k] - before[k] for k in ("op_in_bytes",
                                                  "op_out_bytes"))}
        got["shares"] = _shares(got)
        yield got
    finally:
        for img in images:
            _rbd(lab, "rm", "--no-progress", "rbd/" + img)


def _by(cap, key):
    p = run_tool([OSDSTAGE, "-r", cap, "--by", key, "-j"], timeout=300)
    assert p.returncode == 0, p.stderr
    out = [json.loads(line) for line in p.stdout.splitlines()]
    return out[-1]["by"]


def test_the_capture_names_the_pool_and_the_images(two_clients):
    names = Capture(two_clients["cap"]).cluster_names
    assert "rbd" in names["pools"].values(), names
    for img, i in two_clients["ids"].items():
        assert names["images"].get(i) == img, (img, i, names)


def _shares(two_clients):
    """The heavy image's share (%) of the capture's completed ops and of
    their queue wait, read op by op (capture/ops.py, not the breakdown's
    columns)."""
    c = Capture(two_clients["cap"])
    heavy = "rbd_data.%s." % two_clients["ids"][two_clients["images"][0]]
    n = mine = qw = qw_mine = 0
    for o in c.ops(c.first_ns, c.last_ns):
        if not (o.done and o.done["total_valid"]):
            continue
        w = o.deq["queue_wait_ns"] if o.deq else 0
        n, qw = n + 1, qw + w
        if o.done["object"].startswith(heavy):
            mine, qw_mine = mine + 1, qw_mine + w
    return 100.0 * mine / n, 100.0 * qw_mine / qw


def _images_are_their_writes(by, two_clients):
    """Each image's row counts fio's writes to it (within 1 %); the heavy
    one holds its share of the ops and of the queue wait, read op by op,
    and is dominant exactly when it holds half of both (the queue wait is
    a sum: one long wait of a light op, such as a worker stalled on a
    busy machine, can outweigh many short ones). -> the rows by key"""
    rows = {r["key"]: r for r in by["rows"]}
    heavy, light = two_clients["images"]
    for img in (heavy, light):
        want = two_clients["writes"][img]
        assert abs(rows[img]["ops"] - want) <= WITHIN * want, (img, rows,
                                                              want)
    # the bytes: each of fio's writes wrote its 4 KiB and read none; the
    # window's ops wrote what Ceph counted while they ran (within 1 %:
    # ops of the run's edges, such as the manager's while the tracer
    # attached) and read no more than it counted (the images' headers,
    # the manager's reads: a few KiB)
    for img in (heavy, light):
        assert (rows[img]["bytes_in"], rows[img]["bytes_out"]) == (
            rows[img]["ops"] * BS, 0), rows[img]
    ours = [sum(r[k] for r in by["rows"] + [by["other"] or {k: 0}])
            for k in ("bytes_in", "bytes_out")]
    want = two_clients["ceph_bytes"]
    assert abs(ours[0] - want[0]) <= WITHIN * want[0], (ours, want)
    assert ours[1] <= want[1], (ours, want)
    ops_pct, qw_pct = two_clients["shares"]
    # 4 to 1: the heavy one holds most of the ops
    assert ops_pct >= 50 and abs(rows[heavy]["ops_pct"] - ops_pct) <= 0.1 \
        + 100 * WITHIN, (rows[heavy], ops_pct)
    assert abs(rows[heavy]["queue_wait_pct"] - qw_pct) <= 0.1 + \
        100 * WITHIN, (rows[heavy], qw_pct)
    if qw_pct >= 50.05:
        assert by["dominant"] and by["dominant"]["key"] == heavy, by
    elif qw_pct < 49.95:
        assert by["dominant"] is None, (by, qw_pct)
    return rows


def test_each_images_ops_are_its_writes_and_the_heavy_one_dominates(
        two_clients):
    rows = _images_are_their_writes(_by(two_clients["cap"], "image"),
                                    two_clients)
    heavy, light = two_clients["images"]
    ratio = rows[heavy]["ops"] / rows[light]["ops"]
    want = two_clients["writes"][heavy] / two_clients["writes"][light]
    assert abs(ratio - want) <= 2 * WITHIN * want, (ratio, want)
    assert abs(want - RATES[0] / RATES[1]) <= 0.05 * RATES[0] / RATES[1], \
        two_clients["writes"]


def test_each_clients_ops_are_its_images(two_clients):
    by = _by(two_clients["cap"], "client")
    rows = sorted([r for r in by["rows"] if r["key"].startswith("client.")],
                  key=lambda r: -r["ops"])
    assert len(rows) >= 2, by
    # each named by the name it authenticated as (the monitors' sessions,
    # read while it was connected)
    for r, name in zip(rows, NAMES):
        assert re.fullmatch(r"client\.\d+ \(client\.%s\)" % name,
                            r["key"]), (r["key"], name)
    for r, img in zip(rows, two_clients["images"]):
        want = two_clients["writes"][img]
        assert want <= r["ops"] <= want * (1 + WITHIN) + CLIENT_EXTRA, \
            (r, img, want)
    # dominant: the heavy client, when it holds half of the queue wait too
    top = rows[0]
    want = top["key"] if min(top["ops_pct"], top["queue_wait_pct"]) >= 50 \
        else None
    assert (by["dominant"] or {}).get("key") == want, by
    pool = _by(two_clients["cap"], "pool")
    assert [r["key"] for r in pool["rows"]] == ["rbd"], pool


def test_the_live_breakdown_counts_each_images_writes(two_clients):
    """The live report's --by image (every op handed over at its end,
    names from the same look-up as the capture's): each image's ops are
    fio's writes within 1 %, none missed, the heavy one dominant by the
same rule."""
    reps = [r for r in two_clients["live"] if r["type"] == "interval"]
    assert len(reps) == 1, two_clients["live"]
    by = reps[0]["by"]
    assert by["key"] == "image" and by["missed"] == 0, by
    _images_are_their_writes(by, two_clients)
