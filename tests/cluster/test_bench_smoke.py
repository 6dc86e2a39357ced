"""A short smoke of `make bench`: its main part (one pair of 2 s windows,
reads only, one untraced window the base of every mode: IOPS, the added
OSD, host and tracer CPU per op, uprobe hits per op, BPF statistics per
mode from its traced window; Ceph's OpTracker off against on) on the
1-OSD lab, its toggle part (each mode attached and detached twice) there
too, and its osds part (one OSD traced vs three, one pair of 2 s
windows per mode and workload) on the 3-OSD lab: the JSON has every field
with sane values. The full benchmark is make bench."""
import json
import math
import os
import subprocess

from conftest import PYTHON, REPO


def _finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def _spread_ok(s, lo, hi):
    """A {median, min, max} figure: finite, ordered, median in (lo, hi)."""
    assert s is not None and all(_finite(s[k]) for k in ("median", "min",
                                                          "max")), s
    assert s["min"] <= s["median"] <= s["max"], s
    assert lo < s["median"] < hi, s


def _smoke(part, tmp_path, seed=None, out_flag="--out", timeout=900):
    """bench/run.py --part PART --smoke, its results into a file of
    tmp_path (first holding `seed`, when given): -> (the finished process,
    its results). A smoke run never rewrites BENCHMARKS.md."""
    out = tmp_path / "bench.json"
    if seed is not None:
        out.write_text(json.dumps(seed))
    md = tmp_path / "BENCHMARKS.md"
    p = subprocess.run([PYTHON, os.path.join(REPO, "bench", "run.py"),
                        "--part", part, "--smoke", out_flag, str(out),
                        "--md", str(md)], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-2000:]
    assert not md.exists()
    return p, json.loads(out.read_text())


def test_bench_smoke(lab, tmp_path):
    p, r = _smoke("main", tmp_path)
    assert r["machine"]["cores"] == os.cpu_count()
    assert r["machine"]["ceph"].startswith("16.2.")
    modes = ("default", "userspace", "lean", "record", "bounded",
             "bpftrace", "by", "stacks", "oncpu")
    for mode in modes:
        s = r["modes"][mode]["randread"]
        # one pair of 2-s windows: whatever else runs on the machine in
        # one of them moves the ratio (other work at full priority once
        # left an untraced window 2.5x slower than its traced one); a
        # tenth or ten times is a window measured wrong, not load
        assert 0.1 < s["iops_ratio_median"] < 10.0, (mode, s)
        assert s["untraced_iops_median"] > 500
        assert s["p99_ratio_median"] > 0
        # the cost per op: OSD and host CPU, traced minus untraced, and
        # the tracer's own (all CPU seconds over Ceph's op count)
        _spread_ok(s["iops_ratio"], 0.1, 10.0)
        _spread_ok(s["osd_untraced_us_per_op"], 1, 100000)
        _spread_ok(s["host_untraced_us_per_op"], 1, 100000)
        _spread_ok(s["osd_added_us_per_op"], -1000, 5000)
        _spread_ok(s["host_added_us_per_op"], -2000, 10000)
        _spread_ok(s["tracer_us_per_op"], -1, 5000)
        _spread_ok(s["client_added_us_per_op"], -10000, 10000)
        _spread_ok(s["other_us_per_op"], -10000, 10000)
        _spread_ok(s["cost_pct"], -200, 200)
        assert len(s["per_pair"]) == 1 == s["pairs"]
        # uprobe program runs per op, from the tracer's own programs with
        # the kernel's BPF statistics on (the bpftrace reference too)
        st = r["bpf_stats"][mode]
        if mode == "bounded":
            # a 2-s window may fall wholly in a detached part of a cycle
            assert 0 <= st["uprobe_runs_per_op"] < 30, (mode, st)
        else:
            assert 0 < st["uprobe_runs_per_op"] < 30, (mode, st)
        assert st["all_runs_per_op"] >= st["uprobe_runs_per_op"]
    # uprobe hits per op from osdstage's own counters (names from the ABI)
    for mode in ("default", "userspace", "record"):
        s = r["modes"][mode]["randread"]
        _spread_ok(s["uprobe_hits_per_op"], 0, 30)
        assert s["hits_per_op"]["hit_entry"] > 0, s["hits_per_op"]
    for mode in ("default", "userspace"):
        # the tool's count agrees with the kernel's (the same window: the
        # smoke takes the BPF statistics in its traced windows)
        s = r["modes"][mode]["randread"]
        st = r["bpf_stats"][mode]["uprobe_runs_per_op"]
        assert abs(s["uprobe_hits_per_op"]["median"] - st) <= 0.25 * st, (
            mode, s["uprobe_hits_per_op"], st)
    # the lean tier: one probe hit per op (log_op_stats), no scheduler
    # program
    lean = r["modes"]["lean"]["randread"]
    _spread_ok(lean["uprobe_hits_per_op"], 0.9, 1.1)
    assert lean["hits_per_op"].get("hit_sched", 0) == 0, lean["hits_per_op"]
    assert lean["hits_per_op"].get("hit_return", 0) == 0, lean["hits_per_op"]
    assert r["modes"]["bpftrace"]["randread"]["uprobe_hits_per_op"] is None
    assert r["hits_per_op"] == \
        r["modes"]["default"]["randread"]["uprobe_hits_per_op"]["median"]
    # --no-kernel: no scheduler programs, so the host pays no more than
    # its uprobes; the default mode's kernel programs ran
    assert r["modes"]["userspace"]["randread"]["hits_per_op"].get(
        "hit_sched", 0) == 0
    # --on-cpu's sampling program ran in its window (a clock per CPU)
    oc = r["bpf_stats"]["oncpu"]["programs"]
    assert oc.get("on_cpu_sample", {}).get("runs", 0) > 0, sorted(oc)
    assert "on_cpu_sample" not in r["bpf_stats"]["stacks"]["programs"]
    rec = r["modes"]["record"]["randread"]
    assert rec["events_per_s"] > 1000 and rec["lost"] == 0, rec
    assert 0 < rec["recorder_cpu_pct"] < 100
    # the recorder driven hard by the controlled program
    assert r["recorder"]["events"] > 50000 and r["recorder"]["lost"] == 0
    assert r["recorder"]["events_per_s"] > 10000
    assert r["recorder"]["lab_peak_cpu_pct"] == rec["recorder_cpu_pct"]
    bounded = r["modes"]["bounded"]["randread"]
    _spread_ok(bounded["estimated_pct"], 0, 100)
    _spread_ok(bounded["osd_cost_pct"], -100, 1000)
    ran = {n: p for n, p in r["programs"].items() if p["runs"]}
    assert "on_switch" in ran, sorted(r["programs"])
    assert any(n in ran for n in ("stage_entry", "op_enqueue", "op_dequeue",
                                  "op_done")), sorted(ran)
    for name, prog in ran.items():
        assert 0 < prog["avg_ns"] < 100000, (name, prog)
    assert 0 < r["hits_per_op"] <= 14
    assert 0 < r["startup_s"] < 5 and 5 < r["peak_rss_mb"] < 500
    assert r["tracer_cpu_s_per_10k_ops"] >= 0  # 10-ms ticks: 0 in a short run
    assert "| default | randread |" in p.stdout
    assert "| mode | workload | OSD added | host added |" in p.stdout
    # Ceph's own OpTracker, off against on: no tracer, no hit of ours, and
    # the OSD left with it on (its default)
    ot = r["modes"]["optracker"]["randread"]
    _spread_ok(ot["iops_ratio"], 0.2, 2.0)
    _spread_ok(ot["osd_added_us_per_op"], -1000, 5000)
    assert ot["uprobe_hits_per_op"] is None and ot["hits_per_op"] == {}
    assert ot["tracer_us_per_op"] is None
    assert "optracker" not in r["bpf_stats"]
    assert "| optracker | randread |" in p.stdout
    from cephlat.ceph.adminsock import command, find_osd_socket
    got = command(find_osd_socket(lab["pid"], "0"), "config get",
                  var="osd_enable_op_tracker")
    assert got["osd_enable_op_tracker"] == "true", got


def test_bench_toggle_smoke(lab, tmp_path):
    """The toggle part (`make bench BENCH=toggle`) at its smallest: the
    lean, userspace and default modes attached and detached in turns, and
    Ceph's OpTracker switched off for the optracker mode's windows, twice
    each, under one fio run (17 windows of 1 s), then their BPF
    statistics: every figure there and sane, the hits per read each
    mode's own (none for OpTracker), the default set against OpTracker
    round by round, OpTracker on again at the end, merged into an
    existing results file without touching its other keys."""
    p, r = _smoke("toggle", tmp_path, seed={"modes": "kept"})
    assert r["modes"] == "kept"
    t = r["toggled"]
    assert (t["pairs"], t["secs"]) == (2, 1.0)
    hits = {"lean": (0.9, 1.1), "userspace": (5.5, 6.5),
            "default": (5.5, 6.5), "optracker": (-0.1, 0.1)}
    assert [w["mode"] for w in t["windows"]] == \
        [None, "lean", None, "userspace", None, "default", None,
         "optracker", None] + \
        ["lean", None, "userspace", None, "default", None, "optracker",
         None]
    assert t["modes"]["optracker"]["prog_us_per_op"] == 0
    assert t["modes"]["default"]["vs_optracker_us"]["n"] == 2, t["modes"]
    from cephlat.ceph.adminsock import command, find_osd_socket
    got = command(find_osd_socket(lab["pid"], "0"), "config get",
                  var="osd_enable_op_tracker")
    assert got["osd_enable_op_tracker"] == "true", got
    assert all(w["iops"] > 100 for w in t["windows"]), t["windows"]
    for mode, (lo, hi) in hits.items():
        m = t["modes"][mode]
        for key, least, most in (("added_us", -1000, 5000),
                                 ("workers_added_us", -1000, 5000),
                                 ("iops_ratio", 0.2, 2.0),
                                 ("untraced_us_per_op", 1, 100000)):
            _spread_ok(m[key], least, most)
            assert m[key]["n"] == (2 if key != "untraced_us_per_op" else 9)
        assert lo < m["uprobe_hits_per_op"] < hi, (mode, m)
        assert m["prog_us_per_op"] > 0 or mode == "optracker", (mode, m)
    # the scheduler and block programs run in the default mode only
    assert t["modes"]["default"]["prog_us_per_op"] > \
        t["modes"]["userspace"]["prog_us_per_op"], t["modes"]
    assert t["trap"]["hits"] == t["modes"]["userspace"]["uprobe_hits_per_op"]
    assert "## Attached and detached every few seconds" in p.stdout
    assert "| pacific | lean | 2 x 1 s |" in p.stdout, p.stdout


def test_bench_osds_smoke(lab3, tmp_path):
    """The osds part (`make bench BENCH=osds`) on the 3-OSD lab, one pair of
    2 s runs per mode and workload: IOPS ratios, and the added CPU per op on
    each of the three OSDs for --osd 0 and --osd all, in the JSON and in
    the text."""
    p, r = _smoke("osds", tmp_path, out_flag="--osds-out")
    assert r["osds"] == 3 and r["pairs"] == 1 and r["secs"] == 2
    assert r["machine"]["ceph"].startswith("16.2.")
    for wl in ("write", "randread"):
        for mode in ("one", "all"):
            s = r["workloads"][wl][mode]
            assert 0.1 < s["iops_ratio_median"] < 3.0, (wl, mode, s)
            assert s["untraced_iops_median"] > 100
            assert s["tracer_cpu_s_per_10k_ops"] >= 0  # 10-ms ticks
            assert [o["osd"] for o in s["per_osd"]] == [0, 1, 2]
            for o in s["per_osd"]:
                # every OSD saw ops (writes replicate to all three, reads
                # go to each OSD's primary PGs) and has a cost figure
                assert o["traced_ops_median"] > 50, (wl, mode, o)
                c = o["added_us_per_op"]
                assert c is not None and c["min"] <= c["median"] <= c["max"]
                assert -1000 < c["median"] < 5000, (wl, mode, o)
                assert 1 < o["untraced_us_per_op"]["median"] < 100000
        assert r["workloads"][wl]["per_op_cost_holds"] in (True, False)
    text = p.stdout
    assert "## Tracing three OSDs at once vs one" in text
    for wl in ("write", "randread"):
        for mode in ("--osd 0", "--osd all"):
            assert "| %s | `%s` |" % (wl, mode) in text, text
    assert "osd.2 added CPU per op" in text
    assert "- write: **" in text and "- randread: **" in text


def test_bench_reader_smoke(bpf_ready, tmp_path):
    """The reader part (`make bench BENCH=reader`) at a tiny size: a capture
    of the controlled program read back with -j, --slowest and --html (each
    timed with its own peak RSS), a capture of its lock waits' stacks read
    back with --folded and a window's report, the recorder alone at 500k
    events/s, the traced program's event rate; merged into an existing results file
    without touching its other keys; no lab needed."""
    p, r = _smoke("reader", tmp_path, seed={"modes": "kept", "recorder": {
        "lab_peak_cpu_pct": 5.0, "lab_peak_events_per_s": 120000}},
        timeout=300)
    assert r["modes"] == "kept"
    rd = r["reader"]
    assert rd["events"] > 50000 and rd["lost"] == 0, rd
    assert rd["capture_mb"] > 0
    for key in ("json", "slowest", "html"):
        s = rd["reads"][key]
        assert s["secs"] > 0 and s["events_per_s"] > 1000, (key, s)
        assert 10 < s["peak_rss_mb"] < 2000, (key, s)
    assert rd["ten_min_html_s"] > 0
    # the stacks of the program's lock waits read back
    st = rd["stacks"]
    assert st["waits"] > 50 and st["lost"] == 0, st
    for key in ("folded", "window"):
        s = st["reads"][key]
        assert s["secs"] > 0 and s["waits_per_s"] > 0, (key, s)
        assert 10 < s["peak_rss_mb"] < 2000, (key, s)
    assert "Stacks read back:" in p.stdout
    assert "| `osdstage.py -r CAP --folded waits` |" in p.stdout
    row = r["recorder_rates"]["rows"][0]
    assert row["set_rate"] == 500000 and row["lost"] == 0, row
    assert row["events"] == row["made"] > 100000, row
    rec = r["recorder"]
    assert rec["events"] > 50000 and rec["lost"] == 0, rec
    assert rec["cpu_window"] == "go to exit"
    assert 0 < rec["cpu_pct_of_core"] < 100
    assert 0 <= rec["rec_thread_cpu_pct_of_core"] <= rec["cpu_pct_of_core"]
    assert rec["lab_peak_cpu_pct"] == 5.0       # the main part's, kept
    assert "## Reading a large capture" in p.stdout
    assert "| `osdstage.py -r CAP --slowest 5 -j` |" in p.stdout
