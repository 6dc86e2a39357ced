"""--summary's part on librbd's cache: per image, the policy in effect
(what the cache's recorded writes say librbd did), how many writes it
acknowledged before the OSDs had them, wrote through or held, how far
the OSDs were behind the acknowledgements; the settings the client was
configured with beside them. A trace without the cache's records says
so, and counts the write calls that completed before the last reply of
their ops: acknowledged early, inferred."""
import numpy as np

from . import cacheconf
from .cache import STATES
from .columns import CALL_OPS
from ..ceph import librbd_cache
from ..model.table import NONE, pcts


def _policy(states):
    """The policy the states tell (rbd_cache_policy), and whether
    write-around began only after a flush."""
    pol = sorted({librbd_cache.POLICY[STATES[s]] for s in states})
    return " and ".join(pol)


def _image(cc, rows, calls):
    cw = cc.cache
    st = cw.state[rows]
    count = {s: int((st == i).sum()) for i, s in enumerate(STATES)
             if (st == i).any()}
    early = np.isin(st, [STATES.index(s) for s in librbd_cache.ACKED_EARLY])
    held = rows[st == STATES.index("queued")]
    out = {"policy": _policy(set(st.tolist())), "writes": int(len(rows)),
           "states": count, "acked_early": int(early.sum()),
           "written_through": int(sum(count.get(s, 0) for s in (
               "through", "fua", "oc_through"))),
           "held": int(len(held)),
           "limit_bytes": int(cw.max_dirty[rows].max(initial=0)),
           "configured_limit_bytes": int(cw.init_max_dirty[rows].max(
               initial=0)),
           "in_flight_bytes": pcts(cw.in_flight[rows])}
    rel = cw.release[held]
    out["held_us"] = pcts((rel[rel != NONE] - cw.ts[held][rel != NONE]) /
                           1e3)
    e = rows[early]
    c = cw.call[e]
    ok = (c >= 0) & (cw.done[e] != NONE)
    behind = (cw.done[e][ok] - calls.done[c[ok]]) / 1e3
    out["behind_us"] = pcts(np.maximum(behind, 0))
    out["acked_after_the_osds"] = int((behind < 0).sum())
    if count.get("through") and (early.any()):
        first = cw.ts[e].min()
        out["write_through_until_ns"] = int(first)
    return out


def inferred(cc):
    """Without the cache's records: per image, write calls whose linked
    ops' last reply came after the call completed (acknowledged before
    the OSDs had the data: a cache, inferred), of the write calls with
    linked ops."""
    calls, ops = cc.calls, cc.ops
    out = {}
    if not len(calls) or not len(ops):
        return out
    last = np.full(len(calls), NONE, np.int64)
    m = (ops.request >= 0) & (ops.reply != NONE)
    np.maximum.at(last, ops.request[m], ops.reply[m])
    write = np.isin(calls.op, [CALL_OPS.index(o) for o in CALL_OPS
                               if o not in ("read", "flush")])
    has = write & (last != NONE)
    early = has & (last > calls.done)
    for img in np.unique(calls.image[has]).tolist():
        k = calls.image == img
        out[img] = {"write_calls_with_ops": int((has & k).sum()),
                    "acked_early": int((early & k).sum()),
                    "behind_us": pcts((last[early & k] -
                                        calls.done[early & k]) / 1e3)}
    return out


def cache_summary(tr):
    """{"recorded", "configured": {setting: "value (source)"}, "images":
    {name: the cache's figures}, "inferred": bool}"""
    out = {"recorded": bool(int(tr.env.get("cache_recorded", 0) or 0)),
           "configured": cacheconf.from_env(tr.env), "images": {},
           "inferred": False}
    cc = tr.cols
    if cc is None:
        return out
    cw = cc.cache
    for img in np.unique(cw.image).tolist():
        rows = np.flatnonzero(cw.image == img)
        d = _image(cc, rows, cc.calls)
        # rbd_flush calls and rbd_aio_flush ones
        d["user_flushes"] = len(cc.flushes.get(img, [])) + int(
            ((cc.calls.op == CALL_OPS.index("flush")) &
             (cc.calls.image == img)).sum()) if len(cc.calls) else \
            len(cc.flushes.get(img, []))
        out["images"][tr.image_name(img)] = d
    if not len(cw):
        out["inferred"] = True
        for img, d in inferred(cc).items():
            out["images"][tr.image_name(img)] = dict(d, policy=None)
    out["recorded"] = out["recorded"] or bool(len(cw))
    return out


def write_cache(out, c, whole=None):
    """One image's cache figures (c), or (whole) the trace's lines: the
    configured settings, and what was not recorded."""
    if whole is not None:
        if whole["configured"]:
            out.write("librbd cache settings configured (the process's; "
                      "image and pool settings may differ):\n")
            for k, v in sorted(whole["configured"].items()):
                out.write("  %s = %s\n" % (k, v))
        if not whole["recorded"]:
            out.write("librbd's cache not recorded (librbd1-dbg missing "
                      "when recording?)%s\n" % (
                          ": acked early below is inferred from the OSD "
                          "replies" if whole["images"] else ""))
        return
    if c.get("policy") is None:
        out.write("  cache (inferred): %d of %d write calls completed "
                  "before their ops' last reply%s\n" % (
                      c["acked_early"], c["write_calls_with_ops"],
                      _behind(c)))
        return
    out.write("  cache in effect: %s, limit %d bytes in flight; %d writes: "
              "%d acked early, %d written through, %d held%s\n" % (
                  c["policy"], c["limit_bytes"], c["writes"],
                  c["acked_early"], c["written_through"], c["held"],
                  ", %d user flushes" % c["user_flushes"]
                  if c.get("user_flushes") else ""))
    if c["acked_early"]:
        out.write("  the OSDs behind the acknowledgement%s; in flight at "
                  "each write p50 %d, max %d bytes\n" % (
                      _behind(c) or " (no completion seen)",
                      c["in_flight_bytes"]["p50"],
                      c["in_flight_bytes"]["max"]))
    if c["held"] and c["held_us"]:
        out.write("  held by the cache: p50 %.1f us, p99 %.1f us\n" % (
            c["held_us"]["p50"], c["held_us"]["p99"]))


def _behind(c):
    b = c.get("behind_us")
    return ": p50 %.1f us, p99 %.1f us after the ack" % (
        b["p50"], b["p99"]) if b else ""
