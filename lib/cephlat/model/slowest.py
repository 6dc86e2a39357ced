"""The slowest ops of a capture window, each with every stage, the worker
that dequeued it and how that worker was woken (osdstage -r --slowest)."""
from . import timeline


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
    return row

