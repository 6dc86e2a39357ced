"""One model, the same figures in every sink, for a story across hosts
(osdstage -r CAPTURES... TRACE --op REQID): the text, the JSON and the
OTLP trace of a real 3-host story (tests/fixtures: a client write, its
primary, both replicas and the replies' own ops) carry the same client
segments, replica ways and waits, and per-op stages, each from the one
Story object."""
import io
import json
import os
import re

from conftest import REPO  # noqa: F401  (the path set-up)
from cephlat.model.schema import version
from cephlat.model.story import Story
from cephlat.render.e2e import print_story, write_story
from cephlat.render.options import TextOptions
from cephlat.render.otlp import story_request
from test_otlp_story import _spans as otlp_spans

STORY = os.path.join(REPO, "tests", "fixtures", "story-3hosts.json")


def _story():
    rec = json.load(open(STORY))
    return Story(rec["reqid"], rec["osds"], 0, pg=rec.get("pg"),
                 client=rec.get("client"), replicas=rec.get("replicas", []),
                 clocks=rec.get("clocks"))


def _spans(req):
    """[(ceph_daemon or None, span name, duration us)] of an OTLP request."""
    return [(res.get("ceph_daemon"), s["name"], (
        int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1000)
        for res, s in otlp_spans(req)]


def _text(story):
    out = io.StringIO()
    print_story(out, story)
    return out.getvalue()


def test_the_json_is_the_models_record():
    story = _story()
    out = io.StringIO()
    write_story(out, story, TextOptions(json=True))
    got = json.loads(out.getvalue())
    assert got.pop("schema") == version()
    assert got == story.record


def test_client_segments_are_the_same_in_text_json_and_otlp():
    story = _story()
    text = _text(story)
    spans = {(d, n): us for d, n, us in _spans(story_request(story.record))}
    segs = story.client["segments"]
    assert len(segs) >= 8
    for s in segs:
        m = re.search(r"^  %s +([\d.]+)  " % re.escape(s["segment"]), text,
                      re.M)
        assert m and float(m.group(1)) == s["us"], (s, m)
        assert abs(spans[(None, s["segment"])] - s["us"]) <= 0.001, s
    total = re.search(r"END TO END ([\d.]+) us", text)
    assert float(total.group(1)) == story.client["total_us"]
    assert abs(spans[(None, "rbd write")] - story.client["total_us"]) \
        <= 0.001


def test_replicas_are_the_same_in_text_json_and_otlp():
    story = _story()
    text = _text(story)
    spans = {(d, n): us for d, n, us in _spans(story_request(story.record))}
    primary = story.client["primary"]
    assert len(story.replicas) == 2
    for r in story.replicas:
        m = re.search(r"^  %s +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)" %
                      re.escape(r["replica"]), text, re.M)
        assert m, r
        assert [float(x) for x in m.groups()] == [
            r[k] for k in ("out_us", "replica_us", "back_us", "wait_us")]
        wait = spans[(primary, "replica_wait " + r["replica"])]
        assert abs(wait - r["wait_us"]) <= 0.001, (r, wait)
        # and the primary's own row says the same wait
        assert "%s replied (waited %s us" % (r["replica"], r["wait_us"]) \
            in text


def test_each_ops_stages_are_the_same_in_text_json_and_otlp():
    story = _story()
    text = _text(story)
    spans = _spans(story_request(story.record))
    checked = 0
    for name, rows in story.osds.items():
        for row in rows:
            for st in row["stages"]:
                line = "%s..%s %s" % (_at(st["start_us"]), _at(st["end_us"]),
                                      st["stage"])
                assert line in text, (name, line)
                us = st["end_us"] - st["start_us"]
                # the OSD's span of that stage, that long (to the 0.1 us
                # both are rounded to)
                assert any(d == name and n == st["stage"] and
                           abs(t - us) <= 0.051 for d, n, t in spans), (
                    name, st, [s for s in spans if s[0] == name])
                checked += 1
            qw = row.get("queue_wait_us")
            if qw is not None:
                assert any(d == name and n == "queue_wait" and
                           abs(t - qw) <= 0.051 for d, n, t in spans), (
                    name, qw)
    assert checked >= 20, checked


def _at(us):
    """A time as the text writes it: +x from the enqueue, -x before."""
    return ("+%.1f" if us >= 0 else "%.1f") % us
