"""The scheduler's events of a capture replayed: thread roles as the
capture names them (RoleScan), each thread's times over a window
(ThreadTimes: asleep, runnable, in futex waits, wake-ups), numbered
densely (Dense), and the replay itself (SchedAccess: capture/reader.py's
Capture has its methods; they use its chunks(), ordered_reports(),
rules, _cid and _sched_snaps)."""
import numpy as np

from ..model.threadstates import SchedReplay, accrue

SCHED_EVENTS = ("switch_out", "waking", "switch_in")


class Dense:
    """Thread ids -> small dense indices (in the order first seen), for
    per-thread sums with bincount instead of a sort."""

    def __init__(self):
        self.lut = np.full(1 << 16, -1, np.int64)
        self.tids = []          # dense index -> tid

    def __call__(self, tid):
        if not len(tid):
            return np.zeros(0, np.int64)
        top = int(tid.max())
        if top >= len(self.lut):
            grow = np.full(max(top + 1, 2 * len(self.lut)), -1, np.int64)
            grow[:len(self.lut)] = self.lut
            self.lut = grow
        d = self.lut[tid]
        miss = d < 0
        if miss.any():
            for t in np.unique(tid[miss]).tolist():
                self.lut[t] = len(self.tids)
                self.tids.append(t)
            d = self.lut[tid]
        return d


class RoleScan:
    """Capture.role_of from chunks of the events of ROLE_EVENTS (fed
    every chunk of the capture, in order): each thread's role as the
    first of its events that carries one says (by its merge order), then
    user space's names over them. Chunks come in time order, so only the
    threads a chunk is the first to name are looked at in it."""

    def __init__(self, cap):
        self.cap = cap
        self.first = {}             # tid -> (ts, key, role)
        self.seen = np.zeros(1 << 16, bool)

    def feed(self, ch):
        cap = self.cap
        new = []
        for c, r in ch.recs.items():
            if not len(r) or "role" not in r.dtype.names or \
                    cap._bpf[c] not in cap.ROLE_EVENTS:
                continue
            tid = r["tid"]
            top = int(tid.max())
            if top >= len(self.seen):
                grow = np.zeros(max(top + 1, 2 * len(self.seen)), bool)
                grow[:len(self.seen)] = self.seen
                self.seen = grow
            i = np.nonzero(~self.seen[tid])[0]
            if not len(i):
                continue
            k = ch.keys[c][i]
            tid, ts, ro = tid[i], r["_ts"][i], r["role"][i]
            o = np.lexsort((k, ts, tid))
            tid = tid[o]
            head = np.ones(len(o), bool)
            head[1:] = tid[1:] != tid[:-1]
            o = o[head]
            new.append(tid[head])
            first = self.first
            for t, x, y, z in zip(tid[head].tolist(), ts[o].tolist(),
                                  k[o].tolist(), ro[o].tolist()):
                if t not in first or (x, y) < first[t][:2]:
                    first[t] = (x, y, z)
        for t in new:
            self.seen[t] = True

    def finish(self):
        """-> role_of, kept by the capture"""
        out = {t: v[2] for t, v in self.first.items()}
        out.update(self.cap._meta_roles)
        self.cap._role_of = out
        return out


class ThreadTimes:
    """Capture.thread_times, fed a chunk at a time (every chunk of the
    capture: futex waits that end after t1 count, and the states at t0
    come from the events before it)."""

    def __init__(self, cap, t0, t1):
        self.cap, self.t0, self.t1 = cap, t0, t1
        reps = cap.ordered_reports()
        self.first = reps[0].threads if reps else {}
        self.last = reps[-1].threads if reps else {}
        self.rp = SchedReplay(cap.rules.labels["state"])
        for tid, t in self.first.items():
            self.rp.t.start(tid, t["state"], reps[0].mono_ns)
        self.futex = {}         # tid -> ns, in the order of their events
        self.acc = {}           # tid -> [sleep, runq, wakeups, died|None]
        self.dense = Dense()
        # what a replay from no state (Capture.sched(recorded=False))
        # holds at chunk boundaries up to t1, from this one's states: a
        # thread's state is the same in both once it has switched; before
        # that, the other has it runnable since its first wake-up, if any
        self.switched = np.zeros(0, bool)   # by dense index
        self.woke = {}          # tid -> first wake-up, not switched yet
        self.snaps = []         # [(last ts applied, [(tid, state, since)])]
        self.stride, self.skip = 1, 0

    def _futex(self, r, keys):
        """Futex waits r (keys: their merge keys) that overlap the window
        (they end at their event) -> self.futex, threads in the order of
        their first wait."""
        t0, t1 = self.t0, self.t1
        ts, dur = r["_ts"], r["duration_ns"]
        at = ts >= np.uint64(max(t0, 0))
        if not at.all():
            r, keys, ts, dur = r[at], keys[at], ts[at], dur[at]
        if not len(r) or max(int(ts.max()), int(dur.max())) >= 1 << 62:
            # durations too large for int64: one by one, in merged order
            o = np.lexsort((keys, ts))
            for t, e, d in zip(r["tid"][o].tolist(), ts[o].tolist(),
                               dur[o].tolist()):
                a, b = max(e - d, t0), min(e, t1)
                if b > a:
                    self.futex[t] = self.futex.get(t, 0) + b - a
            return
        end = ts.astype(np.int64)
        a = np.maximum(end - dur.astype(np.int64), t0)
        b = np.minimum(end, t1)
        sel = b > a
        if not sel.any():
            return
        tids = r["tid"][sel]
        d = self.dense(tids)
        # float sums: exact below 2**53 ns (104 days)
        sums = np.bincount(d, weights=(b - a)[sel],
                           minlength=len(self.dense.tids))
        has = np.bincount(d, minlength=len(self.dense.tids))
        futex, names = self.futex, self.dense.tids
        fresh = [i for i in np.nonzero(has)[0].tolist()
                 if names[i] not in futex]
        if fresh:
            # new threads in the order of their first wait
            m = np.isin(d, fresh)
            o = np.lexsort((keys[sel][m], ts[sel][m]))
            dm = d[m][o]
            _, first_i = np.unique(dm, return_index=True)
            for i in np.sort(first_i).tolist():
                futex[names[int(dm[i])]] = 0
        for i in np.nonzero(has)[0].tolist():
            t = names[i]
            futex[t] = futex[t] + int(sums[i])

    def feed(self, ch):
        cap, t0, t1 = self.cap, self.t0, self.t1
        c = cap._cid.get("futex_wait")
        r = ch.recs.get(c) if c is not None else None
        if r is not None and len(r):
            self._futex(r, ch.keys[c])
        ev = cap.sched_feed(self.rp, ch, t1)
        self._snap(ch)
        if ev is None:
            return
        rp = self.rp.t
        tid, kind, ts = ev["tid"], ev["kind"], ev["ts"]
        a = np.maximum(ev["prev_since"], t0)
        b = np.minimum(ts, t1)
        acc = ev["closed"] & (b > a)
        died = (kind == 0) & (ev["new"] == rp.dead)
        wake = (kind == 1) & (ts >= t0)
        touch = acc | died | wake | (kind == 2)
        # rows in the order their threads were first touched
        dense = self.dense
        d = dense(tid)
        names = dense.tids
        rows = self.acc
        dt = d[touch]
        if len(dt):
            known = np.array([t in rows for t in names], bool)
            new = ~known[dt]
            if new.any():
                dn = dt[new]
                _, first_i = np.unique(dn, return_index=True)
                for i in np.sort(first_i).tolist():
                    rows[names[int(dn[i])]] = [0, 0, 0, None]
        st = ev["prev_state"]
        for want, f in ((rp.sleep, 0), (rp.runq, 1)):
            m = acc & (st == want)
            if np.any(m):
                # float sums: exact below 2**53 ns (104 days)
                sums = np.bincount(d[m], weights=b[m] - a[m],
                                   minlength=len(names))
                has = np.bincount(d[m], minlength=len(names))
                for i in np.nonzero(has)[0].tolist():
                    rows[names[i]][f] += int(sums[i])
        if np.any(wake):
            c = np.bincount(d[wake], minlength=len(names))
            for i in np.nonzero(c)[0].tolist():
                rows[names[i]][2] += int(c[i])
        if np.any(died):
            for t, x in zip(tid[died].tolist(), ts[died].tolist()):
                rows[t][3] = x

    def _snap(self, ch):
        """Keep track of what switched and woke in chunk ch; a snapshot
        of the replay from no state after it (at most 128, evenly
        spaced) if it lies before t1."""
        cap = self.cap
        last = -1
        for name in SCHED_EVENTS:
            c = cap._cid.get(name)
            r = ch.recs.get(c) if c is not None else None
            if r is None or not len(r):
                continue
            last = max(last, int(r["_ts"].max()))
            if name == "waking":
                continue
            d = self.dense(r["tid"])
            if len(self.switched) < len(self.dense.tids):
                grow = np.zeros(len(self.dense.tids), bool)
                grow[:len(self.switched)] = self.switched
                self.switched = grow
            self.switched[d] = True
        c = cap._cid.get("waking")
        r = ch.recs.get(c) if c is not None else None
        if r is not None and len(r):
            d = self.dense(r["tid"])
            if len(self.switched) < len(self.dense.tids):
                grow = np.zeros(len(self.dense.tids), bool)
                grow[:len(self.switched)] = self.switched
                self.switched = grow
            m = ~self.switched[d]
            if m.any():
                for t, ts in zip(r["tid"][m].tolist(), r["_ts"][m].tolist()):
                    if t not in self.woke or ts < self.woke[t]:
                        self.woke[t] = ts
        if self.woke:
            names, sw = self.dense.tids, self.switched
            for i in np.nonzero(sw)[0].tolist():
                self.woke.pop(names[i], None)
        if last < 0 or last > self.t1:
            return
        self.skip += 1
        if self.skip < self.stride:
            return
        self.skip = 0
        t = self.rp.t
        lut, sw = self.dense.lut, self.switched
        state = [(tid, s, t.since[tid]) for tid, s in t.state.items()
                 if tid < len(lut) and lut[tid] >= 0 and sw[lut[tid]]]
        state += [(tid, t.runq, ts) for tid, ts in self.woke.items()]
        self.snaps.append((last, state))
        if len(self.snaps) >= 128:
            self.snaps = self.snaps[1::2]
            self.stride *= 2

    def finish(self):
        cap, t0, t1 = self.cap, self.t0, self.t1
        states = cap.rules.labels["state"]
        ts_ = self.rp.t
        first, last = self.first, self.last
        out = {}

        def row(tid):
            r = out.get(tid)
            if r is None:
                t = last.get(tid) or first.get(tid) or {}
                r = out[tid] = {
                    "role": cap.role_of.get(tid, t.get("role", 0)),
                    "state": ts_.run, "sleep_ns": 0, "runq_ns": 0,
                    "futex_ns": 0, "wakeups": 0, "cv": t.get("cv", 0),
                    "born": t.get("born", 0), "died": t.get("died", 0)}
            return r
        for tid, ns in self.futex.items():
            row(tid)["futex_ns"] += ns
        for tid, (sl, rq, wk, died) in self.acc.items():
            r = row(tid)
            r["sleep_ns"] += sl
            r["runq_ns"] += rq
            r["wakeups"] += wk
            if died is not None:
                r["died"] = died
        for tid in list(ts_.since):
            a, b = max(ts_.since[tid], t0), t1
            if b > a:
                accrue(row(tid), states, ts_.state[tid], a, b)
        for tid in ts_.state:
            if ts_.state[tid] != ts_.dead or tid in out:
                row(tid)
        for tid, r in out.items():
            r["state"] = ts_.state.get(tid, ts_.run)
            if not r["born"]:
                r["born"] = t0
        return out


class SchedAccess:
    def sched(self, t1, t0=None, recorded=True):
        """The scheduler events up to t1 replayed (SchedReplay), a chunk
        at a time -> (replay, generator of the applied events of each
        chunk); the replay's states are final once the generator is
        exhausted. recorded: start from the thread states of the first
        recorded report."""
        reps = self.ordered_reports()
        first = reps[0].threads if reps and recorded else {}
        rp = SchedReplay(self.rules.labels["state"])
        for tid, t in first.items():
            rp.t.start(tid, t["state"], reps[0].mono_ns)
        return rp, (self.sched_feed(rp, ch) for ch in self.chunks(
            SCHED_EVENTS, t0, t1))

    def sched_at(self, t):
        """The scheduler events up to t replayed from no state (as
        sched(t, recorded=False) replays them) -> SchedReplay; from the
        last snapshot window() kept before t, if any."""
        rp = SchedReplay(self.rules.labels["state"])
        start = None
        for ts, state in reversed(self._sched_snaps):
            if ts <= t:
                for tid, s, since in state:
                    rp.t.start(tid, s, since)
                start = ts + 1
                break
        for ch in self.chunks(SCHED_EVENTS, start, t):
            self.sched_feed(rp, ch)
        return rp

    def sched_feed(self, rp, ch, t1=None):
        """Feed replay rp a chunk's scheduler events (those up to t1) ->
        the applied ones (SchedReplay.feed) or None."""
        kinds = {self._cid[n]: k for k, n in enumerate(SCHED_EVENTS)
                 if n in self._cid}
        cids, o = ch.order(list(kinds))
        n = len(o)
        if not n:
            return None
        recs = [ch.recs[c] for c in cids]
        # the classes' columns concatenated, then put in merged order
        tid = np.concatenate([r["tid"] for r in recs]).astype(np.int64)[o]
        ts = np.concatenate([r["_ts"] for r in recs])[o]
        kind = np.repeat(np.array([kinds[c] for c in cids], np.int64),
                         [len(r) for r in recs])[o]
        new = np.concatenate([
            r["state"].astype(np.int64) if kinds[c] == 0 else
            np.full(len(r), rp.t.runq if kinds[c] == 1 else rp.t.run,
                    np.int64) for c, r in zip(cids, recs)])[o]
        if t1 is not None:
            keep = ts <= np.uint64(t1)
            if not keep.all():
                tid, kind, new, ts = tid[keep], kind[keep], new[keep], \
                    ts[keep]
                n = len(tid)
                if not n:
                    return None
        ts = ts.astype(np.int64)
        pos0 = rp.fed
        rp.fed += n
        return rp.feed(tid, kind, new, ts, np.arange(pos0, pos0 + n))

    def thread_times(self, t0, t1):
        """Per thread over [t0, t1]: time asleep / runnable (replaying the
        scheduler events), futex time, wake-ups; the shard cv and birth/
        death times from the recorded state (ThreadTimes)."""
        tt = ThreadTimes(self, t0, t1)
        for ch in self.chunks(SCHED_EVENTS + ("futex_wait",)):
            tt.feed(ch)
        return tt.finish()
