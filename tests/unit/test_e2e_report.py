"""An op's story (--op) and the end-to-end table of several captures and
a client's trace, built from small in-memory inputs (e2e_inputs.py) and
written as text and JSON: byte for byte what the code printed before the
story and the table became model objects (tests/fixtures/expected/e2e-*,
printed by cli/merged.py's op_story and end_to_end of that time; the
cluster tests cover the same paths on the lab's captures)."""
import io
import os
import time
from types import SimpleNamespace

import pytest

from conftest import REPO, check_reports

import e2e_inputs as inputs

EXPECTED = os.path.join(REPO, "tests", "fixtures", "expected")


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """The op rows' enqueue times are local time: UTC, as printed."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _expected(name):
    with open(os.path.join(EXPECTED, name)) as f:
        return f.read()


def _story(variant, json):
    from cephlat.cli import merged
    caps, enq, done = inputs.story_caps()
    traces = [] if variant == "bare" else inputs.story_trace(
        enq, done, acked=variant == "acked")
    clocks = None if variant == "bare" else [
        {"file": "h.ctf", "clock": "ntp", "synced": True}]
    args = SimpleNamespace(op_reqid=inputs.REQID, html=False,
                           perfetto=False, otlp=None, json=json,
                           read="h.ctf")
    out = io.StringIO()
    merged.op_story(args, out, caps, None, traces, clocks)
    return out.getvalue()


def _table(slowest, json, seed, monkeypatch):
    from cephlat.cli import merged
    monkeypatch.setattr(merged.reqops, "read",
                        lambda c, skip=(): c.ops_read)
    caps, traces = inputs.e2e_inputs(seed, writeback=not slowest)
    args = SimpleNamespace(read="a, b, c", slowest=slowest, json=json)
    out = io.StringIO()
    merged.end_to_end(args, out, caps, traces,
                      [{"file": "a", "clock": "x"}])
    return out.getvalue()


@pytest.mark.parametrize("variant", ["call", "acked", "bare"])
def test_an_ops_story_reads_as_before(variant):
    text = _story(variant, False)
    assert text == _expected("e2e-story-%s.txt" % variant)
    line = _story(variant, True)
    assert line == _expected("e2e-story-%s.jsonl" % variant)
    check_reports(line)


@pytest.mark.parametrize("name,slowest,seed", [("slowest", 4, 7),
                                               ("plain", 0, 11)])
def test_the_end_to_end_table_reads_as_before(name, slowest, seed,
                                              monkeypatch):
    text = _table(slowest, False, seed, monkeypatch)
    assert text == _expected("e2e-table-%s.txt" % name)
    line = _table(slowest, True, seed, monkeypatch)
    assert line == _expected("e2e-table-%s.jsonl" % name)
    check_reports(line)
