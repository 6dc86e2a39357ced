"""BPF tier: the ops the programs choose to send as OTLP traces (the
exporter's --otlp; probes/osdstage/ops.bpf.h trace_op), on the controlled
producer/consumer of test_opqueue.py, whose ops carry request ids
client.4100.0:1, :2, ... and are queued for PG 1.<i>:

- the 1-in-N sample the programs take is exactly model/sample.py's set of
  request ids (the same rule on every host), each op once, with its
  times, PG, op class and request id as struct op_trace says;
- with a threshold under every op's time and no sample, every op is
  chosen as slow; the rate cap lets a second's worth through at once and
  counts the rest; nothing is chosen without --otlp (the programs are
  loaded with the traces off: the verifier drops that code)."""
import os
import subprocess

import pytest

from cephlat.engine.elfsym import ElfSymbols
from cephlat.engine.plan import resolve
from cephlat.engine.tracer import StageTracer
from cephlat.model.sample import TraceChoice, sampled_one

from test_opqueue import SIM

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT, NUM = 8, 4100


@pytest.fixture(scope="module")
def opqueue(cxx):
    return cxx(os.path.join(HERE, "progs", "opqueue.cc"), "opqueue-traces",
               ("-O2", "-g", "-pthread"))


def _run(opqueue, n, queue_us, work_us, traces):
    """-> (the traces taken, the counters, the ops' count)"""
    p = subprocess.Popen([opqueue, str(n), str(queue_us), str(work_us)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        head = p.stdout.readline().split()
        rmw_off, reqid_off = int(head[1]), int(head[3])
        exe = "/proc/%d/exe" % p.pid
        with ElfSymbols(exe) as elf:
            plan = resolve(elf, SIM, ["queue_wait", "op_total"])
        tracer = StageTracer(p.pid, exe, plan, rmw=(rmw_off, 0x2, 0x4),
                             settings={"reqid_off": reqid_off,
                                       "enq_pg_on_stack": 1},
                             traces=traces)
        tracer.start()
        try:
            p.stdin.write("go\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "done %d" % n
            p.wait(30)
            got = tracer.take_traces()
            assert tracer.take_traces() == []       # taken once
            hists, counters = tracer.snapshot()
        finally:
            tracer.close()
    finally:
        if p.poll() is None:
            p.kill()
    assert hists["op_total"].count == n
    return got, counters


def test_the_sample_is_model_samples(bpf_ready, opqueue):
    n, queue_us, work_us, every = 90, 300, 200, 3
    got, counters = _run(opqueue, n, queue_us, work_us,
                         TraceChoice(every, None, 0))
    want = [t for t in range(1, n + 1) if sampled_one(NUM, t, every)]
    assert 0 < len(want) < n
    assert [g["req_tid"] for g in got] == want      # in completion order
    assert counters["trace_sample"] == len(want)
    assert counters["trace_slow"] == counters["trace_over_rate"] == 0
    assert counters["trace_ring_full"] == 0
    for g in got:
        tid = g["req_tid"]
        assert (g["req_num"], g["req_inc"], g["req_type"]) == (NUM, 0,
                                                               CLIENT)
        assert g["role"] == 0 and g["why"] == 0 and g["target"] == 0
        # queued for PG 1.<i>, its op class from its rmw flags (read,
        # write, other in turn)
        assert (g["pg_pool"], g["pg_seed"]) == (1, tid - 1)
        assert g["op_class"] == (tid - 1) % 3
        assert g["dequeued"] == 1
        assert g["enq_ns"] < g["deq_ns"] < g["done_ns"]
        assert g["deq_ns"] - g["enq_ns"] >= queue_us * 1000
        assert g["done_ns"] - g["enq_ns"] >= (queue_us + work_us) * 1000
        assert g["sub_ns"] == g["replies"] == 0 and g["src"] == 0
        assert g["object"] == ""


def test_slow_ops_under_the_rate_cap(bpf_ready, opqueue):
    # every op takes >= 300 us: all slow; 10 a second let through, the
    # first second's worth at once
    n, rate = 30, 10
    got, counters = _run(opqueue, n, 150, 150, TraceChoice(0, 250.0, rate))
    assert counters["trace_slow"] == n and counters["trace_sample"] == 0
    assert len(got) == rate, [g["req_tid"] for g in got]
    assert counters["trace_over_rate"] == n - rate
    assert [g["req_tid"] for g in got] == list(range(1, rate + 1))
    assert all(g["why"] == 1 for g in got)


def test_no_traces_unless_asked(bpf_ready, opqueue):
    got, counters = _run(opqueue, 12, 50, 50, None)
    assert got == []
    assert counters["trace_sample"] == counters["trace_slow"] == 0


def test_a_late_reader_loses_nothing(bpf_ready, opqueue):
    """Without a rate cap every op goes through the ring (4 MiB: about
    18,000 records); taken only once all 30,000 ops ended, none was lost:
    the library's thread drains the ring while the caller is away (a
    live --by on a fast OSD, Python starved for a second)."""
    from cephlat import abi
    from cephlat.engine.loadtime import TRACE_RING_MAX
    n = 30000
    assert n * (abi.load().struct("op_trace").size + 8) > TRACE_RING_MAX
    got, counters = _run(opqueue, n, 0, 0, TraceChoice(1, None, 0))
    assert counters["trace_ring_full"] == 0, counters
    assert counters["trace_sample"] == n
    assert [g["req_tid"] for g in got] == list(range(1, n + 1))
