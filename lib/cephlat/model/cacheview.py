"""The end-to-end view's part on writes librbd's cache acknowledged
before the OSDs had them: the table behind the acknowledgement, how
many writes the cache kept in flight against its limit, the writes it
held and whose completion let them go, and the verdict: the OSDs
behind the acks, or the client's writes outrunning the cluster (every
OSD's queue growing: a queue, not one replica)."""
import numpy as np

from .acked import ACKED_KEYS
from .e2e import segment_table
from .table import NONE, pcts

# a flood: at least this many writes in flight at the OSDs (p50), this
# many times the calls the application itself had in flight, and at
# least FLOOD_EACH at every primary. Under a flood a replica is named
# only when it stands out from the queue: last of this share of its
# writes and this many times the other replicas' time.
MANY_WRITES, OUTRUN, FLOOD_EACH = 8, 4.0, 2
FLOOD_LAST_PCT, FLOOD_RATIO = 90.0, 2.0


def _in_flight(send, reply):
    """Per op, how many of the ops were in flight as it was sent."""
    s, r = np.sort(send), np.sort(reply)
    return np.searchsorted(s, send, "right") - np.searchsorted(r, send,
                                                               "right")


def _per_primary(send, reply, names):
    """Per primary, its writes in flight as each of them was sent (p50)."""
    return {name: pcts(_in_flight(send[names == name],
                                   reply[names == name]))["p50"]
            for name in sorted(set(names.tolist()))}


def _calls_in_flight(cl, j):
    """The application's calls in flight as each of the calls of client
    ops `j` was submitted (each call once)."""
    k = np.unique(cl["call"][j])
    k = k[k >= 0]
    c = cl["calls"]
    if not len(k) or not len(c):
        return None
    sub, done = c.submit[k], c.done[k]
    ok = (sub != NONE) & (done != NONE)
    return pcts(_in_flight(sub[ok], done[ok])) if ok.any() else None


def acked_view(seg, cl, p, caps, acked):
    """-> {"behind": segment_table of the "behind" group, "ops",
    "inferred", "in_flight_bytes", "limit_bytes", "writes_in_flight",
    "held", "held_pct", "held_us", "held_by": {primary: writes},
    "calls_in_flight", "per_osd_in_flight": {primary: p50}, "verdict"}
    of the acked writes among the joined ops (p: the join's columns,
    model/e2e_table.py; caps: the captures' names, by p["cap"])."""
    rows = np.flatnonzero(acked)
    j = p["j"][rows]
    names = np.array([caps[int(c)] or "?" for c in p["cap"][rows]])
    send, reply = cl["send"][j], cl["reply"][j]
    inf = cl["cw_in_flight"][j]
    limit = int(cl["cw_max_dirty"][j].max(initial=-1))
    held = np.asarray(cl["cw_held"][j], bool)
    out = {"ops": int(len(rows)),
           "inferred": int(seg["inferred"][rows].sum()),
           "behind": segment_table(seg, acked, "behind"),
           "in_flight_bytes": pcts(inf[inf >= 0]),
           "limit_bytes": limit if limit >= 0 else None,
           "writes_in_flight": pcts(_in_flight(send, reply)),
           "held": int(held.sum()),
           "held_pct": round(100.0 * held.sum() / max(1, len(rows)), 1),
           "held_us": pcts(seg["acked_us"][rows[held],
                                            ACKED_KEYS.index(
                                                "held_by_cache")])}
    # whose completion let the held writes go: its op's primary
    row_of = np.full(len(cl["send"]) + 1, -1, np.int64)
    row_of[p["j"]] = np.arange(len(p["j"]))
    by = cl["cw_held_by"][j[held]]
    at = row_of[np.where(by >= 0, by, len(cl["send"]))]
    who = {}
    for c in p["cap"][at[at >= 0]].tolist():
        name = caps[int(c)] or "?"
        who[name] = who.get(name, 0) + 1
    out["held_by"] = who
    out["calls_in_flight"] = _calls_in_flight(cl, j)
    out["per_osd_in_flight"] = _per_primary(send, reply, names)
    return out


def flood(v):
    """Whether the cache let the client put far more writes in flight
    than it waited for, with writes waiting at every primary."""
    w, c, per = v["writes_in_flight"], v.get("calls_in_flight"), \
        v.get("per_osd_in_flight") or {}
    return bool(w and per) and w["p50"] >= MANY_WRITES and \
        w["p50"] >= OUTRUN * max(1.0, c["p50"] if c else 1.0) and \
        min(per.values()) >= FLOOD_EACH


def stands_out(rep):
    """A replica verdict's replica, if it stands out from a flood."""
    if not rep or not rep.get("replica"):
        return None
    mine = rep["way_p50_us"] + rep["replica_p50_us"]
    others = rep["others_way_p50_us"] + rep["others_replica_p50_us"]
    return rep["replica"] if rep["last_pct"] >= FLOOD_LAST_PCT and \
        mine >= FLOOD_RATIO * max(others, 1e-9) else None


def verdict(v, replication):
    """The words on the acked writes (v: acked_view's). Under a flood the
    replicas' verdict is kept only where its replica stands out from
    the queue; -> {"cause", "words", "replica": the replica named}."""
    b = {g["segment"]: g for g in v["behind"]["segments"]}
    inf, lim, w = v["in_flight_bytes"], v["limit_bytes"], \
        v["writes_in_flight"]
    rep = (replication or {}).get("verdict") or {}
    if flood(v):
        c, per = v.get("calls_in_flight"), v["per_osd_in_flight"]
        slow = stands_out(rep)
        words = ("the client's writes outran the cluster: the cache "
                 "acknowledged them at once, the application had %s call%s "
                 "in flight (p50) while %d writes (p50; %d at most) were in "
                 "flight to the OSDs%s; writes waited at every primary (%s "
                 "in flight, p50): %s" % (
                     "%d" % c["p50"] if c else "few",
                     "" if c and c["p50"] == 1 else "s",
                     w["p50"], w["max"],
                     ", %d bytes of a limit of %d" % (inf["p50"], lim)
                     if inf and lim else "",
                     ", ".join("%s %d" % kv for kv in sorted(per.items())),
                     "a queue at all of them; of the replicas, one stands "
                     "out of it: " + rep["words"] if slow else
                     "a queue, not one slow replica."))
        return {"cause": "outran", "words": words, "replica": slow}
    words = "the OSDs were behind the acknowledgement"
    if "behind" in b:
        words += ": the data was on every replica %.1f us after it at p50, " \
                 "%.1f us at p99" % (b["behind"]["p50_us"],
                                     b["behind"]["p99_us"])
    if v["held"] and v["held_us"]:
        words += "; the cache's limit held the client: %.0f %% of the " \
                 "writes waited %.1f us at p50 for earlier ones to be on " \
                 "every replica%s" % (
                     v["held_pct"], v["held_us"]["p50"],
                     " (rbd_cache_max_dirty %d bytes)" % lim if lim else "")
    if rep.get("replica"):
        words += "; of the replicas, " + rep["words"].rstrip(".")
    if v["inferred"]:
        words += " (%d of %d acknowledged early by inference: the trace " \
                 "has no record of the cache)" % (v["inferred"], v["ops"])
    return {"cause": "behind", "words": words + ".",
            "replica": rep.get("replica")}


def flushes(cl, j):
    """Under writeback the application waits for the OSDs only in its
    flushes: -> {"calls", "lat_us": p50/p99/max of the flush calls,
    "writes": the cache's writes (client ops `j`) sent while a flush was
    waiting, "write_us": their send -> reply p50/p99/max}. cl: the
    clients' ops (rbd/clientops.py: client_columns), its calls' op codes
    named by cl["call_ops"]."""
    c = cl["calls"]
    f = np.flatnonzero((c.op == cl["call_ops"].index("flush")) &
                       (c.submit != NONE) & (c.done != NONE)) \
        if len(c) else np.zeros(0, np.int64)
    send = cl["send"][j]
    inside = np.zeros(len(j), bool)
    if len(f):
        o = np.argsort(c.submit[f])
        sub = c.submit[f][o]
        done = np.maximum.accumulate(c.done[f][o])
        k = np.searchsorted(sub, send, "right") - 1
        inside = (k >= 0) & (send <= done[np.maximum(k, 0)])
    return {"calls": int(len(f)),
            "lat_us": pcts((c.done[f] - c.submit[f]) / 1e3),
            "writes": int(inside.sum()), "of": int(len(j)),
            "write_us": pcts((cl["reply"][j] - send) / 1e3)}
