"""An OSD's op scheduler as reports word it: the settings read by
ceph/scheduler.py (a dict: queue, mclock, profile, classes {class: {res,
wgt, lim}}, device, capacity_setting, capacity_iops, capacity_source)."""


def limit_iops(sched, cls="client"):
    """The IOPS limit of class `cls` (lim x capacity), or None: no limit
    (lim 0), or the capacity is unknown."""
    if not sched or not sched.get("mclock"):
        return None
    lim = (sched.get("classes", {}).get(cls) or {}).get("lim")
    cap = sched.get("capacity_iops")
    if not lim or not cap:
        return None
    return lim * cap


SOURCES = {"default": "the default for %s devices",
           "mon": "set in the monitors' config (the start-up benchmark "
                  "stores its measurement there as osd.N)",
           "file": "set in ceph.conf",
           "override": "set at run time on the OSD",
           "cmdline": "set on the OSD's command line"}


def describe(sched):
    """One line naming the scheduler and its settings, or None."""
    if not sched:
        return None
    if not sched.get("mclock"):
        return "scheduler: %s (never holds queued ops)." % sched.get("queue")
    if "classes" not in sched:
        return "scheduler: mClock (no settings read: not an OSD)."
    parts = []
    classes = sched.get("classes", {})
    for c in sorted(classes, key=lambda c: (c != "client", c)):
        v = classes[c]
        parts.append("%s res %s wgt %s lim %s" % (
            c.replace("background_", "bg_"), fmt(v.get("res")),
            fmt(v.get("wgt")), fmt(v.get("lim")) if v.get("lim")
            else "none"))
    line = "scheduler: mClock, profile %s (%s)" % (sched.get("profile"),
                                                  "; ".join(parts))
    if sched.get("capacity_iops"):
        line += "; capacity %s IOPS (%s = %s, %s)" % (
            fmt(sched["capacity_iops"]), sched["capacity_setting"],
            fmt(sched["capacity_iops"]), source_words(sched))
    return line + "."


def source_words(sched):
    src = sched.get("capacity_source", "default")
    words = SOURCES.get(src, "set by " + src)
    return words % sched.get("device") if "%s" in words else words


def fmt(x):
    if x is None:
        return "?"
    return ("%.3f" % x).rstrip("0").rstrip(".")


def held_share(q):
    """The share of a scheduler class's queue wait the scheduler held (q:
    a by_queue_class entry: its summary and "held"'s), 0.0 without ops."""
    total = q["mean_us"] * q["count"]
    return q["held"]["mean_us"] * q["held"]["count"] / total if total \
        else 0.0
