"""An op's story (the --op view: its ops on every OSD of the captures,
with the client's call where a client's trace has it) as one OTLP trace,
in OTLP/HTTP's JSON encoding (an ExportTraceServiceRequest of
opentelemetry-proto: resourceSpans, one resource per daemon).

The trace id is derived from the request id alone (trace_id), so the
spans every host sends for one client op join into one trace in the
backend with no coordination between hosts; span ids are derived from
the trace id and the span's place in the story, so sending a story twice
sends the same spans.

Spans: the client's call (with its segments end to end as children), on
each OSD the op (primary, replica, a replica's reply), its queue wait
(who woke the worker and the attribution's parts as attributes), its
stages, and on the primary each replica's wait, the parent of that
replica's op.

One OSD's part alone (osd_request: what the exporter of its host sends
for an op its BPF programs chose, with nothing of the other hosts) has
the same ids: trace_id(reqid); the op's span is the story's first row of
that OSD, path (osd.N, 0); its queue wait, replica waits and own commit
under it as in the story; a replica op's parent is its primary's wait
for it, path (osd.P, 0, replica_wait, osd.R), known on the replica from
its message's sender. So every host derives its spans' ids and parents
alone and they join into the one trace in the backend.

The joining with the client: a client op's primary op span has as its
parent the client's span, path ("client",), whose id is derived from the
request id alone (client_span_id): the root of the story where the
client's trace is read with the captures, and the root of the client's
part that `rbdrecord --otlp` sends on its own (client_request: the
librbd call, the op's time in the client's Objecter under it). Where no
client's part is sent, the primary's op names a parent the backend never
receives: it shows the op as the trace's top span, with a note of the
missing parent.

What became of the ops a live run chose as traces (the reports' "otlp"
object) in words: summary_words."""
import hashlib

# OTLP span kinds
INTERNAL, SERVER, CLIENT = 1, 2, 3
SCOPE = "osdstage"


def trace_id(reqid):
    """The OTLP trace id (32 hex digits) of request id `reqid`
    (client.4123.0:77): the same on every host."""
    return hashlib.sha256(("osdstage reqid " + reqid).encode()).digest()[
        :16].hex()


def _span_id(trace, *path):
    return hashlib.sha256(("%s/%s" % (trace, "/".join(path))).encode()
                          ).digest()[:8].hex()


def _value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def attributes(d):
    """{key: value} -> OTLP attributes (None values left out)."""
    return [{"key": k, "value": _value(v)} for k, v in d.items()
            if v is not None]


class _Spans:
    """The spans of one story: their ids, times on the wall clock (ns)
    and parents."""

    def __init__(self, reqid, t0_ns):
        self.trace = trace_id(reqid)
        self.t0 = t0_ns
        self.by_resource = {}

    def add(self, resource, path, name, start_us, end_us, parent=None,
            kind=INTERNAL, attrs=None, events=(), links=()):
        sid = _span_id(self.trace, *path)
        span = {"traceId": self.trace, "spanId": sid, "name": name,
                "kind": kind,
                "startTimeUnixNano": str(self.t0 + int(round(start_us *
                                                             1000))),
                "endTimeUnixNano": str(self.t0 + int(round(
                    max(end_us, start_us) * 1000))),
                "attributes": attributes(attrs or {}), "status": {}}
        if parent:
            span["parentSpanId"] = parent
        if events:
            span["events"] = list(events)
        if links:
            span["links"] = list(links)
        self.by_resource.setdefault(resource, []).append(span)
        return sid


def _t0_ns(story):
    """The story's time 0 on the wall clock (ns): an OSD op's enqueue
    stamp less its place in the story."""
    for rows in story["osds"].values():
        for r in rows:
            if r.get("enqueue", {}).get("ts") is not None and \
                    r.get("enqueued_at_us") is not None:
                return int(round(r["enqueue"]["ts"] * 1e9)) - \
                    int(round(r["enqueued_at_us"] * 1000))
    raise ValueError("the story has no OSD op with its enqueue")


def _op_end_us(r):
    ends = [s["end_us"] for s in r.get("stages") or ()]
    for k in ("total_us", "repop_us"):
        if r.get(k) is not None:
            ends.append(r[k])
    if r.get("queue_wait_us") is not None:
        ends.append(r["queue_wait_us"])
    return max(ends, default=0.0)


def _call_span(sp, resource, reqid, call, obj, primary, acked, start,
               end, more=None, links=()):
    """The client's span (its call's, else its op's): the trace's root,
    path ("client",), the primary op's parent. -> its id"""
    if call:
        name = "rbd " + call["op"]
        attrs = {"rbd.offset": call["offset"], "rbd.length": call["length"]}
    else:
        name, attrs = "osd op", {}
    attrs.update({"ceph.reqid": reqid, "ceph.object": obj,
                  "ceph.primary": primary})
    if acked:
        attrs["rbd.acked_by_cache"] = True
    attrs.update(more or {})
    return sp.add(resource, ("client",), name, start, end, kind=CLIENT,
                  attrs=attrs, links=links)


def _client(sp, story, resource):
    """The client's call and its segments -> the root span's id."""
    c = story.get("client")
    if not c:
        return None
    call = c.get("call")
    if call:
        start = call["called_at_us"]
        end = call["released_at_us"] if call.get("released_at_us") \
            is not None else call["completed_at_us"]
    else:
        start, end = c["sent_at_us"], c.get("done_at_us") or c["sent_at_us"]
    root = _call_span(sp, resource, story["reqid"], call, c["object"],
                      c.get("primary") or c["osd"], c.get("acked"), start,
                      end)
    segs = [s for s in c.get("segments") or () if s.get("us") is not None]
    us = {s["segment"]: s["us"] for s in segs}
    # an acknowledged write: the application's part one after the other
    # from the call; behind it, the way to the OSDs from when the cache
    # let the write go (after librbd and held_by_cache), "behind" from
    # the acknowledgement, "durable" from the call
    out_at = start + us.get("librbd", 0.0) + us.get("held_by_cache", 0.0)
    at = {"acked": start, "behind": out_at, None: start}
    for s in segs:
        g, name = s.get("group"), s["segment"]
        if name == "durable":
            a = start
        elif name == "behind":
            a = out_at + us.get("ack", 0.0)
        else:
            a = at[g]
            at[g] = a + s["us"]
        sp.add(resource, ("client", name), name, a, a + s["us"],
               parent=root, attrs={"what": s.get("what"),
                                   "osdstage.group": g})
    return root


def _osd_op(sp, name, i, r, parent):
    """One OSD's op row: its span, its queue wait, stages and (a
    primary's) replica waits. -> ({peer: its replica wait's span id},
    the op's span id)"""
    enq = r["enqueued_at_us"]
    # from its first stage (the messenger's, before the enqueue), or the
    # message's arrival where only its time before the enqueue is known
    first = min([s["start_us"] for s in r.get("stages") or ()] +
                [-(r.get("msg_us") or 0.0), 0.0])
    path = (name, str(i))
    attrs = {"ceph.reqid": r.get("reqid"), "ceph.role": r.get("role"),
             "ceph.pg": r.get("pg"), "ceph.object": r.get("object"),
             "ceph.op_class": r.get("class"),
             "ceph.queue_class": r.get("queue_class"),
             "ceph.kind": r.get("kind")}
    attrs.update(r.get("attributes") or {})
    op = sp.add(name, path, "osd op (%s)" % (r.get("role") or "op"),
                enq + first, enq + _op_end_us(r), parent=parent, kind=SERVER,
                attrs=attrs)
    if r.get("queue_wait_us") is not None:
        w = r.get("woken") or {}
        qa = {"ceph.woken_by": w.get("by"), "ceph.waker": w.get("waker"),
              "ceph.waker_tid": w.get("waker_tid")}
        qa.update(("ceph.wait." + k[:-3] + "_us", v) for k, v in w.items()
                  if k.endswith("_us"))
        sp.add(name, path + ("queue_wait",), "queue_wait", enq,
               enq + r["queue_wait_us"], parent=op, attrs=qa)
    # a stage's span id by its name and how many of that name came
    # before it: the same in every sender's trace of the op even where
    # one of them knows stages the other does not
    seen = {}
    for s in r.get("stages") or ():
        k = seen[s["stage"]] = seen.get(s["stage"], -1) + 1
        sp.add(name, path + ("stage", s["stage"], str(k)), s["stage"],
               enq + s["start_us"], enq + s["end_us"], parent=op)
    waits = {}
    for rep in r.get("replies") or ():
        waits[rep["peer"]] = sp.add(
            name, path + ("replica_wait", rep["peer"]),
            "replica_wait " + rep["peer"], enq + rep["at_us"] -
            rep["wait_us"], enq + rep["at_us"], parent=op,
            attrs={"ceph.replica": rep["peer"]})
    if r.get("local_commit_us") is not None:
        sp.add(name, path + ("local_commit",), "local_commit",
               enq + r["local_commit_us"] -
               (r.get("local_commit_wait_us") or 0.0),
               enq + r["local_commit_us"], parent=op)
    return waits, op


def client_span_id(reqid):
    """The span id of the client's span (its call's, else its op's) in
    request `reqid`'s trace: the parent of the primary's op."""
    return _span_id(trace_id(reqid), "client")


def op_span_id(reqid, daemon):
    """The span id of OSD `daemon`'s op of request `reqid`: its first
    row's in the story."""
    return _span_id(trace_id(reqid), daemon, "0")


def replica_wait_span_id(reqid, primary, replica):
    """The span id of primary `primary`'s wait for replica `replica`
    (osd.N names) in request `reqid`'s trace: the replica op's parent."""
    return _span_id(trace_id(reqid), primary, "0", "replica_wait", replica)


def _client_parent(reqid, role):
    """A primary op's parent: the client's span of a client's request."""
    return client_span_id(reqid) if role == "primary" and \
        str(reqid).startswith("client.") else None


def _resource(daemon, more):
    ra = {"service.name": "librbd" if daemon == "client" else "ceph-osd",
          "ceph_daemon": daemon if daemon != "client" else None}
    ra.update(more or {})
    return {"attributes": attributes(ra)}


def osd_request(row, daemon, t0_ns, primary=None, spans=(), resource=None):
    """One OSD's part of an op's trace, made on its host alone (the
    exporter's, for an op its BPF programs chose): `row` as a story's row
    of OSD `daemon` ("reqid", "role", "enqueued_at_us", "queue_wait_us",
    "replies", ...; "msg_us": the message's time before the enqueue;
    "attributes": more of the op span's) whose time 0 is `t0_ns` on the
    wall clock; `primary`: a replica op's primary (osd.N: its parent is
    that primary's wait for it; a primary's op has the client's span,
    client_span_id, as its parent); `spans`: more spans under the op, (name,
    start us, end us) each, path (daemon, 0, name); `resource`: more
    resource attributes. -> (the OTLP/HTTP JSON body, its spans)"""
    sp = _Spans(row["reqid"], t0_ns)
    parent = replica_wait_span_id(row["reqid"], primary, daemon) \
        if primary and row.get("role") != "primary" else \
        _client_parent(row["reqid"], row.get("role"))
    _, op = _osd_op(sp, daemon, 0, row, parent)
    for name, start, end in spans:
        sp.add(daemon, (daemon, "0", name), name, start, end, parent=op)
    got = sp.by_resource.get(daemon, [])
    return {"resourceSpans": [{"resource": _resource(daemon, resource),
                               "scopeSpans": [{"scope": {"name": SCOPE},
                                               "spans": got}]}]}, len(got)


def story_request(story, resources=None):
    """An op's story (model/story.py: a Story's record, the JSON object)
    -> the OTLP/HTTP JSON body of its trace. resources: {daemon name
    ("osd.1", "client"): more resource attributes (host, ceph
    release)}."""
    sp = _Spans(story["reqid"], _t0_ns(story))
    root = _client(sp, story, "client")
    rows = [(name, i, r) for name, rs in story["osds"].items()
            for i, r in enumerate(rs)]
    primary = [x for x in rows if x[2].get("role") == "primary"]
    waits, parent = {}, root
    for name, i, r in primary:
        # without the client's trace: the client's span its parent still,
        # as the exporter's (rbdrecord --otlp may send it)
        w, op = _osd_op(sp, name, i, r, root or _client_parent(
            story["reqid"], "primary"))
        waits.update(w)
        parent = op
    for name, i, r in rows:
        if r.get("role") != "primary":
            _osd_op(sp, name, i, r, waits.get(name, parent))
    out = []
    for res, spans in sp.by_resource.items():
        out.append({"resource": _resource(res, (resources or {}).get(res)),
                    "scopeSpans": [{"scope": {"name": SCOPE},
                                    "spans": spans}]})
    return {"resourceSpans": out}


def client_request(op, call=None, links=(), resource=None):
    """The client's part of op `op`'s trace, made from the client's
    trace alone (rbdrecord --otlp): its span (the librbd call, else the
    op; path ("client",): client_span_id, the primary op's parent, as in
    the story) and under it the op's time in the client's Objecter, from
    its (last) send to its reply, its completion an event.

    op: {"reqid", "object", "osd" (osd.N: where it went, its primary),
    "pg", "kind" (its first sub-op), "offset", "length" (its extent in
    the object), "attempts", "send_ns", "reply_ns", "done_ns" (None: not
    recorded)}, times on the wall clock; call: {"op", "offset",
    "length", "submit_ns", "done_ns", "released_ns" (None: none),
    "acked" (librbd's cache acknowledged it before the OSDs had it),
    "inferred" (that without the cache's records), "osd_ops" (how many
    ops it made)} or None (an op of no call: the span is the op's, to
    its completion); `links`: the request ids of the call's other ops
    sent as traces (a link to each one's client span); resource: more
    resource attributes. -> (the OTLP/HTTP JSON body, its spans)"""
    rid = op["reqid"]
    t0 = call["submit_ns"] if call else op["send_ns"]
    sp = _Spans(rid, t0)

    def us(ns):
        return (ns - t0) / 1000.0
    reply = op["reply_ns"] if op.get("reply_ns") is not None \
        else op.get("done_ns") or op["send_ns"]
    if call:
        end = call["released_ns"] if call.get("released_ns") is not None \
            else call["done_ns"]
        more = {"rbd.osd_ops": call.get("osd_ops"),
                "rbd.acked_inferred": True if call.get("inferred") else None}
    else:
        end = op.get("done_ns") or reply
        more = {}
    tl = [{"traceId": trace_id(r), "spanId": client_span_id(r),
           "attributes": attributes({"ceph.reqid": r})} for r in links]
    root = _call_span(sp, "client", rid, call, op["object"], op["osd"],
                      bool(call and call.get("acked")), 0.0, us(end),
                      more=more, links=tl)
    events = []
    if op.get("done_ns") is not None:
        events.append({"timeUnixNano": str(op["done_ns"]),
                       "name": "completion", "attributes": []})
    sp.add("client", ("client", "objecter"), "objecter op",
           us(op["send_ns"]), us(reply), parent=root,
           attrs={"ceph.reqid": rid, "ceph.object": op["object"],
                  "ceph.osd": op["osd"], "ceph.pg": op.get("pg"),
                  "ceph.op": op.get("kind"),
                  "ceph.object_offset": op.get("offset"),
                  "ceph.object_length": op.get("length"),
                  "ceph.attempts": op.get("attempts"),
                  "ceph.replied": op.get("reply_ns") is not None},
           events=events)
    got = sp.by_resource["client"]
    return {"resourceSpans": [{"resource": _resource("client", resource),
                               "scopeSpans": [{"scope": {"name": SCOPE},
                                               "spans": got}]}]}, len(got)


# why a chosen op was not sent (an "otlp" object's "dropped",
# livetraces.py Traces.summary), in words
DROP_WORDS = (("rate", "over --otlp-rate"),
              ("ring", "for a full traces ring"),
              ("queue_full", "for a full send queue, or left in it at "
                             "the end"),
              ("collector", "not taken by the collector"))


def summary_words(rec, url=None):
    """An "otlp" object in words: '40 ops chosen, 38 sent as traces (114
    spans) to URL; 2 dropped (2 not taken by the collector: connection
    refused)'."""
    dropped = rec["dropped"]
    lost = sum(dropped.values())
    words = "%d op%s chosen, %d sent as traces (%d spans)%s" % (
        rec["chosen"], "" if rec["chosen"] == 1 else "s", rec["sent"],
        rec["spans"], " to %s" % url if url else "")
    if lost:
        words += "; %d dropped (%s)" % (lost, ", ".join(
            "%d %s" % (dropped[k], w) + (
                ": %s" % rec["error"] if k == "collector" and
                rec.get("error") else "")
            for k, w in DROP_WORDS if dropped.get(k)))
    left = rec["chosen"] - rec["sent"] - lost
    if left > 0:
        words += "; %d on the way" % left
    return words
