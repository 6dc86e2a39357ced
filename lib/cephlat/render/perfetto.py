"""A timeline as Chrome Trace Event Format JSON, for ui.perfetto.dev.

Layout of the trace (one process, `pid`):
  - thread `tid`: the op stages the thread ran, as complete ("X") events
    that nest (dequeue_op > do_op > get_object_context ...), cat "op";
  - thread `tid + CPU_TID_BASE`, named "<name> cpu": the thread's scheduler
    states as "X" events running / runnable / sleeping / held (asleep in
    an mClock hold) / waiting for a lock, cat "sched";
  - queue_wait and op_total span several ops on one worker (ops queue up
    while it runs others), and so do the messenger stages before the
    enqueue (throttle_wait, recv, dispatch): async slices ("b"/"e", id
    per op, args: the op's class, scheduler class and held time), which
    Perfetto lays out on rows of their own;
  - wake-ups are flows ("s" on the waker's cpu track at the wake-up, "f"
    with "bp":"e" on the woken thread's cpu track when it got a CPU);
    timer wake-ups (no waking thread) are instant events.
Several OSDs (render_host): a process per OSD (its pid, named osd.N),
laid out as above, async and flow ids prefixed with the OSD's name; a
replicated write's flows (cat "replica", ids "repop:REQID:osd.N"):
"repop" from the primary's op slice when it sent the sub-ops ("s") to
the replica op's first slice ("f", "bp":"e", at that slice's start),
"repop reply" from the replica's thread ("s" on its cpu track, running)
when it sent its commit reply to the primary's slice that handled it.
Timestamps are microseconds (floats) relative to the window start;
"otherData" records the window in CLOCK_MONOTONIC ns and the offset to
the wall clock. With a client's trace (osdstage -r CAPTURES... TRACE
--op REQID --perfetto), the client is a process of its own (sorted
first): a thread per op of the window, named by its request id, with
slices "librbd <op> <bytes> B" (the call), "to osd.N and back" (sent ->
reply) and "completion", and flows (cat "client", ids "request:REQID",
"response:REQID"): "client request" from the send to the primary op's
first slice, "client response" from the primary's completion (its
thread's cpu track) to the reply's arrival. OSDs of several hosts'
captures each have the window on
their own clock (lined up by the wall clock), so that one microsecond
of the trace is the same moment on every host, as well as the clocks
agree.
"""

# Above Linux's PID_MAX_LIMIT (2^22): never a real thread id.
CPU_TID_BASE = 1 << 22
# the client band's tracks, one per op
CLIENT_TID_BASE = 2 << 22
# Stages that overlap other ops' stages on the same worker.
SPAN_STAGES = ("op_total", "queue_wait")
CPU_NAMES = {"run": "running", "runq": "runnable", "sleep": "sleeping",
             "held": "held (op scheduler)", "lock": "waiting for a lock"}
# Tolerance for float rounding when checking that slices nest: 1 ns.
EPS_US = 1e-3

REQUIRED = ("name", "ph", "ts", "pid", "tid")
KNOWN_PH = ("X", "B", "E", "b", "e", "n", "s", "t", "f", "i", "I", "M", "C")


def lanes(timeline):
    """The timeline's lanes in order, then one {"tid", "name": "tid N",
    "role": None, "cpu": []} lane per thread that ops or wake-ups refer to
    but the lanes leave out (enqueuers that are not workers)."""
    out = list(timeline.get("lanes", []))
    seen = {lane["tid"] for lane in out}
    refs = []
    for op in timeline.get("ops", []):
        refs += [op.get("tid"), op.get("enqueue_tid")]
    for w in timeline.get("wakeups", []):
        refs += [w.get("from_tid"), w.get("to_tid")]
    for tid in refs:
        if tid is not None and tid not in seen:
            seen.add(tid)
            out.append({"tid": tid, "name": "tid %d" % tid, "role": None,
                        "cpu": []})
    return out


def _clip(timeline, start, end):
    """[start, end] clipped to the window, or None if outside it."""
    t0, t1 = timeline["window"]
    s, e = max(start, t0), min(end, t1)
    return (s, e) if e >= s else None


def _nest(slices):
    """Clamp (start, end, event) slices of one track so that each one that
    starts inside another also ends inside it. Returns the events."""
    stack, out = [], []
    for s, e, ev in sorted(slices, key=lambda x: (x[0], -x[1])):
        while stack and stack[-1] <= s:
            stack.pop()
        if stack and e > stack[-1]:
            e = stack[-1]
        stack.append(e)
        out.append((s, e, ev))
    return out


class _Builder:
    """Accumulates events; times in CLOCK_MONOTONIC ns."""

    def __init__(self, timeline, pid, events=None):
        self.t0 = timeline["window"][0]
        self.pid = pid
        self.events = [] if events is None else events
        self.tracks = {}            # tid -> [(start_ns, end_ns, event)]

    def us(self, ns):
        return (ns - self.t0) / 1000.0

    def event(self, ph, name, tid, ts_ns, **kw):
        ev = {"name": name, "ph": ph, "ts": self.us(ts_ns), "pid": self.pid,
              "tid": tid}
        ev.update(kw)
        self.events.append(ev)
        return ev

    def meta(self, kind, tid, **args):
        self.events.append({"name": kind, "ph": "M", "ts": 0, "pid": self.pid,
                            "tid": tid, "args": args})

    def slice(self, tid, start, end, name, cat, args=None):
        ev = {"name": name, "ph": "X", "cat": cat, "pid": self.pid,
              "tid": tid, "args": args or {}}
        self.tracks.setdefault(tid, []).append((start, end, ev))

    def finish_slices(self):
        """Nest each track's slices and emit them with ts/dur."""
        for slices in self.tracks.values():
            for s, e, ev in _nest(slices):
                ev["ts"] = self.us(s)
                ev["dur"] = (e - s) / 1000.0
                self.events.append(ev)


def _metadata(b, timeline, process_name):
    b.meta("process_name", 0, name=process_name)
    for i, lane in enumerate(lanes(timeline)):
        tid = lane["tid"]
        name = lane.get("name") or "tid %d" % tid
        b.meta("thread_name", tid, name=name)
        b.meta("thread_sort_index", tid, sort_index=2 * i)
        b.meta("thread_name", tid + CPU_TID_BASE, name=name + " cpu")
        b.meta("thread_sort_index", tid + CPU_TID_BASE, sort_index=2 * i + 1)


def sleep_stack(timeline, tid, start, state):
    """The stacks of thread tid's sleep that began at `start` (a capture
    with stacks: timeline["stacks"]), or None."""
    if state != "sleep":
        return None
    for s in timeline.get("stacks", ()):
        if s["tid"] == tid and abs(s["start"] - start) <= STACK_SLACK_NS:
            return s
    return None


# a sleep's stacks and its scheduler state begin at the same event; one
# written a little late by the recorder (a CPU's records slightly out of
# order) is still that sleep's
STACK_SLACK_NS = 1000


def _cpu_states(b, timeline):
    for lane in lanes(timeline):
        for start, end, state in lane.get("cpu", []):
            span = _clip(timeline, start, end)
            if span:
                st = sleep_stack(timeline, lane["tid"], start, state)
                b.slice(lane["tid"] + CPU_TID_BASE, span[0], span[1],
                        CPU_NAMES.get(state, state), "sched",
                        {"stack": st["stack"], "woken by": st["waker"],
                         "kind": st["kind"]} if st else None)


def _ops(b, timeline, prefix=""):
    for i, op in enumerate(timeline.get("ops", [])):
        if op.get("tid") is None:           # not dequeued: no worker lane
            continue
        args = {"op": op.get("op"), "class": op.get("class"),
                "wake": op.get("wake")}
        if op.get("queue_class"):
            args["queue_class"] = op["queue_class"]
            args["held_us"] = (op.get("held_ns") or 0) / 1000.0
        spans = SPAN_STAGES + tuple(op.get("messenger", ()))
        for name, start, end in op.get("stages", []):
            span = _clip(timeline, start, end)
            if not span:
                continue
            if name in spans:
                aid = "%s%s#%d" % (prefix, op.get("op"), i)
                b.event("b", name, op["tid"], span[0], cat="op", id=aid,
                        args=args)
                b.event("e", name, op["tid"], span[1], cat="op", id=aid)
            else:
                b.slice(op["tid"], span[0], span[1], name, "op", args)


def _wakeups(b, timeline, prefix=""):
    for i, w in enumerate(timeline.get("wakeups", [])):
        to = w["to_tid"] + CPU_TID_BASE
        oncpu = w.get("oncpu_ns") or w["ts_ns"]
        t0, t1 = timeline["window"]
        if not t0 <= w["ts_ns"] <= oncpu <= t1:
            continue
        if w.get("from_tid") is None:
            b.event("i", "timer wakeup", to, w["ts_ns"], cat="wake", s="t")
            continue
        fid = "%swake%d" % (prefix, i)
        b.event("s", "wakeup", w["from_tid"] + CPU_TID_BASE, w["ts_ns"],
                cat="wake", id=fid)
        b.event("f", "wakeup", to, oncpu, cat="wake", id=fid, bp="e")


def render(timeline, process_name="ceph-osd", pid=None):
    """The trace object for `timeline` (see the module doc); json.dump it."""
    b = _Builder(timeline, 1 if pid is None else pid)
    _metadata(b, timeline, process_name)
    _cpu_states(b, timeline)
    _ops(b, timeline)
    b.finish_slices()
    _wakeups(b, timeline)
    t0, t1 = timeline["window"]
    return {"traceEvents": b.events, "displayTimeUnit": "ns",
            "otherData": {"clock": "CLOCK_MONOTONIC",
                          "window_ns": [t0, t1],
                          "clock_offset_ns": timeline.get("clock_offset_ns",
                                                          0),
                          "ts": "microseconds since window_ns[0]"}}


def _windows(host):
    """Each OSD's window on its own clock (the host's, on one clock)."""
    return [o.get("window") or host["window"] for o in host["osds"]]


def _flow_events(b, host, pids):
    """The flows between OSDs (see the module doc)."""
    wins = _windows(host)

    def inside(end):
        lo, hi = wins[end["osd"]]
        return lo <= end["ts_ns"] <= hi
    seen = {}
    for f in host.get("flows", []):
        a, z = f["from"], f["to"]
        if not (inside(a) and inside(z)):
            continue
        peer = host["osds"][z["osd"] if f["kind"] == "repop" else
                            a["osd"]]["name"]
        key = "%s:%s:%s" % (f["kind"], f["reqid"], peer)
        n = seen[key] = seen.get(key, 0) + 1
        fid = key if n == 1 else "%s#%d" % (key, n)
        name = "repop" if f["kind"] == "repop" else "repop reply"
        args = {"reqid": f["reqid"], "pg": f.get("pg"), "replica": peer}
        # the sender: the primary's op slice; the replica's cpu track
        a_tid = a["tid"] + (CPU_TID_BASE if f["kind"] == "reply" else 0)
        # each end on its own OSD's clock, from its own window's start
        b.pid, b.t0 = pids[a["osd"]], wins[a["osd"]][0]
        b.event("s", name, a_tid, a["ts_ns"], cat="replica", id=fid,
                args=args)
        b.pid, b.t0 = pids[z["osd"]], wins[z["osd"]][0]
        b.event("f", name, z["tid"], z["ts_ns"], cat="replica", id=fid,
                bp="e", args=args)


def _client_events(events, host, pids):
    """The client's band (model/timeline.py client_band): a process of
    its own, a thread per op (named by its request id) with its librbd
    call, its way to the OSD and back, and its completion as slices, and
    the arrows between it and the primaries (see the module doc)."""
    cl = host["client"]
    pid = cl["pid"] or max(pids + [0]) + 1
    b = _Builder(host, pid, events)
    b.meta("process_name", 0, name=cl["name"])
    b.meta("process_sort_index", 0, sort_index=-1)
    for op in cl["ops"]:
        tid = CLIENT_TID_BASE + op["track"]
        b.meta("thread_name", tid, name=op["reqid"])
        args = {"reqid": op["reqid"], "osd": op["osd"]}
        call = op["call"]
        parts = [(op["send"], op["reply"], "to %s and back" % op["osd"]),
                 (op["reply"], op["done"], "completion")]
        if call:
            parts.insert(0, (call["submit"], call["done"], "librbd %s %d B"
                             % (call["op"], call["length"])))
        for start, end, name in parts:
            span = None if start is None or end is None else \
                _clip(host, start, end)
            if span:
                b.slice(tid, span[0], span[1], name, "client", args)
    b.finish_slices()
    wins = _windows(host)
    for f in cl["flows"]:
        a, z = f["from"], f["to"]
        args = {"reqid": f["reqid"]}
        fid = "%s:%s" % (f["kind"], f["reqid"])
        ends = []
        for ph, end in (("s", a), ("f", z)):
            if "client" in end:
                win, p = host["window"], pid
                tid = CLIENT_TID_BASE + end["client"]
            else:
                win, p = wins[end["osd"]], pids[end["osd"]]
                # the completion's thread: its cpu track (it runs then)
                tid = end["tid"] + (CPU_TID_BASE if ph == "s" else 0)
            if not win[0] <= end["ts_ns"] <= win[1]:
                break
            ends.append((ph, p, win[0], tid, end["ts_ns"]))
        for ph, p, t0, tid, ts in ends if len(ends) == 2 else ():
            b.pid, b.t0 = p, t0
            kw = {"bp": "e"} if ph == "f" else {}
            b.event(ph, "client " + f["kind"], tid, ts, cat="client",
                    id=fid, args=args, **kw)


def render_host(host):
    """The trace object for the timeline of several OSDs
    (model/timeline.py host_timeline): a process per OSD and the flows
    of replicated writes between them; json.dump it."""
    events = []
    pids = []
    t0, t1 = host["window"]
    for k, osd in enumerate(host["osds"]):
        tl = osd["timeline"]
        pid = osd["pid"] if osd.get("pid") is not None else k + 1
        pids.append(pid)
        # its own window: the same span on its own clock
        tl = dict(tl, window=_windows(host)[k])
        b = _Builder(tl, pid, events)
        _metadata(b, tl, osd["name"])
        b.meta("process_sort_index", 0, sort_index=k)
        _cpu_states(b, tl)
        _ops(b, tl, osd["name"] + "/")
        b.finish_slices()
        _wakeups(b, tl, osd["name"] + "/")
    _flow_events(_Builder(host, None, events), host, pids)
    if host.get("client"):
        _client_events(events, host, pids)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"clock": "CLOCK_MONOTONIC",
                          "window_ns": [t0, t1],
                          "clock_offset_ns": host.get("clock_offset_ns", 0),
                          "osds": {o["name"]: pids[k] for k, o in
                                   enumerate(host["osds"])},
                          "focus_reqid": host.get("focus"),
                          "ts": "microseconds since window_ns[0]"}}


# --------------------------------------------------------------------------
# validation

def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _event_problems(i, ev):
    """Missing or malformed fields of one event."""
    if not isinstance(ev, dict):
        return ["event %d: not an object" % i]
    out = ["event %d: missing %r" % (i, k) for k in REQUIRED if k not in ev]
    ph = ev.get("ph")
    if ph not in KNOWN_PH:
        out.append("event %d: unknown ph %r" % (i, ph))
    if "ts" in ev and not _is_num(ev["ts"]):
        out.append("event %d: non-numeric ts %r" % (i, ev["ts"]))
    if ph == "X":
        if not _is_num(ev.get("dur")):
            out.append("event %d: X without numeric dur" % i)
        elif ev["dur"] < 0:
            out.append("event %d: negative dur %r" % (i, ev["dur"]))
    if ph in ("s", "t", "f", "b", "e") and "id" not in ev:
        out.append("event %d: %s without id" % (i, ph))
    if ph == "M":
        args = ev.get("args")
        key = "sort_index" if str(ev.get("name")).endswith("_sort_index") \
            else "name"
        if not isinstance(args, dict) or key not in args:
            out.append("event %d: M without args.%s" % (i, key))
    return out


def _pairing_problems(events):
    """Flows whose start or end is missing, async slices not closed."""
    flows, spans, out = {}, {}, []
    for ev in events:
        ph = ev.get("ph")
        if ph in ("s", "f"):
            flows.setdefault(ev.get("id"), []).append(ph)
        elif ph in ("b", "e"):
            key = (ev.get("pid"), ev.get("cat"), ev.get("id"), ev.get("name"))
            spans[key] = spans.get(key, 0) + (1 if ph == "b" else -1)
    for fid, phs in flows.items():
        if phs.count("s") != 1 or phs.count("f") != 1:
            out.append("flow %r: %s" % (fid, "/".join(phs)))
    out += ["async slice %r: %+d unmatched" % (k, n)
            for k, n in spans.items() if n]
    return out


def _overlap_problems(events):
    """X events on one pid/tid track that overlap without nesting."""
    tracks = {}
    for ev in events:
        if ev.get("ph") == "X" and _is_num(ev.get("ts")) and \
                _is_num(ev.get("dur")):
            tracks.setdefault((ev.get("pid"), ev.get("tid")), []).append(
                (ev["ts"], ev["ts"] + ev["dur"], ev.get("name")))
    out = []
    for track, slices in tracks.items():
        stack = []
        for s, e, name in sorted(slices, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1][0] <= s + EPS_US:
                stack.pop()
            if stack and e > stack[-1][0] + EPS_US:
                out.append("track %r: %s at %.3f us overlaps %s" % (
                    track, name, s, stack[-1][1]))
            stack.append((e, name))
    return out


def validate(obj):
    """Problems that would make Perfetto reject or misdraw `obj`: [] if
    none."""
    events = obj.get("traceEvents") if isinstance(obj, dict) else None
    if not isinstance(events, list):
        return ["no traceEvents list"]
    out = []
    for i, ev in enumerate(events):
        out += _event_problems(i, ev)
    good = [ev for ev in events if isinstance(ev, dict)]
    return out + _pairing_problems(good) + _overlap_problems(good)
