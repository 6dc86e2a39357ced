"""The Grafana dashboard (deploy/grafana/osdstage.json) without Grafana:

- it is what deploy/grafana/mkdashboard.py writes;
- Grafana's structure: unique panel ids, gridPos in the 24-column grid
  without overlaps, targets with refId and expr, the datasource, $osd and
  $stage variables, heatmaps in heatmap format;
- every metric a query selects is a family of exporter/families.py (a
  histogram's through _bucket/_sum/_count), every label it matches on or
  groups by is a label of the families it reads;
- the panels the issue asks for are there;
- the latency quantiles of the histograms that carry exemplars (--otlp)
  ask Grafana for them, and no other query does;
- every query, with Grafana's variables substituted
  (exporter_dashboard.dashboard_queries), is valid PromQL for Prometheus'
  own parser (promtool check rules, each query a recording rule).

The lab test tests/cluster/test_exporter.py runs the same substituted
queries against a real Prometheus scraping the exporter.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, need
from cephlat.exporter import families as F
from cephlat.exporter.families import BY_NAME, FAMILIES
import exporter_dashboard as xd

DASHBOARD = os.path.join(REPO, "deploy", "grafana", "osdstage.json")
GENERATOR = os.path.join(REPO, "deploy", "grafana", "mkdashboard.py")
PROMTOOL = "/usr/bin/promtool"
PANEL_TYPES = {"timeseries", "heatmap", "stat", "table", "bargauge", "row"}
# Grafana's own variables (the dashboard's are its templating list)
BUILTIN_VARS = {"__rate_interval", "__interval", "__interval_ms", "__range",
                "__range_s", "__range_ms"}


@pytest.fixture(scope="module")
def dash():
    return xd.load(DASHBOARD)


@pytest.fixture(scope="module")
def queries(dash):
    return xd.raw_queries(dash)


def test_is_the_generators_output():
    out = subprocess.run([sys.executable, GENERATOR], capture_output=True,
                         text=True, check=True).stdout
    with open(DASHBOARD) as f:
        assert f.read() == out, ("deploy/grafana/osdstage.json is not "
                                 "mkdashboard.py's output: regenerate it")


def test_top_level(dash):
    assert dash["title"] and dash["uid"]
    assert 36 <= dash["schemaVersion"] <= 41
    assert dash["id"] is None          # importable into any Grafana
    assert isinstance(dash["panels"], list) and dash["panels"]
    assert dash["time"]["from"].startswith("now-")


def _all_panels(dash):
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def test_panels_ids_grid_types(dash):
    ps = _all_panels(dash)
    ids = [p["id"] for p in ps]
    assert all(isinstance(i, int) for i in ids), ids
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    cells = set()
    for p in ps:
        assert p["type"] in PANEL_TYPES, p["type"]
        assert p.get("title"), p
        g = p["gridPos"]
        for k in ("h", "w", "x", "y"):
            assert isinstance(g[k], int) and g[k] >= 0, (p["title"], g)
        assert g["w"] >= 1 and g["h"] >= 1 and g["x"] + g["w"] <= 24, g
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, "overlap at %s: %s" % (
                    (x, y), p["title"])
                cells.add((x, y))
        if p["type"] == "row":
            assert g["w"] == 24 and g["h"] == 1
            continue
        assert p["datasource"] == {"type": "prometheus",
                                   "uid": "${datasource}"}, p["title"]
        ts = p["targets"]
        assert ts, p["title"]
        refs = [t["refId"] for t in ts]
        assert len(refs) == len(set(refs)), p["title"]
        for t in ts:
            assert t["expr"].strip(), p["title"]
            assert t["datasource"] == p["datasource"]
        if p["type"] == "heatmap":
            assert all(t.get("format") == "heatmap" for t in ts), p
            assert p["options"]["calculate"] is False
            assert all("_bucket{" in t["expr"] and "sum by (le)" in
                       t["expr"] for t in ts)


def test_variables(dash):
    tv = {v["name"]: v for v in dash["templating"]["list"]}
    assert tv["datasource"]["type"] == "datasource"
    assert tv["datasource"]["query"] == "prometheus"
    lv = {name: (m, l) for name, m, l in xd.label_values_queries(dash)}
    assert lv["osd"] == (F.OSD_INFO, "ceph_daemon")
    assert lv["stage"] == (F.STAGE_LATENCY + "_bucket", "stage")
    for name in ("osd", "stage"):
        assert tv[name]["datasource"]["uid"] == "${datasource}"
        assert tv[name]["multi"] and tv[name]["includeAll"]
        assert tv[name]["allValue"] == ".+"
    for name, metric, label in xd.label_values_queries(dash):
        f, _ = xd.family_of(metric, BY_NAME)
        assert f is not None and label in f.labels, (name, metric, label)
    # every variable a query or a panel uses is defined, every repeat too
    defined = set(tv) | BUILTIN_VARS
    for title, _, expr in xd.raw_queries(dash):
        for m in xd._VAR.finditer(expr):
            name = m.group(1) or m.group(2) or m.group(3)
            assert name in defined, (title, name)
    for p in _all_panels(dash):
        if "repeat" in p:
            assert p["repeat"] in tv, p["title"]
            for m in re.finditer(r"\$(\w+)", p["title"]):
                assert m.group(1) in tv, p["title"]


def test_metrics_and_labels_are_the_contract(queries):
    """Every selector names a family (histograms through their series
    suffixes) and matches only that family's labels; every by/on/...
    names labels of the families the query reads."""
    used = set()
    for title, ref, expr in queries:
        sels = xd.selectors(expr)
        assert sels, (title, expr)
        labels = set()
        for metric, matchers in sels:
            f, suffix = xd.family_of(metric, BY_NAME)
            assert f is not None, "%s: %s is not in families.py" % (
                title, metric)
            used.add(f.name)
            own = set(f.labels) | ({"le"} if suffix == "_bucket" else set())
            labels |= own
            for label, op, value in matchers:
                assert label in own, "%s: %s has no label %s" % (
                    title, metric, label)
                if "$osd" in value or "$stage" in value:
                    # multi-value variables: a regex ("a|b", ".+")
                    assert op == "=~", (title, label, op)
        for clause, names in xd.grouping_labels(expr):
            for n in names:
                assert n in labels, "%s: %s (%s) is not a label of %s" % (
                    title, n, clause, [m for m, _ in sels])
        if "histogram_quantile" in expr:
            assert "_bucket{" in expr and re.search(
                r"by \([^)]*\ble\b", expr), (title, expr)
    # every family with ceph_daemon is filtered by $osd wherever it is read
    for title, ref, expr in queries:
        for metric, matchers in xd.selectors(expr):
            f, _ = xd.family_of(metric, BY_NAME)
            if "ceph_daemon" in f.labels:
                assert ("ceph_daemon", "=~", "$osd") in matchers, (
                    title, metric)
    missing = {f.name for f in FAMILIES} - used
    assert not missing, "families on no panel: %s" % sorted(missing)


def _uses(queries, *fragments):
    return [q for q in queries if all(f in q[2] for f in fragments)]


def test_the_panels_the_issue_asks_for(dash, queries):
    types = {p["title"]: p["type"] for p in xd.panels(dash)}
    heat = [t for t, ty in types.items() if ty == "heatmap"]
    assert heat, types
    assert _uses(queries, "histogram_quantile(0.99",
                 F.STAGE_LATENCY + "_bucket",
                 "by (ceph_daemon, stage, le)")
    attribution = _uses(queries, F.QUEUE_WAIT, "by (cause)")
    assert attribution
    stacked = [p for p in xd.panels(dash) if p["title"] == attribution[0][0]]
    assert stacked[0]["fieldConfig"]["defaults"]["custom"]["stacking"][
        "mode"] == "normal"
    assert _uses(queries, F.QUEUE_WAKEUPS, "by (waker)")
    assert _uses(queries, F.THREAD_OFFCPU, "by (role)")
    assert _uses(queries, F.THREAD_RUNQUEUE, "by (role)")
    assert _uses(queries, F.THREAD_WAKEUP_DELAY + "_bucket", "by (role, le)")
    assert _uses(queries, F.REPLICA_WAIT + "_bucket", "peer")
    assert _uses(queries, "topk(", "stage=\"op_total\"")
    assert _uses(queries, "topk(", F.QUEUE_WAIT)
    cost = [p for p in xd.panels(dash)
            if any(F.OVERHEAD in t["expr"] for t in p["targets"])]
    assert cost and any(F.OVERHEAD_BOUND in t["expr"]
                        for t in cost[0]["targets"])
    assert _uses(queries, "rate(" + F.PROBE_HITS)
    assert _uses(queries, "rate(" + F.EVENTS_LOST)
    assert _uses(queries, F.MAP_FULLNESS)
    # repeated per OSD (rows) and per stage (heatmaps)
    rows = [p for p in dash["panels"] if p["type"] == "row"]
    assert any(r.get("repeat") == "osd" for r in rows)
    assert any(p.get("repeat") == "stage" for p in xd.panels(dash)
               if p["type"] == "heatmap")


def test_exemplars_on_the_latency_quantiles(dash):
    """Exactly the range quantiles of families.py EXEMPLARS' histograms
    ask for exemplars (Grafana draws them on time series panels), the
    stage latency p99's among them."""
    on, want = [], []
    for p in xd.panels(dash):
        for t in p["targets"]:
            if t.get("exemplar"):
                on.append((p["title"], t["refId"]))
            quantile = "histogram_quantile(" in t["expr"]
            if p["type"] == "timeseries" and quantile and any(
                    f + "_bucket{" in t["expr"] for f in F.EXEMPLARS):
                want.append((p["title"], t["refId"]))
                assert t["exemplar"] is True and t["range"] is True
    assert on == want
    assert any(F.STAGE_LATENCY + "_bucket{" in t["expr"] and
               t.get("exemplar") for p in xd.panels(dash)
               for t in p["targets"])
    assert {f for f in F.EXEMPLARS} <= {
        f.name for f in FAMILIES if f.type == "histogram"}


def test_dashboard_queries_substitutes_every_variable(queries):
    got = xd.dashboard_queries(DASHBOARD)
    assert len(got) == len(queries) >= 8
    for q in got:
        assert "$" not in q and "[[" not in q, q
    assert any('ceph_daemon=~".+"' in q for q in got)
    assert any('stage=~"op_total"' in q for q in got)
    assert any("[1m]" in q for q in got)
    other = xd.dashboard_queries(DASHBOARD, {"osd": "osd.1|osd.2",
                                             "stage": "queue_wait"})
    assert any('ceph_daemon=~"osd.1|osd.2"' in q for q in other)
    with pytest.raises(KeyError):
        xd.substitute('x{a="$nosuchvar"}')


def test_reader_on_known_expressions():
    """The PromQL reader itself, on expressions whose parts are known."""
    e = ('sum by (ceph_daemon, cause) (rate(m_total{ceph_daemon=~"$osd", '
         'cause!="a,b"}[5m])) / on (ceph_daemon) group_left sum by '
         '(ceph_daemon) (rate(n_total{x="y"}[5m]))')
    assert xd.selectors(e) == [
        ("m_total", [("ceph_daemon", "=~", "$osd"), ("cause", "!=", "a,b")]),
        ("n_total", [("x", "=", "y")])]
    assert xd.grouping_labels(e) == [
        ("by", ["ceph_daemon", "cause"]), ("on", ["ceph_daemon"]),
        ("by", ["ceph_daemon"])]
    assert xd.selectors("max(%s)" % F.TARGETS) == [(F.TARGETS, [])]
    assert xd.selectors('histogram_quantile(0.99, sum by (le) '
                        '(rate(h_bucket[1m])))') == [("h_bucket", [])]
    f, s = xd.family_of(F.STAGE_LATENCY + "_bucket", BY_NAME)
    assert f.name == F.STAGE_LATENCY and s == "_bucket"
    assert xd.family_of(F.QUEUE_OPS + "_count", BY_NAME) == (None, None)


def test_promtool_parses_every_query(tmp_path):
    """Prometheus' own PromQL parser, without a server: each substituted
    query as a recording rule, `promtool check rules`."""
    need(os.access(PROMTOOL, os.X_OK) or shutil.which("promtool"),
         "promtool missing (apt-get install prometheus)")
    tool = PROMTOOL if os.access(PROMTOOL, os.X_OK) else \
        shutil.which("promtool")
    qs = xd.dashboard_queries(DASHBOARD)
    rules = {"groups": [{"name": "osdstage_dashboard", "rules": [
        {"record": "osdstage_dashboard:q%d" % i, "expr": q}
        for i, q in enumerate(qs)]}]}
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(json.dumps(rules, indent=1))   # JSON is YAML
    p = subprocess.run([tool, "check", "rules", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: %d rules found" % len(qs) in p.stdout + p.stderr, \
        p.stdout + p.stderr
    # and the checker does reject a bad one (it really parses)
    bad = {"groups": [{"name": "g", "rules": [
        {"record": "x:y", "expr": "sum by (le (rate(x[1m]))"}]}]}
    path.write_text(json.dumps(bad))
    p = subprocess.run([tool, "check", "rules", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
