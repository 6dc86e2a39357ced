"""Live ops as OTLP traces, for every front end that traces live
(osdstage-exporter --otlp, osdstage -p/--osd ... --otlp): the ops the
full tier's BPF programs chose at their end (probes/osdstage.h, struct
op_trace: the 1-in-N sample by request id of model/sample.py, the ops
over the threshold, under a rate cap; engine/traces.py reads them)
become spans (render/otlp.py's osd_request: the ids `osdstage -r --otlp`
gives the same op) and go to the collector through a bounded queue
drained by a thread of its own (send/otlp.py's Sender): the tracer never
waits for a collector; what does not fit, or what the collector refuses,
is dropped and counted (summary: what became of the chosen ops).

Each host sends its OSDs' part of an op's trace alone: the trace id is
the request id's (render/otlp.py trace_id) and every span id and parent
is derived on the host from the request id, the OSD's name and (a
replica op) its primary's, which the replica op's message names. A
sampled op is chosen on every OSD it touches (the rule is the request
id's), so its trace holds the primary's and every replica's part when
each host's full tier was attached when the op ran (a duty cycle that
was off, or a host's rate cap, leaves that host's part out).

Each op the sender took into its queue is also handed back (on_sent):
the exporter makes it an exemplar of the latency histograms it falls in
(exporter/exemplars.py), so /metrics links a bucket to a trace that was
sent.
"""
import socket

from .engine.tracer import real_offset_ns
from .model.sample import reqid_name
from .render.otlp import osd_request
from .send.otlp import Sender

QUEUE_SPANS = 20000         # spans waiting for the collector, at most
BATCH_SPANS = 1000          # spans per request
POST_TIMEOUT_S = 5.0
CLIENT = 8                  # CEPH_ENTITY_TYPE_CLIENT
WHY = ("sample", "slow")    # why an op was chosen (enum trace_why)


def _pg(ev):
    pool, seed = ev["pg_pool"], ev["pg_seed"]
    return "%d.%x" % (pool, seed) if pool or seed else None


def op_request(ev, daemon, real_off_ns, vocab, resource=None):
    """One chosen op (a decoded struct op_trace) of OSD `daemon` -> (its
    OTLP/HTTP JSON body, its spans); None when it names no client's
    request. real_off_ns: CLOCK_REALTIME - CLOCK_MONOTONIC (the event's
    times are monotonic); vocab: the run's (labels of its enums)."""
    if ev["req_type"] != CLIENT:
        return None
    rid = reqid_name(ev["req_num"], ev["req_inc"], ev["req_tid"])
    enq = ev["enq_ns"]

    def us(ns):
        return (ns - enq) / 1000.0
    primary = ev["role"] == 0
    row = {"reqid": rid, "role": "primary" if primary else "replica",
           "enqueued_at_us": 0.0, "pg": _pg(ev),
           "object": ev["object"] or None,
           "class": _label(vocab.op_classes, ev["op_class"])
           if primary else None,
           "queue_class": _label(vocab.queue_classes, ev["queue_class"]),
           "kind": None if primary else "repop",
           "msg_us": ev["msg_ns"] / 1000.0 if ev["msg_ns"] else None,
           "attributes": {"ceph.pool": ev["pg_pool"] if _pg(ev) else None,
                          "osdstage.chosen": WHY[min(ev["why"], 1)]}}
    if ev["dequeued"]:
        row["queue_wait_us"] = us(ev["deq_ns"])
    row["total_us" if primary else "repop_us"] = us(ev["done_ns"])
    if primary and ev["sub_ns"]:
        sub = us(ev["sub_ns"])
        row["replies"] = [
            {"peer": "osd.%d" % peer, "at_us": sub + w, "wait_us": float(w)}
            for peer, w in list(zip(ev["rep_peer"], ev["rep_us"]))[
                :min(ev["replies"], len(ev["rep_peer"]))]]
        if ev["local_ns"] > ev["sub_ns"]:
            row["local_commit_us"] = us(ev["local_ns"])
            row["local_commit_wait_us"] = us(ev["local_ns"]) - sub
    spans = []
    if ev["msg_ns"]:
        spans.append(("messenger", -ev["msg_ns"] / 1000.0, 0.0))
    if ev["dequeued"]:
        spans.append(("execute", us(ev["deq_ns"]), us(ev["done_ns"])))
    # a replica op's parent: its primary's wait for it (its sender)
    primary_name = None if primary else "osd.%d" % ev["src"]
    return osd_request(row, daemon, enq + real_off_ns,
                       primary=primary_name, spans=spans, resource=resource)


def _label(labels, i):
    return labels[i] if 0 <= i < len(labels) else None


class Traces:
    """The full tier's chosen ops to the collector at `url` (an OTLP/HTTP
    traces endpoint, send/otlp.py endpoint()): take() after each read of
    the ring; counts() and summary() for what became of them; say()
    (one line) what the collector does, once per change. host: the
    resource's host.name; on_sent(daemon, [(op, wall-clock offset ns,
    vocabulary)]): the ops of OSD `daemon` the sender took, after each
    take() (the exporter's exemplars)."""

    def __init__(self, url, host, say, sender=None, on_sent=None):
        self.url = url
        self.say = say
        self.on_sent = on_sent
        self.sender = sender or Sender(self.url, max_spans=QUEUE_SPANS,
                                       batch_spans=BATCH_SPANS,
                                       timeout=POST_TIMEOUT_S).start()
        self.host = host or socket.gethostname()
        self.said_error = None
        self.ops = 0
        # the ops taken from the ring: (daemon, why) -> ops
        self.taken = {}

    def resource(self, run, version):
        return {"host.name": self.host, "ceph.version": version or None,
                "process.pid": run.pid}

    def take(self, tracer, runs, version):
        """The ops `tracer` chose since the last take, as spans to the
        sender; runs: its RunInfo per target slot (the OSDs' names)."""
        evs = tracer.take_traces()
        sent = {}
        if evs:
            off = real_offset_ns()
            for ev in evs:
                slot = ev["target"]
                if slot >= len(runs):
                    continue
                run = runs[slot]
                got = op_request(ev, run.name, off, run.vocab,
                                 self.resource(run, version))
                if got is None:
                    continue
                body, n = got
                self.ops += 1
                k = (run.name, WHY[min(ev["why"], 1)])
                self.taken[k] = self.taken.get(k, 0) + 1
                if self.sender.offer(run.name, body["resourceSpans"], n):
                    sent.setdefault(run.name, []).append(
                        (ev, off, run.vocab))
        if self.on_sent is not None:
            for name, ops in sent.items():
                self.on_sent(name, ops)
        self._judge()

    def _judge(self):
        err = self.sender.error
        if err == self.said_error:
            return
        if err is not None:
            self.say("otlp: the collector at %s: %s; traces are dropped "
                     "(counted) until it takes them" % (self.url, err))
        elif self.said_error is not None:
            self.say("otlp: the collector at %s takes traces again"
                     % self.url)
        self.said_error = err

    def counts(self):
        return self.sender.counts()

    def summary(self, counters, names=None):
        """What became of the ops chosen as traces since the start (of
        the OSDs `names`; None: every OSD): a JSON object (model/
        report-schema.json "otlp"). counters: the BPF side's since the
        start (those OSDs'), for the ops dropped there, before the ring
        (over the rate cap, the ring full); the others reached user
        space, and are counted sent, dropped or queued there, so that
        chosen is sent + dropped + those still queued (none once
        closed)."""
        sent_ops, dropped_ops = self.sender.parts()
        spans, _ = self.sender.counts()

        def mine(key):
            return names is None or key in names
        why = {w: sum(n for (k, kw), n in self.taken.items()
                      if kw == w and mine(k)) for w in WHY}
        dropped = {"rate": int(counters.get("trace_over_rate", 0)),
                   "ring": int(counters.get("trace_ring_full", 0))}
        for reason in Sender.REASONS:
            dropped[reason] = sum(n for (k, r), n in dropped_ops.items()
                                  if r == reason and mine(k))
        return {"url": self.url,
                "chosen": dropped["rate"] + dropped["ring"] + sum(
                    why.values()),
                "sample": why["sample"], "slow": why["slow"],
                "sent": sum(n for k, n in sent_ops.items() if mine(k)),
                "spans": sum(n for k, n in spans.items() if mine(k)),
                "dropped": dropped, "error": self.sender.error}

    def close(self, wait_s=2.0):
        """Stop: what is queued is sent for up to wait_s, the rest is
        dropped and counted; a collector's failure met only now is said
        too (once), as during the run."""
        self.sender.stop(wait_s)
        self._judge()
