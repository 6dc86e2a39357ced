"""Which librbd call each OSD op of a trace was part of, on columns
(columns.ClientColumns), with numpy.

A data op (an object rbd_data.<image id>.<number, hex>) belongs to the
call whose image range holds the extent it carries (object number <<
order + offset in the object) and that was in progress when the op was
sent: the latest such call (of equal submit times, the first to
complete). The object size (order) is the one that links the most data
ops of a sample.

With librbd's cache recorded (cache.py), a write op belongs to the cache
write it carries (its object, extent and time in flight), and so to that
write's call: the cache knows it, where the extent rule guesses (an op
sent after its call completed, as a held or an object-map-delayed write
is, is in progress for no call).

Calls are bucketed by the MiB of the image they touch, each bucket's
calls by submit time, with the bucket's longest call: an op's candidates
are its MiB's calls submitted within that much before its send (a few,
whatever the trace's length).
"""
import numpy as np

from . import cache
from ..ceph import objecter
from ..model.table import give_back

NO = -1
# object sizes tried: 4 KiB to 64 MiB (rbd's --object-size range)
ORDERS = range(12, 27)
# candidate (op, call) pairs looked at in one go, and ops
_PAIRS = 1 << 18
_OPS = 1 << 16


def data_objects(names):
    """Object names -> their number (rbd_data.<id>.<hex>) or -1."""
    out = np.full(len(names), -1, np.int64)
    for i, n in enumerate(names):
        if n.startswith("rbd_data."):
            try:
                out[i] = int(n.rpartition(".")[2], 16)
            except ValueError:
                pass
    return out


class Buckets:
    """The calls with a length, by MiB and submit time."""

    def __init__(self, calls):
        keep = np.flatnonzero(calls.len > 0).astype(np.int32)
        first = calls.off[keep] >> 20
        n = ((calls.off[keep] + calls.len[keep] - 1) >> 20) - first + 1
        # (call, MiB) pairs: a call once per MiB it touches
        call = np.repeat(keep, n)
        mib = np.repeat(first, n)
        mib += np.arange(len(mib)) - np.repeat(np.cumsum(n) - n, n)
        del first, n, keep
        # dense MiB numbers, and the order (MiB, submit, completion)
        self.mibs, dense = np.unique(mib, return_inverse=True)
        del mib
        dense = dense.reshape(-1).astype(np.int32)
        sub = calls.submit[call]
        o = np.lexsort((call, sub, dense))
        self.dense, self.call, self.sub = dense[o], call[o], sub[o]
        del o, sub, call
        self.longest = np.zeros(len(self.mibs), np.int64)
        np.maximum.at(self.longest, self.dense,
                      calls.done[self.call] - self.sub)
        del dense
        self.t0 = int(self.sub.min()) if len(self.sub) else 0
        span = int(self.sub.max()) - self.t0 + 2 if len(self.sub) else 2
        self.span = span
        self.fits = len(self.mibs) * span < (1 << 62)
        self.key = self.dense.astype(np.int64) * span + (
            self.sub - self.t0) if self.fits else None
        self.off, self.len, self.done = calls.off, calls.len, calls.done

    def ranges(self, mib, lo_t, hi_t):
        """Per query (MiB, from, to): the calls of that MiB submitted in
        [from, to], as [lo, hi) into the bucket order (empty when no
        call touched the MiB)."""
        d = np.searchsorted(self.mibs, mib)
        d = np.minimum(d, max(len(self.mibs) - 1, 0))
        there = (self.mibs[d] == mib) if len(self.mibs) else \
            np.zeros(len(mib), bool)
        if self.fits:
            a = d * self.span + np.clip(lo_t - self.t0, 0, self.span - 1)
            b = d * self.span + np.clip(hi_t - self.t0, -1, self.span - 1)
            lo = np.searchsorted(self.key, a, "left")
            hi = np.searchsorted(self.key, b, "right")
        else:           # a huge image over hours: one MiB at a time
            lo = np.zeros(len(mib), np.int64)
            hi = np.zeros(len(mib), np.int64)
            bs = np.searchsorted(self.dense, np.arange(len(self.mibs)))
            be = np.searchsorted(self.dense, np.arange(len(self.mibs)),
                                 "right")
            for j in np.unique(d[there]).tolist():
                q = np.flatnonzero(there & (d == j))
                s = self.sub[bs[j]:be[j]]
                lo[q] = bs[j] + np.searchsorted(s, lo_t[q], "left")
                hi[q] = bs[j] + np.searchsorted(s, hi_t[q], "right")
        hi[~there] = lo[~there]
        return lo, hi

    def owners(self, x, send):
        """Per op (image offset x, sent at `send`): its call, or NO."""
        out = np.full(len(x), NO, np.int64)
        mib = x >> 20
        d = np.minimum(np.searchsorted(self.mibs, mib),
                       max(len(self.mibs) - 1, 0))
        if not len(self.mibs):
            return out
        longest = self.longest[d]
        lo, hi = self.ranges(mib, send - longest, send)
        n = hi - lo
        at = 0
        while at < len(x):
            # ops whose candidates make up to _PAIRS pairs
            c = np.cumsum(n[at:])
            stop = at + max(1, int(np.searchsorted(c, _PAIRS, "right")))
            j = np.arange(at, stop)
            k = n[j]
            op = np.repeat(j, k)
            cand = np.repeat(lo[j], k) + (np.arange(int(k.sum())) -
                                          np.repeat(np.cumsum(k) - k, k))
            call = self.call[cand]
            ok = (self.off[call] <= x[op]) & \
                (x[op] < self.off[call] + self.len[call]) & \
                (send[op] <= self.done[call])
            op, cand, call = op[ok], cand[ok], call[ok]
            # the latest submit; of equals, the first to complete
            o = np.lexsort((call, -self.sub[cand], op))
            op, call = op[o], call[o]
            first = np.ones(len(op), bool)
            first[1:] = op[1:] != op[:-1]
            out[op[first]] = call[first]
            at = stop
        return out


def link(cc):
    """Set each op's call (cc.ops.request: the call's index, or NO);
    -> the object size's order, or None (no data ops, or none linked)."""
    ops, calls = cc.ops, cc.calls
    ops.cols["request"] = np.full(len(ops), NO, np.int32)
    no = data_objects(cc.objects.names)[ops.obj] if len(ops) else \
        np.zeros(0, np.int64)
    data = np.flatnonzero((no >= 0) & (ops.length > 0))
    if not len(data) or not (calls.len > 0).any():
        return None
    b = Buckets(calls)
    send, no, off = ops.send[data], no[data], ops.offset[data]

    def owners(idx, order):
        return b.owners((no[idx] << order) + off[idx], send[idx])
    sample = np.arange(0, len(data), max(1, len(data) // 200))
    score = {order: int((owners(sample, order) != NO).sum())
             for order in ORDERS}
    order = max(score, key=lambda k: (score[k], k == 22))
    if not score[order]:
        return None
    req = ops.cols["request"]
    for at in range(0, len(data), _OPS):
        i = np.arange(at, min(at + _OPS, len(data)))
        req[data[i]] = owners(i, order)
    b = None
    give_back()
    return order


def link_cache(cc):
    """ops.cw: each data write op's cache write (cache.link_ops, or NO),
    and its call taken from that write's where the cache names one; the
    cache writes' release times and who released the held ones."""
    ops, cw = cc.ops, cc.cache
    ops.cols["cw"] = np.full(len(ops), NO, np.int64)
    if not len(cw) or not len(ops):
        return
    no = data_objects(cc.objects.names)[ops.obj]
    no = np.where((ops.flags & objecter.FLAG_WRITE) != 0, no, -1)
    op_cw = cache.link_ops(cw, ops, no)
    ops.cols["cw"] = op_cw
    call = np.where(op_cw >= 0, cw.call[np.maximum(op_cw, 0)], NO)
    fix = call >= 0
    ops.cols["request"][fix] = call[fix]
    cache.releases(cw, op_cw, ops.send)
    # a call the ObjectCacher acknowledged from its memory (writeback)
    # has no op of its own: the ops that write its data back are the
    # cache's (its flusher's), whenever they are sent
    wb = cw.call[(cw.state == cache.STATES.index("writeback")) &
                 (cw.call >= 0)]
    if len(wb):
        req = ops.cols["request"]
        mine = np.zeros(int(max(req.max(initial=0), wb.max())) + 1, bool)
        mine[wb] = True
        ops.cols["request"][(req >= 0) & mine[np.maximum(req, 0)]] = NO
