"""A short smoke of `make bench` (one pair of 3 s runs, reads only): the
JSON has every field with sane values. The full benchmark is make bench."""
import json
import os
import subprocess

from conftest import PYTHON, REPO


def test_bench_smoke(lab, tmp_path):
    out = tmp_path / "bench.json"
    p = subprocess.run([PYTHON, os.path.join(REPO, "bench", "run.py"),
                        "--smoke", "--out", str(out)], capture_output=True,
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
