"""OpenMetrics exemplars on the exporter's latency histograms (--otlp):
on each bucket of a series, the trace id (label trace_id, the 32 hex
digits the op's trace was sent with: render/otlp.py trace_id), the value
in seconds and the end time of a recent op that was sent as a trace and
whose time fell in that bucket. A dashboard's latency panel then links a
bucket (a slow one) to one op's trace in Jaeger or Tempo.

Only ops handed to the OTLP sender become exemplars (livetraces.py:
chosen by the full tier's programs, turned into spans and queued for the
collector), so their trace ids name traces that were sent; a collector
that later refuses them cannot be seen from here (the dropped spans are
counted). Exemplars are rendered only in the OpenMetrics exposition,
which the exporter serves to a scraper that asks for it (Prometheus
does); the classic text format has none.

Which families carry them (families.py EXEMPLARS), from what struct
op_trace holds of an op (probes/osdstage.h: its enqueue, first dequeue
and end, its message's time before the enqueue, a write's sub-ops sent,
its own commit, its first TRACE_PEERS replicas' replies):

- osdstage_stage_latency_seconds: a primary's queue_wait (dequeue -
  enqueue), execute (end - dequeue), op_total (end - enqueue), op_latency
  (its message's time before the enqueue + op_total), replica_wait (its
  last reply, when that is one of the replies the record keeps) and
  local_commit (its own commit - sub-ops sent); a replica's repop (end -
  enqueue) and queue_wait (on the series of every op's, all: not on the
  lean tier's, whose ops are a primary's client ops, by op class);
- osdstage_replica_wait_seconds: a primary's wait for each of the
  replies the record keeps, by peer;
- osdstage_scheduler_class_queue_wait_seconds: the op's queue wait, by
  the class the op scheduler gave it.

No other family: the record holds only the sum of the messenger stages
(throttle_wait, recv, dispatch), no call stage (dequeue_op, do_op,
get_object_context, bluestore_*: measured per call, not per op), no
erasure-coded sub-read; background work (recovery, scrub, ...) is no
client op and has no trace; the kernel's histograms (sleeps, wake-ups,
block requests, syncfs) and the counters time no op.

The value is the full tier's measurement of the op: where the lean tier
feeds a stage (Ceph's own stamps, osdstage_stage_tier_info) the two
differ by the few microseconds between Ceph's stamp and the probe. An
exemplar goes only on a series the exporter already has (the op's
class's where the stage is split by op class, else all's); each series
keeps one per bucket, the newest op's, and an OSD that is no longer
traced keeps none, so the memory is bounded by the series' buckets.
"""
from bisect import bisect_right

from ..model.sample import reqid_name
from ..render.otlp import trace_id
from . import families as F
from .families import BUCKET_EXPONENTS

ALL = "all"
# the buckets' upper bounds in ns; a duration of exactly a bound is in
# the bucket above it, as the histograms count it (collect.py)
BOUNDS_NS = tuple((1 << k) * 1000 for k in BUCKET_EXPONENTS)


def bucket_index(ns):
    """The bucket (index into the series' le values, len(BOUNDS_NS) for
    +Inf) that counts a duration of `ns` nanoseconds."""
    return bisect_right(BOUNDS_NS, ns)


def _label(labels, i):
    return labels[i] if 0 <= i < len(labels) else None


def op_values(ev, vocab):
    """One chosen op (a decoded struct op_trace) -> [(family, label
    values to try in order (after ceph_daemon), nanoseconds)]: its time
    in each stage an exemplar can show (the module's docstring)."""
    out = []
    enq, deq, done = ev["enq_ns"], ev["deq_ns"], ev["done_ns"]
    primary = ev["role"] == 0
    cls = _label(vocab.op_classes, ev["op_class"]) if primary else None

    def stage(name, ns):
        # split by op class where the series is, else all
        tries = ((name, cls), (name, ALL)) if cls else ((name, ALL),)
        out.append((F.STAGE_LATENCY, tries, ns))
    if ev["dequeued"] and deq >= enq:
        stage("queue_wait", deq - enq)
        qcls = _label(vocab.queue_classes, ev["queue_class"])
        if qcls:
            out.append((F.SCHED_CLASS_QUEUE_WAIT, ((qcls,),), deq - enq))
    if done < enq:
        return out
    if not primary:
        stage("repop", done - enq)
        return out
    if ev["dequeued"] and done >= deq:
        stage("execute", done - deq)
    stage("op_total", done - enq)
    if ev["msg_ns"]:
        stage("op_latency", ev["msg_ns"] + done - enq)
    if ev["sub_ns"]:
        kept = min(ev["replies"], len(ev["rep_peer"]))
        for peer, us in list(zip(ev["rep_peer"], ev["rep_us"]))[:kept]:
            out.append((F.REPLICA_WAIT, (("osd.%d" % peer,),), us * 1000))
        # the last reply is the last one kept when all are
        if kept and kept == ev["replies"]:
            stage("replica_wait", ev["rep_us"][kept - 1] * 1000)
        if ev["local_ns"] > ev["sub_ns"]:
            stage("local_commit", ev["local_ns"] - ev["sub_ns"])
    return out


def keep(slots, key, ns, exemplar):
    """Keep `exemplar` (prometheus_client's Exemplar, its timestamp the
    op's end) for series `key` in `slots` ({key: {bucket: Exemplar}}) in
    the bucket of `ns`, unless the bucket holds a newer one."""
    buckets = slots.setdefault(key, {})
    b = bucket_index(ns)
    old = buckets.get(b)
    if old is None or old.timestamp <= exemplar.timestamp:
        buckets[b] = exemplar


def op_exemplar(ev, real_off_ns, vocab):
    """A chosen op handed to the sender -> (its trace id, its end in
    wall-clock seconds, its values per histogram: op_values),
    what Exported.add_exemplars takes."""
    rid = reqid_name(ev["req_num"], ev["req_inc"], ev["req_tid"])
    return (trace_id(rid), (ev["done_ns"] + real_off_ns) / 1e9,
            op_values(ev, vocab))


def exemplars_of(exported):
    """-> the on_sent callback of livetraces.py's Traces that makes the
    ops the sender took exemplars of `exported` (collect.py Exported)."""
    def on_sent(daemon, ops):
        exported.add_exemplars(daemon, [op_exemplar(*op) for op in ops])
    return on_sent
