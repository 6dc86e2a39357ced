"""Threads' scheduler states, the one implementation the live run's
kernel maps and a capture's events both follow:

- accrue(): time in a thread state goes to its asleep / run-queue total
  (live: the in-progress part of a thread's state; offline: every state
  change replayed);
- ThreadStates: the scheduler events replayed as per-thread state
  intervals (thread times of a window, the timeline's lanes);
- SchedReplay: the same over arrays of events, a chunk at a time (a
  capture read in bulk).
"""


def accrue(row, states, state, a, b):
    """Time [a, b) a thread spent in `state` (enum tstate_kind; states:
    its labels)."""
    if b <= a:
        return
    name = states[state]
    if name == "sleep":
        row["sleep_ns"] += b - a
    elif name == "runq":
        row["runq_ns"] += b - a


def clip(closed, t0, t1):
    """A state interval (tid, state, a, b) cut to the window [t0, t1], or
    None when nothing of it is inside."""
    if closed is None:
        return None
    tid, st, a, b = closed
    a, b = max(a, t0), min(b, t1)
    return (tid, st, a, b) if b > a else None


class ThreadStates:
    """Scheduler events replayed: each thread's state and since when."""

    def __init__(self, states):
        """states: the labels of enum tstate_kind"""
        self.run, self.sleep, self.runq, self.dead = (
            states.index(n) for n in ("run", "sleep", "runq", "dead"))
        self.state, self.since = {}, {}

    def start(self, tid, state, ts):
        self.state[tid], self.since[tid] = state, ts

    def feed(self, name, ts, d):
        """Apply event `name` -> (applied, the state interval it closed:
        (tid, state, since, ts) or None). A wake-up of a thread that is
        not asleep changes nothing."""
        if name not in ("switch_out", "waking", "switch_in"):
            return False, None
        tid = d["tid"]
        if name == "switch_out":
            new = d["state"]
        elif name == "waking":
            if self.state.get(tid, self.sleep) != self.sleep:
                return False, None
            new = self.runq
        else:
            new = self.run
        closed = None
        if tid in self.since:
            closed = (tid, self.state[tid], self.since[tid], ts)
        self.state[tid], self.since[tid] = new, ts
        return True, closed

    def replay(self, events, t0, t1):
        """Feed `events` [(name, ts, fields)] up to t1 -> for each scheduler
        event that changed a state: (name, ts, fields, the interval it
        closed cut to [t0, t1] or None); at the end (None, t1, None, the
        interval) for every thread's last state."""
        for name, ts, d in events:
            if ts > t1:
                continue
            applied, closed = self.feed(name, ts, d)
            if applied:
                yield name, ts, d, clip(closed, t0, t1)
        for tid in list(self.since):
            yield None, t1, None, clip(
                (tid, self.state[tid], self.since[tid], t1), t0, t1)


class SchedReplay:
    """ThreadStates over arrays of scheduler events, a chunk at a time:
    the same states, the same applied events and closed intervals."""

    def __init__(self, states):
        self.t = ThreadStates(states)
        self.fed = 0            # events fed so far (their merged ranks)

    def feed(self, tid, kind, new, ts, pos):
        """Events in merged order: tid, kind (0 switch_out, 1 waking,
        2 switch_in), new (the state a switch sets), ts, pos (their rank
        in the merged order) -> the applied ones, in merged order, as a
        dict of arrays: tid, kind, new, ts, pos, and the interval each
        closed: prev_state, prev_since, closed (bool)."""
        import numpy as np
        t = self.t
        n = len(tid)
        o = np.argsort(tid, kind="stable")
        tid, kind, new, ts, pos = tid[o], kind[o], new[o], ts[o], pos[o]
        idx = np.arange(n)
        head = np.ones(n, bool)
        head[1:] = tid[1:] != tid[:-1]
        gstart = np.maximum.accumulate(np.where(head, idx, 0))
        utids = tid[head].tolist()
        carry_state = np.array([t.state.get(x, t.sleep) for x in utids],
                               dtype=np.int64)
        carry_known = np.array([x in t.since for x in utids], dtype=bool)
        carry_since = np.array([t.since.get(x, 0) for x in utids],
                               dtype=np.int64)
        g = np.cumsum(head) - 1                  # group number per event
        is_w = kind == 1
        sw = np.where(~is_w, idx, -1)
        last_sw = np.maximum.accumulate(sw)      # at or before i
        has_sw = last_sw >= gstart
        base_state = np.where(has_sw, new[np.maximum(last_sw, 0)],
                              carry_state[g])
        cw = np.cumsum(is_w)                     # wakings up to i
        start_cnt = np.where(has_sw, cw[np.maximum(last_sw, 0)],
                             np.where(gstart > 0, cw[gstart - 1], 0))
        first_w = (cw - start_cnt) == 1
        applied = ~is_w | (is_w & first_w & (base_state == t.sleep))
        a = idx[applied]
        tid_a, new_a, ts_a, g_a = tid[a], new[a], ts[a], g[a]
        prev_state = np.empty(len(a), np.int64)
        prev_since = np.empty(len(a), np.int64)
        closed = np.empty(len(a), bool)
        if len(a):
            ahead = np.ones(len(a), bool)
            ahead[1:] = g_a[1:] != g_a[:-1]
            prev_state[1:], prev_since[1:] = new_a[:-1], ts_a[:-1]
            closed[:] = True
            gh = g_a[ahead]
            prev_state[ahead] = carry_state[gh]
            prev_since[ahead] = carry_since[gh]
            closed[ahead] = carry_known[gh]
            # carry: each thread's last applied event; new threads enter
            # the dicts in the order of their first applied event
            last = np.ones(len(a), bool)
            last[:-1] = g_a[1:] != g_a[:-1]
            fresh = [(p, x) for p, x in zip(pos[a][ahead].tolist(),
                                            tid_a[ahead].tolist())
                     if x not in t.state]
            for _, x in sorted(fresh):
                t.state[x] = t.sleep
                t.since[x] = 0
            for x, s, when in zip(tid_a[last].tolist(), new_a[last].tolist(),
                                  ts_a[last].tolist()):
                t.state[x], t.since[x] = s, when
        r = np.argsort(pos[a], kind="stable")
        return {"tid": tid_a[r], "kind": kind[a][r], "new": new_a[r],
                "ts": ts_a[r], "pos": pos[a][r], "prev_state": prev_state[r],
                "prev_since": prev_since[r], "closed": closed[r],
                "index": o[a][r]}
