"""Real-cluster tier: rbdrecord records a known fio rbd job against the lab
(eBPF mode), the trace matches fio's own counts, converts to a fio job
that replays it onto a fresh image with the same counts, bytes and
offsets; LTTng mode runs the documented recipe against a real
lttng-sessiond and says why nothing can be recorded here; bad input gets
one error line."""
import collections
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import (PYTHON, REPO, assert_one_line_error, need, run_tool,
                      wait_for_line)

RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")
JOB = """[global]
ioengine=rbd
clientname=admin
pool=rbd
rbdname=%s
direct=1
[mix]
rw=randrw
rwmixread=60
bssplit=4k/50:16k/30:64k/20
size=64m
number_ios=%d
iodepth=8
randseed=42
"""


def rbd(lab, *args):
    p = subprocess.run(["rbd"] + list(args), capture_output=True, text=True,
                       env=dict(os.environ, CEPH_CONF=lab["CEPH_CONF"]),
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def fio_counts(path):
    job = json.load(open(path))["jobs"][0]
    assert job["error"] == 0, job
    return {"read": (job["read"]["total_ios"], job["read"]["io_bytes"]),
            "write": (job["write"]["total_ios"], job["write"]["io_bytes"])}


def record(lab, out, *cmd):
    p = run_tool([RBDRECORD, "-o", str(out), "--force", "--"] + list(cmd),
                 timeout=300, env=dict(os.environ,
                                       CEPH_CONF=lab["CEPH_CONF"]))
    assert p.returncode == 0, p.stderr
    assert "none lost" in p.stderr, p.stderr
    return p


def trace_requests(trace):
    """(op -> [count, bytes], set of (op, offset, length)) from --summary's
    reader: completed requests only."""
    import sys
    sys.path.insert(0, os.path.join(REPO, "lib"))
    from cephlat.rbd.reader import RbdTrace
    tr = RbdTrace(str(trace))
    per = collections.defaultdict(lambda: [0, 0])
    for r in tr.requests:
        per[r.op][0] += 1
        per[r.op][1] += r.len
    return per, {(r.op, r.off, r.len) for r in tr.requests}, tr


@pytest.fixture(scope="module")
def recorded(lab, tmp_path_factory):
    need(shutil.which("fio") is not None, "fio missing (make setup)")
    d = tmp_path_factory.mktemp("rbd")
    (d / "job.fio").write_text(JOB % ("img1", 3000))
    p = record(lab, d / "trace", "fio", "--output-format=json",
               "--output=%s" % (d / "fio.json"), str(d / "job.fio"))
    # the default here: librbd has no LTTng tracepoints
    assert "Recording librbd I/O of fio" in p.stderr and "(eBPF)" in p.stderr
    return d


def test_trace_has_exactly_fios_ops_and_bytes(recorded):
    want = fio_counts(recorded / "fio.json")
    per, _, tr = trace_requests(recorded / "trace")
    assert want["read"][0] > 1000 and want["write"][0] > 500
    for op in ("read", "write"):
        assert tuple(per[op]) == want[op], (op, per[op], want[op])
    assert tr.incomplete == 0 and tr.unmatched == 0
    img = next(iter(tr.images.values()))
    assert img["name"] == "img1" and img["pool"] == "rbd"


def test_babeltrace2_and_rbd_replay_prep_read_it(recorded):
    need(shutil.which("babeltrace2") is not None, "babeltrace2 missing")
    p = subprocess.run(["babeltrace2", str(recorded / "trace")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-1000:]
    names = collections.Counter(re.findall(r" (librbd:\w+|rbdrecord:\w+):",
                                           p.stdout))
    want = fio_counts(recorded / "fio.json")
    assert names["librbd:aio_read_enter"] == want["read"][0]
    assert names["librbd:aio_write_enter"] == want["write"][0]
    assert names["librbd:aio_complete_enter"] == \
        want["read"][0] + want["write"][0]
    assert "pthread_id = 0x" in p.stdout and 'name = "img1"' in p.stdout
    # Ceph's own converter for librbd LTTng traces takes it
    out = recorded / "trace.replay"
    p = subprocess.run(["rbd-replay-prep", str(recorded / "trace"), str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-1000:]
    assert "warning" not in p.stderr, p.stderr[-1000:]
    assert out.stat().st_size > 1000


def test_summary(recorded):
    p = run_tool([RBDRECORD, "--summary", str(recorded / "trace"), "-j",
                  "--zones", "8"])
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)["images"]["img1"]
    want = fio_counts(recorded / "fio.json")
    assert s["ops"]["read"] == want["read"][0]
    assert s["bytes"]["write"] == want["write"][1]
    assert sum(s["sizes"].values()) == want["read"][0] + want["write"][0]
    assert {"4096", "16384", "65536"} <= set(s["sizes"])
    assert len(s["zones"]) == 8
    assert sum(z["reads"] for z in s["zones"]) == want["read"][0]
    assert 50 < s["read_pct"] < 70
    text = run_tool([RBDRECORD, "--summary", str(recorded / "trace")]).stdout
    assert "image img1 (pool rbd): %d ops" % (want["read"][0] +
                                              want["write"][0]) in text


def fio_totals(path):
    """fio's read/write (ios, bytes) summed over the jobs of a run (the
    --to-fio job has one job per lane); every job without error."""
    per = {"read": [0, 0], "write": [0, 0]}
    for job in json.load(open(path))["jobs"]:
        assert job["error"] == 0, job
        for op in per:
            per[op][0] += job[op]["total_ios"]
            per[op][1] += job[op]["io_bytes"]
    return {op: tuple(v) for op, v in per.items()}


REPLAYS = 3


def test_replay_matches_the_original(lab, recorded):
    """The converted job replays onto a fresh image (without
    exclusive-lock, as rbdrecord says) 3 times in a row (each recorded
    again): every run exits 0 with fio's and librbd's counts, and the
    offsets and sizes, of the original (fio 3.33's rbd engine crashes in
    most replays of an iodepth-8 job)."""
    d = recorded
    p = run_tool([RBDRECORD, "--to-fio", str(d / "trace"), "-o",
                  str(d / "replay"), "--image", "img2", "--force"])
    assert p.returncode == 0, p.stderr
    assert "img2: 3000 requests, 1 thread, 8 lanes (most in flight 8)" in \
        p.stderr, p.stderr
    # the lanes are clients of their own: onto an image without
    # exclusive-lock, or they pass its lock back and forth
    assert "the 8 lanes each open the image" in p.stderr and \
        "rbd feature disable rbd/img2 fast-diff object-map exclusive-lock" \
        in p.stderr, p.stderr
    assert "without exclusive-lock" in (d / "replay" / "job.fio").read_text()
    job = (d / "replay" / "job.fio").read_text()
    assert "rbdname=img2" in job and "read_iolog=" in job
    assert job.count("iodepth=1") == 8 and "iodepth=8" not in job
    assert (d / "replay" / "img2.t0.0.iolog").read_text().startswith(
        "fio version 3 iolog\n")
    orig, orig_set, _ = trace_requests(d / "trace")
    for run in range(REPLAYS):
        subprocess.run(["rbd", "rm", "rbd/img2"], capture_output=True,
                       env=dict(os.environ, CEPH_CONF=lab["CEPH_CONF"]))
        # a fresh image, as the job says
        rbd(lab, "create", "--size", "1024", "--image-feature", "layering",
            "rbd/img2")
        out = d / ("replayed%d" % run)
        js = d / ("fio2-%d.json" % run)
        try:
            p = record(lab, out, "fio", "--output-format=json",
                       "--output=%s" % js, str(d / "replay" / "job.fio"))
        finally:
            rbd(lab, "rm", "rbd/img2")
        assert "fio exited with status" not in p.stderr, (run, p.stderr)
        again, again_set, tr = trace_requests(out)
        fio2 = fio_totals(js)
        for op in ("read", "write"):
            for i in (0, 1):           # count, bytes: what fio reports
                assert abs(fio2[op][i] - orig[op][i]) <= \
                    0.01 * orig[op][i], (run, op)
            assert again[op] == orig[op], run  # and what librbd was asked
        assert again_set == orig_set, run     # the same offsets and sizes
        assert {i["name"] for i in tr.images.values()} == {"img2"}


OBJECT = 4 << 20        # the lab's images: order 22


def _objects(off, length):
    return (off + length - 1) // OBJECT - off // OBJECT + 1


def test_rbd_replay_onto_another_image(lab, recorded):
    """Ceph's own replayer: rbd-replay-prep's output of our trace, replayed
    with rbd-replay --map-image img1=img3 onto an image whose objects all
    exist (so every read reaches the OSD) and without object-map or
    exclusive-lock (no extra OSD ops for them) and with librbd's I/O
    scheduler off (rbd_io_scheduler=none: its default, simple, merges an
    object's adjacent queued writes into one op, more of them the slower
    the OSD answers): the OSD's op_r / op_w deltas are the trace's
    requests split per 4 MiB object, within 1 %."""
    from cephlat.ceph.adminsock import perf_dump
    need(shutil.which("rbd-replay") is not None, "rbd-replay missing "
         "(Debian's ceph-common)")
    env = dict(os.environ, CEPH_CONF=lab["CEPH_CONF"])
    prep = recorded / "trace.rbd-replay"
    p = subprocess.run(["rbd-replay-prep", str(recorded / "trace"),
                        str(prep)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-1000:]
    _, _, tr = trace_requests(recorded / "trace")
    want = collections.Counter()
    for r in tr.requests:
        want[r.op] += _objects(r.off, r.len)
    assert want["read"] > 1000 and want["write"] > 500
    subprocess.run(["rbd", "rm", "rbd/img3"], capture_output=True, env=env)
    rbd(lab, "create", "--size", "1024", "--image-feature", "layering",
        "rbd/img3")
    try:
        # every object the trace touches exists: write the first 64 MiB
        rbd(lab, "bench", "--io-type", "write", "--io-pattern", "seq",
            "--io-size", "4M", "--io-total", "64M", "--io-threads", "4",
            "rbd/img3")
        before = perf_dump(lab["asok"])["osd"]
        p = subprocess.run(["rbd-replay", "--conf=%s" % lab["CEPH_CONF"],
                            "-p", "rbd", "--map-image",
                            "img1=img3", str(prep)],
                           capture_output=True, text=True, timeout=300,
                           env=dict(env, CEPH_ARGS="--rbd_io_scheduler=none"))
        after = perf_dump(lab["asok"])["osd"]
    finally:
        rbd(lab, "rm", "rbd/img3")
    assert p.returncode == 0, (p.stdout[-1000:], p.stderr[-1000:])
    got = {"read": after["op_r"] - before["op_r"],
           "write": after["op_w"] - before["op_w"]}
    for op in ("read", "write"):
        # within 1 %: open and close read the header (+5 reads seen)
        assert abs(got[op] - want[op]) <= 0.01 * want[op], \
            (op, got, dict(want))


def test_lttng_mode_recipe_and_diagnosis(lab, tmp_path):
    need(shutil.which("lttng") is not None, "lttng-tools missing")
    env = dict(os.environ, CEPH_CONF=lab["CEPH_CONF"])
    before = subprocess.run(["pgrep", "-x", "lttng-sessiond"],
                            capture_output=True).returncode == 0
    p = run_tool([RBDRECORD, "--lttng", "-o", str(tmp_path / "lt"), "--",
                  "sleep", "0.5"], env=env)
    assert p.returncode == 3, p.stderr           # documented exit status
    assert "librbd on this host has no LTTng tracepoints" in p.stderr
    assert "fix:" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "lt").exists()
    _assert_no_session()
    # the session it makes: event rule and contexts (kept while recording)
    tool = subprocess.Popen([PYTHON, RBDRECORD, "--lttng", "--no-checks",
                             "-o", str(tmp_path / "lt2"), "--", "sleep",
                             "4"], stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        # printed once the events and contexts are set
        line = wait_for_line(tool.stderr, "LTTng session", 30)
        session = re.search(r"(rbdrecord-\d+)", line).group(1)
        assert session in subprocess.run(["lttng", "list"],
                                         capture_output=True,
                                         text=True).stdout
        save = tmp_path / "saved"
        subprocess.run(["lttng", "save", session, "--output-path=%s" % save],
                       capture_output=True, check=True)
        xml = (save / (session + ".lttng")).read_text()
        assert "<name>librbd:*</name>" in xml
        assert "<domain>" in xml and "<type>UST</type>" in xml
        for ctx in ("PTHREAD_ID", "VPID", "PROCNAME"):
            assert "<type>%s</type>" % ctx in xml, ctx
    finally:
        _, err = tool.communicate(timeout=60)
    assert tool.returncode == 0, err
    _assert_no_session()
    after = subprocess.run(["pgrep", "-x", "lttng-sessiond"],
                           capture_output=True).returncode == 0
    assert after == before          # stopped only if it started it


def _assert_no_session():
    out = subprocess.run(["lttng", "list"], capture_output=True, text=True)
    assert "rbdrecord-" not in out.stdout, out.stdout


def test_bad_input(lab, recorded, tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        p = run_tool([RBDRECORD, "-o", str(tmp_path / "x"), "-p",
                      str(sleeper.pid)])
        assert_one_line_error(p, "has no librbd loaded")
    finally:
        sleeper.kill()
        sleeper.wait()
    p = run_tool([RBDRECORD, "-o", str(recorded / "trace"), "--", "true"])
    assert_one_line_error(p, "exists; pass --force")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metadata").write_bytes(os.urandom(2000))
    assert_one_line_error(run_tool([RBDRECORD, "--summary", str(bad)]),
                          "cannot read")
    assert_one_line_error(run_tool([RBDRECORD, "--to-fio", str(bad), "-o",
                                    str(tmp_path / "j")]), "cannot read")
    assert_one_line_error(run_tool([RBDRECORD, "-o", str(tmp_path / "y")]),
                          "give -p PID or -- COMMAND")


def test_force_replaces_only_a_trace(lab, recorded, tmp_path):
    """--force overwrites a trace rbdrecord recorded; a directory that is
    not one survives it with one error line."""
    import sys
    sys.path.insert(0, os.path.join(REPO, "lib"))
    from cephlat.capture import ctf
    env = dict(os.environ, CEPH_CONF=lab["CEPH_CONF"])
    old = tmp_path / "old"
    shutil.copytree(recorded / "trace", old)           # fio's, recorded
    assert ctf.Trace(str(old)).env["procname"] == "fio"
    p = run_tool([RBDRECORD, "-o", str(old), "--force", "--", "true"],
                 env=env)
    assert p.returncode == 0, p.stderr
    assert "wrote %s: 0 events" % old in p.stderr
    assert ctf.Trace(str(old)).env["procname"] == "true"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("keep me")
    p = run_tool([RBDRECORD, "-o", str(notes), "--force", "--", "true"],
                 env=env)
    assert_one_line_error(p, "%s is not a trace rbdrecord wrote (it holds "
                          "todo.txt); not overwriting it" % notes, status=1)
    assert (notes / "todo.txt").read_text() == "keep me"


def test_a_failing_command_gives_its_exit_status(lab, tmp_path):
    """rbdrecord -- COMMAND exits as COMMAND did (128 + N for signal N),
    keeping the trace; a command that succeeds: 0."""
    p = run_tool([RBDRECORD, "-o", str(tmp_path / "ok"), "--", "true"])
    assert p.returncode == 0, p.stderr
    p = run_tool([RBDRECORD, "-o", str(tmp_path / "three"), "--", "sh", "-c",
                  "exit 3"])
    assert p.returncode == 3, p.stderr
    assert "sh exited with status 3" in p.stderr
    assert os.path.exists(str(tmp_path / "three" / "metadata"))
    p = run_tool([RBDRECORD, "-o", str(tmp_path / "killed"), "--", "sh",
                  "-c", "kill -SEGV $$"])
    assert p.returncode == 128 + 11, p.stderr
