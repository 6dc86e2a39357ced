"""An op's story (--op) and the end-to-end table of several captures and
a client's trace, built from small in-memory inputs (e2e_inputs.py) and
written as text and JSON: byte for byte what the code printed before the
story and the table became model objects (tests/fixtures/expected/e2e-*,
printed by cli/merged.py's op_story and end_to_end of that time; the
cluster tests cover the same paths on the lab's captures)."""
import io
import os
import time

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
    """The story of inputs.REQID as the driver (cli/merged.py) builds
    it: the captures' ops and the client's op read, the model built, the
    sink given it."""
    from cephlat.capture.lookup import request_ops
    from cephlat.model.story import build_story
    from cephlat.rbd.clientops import client_op
    from cephlat.render.e2e import write_story
    from cephlat.render.options import TextOptions
    caps, enq, done = inputs.story_caps()
    traces = [] if variant == "bare" else inputs.story_trace(
        enq, done, acked=variant == "acked")
    clocks = None if variant == "bare" else [
        {"file": "h.ctf", "clock": "ntp", "synced": True}]
    story = build_story(inputs.REQID, request_ops(caps, inputs.REQID),
                        client_op(traces, inputs.REQID), clocks)
    out = io.StringIO()
    write_story(out, story, TextOptions(json=json))
    return out.getvalue()


def _table(slowest, json, seed):
    """The end-to-end table of the inputs, as the driver builds it (the
    captures' ops handed in as reqops.read gives them)."""
    from cephlat.model.e2e_table import CaptureOps, build_end_to_end, join
    from cephlat.rbd.clientops import client_columns
    from cephlat.render.e2e import write_end_to_end
    from cephlat.render.options import TextOptions
    caps, traces = inputs.e2e_inputs(seed, writeback=not slowest)
    j = join(client_columns(traces),
             (CaptureOps(c.name, *c.ops_read, c.wall_ns) for c in caps))
    table = build_end_to_end(j, [t.path for t in traces],
                             [{"file": "a", "clock": "x"}], slowest)
    out = io.StringIO()
    write_end_to_end(out, table, TextOptions(json=json))
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
def test_the_end_to_end_table_reads_as_before(name, slowest, seed):
    text = _table(slowest, False, seed)
    assert text == _expected("e2e-table-%s.txt" % name)
    line = _table(slowest, True, seed)
    assert line == _expected("e2e-table-%s.jsonl" % name)
    check_reports(line)


def test_the_driver_prints_the_model_through_its_sink(monkeypatch):
    """cli/merged.py's op_story and end_to_end (the driver: the files
    read, the model built, the sink given it) print the same."""
    from types import SimpleNamespace
    from cephlat.cli import merged
    from cephlat.render.options import TextOptions
    caps, enq, done = inputs.story_caps()
    args = SimpleNamespace(op_reqid=inputs.REQID, html=False,
                           perfetto=False, otlp=None, read="h.ctf")
    out = io.StringIO()
    merged.op_story(args, TextOptions(), out, caps, None,
                    inputs.story_trace(enq, done),
                    [{"file": "h.ctf", "clock": "ntp", "synced": True}])
    assert out.getvalue() == _expected("e2e-story-call.txt")
    monkeypatch.setattr(merged.reqops, "read",
                        lambda c, skip=(): c.ops_read)
    caps, traces = inputs.e2e_inputs(7)
    out = io.StringIO()
    merged.end_to_end(SimpleNamespace(read="a, b, c", slowest=4),
                      TextOptions(json=True), out, caps, traces,
                      [{"file": "a", "clock": "x"}])
    assert out.getvalue() == _expected("e2e-table-slowest.jsonl")


def test_the_driver_says_what_it_cannot_join(monkeypatch):
    """No client op with its primary in the captures: one line, no
    traceback (a UserError)."""
    from types import SimpleNamespace
    from cephlat.cli import merged
    from cephlat.errors import UserError
    from cephlat.render.options import TextOptions
    monkeypatch.setattr(merged.reqops, "read", lambda c, skip=(): (None,
                                                                    None))
    caps, traces = inputs.e2e_inputs(7)
    with pytest.raises(UserError, match="none of the clients' 39 OSD ops"):
        merged.end_to_end(SimpleNamespace(read="a, b, c", slowest=0),
                          TextOptions(), io.StringIO(), caps, traces, [])
