"""One self-contained HTML page for a report, an Interval
(model/interval.py), and a timeline.

render(iv, timeline) -> str: no external resources (inline CSS, inline
SVG drawn here, a little inline JS for zooming the timeline). Sections
and the DOM a test can check:
  #verdict      cause and verdict text
  #stages       summary table; svg.hist per stage with rect.bar buckets
  #kernel       the same for kernel stages
  #attribution  svg.attr-bar (rect.attr-part) and the table; #wakers, #shards
  #roles        rect.role-bar per role (offcpu, runq) and the threads table
  svg#timeline  rect.lane per thread, rect.cpu-run/.cpu-runq/.cpu-sleep,
                g.op with rect.stage children, line.wake (wake-up arrows)
render_host(ivs, host) draws several OSDs of one capture: one timeline
(g.osd-band[data-osd] per OSD, line.flow[data-flow] arrows of replicated
writes between them) and a section.osd[data-osd] per OSD with the
sections above (their ids prefixed "osd.N-").
The page records JS errors in <html data-js-errors> and sets
<html data-js-ready="1"> once its script ran. Ops without a worker tid
(never dequeued) are left out; at most MAX_OPS ops are drawn, and runs of
scheduler states too short to see are merged.
"""
from ..model import report, sched as schedmod, verdict
from .html_timeline import _host_timeline, _timeline
from .htmlbits import HELD_COLOUR, LOCK_COLOUR, _cls, _dur, _e, _table, _wall


ATTR_COLOURS = {"held": HELD_COLOUR, "busy": "#4e79a7", "lock": LOCK_COLOUR,
                "blocked": "#9c755f", "signal": "#f28e2b", "runq": "#e15759",
                "pickup": "#76b7b2"}

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
        _e(verdict.CAUSES.get(cause, cause)), lines)


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


def _buckets(hists, key):
    """The log2 buckets (us) of Hist `key` of an Interval's hists (none
    when it has no such histogram)."""
    h = hists.get(key)
    return h.log2_buckets(1) if h is not None else []


def _stage_section(sid, heading, stages, hists, prefix=""):
    """The stages the record shows: their table, and a chart each of
    those with events from the Interval's Hist objects (`prefix` + the
    stage's name)."""
    if not stages:
        return ""
    charts = [(n, _buckets(hists, prefix + n)) for n, s in stages.items()
              if s["count"]]
    svgs = "".join(_hist_svg(n, b) for n, b in charts
                   if any(c for _, _, c in b))
    return '<section id="%s"><h2>%s</h2>%s<div class="hists">%s</div>' \
        '</section>' % (sid, _e(heading), _table(
            ["stage", "count", "mean us", "p50 us", "p90 us", "p99 us",
             "max us"], _summary_rows(stages)), svgs)


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
                                          report.attr_label(p, attr),
                                          100 * share))
        if w * share > 90:
            parts.append('<text x="%.1f" y="17" fill="#fff" font-size="12">'
                         '%s %.0f %%</text>' % (x + 6,
                                                report.attr_label(p, attr),
                                                100 * share))
        x += w * share
    rows = [[report.attr_label(p, attr), "%.1f" % attr[p]["mean_us"],
             "%.1f" % attr[p]["p50_us"], "%.1f" % attr[p]["p99_us"],
             "%.0f %%" % (100 * attr[p]["share"])]
            for p in attr]
    return ('<section id="attribution"><h2>Queue-wait attribution</h2>'
            '<svg class="attr-bar" width="%d" height="26">%s</svg>%s%s%s'
            '</section>' % (w, "".join(parts), _table(
                ["part", "mean us", "p50 us", "p99 us", "share"], rows),
                _wakers(rec), _shards(rec) + _queue_classes(rec)))


def _queue_classes(rec):
    """The ops dequeued by scheduler class: how many, their queue wait and
    the share of it the scheduler held (as the text report's table)."""
    qc = (rec.get("stages") or {}).get("queue_wait", {}).get(
        "by_queue_class") or {}
    rows = [[c, q["count"], "%.1f" % q["mean_us"], "%.1f" % q["p99_us"],
             "%.0f %%" % (100 * schedmod.held_share(q))]
            for c, q in qc.items() if q["count"]]
    if not rows:
        return ""
    return "<h3>Per scheduler class</h3>" + _table(
        ["scheduler class", "ops", "qwait mean us", "qwait p99 us", "held"],
        rows, "queue-classes")


def _wakers(rec):
    w = rec.get("wakers")
    if not w:
        return ""
    return '<h3>Who woke sleeping workers with an op queued</h3>' + _table(
        ["waker", "count"],
        [[report.WAKER_WORDS.get(k, (k, k))[0] +
          (" (missed wake-up)" if k == "timeout" else ""), n]
         for k, n in w.items() if k != "timeouts_with_work"] +
        [["timed waits that found work", w["timeouts_with_work"]]],
        "wakers")


def _shards(rec):
    parts = list(rec.get("attribution") or ())
    rows = [[r["shard"], r["workers"], r["ops"],
             "%.1f" % r["queue_wait_mean_us"]] +
            ["%.0f %%" % (100 * r.get(p, 0)) for p in parts] +
            [r["timeouts_with_work"]] for r in rec.get("shards") or []]
    if not rows:
        return ""
    return "<h3>Per shard</h3>" + _table(
        ["shard", "workers", "ops", "qwait us"] + parts + ["timeouts"], rows,
        "shards")


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


# --------------------------------------------------------------------------

def _stage_sections(iv):
    """The stages' and the kernel stages' sections of Interval `iv`."""
    rec = iv.record
    return [_stage_section("stages", "Stages", rec.get("stages"), iv.hists),
            _stage_section("kernel", "Kernel and scheduler stages",
                           rec.get("kernel"), iv.hists, "kernel.")]


def render(iv, timeline, title=None):
    """The HTML page (str) for one report, an Interval (its record's
    tables, its Hist objects' charts), and an optional timeline (None:
    no timeline section)."""
    rec = iv.record
    body = [_header(rec, timeline, title), _verdict(rec), _attribution(rec),
            _timeline(timeline), _roles(rec)] + _stage_sections(iv)
    unavailable = rec.get("unavailable") or {}
    if unavailable:
        body.append('<p class="meta">unavailable: %s</p>' % _e("; ".join(
            "%s: %s" % kv for kv in unavailable.items())))
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<title>%s</title><script>%s</script><style>%s</style></head>'
            '<body>%s<script>%s</script></body></html>\n' % (
                _e(title or "osdstage report pid %s" % rec.get("pid")),
                ERROR_JS, CSS, "".join(body), ZOOM_JS))


HOST_CSS = """
section.osd{border-top:2px solid #bbb;margin-top:1.5em}
section.osd > section[id$="-verdict"]{border-left:6px solid #c33;
  background:#fff4f2;padding:.6em 1em}
"""


def _osd_section(k, name, iv):
    """One OSD's report sections (its Interval `iv`), their ids prefixed
    with its name."""
    rec = iv.record
    body = "".join([_verdict(rec), _attribution(rec), _roles(rec)] +
                   _stage_sections(iv))
    body = body.replace(' id="', ' id="%s-' % _cls(name))
    return ('<section class="osd" id="osd-%d" data-osd="%s"><h2>%s, '
            'ceph-osd pid %s</h2>%s</section>' % (
                k, _e(name), _e(name), _e(rec.get("pid")), body))


def render_host(ivs, host, title=None):
    """The HTML page (str) for several OSDs of one capture: `ivs` their
    reports [(name, Interval)] over the window, `host` their timeline
    (model/timeline.py host_timeline; None: no timeline section)."""
    names = [n for n, _ in ivs]
    recs = [(n, iv.record) for n, iv in ivs]
    rec0 = recs[0][1] if recs else {}
    if host:
        t0, t1 = host["window"]
        off = host.get("clock_offset_ns", 0)
        window = "%s to %s (%s)" % (_wall((t0 + off) / 1e9),
                                    _wall((t1 + off) / 1e9),
                                    _dur((t1 - t0) / 1000.0))
    else:
        window = "%s to %s" % (_wall(rec0["ts"] - rec0["interval_s"]),
                               _wall(rec0["ts"]))
    head = ('<h1>%s</h1><p class="meta">%s; Ceph %s; window %s</p>'
            '<p class="meta">%s</p>' % (
                _e(title or "OSD stage latency, %d OSDs" % len(recs)),
                _e(", ".join("%s pid %s" % (n, r.get("pid"))
                             for n, r in recs)),
                _e(rec0.get("ceph_version")), _e(window),
                " ".join('<a href="#osd-%d">%s</a>' % (k, _e(n))
                         for k, n in enumerate(names))))
    body = [head, _host_timeline(host) if host else ""]
    body += [_osd_section(k, n, iv) for k, (n, iv) in enumerate(ivs)]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<title>%s</title><script>%s</script><style>%s%s</style></head>'
            '<body>%s<script>%s</script></body></html>\n' % (
                _e(title or "osdstage report %s" % ", ".join(names)),
                ERROR_JS, CSS, HOST_CSS, "".join(body), ZOOM_JS))
