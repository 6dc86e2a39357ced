"""Before the OSD's clock starts: the messenger stages (throttle_wait, recv,
dispatch, from each op's message's own stamps) and the messenger
throttles. With osd_client_message_cap 4 and 64 reads in flight from one
client, the client waits milliseconds per read while the OSD's op_total
says ~100 us: the throttle is full, its connection retries every 1 ms,
and the head-of-line messages carry those waits in throttle_wait. Checked
per op against OpTracker's header_read, throttled, all_read and
queued_for_pg of the same request ids, on Pacific (host lab), Reef and
Tentacle (container labs)."""
import json
import subprocess

import pytest

from conftest import (OSDSTAGE, PYTHON, Bench, assert_ctf_readers_accept,
                      lab_run, prefill)
from test_osdstage_live import traced_window
from test_replicas import optracker_ops
from cephlat.ceph.adminsock import command
from cephlat.capture.reader import Capture

CAP = 4
THREADS = 64
WINDOW_S = "8"


def _config(lab, *args):
    p = lab_run(lab, "ceph", "config", *args)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _throttled(lab, tmp):
    """A captured window of 64 reads in flight against the OSD with its
    client message cap at 4 -> (report, stderr, capture, OpTracker ops)"""
    prefill(lab, 3)
    # OpTracker: keep every op of the window
    command(lab["asok"], "config set", var="osd_op_history_size",
            val=["20000"])
    _config(lab, "set", "osd", "osd_client_message_cap", str(CAP))
    cap = str(tmp / "throttled.ctf")
    try:
        got = command(lab["asok"], "config get", var="osd_client_message_cap")
        assert int(got["osd_client_message_cap"]) == CAP, got
        bench = Bench(lab, "rand", 40, threads=THREADS)
        try:
            out, err, _, _ = traced_window(
                lab, ["-j", "-w", cap, "--ring-mb", "128", WINDOW_S, "1"])
        finally:
            bench.stop()
        # OpTracker's history once the load has stopped: no later op
        # pushes the window's out
        historic = command(lab["asok"], "dump_historic_ops")
    finally:
        _config(lab, "rm", "osd", "osd_client_message_cap")
        command(lab["asok"], "config set", var="osd_op_history_size",
                val=["20"])
    assert_ctf_readers_accept(cap)
    return json.loads(out.strip().splitlines()[-1]), err, cap, historic


@pytest.fixture(scope="module")
def host_run(lab, tmp_path_factory):
    return lab, _throttled(lab, tmp_path_factory.mktemp("msgr"))


@pytest.fixture(scope="module")
def container_run(container_lab, tmp_path_factory):
    return container_lab, _throttled(container_lab,
                                     tmp_path_factory.mktemp("msgr"))


def _check_report(rec, err):
    assert "none lost" in err, err
    assert rec["lost"]["msg_unstamped"] == 0, rec["lost"]
    t = rec["throttles"]["osd_client_messages"]
    assert t["max"] == CAP and t["setting"] == "osd_client_message_cap", t
    assert t["fails"] > 0 and t["blocked_s"] > 0, t
    st = rec["stages"]
    for s in ("throttle_wait", "recv", "dispatch"):
        # every op enqueued has its message's stamps (those enqueued but
        # not dequeued at either end of the window: at most the ops in
        # flight)
        assert abs(st[s]["count"] - st["queue_wait"]["count"]) <= THREADS, \
            (s, st[s]["count"], st["queue_wait"]["count"])
    # the head-of-line messages waited for the 1-ms retries
    assert st["throttle_wait"]["max_us"] >= 1000, st["throttle_wait"]
    assert rec["cause"] == "throttle", rec["verdict"]
    v = " ".join(rec["verdict"].split())
    assert "osd_client_messages was full (cap %d, osd_client_message_cap)" \
        % CAP in v, v
    assert "unread in the socket" in v, v
    assert "wake-ups are being missed" not in v, v


def _check_ops(rec, cap, historic):
    """Each op both saw: its messenger stages are OpTracker's header_read
    -> throttled -> all_read -> queued_for_pg."""
    c = Capture(cap, 0)
    ours = {o.req: o for o in c.ops(c.first_ns, c.last_ns)
            if o.req and o.msg}
    theirs = optracker_ops(historic)
    both = [q for q in theirs if q in ours and "throttled" in theirs[q]]
    assert len(both) >= 200, (len(both), len(theirs), len(ours))
    # OpTracker marks queued_for_pg a few lines into enqueue_op, past our
    # probe: a thread preempted in between moves it by a run-queue wait,
    # this window's p99 at most
    rq_us = rec["kernel"]["wakeup_delay"]["p99_us"]
    same = dispatch_ok = hol = 0
    for q in both:
        ev, m = theirs[q], ours[q].msg
        want = {"throttle_wait": ev["throttled"] - ev["header_read"],
                "recv": ev["all_read"] - ev["throttled"]}
        # the same stamps (OpTracker prints microseconds)
        same += all(abs(m[k] / 1000 - w * 1e6) <= 2 for k, w in
                    want.items())
        d = (ev["queued_for_pg"] - ev["all_read"]) * 1e6
        dispatch_ok += abs(m["dispatch"] / 1000 - d) <= max(0.1 * d, 50,
                                                            rq_us)
        hol += m["throttle_wait"] >= 1e6
    assert same == len(both), (same, len(both))
    assert dispatch_ok >= 0.95 * len(both), (dispatch_ok, len(both), rq_us)
    assert hol > 0, "no op of OpTracker's waited a 1-ms throttle retry"


def _check(run):
    """The full throttle named with its cap, and each op's messenger
    stages OpTracker's."""
    _, (rec, err, cap, historic) = run
    _check_report(rec, err)
    _check_ops(rec, cap, historic)


def test_throttle_and_stamps(host_run):
    _check(host_run)


def test_throttle_and_stamps_containers(container_run):
    _check(container_run)


def test_read_back_keeps_the_throttles_and_verdict(host_run):
    """The capture's report is the live one: the throttles' counters
    (read from the OSD, not from events) are kept with it."""
    _, (rec, _, cap, _) = host_run
    p = subprocess.run([PYTHON, OSDSTAGE, "-r", cap, "-j"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    back = json.loads(p.stdout.strip().splitlines()[0])
    assert back["throttles"] == rec["throttles"]
    assert (back["cause"], back["verdict"]) == (rec["cause"], rec["verdict"])
    for s in ("throttle_wait", "recv", "dispatch"):
        assert back["stages"][s] == rec["stages"][s], s
