"""The timeline of the HTML report: one SVG with a lane per thread
(running / runnable / asleep), ops split into their stages, and wake-up
arrows; zoomed by the page's script (render/html.py)."""
from .htmlbits import HELD_COLOUR, LOCK_COLOUR, _cls, _dur, _e, _stage_colours
from .perfetto import lanes, sleep_stack

MAX_OPS = 4000


MAX_WAKEUPS = 4000


MAX_CPU_SEGMENTS = 60000            # over all lanes, before merging


PLOT_W, GUTTER, AXIS_H, LANE_H = 1200, 190, 22, 34


CPU_Y, CPU_H = 2, 6                 # within a lane: scheduler states


QUEUE_Y, QUEUE_H = 10, 6            # queue_wait / op_total


EXEC_Y, EXEC_H = 18, 14             # the stages a worker ran, nested inside


CPU_COLOURS = {"run": "#2ca02c", "runq": "#d62728", "sleep": "#dddddd",
               "held": HELD_COLOUR, "lock": LOCK_COLOUR}


CPU_LABELS = {"run": "running", "runq": "runnable (waiting for a CPU)",
              "sleep": "sleeping",
              "held": "asleep, held by the op scheduler (mClock)",
              "lock": "asleep, waiting for a lock"}



class _Geometry:
    """Monotonic ns -> plot x; tid -> lane top."""

    def __init__(self, timeline, lane_list, y0=0):
        self.t0, t1 = timeline["window"]
        self.span = max(1, t1 - self.t0)
        self.top = {lane["tid"]: y0 + i * LANE_H for i, lane in
                    enumerate(lane_list)}

    def x(self, ns):
        return min(PLOT_W, max(0.0, (ns - self.t0) * PLOT_W / self.span))

    def rel(self, ns):
        return _dur((ns - self.t0) / 1000.0)


def _rect(cls, x0, x1, y, h, title=None):
    t = "<title>%s</title>" % _e(title) if title else ""
    return '<rect class="%s" x="%.2f" y="%.1f" width="%.2f" height="%.1f">' \
        '%s</rect>' % (cls, x0, y, max(0.0, x1 - x0), h, t)


def _lanes_svg(g, lane_list):
    """Lane backgrounds (plot) and labels (gutter)."""
    plot, labels = [], []
    for i, lane in enumerate(lane_list):
        y = g.top[lane["tid"]]
        name = lane.get("name") or "tid %d" % lane["tid"]
        plot.append(_rect("lane odd" if i % 2 else "lane", 0, PLOT_W, y,
                          LANE_H, "%s (tid %d, role %s)" % (
                              name, lane["tid"], lane.get("role") or "-")))
        label = name if name == "tid %d" % lane["tid"] else "%s %d" % (
            name[:22], lane["tid"])
        labels.append('<text class="lane-label" x="4" y="%d">%s</text>' % (
            AXIS_H + y + 21, _e(label)))
    return plot, labels


def _coalesce(segs, min_ns):
    """Runs of scheduler states shorter than `min_ns` merged until they
    reach it: [[start, end, {state: ns}]]."""
    out, run = [], None
    for s, e, state in segs:
        short = e - s < min_ns
        if run and (not short or s != run[1] or run[1] - run[0] >= min_ns):
            out.append(run)
            run = None
        if run is None:
            run = [s, e, {}]
        run[1] = e
        run[2][state] = run[2].get(state, 0) + e - s
        if not short:
            out.append(run)
            run = None
    return out + ([run] if run else [])


def _cpu_title(g, s, e, ns):
    if len(ns) == 1:
        state = next(iter(ns))
        return "%s %s at +%s" % (CPU_LABELS.get(state, state),
                                 _dur((e - s) / 1000.0), g.rel(s))
    return "%s at +%s: %s" % (_dur((e - s) / 1000.0), g.rel(s), ", ".join(
        "%s %.0f %%" % (CPU_LABELS.get(k, k), 100.0 * v / max(1, e - s))
        for k, v in sorted(ns.items(), key=lambda kv: -kv[1])))


def _stack_title(lane, s, ns, stacks):
    """A sleep's stacks (a capture with stacks), for its title."""
    if not stacks or list(ns) != ["sleep"]:
        return ""
    st = sleep_stack({"stacks": stacks}, lane["tid"], s, "sleep")
    return "\nin %s\nwoken by %s" % (st["stack"], st["waker"]) if st \
        else ""


def _cpu_svg(g, lane_list, n_lanes=None, stacks=None):
    """Scheduler states; short ones merged (drawn in the state that took
    most of the run) so that at most ~2 * MAX_CPU_SEGMENTS are drawn
    (over `n_lanes` lanes in all, default these).
    Returns the rects and how many states were merged away."""
    per_lane = min(4 * PLOT_W, MAX_CPU_SEGMENTS // max(1, n_lanes or
                                                       len(lane_list)))
    min_ns = g.span / max(1, per_lane)
    out, merged = [], 0
    for lane in lane_list:
        segs = lane.get("cpu", [])
        runs = _coalesce(segs, min_ns)
        merged += len(segs) - len(runs)
        y = g.top[lane["tid"]] + CPU_Y
        for s, e, ns in runs:
            state = max(ns, key=ns.get)
            out.append(_rect("cpu-" + _cls(state), g.x(s), g.x(e), y, CPU_H,
                             _cpu_title(g, s, e, ns) +
                             _stack_title(lane, s, ns, stacks)))
    return out, merged, min_ns


def _depths(stages):
    """Nesting depth of each (name, start, end) stage run by the worker."""
    out, stack = [], []
    for name, s, e in sorted(stages, key=lambda x: (x[1], -x[2])):
        while stack and stack[-1] <= s:
            stack.pop()
        out.append((len(stack), name, s, e))
        stack.append(e)
    return out


def _op_title(g, op):
    lines = ["op %s (%s) on tid %s, enqueued by tid %s at +%s; woken: %s" % (
        op.get("op"), op.get("class") or "?", op.get("tid"),
        op.get("enqueue_tid"), g.rel(op.get("enqueue_ns", g.t0)),
        op.get("wake") or "was running")]
    if op.get("queue_class"):
        lines.append("scheduler class %s%s" % (
            op["queue_class"], ", held %s" % _dur(op["held_ns"] / 1000.0)
            if op.get("held_ns") else ""))
    lines += ["%s %s" % (n, _dur((e - s) / 1000.0))
              for n, s, e in op.get("stages", [])]
    return "\n".join(lines)


def _op_svg(g, op):
    """One op: its messenger stages, queue_wait and op_total in the queue
    row, the stages the worker ran nested in the exec row."""
    top = g.top[op["tid"]]
    parts = ['<g class="op c-%s w-%s"><title>%s</title>' % (
        _cls(op.get("class")), _cls(op.get("wake")), _e(_op_title(g, op)))]
    run = []
    msgr = op.get("messenger", ())
    for name, s, e in op.get("stages", []):
        if name == "queue_wait" or name in msgr:
            # the messenger's stages lead up to the enqueue
            parts.append(_rect("stage s-" + _cls(name), g.x(s), g.x(e),
                               top + QUEUE_Y, QUEUE_H))
        elif name == "op_total":
            parts.append(_rect("stage s-op_total", g.x(s), g.x(e),
                               top + QUEUE_Y + QUEUE_H - 1.5, 1.5))
        else:
            run.append((name, s, e))
    for depth, name, s, e in _depths(run):
        inset = min(3 * depth, EXEC_H / 2 - 2)
        parts.append(_rect("stage s-" + _cls(name), g.x(s), g.x(e),
                           top + EXEC_Y + inset, EXEC_H - 2 * inset))
    parts.append("</g>")
    return "".join(parts)


def _wake_svg(g, w):
    """An arrow from the waker's lane at the wake-up to the woken lane when
    it got a CPU; a red tick for a timer wake-up (no waking thread)."""
    to_y = g.top[w["to_tid"]] + EXEC_Y + EXEC_H / 2
    oncpu = w.get("oncpu_ns") or w["ts_ns"]
    delay = "on CPU %s later" % _dur((oncpu - w["ts_ns"]) / 1000.0)
    if w.get("from_tid") is None:
        x = g.x(w["ts_ns"])
        return '<line class="wake wake-timer" x1="%.2f" y1="%.1f" x2="%.2f" ' \
            'y2="%.1f"><title>timer woke tid %d at +%s, %s</title></line>' % (
                x, to_y - EXEC_Y, x, to_y, w["to_tid"], g.rel(w["ts_ns"]),
                delay)
    from_y = g.top[w["from_tid"]] + EXEC_Y + EXEC_H / 2
    return '<line class="wake" x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" ' \
        'marker-end="url(#arrow)"><title>tid %d woke tid %d at +%s, %s' \
        '</title></line>' % (g.x(w["ts_ns"]), from_y, g.x(oncpu), to_y,
                             w["from_tid"], w["to_tid"], g.rel(w["ts_ns"]),
                             delay)


def _cpu_colours(lane_lists):
    """CPU_COLOURS of the states the lanes show: "held" only where an
    mClock hold is drawn, "lock" only where a lock wait is (a page of a
    capture without either is as it was)."""
    used = {st for ll in lane_lists for lane in ll
            for _, _, st in lane.get("cpu", ())}
    return {k: v for k, v in CPU_COLOURS.items()
            if k not in ("held", "lock") or k in used}


def _legend(colours, cpu_colours=CPU_COLOURS):
    items = ['<span><i class="swatch" style="background:%s"></i>%s</span>' % (
        c, _e(CPU_LABELS[s])) for s, c in cpu_colours.items()]
    items += ['<span><i class="swatch" style="background:%s"></i>%s</span>' %
              (c, _e(n)) for n, c in colours.items()]
    items += ['<span>&#8594; wake-up (waker to woken, when it got a CPU)'
              '</span>', '<span style="color:#c00">| timer wake-up; red '
              'outline: op picked up after a timed wait</span>']
    return '<div class="legend" id="legend">%s</div>' % "".join(items)


def _notes(ops, wakeups, merged, min_ns):
    """What the timeline leaves out or simplifies."""
    notes = []
    if len(ops) > MAX_OPS:
        notes.append("drawing the first %d of %d ops" % (MAX_OPS, len(ops)))
    if len(wakeups) > MAX_WAKEUPS:
        notes.append("the first %d of %d wake-ups" % (MAX_WAKEUPS,
                                                      len(wakeups)))
    if merged:
        notes.append("%d scheduler states merged into runs of at least %s "
                     "(hover for the mix)" % (merged, _dur(min_ns / 1000.0)))
    return '<p class="note" id="tl-note">%s</p>' % _e("; ".join(notes)) \
        if notes else ""


def _timeline(timeline):
    if not timeline:
        return ""
    lane_list = lanes(timeline)
    g = _Geometry(timeline, lane_list)
    ops = [op for op in timeline.get("ops", []) if op.get("tid") is not None]
    wakeups = timeline.get("wakeups", [])
    plot, labels = _lanes_svg(g, lane_list)
    cpu, merged, min_ns = _cpu_svg(g, lane_list,
                                   stacks=timeline.get("stacks"))
    plot += cpu
    plot += [_op_svg(g, op) for op in ops[:MAX_OPS]]
    plot += [_wake_svg(g, w) for w in wakeups[:MAX_WAKEUPS]]
    colours = _stage_colours(n for op in ops
                             for n, _, _ in op.get("stages", []))
    style = "".join(".s-%s{fill:%s}" % (_cls(n), c)
                    for n, c in colours.items())
    cpu_colours = _cpu_colours([lane_list])
    style += "".join(".cpu-%s{fill:%s}" % kv for kv in cpu_colours.items())
    h = LANE_H * len(lane_list)
    return (
        '<section id="timeline-section"><h2>Timeline</h2><style>%s</style>'
        '%s<p class="meta" id="tl-range">whole window, %s</p>%s'
        '<svg id="timeline" width="%d" height="%d">'
        '<defs><marker id="arrow" viewBox="0 0 6 6" refX="6" refY="3" '
        'markerWidth="6" markerHeight="6" orient="auto-start-reverse">'
        '<path d="M0,0 L6,3 L0,6 z" fill="#333"/></marker></defs>'
        '<g id="tl-axis" class="axis" transform="translate(%d,0)"></g>%s'
        '<svg id="tl-plot" x="%d" y="%d" width="%d" height="%d" '
        'viewBox="0 0 %d %d" preserveAspectRatio="none" data-w="%d" '
        'data-h="%d" data-span="%d">%s</svg></svg></section>' % (
            style, _legend(colours, cpu_colours), _e(_dur(g.span / 1000.0)),
            _notes(ops, wakeups, merged, min_ns), GUTTER + PLOT_W,
            AXIS_H + h, GUTTER, "".join(labels), GUTTER, AXIS_H, PLOT_W, h,
            PLOT_W, h, PLOT_W, h, g.span, "".join(plot)))



# --------------------------------------------------------------------------
# several OSDs: a band of lanes per OSD, arrows between them

OSD_H = 20                          # the band heading each OSD's lanes
FLOW_LABELS = {"repop": "sub-op sent by the primary, replica op started",
               "reply": "replica's commit reply, handled by the primary",
               "request": "client's op sent, primary's worker started on "
                          "it",
               "response": "primary's completion, the reply's arrival at "
                           "the client"}
CLIENT_LANE_H = 14                  # a client op's lane: call, op, completion


def _client_band(host, y):
    """The client's band (model/timeline.py client_band) from height y:
    a lane per op (its librbd call, its way to the OSD and back, its
    completion) -> (svg parts, labels, its geometry, height)."""
    cl = host["client"]
    g = _Geometry({"window": host["window"]}, [], y + OSD_H)
    g.top = {op["track"]: y + OSD_H + i * CLIENT_LANE_H
             for i, op in enumerate(cl["ops"])}
    h = OSD_H + CLIENT_LANE_H * len(cl["ops"])
    plot = ['<g class="client-band" data-client="%s"><rect class="osd-head" '
            'x="0" y="%d" width="%d" height="%d"><title>%s</title></rect>' % (
                _e(cl["name"]), y, PLOT_W, OSD_H, _e(cl["name"]))]
    for op in cl["ops"]:
        top = g.top[op["track"]]
        call = op["call"]
        parts = [("cl-wire", op["send"], op["reply"], 4, 6,
                  "%s to %s and back" % (op["reqid"], op["osd"])),
                 ("cl-done", op["reply"], op["done"], 4, 6,
                  "%s completion" % op["reqid"])]
        if call:
            parts.insert(0, ("cl-call", call["submit"], call["done"], 1, 12,
                             "librbd %s of %d B" % (call["op"],
                                                    call["length"])))
        for cls, a, b, dy, hh, what in parts:
            if a is None or b is None:
                continue
            plot.append(_rect(cls, g.x(a), g.x(b), top + dy, hh, "%s: %s" % (
                what, _dur((b - a) / 1000.0))))
    plot.append("</g>")
    labels = ['<text class="osd-label" x="4" y="%d">%s</text>' % (
        AXIS_H + y + 15, _e(cl["name"]))]
    labels += ['<text x="4" y="%d">%s</text>' % (
        AXIS_H + g.top[op["track"]] + 11, _e(op["reqid"]))
        for op in cl["ops"] if op["reqid"] == host.get("focus")]
    return plot, labels, g, h


def _client_flow_svg(geos, gc, host, f):
    """An arrow between the client's band and a primary (client_band's
    flows)."""
    a, z = f["from"], f["to"]
    ends = []
    for end in (a, z):
        if "client" in end:
            ends.append((gc, gc.top.get(end["client"], 0) + 7))
        else:
            g = geos[end["osd"]]
            if end["tid"] not in g.top:
                return ""
            ends.append((g, g.top[end["tid"]] + EXEC_Y + EXEC_H / 2))
    (ga, y1), (gz, y2) = ends
    focus = " flow-focus" if f["reqid"] == host.get("focus") else ""
    return ('<line class="flow flow-%s%s" data-flow="%s" data-reqid="%s" '
            'x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" '
            'marker-end="url(#flow-arrow)"><title>%s %s: %s</title></line>'
            % (_cls(f["kind"]), focus, _e(f["kind"]), _e(f["reqid"]),
               ga.x(a["ts_ns"]), y1, gz.x(z["ts_ns"]), y2, _e(f["reqid"]),
               _e(f["kind"]), _e(FLOW_LABELS[f["kind"]])))


def _flow_svg(geos, host, f):
    """A replicated write's arrow between two OSDs' lanes: the primary's
    op (sub-ops sent) to the replica op, or the replica's commit reply to
    the primary's thread that handled it."""
    a, z = f["from"], f["to"]
    ga, gz = geos[a["osd"]], geos[z["osd"]]
    if a["tid"] not in ga.top or z["tid"] not in gz.top:
        return ""
    names = [o["name"] for o in host["osds"]]
    y1 = ga.top[a["tid"]] + EXEC_Y + EXEC_H / 2
    y2 = gz.top[z["tid"]] + (QUEUE_Y if f["kind"] == "repop" else
                             EXEC_Y + EXEC_H / 2)
    x2 = gz.x(z.get("enqueue_ns") or z["ts_ns"]) if f["kind"] == "repop" \
        else gz.x(z["ts_ns"])
    title = "%s %s: %s (%s tid %d) at +%s to %s tid %d at +%s (%s)" % (
        f["reqid"], f["kind"], FLOW_LABELS[f["kind"]], names[a["osd"]],
        a["tid"], ga.rel(a["ts_ns"]), names[z["osd"]], z["tid"],
        gz.rel(z["ts_ns"]), _dur((z["ts_ns"] - gz.t0 - a["ts_ns"] + ga.t0)
                                 / 1000.0))
    focus = " flow-focus" if f["reqid"] == host.get("focus") else ""
    return ('<line class="flow flow-%s%s" data-flow="%s" data-reqid="%s" '
            'data-from="%s" data-to="%s" x1="%.2f" y1="%.1f" x2="%.2f" '
            'y2="%.1f" marker-end="url(#flow-arrow)"><title>%s</title>'
            '</line>' % (_cls(f["kind"]), focus, _e(f["kind"]),
                         _e(f["reqid"]),
                         _e(names[a["osd"]]), _e(names[z["osd"]]),
                         ga.x(a["ts_ns"]), y1, x2, y2, _e(title)))


def _host_timeline(host):
    """The timeline of several OSDs (model/timeline.py host_timeline): a
    band per OSD (g.osd-band[data-osd]) with its lanes as _timeline draws
    them, and line.flow[data-flow] arrows between the OSDs."""
    window = host["window"]
    y = 0
    client = ([], [], None)
    if host.get("client"):          # the client's band first
        cplot, clabels, gc, y = _client_band(host, 0)
        client = (cplot, clabels, gc)
    per, h = _osd_bands(host, y)
    n_lanes = sum(len(p[2]) for p in per)
    plot, labels, all_ops, all_wakes = list(client[0]), list(client[1]), \
        [], []
    merged, min_ns = 0, 0
    for band in per:
        b_plot, b_labels, ops, wakeups, m, min_ns = _osd_band_svg(
            band, n_lanes)
        plot += b_plot
        labels += b_labels
        merged += m
        all_ops += ops
        all_wakes += wakeups
    geos = [p[3] for p in per]
    flows = [_flow_svg(geos, host, f) for f in host.get("flows", [])]
    if client[2] is not None:
        flows += [_client_flow_svg(geos, client[2], host, f)
                  for f in host["client"]["flows"]]
    plot += [x for x in flows if x]
    colours = _stage_colours(n for op in all_ops
                             for n, _, _ in op.get("stages", []))
    cpu_colours = _cpu_colours([p[2] for p in per])
    style, legend = _host_style(colours, cpu_colours, host.get("client"))
    g = geos[0] if geos else _Geometry({"window": window}, [])
    return (
        '<section id="timeline-section"><h2>Timeline of %d OSDs%s</h2>'
        '<style>%s</style>%s<p class="meta" id="tl-range">whole window, %s'
        '</p>%s<svg id="timeline" width="%d" height="%d">'
        '<defs><marker id="arrow" viewBox="0 0 6 6" refX="6" refY="3" '
        'markerWidth="6" markerHeight="6" orient="auto-start-reverse">'
        '<path d="M0,0 L6,3 L0,6 z" fill="#333"/></marker>'
        '<marker id="flow-arrow" viewBox="0 0 6 6" refX="6" refY="3" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L6,3 L0,6 z" fill="#1f5fbf"/></marker></defs>'
        '<g id="tl-axis" class="axis" transform="translate(%d,0)"></g>%s'
        '<svg id="tl-plot" x="%d" y="%d" width="%d" height="%d" '
        'viewBox="0 0 %d %d" preserveAspectRatio="none" data-w="%d" '
        'data-h="%d" data-span="%d">%s</svg></svg></section>' % (
            len(per), _e(", centred on %s (thick arrows)" % host["focus"])
            if host.get("focus") else "", style, legend, _e(_dur(g.span / 1000.0)),
            _notes(all_ops, all_wakes, merged, min_ns), GUTTER + PLOT_W,
            AXIS_H + h, GUTTER, "".join(labels), GUTTER, AXIS_H, PLOT_W, h,
            PLOT_W, h, PLOT_W, h, g.span, "".join(plot)))


def _osd_bands(host, y):
    """Each OSD's band from height y: [(osd, its timeline on its own
    clock, its lanes, their geometry, the band's y)], and the height
    under the last."""
    per = []
    for osd in host["osds"]:
        # its own window: the same span on its own clock
        tl = dict(osd["timeline"], window=osd.get("window") or
                  host["window"])
        lane_list = lanes(tl)
        per.append((osd, tl, lane_list, _Geometry(tl, lane_list,
                                                  y + OSD_H), y))
        y += OSD_H + LANE_H * len(lane_list)
    return per, y


def _osd_band_svg(band, n_lanes):
    """One OSD's band (_osd_bands') drawn -> (plot svg, labels, its ops,
    its wake-ups, CPU slices merged, the smallest slice drawn)."""
    osd, tl, lane_list, g, band_y = band
    ops = [op for op in tl.get("ops", []) if op.get("tid") is not None]
    wakeups = tl.get("wakeups", [])
    lane_svg, lane_labels = _lanes_svg(g, lane_list)
    cpu, merged, min_ns = _cpu_svg(g, lane_list, n_lanes)
    plot = ['<g class="osd-band" data-osd="%s" data-pid="%s">'
            '<rect class="osd-head" x="0" y="%d" width="%d" '
            'height="%d"><title>%s</title></rect>' % (
                _e(osd["name"]), _e(osd.get("pid")), band_y, PLOT_W,
                OSD_H, _e("%s pid %s" % (osd["name"], osd.get("pid"))))]
    plot += lane_svg + cpu
    plot += [_op_svg(g, op) for op in ops[:MAX_OPS]]
    plot += [_wake_svg(g, w) for w in wakeups[:MAX_WAKEUPS]]
    plot.append("</g>")
    labels = ['<text class="osd-label" x="4" y="%d">%s (pid %s)'
              '</text>' % (AXIS_H + band_y + 15, _e(osd["name"]),
                           _e(osd.get("pid")))] + lane_labels
    return plot, labels, ops, wakeups, merged, min_ns


def _host_style(colours, cpu_colours, client):
    """The host timeline's style sheet and legend (the client's arrows
    and lanes explained when a client's band is drawn)."""
    style = "".join(".s-%s{fill:%s}" % (_cls(n), c)
                    for n, c in colours.items())
    style += "".join(".cpu-%s{fill:%s}" % kv for kv in cpu_colours.items())
    style += (".osd-head{fill:#dde4ee} #timeline .osd-label{font-size:12px;"
              "font-weight:bold} .flow{stroke:#1f5fbf;stroke-width:1.5;"
              "vector-effect:non-scaling-stroke} .flow-reply{stroke:#7b3fb0;"
              "stroke-dasharray:4 2} .flow-focus{stroke-width:3.5}"
              ".flow-request,.flow-response{stroke:#b05f00}"
              ".flow-response{stroke-dasharray:4 2}"
              ".cl-call{fill:#c6d7ee}.cl-wire{fill:#5fb3b3}"
              ".cl-done{fill:#9a9a9a}")
    legend = _legend(colours, cpu_colours).replace(
        "</div>", '<span style="color:#1f5fbf">&#8594; replicated write: '
        'primary sent the sub-op to the replica op</span><span style="color:'
        '#7b3fb0">&#8594; (dashed) replica\'s commit reply to the primary'
        '</span>%s</div>' % (
            '<span style="color:#b05f00">&#8594; client\'s op to its primary '
            '(dashed: the reply back); a client op\'s lane: its librbd call '
            '(light blue), to the OSD and back (teal), its completion '
            '(grey)</span>' if client else ""))
    return style, legend
