"""exporter/families.py is the one definition of the exporter's metrics:
the man page lists exactly those families (name, type, labels, help), in
their order; every osdstage_ metric the man page, the READMEs, docs/, the
example file or the alert rules mention is one of them, and no old ceph_ name of
ours is left there (but in the man page's HISTORY, which lists every old
name with its new one); the names follow the conventions (the tool's own
osdstage_ prefix, Ceph's ceph_daemon label, base units, _total only on
counters, _info on the info-like gauges, no "latency" for what is not
one)."""
import glob
import os
import re

from cephlat.exporter import families as F
from cephlat.exporter.families import BUCKETS_S, FAMILIES

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MAN = os.path.join(REPO, "man", "man8", "osdstage_exporter.8")
SUFFIXES = ("", "_bucket", "_sum", "_count")
DOCS = (MAN, os.path.join(REPO, "README.md"),
        os.path.join(REPO, "deploy", "README.md"),
        os.path.join(REPO, "tools", "osdstage_exporter_example.txt"),
        os.path.join(REPO, "deploy", "prometheus", "osdstage-alerts.yml")) + \
    tuple(sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))))
# osdstage_ words that are no metric: the tool's files and programs
NOT_METRICS = re.compile(r"osdstage_(exporter|example)")


def _text(path):
    with open(path) as f:
        return f.read()


def _man_sections():
    """{section name: its text} of the man page."""
    parts = re.split(r"^\.SH (.*)$", _text(MAN), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _esc(text):
    return text.replace("-", "\\-")


def test_man_page_lists_every_family():
    """.TP / .BR name " (type; labels)" / its help text, in families.py's
    order, and no other family."""
    metrics = _man_sections()["METRICS"]
    listed = re.findall(r'^\.BR (\w+) " \(', metrics, re.M)
    assert listed == [f.name for f in FAMILIES], listed
    for f in FAMILIES:
        entry = '.TP\n.BR %s " (%s; %s)"\n%s.\n' % (
            f.name, f.type, ", ".join(f.labels) if f.labels else
            "no labels", _esc(f.help))
        assert entry in metrics, entry


def test_man_page_history_has_every_old_name():
    history = _man_sections()["HISTORY"]
    for old, new in F.RENAMED.items():
        if new is None:
            for stage, fam in F.KERNEL_STAGES.items():
                line = '%s{stage="%s"} \\(-> %s' % (old, stage, fam)
                assert line in history, line
        else:
            assert "\n%s \\(-> %s\n" % (old, new) in history, old
    news = {n for n in F.RENAMED.values() if n} | set(
        F.KERNEL_STAGES.values())
    assert not news & set(F.NO_OLD_NAME)
    assert news | set(F.NO_OLD_NAME) == set(F.BY_NAME)


def _words(path):
    text = _text(path).replace("\\-", "-").replace("\\", "")
    if path == MAN:
        text = text.split("\n.SH HISTORY", 1)[0]
    return set(re.findall(r"\b(?:ceph_osd|osdstage_)[a-z_]*[a-z]", text))


def test_every_metric_named_in_the_docs_exists():
    known = {f.name + s for f in FAMILIES for s in SUFFIXES}
    # a counter as prometheus_client's parser and OpenMetrics name it
    known |= {f.name[:-len("_total")] for f in FAMILIES
              if f.type == "counter"}
    for path in DOCS:
        for name in _words(path):
            if name.startswith("ceph_osd") or NOT_METRICS.match(name):
                continue
            assert name in known, (path, name)


def test_no_old_name_is_left_in_the_docs():
    old = {o + s for o in F.RENAMED for s in SUFFIXES}
    for path in DOCS:
        left = _words(path) & old
        assert not left, (path, sorted(left))


def test_names_follow_the_conventions():
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    # a family's series (+ _bucket, ...) are no other family's
    series = [f.name + s for f in FAMILIES
              for s in (SUFFIXES if f.type == "histogram" else ("",))]
    assert len(series) == len(set(series))
    # nor its name without _total (prometheus_client's and OpenMetrics'
    # family name of a counter)
    bases = [f.name[:-len("_total")] if f.type == "counter" else f.name
             for f in FAMILIES]
    assert len(bases) == len(set(bases)), sorted(bases)
    host_wide = {F.SELF_CPU, F.OVERHEAD_BOUND, F.MAP_FULLNESS, F.TARGETS}
    for f in FAMILIES:
        assert f.name.startswith(F.PREFIX), f.name
        assert not f.name.startswith("ceph_"), f.name
        assert re.fullmatch(r"[a-z][a-z0-9_]*[a-z]", f.name), f.name
        assert f.name.endswith("_total") == (f.type == "counter"), f.name
        assert "le" not in f.labels and "quantile" not in f.labels
        if f.name not in host_wide:
            assert f.labels[0] == "ceph_daemon", f.name
        else:
            assert "ceph_daemon" not in f.labels, f.name
        if "seconds" in f.name:
            assert f.type in ("histogram", "counter"), f.name
            assert f.name.endswith(("_seconds", "_seconds_total")), f.name
        if f.name.endswith("_ratio"):
            assert f.type == "gauge", f.name
        # info-like: a gauge whose value is 1, its labels the information
        if f.name.endswith("_info"):
            assert f.type == "gauge" and "(1)" in f.help, f.name
    assert {f.name for f in FAMILIES if f.name.endswith("_info")} == {
        F.OSD_INFO, F.STAGE_TIER_INFO, F.CLIENT_INFO}
    # the kernel's sleeps, futex waits and run-queue time are not latency
    for name in F.KERNEL_STAGES.values():
        assert "latency" not in name, name
    for f in FAMILIES:
        if "_thread_" in f.name:
            assert "latency" not in f.name, f.name
    # power-of-two microseconds, from 1 us
    assert BUCKETS_S[0] == 1e-6
    assert all(b == 2 * a for a, b in zip(BUCKETS_S, BUCKETS_S[1:]))


def test_constants_are_the_families():
    """Every upper-case name constant of families.py is a family, and
    every family has one (so code and tests take names from there)."""
    consts = {v for k, v in vars(F).items()
              if k.isupper() and isinstance(v, str) and
              v.startswith(F.PREFIX) and v != F.PREFIX}
    assert consts == set(F.BY_NAME), consts ^ set(F.BY_NAME)
