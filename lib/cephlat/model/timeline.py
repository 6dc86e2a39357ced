"""A window of a capture as a timeline: per-thread lanes (running,
asleep, waiting for a CPU), ops split into stages, and wake-up arrows -
the input of render/html.py and render/perfetto.py."""

SCHED = ("switch_out", "waking", "switch_in")


def _lane(cap, tid):
    return {"tid": tid, "name": cap.comm(tid), "role": cap.role_name(tid),
            "cpu": []}


def _lanes(cap, t0, t1, lanes):
    """Fill the lanes' CPU segments from the scheduler events -> the
    wake-ups whose wakee is a lane. A sleep the switch-out called a
    scheduler hold (an mClock worker's timed wait for the time the
    scheduler gave; captures from before the kind was recorded have
    none) is "held", one it or the wake-up called a wait for a lock
    "lock" (captures from before that kind have none), every other sleep
    "sleep"."""
    labels = cap.rules.labels["state"]
    kinds = cap.rules.labels.get("sleep")
    shown = {s: ("sleep" if s == "dead" else s) for s in labels}
    wakes, pend = [], {}
    kind_of = {}            # tid -> its current sleep's kind shown

    for name, ts, d, closed in _replay(cap, t0, t1):
        if name == "waking" and kinds and "sleep" in d and \
                kinds[d["sleep"]] == "lock":
            # the wake-up found the sleep a lock wait (captures from
            # before it said have no "sleep" in their wakings)
            kind_of[d["tid"]] = "lock"
        if closed is not None and closed[0] in lanes:
            tid, st, a, b = closed
            state = shown[labels[st]]
            if state == "sleep" and kind_of.get(tid):
                state = kind_of[tid]
            lanes[tid]["cpu"].append([a, b, state])
        if name == "switch_out":
            kind = kinds[d["sleep"]] if kinds and "sleep" in d else None
            kind_of[d["tid"]] = kind if kind in ("held", "lock") else None
        elif name is not None:
            kind_of.pop(d["tid"], None)
        if name == "waking":
            if d["waker_tid"] and ts >= t0:
                pend[d["tid"]] = {"from_tid": d["waker_tid"],
                                  "to_tid": d["tid"], "ts_ns": ts,
                                  "oncpu_ns": None}
        elif name == "switch_in":
            w = pend.pop(d["tid"], None)
            if w is not None:
                w["oncpu_ns"] = ts
                if d["tid"] in lanes:
                    wakes.append(w)
    return wakes


def _replay(cap, t0, t1):
    """ThreadStates.replay of the capture's scheduler events over [t0,
    t1]: the states at t0 from the events before it (replayed in bulk,
    from the window pass's last snapshot before t0: Capture.sched_at),
    then those of the window one by one."""
    rp = cap.sched_at(t0 - 1)
    yield from rp.t.replay(cap.iter_events(SCHED, t0, t1), t0, t1)


def _ops(cap, t0, t1, ops, max_ops):
    out = []
    for o in ops:
        if len(out) >= max_ops:
            break
        end = o.done["ts"] if o.done else (o.stages[-1][2] if o.stages
                                           else o.deq["ts"])
        if end < t0 or o.enq_ns > t1:
            continue
        stages = messenger_stages(o)
        if o.deq:
            stages.append(["queue_wait", o.enq_ns, o.deq["ts"]])
        stages += [[n, s, e] for n, s, e in o.stages]
        out.append({
            "op": "0x%x" % o.op, "tid": o.tid, "enqueue_ns": o.enq_ns,
            "enqueue_tid": o.enq_tid, "class": o.op_class(cap.rules),
            "queue_class": cap.rules.queue_class(o.deq) if o.deq else None,
            "held_ns": o.deq.get("held_ns") if o.deq else None,
            "messenger": [n for n, _, _ in stages[:len(o.msg or ())]],
            "wake": (cap.rules.label("wake", o.deq["wake"])
                     if o.deq and o.deq["wake"] else None),
            "stages": stages})
    return out


def messenger_stages(o):
    """Op o's messenger stages as [name, start, end], back to back up to
    its enqueue (the enqueue event's fields follow each other in time:
    probes/osdstage.h struct ev_op_enqueue); [] when its message's stamps
    were not read."""
    if not o.msg:
        return []
    out, end = [], o.enq_ns
    for name, ns in reversed(list(o.msg.items())):
        out.append([name, end - ns, end])
        end -= ns
    return out[::-1]


def timeline(cap, t0, t1, ops, max_ops=4000):
    """The window [t0, t1] of capture `cap` (capture/reader.py) with
    `ops` (its OpRecs) as lanes, ops and wake-up arrows."""
    worker = cap.roles.worker
    tids = {t for t, r in cap.role_of.items() if r == worker}
    for o in ops[:max_ops]:
        tids.update(t for t in (o.tid, o.enq_tid) if t)
    lanes = {t: _lane(cap, t) for t in sorted(tids)}
    wakes = _lanes(cap, t0, t1, lanes)
    tl_ops = _ops(cap, t0, t1, ops, max_ops)
    for w in wakes:                 # wakers that are not lanes yet
        if w["from_tid"] not in lanes:
            lanes[w["from_tid"]] = _lane(cap, w["from_tid"])
    for lane in lanes.values():
        lane["cpu"].sort()
    order = sorted(lanes.values(), key=lambda ln: (
        ln["role"] != cap.roles.names[worker], ln["tid"]))
    return {"window": [t0, t1], "clock_offset_ns": cap.clock_offset_ns,
            "lanes": order, "ops": tl_ops, "wakeups": wakes}


# --------------------------------------------------------------------------
# several OSDs of one capture

def _start_ns(o):
    """When op `o`'s worker started on it: its first executed stage (the
    dequeue_op call), else its dequeue."""
    starts = [s for n, s, _ in o.stages if n not in ("op_total",)]
    if starts:
        return min(starts)
    return o.deq["ts"] if o.deq else None


def _reply_tids(cap, t0, t1):
    """{(op address, ts): tid} of the replica_reply events in [t0, t1]:
    the primary's thread that handled each replica's commit reply."""
    out = {}
    for name, ts, d in cap.iter_events(("replica_reply",), t0, t1):
        out[(d["op"], ts)] = d.get("tid")
    return out


def _flows(caps, t0, t1, ops_per_cap, deltas):
    """Arrows between OSDs for each replicated write whose ops the window
    holds: the primary's client op (when it sent its sub-ops) to each
    replica's replica op (when its worker started on it): kind "repop";
    the replica's commit reply (when it sent it) to the primary's thread
    that handled the reply: kind "reply". Each end's time is its own
    OSD's clock; deltas[i] moves OSD i's to the first's (and [t0, t1]
    is the window on the first's)."""
    slot_of = {c.name: i for i, c in enumerate(caps) if c.name}
    replicas = {}                   # (slot, reqid) -> [OpRec]
    for j, ops in enumerate(ops_per_cap):
        for o in ops:
            if o.req and o.repop or (o.req and not o.done and not o.replies
                                     and o.deq):
                replicas.setdefault((j, o.req), []).append(o)
    flows = []
    for i, ops in enumerate(ops_per_cap):
        tids = None
        for o in ops:
            if not (o.req and o.replies and o.tid):
                continue
            sent = min(ts - wait for _, wait, ts in o.replies)
            if not t0 <= sent + deltas[i] <= t1:
                continue
            for peer, wait, ts in o.replies:
                j = slot_of.get("osd.%d" % peer)
                if j is None or j == i:
                    continue
                # on the first's clock (the replica's enqueue may seem a
                # little before the send where two clocks disagree)
                cands = [r for r in replicas.get((j, o.req), ())
                         if r.enq_ns + deltas[j] >= sent + deltas[i] - 1000
                         - abs(deltas[j] - deltas[i]) and r.tid]
                if not cands:
                    continue
                r = min(cands, key=lambda r: r.enq_ns)
                start = _start_ns(r)
                if start is not None and start + deltas[j] <= t1:
                    flows.append({
                        "kind": "repop", "reqid": o.req, "pg": o.pg,
                        "from": {"osd": i, "tid": o.tid, "ts_ns": sent},
                        "to": {"osd": j, "tid": r.tid, "ts_ns": start,
                               "enqueue_ns": r.enq_ns}})
                if r.repop and t0 <= r.repop["ts"] + deltas[j] and \
                        ts + deltas[i] <= t1:
                    if tids is None:
                        tids = _reply_tids(caps[i], t0, t1)
                    to_tid = tids.get((o.op, ts))
                    if to_tid and r.repop.get("tid"):
                        flows.append({
                            "kind": "reply", "reqid": o.req, "pg": o.pg,
                            "from": {"osd": j, "tid": r.repop["tid"],
                                     "ts_ns": r.repop["ts"]},
                            "to": {"osd": i, "tid": to_tid, "ts_ns": ts}})
    return flows


def host_timeline(caps, t0, t1, ops_per_cap, max_ops=4000, deltas=None,
                  client=None):
    """The window [t0, t1] of several OSDs (a Capture per slot,
    `ops_per_cap` their OpRecs): a timeline per OSD (as timeline() makes
    it, with its "window" on its own clock) and the flows between them
    (_flows). The OSDs of one capture share one clock; those of several
    hosts' captures each have their own: deltas[i] (ns) moves OSD i's
    timestamps to the first's, on which [t0, t1] is (default: one
    clock); `client`: a client's ops (client_band), drawn as a band of
    their own with arrows to and from their primaries."""
    deltas = deltas or [0] * len(caps)
    flows = _flows(caps, t0, t1, ops_per_cap, deltas)
    band = client_band(client, t0, t1, caps, ops_per_cap, deltas) \
        if client else None
    extra = [set() for _ in caps]
    for f in flows + (band["flows"] if band else []):
        for end in (f["from"], f["to"]):
            if "osd" in end:
                extra[end["osd"]].add(end["tid"])
    osds = []
    for cap, ops, more, d in zip(caps, ops_per_cap, extra, deltas):
        a, b = t0 - d, t1 - d
        tl = timeline(cap, a, b, ops, max_ops)
        have = {ln["tid"] for ln in tl["lanes"]}
        add = {t: _lane(cap, t) for t in sorted(more - have)}
        if add:
            _lanes(cap, a, b, add)
            for lane in add.values():
                lane["cpu"].sort()
            tl["lanes"] += list(add.values())
        osds.append({"name": cap.name or "pid %d" % cap.pid, "pid": cap.pid,
                     "timeline": tl, "window": [a, b]})
    out = {"window": [t0, t1], "clock_offset_ns": caps[0].clock_offset_ns,
           "osds": osds, "flows": flows}
    if band:
        out["client"] = band
    return out


def client_band(client, t0, t1, caps, ops_per_cap, deltas):
    """The client's ops of the window [t0, t1] (on the first OSD's
    clock) as a band of their own, and the arrows between it and the
    primaries: client: {"name", "pid", "ops": [{"reqid", "osd", "send",
    "reply", "done", "call": {"op", "length", "submit", "done"} or
    None}]}, its times on the first OSD's clock. -> {"name", "pid", "ops"
    (those in the window, each with its "track" number), "flows": [kind
    "request": the send -> the primary's op's first slice; "response":
    the primary's completion (its thread) -> the reply's arrival]}; an
    OSD end's time is its own OSD's clock (deltas as host_timeline's)."""
    prim = {}
    for i, ops in enumerate(ops_per_cap):
        for o in ops:
            if o.req and o.done:
                prim[o.req] = (i, o)
    ops, flows = [], []
    for c in sorted(client["ops"], key=lambda c: c["send"]):
        start = c["call"]["submit"] if c["call"] else c["send"]
        end = c["call"]["done"] if c["call"] else c["done"] or c["reply"]
        if end is None or end < t0 or start > t1:
            continue
        k = len(ops)
        ops.append(dict(c, track=k))
        if c["reqid"] not in prim:
            continue
        i, o = prim[c["reqid"]]
        first = _start_ns(o)
        if first is not None and o.tid:
            flows.append({"kind": "request", "reqid": c["reqid"],
                          "from": {"client": k, "ts_ns": c["send"]},
                          "to": {"osd": i, "tid": o.tid, "ts_ns": first,
                                 "enqueue_ns": o.enq_ns}})
        if c["reply"] is not None and o.done.get("tid"):
            flows.append({"kind": "response", "reqid": c["reqid"],
                          "from": {"osd": i, "tid": o.done["tid"],
                                   "ts_ns": o.done["ts"]},
                          "to": {"client": k, "ts_ns": c["reply"]}})
    return {"name": client["name"], "pid": client["pid"], "ops": ops,
            "flows": flows}
