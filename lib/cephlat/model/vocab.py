"""The names a report is made of - stages, op classes, attribution parts,
kernel stages, per-role stages, counters - derived from the BPF side's
enums by the naming rules of probes/osdstage.h.

Live runs take the enums from the build (build/osdstage.abi.json); a
capture carries the enums it was recorded with, so reading it needs no
build and no agreement with the running code.
"""
from .. import abi as abimod

# the enums a report needs (a capture stores these)
ENUMS = ("stage_id", "counter_id", "op_class", "wake_kind", "tstate_kind",
         "osdstage_limits", "queue_class")
# what a capture made before it may lack (read as empty)
OPTIONAL = ("queue_class",)
# a thread's row of a snapshot: (its name in reports and captures, the
# member of struct thread_state it is read from); the engine reads the
# map by these, a capture's "snap_thread" event holds the names
THREAD_ROW = (("sleep_ns", "cum_sleep"), ("runq_ns", "cum_runq"),
              ("futex_ns", "cum_futex"), ("wakeups", "wakeups"),
              ("cv", "queue_cv"), ("born", "born"), ("died", "died"))


def _key(enumerator, prefix):
    return enumerator[len(prefix):].lower().replace("__", ".")


class Vocab:
    def __init__(self, enums):
        """enums: {enum name: [[enumerator, value], ...]}"""
        self.enums = {k: [list(p) for p in enums.get(k, [])] for k in ENUMS
                      if k in enums or k not in OPTIONAL}
        lim = dict((n, v) for n, v in enums["osdstage_limits"])
        self.max_roles, self.max_stages = lim["MAX_ROLES"], lim["MAX_STAGES"]
        self.dev_minor_bits = lim["DEV_MINOR_BITS"]
        # the behind map's "not known whose" process (none in a capture
        # made before it)
        self.behind_unknown = lim.get("BEHIND_UNKNOWN")
        self.op_classes = abimod.labels(enums["op_class"])
        # the op scheduler's classes (enum queue_class; none in a capture
        # made before them)
        self.queue_classes = abimod.labels(enums.get("queue_class", []))
        self.wakes = abimod.labels(enums["wake_kind"])
        # who woke a worker that slept with the op queued (WK_NONE: no one)
        self.wakers = tuple(self.wakes[1:])
        self.states = abimod.labels(enums["tstate_kind"])
        self._stages(enums["stage_id"])
        self.counters, self.result_counters = [], set()
        ids = dict((n, v) for n, v in enums["counter_id"])
        # probe hits by price: uprobe hits, then tracepoint runs (none in
        # a capture made before the header marked them)
        up = ids.get("CNT__UPROBE_HITS", ids["CNT__MAX"])
        tp = ids.get("CNT__TP_HITS", ids["CNT__MAX"])
        uprobe, tracepoint = [], []
        results = False
        for n, v in sorted(enums["counter_id"], key=lambda p: p[1]):
            if n == "CNT__RESULTS":
                results = True
            elif not n.startswith("CNT__"):
                key = _key(n, "CNT_")
                self.counters.append(key)
                if results:
                    self.result_counters.add(key)
                if up <= v < tp:
                    uprobe.append(key)
                elif v >= tp:
                    tracepoint.append(key)
        self.uprobe_hits, self.tp_hits = tuple(uprobe), tuple(tracepoint)
        self.hits = self.uprobe_hits + self.tp_hits

    def _stages(self, pairs):
        self.stage_ids = {}          # report key -> stats map id
        self.probed, self.kernel, self.class_split = [], [], []
        self.background = []        # probed stages of background work
        self.queue_split = []       # stages split by queue class
        self.attr_parts, self.role_stages = [], []
        section = "probed"
        for n, v in pairs:
            if n.startswith("ST__"):
                if n == "ST__PROBED":
                    section = "derived"
                elif n == "ST__BACKGROUND":
                    section = "background"
                elif n == "ST__KERNEL":
                    section = "kernel"
                elif n == "ST__CALIB":
                    self.calib_id = v
                elif n == "ST__CALIB_ENTRY":
                    self.calib_entry_id = v
                elif n == "ST__COUNT":
                    self.n_ids = v
                continue
            key = _key(n, "ST_")
            if key.endswith(".role"):
                base = key[:-len(".role")]
                self.role_stages.append((base, v))
                self.kernel.append(base)
                for r in range(self.max_roles):
                    self.stage_ids["%s.%d" % (base, r)] = v + r
                continue
            self.stage_ids[key] = v
            if section in ("probed", "background"):
                self.probed.append(key)
                if section == "background":
                    self.background.append(key)
            elif section == "kernel":
                self.kernel.append(key)
            else:
                base, _, part = key.partition(".")
                if part in self.op_classes:
                    if base not in self.class_split:
                        self.class_split.append(base)
                elif part in self.queue_classes:
                    if base not in self.queue_split:
                        self.queue_split.append(base)
                elif base == "attr":
                    self.attr_parts.append(part)

    @property
    def waker_counters(self):
        """The counters of who woke workers that slept with the op queued
        (enum wake_kind) and of timed waits that found work."""
        return tuple("wake_" + w for w in self.wakers) + \
            ("timeouts_with_work",)

    @property
    def shard_fields(self):
        """A shard's sums (struct shard_stats of the header, member by
        member; tests/unit/test_abi.py holds the two together): its ops,
        their queue wait, each attribution part, each waker, the longest
        wait and the timed waits that found work."""
        return (("ops", "qwait_ns") +
                tuple(p + "_ns" for p in self.attr_parts) +
                tuple("wake_" + w for w in self.wakers) +
                ("qwait_max_ns", "timeouts_with_work"))

    def dev_name(self, dev):
        """A block device number of the BPF side as "major:minor"."""
        return "%d:%d" % (dev >> self.dev_minor_bits,
                          dev & ((1 << self.dev_minor_bits) - 1))

    def stage_labels(self):
        """Labels of every stats map id (None where unused)."""
        out = [None] * self.n_ids
        for k, v in self.stage_ids.items():
            out[v] = k
        return out


_LIVE = {}


def live(bpf_dir=None):
    """The vocabulary of the build (cached)."""
    a = abimod.load("osdstage", bpf_dir)
    v = _LIVE.get(a.path)
    if v is None:
        v = _LIVE[a.path] = Vocab(a.enums)
    return v
