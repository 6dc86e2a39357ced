"""The exporter's state: every traced OSD's measurements summed since the
exporter started (across OSD restarts and re-attaches: counters never go
backwards), and the Prometheus collector that serves them.

The live loop (exporter/service.py) hands over each refresh interval per
OSD and tier, as the report model built it (model/interval.py's
Interval: the figures osdstage's reports are made of, add_interval); a
scrape (collect) only
reads what was summed, under a lock, so it costs the same whatever the
load. Each stage is taken from the one tier that feeds it (the sources
given at attached(): the lean tier's where it has the stage, whose counts
are every op's), never summed over the tiers.

With --otlp the histograms of the ops sent as traces carry OpenMetrics
exemplars (exporter/exemplars.py: which families, and why no others);
/metrics is served in the OpenMetrics format to a scraper that asks for
it (Prometheus does), the only one that shows them, and in the classic
text format otherwise.
"""
import gzip
import threading
import time

import numpy as np
from prometheus_client.core import (CounterMetricFamily, Exemplar,
                                    GaugeMetricFamily, HistogramMetricFamily)

from ..engine.duty import ESCALATION_OUTCOMES
from ..model import report
from ..model.hist import HIST_SLOTS, slot_bounds_us
from . import families as F
from .bykey import keep_or_other
from .exemplars import keep
from .tailwatch import REASONS
from .families import BUCKET_EXPONENTS, BUCKETS_S, BY_NAME

STAGE = F.STAGE_LATENCY
# per peer of the stages that wait on other OSDs: (wait histogram, times
# last counter)
PEER_FAMILIES = {
    "replica_wait": (F.REPLICA_WAIT, F.REPLICA_LAST_REPLY),
    "shard_read": (F.SHARD_READ_WAIT, F.SHARD_READ_LAST_REPLY),
}
QCLASS = F.SCHED_CLASS_QUEUE_WAIT
ALL = "all"                   # the label value of "not split"
# the sources' key of the per-scheduler-class figures (exporter/service.py)
SCHED_CLASSES = "scheduler_class"
SCRAPED_S = 120.0             # "someone scrapes": a scrape this recent
# the BPF side's counters of the ops chosen as traces (probes/osdstage.h
# enum counter_id) -> (family, label)
TRACE_COUNTERS = (
    (F.OTLP_OPS_CHOSEN, "sample", "trace_sample"),
    (F.OTLP_OPS_CHOSEN, "slow", "trace_slow"),
    (F.OTLP_OPS_DROPPED, "rate", "trace_over_rate"),
    (F.OTLP_OPS_DROPPED, "ring", "trace_ring_full"),
)
# --by's summed families, each labelled (by, key)
BY_SUMS = (F.OPS_BY_KEY, F.OP_SECONDS_BY_KEY, F.QUEUE_WAIT_BY_KEY,
           F.BYTES_IN_BY_KEY, F.BYTES_OUT_BY_KEY)
# why spans were not sent (send/otlp.py Sender.REASONS)
SPAN_DROPS = ("queue_full", "collector")
# the exposition formats: the classic text one (the default) and
# OpenMetrics (asked for in the scrape's Accept header; the only one with
# exemplars)
TEXT, OPENMETRICS = "text", "openmetrics"
FORMATS = (TEXT, OPENMETRICS)


def exposition(accept):
    """The format a scraper's Accept header asks for, as
    prometheus_client's own server chooses it: -> (format, its content
    type)."""
    from prometheus_client.exposition import choose_encoder
    from prometheus_client.openmetrics import exposition as om
    ctype = choose_encoder(accept)[1]
    return (OPENMETRICS if ctype == om.CONTENT_TYPE_LATEST else TEXT), ctype


def _encode(fmt, registry):
    if fmt == OPENMETRICS:
        from prometheus_client.openmetrics.exposition import generate_latest
    else:
        from prometheus_client import generate_latest
    return generate_latest(registry)


def _slot_buckets():
    """Fine slot -> the first bucket (le) that holds it; len(BUCKETS_S)
    for +Inf. A slot's upper bound is at most the bucket's le."""
    les = [1 << k for k in BUCKET_EXPONENTS]
    out = np.empty(HIST_SLOTS, dtype=np.int64)
    for slot in range(HIST_SLOTS):
        hi = slot_bounds_us(slot)[1]
        out[slot] = next((i for i, le in enumerate(les) if hi <= le),
                         len(les))
    return out


SLOT_BUCKET = _slot_buckets()
NBUCKETS = len(BUCKETS_S) + 1
LE = tuple("%g" % b for b in BUCKETS_S) + ("+Inf",)


class HistSum:
    """A Prometheus histogram's state: per-bucket counts (not cumulative),
    the sum in seconds and the count."""

    __slots__ = ("counts", "sum_s", "count")

    def __init__(self):
        self.counts = np.zeros(NBUCKETS, dtype=np.int64)
        self.sum_s, self.count = 0.0, 0

    def add(self, h):
        if not h.count:
            return
        self.counts += np.bincount(SLOT_BUCKET, weights=h.slots,
                                   minlength=NBUCKETS).astype(np.int64)
        self.sum_s += h.sum_ns / 1e9
        self.count += h.count

    def cumulative(self):
        return list(zip(LE, np.cumsum(self.counts).tolist()))


# the most (process, cgroup) series of THREAD_RUNQUEUE_BEHIND an OSD has:
# the first ones seen, later ones summed as "other"
BEHIND_SERIES = 12


def _behind_label(row):
    """(process, cgroup) labels of a "behind" row (model/behind.py)."""
    name = row["process"] if row["kind"] == "process" else row["kind"]
    return (name or "?", row["cgroup"] or "")


def _capped(st, label):
    """`label`, or ("other", "") once OSD state `st` has BEHIND_SERIES
    others."""
    have = {k[1][1:] for k in st.counters
            if k[0] == F.THREAD_RUNQUEUE_BEHIND}
    if label in have or len(have - {("other", "")}) < BEHIND_SERIES:
        return label
    return ("other", "")


class OsdState:
    """One OSD's (by name: osd.N) sums and its latest gauges."""

    def __init__(self, name):
        self.name = name
        self.hists = {}       # (family, label values after ceph_daemon)
        self.counters = {}    # (family, label values) -> float
        self.gauges = {}      # (family, label values) -> float, replaced
        self.by_seen = {}     # --by: key with a series -> its last op
        self.by_names = {}    # --by client: key with a series -> its name
        self.info = None      # label values of F.OSD_INFO (traced now)
        self.sources = {}     # stage -> the tier feeding it (traced now)
        self.cost = {}        # tier -> its overhead ratio (traced now)
        # --otlp: (family, label values) of a series in hists -> {bucket
        # index: Exemplar}, the newest op sent as a trace (traced now)
        self.exemplars = {}

    def hist(self, family, labels, h):
        s = self.hists.get((family, labels))
        if s is None:
            s = self.hists[(family, labels)] = HistSum()
        s.add(h)

    def count(self, family, labels, v):
        # a zero still makes the series: every family is there from the
        # first refresh (a counter that is missing and then appears loses
        # its first increase in rate())
        key = (family, labels)
        self.counters[key] = self.counters.get(key, 0) + max(v, 0)


class Exported:
    """Every OSD's state, and the host-wide gauges; thread-safe."""

    def __init__(self, bound_pct, otlp=False, by=None):
        self.lock = threading.Lock()
        # --otlp: the traces' families have series (else empty)
        self.otlp = otlp
        # --by's key: the breakdown's families have series (else empty)
        self.by = by
        self.spans = ({}, {})   # the sender's counts (livetraces.py)
        self.osds = {}
        self.bound_pct = bound_pct
        self.targets = 0
        self.fullness = {}
        self.self_cpu = 0.0
        self.registry = None
        # per format: (page, its gzip or None), stale, last scraped
        self._out = {f: (b"", None) for f in FORMATS}
        self._stale = set(FORMATS)
        self._gzip = False      # a scraper asked for gzip: made at render
        self._render = threading.Lock()
        self._scraped = {f: -1e9 for f in FORMATS}

    def publish(self):
        """The state changed (a refresh): each format someone scraped in
        the last SCRAPED_S is rendered now (a scrape then only copies
        bytes), the others by their next scrape (no scraper, no
        rendering)."""
        self._stale = set(FORMATS)
        now = time.monotonic()
        for fmt in FORMATS:
            if now - self._scraped[fmt] < SCRAPED_S:
                self._render_page(fmt, wait=True)

    def _render_page(self, fmt, wait):
        """(page, its gzip or None) in format `fmt`: rendered first when
        stale. A scrape (wait False) does not wait for a render in
        progress when there is a page: it gets that one, one refresh
        older (waiting, a scrape took the render's time, 40-90 ms on the
        loaded lab)."""
        if not self._render.acquire(blocking=wait or not self._out[fmt][0]):
            return self._out[fmt]
        try:
            if fmt in self._stale and self.registry is not None:
                self._stale.discard(fmt)
                page = _encode(fmt, self.registry)
                # one tuple: a scrape reads a page and its gzip together
                self._out[fmt] = (page, _gzip(page) if self._gzip else None)
            return self._out[fmt]
        finally:
            self._render.release()

    def page(self, accept_gzip=False, fmt=TEXT):
        """/metrics as (bytes, "gzip" or None) in format `fmt` (TEXT or
        OPENMETRICS: exposition()): the last refresh's state, rendered
        once; gzip-compressed when the scraper accepts it (as Prometheus
        does: 316 kB of text are 23 kB), compressed once per page too."""
        self._scraped[fmt] = time.monotonic()
        page, gz = self._render_page(fmt, wait=False)
        if not accept_gzip:
            return page, None
        if gz is None:
            # the first scrape that asks: from now on at render time
            self._gzip = True
            gz = _gzip(page)
            if self._render.acquire(blocking=False):
                if self._out[fmt][0] is page:
                    self._out[fmt] = (page, gz)
                self._render.release()
        return gz, "gzip"

    def osd(self, name):
        st = self.osds.get(name)
        if st is None:
            st = self.osds[name] = OsdState(name)
        return st

    def attached(self, name, info, sources=None):
        """Tracing of OSD `name` (re)started: info labels, attach count,
        and which tier feeds each stage ({stage: tier}; also
        SCHED_CLASSES)."""
        with self.lock:
            st = self.osd(name)
            st.info = info
            st.sources = dict(sources or {})
            st.cost = {}
            st.count(F.ATTACHES, (), 1)
            # every family from the first refresh: no escalation yet
            for reason in REASONS:
                for outcome in ESCALATION_OUTCOMES:
                    st.count(F.ESCALATIONS, (reason, outcome), 0)

    def escalated(self, name, reason, outcome):
        """The full tier was asked for at once for OSD `name`
        (exporter/tailwatch.py's reason, DutyCycle.escalate's outcome)."""
        with self.lock:
            self.osd(name).count(F.ESCALATIONS, (reason, outcome), 1)

    def detached(self, names):
        """These OSDs are no longer traced (exited): their sums stay, the
        info and the gauges go."""
        with self.lock:
            for name in names:
                st = self.osds.get(name)
                if st is not None:
                    st.info, st.gauges, st.sources = None, {}, {}
                    st.exemplars = {}

    def add_exemplars(self, name, ops):
        """--otlp: OSD `name`'s ops just handed to the OTLP sender, as
        exemplars: [(trace id, the op's end in wall-clock seconds,
        exemplars.op_values(...))]. Each goes on the first series of its
        label values' tries that the OSD has (none: no exemplar), in the
        bucket of its value, unless that holds a newer op's."""
        with self.lock:
            st = self.osds.get(name)
            if not self.otlp or st is None or st.info is None:
                return
            for tid, at, values in ops:
                for fam, tries, ns in values:
                    key = next(((fam, t) for t in tries
                                if (fam, t) in st.hists), None)
                    if key is not None:
                        keep(st.exemplars, key, ns, Exemplar(
                            {"trace_id": tid}, ns / 1e9, round(at, 6)))

    def add_by(self, name, kind, sums, top, now, names=None):
        """--by: OSD `name`'s ops by key since the last call ({key: (ops,
        op_total ns, queue-wait ns, bytes in, bytes out)};
        bykey.key_sums): each key's series,
        the busiest first, while fewer than `top` keys have one, the rest
        under "other" (bykey.keep_or_other: an idle key's series go);
        names: {client key: the name it authenticated as} (--by client),
        the info of those with a series."""
        with self.lock:
            st = self.osd(name)
            for key, got in sorted(
                    sums.items(), key=lambda kv: (-kv[1][0], kv[0])):
                label, gone = keep_or_other(st.by_seen, key, top, now)
                for g in gone:
                    for fam in BY_SUMS:
                        st.counters.pop((fam, (kind, g)), None)
                    st.by_names.pop(g, None)
                n, total, qwait, b_in, b_out = got
                st.count(F.OPS_BY_KEY, (kind, label), n)
                st.count(F.OP_SECONDS_BY_KEY, (kind, label), total / 1e9)
                st.count(F.QUEUE_WAIT_BY_KEY, (kind, label), qwait / 1e9)
                st.count(F.BYTES_IN_BY_KEY, (kind, label), b_in)
                st.count(F.BYTES_OUT_BY_KEY, (kind, label), b_out)
            # a name that came after a client's first ops names it now
            for key in st.by_seen if names else ():
                if names.get(key):
                    st.by_names[key] = names[key]

    def set_spans(self, sent, dropped):
        """The OTLP sender's counts since the start ({daemon: spans
        sent}, {(daemon, reason): spans dropped}; send/otlp.py)."""
        with self.lock:
            self.spans = (dict(sent), dict(dropped))

    def set_host(self, targets, fullness, self_cpu=None):
        with self.lock:
            self.targets, self.fullness = targets, dict(fullness)
            if self_cpu is not None:
                self.self_cpu = self_cpu

    def add_interval(self, name, iv, overhead, tier="full", sources=None,
                     traced=True, threads=None):
        """One refresh interval of OSD `name` in `tier` (model/interval.py's
        Interval `iv`, with `overhead`, the tier's cost record): of its
        stages, those `sources` ({stage: tier}) gives to this tier (all
        without sources); `traced`: this tier's seconds count as the OSD's
        traced seconds (one tier's of several); `threads`: the thread
        table of the snapshot that ends it (the threads gauge)."""
        run, hists, counters, secs = iv.run, iv.hists, iv.counters, iv.secs
        in_flight = iv.record["in_flight"]
        vocab = run.vocab

        def ours(stage):
            return sources is None or sources.get(stage, tier) == tier

        with self.lock:
            st = self.osd(name)
            for stage in run.stages:
                if not ours(stage):
                    continue
                if stage in run.classes and stage in run.partitioned:
                    for c in vocab.op_classes:
                        h = hists.get("%s.%s" % (stage, c))
                        if h is not None:
                            st.hist(STAGE, (stage, c), h)
                elif stage in hists:
                    st.hist(STAGE, (stage, ALL), hists[stage])
            if "queue_wait" in vocab.queue_split and \
                    "queue_wait" in run.stages and ours(SCHED_CLASSES):
                for c in vocab.queue_classes:
                    h = hists.get("queue_wait." + c)
                    if h is not None:
                        st.hist(QCLASS, (c,), h)
                    h = hists.get("held." + c)
                    if h is not None:
                        st.count(F.SCHED_CLASS_HELD, (c,), h.sum_ns / 1e9)
            for stage, (wait_fam, last_fam) in PEER_FAMILIES.items():
                for peer, (wait, last) in iv.peers[stage].items():
                    if wait is not None:
                        st.hist(wait_fam, ("osd.%d" % peer,), wait)
                    if last:
                        st.count(last_fam, ("osd.%d" % peer,), last)
            if run.kernel:
                self._kernel(st, iv, threads)
            for key in vocab.hits:          # label: "hit_entry" -> "entry"
                st.count(F.PROBE_HITS,
                         (key[len("hit_"):],), counters.get(key, 0))
            for key, v in iv.record["lost"].items():
                st.count(F.EVENTS_LOST, (key,), v)
            if self.otlp and tier == "full":
                for fam, label, key in TRACE_COUNTERS:
                    st.count(fam, (label,), counters.get(key, 0))
            if self.by and tier == "full":
                st.count(F.OPS_BY_KEY_MISSED, (),
                         counters.get("trace_ring_full", 0))
            if traced:
                st.count(F.TRACED, (), secs)
            st.count(F.ATTACHED, (tier,),
                     secs * overhead["interval_attached_fraction"])
            # the tiers' costs add up (each measured on its own programs)
            st.cost[tier] = overhead["estimated_pct"] / 100.0
            st.gauges[(F.OVERHEAD, ())] = sum(st.cost.values())
            if in_flight is not None:
                st.gauges[(F.OPS_IN_FLIGHT, ())] = in_flight

    @staticmethod
    def _kernel(st, iv, threads):
        run = iv.run
        roles, vocab = run.roles, run.vocab
        kst, per_role = iv.kernel, iv.per_role
        for stage in vocab.kernel:
            fam = F.KERNEL_STAGES.get(stage)
            if fam is None:
                continue        # a kernel stage with no family yet
            if stage in per_role:
                for role, h in per_role[stage].items():
                    st.hist(fam, (role,), h)
            else:
                st.hist(fam, (), kst[stage])
        for role, r in iv.roles.items():
            st.count(F.THREAD_OFFCPU, (role,),
                     r["sleep_ns"] / 1e9)
            st.count(F.THREAD_RUNQUEUE, (role,),
                     r["runq_ns"] / 1e9)
            st.count(F.THREAD_FUTEX_WAIT, (role,),
                     r["futex_ns"] / 1e9)
            st.count(F.THREAD_WAKEUPS, (role,),
                     r["wakeups"])
        for role, b in (iv.record.get("behind") or {}).items():
            rows = [(_behind_label(r), r["us"]) for r in b["by"]]
            if b["other_us"]:
                rows.append((("other", ""), b["other_us"]))
            for label, us in rows:
                st.count(F.THREAD_RUNQUEUE_BEHIND,
                         (role,) + _capped(st, label), us / 1e6)
        alive = {}
        for t in (threads or {}).values():
            if not t["died"]:
                name = report.role_name(roles, t["role"])
                alive[name] = alive.get(name, 0) + 1
        for key in [k for k in st.gauges if k[0] == F.THREADS]:
            del st.gauges[key]
        for role, n in alive.items():
            st.gauges[(F.THREADS, (role,))] = n
        for shard, _key, _workers, d in iv.shards:
            label = (str(shard) if shard != "?" else "unknown",)
            st.count(F.QUEUE_OPS, label, d["ops"])
            # the causes: the attribution's parts (vocab.attr_parts)
            for cause in run.vocab.attr_parts:
                st.count(F.QUEUE_WAIT, label + (cause,),
                         d[cause + "_ns"] / 1e9)
            for waker in run.vocab.wakers:
                st.count(F.QUEUE_WAKEUPS, label + (waker,),
                         d["wake_" + waker])
            st.count(F.QUEUE_TIMEOUTS_WITH_WORK, label,
                     d["timeouts_with_work"])

    # --- the Prometheus side ---------------------------------------------
    def collect(self):
        """prometheus_client's collector protocol: every family of
        families.py, present (maybe empty) whatever is traced."""
        with self.lock:
            out = {f.name: _family(f) for f in BY_NAME.values()}
            for name in sorted(self.osds):
                st = self.osds[name]
                for (fam, labels), h in st.hists.items():
                    out[fam].add_metric((name,) + labels, _buckets(
                        h, st.exemplars.get((fam, labels))), h.sum_s)
                for (fam, labels), v in st.counters.items():
                    out[fam].add_metric((name,) + labels, v)
                for (fam, labels), v in st.gauges.items():
                    out[fam].add_metric((name,) + labels, v)
                if st.info is not None:
                    out[F.OSD_INFO].add_metric((name,) + st.info, 1)
                for key, who in sorted(st.by_names.items()):
                    out[F.CLIENT_INFO].add_metric((name, key, who), 1)
                for stage, tier in sorted(st.sources.items()):
                    out[F.STAGE_TIER_INFO].add_metric(
                        (name, stage, tier), 1)
            out[F.OVERHEAD_BOUND].add_metric(
                (), self.bound_pct / 100.0)
            out[F.TARGETS].add_metric((), self.targets)
            out[F.SELF_CPU].add_metric((), self.self_cpu)
            for m, v in sorted(self.fullness.items()):
                out[F.MAP_FULLNESS].add_metric((m,), v)
            sent, dropped = self.spans
            if self.otlp:
                names = set(sent) | {n for n, _ in dropped} | {
                    n for n, st in self.osds.items() if st.info is not None}
                for name in sorted(names):
                    out[F.OTLP_SPANS_SENT].add_metric(
                        (name,), sent.get(name, 0))
                    for why in SPAN_DROPS:
                        out[F.OTLP_SPANS_DROPPED].add_metric(
                            (name, why), dropped.get((name, why), 0))
        return list(out.values())


def _buckets(h, exemplars):
    """A histogram's cumulative buckets, each with its exemplar if it has
    one ({bucket index: Exemplar})."""
    cum = h.cumulative()
    if not exemplars:
        return cum
    return [(le, v, exemplars[i]) if i in exemplars else (le, v)
            for i, (le, v) in enumerate(cum)]


def _gzip(page):
    # level 1: 1 ms for the 3-OSD lab's page, 3 at the default 6, for
    # 13 % more bytes
    return gzip.compress(page, 1, mtime=0)


def _family(f):
    cls = {"histogram": HistogramMetricFamily,
           "counter": CounterMetricFamily,
           "gauge": GaugeMetricFamily}[f.type]
    return cls(f.name, f.help, labels=list(f.labels))
