"""BPF tier: a live `osdstage --otlp` (tools/osdstage.py -p PID --probes
SPEC --otlp URL), on the controlled producer/consumer of test_opqueue.py
whose ops carry request ids client.4100.0:1, :2, ... (its probe spec
says where: reqid_offset), with a tiny OTLP/HTTP JSON collector (POST
/v1/traces) in the test:

- the traces the collector receives are exactly the 1-in-N sample of
  model/sample.py, each op once, its trace id render/otlp.py's trace_id
  of its request id, its op span's id op_span_id's; the report (-j, the
  last one after the flush) counts them all chosen and sent;
- with the collector down the tool still reports and exits 0 as soon as
  the program exits, the traces dropped and counted, said once;
- SIGTERM while a collector stalls: the tool reports, flushes for a
  bounded time and exits 0, every chosen op counted sent or dropped."""
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from cephlat.model.sample import reqid_name, sampled_one
from cephlat.render.otlp import client_span_id, op_span_id, trace_id

from conftest import OSDSTAGE, PYTHON, check_reports, wait_for_line
from otlpcollector import Collector

HERE = os.path.dirname(os.path.abspath(__file__))
NUM = 4100          # the program's client number


@pytest.fixture(scope="module")
def opqueue(cxx):
    return cxx(os.path.join(HERE, "progs", "opqueue.cc"), "opqueue-live",
               ("-O2", "-g", "-pthread"))


def _spec(path, reqid_off):
    """The program's probe spec: Ceph's op shapes, and its request ids."""
    with open(path, "w") as f:
        json.dump({
            "name": "opqueue",
            "enqueue": {"function": "sim::Server::enqueue_op",
                        "params": r"^sim::spg, sim::Ref<sim::Op>&&, "
                                  r"unsigned int$",
                        "key_arg": 2, "deref": True},
            "dequeue": {"function": "sim::Server::dequeue_op",
                        "params": r"^sim::Ref<sim::PG>, sim::Ref<sim::Op>, "
                                  r"sim::Handle&$",
                        "key_arg": 3, "deref": True},
            "done": {"function": "sim::Server::log_op_stats",
                     "params": r"^sim::Op const&, unsigned long, "
                               r"unsigned long$",
                     "key_arg": 2},
            "workers": "opqueue",
            "reqid_offset": reqid_off}, f)
    return path


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                   # nobody listens there now
    return port


def _start(opqueue, n, queue_us, work_us):
    p = subprocess.Popen([opqueue, str(n), str(queue_us), str(work_us)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    head = p.stdout.readline().split()
    return p, int(head[3])


def _tool(p, spec, url, extra):
    return subprocess.Popen(
        [PYTHON, OSDSTAGE, "-p", str(p.pid), "--probes", spec, "--otlp", url]
        + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _trace(opqueue, tmp_path, url, n, extra, queue_us=300, work_us=200):
    """osdstage --otlp URL on the program until it exits -> (stdout,
    stderr, exit status, seconds from the program's end to the tool's)"""
    p, reqid_off = _start(opqueue, n, queue_us, work_us)
    spec = _spec(str(tmp_path / "opqueue.json"), reqid_off)
    tool = _tool(p, spec, url, extra)
    try:
        wait_for_line(tool.stderr, "Tracing", 30)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "done %d" % n
        p.wait(30)
        t_end = time.monotonic()
        out, err = tool.communicate(timeout=60)
        took = time.monotonic() - t_end
    finally:
        for q in (p, tool):
            if q.poll() is None:
                q.kill()
    return out, err, tool.returncode, took


def _want(n, every):
    return [t for t in range(1, n + 1) if sampled_one(NUM, t, every)]


def test_the_traces_sent_are_the_sample(bpf_ready, opqueue, tmp_path):
    n, every = 90, 3
    col = Collector()
    try:
        out, err, status, _ = _trace(
            opqueue, tmp_path, col.url, n,
            ["-j", "--otlp-sample", str(every), "--otlp-rate", "0"])
    finally:
        col.close()
    assert status == 0, err
    assert "Traceback" not in err
    want = _want(n, every)
    assert 0 < len(want) < n
    recs = check_reports(out)
    assert recs and recs[-1]["type"] == "interval"
    last = recs[-1]
    assert last["stages"]["op_total"]["count"] == n
    assert last["otlp"]["url"] == col.url + "/v1/traces"
    assert (last["otlp"]["chosen"], last["otlp"]["sample"],
            last["otlp"]["sent"]) == (len(want), len(want), len(want))
    assert sum(last["otlp"]["dropped"].values()) == 0
    assert last["otlp"]["error"] is None
    # the collector got exactly the sampled ops, one trace each
    daemon = "pid %d" % last["pid"]
    ops = [(rs, s) for rs, s in col.spans()
           if s["name"].startswith("osd op")]
    assert sorted(_attr(s, "ceph.reqid") for _, s in ops) == sorted(
        reqid_name(NUM, 0, t) for t in want)
    for rs, s in ops:
        rid = _attr(s, "ceph.reqid")
        assert s["traceId"] == trace_id(rid)
        assert s["spanId"] == op_span_id(rid, daemon)
        # a primary's: under the client's span (rbdrecord --otlp's)
        assert s["parentSpanId"] == client_span_id(rid)
        assert _attr(rs["resource"], "ceph_daemon") == daemon
    # its queue wait and execution under it, in the same trace
    assert len(col.spans()) == 3 * len(want) == last["otlp"]["spans"]
    by_trace = {}
    for _, s in col.spans():
        by_trace.setdefault(s["traceId"], []).append(s["name"])
    assert all(sorted(v) == ["execute", "osd op (primary)", "queue_wait"]
               for v in by_trace.values()), by_trace
    assert "otlp: %d ops chosen, %d sent as traces" % (len(want),
                                                       len(want)) in err


def _attr(obj, key):
    for a in obj["attributes"]:
        if a["key"] == key:
            v = a["value"]
            return next(iter(v.values()))
    return None


def test_a_collector_that_is_down(bpf_ready, opqueue, tmp_path):
    """The report as ever, exit 0 as soon as the program is gone; the
    traces dropped and counted, the collector's failure said once."""
    n, every = 60, 2
    url = "http://127.0.0.1:%d" % _free_port()
    out, err, status, took = _trace(
        opqueue, tmp_path, url, n,
        ["--otlp-sample", str(every), "--otlp-rate", "0"])
    assert status == 0, err
    assert "Traceback" not in err
    assert took < 3.0, took                 # the loop's 0.2 s, no waiting
    want = _want(n, every)
    text = " ".join(out.split())
    assert "OTLP traces: 1 op in %d by request id, no rate cap, to " \
        "%s/v1/traces" % (every, url) in text
    assert "STAGE" in out                    # the report itself
    assert "OTLP traces since the start: %d ops chosen, 0 sent as traces " \
        "(0 spans); %d dropped" % (len(want), len(want)) in text
    said = [line for line in err.splitlines()
            if "the collector at" in line]
    assert len(said) == 1, err
    assert "traces are dropped (counted)" in said[0]
    assert "otlp: %d ops chosen, 0 sent as traces" % len(want) in err


def test_sigterm_flushes_for_a_bounded_time(bpf_ready, opqueue, tmp_path):
    """A collector that takes the connection and never answers: at
    SIGTERM the tool makes its report, waits for the collector at most
    the flush's bound and exits 0, every chosen op counted."""
    stall = socket.socket()
    stall.bind(("127.0.0.1", 0))
    stall.listen(16)                        # never accepted, never read
    url = "http://127.0.0.1:%d" % stall.getsockname()[1]
    p, reqid_off = _start(opqueue, 3000, 1000, 500)
    spec = _spec(str(tmp_path / "opqueue.json"), reqid_off)
    tool = _tool(p, spec, url, ["-j", "--otlp-sample", "1",
                                "--otlp-rate", "0"])
    try:
        wait_for_line(tool.stderr, "Tracing", 30)
        p.stdin.write("go\n")
        p.stdin.flush()
        time.sleep(1.5)                     # ops chosen, sends stalled
        assert p.poll() is None
        t0 = time.monotonic()
        tool.send_signal(signal.SIGTERM)
        out, err = tool.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        for q in (p, tool):
            if q.poll() is None:
                q.kill()
        stall.close()
    assert tool.returncode == 0, err
    assert took < 2.0 + 1.5, took           # FLUSH_S, and the loop's turn
    recs = check_reports(out)
    o = recs[-1]["otlp"]
    assert o["chosen"] > 0 and o["sent"] == 0
    d = o["dropped"]
    assert d["rate"] == d["ring"] == 0
    assert d["collector"] > 0               # the request left unanswered
    assert o["error"] == "no answer within 2 s of the end"
    # every op chosen is counted: sent or dropped
    assert o["chosen"] == sum(d.values()) == o["sample"], o
    assert "otlp: %d ops chosen, 0 sent" % o["chosen"] in err
