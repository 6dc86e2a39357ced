"""The end-to-end view's part on writes librbd's cache acknowledged
before the OSDs had them: the table behind the acknowledgement, how
many writes the cache kept in flight against its limit, the writes it
held and whose completion let them go, and the verdict: the OSDs
behind the acks, or the client's writes outrunning the cluster (every
OSD's queue growing: a queue, not one replica)."""
import numpy as np

from ..model.acked import ACKED_KEYS, BEHIND_KEYS
from ..model.e2e import segment_table

# a flood: the writes in flight fill at least this share of the cache's
# limit, or this many are in flight (p50), and every primary's time at
# the end of the capture is this many times its time at the start
FULL_SHARE, MANY_WRITES, GROWTH = 0.5, 8, 1.5
_MIN_OPS = 8


def _pcts(v):
    v = np.sort(np.asarray(v, float))
    if not len(v):
        return None
    return {"p50": round(float(v[len(v) // 2]), 1),
            "p99": round(float(v[min(len(v) - 1, int(len(v) * 0.99))]), 1),
            "max": round(float(v[-1]), 1)}


def _in_flight(send, reply):
    """Per op, how many of the ops were in flight as it was sent."""
    s, r = np.sort(send), np.sort(reply)
    return np.searchsorted(s, send, "right") - np.searchsorted(r, send,
                                                               "right")


def _growth(seg, rows, send, names):
    """Per primary, its OSD time (p50) in the first and the last quarter
    of the acked writes (by send time)."""
    osd = seg["behind_us"][rows, BEHIND_KEYS.index("osd")]
    o = np.argsort(send)
    q = max(1, len(o) // 4)
    out = {}
    for name in sorted(set(names.tolist())):
        a = [x for x in o[:q] if names[x] == name and not np.isnan(osd[x])]
        b = [x for x in o[-q:] if names[x] == name and not np.isnan(osd[x])]
        if len(a) >= _MIN_OPS and len(b) >= _MIN_OPS:
            out[name] = (float(np.median(osd[a])), float(np.median(osd[b])))
    return out


def acked_view(seg, cl, p, caps, acked):
    """-> {"behind": segment_table of the "behind" group, "ops",
    "inferred", "in_flight_bytes", "limit_bytes", "writes_in_flight",
    "held", "held_pct", "held_us", "held_by": {primary: writes},
    "growth": {primary: [start us, end us]}, "verdict"} of the acked
    writes among the joined ops."""
    rows = np.flatnonzero(acked)
    j = p["j"][rows]
    names = np.array([caps[int(c)].name or "?" for c in p["cap"][rows]])
    send, reply = cl["send"][j], cl["reply"][j]
    inf = cl["cw_in_flight"][j]
    limit = int(cl["cw_max_dirty"][j].max(initial=-1))
    held = np.asarray(cl["cw_held"][j], bool)
    out = {"ops": int(len(rows)),
           "inferred": int(seg["inferred"][rows].sum()),
           "behind": segment_table(seg, acked, "behind"),
           "in_flight_bytes": _pcts(inf[inf >= 0]),
           "limit_bytes": limit if limit >= 0 else None,
           "writes_in_flight": _pcts(_in_flight(send, reply)),
           "held": int(held.sum()),
           "held_pct": round(100.0 * held.sum() / max(1, len(rows)), 1),
           "held_us": _pcts(seg["acked_us"][rows[held],
                                            ACKED_KEYS.index(
                                                "held_by_cache")])}
    # whose completion let the held writes go: its op's primary
    row_of = np.full(len(cl["send"]) + 1, -1, np.int64)
    row_of[p["j"]] = np.arange(len(p["j"]))
    by = cl["cw_held_by"][j[held]]
    at = row_of[np.where(by >= 0, by, len(cl["send"]))]
    who = {}
    for c in p["cap"][at[at >= 0]].tolist():
        name = caps[int(c)].name or "?"
        who[name] = who.get(name, 0) + 1
    out["held_by"] = who
    out["growth"] = {k: [round(a, 1), round(b, 1)] for k, (a, b) in
                     _growth(seg, rows, send, names).items()}
    return out


def verdict(v, replication):
    """The words on the acked writes (v: acked_view's), with the
    replicas' verdict only where a replica stands out."""
    b = {g["segment"]: g for g in v["behind"]["segments"]}
    g = v["growth"]
    inf, lim, w = v["in_flight_bytes"], v["limit_bytes"], \
        v["writes_in_flight"]
    full = bool(inf and lim and inf["p50"] >= FULL_SHARE * lim) or \
        bool(w and w["p50"] >= MANY_WRITES)
    grows = bool(g) and all(e >= GROWTH * a and e - a >= 1.0
                            for a, e in g.values())
    rep = (replication or {}).get("verdict") or {}
    if full and grows:
        words = ("the client's writes outran the cluster: the cache "
                 "acknowledged them at once and kept %s in flight%s; every "
                 "OSD's time grew over the capture (%s): a queue building "
                 "up, not one slow replica." % (
                     "%d writes (p50; max %d)" % (w["p50"], w["max"])
                     if w else "them",
                     " against a limit of %d bytes" % lim if lim else "",
                     ", ".join("%s %.0f -> %.0f us" % (k, a, e)
                               for k, (a, e) in sorted(g.items()))))
        if rep.get("replica"):
            words += " Of the replicas, " + rep["words"]
        return {"cause": "outran", "words": words}
    words = "the OSDs were behind the acknowledgement"
    if "behind" in b:
        words += ": the data was on every replica %.1f us after it at p50, " \
                 "%.1f us at p99" % (b["behind"]["p50_us"],
                                     b["behind"]["p99_us"])
    if v["held"] and v["held_us"]:
        words += "; the cache held %.0f %% of the writes for %.1f us at p50" \
                 % (v["held_pct"], v["held_us"]["p50"])
        if v["held_by"]:
            top = max(v["held_by"], key=v["held_by"].get)
            words += ", let go by writes to %s (%d of %d)" % (
                top, v["held_by"][top], v["held"])
    if v["inferred"]:
        words += " (%d of %d acknowledged early by inference: the trace " \
                 "has no record of the cache)" % (v["inferred"], v["ops"])
    return {"cause": "behind", "words": words + "."}
