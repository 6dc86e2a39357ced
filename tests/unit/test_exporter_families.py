"""exporter/families.py is the one definition of the exporter's metrics:
the man page lists exactly those families (name, type, labels), every
ceph_ name the man page, the README or the example file mentions is one
of them, and the
names follow Ceph's conventions (ceph_ prefix, ceph_daemon label, base
units, _total only on counters)."""
import os
import re

from cephlat.exporter.families import BUCKETS_S, FAMILIES

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MAN = os.path.join(REPO, "man", "man8", "osdstage_exporter.8")
SUFFIXES = ("", "_bucket", "_sum", "_count")


def _text(path):
    with open(path) as f:
        return f.read()


def test_man_page_lists_every_family():
    man = _text(MAN)
    for f in FAMILIES:
        entry = '.BR %s " (%s; %s)"' % (
            f.name, f.type, ", ".join(f.labels) if f.labels else
            "no labels")
        assert entry in man, entry


def test_every_metric_named_in_the_docs_exists():
    known = {f.name + s for f in FAMILIES for s in SUFFIXES}
    for path in (MAN, os.path.join(REPO, "README.md"),
                 os.path.join(REPO, "tools", "osdstage_exporter_example.txt")):
        text = _text(path).replace("\\-", "-").replace("\\", "")
        for name in set(re.findall(r"\bceph_osd[a-z_]*[a-z]", text)):
            if name in ("ceph_osd", "ceph_osd_op_r_latency_sum"):
                continue
            assert name in known or name + "_" in " ".join(known), \
                (path, name)


def test_names_follow_cephs_conventions():
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    for f in FAMILIES:
        assert f.name.startswith(("ceph_osd_", "ceph_osdstage_")), f.name
        assert f.name.endswith("_total") == (f.type == "counter"), f.name
        assert "le" not in f.labels and "quantile" not in f.labels
        if f.name.startswith("ceph_osd_") or f.labels[:1] == ("ceph_daemon",):
            assert f.labels[0] == "ceph_daemon", f.name
        if "seconds" in f.name:
            assert f.type in ("histogram", "counter"), f.name
    # power-of-two microseconds, from 1 us
    assert BUCKETS_S[0] == 1e-6
    assert all(b == 2 * a for a, b in zip(BUCKETS_S, BUCKETS_S[1:]))
