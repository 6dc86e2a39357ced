"""Captures made by an earlier version still read to the same reports:
tests/fixtures/*-v0.ctf were written by the capture format 0 code, and
tests/fixtures/expected/ holds what `osdstage.py -r` printed for them
then (tests/fixtures/README.md)."""
import hashlib
import json
import os
import shutil

import pytest

from cephlat.capture.format import FORMAT
from cephlat.model.vocab import live as live_vocab

from conftest import OSDSTAGE, REPO, assert_one_line_error, run_tool

FIX = os.path.join(REPO, "tests", "fixtures")
EXP = os.path.join(FIX, "expected")

# (capture, expected file, arguments after -r CAPTURE)
CASES = [
    ("shardq", "replay.jsonl", ["-j"]),
    ("shardq", "replay.txt", []),
    ("shardq", "slowest.jsonl", ["--from", "0", "--slowest", "3", "-j"]),
    ("shardq", "slowest.txt", ["--from", "0", "--slowest", "3"]),
    ("shardq", "role.jsonl", ["--thread-role", "worker", "-j"]),
    ("lab", "replay.jsonl", ["-j"]),
    ("lab", "replay.txt", []),
    ("lab", "slowest.jsonl", ["--from", "0", "--slowest", "3", "-j"]),
    ("lab", "slowest.txt", ["--from", "0", "--slowest", "3"]),
    ("lab", "write.jsonl", ["--from", "0.1", "--to", "0.4", "--op-class",
                            "write", "-j"]),
    ("lab", "role.jsonl", ["--thread-role", "tp_osd_tp", "--stage",
                           "offcpu,queue_wait", "-j"]),
]


def _read(cap, args, **kw):
    env = dict(os.environ, TZ="UTC")
    p = run_tool([OSDSTAGE, "-r", os.path.join(FIX, cap + "-v0.ctf")] +
                 args, env=env, **kw)
    assert p.returncode == 0, p.stderr
    return p


@pytest.mark.parametrize("cap,name,args", CASES,
                         ids=["%s.%s" % (c, n) for c, n, _ in CASES])
def test_old_capture_reads_to_the_same_report(cap, name, args):
    out = _read(cap, args).stdout
    with open(os.path.join(EXP, "%s.%s" % (cap, name))) as f:
        want = f.read()
    if name.endswith(".jsonl"):
        assert [json.loads(l) for l in out.splitlines()] == \
            [json.loads(l) for l in want.splitlines()]
    else:
        assert out == want


@pytest.mark.parametrize("cap,args,files", [
    ("shardq", [], {"--perfetto": "shardq.perfetto.json",
                    "--html": "shardq.html"}),
    ("lab", ["--from", "0", "--timeline-ms", "20"],
     {"--perfetto": "lab.perfetto.json"}),
])
def test_old_capture_draws_the_same_pictures(tmp_path, cap, args, files):
    extra = []
    for opt, name in files.items():
        extra += [opt, str(tmp_path / name)]
    _read(cap, args + extra)
    for name in files.values():
        got = (tmp_path / name).read_text()
        if name.endswith(".json"):
            want = open(os.path.join(EXP, name)).read()
            assert json.loads(got) == json.loads(want)
        else:
            # the page itself would repeat render/html.py's CSS and script
            with open(os.path.join(EXP, name + ".sha256")) as f:
                want = f.read().strip()
            assert hashlib.sha256(got.encode()).hexdigest() == want, \
                "the page differs: %s" % (tmp_path / name)


def _copy(tmp_path, cap, edit):
    """A copy of fixture `cap` with its metadata text edited."""
    dst = tmp_path / cap
    shutil.copytree(os.path.join(FIX, cap + "-v0.ctf"), str(dst))
    meta = dst / "metadata"
    meta.write_text(edit(meta.read_text()))
    return str(dst)


def _env(text, line):
    return text.replace("env {\n", "env {\n\t%s\n" % line, 1)


def test_a_newer_format_is_refused_in_one_line(tmp_path):
    cap = _copy(tmp_path, "shardq", lambda t: _env(t, "format = 99;"))
    p = run_tool([OSDSTAGE, "-r", cap, "-j"])
    assert_one_line_error(p, "capture format 99, newer than this osdstage "
                             "reads (%d)" % FORMAT)


def test_enum_values_are_read_with_the_captures_own_labels(tmp_path):
    """A format-1 capture whose stage ids differ from this build's: the
    reader names each stage by the capture's labels, not by the running
    code's ids."""
    vocab = json.dumps(live_vocab().enums, sort_keys=True)

    def swap(text):
        text = text.replace('"dequeue_op" = 1, "do_op" = 2',
                            '"do_op" = 1, "dequeue_op" = 2')
        text = _env(text, 'vocab = "%s";' % vocab.replace('"', '\\"'))
        return _env(text, "format = 1;")
    want = json.loads(_read("lab", ["-j"]).stdout.splitlines()[0])
    p = run_tool([OSDSTAGE, "-r", _copy(tmp_path, "lab", swap), "-j"])
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.splitlines()[0])
    # this build's vocabulary names scheduler classes the capture's events
    # do not carry: their rows are empty
    qc = got["stages"]["queue_wait"].pop("by_queue_class")
    assert not any(c["count"] for c in qc.values())
    assert got["stages"]["do_op"]["count"] == \
        want["stages"]["dequeue_op"]["count"]
    assert got["stages"]["dequeue_op"] == want["stages"]["do_op"]
    assert got["stages"]["queue_wait"] == want["stages"]["queue_wait"]


def test_reading_needs_no_build(tmp_path):
    """A capture carries what reading it needs: -r works where the BPF
    objects (and their ABI) were never built, and names are checked
    against the capture's own stages."""
    env = dict(os.environ, TZ="UTC", OSDSTAGE_BPF_DIR=str(tmp_path))
    cap = os.path.join(FIX, "lab-v0.ctf")
    p = run_tool([OSDSTAGE, "-r", cap, "-j"], env=env)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(EXP, "lab.replay.jsonl")) as f:
        assert [json.loads(l) for l in p.stdout.splitlines()] == \
            [json.loads(l) for l in f.read().splitlines()]
    p = run_tool([OSDSTAGE, "-r", cap, "-S", "nope", "-j"], env=env)
    assert_one_line_error(p, "unknown stage nope", "the capture's stages: "
                          "queue_wait, dequeue_op", status=2)
    p = run_tool([OSDSTAGE, "-r", cap, "--op-class", "bogus"], env=env)
    assert_one_line_error(p, "--op-class bogus", "read, write, other",
                          status=2)
