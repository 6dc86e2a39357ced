"""An op's story as an OTLP trace (render/otlp.py) and the choice of the
ops sent (model/sample.py): a real 3-host story (tests/fixtures) made
into spans that nest as the op ran, on every host's resource, with ids
any host derives alike."""
import json
import os

import numpy as np

from conftest import REPO, need  # noqa: F401  (the path set-up)

STORY = os.path.join(REPO, "tests", "fixtures", "story-3hosts.json")


def _spans(req):
    out = []
    for rs in req["resourceSpans"]:
        res = {a["key"]: list(a["value"].values())[0]
               for a in rs["resource"]["attributes"]}
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                out.append((res, s))
    return out


def _attr(s, key):
    for a in s["attributes"]:
        if a["key"] == key:
            return list(a["value"].values())[0]
    return None


def test_a_story_is_one_trace_nested_as_the_op_ran():
    from cephlat.render.otlp import story_request, trace_id
    story = json.load(open(STORY))
    req = story_request(story, {"osd.1": {"host.name": "h2"}})
    spans = _spans(req)
    ids = {s["spanId"]: (res, s) for res, s in spans}
    assert len(ids) == len(spans)                     # no id twice
    assert {s["traceId"] for _, s in spans} == {trace_id(story["reqid"])}
    daemons = {res.get("ceph_daemon") for res, _ in spans}
    assert daemons == {None, "osd.0", "osd.1", "osd.2"}
    roots = [s for _, s in spans if "parentSpanId" not in s]
    assert [r["name"] for r in roots] == ["rbd write"]
    root = roots[0]
    c = story["client"]["call"]
    assert int(root["endTimeUnixNano"]) - int(root["startTimeUnixNano"]) \
        == round(c["released_at_us"] * 1000)
    for res, s in spans:
        start, end = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
        assert end >= start, s
        if "parentSpanId" in s:
            assert s["parentSpanId"] in ids, s
    # each replica's op hangs under the primary's wait for it, which
    # covers it
    for name in ("osd.0", "osd.1"):
        op = [s for res, s in spans if res.get("ceph_daemon") == name and
              s["name"] == "osd op (replica)"][0]
        wait = ids[op["parentSpanId"]][1]
        assert wait["name"] == "replica_wait " + name
        assert int(wait["startTimeUnixNano"]) <= \
            int(op["startTimeUnixNano"]) <= int(op["endTimeUnixNano"]) <= \
            int(wait["endTimeUnixNano"]) + 1000
    # the queue wait carries who woke the worker and its parts
    qw = [s for res, s in spans if res.get("ceph_daemon") == "osd.2" and
          s["name"] == "queue_wait"][0]
    assert _attr(qw, "ceph.woken_by") is not None
    assert _attr(qw, "ceph.wait.signal_us") is not None
    assert [r for r, _ in spans if r.get("ceph_daemon") == "osd.1"][0][
        "host.name"] == "h2"
    # an acknowledged write (the cache held it): the application's part
    # ends with the call, the way behind it reaches the primary when the
    # primary enqueued the op, on the other host's resource
    client = {s["name"]: s for res, s in spans
              if res.get("service.name") == "librbd"}
    assert _attr(root, "rbd.acked_by_cache") is True
    t = {k: (int(v["startTimeUnixNano"]), int(v["endTimeUnixNano"]))
         for k, v in client.items()}
    # (each segment rounded to 0.1 us: four of them within 0.2 us)
    assert abs(t["application"][1] - t["rbd write"][1]) <= 200
    prim = [s for res, s in spans if res.get("ceph_daemon") == "osd.2"
            and s["name"] == "osd op (primary)"][0]
    row = [r for r in story["osds"]["osd.2"] if r["role"] == "primary"][0]
    first = min(x["start_us"] for x in row["stages"])
    assert abs(t["osd"][0] - (int(prim["startTimeUnixNano"]) -
                              round(first * 1000))) <= 200
    assert t["durable"][0] == t["rbd write"][0]
    assert t["behind"][0] == t["ack"][1]

    # the same story twice: the same ids (a host resending joins, not
    # duplicates)
    assert story_request(story)["resourceSpans"][0]["scopeSpans"][0][
        "spans"][0]["spanId"] == req["resourceSpans"][0]["scopeSpans"][0][
        "spans"][0]["spanId"]


def test_the_sample_is_the_same_everywhere_and_one_in_n():
    from cephlat.model.sample import mix, sampled
    rng = np.random.default_rng(3)
    num = rng.integers(4000, 5000, 200000)
    tid = rng.integers(1, 1 << 40, 200000)
    for n in (10, 100):
        got = sampled(num, tid, n)
        assert abs(got.mean() - 1.0 / n) < 3 * np.sqrt(1.0 / n / len(got))
        # one request id at a time, as another host would decide it
        for i in np.flatnonzero(got)[:20].tolist() + list(range(20)):
            assert bool(sampled(int(num[i]), int(tid[i]), n)) == bool(got[i])
    assert sampled(num[:5], tid[:5], 1).all()
    # the rule written out, as a BPF program repeats it
    h = (int(tid[0]) * 0x9E3779B97F4A7C15 + int(num[0])) % (1 << 64)
    assert int(mix(num[0], tid[0])) == h


def test_the_collectors_endpoint():
    from cephlat.send.otlp import endpoint
    from cephlat.errors import UserError
    assert endpoint("http://127.0.0.1:4318") == \
        "http://127.0.0.1:4318/v1/traces"
    assert endpoint("http://h:4318/v1/traces") == "http://h:4318/v1/traces"
    for bad in ("127.0.0.1:4318", "http://", "http://h:notaport",
                "ftp://h:4318"):
        try:
            endpoint(bad)
        except UserError as e:
            assert "http://" in str(e) and "\n" not in str(e)
        else:
            raise AssertionError("%s taken" % bad)


def test_posting_to_a_collector_says_why_it_failed():
    """OTLP/HTTP to a local server: a 200 takes the body as sent (JSON,
    its content type); a 500 and a port nobody listens on come back as
    the reason, never an exception."""
    import socket
    from otlpcollector import Collector
    from cephlat.send.otlp import post
    col = Collector()
    try:
        body = {"resourceSpans": [{"resource": {}, "scopeSpans": []}]}
        assert post(col.traces_url, body) is None
        assert col.types == [("/v1/traces", "application/json")]
        assert col.bodies == [body]
        col.status = 500
        assert post(col.traces_url, body).startswith("HTTP 500")
    finally:
        col.close()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                 # nobody listens there now
    why = post("http://127.0.0.1:%d/v1/traces" % port, {})
    assert why and "refused" in why.lower(), why
