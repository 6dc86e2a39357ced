"""Reading a capture back (osdstage -r): no root, no BPF.

Without filters, the reports of the live run are rebuilt one by one: the
histograms from the events of each report interval (every event carries
its interval), the rest (per-thread times, shards, devices, counters) from
the state the live run read at that report and recorded. The result is the
same report, number for number.

With a window (--from/--to) or filters, one report is computed from the
events alone: histograms from the matching events, thread times by
replaying the scheduler events, shards and devices from op and block
events; loss counters are the recorded ones of the reports the window
overlaps.
"""
import json

from ..ceph import probetable
from .format import DEV_FIELDS, SHARD_FIELDS, THREAD_FIELDS, WAKES
from .ctf import Trace
from ..errors import UserError
from ..model.hist import Hist
from ..engine.tracer import Roles, Snapshot

S_RUN, S_SLEEP, S_RUNQ, S_DEAD = range(4)


class Report:
    """One recorded report: its snapshot fields and live-run extras."""

    def __init__(self, gen, mono_ns):
        self.gen, self.mono_ns = gen, mono_ns
        self.threads, self.shards, self.devs, self.counters = {}, {}, {}, {}
        self.wall_ts = self.interval_s = self.in_flight = None
        self.extra = {}

    def snapshot(self, hists=None):
        return Snapshot(None, dict(self.counters), self.threads, self.shards,
                        self.devs, self.mono_ns, hists, self.gen)


class OpRec:
    """One op's life, pieced together from its events."""
    __slots__ = ("op", "enq_ns", "enq_tid", "deq", "done", "stages", "tid",
                 "listed")

    def __init__(self, op, enq_ns, enq_tid):
        self.op, self.enq_ns, self.enq_tid = op, enq_ns, enq_tid
        self.deq = self.done = None
        self.listed = False
        self.stages = []
        self.tid = None

    def key_ns(self):
        if self.done and self.done["total_valid"]:
            return self.done["op_total_ns"]
        return self.deq["queue_wait_ns"] if self.deq else 0

    def op_class(self):
        return probetable.OP_CLASSES[self.done["op_class"]] \
            if self.done else None


class Capture:
    """A capture directory, read once."""

    def __init__(self, path):
        self.trace = Trace(path)
        env = self.trace.env
        if env.get("tool") != "osdstage":
            raise UserError("%s is a CTF trace but not an osdstage capture"
                            % path)
        try:
            self.info = json.loads(env["info"])
            names = env["roles"].split(",")
            worker = names.index(env["worker_role"])
            self.call_bias_ns = int(env["call_bias_ns"])
            self.kernel = env["kernel_stages"] == "1"
        except (KeyError, ValueError) as e:
            raise UserError("%s: capture metadata incomplete (%s)" % (path, e))
        self.env = env
        self.roles = Roles([(n, n) for n in names[1:]], worker)
        self.clock_offset_ns = self.trace.clock_offset_ns
        self._read()

    # ---------------------------------------------------------------- read
    def _read(self):
        self.reports = {}          # gen -> Report (in order)
        self.names = {}            # tid -> comm
        self.role_of = {}          # tid -> role index
        self.hists = {}            # gen -> {key: Hist}
        self.events = []           # (name, ts, values dict), BPF events
        self.end = None
        self.first_ns = self.last_ns = None
        cur = None
        for c, ts, ctx, vals in self.trace.records():
            name = c.name[9:]                  # after "osdstage:"
            if self.first_ns is None:
                self.first_ns = ts
            self.last_ns = ts
            gen = ctx[1]
            if c.id < 10:
                d = dict(zip(c.names, vals))
                self.events.append((name, ts, d))
                self._count(name, d, self.hists.setdefault(gen, {}))
                if "role" in d:
                    self.role_of.setdefault(d["tid"], d["role"])
                continue
            d = dict(zip(c.names, vals))
            if name == "thread":
                self.names[d["tid"]] = d["comm"]
                self.role_of[d["tid"]] = d["role"]
                continue
            if name == "end":
                self.end = d
                continue
            if cur is None or cur.gen != gen:
                cur = self.reports.setdefault(gen, Report(gen, ts))
            if name == "snap_thread":
                cur.threads[d["tid"]] = dict(
                    {"role": d["role"], "state": d["state"]},
                    **{k: d[k] for k in THREAD_FIELDS})
                self.role_of[d["tid"]] = d["role"]
            elif name == "snap_shard":
                cur.shards[d["cv"]] = {k: d[k] for k in SHARD_FIELDS}
            elif name == "snap_dev":
                cur.devs[d["dev"]] = {k: d[k] for k in DEV_FIELDS}
            elif name == "snap_counter":
                cur.counters[d["name"]] = d["value"]
            elif name == "report":
                cur.wall_ts = float(d["wall_ts"])
                cur.interval_s = float(d["interval_s"])
                cur.in_flight = None if d["in_flight"] < 0 else d["in_flight"]
                cur.extra = json.loads(d["extra"])

    @staticmethod
    def _count(name, d, h):
        """What the BPF programs counted in the stats map for this event."""
        def add(key, ns):
            x = h.get(key)
            if x is None:
                x = h[key] = Hist()
            x.add_ns(ns)
        if name == "stage":
            add(probetable.STAGE_NAMES[d["stage"]], d["duration_ns"])
        elif name == "op_dequeue":
            add("queue_wait", d["queue_wait_ns"])
            if d["attributed"]:
                for part in probetable.ATTR_PARTS:
                    add("attr." + part, d[part + "_ns"])
        elif name == "op_done":
            cls = probetable.OP_CLASSES[d["op_class"]]
            if d["total_valid"]:
                add("op_total", d["op_total_ns"])
                add("op_total." + cls, d["op_total_ns"])
            if d["dequeued"]:
                add("queue_wait." + cls, d["queue_wait_ns"])
        elif name == "waking":
            if d["offcpu_ns"]:
                add("offcpu.%d" % (d["role"] & 7), d["offcpu_ns"])
        elif name == "switch_in":
            if d["woken"]:
                add("wakeup_delay.%d" % (d["role"] & 7), d["wakeup_ns"])
        elif name == "futex_wait":
            add("futex_wait.%d" % (d["role"] & 7), d["duration_ns"])
        elif name in ("syncfs", "block_rq"):
            add(name, d["duration_ns"])

    # ------------------------------------------------------------- helpers
    def stage_keys(self):
        return [k for k in probetable.STAGE_IDS if not k.startswith("_")]

    def full_hists(self, h):
        return {k: h.get(k) or Hist() for k in self.stage_keys()}

    def comm(self, tid):
        return self.names.get(tid) or "tid %d" % tid

    def role_name(self, tid):
        r = self.role_of.get(tid, 0)
        return self.roles.names[r] if r < len(self.roles.names) else "other"

    def wall(self, mono_ns):
        return (mono_ns + self.clock_offset_ns) / 1e9

    def ordered_reports(self):
        return [self.reports[g] for g in sorted(self.reports)]

    # ------------------------------------------------------------ replays
    def replay(self):
        """[(cur, prev, report)] for each recorded report of the live run."""
        out = []
        reps = self.ordered_reports()
        for prev, cur in zip(reps, reps[1:]):
            if cur.wall_ts is None:
                continue
            hists = self.full_hists(self.hists.get(cur.gen, {}))
            out.append((cur.snapshot(hists), prev.snapshot(), cur))
        return out

    def reported_until(self):
        reps = [r for r in self.ordered_reports() if r.wall_ts is not None]
        return reps[-1].mono_ns if reps else None

    # ------------------------------------------------------------ windows
    def ops(self, t0, t1):
        """OpRecs of ops dequeued or completed in [t0, t1], with the call
        stages their worker ran between its dequeue and its next one."""
        live, out, last_on = {}, [], {}
        for name, ts, d in self.events:
            if name == "op_enqueue":
                live[d["op"]] = OpRec(d["op"], ts, d["tid"])
            elif name == "op_dequeue":
                o = live.get(d["op"])
                if o is None:                   # enqueued before the capture
                    o = live[d["op"]] = OpRec(d["op"], ts - d["queue_wait_ns"],
                                              d["enq_tid"])
                o.deq, o.tid = dict(d, ts=ts), d["tid"]
                last_on[d["tid"]] = o
                if t0 <= ts <= t1:
                    o.listed = True
                    out.append(o)
            elif name == "stage":
                o = last_on.get(d["tid"])
                if o is not None:
                    o.stages.append((probetable.STAGE_NAMES[d["stage"]],
                                     ts - d["duration_ns"], ts))
            elif name == "op_done":
                o = live.pop(d["op"], None)
                if o is None:
                    continue
                o.done = dict(d, ts=ts)
                if not o.listed and t0 <= ts <= t1:
                    o.listed = True
                    out.append(o)
        return out

    def window(self, t0, t1, role=None, op_class=None):
        """One report over [t0, t1] from the events alone -> (snapshot
        with the window's histograms, the ops seen in it).
        op_class: only ops of that class (user-space stages and the
        attribution); role: kernel stages and thread times of that thread
        role only."""
        h, devs, shards = {}, {}, {}
        wakers = dict.fromkeys(("wake_enqueuer", "wake_other",
                                "wake_timeout", "timeouts_with_work"), 0)
        ops = self.ops(t0, t1)
        if op_class:
            ops = [o for o in ops if o.op_class() == op_class]
            for o in ops:
                if o.deq and t0 <= o.deq["ts"] <= t1:
                    self._count("op_dequeue", o.deq, h)
                    self._shard(shards, wakers, o.deq)
                if o.done and t0 <= o.done["ts"] <= t1:
                    self._count("op_done", o.done, h)
                for st, a, b in o.stages:
                    if t0 <= b <= t1:
                        h.setdefault(st, Hist()).add_ns(b - a)
        role_idx = self.roles.names.index(role) if role else None
        for name, ts, d in self.events:
            if ts < t0:
                continue
            if ts > t1:
                break
            if name in ("stage", "op_dequeue", "op_done"):
                if op_class is None:
                    self._count(name, d, h)
                    if name == "op_dequeue":
                        self._shard(shards, wakers, d)
            elif name in ("waking", "switch_in", "futex_wait", "syncfs"):
                r = d["role"] if "role" in d else self.role_of.get(d["tid"])
                if role_idx is None or r == role_idx:
                    self._count(name, d, h)
            elif name == "block_rq":
                self._count(name, d, h)
                dev = "%d:%d" % (d["dev"] >> 20, d["dev"] & 0xFFFFF)
                x = devs.setdefault(dev, dict.fromkeys(DEV_FIELDS, 0))
                x["count"] += 1
                x["sum_ns"] += d["duration_ns"]
                x["bytes"] += d["bytes"]
                x["max_ns"] = max(x["max_ns"], d["duration_ns"])
        threads = self.thread_times(t0, t1)
        if role_idx is not None:
            threads = {t: v for t, v in threads.items()
                       if v["role"] == role_idx}
        counters = self._counters_over(t0, t1)
        counters.update(wakers)
        return Snapshot(None, counters, threads, shards, devs, t1,
                        self.full_hists(h)), ops

    def _shard(self, shards, wakers, d):
        if not d["attributed"]:
            return
        cv = d["shard"]
        s = shards.setdefault(cv, dict.fromkeys(SHARD_FIELDS, 0))
        s["ops"] += 1
        s["qwait_ns"] += d["queue_wait_ns"]
        for part in probetable.ATTR_PARTS:
            s[part + "_ns"] += d[part + "_ns"]
        s["qwait_max_ns"] = max(s["qwait_max_ns"], d["queue_wait_ns"])
        if d["timeout_with_work"]:
            s["timeouts_with_work"] += 1
            wakers["timeouts_with_work"] += 1
        wake = WAKES[d["wake"]]
        if wake != "none":
            s["wake_" + wake] += 1
            wakers["wake_" + wake] += 1

    def _counters_over(self, t0, t1):
        """Loss counters of the recorded reports the window overlaps."""
        reps = self.ordered_reports()
        if not reps:
            return {}
        before = [r for r in reps if r.mono_ns <= t0] or reps[:1]
        after = [r for r in reps if r.mono_ns >= t1] or reps[-1:]
        a, b = before[-1].counters, after[0].counters
        if a is b:
            a = {}
        return {k: v - a.get(k, 0) for k, v in b.items()}

    def thread_times(self, t0, t1):
        """Per thread over [t0, t1]: time asleep / runnable (replaying the
        scheduler events), futex time, wake-ups; the shard cv and birth/
        death times from the recorded state."""
        reps = self.ordered_reports()
        first = reps[0].threads if reps else {}
        last = reps[-1].threads if reps else {}
        out, state, since = {}, {}, {}
        for tid, t in first.items():
            state[tid] = t["state"]
            since[tid] = reps[0].mono_ns

        def row(tid):
            r = out.get(tid)
            if r is None:
                t = last.get(tid) or first.get(tid) or {}
                r = out[tid] = {
                    "role": self.role_of.get(tid, t.get("role", 0)),
                    "state": S_RUN, "sleep_ns": 0, "runq_ns": 0,
                    "futex_ns": 0, "wakeups": 0, "cv": t.get("cv", 0),
                    "born": t.get("born", 0), "died": t.get("died", 0)}
            return r

        def close(tid, ts):
            st, s0 = state.get(tid), since.get(tid)
            if st is None or s0 is None:
                return
            a, b = max(s0, t0), min(ts, t1)
            if b > a:
                if st == S_SLEEP:
                    row(tid)["sleep_ns"] += b - a
                elif st == S_RUNQ:
                    row(tid)["runq_ns"] += b - a

        for name, ts, d in self.events:
            if ts > t1 and name != "futex_wait":
                continue
            tid = d.get("tid")
            if name == "switch_out":
                close(tid, ts)
                state[tid], since[tid] = d["state"], ts
                if d["state"] == S_DEAD:
                    row(tid)["died"] = ts
            elif name == "waking":
                if state.get(tid, S_SLEEP) == S_SLEEP:
                    close(tid, ts)
                    state[tid], since[tid] = S_RUNQ, ts
                    if t0 <= ts <= t1:
                        row(tid)["wakeups"] += 1
            elif name == "switch_in":
                close(tid, ts)
                state[tid], since[tid] = S_RUN, ts
                row(tid)
            elif name == "futex_wait":
                a, b = max(ts - d["duration_ns"], t0), min(ts, t1)
                if b > a:
                    row(tid)["futex_ns"] += b - a
        for tid in list(state):
            close(tid, t1)
            if state[tid] != S_DEAD or tid in out:
                row(tid)
        for tid, r in out.items():
            r["state"] = state.get(tid, S_RUN)
            if not r["born"]:
                r["born"] = t0
        return out

    # ----------------------------------------------------------- timeline
    def timeline(self, t0, t1, ops, max_ops=4000):
        """The window as lanes, ops and wake-up arrows (htmlreport.py's
        and perfetto.py's input)."""
        worker = self.roles.worker
        tids = {t for t, r in self.role_of.items() if r == worker}
        for o in ops[:max_ops]:
            tids.update(t for t in (o.tid, o.enq_tid) if t)
        lanes, state, since, wakes, pend = {}, {}, {}, [], {}

        def seg(tid, a, b, st):
            a, b = max(a, t0), min(b, t1)
            if b > a and tid in lanes:
                lanes[tid]["cpu"].append([a, b, ("run", "sleep", "runq",
                                                 "sleep")[st]])
        for t in sorted(tids):
            lanes[t] = {"tid": t, "name": self.comm(t),
                        "role": self.role_name(t), "cpu": []}
        for name, ts, d in self.events:
            if ts > t1:
                break
            tid = d.get("tid")
            if name in ("switch_out", "waking", "switch_in"):
                if tid in since:
                    seg(tid, since[tid], ts, state[tid])
                if name == "switch_out":
                    state[tid] = d["state"]
                elif name == "waking":
                    state[tid] = S_RUNQ
                    if d["waker_tid"] and ts >= t0:
                        pend[tid] = {"from_tid": d["waker_tid"],
                                     "to_tid": tid, "ts_ns": ts,
                                     "oncpu_ns": None}
                else:
                    state[tid] = S_RUN
                    w = pend.pop(tid, None)
                    if w is not None:
                        w["oncpu_ns"] = ts
                        if tid in lanes:
                            wakes.append(w)
                since[tid] = ts
        for tid in list(since):
            seg(tid, since[tid], t1, state[tid])
        tl_ops = []
        for o in ops:
            if len(tl_ops) >= max_ops:
                break
            end = o.done["ts"] if o.done else (o.stages[-1][2] if o.stages
                                               else o.deq["ts"])
            if end < t0 or o.enq_ns > t1:
                continue
            stages = []
            if o.deq:
                stages.append(["queue_wait", o.enq_ns, o.deq["ts"]])
            stages += [[n, s, e] for n, s, e in o.stages]
            tl_ops.append({
                "op": "0x%x" % o.op, "tid": o.tid, "enqueue_ns": o.enq_ns,
                "enqueue_tid": o.enq_tid, "class": o.op_class(),
                "wake": (WAKES[o.deq["wake"]] if o.deq and o.deq["wake"]
                         else None),
                "stages": stages})
        for w in wakes:                 # wakers that are not lanes yet
            t = w["from_tid"]
            if t not in lanes:
                lanes[t] = {"tid": t, "name": self.comm(t),
                            "role": self.role_name(t), "cpu": []}
        for lane in lanes.values():
            lane["cpu"].sort()
        order = sorted(lanes.values(), key=lambda ln: (
            ln["role"] != self.roles.names[worker], ln["tid"]))
        return {"window": [t0, t1], "clock_offset_ns": self.clock_offset_ns,
                "lanes": order, "ops": tl_ops, "wakeups": wakes}


def slowest(cap, ops, n):
    """The n slowest ops (op_total, else queue_wait) as JSON-able dicts."""
    rows = []
    for o in sorted(ops, key=lambda o: o.key_ns(), reverse=True)[:n]:
        deq = o.deq or {}
        row = {
            "op": "0x%x" % o.op, "class": o.op_class(),
            "enqueue": {"ts": round(cap.wall(o.enq_ns), 6),
                        "tid": o.enq_tid, "thread": cap.comm(o.enq_tid)},
            "total_us": round(o.done["op_total_ns"] / 1000, 1)
            if o.done and o.done["total_valid"] else None,
        }
        if o.deq:
            row["dequeue"] = {
                "at_us": round((deq["ts"] - o.enq_ns) / 1000, 1),
                "tid": deq["tid"], "thread": cap.comm(deq["tid"])}
            row["queue_wait_us"] = round(deq["queue_wait_ns"] / 1000, 1)
            row["woken"] = {
                "by": WAKES[deq["wake"]] if deq["attributed"] else None,
                "waker_tid": deq["waker_tid"] or None,
                "waker": cap.comm(deq["waker_tid"]) if deq["waker_tid"]
                else None}
            if deq["attributed"]:
                for part in probetable.ATTR_PARTS:
                    row["woken"][part + "_us"] = round(
                        deq[part + "_ns"] / 1000, 1)
        row["stages"] = [{"stage": s, "start_us": round((a - o.enq_ns) / 1000,
                                                        1),
                          "end_us": round((b - o.enq_ns) / 1000, 1)}
                         for s, a, b in sorted(o.stages, key=lambda x: x[1])]
        if o.done:
            row["done_us"] = round((o.done["ts"] - o.enq_ns) / 1000, 1)
        rows.append(row)
    return rows

