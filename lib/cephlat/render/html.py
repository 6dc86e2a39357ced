"""One self-contained HTML page for a report record and a timeline.

render(rec, timeline) -> str: no external resources (inline CSS, inline
SVG drawn here, a little inline JS for zooming the timeline). Sections
and the DOM a test can check:
  #verdict      cause and verdict text
  #stages       summary table; svg.hist per stage with rect.bar buckets
  #kernel       the same for kernel stages
  #attribution  svg.attr-bar (rect.attr-part) and the table; #wakers, #shards
  #roles        rect.role-bar per role (offcpu, runq) and the threads table
  svg#timeline  rect.lane per thread, rect.cpu-run/.cpu-runq/.cpu-sleep,
                g.op with rect.stage children, line.wake (wake-up arrows)
The page records JS errors in <html data-js-errors> and sets
<html data-js-ready="1"> once its script ran. Ops without a worker tid
(never dequeued) are left out; at most MAX_OPS ops are drawn, and runs of
scheduler states too short to see are merged.
"""
import html
import re
import time


from ..model import report
from .perfetto import lanes

MAX_OPS = 4000
MAX_WAKEUPS = 4000
MAX_CPU_SEGMENTS = 60000            # over all lanes, before merging

PLOT_W, GUTTER, AXIS_H, LANE_H = 1200, 190, 22, 34
CPU_Y, CPU_H = 2, 6                 # within a lane: scheduler states
QUEUE_Y, QUEUE_H = 10, 6            # queue_wait / op_total
EXEC_Y, EXEC_H = 18, 14             # the stages a worker ran, nested inside

STAGE_COLOURS = {
    "queue_wait": "#f1a340", "op_total": "#555555", "dequeue_op": "#4e79a7",
    "do_op": "#59a14f", "get_object_context": "#b07aa1",
    "bluestore_read": "#e15759", "bluestore_submit": "#ff9da7",
}
SPARE_COLOURS = ["#76b7b2", "#edc948", "#9c755f", "#17becf", "#bcbd22"]
CPU_COLOURS = {"run": "#2ca02c", "runq": "#d62728", "sleep": "#dddddd"}
CPU_LABELS = {"run": "running", "runq": "runnable (waiting for a CPU)",
              "sleep": "sleeping"}
ATTR_COLOURS = {"busy": "#4e79a7", "signal": "#f28e2b", "runq": "#e15759",
                "pickup": "#76b7b2"}
ATTR_LABELS = {"busy": "worker busy", "signal": "signal delay (asleep)",
               "runq": "run-queue delay", "pickup": "pickup"}

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em} h2{font-size:1.15em;margin:1.4em 0 .4em}
.meta{color:#555} .note{color:#a33}
#verdict{border-left:6px solid #c33;background:#fff4f2;padding:.6em 1em}
#verdict h2{margin:0 0 .3em} #verdict p{margin:.2em 0}
table{border-collapse:collapse;margin:.4em 0}
th,td{padding:2px 10px;text-align:right;border-bottom:1px solid #eee}
th:first-child,td:first-child{text-align:left}
.hists{display:flex;flex-wrap:wrap;gap:12px}
.hist .bar{fill:#4e79a7} .hist text{font-size:9px;fill:#444}
.hist .title{font-size:12px;fill:#222}
.role-bar.offcpu{fill:#999} .role-bar.runq{fill:#d62728}
svg text{font-family:system-ui,sans-serif}
#timeline{border:1px solid #ccc;user-select:none}
#timeline .lane-label{font-size:11px} #timeline .axis{font-size:10px}
.lane{fill:#fafafa} .lane.odd{fill:#f0f3f7}
.stage{stroke:none} .s-queue_wait{fill-opacity:.35}
.wake{stroke:#333;stroke-width:1;vector-effect:non-scaling-stroke}
.wake-timer{stroke:#c00}
.op.w-timeout .stage{stroke:#c00;stroke-width:1;
  vector-effect:non-scaling-stroke}
.legend span{display:inline-block;margin-right:14px}
.swatch{display:inline-block;width:12px;height:10px;margin-right:4px;
  vertical-align:middle}
"""

ERROR_JS = """
window.onerror = function (msg) {
  var r = document.documentElement;
  r.dataset.jsErrors = (r.dataset.jsErrors ? r.dataset.jsErrors + " | " : "")
    + msg;
};
window.addEventListener("unhandledrejection", function (ev) {
  window.onerror("unhandled rejection: " + ev.reason);
});
"""

ZOOM_JS = """
(function () {
  var plot = document.getElementById("tl-plot");
  if (plot) zoomable(plot);
  document.documentElement.dataset.jsReady = "1";

  function fmt(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return +(ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return +(ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return +(ns / 1e3).toFixed(1) + " us";
    return Math.round(ns) + " ns";
  }
  function clamp(v, lo, hi) { return Math.max(lo, Math.min(hi, v)); }

  function zoomable(plot) {
    var W = +plot.dataset.w, H = +plot.dataset.h, span = +plot.dataset.span;
    var axis = document.getElementById("tl-axis");
    var range = document.getElementById("tl-range");
    var outer = document.getElementById("timeline");
    var NS = plot.namespaceURI, vx = 0, vw = W, drag = null;

    function left() {    /* of the plot: the outer svg is not scaled */
      return outer.getBoundingClientRect().left + (+plot.getAttribute("x"));
    }
    function add(tag, attrs, text) {
      var el = document.createElementNS(NS, tag);
      for (var k in attrs) el.setAttribute(k, attrs[k]);
      if (text) el.textContent = text;
      axis.appendChild(el);
    }
    function ticks(a, b) {
      while (axis.firstChild) axis.removeChild(axis.firstChild);
      var step = Math.pow(10, Math.floor(Math.log10((b - a) / 4)));
      if ((b - a) / step > 16) step *= 5;
      else if ((b - a) / step > 8) step *= 2;
      for (var t = Math.ceil(a / step) * step; t <= b; t += step) {
        var x = (t - a) / (b - a) * W;
        add("line", {x1: x, x2: x, y1: 14, y2: 22, stroke: "#888"});
        add("text", {x: x + 2, y: 11}, "+" + fmt(t));
      }
    }
    function apply() {
      plot.setAttribute("viewBox", vx + " 0 " + vw + " " + H);
      var a = vx / W * span, b = (vx + vw) / W * span;
      range.textContent = "showing +" + fmt(a) + " to +" + fmt(b) + " of " +
        fmt(span) + " (wheel: zoom, drag: pan, double-click: reset)";
      ticks(a, b);
    }
    plot.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var f = (ev.clientX - left()) / W;
      var nw = clamp(vw * (ev.deltaY > 0 ? 1.25 : 0.8), W / 1e5, W);
      vx = clamp(vx + f * (vw - nw), 0, W - nw);
      vw = nw;
      apply();
    }, {passive: false});
    plot.addEventListener("mousedown", function (ev) {
      drag = {x: ev.clientX, vx: vx};
      ev.preventDefault();
    });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      vx = clamp(drag.vx - (ev.clientX - drag.x) / W * vw, 0, W - vw);
      apply();
    });
    window.addEventListener("mouseup", function () { drag = null; });
    plot.addEventListener("dblclick", function () {
      vx = 0;
      vw = W;
      apply();
    });
    apply();
  }
})();
"""


def _e(v):
    return html.escape(str(v), quote=True)


def _cls(name):
    """A data string made safe as a CSS class name."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(name))


def _dur(us):
    """A duration in microseconds as text with a fitting unit."""
    if us >= 1e6:
        return "%.3g s" % (us / 1e6)
    if us >= 1000:
        return "%.3g ms" % (us / 1000)
    return "%.3g us" % us if us < 10 else "%.0f us" % us


def _wall(sec):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(sec)) + \
        ".%03d" % (int(sec * 1000) % 1000)


def _table(headers, rows, tid=None):
    head = "".join("<th>%s</th>" % _e(h) for h in headers)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % _e(c) for c in r)
                   for r in rows)
    return '<table%s><tr>%s</tr>%s</table>' % (
        ' id="%s"' % tid if tid else "", head, body)


def _stage_colours(names):
    """Colour per stage name: the known ones fixed, others from a spare
    list in order of appearance."""
    out, spare = {}, 0
    for n in names:
        if n in out:
            continue
        if n in STAGE_COLOURS:
            out[n] = STAGE_COLOURS[n]
        else:
            out[n] = SPARE_COLOURS[spare % len(SPARE_COLOURS)]
            spare += 1
    return out


# --------------------------------------------------------------------------
# header, verdict, tables

def _header(rec, timeline, title):
    if timeline:
        t0, t1 = timeline["window"]
        off = timeline.get("clock_offset_ns", 0)
        window = "%s to %s (%s)" % (_wall((t0 + off) / 1e9),
                                    _wall((t1 + off) / 1e9),
                                    _dur((t1 - t0) / 1000.0))
    else:
        window = "%s to %s" % (_wall(rec["ts"] - rec["interval_s"]),
                               _wall(rec["ts"]))
    return ('<h1>%s</h1><p class="meta">ceph-osd pid %s, Ceph %s; window %s; '
            'interval %.1f s</p>' % (
                _e(title or "OSD stage latency, pid %s" % rec.get("pid")),
                _e(rec.get("pid")), _e(rec.get("ceph_version")), _e(window),
                rec.get("interval_s", 0)))


def _verdict(rec):
    if not rec.get("verdict"):
        return ('<section id="verdict"><h2>Verdict</h2><p>no verdict: this '
                'capture has no kernel data</p></section>')
    cause = rec.get("cause")
    lines = "".join("<p>%s</p>" % _e(l) for l in rec["verdict"].splitlines())
    return '<section id="verdict"><h2>Verdict: %s</h2>%s</section>' % (
        _e(report.CAUSES.get(cause, cause)), lines)


def _summary_rows(stages):
    rows = []
    for name, s in stages.items():
        rows.append([name] + _stat_cells(s))
        for cls, cs in s.get("by_class", {}).items():
            if cs["count"]:
                rows.append(["  " + cls] + _stat_cells(cs))
    return rows


def _stat_cells(s):
    return [s["count"]] + ["%.1f" % s[k] for k in
                           ("mean_us", "p50_us", "p90_us", "p99_us", "max_us")]


def _hist_svg(name, buckets):
    """One log2 histogram as an SVG bar chart: buckets from the first to
    the last non-empty one."""
    nz = [i for i, b in enumerate(buckets) if b[2]]
    buckets = buckets[nz[0]:nz[-1] + 1]
    top = max(b[2] for b in buckets)
    label = "%s (n=%d)" % (name, sum(b[2] for b in buckets))
    bw, h, y0 = 24, 110, 22
    width = max(7 * len(label), 40 + bw * len(buckets))
    parts = ['<svg class="hist" id="hist-%s" width="%d" height="%d">' % (
        _cls(name), width, y0 + h + 48),
        '<text class="title" x="4" y="14">%s</text>' % _e(label)]
    for i, (lo, hi, count) in enumerate(buckets):
        x = 30 + i * bw
        bh = h * count / top
        parts.append('<rect class="bar" x="%d" y="%.1f" width="%d" '
                     'height="%.1f"><title>%s to %s: %d</title></rect>' % (
                         x, y0 + h - bh, bw - 3, bh, _dur(lo), _dur(hi),
                         count))
        lx, ly = x + bw / 2, y0 + h + 8
        parts.append('<text x="%.1f" y="%d" text-anchor="end" '
                     'transform="rotate(-50 %.1f %d)">%s</text>' % (
                         lx, ly, lx, ly, "0" if lo == 0 else _dur(lo)))
    parts.append("</svg>")
    return "".join(parts)


def _stage_section(sid, heading, stages):
    if not stages:
        return ""
    hists = "".join(_hist_svg(n, s["hist"]) for n, s in stages.items()
                    if s["count"] and any(b[2] for b in s.get("hist", [])))
    return '<section id="%s"><h2>%s</h2>%s<div class="hists">%s</div>' \
        '</section>' % (sid, _e(heading), _table(
            ["stage", "count", "mean us", "p50 us", "p90 us", "p99 us",
             "max us"], _summary_rows(stages)), hists)


def _attribution(rec):
    attr = rec.get("attribution")
    if not attr:
        return ""
    w, x, parts = 900, 0.0, []
    for p in attr:                      # the parts, in the model's order
        share = attr[p]["share"]
        parts.append('<rect class="attr-part a-%s" x="%.1f" y="0" '
                     'width="%.1f" height="26" fill="%s"><title>%s: %.0f %%'
                     '</title></rect>' % (p, x, w * share, ATTR_COLOURS[p],
                                          ATTR_LABELS[p],
                                          100 * share))
        if w * share > 90:
            parts.append('<text x="%.1f" y="17" fill="#fff" font-size="12">'
                         '%s %.0f %%</text>' % (x + 6, ATTR_LABELS[p],
                                                100 * share))
        x += w * share
    rows = [[ATTR_LABELS[p], "%.1f" % attr[p]["mean_us"],
             "%.1f" % attr[p]["p50_us"], "%.1f" % attr[p]["p99_us"],
             "%.0f %%" % (100 * attr[p]["share"])]
            for p in attr]
    return ('<section id="attribution"><h2>Queue-wait attribution</h2>'
            '<svg class="attr-bar" width="%d" height="26">%s</svg>%s%s%s'
            '</section>' % (w, "".join(parts), _table(
                ["part", "mean us", "p50 us", "p99 us", "share"], rows),
                _wakers(rec), _shards(rec)))


def _wakers(rec):
    w = rec.get("wakers")
    if not w:
        return ""
    return '<h3>Who woke sleeping workers with an op queued</h3>' + _table(
        ["waker", "count"],
        [["the enqueuer", w["enqueuer"]], ["another thread", w["other"]],
         ["their timed wait (missed wake-up)", w["timeout"]],
         ["timed waits that found work", w["timeouts_with_work"]]],
        "wakers")


def _shards(rec):
    parts = list(rec.get("attribution") or ())
    rows = [[r["shard"], r["workers"], r["ops"],
             "%.1f" % r["queue_wait_mean_us"]] +
            ["%.0f %%" % (100 * r[p]) for p in parts] +
            [r["timeouts_with_work"]] for r in rec.get("shards") or []]
    if not rows:
        return ""
    return "<h3>Per shard</h3>" + _table(
        ["shard", "workers", "ops", "qwait us", "busy", "signal", "runq",
         "pickup", "timeouts"], rows, "shards")


def _roles(rec):
    threads = rec.get("threads")
    if not threads:
        return ""
    scale, row_h = 4.0, 34                  # px per percent
    parts = []
    for i, (role, t) in enumerate(threads.items()):
        y = i * row_h
        parts.append('<text x="0" y="%d" font-size="12">%s</text>' % (
            y + 18, _e(role)))
        for j, key in enumerate(("offcpu", "runq")):
            pct = t[key + "_pct"]
            parts.append('<rect class="role-bar %s" x="150" y="%d" '
                         'width="%.1f" height="12"><title>%s %s: %.1f %%'
                         '</title></rect><text x="%.1f" y="%d" '
                         'font-size="10">%.1f %%</text>' % (
                             key, y + 4 + 14 * j, scale * pct, _e(role), key,
                             pct, 156 + scale * pct, y + 14 + 14 * j, pct))
    rows = [[r, t["threads"], "%.1f" % t["offcpu_pct"], "%.1f" % t["runq_pct"],
             "%.1f" % t["futex_pct_of_offcpu"], t["wakeups"]]
            for r, t in threads.items()]
    return ('<section id="roles"><h2>Threads by role: off CPU (grey) and '
            'waiting for a CPU (red), %% of time</h2><svg class="role-bars" '
            'width="%d" height="%d">%s</svg>%s</section>' % (
                150 + 100 * scale + 60, row_h * len(threads), "".join(parts),
                _table(["role", "threads", "% off CPU", "% run queue",
                        "% futex of off", "wake-ups"], rows)))


# --------------------------------------------------------------------------
# timeline

class _Geometry:
    """Monotonic ns -> plot x; tid -> lane top."""

    def __init__(self, timeline, lane_list):
        self.t0, t1 = timeline["window"]
        self.span = max(1, t1 - self.t0)
        self.top = {lane["tid"]: i * LANE_H for i, lane in
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


def _cpu_svg(g, lane_list):
    """Scheduler states; short ones merged (drawn in the state that took
    most of the run) so that at most ~2 * MAX_CPU_SEGMENTS are drawn.
    Returns the rects and how many states were merged away."""
    per_lane = min(4 * PLOT_W, MAX_CPU_SEGMENTS // max(1, len(lane_list)))
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
                             _cpu_title(g, s, e, ns)))
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
    lines += ["%s %s" % (n, _dur((e - s) / 1000.0))
              for n, s, e in op.get("stages", [])]
    return "\n".join(lines)


def _op_svg(g, op):
    """One op: queue_wait and op_total in the queue row, the stages the
    worker ran nested in the exec row."""
    top = g.top[op["tid"]]
    parts = ['<g class="op c-%s w-%s"><title>%s</title>' % (
        _cls(op.get("class")), _cls(op.get("wake")), _e(_op_title(g, op)))]
    run = []
    for name, s, e in op.get("stages", []):
        if name == "queue_wait":
            parts.append(_rect("stage s-queue_wait", g.x(s), g.x(e),
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


def _legend(colours):
    items = ['<span><i class="swatch" style="background:%s"></i>%s</span>' % (
        CPU_COLOURS[s], _e(CPU_LABELS[s])) for s in CPU_COLOURS]
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
    cpu, merged, min_ns = _cpu_svg(g, lane_list)
    plot += cpu
    plot += [_op_svg(g, op) for op in ops[:MAX_OPS]]
    plot += [_wake_svg(g, w) for w in wakeups[:MAX_WAKEUPS]]
    colours = _stage_colours(n for op in ops
                             for n, _, _ in op.get("stages", []))
    style = "".join(".s-%s{fill:%s}" % (_cls(n), c)
                    for n, c in colours.items())
    style += "".join(".cpu-%s{fill:%s}" % kv for kv in CPU_COLOURS.items())
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
            style, _legend(colours), _e(_dur(g.span / 1000.0)),
            _notes(ops, wakeups, merged, min_ns), GUTTER + PLOT_W,
            AXIS_H + h, GUTTER, "".join(labels), GUTTER, AXIS_H, PLOT_W, h,
            PLOT_W, h, PLOT_W, h, g.span, "".join(plot)))


# --------------------------------------------------------------------------

def render(rec, timeline, title=None):
    """The HTML page (str) for one report record and an optional timeline
    (None: no timeline section)."""
    body = [_header(rec, timeline, title), _verdict(rec), _attribution(rec),
            _timeline(timeline), _roles(rec),
            _stage_section("stages", "Stages", rec.get("stages")),
            _stage_section("kernel", "Kernel and scheduler stages",
                           rec.get("kernel"))]
    unavailable = rec.get("unavailable") or {}
    if unavailable:
        body.append('<p class="meta">unavailable: %s</p>' % _e("; ".join(
            "%s: %s" % kv for kv in unavailable.items())))
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<title>%s</title><script>%s</script><style>%s</style></head>'
            '<body>%s<script>%s</script></body></html>\n' % (
                _e(title or "cephlat report pid %s" % rec.get("pid")),
                ERROR_JS, CSS, "".join(body), ZOOM_JS))
