"""The Prometheus alert rules (deploy/prometheus/osdstage-alerts.yml):

- Prometheus' own checker accepts them (`promtool check rules`), and its
  rule unit tests pass (`promtool test rules` on osdstage-alerts.test.yml:
  series that fire each alert, beside series that must not);
- every alert is fired by that test file, and has a severity, a summary
  and a description;
- every metric a rule selects is a family of exporter/families.py (a
  histogram's through _bucket/_sum/_count), matched and grouped only by
  that family's labels; a ceph_ metric only in the group joined with
  Ceph's own metrics, and never one of the exporter's old ceph_ names;
- the label values the rules match on are ones the exporter exports
  (stages, queue-wait causes, loss reasons).

promtool comes with Debian's prometheus package: without it the promtool
tests skip (under CI=true they fail).
"""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import REPO, need
from cephlat.exporter import families as F
from cephlat.exporter.families import BY_NAME
from cephlat.model import report
from cephlat.model import vocab as vocabmod
import exporter_dashboard as xd

RULES = os.path.join(REPO, "deploy", "prometheus", "osdstage-alerts.yml")
RULE_TESTS = os.path.join(REPO, "deploy", "prometheus",
                          "osdstage-alerts.test.yml")
PROMTOOL = "/usr/bin/promtool"
# Ceph's own metrics (the mgr prometheus module), which the group joined
# with them may read
CEPH_GROUP = "osdstage-ceph"
CEPH_METRICS = {"ceph_osd_up": ("ceph_daemon",)}


def _promtool():
    ok = os.access(PROMTOOL, os.X_OK) or shutil.which("promtool")
    need(ok, "promtool missing (apt-get install prometheus)")
    return PROMTOOL if os.access(PROMTOOL, os.X_OK) else \
        shutil.which("promtool")


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def groups():
    return _load(RULES)["groups"]


def _rules(groups):
    return [(g["name"], r) for g in groups for r in g["rules"]]


def test_promtool_checks_the_rules(groups):
    tool = _promtool()
    p = subprocess.run([tool, "check", "rules", RULES],
                       capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "SUCCESS: %d rules found" % len(_rules(groups)) in out, out


def test_promtool_tests_fire_every_alert(groups):
    tool = _promtool()
    p = subprocess.run([tool, "test", "rules", RULE_TESTS],
                       capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(RULE_TESTS))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout + p.stderr


def test_the_rule_tests_fire_each_alert(groups):
    """Each alert has a test case in which it fires (what promtool runs
    above), and no test names an alert that is not a rule."""
    tests = _load(RULE_TESTS)
    assert tests["rule_files"] == [os.path.basename(RULES)]
    fired = set()
    named = set()
    for t in tests["tests"]:
        for a in t.get("alert_rule_test", []):
            named.add(a["alertname"])
            if a.get("exp_alerts"):
                fired.add(a["alertname"])
    alerts = {r["alert"] for _, r in _rules(groups)}
    assert fired == alerts, alerts ^ fired
    assert named <= alerts, named - alerts


def test_every_alert_says_what_and_why(groups):
    names = []
    for _, r in _rules(groups):
        assert "alert" in r, r            # alert rules only, no recording
        names.append(r["alert"])
        assert re.fullmatch(r"Osdstage[A-Za-z0-9]+", r["alert"]), r["alert"]
        assert r["labels"]["severity"] in ("info", "warning", "critical")
        ann = r["annotations"]
        assert ann.get("summary", "").strip(), r["alert"]
        assert len(ann.get("description", "")) > 40, r["alert"]
        assert re.fullmatch(r"\d+[smh]", r["for"]), r["alert"]
    assert len(names) == len(set(names)), names


def test_rules_use_the_exporters_metrics_and_labels(groups):
    """Every selector names a family of families.py (or, in the group
    joined with Ceph, one of Ceph's own), matching and grouping only by
    its labels (and `instance`, which Prometheus adds to every target's
    series); the old ceph_ names of the exporter are gone."""
    used = set()
    for group, r in _rules(groups):
        expr = r["expr"]
        sels = xd.selectors(expr)
        assert sels, (r["alert"], expr)
        labels = {"instance"}
        for metric, matchers in sels:
            f, suffix = xd.family_of(metric, BY_NAME)
            if f is None:
                assert metric not in F.RENAMED, (r["alert"], metric)
                assert group == CEPH_GROUP and metric in CEPH_METRICS, (
                    "%s: %s is not in families.py" % (r["alert"], metric))
                own = set(CEPH_METRICS[metric])
            else:
                used.add(f.name)
                own = set(f.labels) | ({"le"} if suffix == "_bucket"
                                       else set())
            labels |= own | {"instance"}
            for label, _op, _value in matchers:
                assert label in own, "%s: %s has no label %s" % (
                    r["alert"], metric, label)
        for clause, names in xd.grouping_labels(expr):
            for n in names:
                assert n in labels, "%s: %s (%s) is not a label of %s" % (
                    r["alert"], n, clause, [m for m, _ in sels])
        if "histogram_quantile" in expr:
            assert "_bucket{" in expr and re.search(
                r"by \([^)]*\ble\b", expr), (r["alert"], expr)
    # the rules cover the op latency, the attribution, the cost, the
    # losses and the traced OSDs
    for name in (F.STAGE_LATENCY, F.QUEUE_WAIT, F.QUEUE_TIMEOUTS_WITH_WORK,
                 F.OVERHEAD, F.SELF_CPU, F.OVERHEAD_BOUND, F.EVENTS_LOST,
                 F.OSD_INFO, F.TARGETS):
        assert name in used, name


def test_label_values_the_rules_match_are_exported(groups):
    """stage, cause and reason values in the matchers are ones the
    exporter has: the BPF side's stages and queue-wait parts, and the
    loss counters' names (report.LOSS_WORDS)."""
    vocab = vocabmod.live()
    known = {"stage": set(vocab.probed), "cause": set(vocab.attr_parts),
             "reason": set(report.LOSS_WORDS)}
    seen = set()
    for _, r in _rules(groups):
        for _metric, matchers in xd.selectors(r["expr"]):
            for label, op, value in matchers:
                if label not in known:
                    continue
                seen.add(label)
                values = value.split("|") if op in ("=~", "!~") else [value]
                for v in values:
                    assert v in known[label], (r["alert"], label, v)
    assert seen == set(known), seen
