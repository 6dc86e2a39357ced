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
import os

import numpy as np

from . import clock
from .ctf import Trace
from .stream import Streams, dicts
from .format import DEV_FIELDS, FORMAT, THREAD_FIELDS
from .lookup import OpLookups
from .ops import SlowPick, merged_first
from .threads import RoleScan, SchedAccess
from .window import WindowPass, traced_span
from ..model.breakdown import merge_names
from ..model.roles import Roles
from ..model.snapshot import Snapshot
from ..errors import UserError
from ..model.events import HistSet, Rules, count_arrays
from ..model.hist import Hist
from ..model.vocab import Vocab

# Format 0 captures carry no vocabulary: theirs, as it was when format 1
# came (the same names; only the ids differ, and format 0 events carry
# stage names as CTF enum labels, never bare ids).
_V0_VOCAB = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         "vocab_v0.json")


# the events user space writes, in every capture (format 3 on: "clock"
# too); metadata that describes none of one was cut short
USER_EVENTS = ("thread", "snap_thread", "snap_shard", "snap_dev",
               "snap_counter", "report", "end")


class Report:
    """One recorded report: its snapshot fields and live-run extras."""

    def __init__(self, gen, mono_ns):
        self.gen, self.mono_ns = gen, mono_ns
        self.threads, self.shards, self.devs, self.counters = {}, {}, {}, {}
        self.wall_ts = self.interval_s = self.in_flight = None
        self.extra = {}

    def snapshot(self, hists=None):
        s = Snapshot(None, dict(self.counters), self.threads, self.shards,
                     self.devs, self.mono_ns, hists, self.gen)
        s.throttles_over = self.extra.get("throttles")
        return s


class Capture(OpLookups, SchedAccess):
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
        meta = os.path.join(path, "metadata")
        for key in ("info", "roles", "worker_role", "call_bias_ns",
                    "kernel_stages"):
            if key not in env:
                raise UserError("%s lacks the capture's %s: not a whole "
                                "capture's metadata" % (meta, key))
        try:
            self.info = json.loads(env["info"])
            names = env["roles"].split(",")
            worker = names.index(env["worker_role"])
            self.call_bias_ns = int(env["call_bias_ns"])
            self.kernel = env["kernel_stages"] == "1"
        except ValueError:
            raise UserError("%s: the capture's info, roles or probe cost "
                            "cannot be read" % meta) from None
        self.env = env
        self.format, self.vocab = self._vocab(path, env)
        have = {c.name for c in self.trace.classes.values()}
        for n in USER_EVENTS + (("clock",) if self.format >= 3 else ()):
            if "osdstage:" + n not in have:
                raise UserError("%s is cut short: it describes no %s "
                                "events, which every capture has" % (
                                    meta, n))
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
        # how far the host's wall clock was ahead (osdstage -r
        # --clock-offset): wall() moves its times back by it
        self.shift_ns = 0
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
        except (KeyError, ValueError, TypeError):
            raise UserError("%s: the capture's vocabulary (the names of its "
                            "stages and counters) cannot be read" % (
                                os.path.join(path, "metadata"))) from None

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
        self._lastref = None
        self._sched_snaps = []     # (ts, states) of ThreadTimes.snaps
        self.end = None
        # the wall clock against the timestamps at the start and the end
        # (capture/clock.py; none before format 3: the metadata's offset)
        self.clocks = []
        # the cluster's names of pools and RBD images, when the capturing
        # host could read them (ceph/clusternames.py): {"fsid", "pools":
        # {id: name}, "images": {image id: name}, "selves": the look-ups'
        # own client entities}; {} when none
        self.cluster_names = {}
        # the files the target mapped (--stacks: "mapping" events), each
        # {"start", "end", "offset", "build_id", "path"}
        self.mappings = []
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
            if len(ctx) > 2 and ctx[2] != slot and name not in (
                    "end", "clock", "names"):
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
            if name == "clock":
                self.clocks.append(dict(d, mono_ns=ts,
                                        synced=bool(d["synced"])))
                continue
            if name == "names":
                merge_names(self.cluster_names, json.loads(d["names"]))
                continue
            if name == "mapping":
                self.mappings.append(d)
                continue
            if cur is None or cur.gen != gen:
                cur = self.reports.setdefault(gen, Report(gen, ts))
            if name == "snap_thread":
                cur.threads[d["tid"]] = dict(
                    {"role": d["role"], "state": d["state"]},
                    **{k: d[k] for k in THREAD_FIELDS})
                self._meta_roles[d["tid"]] = d["role"]
            elif name == "snap_shard":
                # held_ns: not in captures from before mClock holds
                cur.shards[d["cv"]] = {k: d.get(k, 0)
                                       for k in self.vocab.shard_fields}
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

    ROLE_EVENTS = ("switch_out", "waking", "switch_in", "futex_wait")
    OP_EVENTS = ("op_enqueue", "op_dequeue", "stage", "op_done",
                 "repop_done", "replica_reply", "local_commit", "op_reqid")

    @property
    def role_of(self):
        """tid -> role index: as user space named the thread, else as the
        first BPF event of the thread that carries a role said."""
        if self._role_of is None:
            rs = RoleScan(self)
            for ch in self.chunks(self.ROLE_EVENTS):
                rs.feed(ch)
            rs.finish()
        return self._role_of

    def _last_refs(self, only=None):
        """(addresses, (ts, key) of the last event naming each): sorted
        arrays, 24 bytes an address, so that OpTracker lets go of an op
        whose address nothing names any more. only: of these addresses
        alone (sorted; not kept: a capture of a busy OSD names millions
        of addresses, --op follows a few)."""
        if only is not None and self._lastref is None:
            return self._prepass(only=only)
        if self._lastref is None:
            self._prepass()
        return self._lastref

    def _op_scan(self, names):
        """(class id, records, keys) of op events `names` of this slot, in
        no particular order (Streams.scan)."""
        cids = [self._cid[n] for n in names if n in self._cid]
        slot_field = "_ctx2" if len(self.trace.context.fields) > 2 else None
        for c, r, k in self.streams.scan(cids):
            if slot_field:
                m = r[slot_field] == self.slot
                if not m.all():
                    r, k = r[m], k[m]
            if len(r):
                yield c, r, k

    def _slow_pick(self, t0, t1, n):
        """SlowPick of [t0, t1]'s n slowest ops, from the prepass if it
        is still to come, else from a scan of dequeues and completions."""
        pick = SlowPick(self, t0, t1, n)
        if self._lastref is None:
            self._prepass(pick)
        else:
            for c, r, _ in self._op_scan(("op_dequeue", "op_done")):
                pick.feed(c, r)
        return pick

    def _prepass(self, pick=None, only=None):
        """One pass over the op events for what needs the whole capture:
        the op addresses' last events (only the op events are decoded);
        pick (SlowPick), if given, is fed the same events. only: of those
        addresses alone, returned (not kept)."""
        parts, n = [], 0

        def reduce(parts):
            a = np.concatenate([x[0] for x in parts])
            t = np.concatenate([x[1] for x in parts])
            k = np.concatenate([x[2] for x in parts])
            o = np.lexsort((k, t, a))
            a, t, k = a[o], t[o], k[o]
            tail = np.ones(len(a), bool)
            tail[:-1] = a[1:] != a[:-1]
            return [(a[tail], t[tail], k[tail])]
        # in no particular order: what is kept is sorted
        for c, r, k in self._op_scan(self.OP_EVENTS):
            if pick is not None:
                pick.feed(c, r)
            if "op" not in r.dtype.names:
                continue
            if only is not None:
                if not len(only):
                    continue
                j = np.minimum(np.searchsorted(only, r["op"]),
                               len(only) - 1)
                m = only[j] == r["op"]
                r, k = r[m], k[m]
            parts.append((r["op"], r["_ts"], k))
            n += len(r)
            if n > 1 << 20:
                parts, n = reduce(parts), 0
        e = np.zeros(0, np.uint64)
        refs = reduce(parts)[0] if parts else (e, e, e)
        if only is not None:
            return refs
        self._lastref = refs

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
                                key, gns, merged_first(r, ch.keys[c], gi, sub))
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
        """Wall-clock seconds of timestamp `mono_ns`: the offset
        interpolated between the capture's clock samples (the metadata's
        without them)."""
        return (mono_ns + self.wall_offset_ns(mono_ns)) / 1e9

    def wall_offset_ns(self, mono_ns):
        """wall - monotonic (ns, an int) at `mono_ns`, as wall() moves it:
        interpolated between the capture's clock samples (the metadata's
        without them), less the host's given offset (shift_ns)."""
        off = clock.offset_at(self.clocks, mono_ns) if self.clocks else \
            self.clock_offset_ns
        return off - self.shift_ns

    def wall_ns(self, mono):
        """Wall-clock ns (int64 array) of an array of timestamps, as
        wall_offset_ns moves each."""
        off = clock.offsets_at(self.clocks, mono) if self.clocks else \
            self.clock_offset_ns
        return mono + off - self.shift_ns

    def clock(self):
        """{"id", "synced", "error_ns"} of the capture's clock (None where
        the capture does not say which clock it is: older captures)."""
        if "clock_id" not in self.env:
            return None
        return {"id": str(self.env["clock_id"]),
                "synced": bool(self.clocks) and all(
                    s["synced"] for s in self.clocks),
                "error_ns": self.clock_error_ns()}

    def clock_error_ns(self):
        """How far wall() may be off (capture/clock.uncertainty_ns): None
        when the host's clock was not kept synchronized or the capture has
        no clock samples."""
        return clock.uncertainty_ns(self.clocks)

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
    def window(self, t0, t1, role=None, op_class=None, slowest=0,
               spans=True):
        """One report over [t0, t1] from the events alone -> (snapshot
        with the window's histograms, the window's ops: OpSummary).
        op_class: only ops of that class (user-space stages and the
        attribution); role: kernel stages and thread times of that thread
        role only; slowest: how many of the slowest ops to keep; spans:
        keep every op's span (for a timeline: ops_overlapping).
        One pass over the capture: the ops (OpTracker), the window's
        events (histograms, shards, devices) and the thread times
        (ThreadTimes) are fed the same chunks."""
        return WindowPass(self, t0, t1, role, op_class, slowest,
                          spans).run()

    def traced_span(self):
        """(a, b): the part of the capture recorded with every probe
        attached, first snapshot to last report (window.traced_span)."""
        return traced_span(self)

    def _stage_ops(self):
        """Whether call-stage events name their op (format 2): else a
        stage is its worker's current op's, and every op is followed."""
        c = self._cid.get("stage")
        return c is None or "op" in self.streams.dtypes[c].names
