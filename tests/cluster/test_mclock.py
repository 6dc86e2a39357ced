"""mClock holds on the OSDs operators run: Reef (18.2) and Tentacle (20.2)
schedule ops with mClock. With the client class limited to half of the
OSD's capacity (profile custom, client res 0.1, lim 0.5) and 16 reads in
flight, Ceph serves lim x capacity IOPS and the shard workers sleep, with
ops queued, until the times the scheduler gives: the tool must call that
the scheduler's hold, with the limit, the capacity and where the capacity
came from, and never a missed wake-up."""
import json

import pytest

from conftest import Bench, lab_run, prefill
from test_osdstage_live import traced_window

CLIENT_RES, CLIENT_LIM = 0.1, 0.5
SETTINGS = {"osd_mclock_profile": "custom",
            "osd_mclock_scheduler_client_res": CLIENT_RES,
            "osd_mclock_scheduler_client_lim": CLIENT_LIM}
WINDOWS, WINDOW_S = 2, "6"
ALONE = 2


def _config(lab, *args):
    p = lab_run(lab, "ceph", "config", *args)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _asok_get(lab, name):
    p = lab_run(lab, "ceph", "daemon", "osd.0", "config", "get", name)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)[name]


@pytest.fixture(scope="module")
def limited(container_lab):
    """The lab with the client class limited; two traced windows under
    16 concurrent 4 KiB random reads, then two of BlueStore::read alone
    -> (lab, [(report, perf before, after)], the same of the latter)"""
    lab = container_lab
    prefill(lab, 3)
    for k, v in SETTINGS.items():
        _config(lab, "set", "osd", k, str(v))
    try:
        assert float(_asok_get(lab, "osd_mclock_scheduler_client_lim")) == \
            CLIENT_LIM
        bench = Bench(lab, "rand", 90, threads=16)
        runs, alone = [], []
        try:
            for args, into in [([], runs)] * WINDOWS + [
                    (["-S", "bluestore_read"], alone)] * ALONE:
                out, err, before, after = traced_window(
                    lab, ["-j"] + args + [WINDOW_S, "1"])
                into.append((json.loads(out.strip().splitlines()[-1]),
                             before, after))
        finally:
            bench.stop()
    finally:
        # the class's settings first, the profile last: with the profile
        # removed first, Reef keeps the custom limit in force although
        # its config then says lim 0 (157 IOPS, lim 0.5 x 315, until the
        # profile changes again; docs/ceph.md) and every later test of
        # the lab finds its ops held
        for k in reversed(list(SETTINGS)):
            _config(lab, "rm", "osd", k)
    return lab, runs, alone


def test_the_scheduler_and_its_settings_are_read(limited):
    lab, runs, _ = limited
    cap = float(_asok_get(lab, "osd_mclock_max_capacity_iops_hdd"))
    for rec, _, _ in runs:
        s = rec["scheduler"]
        assert s["mclock"] and s["queue"] == "mclock_scheduler"
        assert s["profile"] == "custom"
        assert s["classes"]["client"]["res"] == CLIENT_RES
        assert s["classes"]["client"]["lim"] == CLIENT_LIM
        # the lab's loop device is rotational, its capacity the default
        assert s["device"] == "hdd"
        assert s["capacity_iops"] == cap
        assert s["capacity_source"] == "default"


def test_ceph_serves_the_limit(limited):
    """The setting does what the report will say it does: Ceph's own read
    count over each window is lim x capacity IOPS within 10 %."""
    lab, runs, _ = limited
    for rec, before, after in runs:
        n = after["osd"]["op_r"] - before["osd"]["op_r"]
        iops = n / (after["_t"] - before["_t"])
        want = CLIENT_LIM * rec["scheduler"]["capacity_iops"]
        assert abs(iops - want) <= 0.1 * want, (iops, want)


def test_queue_wait_is_held_by_the_scheduler(limited):
    """Each window: 90 % or more of the queue wait is the scheduler's hold,
    in the attribution and in the shard rows (up to the end of the
    dequeuing worker's last hold an op was not due: the ops it served in
    between are the hold's); the rest is the workers' CPU after it (the
    last hold's run-queue wait, pickup, busy), none of it asleep with ops
    queued and not held (signal); no op's split is truncated; no expired
    wait counts as a missed wake-up."""
    _, runs, _ = limited
    for rec, _, _ in runs:
        assert rec["stages"]["queue_wait"]["count"] > 100, rec["stages"]
        a = rec["attribution"]
        share = {p: a[p]["share"] for p in a}
        assert share["held"] >= 0.9, a
        assert share["signal"] <= 0.01, a
        held = sum(r["held"] * r["ops"] * r["queue_wait_mean_us"]
                   for r in rec["shards"])
        qw = sum(r["ops"] * r["queue_wait_mean_us"] for r in rec["shards"])
        assert abs(held / qw - share["held"]) <= 0.005, (rec["shards"], a)
        assert rec["lost"]["attr_truncated"] == 0, rec["lost"]
        assert rec["wakers"]["timeout"] == 0, rec["wakers"]


def test_the_verdict_names_the_limit(limited):
    _, runs, _ = limited
    for rec, _, _ in runs:
        s = rec["scheduler"]
        assert rec["cause"] == "held", rec["verdict"]
        text = " ".join(rec["verdict"].split())
        assert "osd_mclock_scheduler_client_lim 0.5" in text, text
        assert "0.5 x %g IOPS = %.0f IOPS" % (
            s["capacity_iops"], CLIENT_LIM * s["capacity_iops"]) in text, text
        assert "osd_mclock_max_capacity_iops_hdd = %g, the default for hdd" \
            % s["capacity_iops"] in text, text
        assert "missed" not in rec["cause"]
        assert "wake-ups are being missed" not in text, text


def test_bluestore_read_on_a_cold_cpu(limited):
    """Under the limit a worker runs an op every ~30 ms or so, and its CPU
    is cold when BlueStore::read's probes fire: traced alone (no probe of
    the op warms the path before it) they cost 2.3-3.2 us more than the
    warm calibration, 25-40 % of a cached read here. The calibration's
    cold calls correct it (engine/calibrate.py): each window's mean within
    10 % of Ceph's own read_lat over the same calls, plus half the warm
    probe cost (what the correction leaves: -0.05 to +0.8 us measured)."""
    _, _, alone = limited
    for rec, before, after in alone:
        b, a = before["bluestore"]["read_lat"], after["bluestore"]["read_lat"]
        n = a["avgcount"] - b["avgcount"]
        assert n > 100, n
        want = (a["sum"] - b["sum"]) / n * 1e6
        got = rec["stages"]["bluestore_read"]["mean_us"]
        bias = rec["call_bias_us"]
        assert bias > 0, rec["call_bias_us"]
        assert abs(got - want) <= 0.1 * want + 0.5 * bias, (got, want, bias)
