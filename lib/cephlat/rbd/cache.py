"""librbd's cache in a trace, as columns: each object write the cache
took (rbdrecord:cache_write), what it did with it, when the OSDs had it
(rbdrecord:cache_write_done), its call, its OSD ops, and for a write the
cache held, which earlier write's completion let it go.

Pairing, as librbd does it (lib/cephlat/ceph/librbd_cache.py): only a
write sent or queued by the write-around cache ("acked", "queued")
comes back through handle_in_flight_io_complete; the writes of one
extent of one object finish in the order they were taken (the cache
never has two overlapping writes in flight), so the k-th done of an
extent is its k-th such write's.
"""
import numpy as np

from ..ceph import librbd_cache
from ..model.table import NONE, Matcher, Table

STATES = list(librbd_cache.STATES)
_EARLY = np.array([s in librbd_cache.ACKED_EARLY for s in STATES])
# the ObjectCacher's writes in writeback leave by its flusher: no op is
# one such write's
_WRITEBACK = STATES.index("writeback")
# a held write's op is sent inside the releasing write's completion:
# the latest completion on its cache no more than this before the send
_RELEASE_NS = 5_000_000
NO = -1

WRITE_FIELDS = ("completion", "imagectx", "cache", "object_no", "offset",
                "length", "in_flight", "max_dirty", "init_max_dirty",
                "op_flags", "state_name")
DONE_FIELDS = ("cache", "object_no", "offset", "length", "r")


def _rank(keys, ts):
    """Each row's place among the rows of its key, in time order."""
    o = np.lexsort((ts,) + tuple(reversed(keys)))
    n = len(o)
    new = np.ones(n, bool)
    if n:
        same = np.ones(n - 1, bool)
        for k in keys:
            same &= k[o][1:] == k[o][:-1]
        new[1:] = ~same
    start = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    rank = np.empty(n, np.int64)
    rank[o] = np.arange(n) - start
    return rank


def table(writes, dones):
    """writes, dones: {field: array} of the events' fields ("ts" and the
    names above; "state": STATES index) -> the cache Table: one row a
    write: ts (taken), done (NONE: no completion seen), r, completion,
    image, cache, object_no, off, len, state, in_flight, max_dirty,
    init_max_dirty, op_flags; call, release, held_by (set by link())."""
    n = len(writes["ts"])
    o = np.argsort(writes["ts"], kind="stable")
    w = {k: np.asarray(v)[o] for k, v in writes.items()}
    done = np.full(n, NONE, np.int64)
    r = np.zeros(n, np.int64)
    early = _EARLY[w["state"]] if n else np.zeros(0, bool)
    if n and len(dones["ts"]):
        e = np.flatnonzero(early)
        keys = [w[k][e].astype(np.int64) for k in
                ("cache", "object_no", "offset", "length")]
        dk = [np.asarray(dones[k]).astype(np.int64) for k in
              ("cache", "object_no", "offset", "length")]
        at = Matcher(tuple(keys + [_rank(keys, w["ts"][e])])).find(
            tuple(dk + [_rank(dk, np.asarray(dones["ts"]))]))
        ok = at >= 0
        # a done before its write is another write's (a trace begun with
        # writes in flight): left unpaired
        ok[ok] &= np.asarray(dones["ts"])[ok] >= w["ts"][e[at[ok]]]
        done[e[at[ok]]] = np.asarray(dones["ts"])[ok]
        r[e[at[ok]]] = np.asarray(dones["r"])[ok]
    cols = dict(ts=w["ts"].astype(np.int64), done=done, r=r,
                completion=w["completion"].astype(np.uint64),
                image=w["imagectx"].astype(np.uint64),
                cache=w["cache"].astype(np.uint64),
                object_no=w["object_no"].astype(np.int64),
                off=w["offset"].astype(np.int64),
                len=w["length"].astype(np.int64),
                state=w["state"].astype(np.int8),
                in_flight=w["in_flight"].astype(np.int64),
                max_dirty=w["max_dirty"].astype(np.int64),
                init_max_dirty=w["init_max_dirty"].astype(np.int64),
                op_flags=w["op_flags"].astype(np.int64))
    cols.update(call=np.full(n, NO, np.int64),
                release=np.full(n, NONE, np.int64),
                held_by=np.full(n, NO, np.int64))
    return Table(**cols)


def empty():
    """The cache Table of a trace without cache records."""
    z = {k: np.zeros(0, np.int64) for k in (
        "ts", "done", "r", "object_no", "off", "len", "in_flight",
        "max_dirty", "init_max_dirty", "op_flags", "call", "release",
        "held_by")}
    z.update({k: np.zeros(0, np.uint64) for k in ("completion", "image",
                                                  "cache")})
    z["state"] = np.zeros(0, np.int8)
    return Table(**z)


def ops_early(cw, op_cw):
    """Per op, from its cache write (op_cw: link_ops's, NO: none): 1 the
    cache acknowledged the write before the OSDs had it, 0 it did not,
    -1 no record of it."""
    op_cw = np.asarray(op_cw)
    if not len(cw):
        return np.full(len(op_cw), -1, np.int64)
    has = op_cw >= 0
    return np.where(has, _EARLY[cw.state[np.maximum(op_cw, 0)]], -1
                    ).astype(np.int64)


def link_calls(cw, calls):
    """Each cache write's call: the call of its completion handle in
    progress when the cache took it (handles are reused: the latest
    submitted at or before it). Sets cw.call."""
    if not len(cw) or not len(calls) or "completion" not in calls.cols:
        return
    handles, inv = np.unique(np.concatenate(
        [calls.completion.astype(np.uint64), cw.completion]),
        return_inverse=True)
    inv = inv.reshape(-1)
    hc, hw = inv[:len(calls)], inv[len(calls):]
    t0 = int(min(calls.submit.min(), cw.ts.min()))
    span = int(max(calls.submit.max(), cw.ts.max())) - t0 + 2
    kc = hc.astype(np.int64) * span + (calls.submit - t0)
    o = np.argsort(kc, kind="stable")
    kw = hw.astype(np.int64) * span + (cw.ts - t0)
    at = np.searchsorted(kc[o], kw, "right") - 1
    ok = (at >= 0) & (cw.completion != 0)
    call = np.where(ok, o[np.maximum(at, 0)], NO)
    ok &= hc[np.maximum(call, 0)] == hw
    ok &= calls.done[np.maximum(call, 0)] >= cw.ts
    cw.cols["call"] = np.where(ok, call, NO).astype(np.int64)


def link_ops(cw, ops, object_no):
    """Each data write op's cache write: of the same object, the earliest
    write taken at or before the op's send, not done before it, whose
    extent lies within the op's, not one the ObjectCacher took in
    writeback (librbd's I/O scheduler can merge an object's adjacent
    queued writes into one op: a merged op belongs to its first write).
    object_no: each op's object number (-1: not a data object). -> per
    op the cache write's row, or NO. Looks back as far as the longest
    write the cache had in flight: under a flood an object's queue can
    hold hundreds of writes."""
    out = np.full(len(ops), NO, np.int64)
    if not len(cw) or not len(ops):
        return out
    t0 = int(min(cw.ts.min(), ops.send.min()))
    span = int(max(cw.ts.max(), ops.send.max(),
                   cw.done.max(initial=0))) - t0 + 2
    if (int(cw.object_no.max(initial=0)) + 1) * span >= (1 << 62):
        return out
    key = cw.object_no * span + (cw.ts - t0)
    o = np.argsort(key, kind="stable")
    ks = key[o]
    done = np.where(cw.done == NONE, np.iinfo(np.int64).max, cw.done)
    # the window goes back over the longest a write was in flight (of
    # those done; without any, the whole trace): a write not done yet at
    # the end was sent within it
    d = cw.done != NONE
    life = int((cw.done[d] - cw.ts[d]).max()) if d.any() else \
        int(ops.send.max()) - int(cw.ts.min())
    q = np.flatnonzero(object_no >= 0)
    kq = object_no[q] * span + (ops.send[q] - t0)
    j = np.searchsorted(ks, kq, "right") - 1
    first = np.searchsorted(ks, kq - life, "left")
    lo, hi = ops.offset[q], ops.offset[q] + np.maximum(ops.length[q], 1)
    found = np.full(len(q), NO, np.int64)
    act = np.flatnonzero(j >= first)
    while len(act):
        c = o[j[act]]
        qa = q[act]
        ok = (cw.object_no[c] == object_no[qa]) & \
            (cw.off[c] >= lo[act]) & \
            (cw.off[c] + np.maximum(cw.len[c], 1) <= hi[act]) & \
            (done[c] >= ops.send[qa]) & (cw.state[c] != _WRITEBACK)
        found[act[ok]] = c[ok]        # walking back: the earliest wins
        j[act] -= 1
        act = act[j[act] >= first[act]]
    out[q] = found
    return out


def releases(cw, op_cw, send):
    """For each cache write: when it was let go to the OSDs (its first
    op's send: a write in flight at once, at once; a held one, when an
    earlier write's completion made room) and, for a held one, which
    write's completion that was (the latest completion on the same cache
    at or before that send). Sets cw.release and cw.held_by."""
    if not len(cw):
        return
    rel = np.full(len(cw), np.iinfo(np.int64).max, np.int64)
    m = op_cw >= 0
    np.minimum.at(rel, op_cw[m], send[m])
    rel = np.where(rel == np.iinfo(np.int64).max, NONE, rel)
    cw.cols["release"] = rel
    held = np.flatnonzero((cw.state == STATES.index("queued")) &
                          (rel != NONE))
    d = np.flatnonzero(cw.done != NONE)
    if not len(held) or not len(d):
        return
    caches, inv = np.unique(cw.cache, return_inverse=True)
    inv = inv.reshape(-1)
    t0 = int(min(cw.done[d].min(), rel[held].min()))
    span = int(max(cw.done[d].max(), rel[held].max())) - t0 + 2
    kd = inv[d].astype(np.int64) * span + (cw.done[d] - t0)
    o = np.argsort(kd, kind="stable")
    kh = inv[held].astype(np.int64) * span + (rel[held] - t0)
    at = np.searchsorted(kd[o], kh, "right") - 1
    src = d[o[np.maximum(at, 0)]]
    ok = (at >= 0) & (inv[src] == inv[held]) & \
        (rel[held] - cw.done[src] <= _RELEASE_NS) & (src != held)
    cw.cols["held_by"][held[ok]] = src[ok]
