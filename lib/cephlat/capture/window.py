"""One report over a window of a capture from its events alone
(Capture.window: osdstage -r with --from/--to or filters).

One pass over the capture's chunks feeds the ops (OpTracker), the
window's events (histograms, shards, devices) and the thread times
(ThreadTimes) the same chunks. Loss counters are the recorded ones of the
reports the window overlaps.
"""
import numpy as np

from .format import DEV_FIELDS
from .ops import OpSummary, OpTracker, merged_first
from .stream import Chunk, dicts
from .threads import SCHED_EVENTS, RoleScan, ThreadTimes
from ..model.events import HistSet, count_arrays
from ..model.hist import Hist
from ..model.snapshot import Snapshot

# the kernel events a window counts (and the ops' when no class is asked)
KERNEL = ("waking", "switch_in", "futex_wait", "syncfs", "block_rq")
OPS = ("stage", "op_dequeue", "op_done")
# what --thread-role filters by the thread's role
BY_ROLE = ("waking", "switch_in", "futex_wait", "syncfs")


def in_window(cap, ch, names, lo, hi):
    """(name, records, keys) of a chunk's events of classes `names` with
    lo <= ts <= hi."""
    for n in names:
        c = cap._cid.get(n)
        r = ch.recs.get(c) if c is not None else None
        if r is None or not len(r):
            continue
        ts = r["_ts"]
        m = (ts >= lo) & (ts <= hi)
        if m.all():
            yield n, r, ch.keys[c]
        elif m.any():
            yield n, r[m], ch.keys[c][m]


def events_of(cap, ch, names, lo, hi):
    """(name, ts, fields) of a chunk's events of classes `names` with
    lo <= ts <= hi, in merged order."""
    sub = {}
    for n, r, k in in_window(cap, ch, names, lo, hi):
        sub[cap._cid[n]] = r
        sub[-1 - cap._cid[n]] = k
    cids = [c for c in sub if c >= 0]
    if not cids:
        return
    cls, idx = Chunk({c: sub[c] for c in cids},
                     {c: sub[-1 - c] for c in cids}).merged(cids)
    rows = {c: list(zip(sub[c]["_ts"].tolist(),
                        dicts(sub[c], cap.trace.classes[c].names)))
            for c in cids}
    for c, i in zip(cls.tolist(), idx.tolist()):
        ts, d = rows[c][i]
        yield cap._bpf[c], ts, d


def _total(x):
    """The sum of a u64 column, exact past 2^64 / len."""
    x = np.asarray(x, np.uint64)
    mx = int(x.max()) if len(x) else 0
    if mx and len(x) > ((1 << 64) - 1) // mx:
        return sum(x.tolist())
    return int(x.sum(dtype=np.uint64))


def shard_sums(cap, r, keys, shards, wakers):
    """Rules.shard over op_dequeue records r (keys: their merge keys),
    shards in the order of their first dequeue."""
    m = r["attributed"] != 0
    r, keys = r[m], keys[m]
    if not len(r):
        return
    r = r[np.lexsort((keys, r["_ts"]))]
    u, first, inv = np.unique(r["shard"], return_index=True,
                              return_inverse=True)
    wake_labels = cap.rules.labels["wake"]
    for i in np.argsort(first).tolist():
        x = r[inv == i]
        s = shards.setdefault(int(u[i]),
                              dict.fromkeys(cap.vocab.shard_fields, 0))
        s["ops"] += len(x)
        s["qwait_ns"] += _total(x["queue_wait_ns"])
        for part in cap.vocab.attr_parts:
            if part + "_ns" in x.dtype.names:
                s[part + "_ns"] += _total(x[part + "_ns"])
        s["qwait_max_ns"] = max(s["qwait_max_ns"],
                                int(x["queue_wait_ns"].max()))
        twk = int(np.count_nonzero(x["timeout_with_work"]))
        s["timeouts_with_work"] += twk
        wakers["timeouts_with_work"] += twk
        w, c = np.unique(x["wake"], return_counts=True)
        for v, n in zip(w.tolist(), c.tolist()):
            wake = wake_labels[v]
            if wake != "none":
                s["wake_" + wake] += n
                wakers["wake_" + wake] += n


def counters_over(cap, t0, t1):
    """Loss counters of the recorded reports the window overlaps."""
    reps = cap.ordered_reports()
    if not reps:
        return {}
    before = [r for r in reps if r.mono_ns <= t0] or reps[:1]
    after = [r for r in reps if r.mono_ns >= t1] or reps[-1:]
    a, b = before[-1].counters, after[0].counters
    if a is b:
        a = {}
    return {k: v - a.get(k, 0) for k, v in b.items()}


class WindowPass:
    """Capture.window's one pass (see there for the arguments)."""

    def __init__(self, cap, t0, t1, role, op_class, slowest, spans):
        self.cap, self.t0, self.t1 = cap, t0, t1
        self.op_class, self.slowest, self.spans = op_class, slowest, spans
        self.h, self.devs, self.shards = {}, {}, {}
        self.wakers = dict.fromkeys(cap.vocab.waker_counters, 0)
        self.ops = OpSummary(slowest, spans)
        self.first_h, self.first_s = {}, {}  # key -> (rank, place in op)
        self.role_idx = cap.roles.names.index(role) if role else None
        self.names = KERNEL + (OPS if op_class is None else ())
        self.hs = HistSet()

    def took(self, o):
        """An op that entered the window: kept, and with a class asked,
        counted as it came (keys and shards keep the place their first
        op gave them)."""
        if self.op_class and o.op_class(self.cap.rules) != self.op_class:
            return
        self.ops.add(o)
        if not self.op_class:
            return
        count, shard = self.cap.rules.count, self.cap.rules.shard
        t0, t1, h, shards = self.t0, self.t1, self.h, self.shards
        oh, osh = {}, {}
        if o.deq and t0 <= o.deq["ts"] <= t1:
            count("op_dequeue", o.deq, oh)
            shard(osh, self.wakers, o.deq)
        if o.done and t0 <= o.done["ts"] <= t1:
            count("op_done", o.done, oh)
        for st, a, b in o.stages:
            if t0 <= b <= t1:
                oh.setdefault(st, Hist()).add_ns(b - a)
        for j, (k, x) in enumerate(oh.items()):
            if k in h:
                h[k].merge(x)
                self.first_h[k] = min(self.first_h[k], (o.rank, j))
            else:
                h[k], self.first_h[k] = x, (o.rank, j)
        for k, x in osh.items():
            if k in shards:
                y = shards[k]
                for f in self.cap.vocab.shard_fields:
                    y[f] = max(y[f], x[f]) if f == "qwait_max_ns" \
                        else y[f] + x[f]
                self.first_s[k] = min(self.first_s[k], o.rank)
            else:
                shards[k], self.first_s[k] = x, o.rank

    def _of_role(self, r, keys):
        """The records of threads of the asked role."""
        if "role" in r.dtype.names:
            m = r["role"] == self.role_idx
        else:
            ro = self.cap.role_of
            m = np.array([ro.get(t) == self.role_idx
                          for t in r["tid"].tolist()], bool)
        return r[m], keys[m]

    def feed(self, ch, lo, hi):
        """The window's events of one chunk: histograms, shards, devices."""
        cap = self.cap
        for name, r, keys in in_window(cap, ch, self.names, lo, hi):
            if name in BY_ROLE and self.role_idx is not None:
                r, keys = self._of_role(r, keys)
            if not len(r):
                continue
            for sub, (key, idx, ns) in enumerate(
                    count_arrays(cap.rules, name, r)):
                self.hs.add(key, ns, merged_first(r, keys, idx, sub))
        if self.op_class is None:
            for _, r, keys in in_window(cap, ch, ("op_dequeue",), lo, hi):
                shard_sums(cap, r, keys, self.shards, self.wakers)
        if "block_rq" in cap._cid:
            for name, ts, d in events_of(cap, ch, ("block_rq",), lo, hi):
                dev = cap.vocab.dev_name(d["dev"])
                x = self.devs.setdefault(dev, dict.fromkeys(DEV_FIELDS, 0))
                x["count"] += 1
                x["sum_ns"] += d["duration_ns"]
                x["bytes"] += d["bytes"]
                x["max_ns"] = max(x["max_ns"], d["duration_ns"])

    def run(self):
        """-> (Snapshot, OpSummary)"""
        cap, t0, t1 = self.cap, self.t0, self.t1
        # the ops are needed for the slowest, a timeline or an op class;
        # for the slowest alone, only the ops that may be among them
        need_ops = bool(self.slowest or self.spans or self.op_class)
        pick = None
        if self.slowest and not (self.spans or self.op_class) and \
                cap._stage_ops():
            pick = cap._slow_pick(t0, t1, self.slowest)
        only = pick.addresses() if pick else None
        tracker = OpTracker(cap, t0, t1, only=only) if need_ops else None
        tt = ThreadTimes(cap, t0, t1)
        every = set(self.names) | set(cap.OP_EVENTS) | set(SCHED_EVENTS) | \
            set(cap.ROLE_EVENTS)
        # role_of, from the same chunks (this pass reads them all)
        rs = RoleScan(cap) if cap._role_of is None else None
        lo, hi = np.uint64(max(t0, 0)), np.uint64(t1)
        for ch in cap.chunks(sorted(every)):
            if tracker and not tracker.stop:
                for _, o in tracker.feed(ch):
                    self.took(o)
            tt.feed(ch)
            if rs is not None:
                rs.feed(ch)
            self.feed(ch, lo, hi)
        if tracker:
            for _, o in tracker.finish():
                self.took(o)
        if only is not None and not pick.holds(self.ops):
            # the bound was wrong (ops lost or of before the capture):
            # every op followed, in a pass of their own
            self.ops = OpSummary(self.slowest, self.spans)
            for _, o in cap.op_stream(t0, t1):
                self.ops.add(o)
        if rs is not None and cap._role_of is None:
            rs.finish()
        return self._finish(tt)

    def _finish(self, tt):
        cap, h, shards = self.cap, self.h, self.shards
        if self.op_class:
            h = {k: h[k] for k in sorted(h, key=self.first_h.get)}
            shards = {k: shards[k]
                      for k in sorted(shards, key=self.first_s.get)}
        self.hs.hists(into=h)
        threads = tt.finish()
        cap._sched_snaps = tt.snaps
        if self.role_idx is not None:
            threads = {t: v for t, v in threads.items()
                       if v["role"] == self.role_idx}
        counters = counters_over(cap, self.t0, self.t1)
        counters.update(self.wakers)
        return Snapshot(None, counters, threads, shards, self.devs, self.t1,
                        cap.full_hists(h)), self.ops
