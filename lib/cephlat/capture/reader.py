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
import array
import heapq
import json
import os

import numpy as np

from .ctf import Trace
from .stream import Streams, dicts
from .format import DEV_FIELDS, FORMAT, THREAD_FIELDS
from ..model.roles import Roles
from ..model.snapshot import Snapshot
from ..errors import UserError
from ..model.events import (SHARD_FIELDS, WAKER_COUNTERS, HistSet, Rules,
                            SchedReplay, accrue, count_arrays)
from ..model.hist import Hist
from ..model.vocab import Vocab

# Format 0 captures carry no vocabulary: theirs, as it was when format 1
# came (the same names; only the ids differ, and format 0 events carry
# stage names as CTF enum labels, never bare ids).
_V0_VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "vocab_v0.json")


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


# CEPH_ENTITY_TYPE_* (msg_types.h): a request id's entity
_ENTITY = {1: "mon", 2: "mds", 4: "osd", 8: "client", 16: "mgr"}


def reqid_name(d):
    """The request id of an op_enqueue event as Ceph prints it
    (client.4123.0:77), or None when the capture has none."""
    t = d.get("req_type")
    if not t:
        return None
    return "%s.%d.%d:%d" % (_ENTITY.get(t, "type%d" % t), d["req_num"],
                            d["req_inc"], d["req_tid"])


def _first(r, keys, idx, sub):
    """Where the first of events r[idx] lies in the merged order (and
    after it, `sub`: the order count() adds its keys in for one event)."""
    ts = r["_ts"][idx]
    t = ts.min()
    return (int(t), int(keys[idx][ts == t].min()), sub)


class OpRec:
    """One op's life, pieced together from its events."""
    __slots__ = ("op", "enq_ns", "enq_tid", "deq", "done", "stages", "tid",
                 "listed", "req", "pg", "replies", "local", "repop", "refs",
                 "rank")

    def __init__(self, op, enq_ns, enq_tid, d=None):
        self.op, self.enq_ns, self.enq_tid = op, enq_ns, enq_tid
        self.deq = self.done = None
        self.listed = False
        self.refs = 0             # how many maps of op_stream hold it
        self.rank = None
        self.stages = []
        self.tid = None
        self.req = reqid_name(d) if d else None
        self.pg = "%d.%x" % (d["pg_pool"], d["pg_seed"]) if d and \
            d.get("pg_pool") is not None and self.req else None
        self.replies = []         # (peer osd id, wait ns, ts): primary
        self.local = None         # own commit event (primary)
        self.repop = None         # repop_done event (a replica op)

    def kind(self):
        """client (completed as a client op), repop (a replica op) or
        None (not known: not completed in the capture, or another op)."""
        return "client" if self.done else "repop" if self.repop else None

    def key_ns(self):
        if self.done and self.done["total_valid"]:
            return self.done["op_total_ns"]
        return self.deq["queue_wait_ns"] if self.deq else 0

    def op_class(self, rules):
        return rules.label("op_class", self.done["op_class"]) \
            if self.done else None


def op_end(o):
    """When op `o` ends for the timeline: done, else its last stage, else
    its dequeue."""
    return o.done["ts"] if o.done else (o.stages[-1][2] if o.stages else
                                        o.deq["ts"])


class OpSummary:
    """What a window's ops are needed for, kept without holding them all:
    the n slowest (op_total, else queue_wait; ties: the first to enter
    the window), the slowest of all, and when each op was (for the
    timeline, which picks its ops once it knows its window)."""

    def __init__(self, n):
        self.n = max(n, 1)
        self.heap = []          # ((key, -rank), rank, op): the slowest
        self.spans = array.array("q")   # rank, enq_ns, end per op
        self.addrs = array.array("Q")   # op address per op
        self.count = 0

    def add(self, o):
        self.count += 1
        k = (o.key_ns(), -o.rank)
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, (k, o.rank, o))
        elif k > self.heap[0][0]:
            heapq.heapreplace(self.heap, (k, o.rank, o))
        try:
            end = op_end(o)
        except (TypeError, KeyError):
            end = -1
        self.spans.extend((o.rank, o.enq_ns, end))
        self.addrs.append(o.op)

    def by_rank(self):
        """The kept ops in the order they entered the window."""
        return [o for _, _, o in sorted(self.heap, key=lambda x: x[1])]

    def slowest(self):
        """The slowest op (the first to enter the window of equals)."""
        return max(self.heap, key=lambda x: x[0])[2] if self.heap else None

    def overlapping(self, a, b):
        """{(op address, enqueue ns): rank} of the ops whose span meets
        [a, b]."""
        sp = np.frombuffer(self.spans, dtype=np.int64).reshape(-1, 3)
        hit = np.nonzero((sp[:, 1] <= b) & (sp[:, 2] >= a))[0]
        addrs = np.frombuffer(self.addrs, dtype=np.uint64)
        return dict(zip(zip(addrs[hit].tolist(), sp[hit, 1].tolist()),
                        sp[hit, 0].tolist()))


class Capture:
    """A capture directory, read once: the events of one target slot
    (captures of several OSDs hold a slot each; info "targets" names
    them; captures before format 2 hold one, slot 0)."""

    def __init__(self, path, slot=0):
        self.slot = slot
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
        self.format, self.vocab = self._vocab(path, env)
        self.targets = self.info.get("targets") or [
            {"pid": self.info.get("pid"), "name": None}]
        if not 0 <= slot < len(self.targets):
            raise UserError("%s holds %d target%s, not a slot %d" % (
                path, len(self.targets), "" if len(self.targets) == 1
                else "s", slot))
        self.pid = self.targets[slot]["pid"]
        self.name = self.targets[slot]["name"]
        self.roles = Roles([(n, n) for n in names[1:]], worker)
        self.rules = Rules(self.vocab, self._labels())
        self.clock_offset_ns = self.trace.clock_offset_ns
        self._read()

    @staticmethod
    def _vocab(path, env):
        """(format, vocabulary) of the capture, from its own metadata."""
        try:
            fmt = int(env.get("format", 0))
            if fmt > FORMAT:
                raise UserError(
                    "%s is capture format %d, newer than this osdstage reads "
                    "(%d): read it with a newer osdstage" % (path, fmt,
                                                             FORMAT))
            if fmt == 0:
                with open(_V0_VOCAB) as f:
                    return fmt, Vocab(json.load(f))
            return fmt, Vocab(json.loads(env["vocab"]))
        except (KeyError, ValueError, TypeError) as e:
            raise UserError("%s: capture metadata incomplete (%s)" % (path, e))

    def _labels(self):
        """{field: labels} of the enum fields of the capture's events: what
        its values mean, as written by the code that recorded it."""
        out = {}
        for c in self.trace.classes.values():
            for name, _, labels in c.fields:
                if labels is not None and name != "role":
                    out.setdefault(name, labels)
        return out

    # ---------------------------------------------------------------- read
    def _read(self):
        """The user-space stream (threads, recorded reports) is read here;
        the BPF programs' events stay on disk and are streamed, a bounded
        chunk at a time, by whoever needs them (capture/stream.py)."""
        self.reports = {}          # gen -> Report (in order)
        self.names = {}            # tid -> comm
        self._meta_roles = {}      # tid -> role index (named by user space)
        self._role_of = None
        self._hists = None
        self.end = None
        trace = self.trace
        self._bpf = {c.id: c.name.split(":", 1)[1]
                     for c in trace.classes.values()}
        # the BPF programs' events come before those of user space
        self.n_bpf = next(c.id for c in trace.classes.values()
                          if c.name == "osdstage:thread")
        self._cid = {n: i for i, n in self._bpf.items() if i < self.n_bpf}
        files = [f for f in trace.streams if f != "stream_meta"]
        self.streams = Streams(trace, files)
        self.first_ns, self.last_ns = self.streams.span()
        for p in self.streams.packets:
            if p.truncated:
                trace.truncated = True
                trace.truncated_streams.append(os.path.basename(p.path))
        cur = None
        slot = self.slot
        meta = trace._stream_records("stream_meta") \
            if "stream_meta" in trace.streams else ()
        for c, ts, ctx, vals in meta:
            name = c.name.split(":", 1)[1]
            if self.first_ns is None or ts < self.first_ns:
                self.first_ns = ts
            if self.last_ns is None or ts > self.last_ns:
                self.last_ns = ts
            if len(ctx) > 2 and ctx[2] != slot and name != "end":
                continue
            if c.id < self.n_bpf:
                raise UserError("%s: BPF events in stream_meta: not an "
                                "osdstage capture this reads" % trace.path)
            gen = ctx[1]
            d = dict(zip(c.names, vals))
            if name == "thread":
                self.names[d["tid"]] = d["comm"]
                self._meta_roles[d["tid"]] = d["role"]
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
                self._meta_roles[d["tid"]] = d["role"]
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

    # ------------------------------------------------------------- streams
    def chunks(self, names, t0=None, t1=None):
        """The events of classes `names` with t0 <= ts <= t1, of this
        capture's target slot, in bounded chunks (stream.Chunk), in time
        order."""
        cids = [self._cid[n] for n in names if n in self._cid]
        if not cids:
            return
        slot_field = "_ctx2" if len(self.trace.context.fields) > 2 else None
        for ch in self.streams.chunks(cids, t0, t1):
            if slot_field:
                for c in list(ch.recs):
                    m = ch.recs[c][slot_field] == self.slot
                    if not m.all():
                        ch.recs[c], ch.keys[c] = ch.recs[c][m], ch.keys[c][m]
            yield ch

    def iter_events(self, names, t0=None, t1=None):
        """(name, ts, {field: value}) of the events of classes `names` in
        [t0, t1], in time order; one chunk in memory at a time."""
        for ch in self.chunks(names, t0, t1):
            cls, idx = ch.merged(list(ch.recs))
            rows = {}
            for c, r in ch.recs.items():
                fields = self.trace.classes[c].names
                rows[c] = list(zip(r["_ts"].tolist(), dicts(r, fields)))
            bpf = self._bpf
            for c, i in zip(cls.tolist(), idx.tolist()):
                ts, d = rows[c][i]
                yield bpf[c], ts, d

    @property
    def events(self):
        """Every BPF event as (name, ts, fields), streamed."""
        return self.iter_events(list(self._cid))

    @property
    def role_of(self):
        """tid -> role index: as user space named the thread, else as the
        first BPF event of the thread that carries a role said."""
        if self._role_of is None:
            first = {}              # tid -> (ts, key, role)
            with_role = [n for n in ("switch_out", "waking", "switch_in",
                                     "futex_wait") if n in self._cid]
            for ch in self.chunks(with_role):
                for c, r in ch.recs.items():
                    if "role" not in r.dtype.names or not len(r):
                        continue
                    o = np.lexsort((ch.keys[c], r["_ts"], r["tid"]))
                    tid = r["tid"][o]
                    head = np.ones(len(o), bool)
                    head[1:] = tid[1:] != tid[:-1]
                    o = o[head]
                    for t, ts, k, ro in zip(r["tid"][o].tolist(),
                                            r["_ts"][o].tolist(),
                                            ch.keys[c][o].tolist(),
                                            r["role"][o].tolist()):
                        if t not in first or (ts, k) < first[t][:2]:
                            first[t] = (ts, k, ro)
            out = {t: v[2] for t, v in first.items()}
            out.update(self._meta_roles)
            self._role_of = out
        return self._role_of

    @property
    def hists(self):
        """gen -> {key: Hist}: each report interval's histograms, from
        its events (every event carries its interval)."""
        if self._hists is None:
            per = {}                # gen -> HistSet
            names = list(self._cid)
            for ch in self.chunks(names):
                for c, r in ch.recs.items():
                    if not len(r):
                        continue
                    name = self._bpf[c]
                    gens = r["_ctx1"]
                    ug = np.unique(gens).tolist()
                    for sub, (key, idx, ns) in enumerate(
                            count_arrays(self.rules, name, r)):
                        # (ts, key, sub-order): where the first one lies
                        for g in ug:
                            if len(ug) > 1:
                                m = gens[idx] == g
                                gi, gns = idx[m], ns[m]
                            else:
                                gi, gns = idx, ns
                            if not len(gi):
                                continue
                            per.setdefault(g, HistSet()).add(
                                key, gns, _first(r, ch.keys[c], gi, sub))
            self._hists = {g: hs.hists() for g, hs in per.items()}
        return self._hists

    # ------------------------------------------------------------- helpers
    def stage_keys(self):
        return list(self.vocab.stage_ids)

    def full_hists(self, h):
        out = {k: Hist() for k in self.stage_keys()}
        out.update(h)
        return out

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
    def op_stream(self, t0, t1, t_start=None, keep=None):
        """The ops dequeued or completed in [t0, t1] (those `keep` accepts,
        if given), with their call stages: those naming the op (format 2:
        the op the thread was executing), else (older captures) those its
        worker ran between its dequeue and its next one.

        -> (listing rank, OpRec) pairs, each once nothing later in the
        capture can change it any more (its address reused, its worker on
        another op, ...), so that only open ops are held; the rest at the
        end. Ranks are the order ops entered the window. Reading starts at
        t_start (default: the capture's start)."""
        live, last_on, latest = {}, {}, {}
        rank = [0]
        held = [0]              # listed ops something may still change
        done = []

        def drop(o):
            if o is None:
                return
            o.refs -= 1
            if o.refs == 0 and o.listed:
                held[0] -= 1
                done.append((o.rank, o))

        def put(m, k, o):
            o.refs += 1
            drop(m.get(k))
            m[k] = o

        def listed(o):
            if keep is not None and not keep(o):
                return
            o.listed, o.rank = True, rank[0]
            rank[0] += 1
            held[0] += 1

        label = self.rules.label
        names = ("op_enqueue", "op_dequeue", "stage", "op_done", "repop_done",
                 "replica_reply", "local_commit")
        for name, ts, d in self.iter_events(names, t_start):
            if ts > t1 and not held[0]:
                break               # nothing listed can change any more
            if name == "op_enqueue":
                o = OpRec(d["op"], ts, d["tid"], d)
                put(live, d["op"], o)
                put(latest, d["op"], o)
            elif name == "op_dequeue":
                o = live.get(d["op"])
                if o is None:                   # enqueued before the capture
                    o = OpRec(d["op"], ts - d["queue_wait_ns"], d["enq_tid"])
                    put(live, d["op"], o)
                    put(latest, d["op"], o)
                d["ts"] = ts
                o.deq, o.tid = d, d["tid"]
                put(last_on, d["tid"], o)
                if t0 <= ts <= t1 and not o.listed:
                    listed(o)
            elif name == "stage":
                # an address is reused only once its op is freed, after the
                # call stages of its worker: the latest op there is it
                o = latest.get(d["op"]) if "op" in d else \
                    last_on.get(d["tid"])
                if o is not None:
                    o.stages.append((label("stage", d["stage"]),
                                     ts - d["duration_ns"], ts))
            elif name in ("op_done", "repop_done"):
                o = live.pop(d["op"], None)
                if o is None:
                    continue
                d["ts"] = ts
                if name == "op_done":
                    o.done = d
                else:
                    o.repop = d
                if not o.listed and t0 <= ts <= t1:
                    listed(o)
                drop(o)
            elif name == "replica_reply":
                o = live.get(d["op"])
                if o is not None:
                    o.replies.append((d["peer"], d["wait_ns"], ts))
            elif name == "local_commit":
                o = live.get(d["op"])
                if o is not None:
                    d["ts"] = ts
                    o.local = d
            if done:
                yield from done
                done.clear()
        seen = set()
        for m in (live, latest, last_on):
            for o in m.values():
                if o.listed and id(o) not in seen:
                    seen.add(id(o))
                    done.append((o.rank, o))
        done.sort(key=lambda x: x[0])
        yield from done

    def ops(self, t0, t1, keep=None):
        """OpRecs of ops dequeued or completed in [t0, t1] (op_stream),
        in the order they entered the window."""
        return [o for _, o in sorted(self.op_stream(t0, t1, keep=keep),
                                     key=lambda x: x[0])]

    def ops_overlapping(self, summary, t0, t1, a, b):
        """The ops of a window (OpSummary of window()) whose span meets
        [a, b], in the order they entered the window [t0, t1]: read again
        from the first one's enqueue only."""
        want = summary.overlapping(a, b)
        if not want:
            return []
        start = min(enq for _, enq in want)
        got = [(want[(o.op, o.enq_ns)], o) for _, o in self.op_stream(
            t0, t1, t_start=start,
            keep=lambda o: (o.op, o.enq_ns) in want)]
        return [o for _, o in sorted(got, key=lambda x: x[0])]

    def first_op(self, t0, t1):
        """The first op to enter the window [t0, t1], or None."""
        taken = []

        def keep(o):
            taken.append(o)
            return len(taken) == 1
        for _, o in self.op_stream(t0, t1, keep=keep):
            return o
        return None

    def window(self, t0, t1, role=None, op_class=None, slowest=0):
        """One report over [t0, t1] from the events alone -> (snapshot
        with the window's histograms, the window's ops: OpSummary).
        op_class: only ops of that class (user-space stages and the
        attribution); role: kernel stages and thread times of that thread
        role only; slowest: how many of the slowest ops to keep."""
        h, devs, shards = {}, {}, {}
        wakers = dict.fromkeys(WAKER_COUNTERS, 0)
        count, shard = self.rules.count, self.rules.shard
        ops = OpSummary(slowest)
        first_h, first_s = {}, {}     # key -> (rank, place in the op)
        for _, o in self.op_stream(t0, t1):
            if op_class and o.op_class(self.rules) != op_class:
                continue
            ops.add(o)
            if not op_class:
                continue
            # counted as the ops entered the window: keys and shards
            # keep the place their first op gave them
            oh, osh = {}, {}
            if o.deq and t0 <= o.deq["ts"] <= t1:
                count("op_dequeue", o.deq, oh)
                shard(osh, wakers, o.deq)
            if o.done and t0 <= o.done["ts"] <= t1:
                count("op_done", o.done, oh)
            for st, a, b in o.stages:
                if t0 <= b <= t1:
                    oh.setdefault(st, Hist()).add_ns(b - a)
            for j, (k, x) in enumerate(oh.items()):
                if k in h:
                    h[k].merge(x)
                    first_h[k] = min(first_h[k], (o.rank, j))
                else:
                    h[k], first_h[k] = x, (o.rank, j)
            for k, x in osh.items():
                if k in shards:
                    y = shards[k]
                    for f in SHARD_FIELDS:
                        y[f] = max(y[f], x[f]) if f == "qwait_max_ns" \
                            else y[f] + x[f]
                    first_s[k] = min(first_s[k], o.rank)
                else:
                    shards[k], first_s[k] = x, o.rank
        h = {k: h[k] for k in sorted(h, key=first_h.get)}
        shards = {k: shards[k] for k in sorted(shards, key=first_s.get)}
        role_idx = self.roles.names.index(role) if role else None
        names = ["waking", "switch_in", "futex_wait", "syncfs", "block_rq"]
        if op_class is None:
            names += ["stage", "op_dequeue", "op_done"]
        hs = HistSet()
        for ch in self.chunks(names, t0, t1):
            for c, r in ch.recs.items():
                name, keys = self._bpf[c], ch.keys[c]
                if name in ("waking", "switch_in", "futex_wait", "syncfs") \
                        and role_idx is not None:
                    if "role" in r.dtype.names:
                        m = r["role"] == role_idx
                    else:
                        ro = self.role_of
                        m = np.array([ro.get(t) == role_idx
                                      for t in r["tid"].tolist()], bool)
                    r, keys = r[m], keys[m]
                if not len(r):
                    continue
                for sub, (key, idx, ns) in enumerate(
                        count_arrays(self.rules, name, r)):
                    hs.add(key, ns, _first(r, keys, idx, sub))
            if op_class is None or "block_rq" in self._cid:
                for name, ts, d in self._events_of(ch, ("op_dequeue",
                                                        "block_rq")):
                    if name == "op_dequeue":
                        if op_class is None:
                            shard(shards, wakers, d)
                        continue
                    dev = self.vocab.dev_name(d["dev"])
                    x = devs.setdefault(dev, dict.fromkeys(DEV_FIELDS, 0))
                    x["count"] += 1
                    x["sum_ns"] += d["duration_ns"]
                    x["bytes"] += d["bytes"]
                    x["max_ns"] = max(x["max_ns"], d["duration_ns"])
        hs.hists(into=h)
        threads = self.thread_times(t0, t1)
        if role_idx is not None:
            threads = {t: v for t, v in threads.items()
                       if v["role"] == role_idx}
        counters = self._counters_over(t0, t1)
        counters.update(wakers)
        return Snapshot(None, counters, threads, shards, devs, t1,
                        self.full_hists(h)), ops

    def _events_of(self, ch, names):
        """(name, ts, fields) of a chunk's events of classes `names`, in
        merged order."""
        cids = [self._cid[n] for n in names if n in self._cid]
        cids = [c for c in cids if c in ch.recs and len(ch.recs[c])]
        if not cids:
            return
        cls, idx = ch.merged(cids)
        rows = {c: list(zip(ch.recs[c]["_ts"].tolist(),
                            dicts(ch.recs[c], self.trace.classes[c].names)))
                for c in cids}
        for c, i in zip(cls.tolist(), idx.tolist()):
            ts, d = rows[c][i]
            yield self._bpf[c], ts, d

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

    def sched(self, t1, t0=None, recorded=True):
        """The scheduler events up to t1 replayed (SchedReplay), a chunk
        at a time -> (replay, generator of per-chunk results: the applied
        events, the chunk, its merged order); the replay's states are
        final once the generator is exhausted. recorded: start from the
        thread states of the first recorded report."""
        reps = self.ordered_reports()
        first = reps[0].threads if reps and recorded else {}
        rp = SchedReplay(self.rules.labels["state"])
        for tid, t in first.items():
            rp.t.start(tid, t["state"], reps[0].mono_ns)
        return rp, self._sched_chunks(rp, t0, t1)

    def _sched_chunks(self, rp, t0, t1):
        kinds = ("switch_out", "waking", "switch_in")
        cids = [self._cid[n] for n in kinds if n in self._cid]
        pos0 = 0
        run = rp.t.run
        for ch in self.chunks(kinds, t0, t1):
            cls, idx = ch.merged(cids)
            n = len(cls)
            if not n:
                continue
            tid = np.empty(n, np.int64)
            kind = np.empty(n, np.int64)
            new = np.empty(n, np.int64)
            ts = np.empty(n, np.int64)
            for k, name in enumerate(kinds):
                c = self._cid.get(name)
                if c not in ch.recs:
                    continue
                m = cls == c
                r = ch.recs[c][idx[m]]
                tid[m], ts[m], kind[m] = r["tid"], r["_ts"], k
                new[m] = r["state"] if k == 0 else \
                    rp.t.runq if k == 1 else run
            out = rp.feed(tid, kind, new, ts, np.arange(pos0, pos0 + n))
            pos0 += n
            yield out, ch, cls, idx

    def thread_times(self, t0, t1):
        """Per thread over [t0, t1]: time asleep / runnable (replaying the
        scheduler events), futex time, wake-ups; the shard cv and birth/
        death times from the recorded state."""
        reps = self.ordered_reports()
        first = reps[0].threads if reps else {}
        last = reps[-1].threads if reps else {}
        states = self.rules.labels["state"]
        out = {}
        rp, chunks = self.sched(t1)
        ts_ = rp.t

        def row(tid):
            r = out.get(tid)
            if r is None:
                t = last.get(tid) or first.get(tid) or {}
                r = out[tid] = {
                    "role": self.role_of.get(tid, t.get("role", 0)),
                    "state": ts_.run, "sleep_ns": 0, "runq_ns": 0,
                    "futex_ns": 0, "wakeups": 0, "cv": t.get("cv", 0),
                    "born": t.get("born", 0), "died": t.get("died", 0)}
            return r

        # futex waits that overlap the window (they end at their event)
        for ch in self.chunks(("futex_wait",), t0):
            r = ch.recs[self._cid["futex_wait"]]
            o = np.lexsort((ch.keys[self._cid["futex_wait"]], r["_ts"]))
            end = r["_ts"][o].astype(object) if len(o) and \
                int(r["_ts"].max()) >= 1 << 62 else r["_ts"][o].astype(
                    np.int64)
            dur = r["duration_ns"][o]
            if len(o) and int(dur.max()) >= 1 << 62:
                dur = dur.astype(object)
            else:
                dur = dur.astype(np.int64)
            a = np.maximum(end - dur, t0)
            b = np.minimum(end, t1)
            sel = np.nonzero(b > a)[0]
            if not len(sel):
                continue
            tids = r["tid"][o][sel]
            amount = (b[sel] - a[sel]).tolist()
            for t, x in zip(tids.tolist(), amount):
                row(t)["futex_ns"] += int(x)
        dead, sleep, runq = ts_.dead, ts_.sleep, ts_.runq
        for ev, ch, cls, idx in chunks:
            tid, kind, ts = ev["tid"], ev["kind"], ev["ts"]
            a = np.maximum(ev["prev_since"], t0)
            b = np.minimum(ts, t1)
            acc = ev["closed"] & (b > a)
            died = (kind == 0) & (ev["new"] == dead)
            wake = (kind == 1) & (ts >= t0)
            touch = acc | died | wake | (kind == 2)
            # rows in the order their threads were first touched
            tt = tid[touch]
            if len(tt):
                u, first_i = np.unique(tt, return_index=True)
                for t in u[np.argsort(first_i)].tolist():
                    row(t)
            st = ev["prev_state"]
            for want, field in ((sleep, "sleep_ns"), (runq, "runq_ns")):
                m = acc & (st == want)
                if np.any(m):
                    u, inv = np.unique(tid[m], return_inverse=True)
                    sums = np.zeros(len(u), dtype=np.int64)
                    np.add.at(sums, inv, b[m] - a[m])
                    for t, x in zip(u.tolist(), sums.tolist()):
                        out[t][field] += int(x)
            if np.any(wake):
                u, c = np.unique(tid[wake], return_counts=True)
                for t, x in zip(u.tolist(), c.tolist()):
                    out[t]["wakeups"] += x
            if np.any(died):
                for t, x in zip(tid[died].tolist(), ts[died].tolist()):
                    out[t]["died"] = x
        for tid in list(ts_.since):
            a, b = max(ts_.since[tid], t0), min(t1, t1)
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
