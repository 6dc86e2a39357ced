"""A short smoke of `make bench`: its main part (one pair of 3 s runs, reads
only) on the 1-OSD lab and its osds part (one OSD traced vs three, one pair
of 2 s runs per mode and workload) on the 3-OSD lab: the JSON has every
field with sane values. The full benchmark is make bench."""
import json
import os
import subprocess

from conftest import PYTHON, REPO


def test_bench_smoke(lab, tmp_path):
    out = tmp_path / "bench.json"
    p = subprocess.run([PYTHON, os.path.join(REPO, "bench", "run.py"),
                        "--part", "main", "--smoke", "--out", str(out)],
                       capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["machine"]["cores"] == os.cpu_count()
    assert r["machine"]["ceph"].startswith("16.2.")
    for mode in ("default", "userspace", "record", "bounded", "bpftrace"):
        s = r["modes"][mode]["randread"]
        assert 0.2 < s["iops_ratio_median"] < 2.0, (mode, s)
        assert s["untraced_iops_median"] > 500
        assert s["p99_ratio_median"] > 0
    rec = r["modes"]["record"]["randread"]
    assert rec["events_per_s"] > 1000 and rec["lost"] == 0, rec
    assert 0 < rec["recorder_cpu_pct"] < 100
    # the recorder driven hard by the controlled program
    assert r["recorder"]["events"] > 50000 and r["recorder"]["lost"] == 0
    assert r["recorder"]["events_per_s"] > 10000
    assert r["recorder"]["lab_peak_cpu_pct"] == rec["recorder_cpu_pct"]
    assert r["modes"]["bounded"]["randread"]["estimated_pct"] is not None
    for name in ("stage_entry", "stage_return", "op_enqueue", "op_dequeue",
                 "op_done", "on_switch"):
        prog = r["programs"][name]
        assert prog["runs"] > 0 and 0 < prog["avg_ns"] < 100000, (name, prog)
    # 13 probes: 4 entry/return pairs + 3 op events per read
    assert 8 <= r["hits_per_op"] <= 14
    assert 0 < r["startup_s"] < 5 and 5 < r["peak_rss_mb"] < 500
    assert r["tracer_cpu_s_per_10k_ops"] > 0
    assert "| default | randread |" in p.stdout


def test_bench_osds_smoke(lab3, tmp_path):
    """The osds part (`make bench BENCH=osds`) on the 3-OSD lab, one pair of
    2 s runs per mode and workload: IOPS ratios, and the added CPU per op on
    each of the three OSDs for --osd 0 and --osd all, in the JSON and in
    the text."""
    out = tmp_path / "osds.json"
    md = tmp_path / "BENCHMARKS.md"
    p = subprocess.run([PYTHON, os.path.join(REPO, "bench", "run.py"),
                        "--part", "osds", "--smoke", "--osds-out", str(out),
                        "--md", str(md)], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    assert not md.exists()          # a smoke run never rewrites BENCHMARKS.md
    r = json.loads(out.read_text())
    assert r["osds"] == 3 and r["pairs"] == 1 and r["secs"] == 2
    assert r["machine"]["ceph"].startswith("16.2.")
    for wl in ("write", "randread"):
        for mode in ("one", "all"):
            s = r["workloads"][wl][mode]
            assert 0.1 < s["iops_ratio_median"] < 3.0, (wl, mode, s)
            assert s["untraced_iops_median"] > 100
            assert s["tracer_cpu_s_per_10k_ops"] > 0
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
