"""A window's breakdown by client, pool, PG or image (osdstage -r --by;
model/breakdown.py's Breakdown) as text: a heading, the line saying
whether one key dominates, the top-K table and its "other" row. With
-j it is the window object's "by" (its record)."""
import textwrap

# what the heading and the verdict-like line call a key
_NAMES = {"client": ("CLIENT", "client"), "pool": ("POOL", "pool"),
          "pg": ("PG", "PG"), "image": ("IMAGE", "image")}
KEY_WIDTH = 18


def _cut(key):
    return key if len(key) <= KEY_WIDTH else key[:KEY_WIDTH - 1] + "~"


def _client(key):
    """A client key's entity and the words after it in brackets (its
    cephx name, or that it is the tool's own look-up) -> (entity, words
    or None)."""
    entity, sep, rest = key.partition(" (")
    if sep and rest.endswith(")"):
        return entity, rest[:-1]
    return key, None


def _num(v):
    """A time in 8 columns: to 0.1 below 100,000, else whole."""
    t = "%8.1f" % v if v < 1e5 else "%8.0f" % v
    return t if len(t) <= 8 else "%8.1e" % v


def _size(v):
    """Bytes in 6 columns, in units of 1024 (K, M, G, T); "-": not
    known."""
    if v is None:
        return "%6s" % "-"
    for unit in ("", "K", "M", "G", "T"):
        if v < 1024 or unit == "T":
            break
        v /= 1024.0
    if not unit:
        return "%6d" % v
    return "%6s" % (("%.1f%s" if v < 100 else "%.0f%s") % (v, unit))


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
    out.write("%-*s %7s %4s %8s %8s %8s %4s %6s %6s\n" % (
        KEY_WIDTH, head, "OPS", "%OPS", "OP_P50", "OP_P99", "QW_P99",
        "%QW", "IN", "OUT"))
    rows = list(bd.rows)
    whose = []              # a client's cephx name, under the table
    if bd.key == "client":
        for i, r in enumerate(rows):
            entity, words = _client(r["key"])
            if words:
                whose.append("%s %s" % (entity, words))
                rows[i] = dict(r, key=entity)
    if bd.other:
        rows.append(dict(bd.other, key="other (%d)" % bd.other["keys"]))
    for r in rows:
        out.write("%-*s %7d %4s %s %s %s %4s %s %s\n" % (
            KEY_WIDTH, _cut(r["key"]), r["ops"], _pct(r["ops_pct"]),
            *(_num(r[k] / div) for k in ("op_total_p50_us",
                                         "op_total_p99_us",
                                         "queue_wait_p99_us")),
            _pct(r["queue_wait_pct"]), _size(r.get("bytes_in")),
            _size(r.get("bytes_out"))))
    out.write("(op_total and queue_wait (QW) in %s; IN and OUT: the bytes "
              "the ops wrote\nand read, in units of 1024; the top %d by "
              "total op time%s)\n" % (
                  unit, bd.top, ", the rest as other" if bd.other else ""))
    if whose:
        out.write(textwrap.fill("(clients as the cluster knows them: %s)"
                                % ", ".join(whose), 80,
                                break_long_words=False) + "\n")
    out.flush()
