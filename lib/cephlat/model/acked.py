"""Writes acknowledged by librbd's cache before the OSDs had them, end to
end: the application's part (its segments add up to the latency the
application saw) and what went on behind the acknowledgement (the
OSD path, how long after the ack the data was on every replica).

A write is acknowledged early when the cache's records say so (the
write-around cache sent it and acked it at once, or held it and acked
it when it let it go; the ObjectCacher acked it from its memory), or,
in a trace without them, when its call completed before its op's reply
(inferred: flagged so). Its call's completion then precedes the reply:
the segments of a write acked after the OSDs (completion = the reply to
the op's end) would be negative; these never are. A segment that still
comes out negative on the client's one clock means two of its events
came in an order librbd does not produce (a link to the wrong call): it
is "unknown", counted as out of order, never a negative time.
"""
import numpy as np

from .table import NONE, tenths_us

ACKED_SEGMENTS = [
    ("librbd", "the librbd call to the cache taking the write (without "
               "the cache's records: to the op's send or the call's end, "
               "the earlier)"),
    ("held_by_cache", "held by the cache (rbd_cache_max_dirty bytes in "
                      "flight, or an overlapping write) until an earlier "
                      "write finished on the OSDs"),
    ("ack", "the cache's acknowledgement to the application's callback"),
    ("application", "the application's callback to its taking the result "
                    "(rbd_aio_release)"),
]
BEHIND_SEGMENTS = [
    ("behind", "the acknowledgement to the op's reply: how long the "
               "application went on before the data was on every replica"),
    ("durable", "the call to librbd knowing the write on every replica "
                "(the cache's completion; without its records the op's)"),
    ("client_queue", "the cache letting the write go to the op's send: "
                     "librbd's dispatch below the cache (its I/O "
                     "scheduler, which can hold and merge an object's "
                     "writes) and the Objecter's limit on ops in flight "
                     "(objecter_inflight_ops)"),
    ("to_osd", "the client's messenger and the network, to the primary"),
    ("messenger", "the primary's messenger: first stamp to its enqueue"),
    ("osd", "the primary: queue, execute, replicas, to its reply"),
    ("to_client", "the reply: the network and the client's messenger"),
    ("cache_done", "the reply to librbd's cache seeing the write done"),
]
# the cache's record of an op the segments read (which, _spans, _behind),
# beside the op's times: early (1, 0, -1: no record), when it was taken,
# held (the cache held it), released, done (NONE: not recorded)
CW = ("cw_early", "cw_ts", "cw_held", "cw_release", "cw_done")
ACKED_KEYS = [k for k, _ in ACKED_SEGMENTS]
BEHIND_KEYS = [k for k, _ in BEHIND_SEGMENTS]
_NET = (BEHIND_KEYS.index("to_osd"), BEHIND_KEYS.index("to_client"))
# the segments of the client's own events (one clock: a negative one is
# events out of the order librbd makes them)
_CLIENT_ONLY = [BEHIND_KEYS.index(k) for k in ("behind", "durable",
                                               "client_queue",
                                               "cache_done")]


def _get(t, k, n, fill=NONE):
    v = t.get(k)
    return np.full(n, fill, np.int64) if v is None else np.asarray(v)


def which(t):
    """-> (acked: bool per op, inferred: bool per op). t: the segment
    inputs with "write" (bool), "cw_early" (1: the cache acked it early,
    0: it did not, -1: no cache record of it)."""
    n = len(t["send"])
    early = _get(t, "cw_early", n, -1)
    write = _get(t, "write", n, 0).astype(bool)
    call = t["call_done"] != NONE
    inferred = (early < 0) & write & call & (t["reply"] != NONE) & \
        (t["call_done"] < t["reply"])
    return (early > 0) | inferred, inferred


def _spans(t, rows):
    """The application's part of acked ops `rows` -> ops x ACKED_KEYS ns."""
    g = {k: v[rows] for k, v in t.items() if isinstance(v, np.ndarray)}
    n = len(rows)
    sub, cd, rel = g["submit"], g["call_done"], g["released"]
    rec = _get(g, "cw_ts", n) != NONE
    take = np.where(rec, _get(g, "cw_ts", n), np.minimum(g["send"], cd))
    release = _get(g, "cw_release", n)
    held = rec & _get(g, "cw_held", n, 0).astype(bool) & (release != NONE)
    out_at = np.where(held, np.minimum(release, cd), take)
    end = np.where((rel != NONE) & (rel >= cd), rel, cd)
    us = np.full((n, len(ACKED_KEYS)), np.nan)
    us[:, 0] = take - sub
    us[:, 1] = np.where(rec, out_at - take, np.nan)
    us[:, 2] = cd - out_at
    us[:, 3] = np.where(rel != NONE, end - cd, np.nan)
    return us


def _behind(t, rows, net_us):
    """What went on behind the acknowledgement of acked ops `rows` ->
    ops x BEHIND_KEYS ns (the OSD path: the op's, net_us)."""
    g = {k: v[rows] for k, v in t.items() if isinstance(v, np.ndarray)}
    n = len(rows)
    cw_done = _get(g, "cw_done", n)
    rec = cw_done != NONE
    us = np.full((n, len(BEHIND_KEYS)), np.nan)
    us[:, 0] = np.maximum(g["reply"] - g["call_done"], 0)
    end = np.where(rec, cw_done, g["done"])
    us[:, 1] = np.where(end != NONE, end - g["submit"], np.nan)
    ts, release = _get(g, "cw_ts", n), _get(g, "cw_release", n)
    held = _get(g, "cw_held", n, 0).astype(bool) & (release != NONE)
    # where the application's part left it (_spans): a held write's ack
    # can come just before its op's send
    out_at = np.where(held, np.minimum(release, g["call_done"]), ts)
    us[:, 2] = np.where(ts != NONE, g["send"] - out_at, np.nan)
    us[:, 3:7] = net_us * 1000.0
    us[:, 7] = np.where(rec, cw_done - g["reply"], np.nan)
    return us


def columns(t, acked, path_us, path_unknown):
    """The acked ops' segments. path_us / path_unknown: segment_columns'
    OSD path (to_osd, messenger, osd, to_client: us, and whether the
    clocks left the network ones unknown). -> {"acked_us",
    "acked_unknown", "behind_us", "behind_unknown", "order" (an op whose
    client events came out of order), "acked_total_us"}: every op a
    row, nan off acked ops; us rounded to 0.1."""
    n = len(t["send"])
    rows = np.flatnonzero(acked)
    a = np.full((n, len(ACKED_KEYS)), np.nan)
    b = np.full((n, len(BEHIND_KEYS)), np.nan)
    a[rows] = tenths_us(_spans(t, rows))
    b[rows] = tenths_us(_behind(t, rows, path_us[rows]))
    au = np.zeros(a.shape, bool)
    au[rows] = a[rows] < 0
    bu = np.zeros(b.shape, bool)
    bu[rows] = b[rows] < 0
    for j, col in enumerate(_NET):
        bu[rows, col] |= path_unknown[rows, j]
    order = au.any(axis=1) | bu[:, _CLIENT_ONLY].any(axis=1)
    end = np.where((t["released"] != NONE) &
                   (t["released"] >= t["call_done"]), t["released"],
                   t["call_done"])
    total = np.where(acked, tenths_us(end - t["submit"]), np.nan)
    return {"acked_us": a, "acked_unknown": au, "behind_us": b,
            "behind_unknown": bu, "order": order, "acked_total_us": total}


def group(seg, name, path_segments):
    """segment_table's view of one group of segment_columns()' result:
    "path" (an op acked after the OSDs: its latency along the OSD path),
    "acked" (an acked write's: the application's part) or "behind" (what
    went on behind its acknowledgement). -> (us, unknown, keys, {key:
    what}, the column the ops are ranked by, whether it has a total)"""
    if name == "path":
        keys = [k for k, _ in path_segments]
        return seg["us"], seg["unknown"], keys, dict(path_segments), \
            seg["total_us"], True
    if name == "acked":
        return seg["acked_us"], seg["acked_unknown"], ACKED_KEYS, \
            dict(ACKED_SEGMENTS), seg["total_us"], True
    return seg["behind_us"], seg["behind_unknown"], BEHIND_KEYS, \
        dict(BEHIND_SEGMENTS), seg["behind_us"][:, 0], False
