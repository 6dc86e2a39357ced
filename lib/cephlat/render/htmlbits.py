"""Small pieces of HTML shared by the report page and its timeline."""
import html
import re
import time

STAGE_COLOURS = {
    "queue_wait": "#f1a340", "op_total": "#555555", "dequeue_op": "#4e79a7",
    "do_op": "#59a14f", "get_object_context": "#b07aa1",
    "bluestore_read": "#e15759", "bluestore_submit": "#ff9da7",
    # the messenger stages, before the enqueue
    "throttle_wait": "#d37295", "recv": "#a0cbe8", "dispatch": "#8cd17d",
}


# an op scheduler's hold: the attribution's "held" part and a worker's
# held sleep on the timeline
HELD_COLOUR = "#b07aa1"
# a wait for a lock: the attribution's "lock" part and a worker's lock
# wait on the timeline
LOCK_COLOUR = "#ff9da7"

SPARE_COLOURS = ["#76b7b2", "#edc948", "#9c755f", "#17becf", "#bcbd22"]



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

