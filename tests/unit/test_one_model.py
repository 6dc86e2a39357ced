"""One model, the same figures in every sink: the exporter sums the
intervals the report model built (model/interval.py's Interval) for the
JSON and text reports, so its metrics over a capture's replayed intervals
carry exactly the counts and sums of those reports; a window's text,
JSON and HTML reports hold the same figures."""
import json
import os
import re
import subprocess

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cephlat.capture.reader import Capture
from cephlat.exporter import families as F
from cephlat.exporter.collect import Exported
from cephlat.model.interval import RunInfo, build_interval

from conftest import OSDSTAGE, PYTHON, REPO

FIX = os.path.join(REPO, "tests", "fixtures")
COST = {"interval_attached_fraction": 1.0, "estimated_pct": 0.0}


def _intervals(name):
    cap = Capture(os.path.join(FIX, name))
    run = RunInfo.from_capture(cap)
    run.name = "osd.0"
    return [build_interval(run, cur, prev, r.wall_ts, r.interval_s,
                           r.in_flight) for cur, prev, r in cap.replay()]


def _samples(ivs):
    ex = Exported(0.0)
    for iv in ivs:
        ex.add_interval("osd.0", iv, COST)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    out = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items()
                                  if k not in ("ceph_daemon", "le")))
            if "le" not in s.labels:
                out[(s.name, labels)] = s.value
    return out


@pytest.mark.parametrize("name", ["lab-v0.ctf", "shardq-v0.ctf"])
def test_the_exporter_sums_the_reports_own_figures(name):
    ivs = _intervals(name)
    assert len(ivs) >= 2
    got = _samples(ivs)
    # every stage: its count and its sum, exactly the histograms the
    # reports summarised (the JSON's count and mean)
    checked = 0
    for stage in ivs[0].record["stages"]:
        key = (("op_class", "all"), ("stage", stage))
        count = sum(iv.record["stages"][stage]["count"] for iv in ivs)
        assert got.get((F.STAGE_LATENCY + "_count", key), 0) == count, stage
        sum_s = sum(iv.hists[stage].sum_ns for iv in ivs) / 1e9
        assert got.get((F.STAGE_LATENCY + "_sum", key), 0) == \
            pytest.approx(sum_s, rel=1e-9, abs=1e-12), stage
        for iv in ivs:
            s = iv.record["stages"][stage]
            assert round(iv.hists[stage].sum_ns / max(1, s["count"]) /
                         1000, 3) == pytest.approx(s["mean_us"], abs=1e-3)
        checked += count > 0
    assert checked >= 1
    # the kernel stages per role, the threads' wake-ups, the shards' ops
    # and the losses: the reports' own rows
    roles = 0
    for stage, fam in F.KERNEL_STAGES.items():
        rows = [iv.record["kernel"][stage].get("by_role") or {}
                for iv in ivs]
        for role in {r for row in rows for r in row}:
            n = sum(row.get(role, {}).get("count", 0) for row in rows)
            assert got.get((fam + "_count", (("role", role),)), 0) == n
            roles += n > 0
    assert roles >= 2
    for role in {r for iv in ivs for r in iv.record["threads"]}:
        n = sum(iv.record["threads"].get(role, {}).get("wakeups", 0)
                for iv in ivs)
        assert got[(F.THREAD_WAKEUPS, (("role", role),))] == n
    ops = sum(row["ops"] for iv in ivs for row in iv.record["shards"])
    assert sum(v for (n, _), v in got.items() if n == F.QUEUE_OPS) == ops
    assert ops > 0
    for reason in ivs[0].record["lost"]:
        n = sum(iv.record["lost"][reason] for iv in ivs)
        assert got[(F.EVENTS_LOST, (("reason", reason),))] == n


def _cli(*args):
    p = subprocess.run([PYTHON, OSDSTAGE] + list(args), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _stage_rows(text):
    """{(stage, class or None): [count, mean, p50, p90, p99, max]} of the
    text report's STAGE table."""
    out, stage, table = {}, None, False
    for line in text.splitlines():
        if line.startswith("STAGE "):
            table = True
            continue
        if table and not line.strip() or line.startswith("("):
            table = False
        if not table:
            continue
        f = line.split()
        if line.startswith(" "):
            out[(stage, f[0])] = [float(x) for x in f[1:]]
        else:
            stage = f[0]
            out[(stage, None)] = [float(x) for x in f[1:]]
    return out


def _html_stage_rows(page):
    """The same of the HTML page's Stages and kernel stages tables."""
    out = {}
    for sid in ("stages", "kernel"):
        if '<section id="%s">' % sid in page:
            out.update(_html_table(page.split('<section id="%s">' % sid, 1)[
                1].split("</table>", 1)[0]))
    return out


def _html_table(sec):
    out, stage = {}, None
    for row in re.findall(r"<tr>(<td>.*?)</tr>", sec):
        cells = re.findall(r"<td>(.*?)</td>", row)
        vals = [float(x) for x in cells[1:]]
        if cells[0].startswith(" "):
            out[(stage, cells[0].strip())] = vals
        else:
            stage = cells[0]
            out[(stage, None)] = vals
    return out


@pytest.mark.parametrize("name", ["lab-v0.ctf", "shardq-v0.ctf"])
def test_a_windows_text_json_and_html_carry_the_same_figures(name, tmp_path):
    """-r with --html: the window's JSON report, its text report and its
    page's Stages table hold the same figures (one Interval), and the
    window's counts are the interval reports' together (which the
    exporter sums: the test above)."""
    cap = os.path.join(FIX, name)
    page = tmp_path / "w.html"
    rec = [json.loads(x) for x in _cli("-r", cap, "--html", str(page),
                                       "-j").splitlines()
           if x.startswith("{")]
    assert [r["type"] for r in rec] == ["window"], rec
    rec = rec[0]
    text = _stage_rows(_cli("-r", cap, "--html", str(tmp_path / "t.html")))
    html = _html_stage_rows(page.read_text())
    want = {}
    for stage, s in list(rec["stages"].items()) + list(
            (rec.get("kernel") or {}).items()):
        if not s["count"]:
            continue
        for cls, d in [(None, s)] + [(k, v) for k, v in
                                     s.get("by_class", {}).items()
                                     if v["count"]]:
            want[(stage, cls)] = [float(d["count"])] + [
                float("%.1f" % d[k]) for k in ("mean_us", "p50_us",
                                               "p90_us", "p99_us",
                                               "max_us")]
    assert want
    # (a stage that saw nothing may have a row of zeros)
    assert {k: v for k, v in text.items() if v[0]} == want
    assert {k: v for k, v in html.items() if v[0]} == want
    reports = [json.loads(x) for x in _cli("-r", cap, "-j").splitlines()
               if x.startswith("{")]
    for stage, s in rec["stages"].items():
        assert s["count"] == sum(r["stages"][stage]["count"]
                                 for r in reports if stage in r["stages"])
