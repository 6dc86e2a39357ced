"""A window of a capture as a timeline: per-thread lanes (running,
asleep, waiting for a CPU), ops split into stages, and wake-up arrows -
the input of render/html.py and render/perfetto.py."""
from .events import ThreadStates


def _lane(cap, tid):
    return {"tid": tid, "name": cap.comm(tid), "role": cap.role_name(tid),
            "cpu": []}


def _lanes(cap, t0, t1, lanes):
    """Fill the lanes' CPU segments from the scheduler events -> the
    wake-ups whose wakee is a lane."""
    labels = cap.rules.labels["state"]
    shown = {s: ("sleep" if s == "dead" else s) for s in labels}
    states = ThreadStates(labels)
    wakes, pend = [], {}

    for name, ts, d, closed in states.replay(cap.events, t0, t1):
        if closed is not None and closed[0] in lanes:
            tid, st, a, b = closed
            lanes[tid]["cpu"].append([a, b, shown[labels[st]]])
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


def _ops(cap, t0, t1, ops, max_ops):
    out = []
    for o in ops:
        if len(out) >= max_ops:
            break
        end = o.done["ts"] if o.done else (o.stages[-1][2] if o.stages
                                           else o.deq["ts"])
        if end < t0 or o.enq_ns > t1:
            continue
        stages = []
        if o.deq:
            stages.append(["queue_wait", o.enq_ns, o.deq["ts"]])
        stages += [[n, s, e] for n, s, e in o.stages]
        out.append({
            "op": "0x%x" % o.op, "tid": o.tid, "enqueue_ns": o.enq_ns,
            "enqueue_tid": o.enq_tid, "class": o.op_class(cap.rules),
            "wake": (cap.rules.label("wake", o.deq["wake"])
                     if o.deq and o.deq["wake"] else None),
            "stages": stages})
    return out


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
