"""What each measurement means for a report: the one implementation of the
per-event rules that the live run's kernel maps and a capture's events
both follow.

- Rules.count(): which histograms an event lands in - what the BPF
  programs' record() calls did with it (probes/osdstage.bpf.c);
- Rules.shard(): a dequeue's share of its shard's totals, as attribute()
  added it to the shards map.

Threads' states (time asleep, runnable; the scheduler events replayed)
are model/threadstates.py's.
"""
from collections import namedtuple

from .hist import Hist


class PeerKey(namedtuple("PeerKey", "stage what osd")):
    """The key of a per-peer histogram, beside the stages' (str) keys:
    `stage` waits on other OSDs (replica_wait: a write's replicas or
    shards; shard_read: an erasure-coded read's shards), `osd` (int) is
    the peer, `what` is "wait" (each
    of its replies' wait since the sub-ops went out) or "last" (its count:
    the ops it replied to last). report.peers() reads them back."""
    __slots__ = ()

    @classmethod
    def wait(cls, stage, osd):
        return cls(stage, "wait", int(osd))

    @classmethod
    def last(cls, stage, osd):
        return cls(stage, "last", int(osd))


class Rules:
    """The rules for one run: its vocabulary (model/vocab.py) and the labels
    of the events' enum fields ({field: [label by value]})."""

    def __init__(self, vocab, labels):
        self.vocab, self.labels = vocab, labels
        self.role_mask = vocab.max_roles - 1

    def msg_stages(self, fields):
        """The stages an op_enqueue event carries (valid when its
        "stamped" is set): its fields named <probed stage>_ns (the
        messenger stages, from the message's stamps)."""
        return [st for st in self.vocab.probed if st + "_ns" in fields]

    def label(self, field, value):
        return self.labels[field][value]

    def queue_class(self, d):
        """An op_dequeue's scheduler class (None in older captures)."""
        if "queue_class" not in d:
            return None
        return self.label("queue_class", d["queue_class"])

    def count(self, name, d, h):
        """Add event `name` (fields d) to the histograms h {key: Hist}."""
        def add(key, ns):
            x = h.get(key)
            if x is None:
                x = h[key] = Hist()
            x.add_ns(ns)
        if name == "stage":
            add(self.label("stage", d["stage"]), d["duration_ns"])
        elif name == "op_enqueue":
            if d.get("stamped"):        # not in older captures
                for st in self.msg_stages(d):
                    add(st, d[st + "_ns"])
        elif name == "op_dequeue":
            add("queue_wait", d["queue_wait_ns"])
            qc = self.queue_class(d)
            if qc:
                add("queue_wait." + qc, d["queue_wait_ns"])
            if d["attributed"]:
                for part in self.vocab.attr_parts:
                    if part + "_ns" in d:   # held: not in older captures
                        add("attr." + part, d[part + "_ns"])
                if qc:
                    add("held." + qc, d["held_ns"])
        elif name == "op_done":
            cls = self.label("op_class", d["op_class"])
            if d["total_valid"]:
                add("op_total", d["op_total_ns"])
                add("op_total." + cls, d["op_total_ns"])
                if d.get("msg_ns"):     # not in older captures
                    add("op_latency", d["msg_ns"] + d["op_total_ns"])
                    add("op_latency." + cls, d["msg_ns"] + d["op_total_ns"])
            if d["dequeued"]:
                add("queue_wait." + cls, d["queue_wait_ns"])
                if d["total_valid"] and "msg_ns" in d:
                    add("execute", d["op_total_ns"] - d["queue_wait_ns"])
            if d.get("replies"):
                add("replica_wait", d["replica_wait_ns"])
                add(PeerKey.last("replica_wait", d["last_peer"]), 0)
        elif name == "replica_reply":
            add(PeerKey.wait("shard_read" if d.get("read") else
                             "replica_wait", d["peer"]), d["wait_ns"])
        elif name == "shard_read":
            add("shard_read", d["read_ns"])
            add(PeerKey.last("shard_read", d["last_peer"]), 0)
        elif name == "local_commit":
            add("local_commit", d["commit_ns"])
        elif name == "repop_done":
            add("repop", d["repop_ns"])
            if d["dequeued"]:
                add("repop.queue_wait", d["queue_wait_ns"])
        elif name == "waking":
            if d["offcpu_ns"]:
                add("offcpu.%d" % (d["role"] & self.role_mask),
                    d["offcpu_ns"])
        elif name == "switch_in":
            if d["woken"]:
                add("wakeup_delay.%d" % (d["role"] & self.role_mask),
                    d["wakeup_ns"])
        elif name == "futex_wait":
            add("futex_wait.%d" % (d["role"] & self.role_mask),
                d["duration_ns"])
        elif name in ("syncfs", "block_rq"):
            add(name, d["duration_ns"])

    def shard(self, shards, wakers, d):
        """An op_dequeue's part of its shard's row and of the wake-up
        counters, as the BPF side's attribute() counts them."""
        if not d["attributed"]:
            return
        s = shards.setdefault(d["shard"],
                              dict.fromkeys(self.vocab.shard_fields, 0))
        s["ops"] += 1
        s["qwait_ns"] += d["queue_wait_ns"]
        for part in self.vocab.attr_parts:
            s[part + "_ns"] += d.get(part + "_ns", 0)
        s["qwait_max_ns"] = max(s["qwait_max_ns"], d["queue_wait_ns"])
        if d["timeout_with_work"]:
            s["timeouts_with_work"] += 1
            wakers["timeouts_with_work"] += 1
        wake = self.label("wake", d["wake"])
        if wake != "none":
            s["wake_" + wake] += 1
            wakers["wake_" + wake] += 1


# --------------------------------------------------------------------------
# the same rules over many events at once (numpy record arrays: a capture
# read in bulk, capture/stream.py)

def slots_of_ns(ns):
    """hist.slot_of_ns over an array of durations (uint64) -> int64 slots,
    the same arithmetic."""
    import numpy as np
    from .hist import HIST_FRAC_BITS, HIST_SLOTS, HIST_SUB, HIST_SUB_BITS, \
        slot_of_ns
    ns = np.asarray(ns, dtype=np.uint64)
    big = ns >= np.uint64(1 << (63 - HIST_FRAC_BITS))
    v = ((ns & np.uint64((1 << (63 - HIST_FRAC_BITS)) - 1))
         << np.uint64(HIST_FRAC_BITS)) // np.uint64(1000)
    v = v.astype(np.int64)
    p = np.zeros(len(v), dtype=np.int64)
    hi = v >= HIST_SUB
    if np.any(hi):
        p[hi] = np.floor(np.log2(v[hi].astype(np.float64))).astype(np.int64)
        # float rounding near powers of two: make 2^p <= v < 2^(p+1)
        p[hi] -= (np.left_shift(1, p[hi]) > v[hi])
        p[hi] += (np.left_shift(1, p[hi] + 1) <= v[hi]) & (p[hi] < 62)
    shift = np.maximum(p - HIST_SUB_BITS, 0)
    slot = np.where(hi, HIST_SUB + (p - HIST_SUB_BITS) * HIST_SUB +
                    ((v >> shift) & (HIST_SUB - 1)), v)
    slot = np.minimum(slot, HIST_SLOTS - 1)
    if np.any(big):
        slot[big] = [slot_of_ns(x) for x in ns[big].tolist()]
    return slot


class HistSet:
    """Histograms filled from arrays of durations, keyed as Rules.count
    keys them; .hists() gives them in the order a one-event-at-a-time
    count would have created them (first event first)."""

    def __init__(self):
        self.rows = {}        # key -> [count, sum, max, slots, first]

    def add(self, key, ns, first):
        """ns: uint64 array (non-empty); first: an ordering tuple of the
        first of these events."""
        import numpy as np
        from .hist import HIST_SLOTS
        r = self.rows.get(key)
        if r is None:
            r = self.rows[key] = [0, 0, 0, np.zeros(HIST_SLOTS, np.int64),
                                  first]
        n = len(ns)
        mx = int(ns.max())
        r[0] += n
        if mx and n > ((1 << 64) - 1) // mx:
            r[1] += sum(ns.tolist())
        else:
            r[1] += int(ns.sum(dtype=np.uint64))
        r[2] = max(r[2], mx)
        r[3] += np.bincount(slots_of_ns(ns), minlength=HIST_SLOTS)
        r[4] = min(r[4], first)

    def hists(self, into=None):
        """-> {key: Hist} (keys already in `into` keep their place)."""
        out = {} if into is None else into
        for key, r in sorted(self.rows.items(), key=lambda kv: kv[1][4]):
            h = Hist(r[0], r[1], r[2], r[3].tolist())
            if key in out:
                out[key].merge(h)
            else:
                out[key] = h
        return out


def count_arrays(rules, name, r):
    """Rules.count over the events `r` (a structured array of event class
    `name`) -> [(key, index array into r, duration array)], each key in
    the order count() adds them for one event."""
    count = _ARRAY_COUNTS.get(name)
    if count is None:
        return []
    c = _ArrayCount(rules, r)
    count(c, name)
    return c.out


class _ArrayCount:
    """count_arrays' state for one array of events: what it adds, and the
    helpers each event class's counting uses."""

    def __init__(self, rules, r):
        import numpy as np
        self.np, self.rules, self.r = np, rules, r
        self.names = r.dtype.names
        self.allx = np.arange(len(r))
        self.out = []

    def add(self, key, idx, ns):
        if len(idx):
            self.out.append((key, idx, self.np.asarray(ns,
                                                       dtype=self.np.uint64)))

    def each(self, values, idx):
        """(value, its indices) for each distinct value among values[idx]"""
        v = values[idx]
        for x in self.np.unique(v).tolist():
            yield x, idx[v == x]

    def nonzero(self, field):
        return self.np.nonzero(self.r[field])[0]

    def zeros(self, idx):
        return self.np.zeros(len(idx), self.np.uint64)


def _count_stage(c, name):
    r = c.r
    for s, idx in c.each(r["stage"], c.allx):
        c.add(c.rules.label("stage", s), idx, r["duration_ns"][idx])


def _count_enqueue(c, name):
    if "stamped" in c.names:            # not in older captures
        st = c.nonzero("stamped")
        for stage in c.rules.msg_stages(c.names):
            c.add(stage, st, c.r[stage + "_ns"][st])


def _count_dequeue(c, name):
    r, rules = c.r, c.rules
    c.add("queue_wait", c.allx, r["queue_wait_ns"])
    has_qc = "queue_class" in c.names   # not in older captures
    if has_qc:
        for q, idx in c.each(r["queue_class"], c.allx):
            c.add("queue_wait." + rules.label("queue_class", q), idx,
                  r["queue_wait_ns"][idx])
    att = c.nonzero("attributed")
    for part in rules.vocab.attr_parts:
        if part + "_ns" in c.names:     # held: not in older captures
            c.add("attr." + part, att, r[part + "_ns"][att])
    if has_qc:
        for q, idx in c.each(r["queue_class"], att):
            c.add("held." + rules.label("queue_class", q), idx,
                  r["held_ns"][idx])


def _count_done(c, name):
    r = c.r
    for oc, idx in c.each(r["op_class"], c.allx):
        cls = c.rules.label("op_class", oc)
        tv = idx[r["total_valid"][idx] != 0]
        c.add("op_total", tv, r["op_total_ns"][tv])
        c.add("op_total." + cls, tv, r["op_total_ns"][tv])
        dq = idx[r["dequeued"][idx] != 0]
        c.add("queue_wait." + cls, dq, r["queue_wait_ns"][dq])
        if "msg_ns" in c.names:         # not in older captures
            lat = tv[r["msg_ns"][tv] != 0]
            ns = r["msg_ns"][lat] + r["op_total_ns"][lat]
            c.add("op_latency", lat, ns)
            c.add("op_latency." + cls, lat, ns)
            ex = dq[r["total_valid"][dq] != 0]
            c.add("execute", ex, r["op_total_ns"][ex] -
                  r["queue_wait_ns"][ex])
        if "replies" in c.names:
            rp = idx[r["replies"][idx] != 0]
            c.add("replica_wait", rp, r["replica_wait_ns"][rp])
            for p, pi in c.each(r["last_peer"], rp):
                c.add(PeerKey.last("replica_wait", p), pi, c.zeros(pi))


def _count_reply(c, name):
    r = c.r
    reads = r["read"] != 0 if "read" in c.names else \
        c.np.zeros(len(r), bool)            # not in older captures
    for stage, sel in (("replica_wait", ~reads), ("shard_read", reads)):
        for p, idx in c.each(r["peer"], c.allx[sel]):
            c.add(PeerKey.wait(stage, p), idx, r["wait_ns"][idx])


def _count_shard_read(c, name):
    r = c.r
    c.add("shard_read", c.allx, r["read_ns"])
    for p, idx in c.each(r["last_peer"], c.allx):
        c.add(PeerKey.last("shard_read", p), idx, c.zeros(idx))


def _count_repop_done(c, name):
    c.add("repop", c.allx, c.r["repop_ns"])
    dq = c.nonzero("dequeued")
    c.add("repop.queue_wait", dq, c.r["queue_wait_ns"][dq])


# a scheduler event class: (its duration field, the key, the flag that
# selects the events counted or None)
_SCHED_COUNTS = {"waking": ("offcpu_ns", "offcpu", "offcpu_ns"),
                 "switch_in": ("wakeup_ns", "wakeup_delay", "woken"),
                 "futex_wait": ("duration_ns", "futex_wait", None)}


def _count_sched(c, name):
    field, key, sel = _SCHED_COUNTS[name]
    idx = c.allx if sel is None else c.nonzero(sel)
    roles = c.r["role"].astype(c.np.int64) & c.rules.role_mask
    for ro, ri in c.each(roles, idx):
        c.add("%s.%d" % (key, ro), ri, c.r[field][ri])


def _count_field(field, key=None):
    """One histogram of one duration field (key: the event class's
    name)."""
    def count(c, name):
        c.add(key or name, c.allx, c.r[field])
    return count


_ARRAY_COUNTS = {
    "stage": _count_stage, "op_enqueue": _count_enqueue,
    "op_dequeue": _count_dequeue, "op_done": _count_done,
    "replica_reply": _count_reply, "shard_read": _count_shard_read,
    "local_commit": _count_field("commit_ns", "local_commit"),
    "repop_done": _count_repop_done,
    "waking": _count_sched, "switch_in": _count_sched,
    "futex_wait": _count_sched,
    "syncfs": _count_field("duration_ns"),
    "block_rq": _count_field("duration_ns"),
}
