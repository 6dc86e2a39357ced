"""One report over a window of a capture from its events alone
(Capture.window: osdstage -r with --from/--to or filters).

One pass over the capture's chunks feeds the ops (OpTracker), the
window's events (histograms, shards, devices) and the thread times
(ThreadTimes) the same chunks. Loss counters are the recorded ones of the
reports the window overlaps.

The window rule (docs/stages.md, "Windows"): a figure belongs to the
window that holds the moment its probe recorded it, a stage its end
(queue_wait and its attribution at the dequeue, a call at its return,
op_total at the completion); a stage's per-class row goes with the stage
(queue_wait's at the dequeue, by the class the op completed as: the
capture knows it, where a live interval cannot); --slowest ranks the ops
whose ranking stage (op_total, else queue_wait) ends in the window. A
window lies inside the part of the capture recorded with every probe
attached (traced_span).
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


def traced_span(cap):
    """(a, b): the part of the capture recorded with all its probes
    attached: from the first snapshot (taken once they were attached) to
    the last report. Before it the probes were being attached, one kind
    after another; after it (a capture with an end marker) they were
    being detached (ops there lack the stages and scheduler events whose
    probes came off first; this code takes the ops' off first, older
    code took the scheduler's). A capture without an end marker (killed)
    was recorded fully to its last event."""
    reps = cap.ordered_reports()
    a = reps[0].mono_ns if reps else cap.first_ns
    done = [r.mono_ns for r in reps if r.wall_ts is not None]
    b = done[-1] if done and cap.end is not None else cap.last_ns
    if b <= a:                      # no report after the first snapshot
        a, b = cap.first_ns, cap.last_ns
    return a, b


class DequeueClasses:
    """The op class of each op dequeued in [lo, hi] (unfiltered windows,
    in bulk): the class of its address's first completion (op_done)
    after the dequeue, unless an enqueue of that address (a new op: the
    dequeued one never completed, a replica op, a recovery message) comes
    first. A requeued op's dequeues all take its one completion's class.
    Fed the same chunks as the window, in time order; after hi only the
    first completion or enqueue of each address still open is kept."""

    def __init__(self, cap, lo, hi):
        self.cap, self.lo, self.hi = cap, lo, hi
        self.cid = {n: cap._cid.get(n) for n in ("op_dequeue", "op_enqueue",
                                                  "op_done")}
        self.deq, self.ev = [], []
        self.open = None        # addresses not yet met after hi (sorted)

    def feed(self, ch):
        np_ = np
        r = ch.recs.get(self.cid["op_dequeue"])
        if r is not None and len(r):
            k = ch.keys[self.cid["op_dequeue"]]
            m = (r["_ts"] >= self.lo) & (r["_ts"] <= self.hi)
            if m.any():
                self.deq.append((r["op"][m], r["_ts"][m], k[m],
                                 r["queue_wait_ns"][m]))
        met = []
        for name, cls in (("op_enqueue", None), ("op_done", "op_class")):
            c = self.cid[name]
            r = ch.recs.get(c)
            if r is None or not len(r):
                continue
            ts = r["_ts"]
            m = (ts >= self.lo) & (ts <= self.hi)
            late = ts > self.hi
            if late.any():
                if self.open is None:
                    self.open = np_.unique(np_.concatenate(
                        [d[0] for d in self.deq])) if self.deq else                         np_.zeros(0, np_.uint64)
                m |= late & np_.isin(r["op"], self.open)
            if not m.any():
                continue
            self.ev.append((r["op"][m], ts[m], ch.keys[c][m],
                            np_.full(int(m.sum()), -1, np_.int64)
                            if cls is None else
                            r[cls][m].astype(np_.int64)))
            met.append(r["op"][m & late])
        if self.open is not None and len(self.open) and met:
            # an address met after hi is resolved: its later events are
            # no window dequeue's
            self.open = np_.setdiff1d(self.open, np_.concatenate(met))
        if self.open is not None and not len(self.open):
            self.lo = self.hi = np_.uint64((1 << 64) - 1)   # nothing more

    def classes(self):
        """-> (queue waits, ts, keys, class value or -1) of the window's
        dequeues."""
        e = np.zeros(0, np.uint64)
        if not self.deq:
            return e, e, e, np.zeros(0, np.int64)
        d_op, d_ts, d_key, d_qw = (np.concatenate(x) for x in
                                   zip(*self.deq))
        if not self.ev:
            return d_qw, d_ts, d_key, np.full(len(d_op), -1, np.int64)
        e_op, e_ts, e_key, e_cls = (np.concatenate(x) for x in
                                    zip(*self.ev))
        op = np.concatenate([d_op, e_op])
        ts = np.concatenate([d_ts, e_ts])
        key = np.concatenate([d_key, e_key])
        is_ev = np.concatenate([np.zeros(len(d_op), bool),
                                np.ones(len(e_op), bool)])
        cls = np.concatenate([np.full(len(d_op), -1, np.int64), e_cls])
        o = np.lexsort((key, ts, op))
        op, is_ev, cls = op[o], is_ev[o], cls[o]
        ev_pos = np.nonzero(is_ev)[0]
        deq_pos = np.nonzero(~is_ev)[0]
        j = np.searchsorted(ev_pos, deq_pos, side="right")
        ok = j < len(ev_pos)
        jj = ev_pos[np.minimum(j, max(len(ev_pos) - 1, 0))]
        ok &= op[jj] == op[deq_pos]
        out = np.full(len(d_op), -1, np.int64)
        out[o[deq_pos]] = np.where(ok, cls[jj], -1)
        return d_qw, d_ts, d_key, out


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
        # queue_wait's per-class rows go with the dequeue (the window
        # rule), not with the completion as a live interval counts them
        self.class_keys = {"queue_wait." + c for c in cap.vocab.op_classes}
        self.classes = DequeueClasses(cap, t0, t1) \
            if op_class is None and "op_done" in cap._cid and \
            "queue_wait" in cap.info.get("classes", ()) else None

    def ranked(self, o):
        """Whether op o is among the window's ops for --slowest: the
        stage it is ranked by (OpRec.key_ns: op_total, else queue_wait)
        ends in the window."""
        if o.done and o.done["total_valid"]:
            end = o.done["ts"]
        elif o.deq:
            end = o.deq["ts"]
        else:
            return False
        return self.t0 <= end <= self.t1

    def took(self, o):
        """An op that entered the window: kept, and with a class asked,
        counted as it came (keys and shards keep the place their first
        op gave them)."""
        if self.op_class and o.op_class(self.cap.rules) != self.op_class:
            return
        self.ops.add(o, self.ranked(o))
        if not self.op_class:
            return
        count, shard = self.cap.rules.count, self.cap.rules.shard
        t0, t1, h, shards = self.t0, self.t1, self.h, self.shards
        oh, osh = {}, {}
        if o.deq and t0 <= o.deq["ts"] <= t1:
            count("op_dequeue", o.deq, oh)
            shard(osh, self.wakers, o.deq)
            if o.done:
                oh.setdefault("queue_wait." + self.op_class, Hist()).add_ns(
                    o.deq["queue_wait_ns"])
        if o.done and t0 <= o.done["ts"] <= t1:
            done = {}
            count("op_done", o.done, done)
            for k, x in done.items():
                if k not in self.class_keys:
                    oh.setdefault(k, Hist()).merge(x)
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
                if name == "op_done" and key in self.class_keys:
                    continue        # at the dequeue: DequeueClasses
                self.hs.add(key, ns, merged_first(r, keys, idx, sub))
        if self.op_class is None:
            for _, r, keys in in_window(cap, ch, ("op_dequeue",), lo, hi):
                shard_sums(cap, r, keys, self.shards, self.wakers)
        if self.classes is not None:
            self.classes.feed(ch)
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
                self.ops.add(o, self.ranked(o))
        if rs is not None and cap._role_of is None:
            rs.finish()
        return self._finish(tt)

    def _classes(self):
        """queue_wait per op class, at the dequeue (DequeueClasses); the
        dequeues of ops the capture never sees complete (replica ops,
        recovery messages, ops in flight at its end) as `unknown`."""
        qw, ts, keys, cls = self.classes.classes()
        labels = self.cap.rules.labels["op_class"]
        for v in np.unique(cls).tolist():
            idx = np.nonzero(cls == v)[0]
            t = ts[idx].min()
            first = (int(t), int(keys[idx][ts[idx] == t].min()), 1)
            name = labels[v] if v >= 0 else "unknown"
            self.hs.add("queue_wait." + name, qw[idx], first)

    def _finish(self, tt):
        cap, h, shards = self.cap, self.h, self.shards
        if self.op_class:
            h = {k: h[k] for k in sorted(h, key=self.first_h.get)}
            shards = {k: shards[k]
                      for k in sorted(shards, key=self.first_s.get)}
        if self.classes is not None:
            self._classes()
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
