"""The slowest ops of a capture window, each with every stage, the worker
that dequeued it and how that worker was woken (osdstage -r --slowest),
and every stretch of its span that no stage covers named as a gap."""
from . import timeline
from .queue_words import ms

# Gaps up to this long (or 4 probe costs, if more) are the probes' own:
# each stage has its probes' cost taken out (call_bias), so stages that
# meet at one probe hit leave a few us between them. Longer ones are
# time no probe saw.
PROBE_GAP_NS = 10000


def slowest(cap, ops, n):
    """The n slowest ops (op_total, else queue_wait) as JSON-able dicts."""
    rows = []
    for o in sorted(ops, key=lambda o: o.key_ns(), reverse=True)[:n]:
        rows.append(op_row(cap, o))
    return rows


def op_row(cap, o):
    """One op, every stage, as a JSON-able dict."""
    deq = o.deq or {}
    row = {
        "op": "0x%x" % o.op, "class": o.op_class(cap.rules),
        "enqueue": {"ts": round(cap.wall(o.enq_ns), 6),
                    "tid": o.enq_tid, "thread": cap.comm(o.enq_tid)},
        "total_us": round(o.done["op_total_ns"] / 1000, 1)
        if o.done and o.done["total_valid"] else None,
    }
    partial = o.partial()
    if partial:
        row["partial"] = partial
    if o.deq:
        row["dequeue"] = {
            "at_us": round((deq["ts"] - o.enq_ns) / 1000, 1),
            "tid": deq["tid"], "thread": cap.comm(deq["tid"])}
        row["queue_wait_us"] = round(deq["queue_wait_ns"] / 1000, 1)
        row["woken"] = {
            "by": cap.rules.label("wake", deq["wake"])
            if deq["attributed"] else None,
            "waker_tid": deq["waker_tid"] or None,
            "waker": cap.comm(deq["waker_tid"]) if deq["waker_tid"]
            else None}
        if deq["attributed"]:
            for part in cap.vocab.attr_parts:
                row["woken"][part + "_us"] = round(
                    deq[part + "_ns"] / 1000, 1)
        qc = cap.rules.queue_class(deq)
        if qc:
            row["queue_class"] = qc
    # the messenger's stages (before the enqueue: negative), then the
    # worker's
    row["stages"] = [{"stage": s, "start_us": round((a - o.enq_ns) / 1000,
                                                    1),
                      "end_us": round((b - o.enq_ns) / 1000, 1)}
                     for s, a, b in timeline.messenger_stages(o) +
                     sorted(o.stages, key=lambda x: x[1])]
    if o.req:                      # captures with request ids
        row["reqid"], row["pg"] = o.req, o.pg
        obj = (o.done or o.repop or {}).get("object")
        if obj:
            row["object"] = obj
    if o.done:
        row["done_us"] = round((o.done["ts"] - o.enq_ns) / 1000, 1)
    if o.repop:
        row["kind"] = "repop"
        row["repop_us"] = round(o.repop["repop_ns"] / 1000, 1)
    if o.replies:
        row["replies"] = [{"peer": "osd.%d" % p, "at_us": round(
            (ts - o.enq_ns) / 1000, 1), "wait_us": round(w / 1000, 1)}
            for p, w, ts in o.replies]
        if o.sent_us:
            # an erasure-coded write: the waits start where its own
            # shard's sub-write began, just after the others were handed
            # to the messenger -- somewhere in the sent_us before
            row["sent_within_us"] = o.sent_us
    if o.reads:
        row["shard_reads"] = [{"peer": "osd.%d" % p, "at_us": round(
            (ts - o.enq_ns) / 1000, 1), "wait_us": round(w / 1000, 1)}
            for p, w, ts in o.reads]
    if o.local:
        row["local_commit_us"] = round((o.local["ts"] - o.enq_ns) / 1000,
                                       1)
        if o.local.get("commit_ns"):
            # since its sub-ops went out (the part of the span it covers)
            row["local_commit_wait_us"] = round(o.local["commit_ns"] / 1000,
                                                1)
    gaps = op_gaps(cap, o)
    if gaps is not None:
        row["gaps"] = gaps
    return row


def _parts(o, end):
    """What of op o's span [0, end] (ns from its enqueue) something
    measured: (name, start, end) of its queue wait, call stages, replies
    and own commit, clipped to the span."""
    e = o.enq_ns
    parts = []
    if o.deq:
        parts.append(("the dequeue", 0, o.deq["ts"] - e))
    parts += [(st, a - e, b - e) for st, a, b in o.stages]
    parts += [("osd.%d's reply" % p, ts - w - e, ts - e)
              for p, w, ts in o.replies + o.reads]
    if o.local:
        parts.append(("its own commit", o.local["ts"] - o.local.get(
            "commit_ns", 0) - e, o.local["ts"] - e))
    return sorted(((n, max(0, a), min(end, b)) for n, a, b in parts
                   if b > 0 and a < end and b > a),
                  key=lambda x: (x[1], x[2]))


def _gap_words(what, us, after, before):
    if what == "commit":
        return ("commit wait: %s after %s returned, until the write "
                "completed (its commit: not probed)" % (ms(us), after))
    if what == "probes":
        return "between probes: %s (the probes' own cost)" % ms(us)
    if what == "detached":
        return ("unaccounted: %s between %s and %s (the capture's probes "
                "were being attached or detached then)" % (ms(us), after,
                                                           before))
    return "unaccounted: %s between %s and %s" % (ms(us), after, before)


def op_gaps(cap, o):
    """The stretches of op o's span (enqueue to completion, or to its
    reply as a replica op) that none of its measured parts covers, each
    named: the write's commit wait after dequeue_op returned, the probes'
    own cost between stages that meet, time the probes were coming off,
    else unaccounted -> [{"start_us", "end_us", "us", "what", "after",
    "before", "words"}], or None when the op has no end in the capture.
    Its measured parts and its gaps together are its whole span."""
    if o.done:
        end, last = o.done["ts"] - o.enq_ns, "done"
    elif o.repop:
        end, last = o.repop["ts"] - o.enq_ns, "its reply"
    else:
        return None
    parts = _parts(o, end)
    small = max(PROBE_GAP_NS, 4 * getattr(cap, "call_bias_ns", 0))
    span = cap.traced_span() if hasattr(cap, "traced_span") else None
    worker_end = max((b for n, _, b in parts if n == "dequeue_op"),
                     default=None)
    gaps, at, after = [], 0, "the enqueue"
    for n, a, b in parts + [(last, end, end)]:
        if a > at:
            what = "unaccounted"
            if a - at <= small:
                what = "probes"
            elif n == "done" and worker_end is not None and \
                    at >= worker_end and o.op_class(cap.rules) == "write":
                what = "commit"
            elif span and (o.enq_ns + at < span[0] or
                           o.enq_ns + a > span[1]):
                what = "detached"
            us = (a - at) / 1000
            gaps.append({"start_us": round(at / 1000, 1),
                         "end_us": round(a / 1000, 1),
                         "us": round(us, 1), "what": what, "after": after,
                         "before": n,
                         "words": _gap_words(what, us, after, n)})
        if b >= at:
            at, after = b, n
    return gaps

