"""Real-cluster tier: a capture of the lab's ceph-osd made during `make
workload` (writes, then random reads) reads back offline to the identical
reports, opens in babeltrace2 with matching counts, survives truncation and
renders as an HTML report with a timeline (checked in headless Chromium)
and as Perfetto JSON."""
import collections
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

import pytest

from browser import chromium, rendered
from conftest import (OSDSTAGE, PYTHON, REPO, assert_ctf_readers_accept,
                      need, run_tool, wait_for_line)

ARTEFACTS = os.environ.get("OSDSTAGE_ARTEFACTS", "/tmp/osdstage-artefacts")


@pytest.fixture(scope="module")
def lab_capture(lab, tmp_path_factory):
    """Two 5-second reports recorded while `make workload` runs."""
    cap = str(tmp_path_factory.mktemp("lab") / "osd.ctf")
    env = dict(os.environ, CEPH_CONF=lab["CEPH_CONF"], SECS="7",
               THREADS="16")
    work = subprocess.Popen(["make", "-s", "-C", REPO, "workload"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    tool = None
    try:
        # the workload trims the pool first; start when the writes do
        wait_for_line(work.stdout, "== rados bench", 300)
        tool = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(lab["pid"]),
                                 "-j", "-S", "all", "-w", cap, "5", "2"],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out, err = tool.communicate(timeout=120)
        rest, _ = work.communicate(timeout=120)
    finally:
        for p in (work, tool):
            if p is not None and p.poll() is None:
                p.kill()
    assert tool.returncode == 0, err
    assert work.returncode == 0, rest
    assert "none lost" in err, err
    lines = out.splitlines()
    assert len(lines) == 2
    # every CTF reader takes it whole (its streams in time order)
    assert_ctf_readers_accept(cap)
    return cap, lines


def test_read_back_is_the_identical_report(lab_capture):
    cap, live = lab_capture
    p = run_tool([OSDSTAGE, "-r", cap, "-j"])
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.splitlines() == live
    recs = [json.loads(line) for line in live]
    # the workload ran through both reports: writes, then reads
    assert sum(r["stages"]["op_total"]["by_class"]["write"]["count"]
               for r in recs) > 1000
    assert sum(r["stages"]["op_total"]["by_class"]["read"]["count"]
               for r in recs) > 1000
    # and the text report is the same report
    text = run_tool([OSDSTAGE, "-r", cap]).stdout
    assert text.count("VERDICT (") == 2 and "stage = do_op" in text


def test_babeltrace2_counts_match_the_reports(lab_capture):
    need(shutil.which("babeltrace2") is not None, "babeltrace2 missing")
    cap, live = lab_capture
    recs = [json.loads(line) for line in live]
    p = subprocess.Popen(["babeltrace2", cap], stdout=subprocess.PIPE,
                         text=True)
    counts = collections.Counter()
    for line in p.stdout:
        name = line.split(" osdstage:", 1)[1].split(":", 1)[0]
        if name in ("op_dequeue", "stage", "block_rq"):
            # reports 1 and 2 are intervals 1 and 2 (0: before the first)
            interval = int(re.search(r"interval = (\d+)", line).group(1))
            if interval not in (1, 2):
                continue
            if name == "stage":
                name = line.split('stage = ( "', 1)[1].split('"', 1)[0]
        counts[name] += 1
    assert p.wait() == 0
    assert counts["op_dequeue"] == sum(r["stages"]["queue_wait"]["count"]
                                       for r in recs)
    for stage in ("do_op", "bluestore_read", "bluestore_submit"):
        assert counts[stage] == sum(r["stages"][stage]["count"]
                                    for r in recs), stage
    assert counts["block_rq"] == sum(r["kernel"]["block_rq"]["count"]
                                     for r in recs)
    assert counts["do_op"] > 1000 and counts["end"] == 1


def _packet_starts(path):
    out, pos, data = [], 0, open(path, "rb").read()
    while pos < len(data):
        out.append(pos)
        pos += struct.unpack_from("<Q", data, pos + 48)[0] // 8
    return out


def test_cut_capture_reads_whole_packets(lab_capture, tmp_path):
    cap, live = lab_capture
    full = sum(json.loads(line)["stages"]["do_op"]["count"] for line in live)
    stream = max((f for f in os.listdir(cap) if f.startswith("stream_cpu")),
                 key=lambda f: os.path.getsize(os.path.join(cap, f)))
    starts = _packet_starts(os.path.join(cap, stream))
    assert len(starts) > 20
    got = []
    for cut in (starts[len(starts) // 2], starts[len(starts) // 2] + 4321,
                starts[-1] + 100):
        d = tmp_path / str(cut)
        shutil.copytree(cap, d)
        with open(d / stream, "r+b") as f:
            f.truncate(cut)
        p = run_tool([OSDSTAGE, "-r", str(d), "-j"])
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        assert ("cut short" in p.stderr) == (cut not in starts)
        recs = [json.loads(line) for line in p.stdout.splitlines()]
        got.append(sum(r["stages"]["do_op"]["count"] for r in recs))
    # more of the file, more ops; never more than recorded
    assert got[0] <= got[1] <= got[2] <= full and got[0] < full


def test_html_report_in_chromium_and_perfetto(lab_capture, tmp_path):
    need(shutil.which("chromium") is not None, "chromium missing "
         "(make setup)")
    cap, _ = lab_capture
    html, pf = tmp_path / "report.html", tmp_path / "trace.json"
    p = run_tool([OSDSTAGE, "-r", cap, "--from", "3", "--timeline-ms", "30",
                  "--html", str(html), "--perfetto", str(pf), "-j"])
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert "wrote %s" % html in p.stderr
    assert oct(os.stat(html).st_mode & 0o777) == "0o600"
    page = html.read_text()
    assert "http://" not in page and "https://" not in page
    d = rendered(html)
    assert {"timeline", "verdict", "attribution", "roles"} <= d.ids
    assert d.classes["lane"] >= 6          # 5 shard workers + an enqueuer
    assert d.classes["op"] > 10 and d.classes["stage"] > d.classes["op"]
    assert d.classes["wake"] > 0 and d.classes["bar"] > 10
    assert d.classes["cpu-run"] and d.classes["cpu-sleep"]
    from cephlat.model import verdict
    assert verdict.CAUSES[rec["cause"]] in " ".join(d.verdict)
    os.makedirs(ARTEFACTS, exist_ok=True)
    png = os.path.join(ARTEFACTS, "lab-report.png")
    c = chromium(["--hide-scrollbars", "--screenshot=" + png,
                  "--window-size=1400,2400", "file://%s" % html])
    assert c.returncode == 0 and os.path.getsize(png) > 10_000
    shutil.copy(html, os.path.join(ARTEFACTS, "lab-report.html"))
    from cephlat.render import perfetto
    trace = json.loads(pf.read_text())
    assert perfetto.validate(trace) == []
    names = collections.Counter(e["name"] for e in trace["traceEvents"])
    assert names["do_op"] > 10 and names["running"] > 10
    # the messenger's stages lead up to each op's queue wait, and every
    # op says its scheduler class (a WPQ OSD: no hold, none drawn)
    qw = [e for e in trace["traceEvents"]
          if e["ph"] == "b" and e["name"] == "queue_wait"]
    assert qw and {e["args"]["queue_class"] for e in qw} == {"client"}
    # (an op enqueued before the window has its messenger stages outside)
    inside = sum(1 for e in qw if e["ts"] > 0)
    assert 2 * inside <= names["dispatch"] <= 2 * len(qw), (
        names["dispatch"], inside, len(qw))
    assert not names["held (op scheduler)"]
    assert d.classes["s-dispatch"] > 10


def test_slowest_ops_show_the_messenger_and_the_class(lab_capture):
    """--slowest: the message's stages before the enqueue (negative
    times, back to back up to it) and the op's scheduler class."""
    cap, _ = lab_capture
    p = run_tool([OSDSTAGE, "-r", cap, "--slowest", "5", "-j"])
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["slowest"]
    assert len(rows) == 5
    for r in rows:
        assert r["queue_class"] == "client", r
        msg = [st for st in r["stages"] if st["end_us"] <= 0]
        assert [st["stage"] for st in msg] == \
            ["throttle_wait", "recv", "dispatch"], r["stages"]
        assert msg[-1]["end_us"] == 0
        for a, b in zip(msg, msg[1:]):
            assert a["end_us"] == b["start_us"], msg
    text = run_tool([OSDSTAGE, "-r", cap, "--slowest", "1"]).stdout
    assert re.search(r"^   -[0-9.]+\.\.-[0-9.]+ throttle_wait$", text, re.M), \
        text


def test_reading_needs_no_root(lab_capture):
    """-r reads files only: an unprivileged user reads a copy it may read,
    and gets one clear line for the private original."""
    cap, live = lab_capture
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
              PYTHON, OSDSTAGE, "-j", "-r"]
    p = subprocess.run(nobody + [cap], capture_output=True, text=True)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "Permission denied" in p.stderr, p.stderr
    d = tempfile.mkdtemp(prefix="osdstage-shared-", dir="/var/tmp")
    try:
        shared = os.path.join(d, "osd.ctf")
        shutil.copytree(cap, shared)
        subprocess.run(["chmod", "-R", "a+rX", d], check=True)
        p = subprocess.run(nobody + [shared], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == live
    finally:
        shutil.rmtree(d)


def test_windows_of_a_lab_capture_never_contradict_themselves(lab_capture):
    """The report's invariants (tests/invariants.py: per-class counts add
    up, do_op against dequeue_op, the attribution adds up, the verdict
    quotes the tables and calls no sleeping workers saturated, --slowest
    rows account for their span) over random windows and filters of a
    capture of the real OSD under writes and reads."""
    from invariants import check_capture
    assert check_capture(lab_capture[0], n=30) > 0
