"""One op end to end (osdstage -r ... --op REQID with a client's trace):
the client's send, reply and completion (rbdrecord's OSD-op events)
joined by request id with the op's rows on its primary and replicas, and
the client's latency split into segments that add up to it.

All times are wall-clock ns: each capture's and trace's own monotonic
stamps moved by its recorded offset, so that captures of different
hosts line up. A network segment computed across two clocks that comes
out negative means the clocks disagree by more than the segment: it is
reported as unknown, with the disagreement, never as a negative time.
"""

# the segments, in order: (key, what it holds)
SEGMENTS = [
    ("to_osd", "the client's messenger and the network, to the message's "
               "first stamp on the primary"),
    ("messenger", "the primary's messenger: first stamp to its enqueue"),
    ("osd", "the primary: queue, execute, replicas, to its reply"),
    ("to_client", "the reply: the network and the client's messenger"),
    ("completion", "the client library's completion of the op"),
]


def client_segments(client, enq_ns, first_stamp_ns, done_ns):
    """client: {"send", "reply", "done"} wall ns (done may be None);
    enq_ns / first_stamp_ns / done_ns: the primary's enqueue, its
    message's first stamp (None without stamps) and its completion, wall
    ns. -> {"segments": [{"segment", "us" or None, "what"}],
    "total_us", "clock_disagreement_us" (or None)}"""
    marks = [("to_osd", client["send"]),
             ("messenger", first_stamp_ns if first_stamp_ns is not None
              else enq_ns),
             ("osd", enq_ns), ("to_client", done_ns),
             ("completion", client["reply"]), (None, client["done"])]
    if first_stamp_ns is None:
        marks = [m for m in marks if m[0] != "messenger"]
    what = dict(SEGMENTS)
    if first_stamp_ns is None:
        what["to_osd"] = ("the client's messenger, the network and the "
                          "primary's messenger, to its enqueue (the capture "
                          "has no message stamps)")
    segs, worst = [], None
    for (key, a), (_, b) in zip(marks, marks[1:]):
        if a is None or b is None:
            continue
        us = (b - a) / 1000.0
        if us < 0 and key in ("to_osd", "to_client"):
            worst = min(worst or 0.0, us)
            us = None
        segs.append({"segment": key, "us": None if us is None else
                     round(us, 1), "what": what[key]})
    end = client["done"] if client["done"] is not None else client["reply"]
    return {"segments": segs,
            "total_us": round((end - client["send"]) / 1000.0, 1),
            "clock_disagreement_us": None if worst is None else
            round(-worst, 1)}


def replica_segments(story):
    """Per replica of the story's primary row: the sub-op's way out
    (sub-ops sent -> the replica's enqueue: both messengers and the
    network), the replica (enqueue -> its commit reply sent), the way
    back (-> the primary handling the reply: the network, the primary's
    messenger and the reply's own queue) and which replica was last.
    Story-relative us, as the rows have them. -> [dict] ([] when the
    story has no primary row with replies)."""
    prim = next((r for rows in story["osds"].values() for r in rows
                 if r["role"] == "primary" and r.get("replies")), None)
    if prim is None:
        return []
    base = prim["enqueued_at_us"]
    last = max(prim["replies"], key=lambda r: r["at_us"])["peer"]
    out = []
    for rep in prim["replies"]:
        sent = base + rep["at_us"] - rep["wait_us"]
        seen = base + rep["at_us"]
        row = next((r for r in story["osds"].get(rep["peer"], [])
                    if r["role"] == "replica"), None)
        seg = {"replica": rep["peer"], "wait_us": rep["wait_us"],
               "last": rep["peer"] == last, "out_us": None,
               "replica_us": None, "back_us": None}
        if row is not None and row.get("repop_us") is not None:
            enq = row["enqueued_at_us"]
            seg["out_us"] = round(enq - sent, 1)
            seg["replica_us"] = row["repop_us"]
            seg["back_us"] = round(seen - enq - row["repop_us"], 1)
        out.append(seg)
    return out
