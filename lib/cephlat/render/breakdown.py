"""A window's breakdown by client, pool, PG or image (osdstage -r --by;
model/breakdown.py's Breakdown) as text: a heading, the line saying
whether one key dominates, the top-K table and its "other" row. With
-j it is the window object's "by" (its record)."""

# what the heading and the verdict-like line call a key
_NAMES = {"client": ("CLIENT", "client"), "pool": ("POOL", "pool"),
          "pg": ("PG", "PG"), "image": ("IMAGE", "image")}
KEY_WIDTH = 20


def _cut(key):
    return key if len(key) <= KEY_WIDTH else key[:KEY_WIDTH - 1] + "~"


def _num(v):
    """A time in 9 columns: to 0.1 below a million, else whole."""
    t = "%9.1f" % v if v < 1e6 else "%9.0f" % v
    return t if len(t) <= 9 else "%9.2e" % v


def _pct(v):
    return "-" if v is None else "%.0f%%" % v


def dominant_line(bd):
    """The line under the heading: the key that holds half or more of
    both the ops and the queue wait, or that none does."""
    if not bd.ops:
        return "no client op completed in the window"
    name = _NAMES[bd.key][1]
    d = bd.dominant
    if d:
        return "%s: %.0f %% of the ops and %.0f %% of the queue wait" % (
            d["key"], d["ops_pct"], d["queue_wait_pct"])
    return "no one %s holds half of both the ops and the queue wait" % name


def print_breakdown(out, opts, bd, whose=None, missed=0):
    """The breakdown `bd` as text (opts: TextOptions; -m: times in ms);
    whose: the OSD's name, when the capture or run holds several; missed:
    a live run's ops that were not handed over (their ring was full)."""
    div, unit = (1000.0, "ms") if opts.milliseconds else (1.0, "us")
    head = _NAMES[bd.key][0]
    out.write("BY %s%s (%d op%s)\n" % (
        head, ", " + whose if whose else "", bd.ops,
        "" if bd.ops == 1 else "s"))
    out.write(dominant_line(bd) + "\n")
    if missed:
        out.write("%d more op%s completed, not counted here (the ring that "
                  "hands them over was full)\n" % (
                      missed, "" if missed == 1 else "s"))
    if not bd.ops:
        out.flush()
        return
    out.write("%-*s %7s %5s %9s %9s %9s %9s %5s\n" % (
        KEY_WIDTH, head, "OPS", "%OPS", "OP_P50", "OP_P99", "QWAIT_P50",
        "QWAIT_P99", "%QW"))
    rows = list(bd.rows)
    if bd.other:
        rows.append(dict(bd.other, key="other (%d)" % bd.other["keys"]))
    for r in rows:
        out.write("%-*s %7d %5s %s %s %s %s %5s\n" % (
            KEY_WIDTH, _cut(r["key"]), r["ops"], _pct(r["ops_pct"]),
            *(_num(r[k] / div) for k in ("op_total_p50_us",
                                         "op_total_p99_us",
                                         "queue_wait_p50_us",
                                         "queue_wait_p99_us")),
            _pct(r["queue_wait_pct"])))
    out.write("(op_total and queue_wait in %s; the top %d by total op "
              "time%s)\n" % (unit, bd.top,
                             ", the rest as other" if bd.other else ""))
    out.flush()
