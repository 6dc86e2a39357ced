"""rbdrecord --otlp without root or a lab: a client's trace written the
way eBPF mode writes it (its librbd calls, its Objecter's ops, one write
librbd's cache acknowledged early), read back and sent:

- the ops chosen are model/sample.py's sample by request id (the rule
  the exporters' programs follow) and the ops of the calls over
  --otlp-over, the slowest first;
- each chosen op's spans are in its request id's trace (trace_id); the
  client's span is the trace's root with the id the exporter gives the
  primary's op as its parent (client_span_id), the op's time in the
  Objecter under it; a call of two ops is in both traces, linked;
- the body posted to a local collector is OTLP/HTTP JSON (an
  ExportTraceServiceRequest: resourceSpans, the librbd resource, spans
  with ids of the right lengths and times as strings of nanoseconds);
- a collector that refuses or is gone is counted and said in one line,
  and the recording's exit status stands; a bad URL is a usage error
  before anything is recorded."""
import re
import socket

import pytest

from conftest import need  # noqa: F401  (the path set-up)
from otlpcollector import Collector

CLIENT, IMAGE = 4123, 0x55aa00
OFF = 1796355170 * 10 ** 9          # the trace's wall clock at 0
ORDER = 22                          # 4 MiB objects
US = 1000
N_WRITES = 240


def _send(i, tid, no, eoff, ln, t, write=True, reply=100 * US,
          done=110 * US):
    rid = "client.%d.0:%d" % (CLIENT, tid)
    key = (rid, CLIENT, 0, tid, i % 3)
    return [(t, "rbdrecord:osd_op_send", key + (
        2, 5, "2.5", "rbd_data.ab12.%016x" % no, 30,
        0x20 if write else 0x10, 1, 1, 0x2201 if write else 0x1201,
        "write" if write else "read", eoff, ln)),
        (t + reply, "rbdrecord:osd_op_reply", key),
        (t + done, "rbdrecord:osd_op_done", key)]


def _events():
    """The client's events: N_WRITES 4 KiB writes (one op each, the last
    one slow), a read, a 8 KiB write across two objects (two ops, slow),
    a write the cache acknowledged before its op's reply, and an op of
    no call (the image's header)."""
    evs = [(0, "librbd:open_image_enter", (IMAGE, "img1", "ab12", "", 0)),
           (0, "rbdrecord:image_pool", (IMAGE, "rbd"))]
    img = (IMAGE, "img1", "", 0)
    calls = []      # (op, off, len, submit, done, [op sends])
    t, tid = 1000 * US, 1
    for k in range(N_WRITES):
        slow = 5000 * US if k == N_WRITES - 1 else 0
        calls.append(("write", (k << ORDER) + 4096, 4096, t, t + 200 * US +
                      slow, [(tid, k, 4096, 4096, t + 10 * US, True,
                              100 * US + slow, 110 * US + slow)]))
        t, tid = t + 300 * US + slow, tid + 1
    # a read
    calls.append(("read", (3 << ORDER) + 8192, 4096, t, t + 150 * US,
                  [(tid, 3, 8192, 4096, t + 10 * US, False, 100 * US,
                    110 * US)]))
    t, tid = t + 300 * US, tid + 1
    # a write across objects 7 and 8: two ops, 3 ms
    calls.append(("write", (8 << ORDER) - 4096, 8192, t, t + 3000 * US,
                  [(tid, 7, (1 << ORDER) - 4096, 4096, t + 10 * US, True,
                    2800 * US, 2900 * US),
                   (tid + 1, 8, 0, 4096, t + 12 * US, True, 2900 * US,
                    2950 * US)]))
    two = (tid, tid + 1)
    t, tid = t + 4000 * US, tid + 2
    # acknowledged by the cache (its record) before the op's reply
    calls.append(("write", (20 << ORDER), 4096, t, t + 30 * US,
                  [(tid, 20, 0, 4096, t + 10 * US, True, 400 * US,
                    410 * US)]))
    acked = tid
    cache_at = t + 5 * US
    t, tid = t + 1000 * US, tid + 1
    for i, (op, off, ln, sub, done, sends) in enumerate(calls):
        comp = 0x1000 + i
        if op == "write":
            evs.append((sub, "librbd:aio_write_enter",
                        img + (off, ln, 0, 0, ln, comp)))
        else:
            evs.append((sub, "librbd:aio_read_enter", img + (off, ln,
                                                             comp)))
        evs.append((done, "librbd:aio_complete_enter", (comp, 0)))
        evs.append((done + 20 * US, "rbdrecord:aio_release", (comp,)))
        for j, (tid_, no, eoff, eln, send, w, rep, dn) in enumerate(sends):
            evs += _send(i + j, tid_, no, eoff, eln, send, w, rep, dn)
    evs.append((cache_at, "rbdrecord:cache_write", (
        0x1000 + len(calls) - 1, 0, IMAGE, 0x77, 20, 0, 4096, 1, 4096,
        1 << 24, 1 << 24, 0, 0, "acked")))
    # the image's header: an op of no call
    evs += [(t, "rbdrecord:osd_op_send", (
        "client.%d.0:%d" % (CLIENT, tid), CLIENT, 0, tid, 1, 2, 1, "2.1",
        "rbd_header.ab12", 15, 0x10, 1, 1, 0x1201, "call", 0, 0)),
        (t + 50 * US, "rbdrecord:osd_op_reply", (
            "client.%d.0:%d" % (CLIENT, tid), CLIENT, 0, tid, 1)),
        (t + 60 * US, "rbdrecord:osd_op_done", (
            "client.%d.0:%d" % (CLIENT, tid), CLIENT, 0, tid, 1))]
    return evs, {"two": two, "acked": acked, "header": tid,
                 "slow": N_WRITES}


def write_client_trace(path):
    from cephlat.rbd import events
    evs, which = _events()
    w = events.open_trace(path, {"pid": 77, "hostname": "client-1"}, OFF)
    for ts, name, vals in sorted(evs, key=lambda e: e[0]):
        w.write(name, ts, *vals, ctx=(1, 1, 77))
    w.close()
    return which


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("otlp") / "trace")
    return path, write_client_trace(path)


def _rid(tid):
    return "client.%d.0:%d" % (CLIENT, tid)


def _spans(body):
    return [(rs["resource"], s) for rs in body["resourceSpans"]
            for ss in rs["scopeSpans"] for s in ss["spans"]]


def _attrs(x):
    """OTLP attributes -> {key: value} (intValue: a string in JSON)"""
    return {a["key"]: int(a["value"]["intValue"]) if "intValue" in
            a["value"] else list(a["value"].values())[0]
            for a in x.get("attributes", [])}


def test_the_choice_is_the_exporters_sample_and_the_slow_calls(trace):
    from cephlat.model.sample import sampled_one
    from cephlat.rbd.reader import RbdTrace
    from cephlat.rbd.traces import choose
    path, which = trace
    cc = RbdTrace(path).cols
    every = 7
    idx, more, us = choose(cc, every, None)
    got = {cc.reqid(i) for i in idx.tolist()}
    want = {cc.reqid(i) for i in range(len(cc.ops))
            if sampled_one(int(cc.ops.client[i]), int(cc.ops.tid[i]),
                           every)}
    assert got == want and more == 0
    assert 0 < len(got) < len(cc.ops) / 3
    # no sample, calls over 2 ms: the slow write's op and both of the
    # two-op call's; the slowest first
    idx, _, us = choose(cc, 0, 2000.0)
    assert [cc.reqid(i) for i in idx.tolist()] == [
        _rid(which["slow"]), _rid(which["two"][0]), _rid(which["two"][1])]
    assert us[idx[0]] >= us[idx[1]] == us[idx[2]] == 3000.0
    # every op: those whose reply was recorded, all of them here
    assert len(choose(cc, 1, None)[0]) == len(cc.ops) == N_WRITES + 5


def _parts(path, reqids):
    from cephlat.rbd.reader import RbdTrace
    from cephlat.rbd.traces import op_parts
    import numpy as np
    tr = RbdTrace(path)
    idx = np.array([tr.cols.find(r) for r in reqids])
    return {r: p for r, p in zip(reqids, op_parts(tr, idx))}


def test_each_ops_spans_join_the_exporters_trace(trace):
    from cephlat.render.otlp import (client_span_id, op_span_id,
                                     osd_request, story_request, trace_id)
    path, which = trace
    rid = _rid(5)
    key, rs, n = _parts(path, [rid])[rid]
    assert key == "client.%d" % CLIENT
    spans = _spans({"resourceSpans": rs})
    assert n == len(spans) == 2
    assert {s["traceId"] for _, s in spans} == {trace_id(rid)}
    root = [s for _, s in spans if "parentSpanId" not in s]
    assert len(root) == 1
    root = root[0]
    assert root["spanId"] == client_span_id(rid)
    assert root["name"] == "rbd write" and root["kind"] == 3
    a = _attrs(root)
    assert a["ceph.reqid"] == rid and a["rbd.length"] == 4096
    assert a["rbd.offset"] == (4 << ORDER) + 4096
    assert a["ceph.primary"] == "osd.1" and "rbd.acked_by_cache" not in a
    # the call, submit to release (fio's reaping)
    assert int(root["endTimeUnixNano"]) - int(root["startTimeUnixNano"]) \
        == 220 * US
    op = [s for _, s in spans if s is not root][0]
    assert op["name"] == "objecter op"
    assert op["parentSpanId"] == root["spanId"]
    assert int(op["endTimeUnixNano"]) - int(op["startTimeUnixNano"]) \
        == 100 * US
    assert _attrs(op)["ceph.object"] == "rbd_data.ab12.%016x" % 4
    assert [e["name"] for e in op["events"]] == ["completion"]
    # the exporter's primary op of that request hangs under it: the
    # same trace, its parent the client's span
    body, _ = osd_request({"reqid": rid, "role": "primary",
                           "enqueued_at_us": 0.0, "total_us": 50.0},
                          "osd.1", OFF)
    prim = _spans(body)[0][1]
    assert prim["traceId"] == root["traceId"]
    assert prim["spanId"] == op_span_id(rid, "osd.1")
    assert prim["parentSpanId"] == root["spanId"]
    # so does `osdstage -r --otlp`'s story of it without the client's
    # trace (the parent the client sends)
    story = {"reqid": rid, "osds": {"osd.1": [{
        "role": "primary", "enqueued_at_us": 0.0, "enqueue": {"ts": 1.0},
        "total_us": 50.0}]}}
    op1 = [s for _, s in _spans(story_request(story))
           if s["name"] == "osd op (primary)"][0]
    assert (op1["spanId"], op1["parentSpanId"]) == (prim["spanId"],
                                                    root["spanId"])
    # the resource: librbd, this host, the client, its pool and image
    res = _attrs(rs[0]["resource"])
    assert res["service.name"] == "librbd" and "ceph_daemon" not in res
    assert res["host.name"] == "client-1" and res["process.pid"] == 77
    assert res["ceph.client"] == "client.%d" % CLIENT
    assert res["rbd.pool"] == "rbd" and res["rbd.image"] == "img1"


def test_a_call_of_two_ops_is_in_both_traces_linked(trace):
    from cephlat.render.otlp import client_span_id, trace_id
    path, which = trace
    a, b = (_rid(t) for t in which["two"])
    got = _parts(path, [a, b])
    for me, other in ((a, b), (b, a)):
        spans = _spans({"resourceSpans": got[me][1]})
        root = [s for _, s in spans if "parentSpanId" not in s][0]
        assert root["traceId"] == trace_id(me)
        assert root["spanId"] == client_span_id(me)
        assert _attrs(root)["rbd.osd_ops"] == 2
        assert [(x["traceId"], x["spanId"]) for x in root["links"]] == [
            (trace_id(other), client_span_id(other))]
    # one chosen alone: no link to a trace that is not sent
    spans = _spans({"resourceSpans": _parts(path, [a])[a][1]})
    assert all("links" not in s for _, s in spans)


def test_the_cache_and_a_call_less_op(trace):
    path, which = trace
    ack, hdr = _rid(which["acked"]), _rid(which["header"])
    got = _parts(path, [ack, hdr])
    root = [s for _, s in _spans({"resourceSpans": got[ack][1]})
            if "parentSpanId" not in s][0]
    a = _attrs(root)
    assert a["rbd.acked_by_cache"] is True
    assert "rbd.acked_inferred" not in a          # the cache's record
    spans = _spans({"resourceSpans": got[hdr][1]})
    root = [s for _, s in spans if "parentSpanId" not in s][0]
    assert root["name"] == "osd op"
    assert _attrs(root)["ceph.object"] == "rbd_header.ab12"
    assert "rbd.image" not in _attrs(spans[0][0])


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


_HEX = re.compile(r"^[0-9a-f]+$")
_VALUE_KEYS = {"stringValue", "boolValue", "intValue", "doubleValue"}


def _check_otlp_json(body):
    """An ExportTraceServiceRequest in OTLP/HTTP's JSON encoding, as
    opentelemetry-proto's JSON mapping has it."""
    assert set(body) == {"resourceSpans"}
    for rs in body["resourceSpans"]:
        for a in rs["resource"]["attributes"]:
            assert set(a) == {"key", "value"}
            assert len(a["value"]) == 1 and set(a["value"]) <= _VALUE_KEYS
        for ss in rs["scopeSpans"]:
            assert isinstance(ss["scope"]["name"], str)
            for s in ss["spans"]:
                assert len(s["traceId"]) == 32 and _HEX.match(s["traceId"])
                assert len(s["spanId"]) == 16 and _HEX.match(s["spanId"])
                if "parentSpanId" in s:
                    assert len(s["parentSpanId"]) == 16
                assert s["kind"] in (1, 2, 3, 4, 5)
                start, end = s["startTimeUnixNano"], s["endTimeUnixNano"]
                assert start.isdigit() and end.isdigit()
                assert int(end) >= int(start) > OFF
                for a in s["attributes"]:
                    assert set(a["value"]) <= _VALUE_KEYS
                    if "intValue" in a["value"]:
                        assert isinstance(a["value"]["intValue"], str)
                for x in s.get("links", ()):
                    assert len(x["traceId"]) == 32 and len(x["spanId"]) == 16
                for e in s.get("events", ()):
                    assert e["timeUnixNano"].isdigit() and e["name"]


def _record(monkeypatch, path, which_out):
    """rbdrecord's recording replaced by writing the trace at `path`."""
    from cephlat.rbd import record

    def fake(target, output, duration, err):
        which_out.update(write_client_trace(output))
        err.write("rbdrecord: wrote %s\n" % output)
        return 0
    monkeypatch.setattr(record, "record_ebpf", fake)


def test_rbdrecord_otlp_posts_otlp_json(monkeypatch, tmp_path, capsys,
                                        collector):
    from cephlat.cli import rbdrecord
    from cephlat.model.sample import sampled_one
    from cephlat.render.otlp import trace_id
    which = {}
    _record(monkeypatch, tmp_path / "t", which)
    assert rbdrecord.main(["-o", str(tmp_path / "t"), "-p", "42",
                           "--otlp", collector.url, "--otlp-sample", "5",
                           "--otlp-over", "2000"]) == 0
    err = capsys.readouterr().err
    assert collector.bodies, err
    assert set(collector.types) == {("/v1/traces", "application/json")}
    for b in collector.bodies:
        _check_otlp_json(b)
    spans = [s for b in collector.bodies for _, s in _spans(b)]
    tids = {s["traceId"] for s in spans}
    want = {trace_id(_rid(t)) for t in range(1, which["header"] + 1)
            if sampled_one(CLIENT, t, 5)} | {
        trace_id(_rid(t)) for t in (which["slow"],) + which["two"]}
    assert tids == want
    assert len(spans) == 2 * len(want)
    line = [x for x in err.splitlines() if x.startswith("rbdrecord: otlp")]
    assert len(line) == 1, err
    assert line[0] == ("rbdrecord: otlp: %d client ops as traces, %d spans "
                       "sent to %s/v1/traces" % (len(want), len(spans),
                                                 collector.url)), line


def test_a_refusing_collector_is_counted_and_said(monkeypatch, tmp_path,
                                                  capsys):
    from cephlat.cli import rbdrecord
    from cephlat.rbd import traces
    monkeypatch.setattr(traces, "FAILING_S", 0.2)
    col = Collector(status=400)
    try:
        _record(monkeypatch, tmp_path / "t", {})
        assert rbdrecord.main(["-o", str(tmp_path / "t"), "-p", "42",
                               "--otlp", col.url, "--otlp-sample",
                               "1"]) == 0
    finally:
        col.close()
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = [x for x in err.splitlines() if x.startswith("rbdrecord: otlp")]
    assert len(line) == 1, err
    n = 2 * (N_WRITES + 5)
    assert ("otlp: %d client ops as traces, 0 spans sent" % (n // 2)) in \
        line[0]
    assert "%d spans not taken by the collector" % n in line[0], line
    assert "HTTP 400" in line[0]


def test_a_collector_that_is_gone_costs_seconds_not_the_recording(
        monkeypatch, tmp_path, capsys):
    import time
    from cephlat.cli import rbdrecord
    from cephlat.rbd import traces
    monkeypatch.setattr(traces, "FAILING_S", 0.3)
    monkeypatch.setattr(traces, "BATCH_SPANS", 20)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                       # nobody listens there now
    _record(monkeypatch, tmp_path / "t", {})
    t0 = time.monotonic()
    assert rbdrecord.main(["-o", str(tmp_path / "t"), "-p", "42", "--otlp",
                           "http://127.0.0.1:%d" % port, "--otlp-sample",
                           "1"]) == 0
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if x.startswith("rbdrecord: otlp")]
    assert len(line) == 1 and "0 spans sent" in line[0], err
    # what was posted and failed, and what was never posted: all of it
    n = [int(x) for x in re.findall(r"(\d+) (?:spans )?not (?:taken|sent)",
                                    line[0])]
    assert sum(n) == 2 * (N_WRITES + 5), line
    assert "refused" in line[0].lower()         # the reason


def test_a_trace_it_cannot_read_is_one_line(tmp_path, capsys):
    from cephlat.rbd.traces import OtlpChoice, send_calls
    import io
    err = io.StringIO()
    got = send_calls(str(tmp_path / "none"), OtlpChoice(
        url="http://127.0.0.1:9"), err)
    assert got["error"] and got["ops"] == 0
    assert err.getvalue().count("\n") == 1
    assert err.getvalue().startswith("rbdrecord: otlp: nothing sent: ")


def test_a_bad_url_is_refused_before_recording(monkeypatch, tmp_path,
                                               capsys):
    from cephlat.cli import rbdrecord
    from cephlat.rbd import record
    ran = []
    monkeypatch.setattr(record, "record_ebpf", lambda *a: ran.append(a))
    for url in ("127.0.0.1:4318", "ftp://h:4318", "http://h:port"):
        assert rbdrecord.main(["-o", str(tmp_path / "t"), "-p", "42",
                               "--otlp", url]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "rbdrecord: --otlp " + url), lines
    assert not ran and not (tmp_path / "t").exists()
