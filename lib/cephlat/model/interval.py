"""The report model: what one report interval holds, built once from two
snapshots of the same run (live: read from the kernel maps; offline: read
back from a capture) and read by every sink: renderers (render/) turn its
record into text, HTML or JSON (the JSON output is the record itself), and
the exporter sums its raw figures (Interval)."""
import json
from dataclasses import dataclass, field

from . import report, verdict
from .behind import behind_rows
from .hist import Hist

# the stages whose waits are per peer OSD (report.peers)
PEER_STAGES = ("replica_wait", "shard_read")


def _summary_with_hist(h):
    s = h.summary()
    s["hist"] = [[lo, hi, c] for lo, hi, c in h.log2_buckets(1)]
    return s


class RunInfo:
    """What a report needs to know about the run: from the live tracer, or
    from a capture's metadata (the same fields, recorded)."""

    def __init__(self, pid, version, stages, unavailable, classes,
                 call_bias_ns, kernel, roles, vocab, scheduler=None):
        self.pid, self.version, self.vocab = pid, version, vocab
        # the OSD's op scheduler and its settings (ceph/scheduler.py), keys
        # sorted as a capture's metadata holds them: a report read back
        # from a capture is the live one, byte for byte
        self.scheduler = json.loads(json.dumps(scheduler, sort_keys=True)) \
            if scheduler else None
        # (probe table entry used, is it the binary's own release?)
        self.probe_table = None
        self.stages, self.unavailable = list(stages), dict(unavailable)
        self.classes = set(classes)
        self.call_bias_ns, self.kernel, self.roles = call_bias_ns, kernel, roles
        # the split stages their op classes make up (the exporter exports
        # those per class; the others whole)
        self.partitioned = set()
        self.name = None           # "osd.N" (several targets)

    def info(self):
        """The recorded part (capture metadata)."""
        out = {"pid": self.pid, "ceph_version": self.version,
               "stages": self.stages, "unavailable": self.unavailable,
               "classes": sorted(self.classes)}
        if self.scheduler:
            out["scheduler"] = self.scheduler
        if self.probe_table:
            out["probe_table"], out["probe_table_exact"] = self.probe_table
        return out

    @classmethod
    def from_capture(cls, cap):
        i = cap.info
        run = cls(cap.pid, i["ceph_version"], i["stages"],
                  i["unavailable"], i["classes"], cap.call_bias_ns,
                  cap.kernel, cap.roles, cap.vocab,
                  cap.targets[cap.slot].get("scheduler",
                                            i.get("scheduler")))
        if "probe_table" in i:
            run.probe_table = (i["probe_table"], i["probe_table_exact"])
        run.name = cap.name
        return run


def queue_classes(vocab, hists):
    """The queue wait of the ops dequeued through dequeue_op by their
    scheduler class (enum queue_class), each with the part of it held by
    the scheduler -> {class: queue wait summary + "held": summary}."""
    out = {}
    for c in vocab.queue_classes:
        s = hists.get("queue_wait." + c, Hist()).summary()
        s["held"] = hists.get("held." + c, Hist()).summary()
        out[c] = s
    return out


@dataclass
class Interval:
    """One OSD's report interval, built once (build_interval) and read by
    every sink: `record`, the JSON object (text, JSON, HTML), and the raw
    figures it was made from (the exporter's histograms and counters):

    hists: Hist by key (report.interval_deltas' keys, and once the kernel
    part is built "kernel.<stage>" and "role.<stage>.<role>"); counters:
    the counters' deltas; peers: {stage: report.peers} of PEER_STAGES;
    kernel: {stage: Hist} over every role, per_role: {stage: {role:
    Hist}} (report.kernel_stages); roles: report.role_deltas; shards:
    report.shard_deltas (the last three empty without the kernel part);
    by: a capture window's breakdown by client, pool, PG or image
    (model/breakdown.py: Breakdown; osdstage -r --by), else None, its
    record the record's "by"."""
    run: "RunInfo"
    secs: float
    record: dict
    hists: dict
    counters: dict
    peers: dict
    kernel: dict = field(default_factory=dict)
    per_role: dict = field(default_factory=dict)
    roles: dict = field(default_factory=dict)
    shards: list = field(default_factory=list)
    by: object = None


def build_interval(run, cur, prev, ts, secs, in_flight):
    """One interval of `run` from two snapshots -> Interval."""
    vocab = run.vocab
    hists, counters = report.interval_deltas(cur, prev)
    peers = {stage: report.peers(hists, stage) for stage in PEER_STAGES}
    stages = {}
    for stage in run.stages:
        # a stage or class with no histogram read (none in a snapshot
        # made by hand) is one without events
        s = _summary_with_hist(hists.get(stage, Hist()))
        if stage in run.classes:
            s["by_class"] = {c: hists.get("%s.%s" % (stage, c),
                                          Hist()).summary()
                             for c in vocab.op_classes}
            # a capture window's dequeues of ops never seen complete
            # (capture/window.py): the rows add up to the stage's count
            rest = hists.get(stage + ".unknown")
            if rest is not None and rest.count:
                s["by_class"]["unknown"] = rest.summary()
        if stage in PEER_STAGES:
            s["by_peer"] = report.peer_rows(peers[stage])
            last = max(s["by_peer"].items(), key=lambda kv: kv[1]["last"],
                       default=(None, {"last": 0}))
            s["last_peer"] = last[0] if last[1]["last"] else None
        elif stage == "repop" and "repop.queue_wait" in hists:
            s["queue_wait"] = hists["repop.queue_wait"].summary()
        if stage == "queue_wait" and "queue_wait" in vocab.queue_split:
            s["by_queue_class"] = queue_classes(vocab, hists)
        stages[stage] = s
    rec = {
        "type": "interval",
        "ts": round(ts, 6),
        "interval_s": round(secs, 3),
        "pid": run.pid,
        "ceph_version": run.version,
    }
    if run.probe_table:
        rec["probe_table"], rec["probe_table_exact"] = run.probe_table
    rec.update({
        "stages": stages,
        "unavailable": dict(run.unavailable),
        "lost": report.split_counters(counters, vocab),
        "in_flight": in_flight,
        "call_bias_us": round(run.call_bias_ns / 1000.0, 3),
    })
    if run.scheduler:
        rec["scheduler"] = run.scheduler
    throttles = getattr(cur, "throttles_over", None)
    if throttles is None:
        throttles = report.throttle_deltas(getattr(cur, "throttles", None),
                                           getattr(prev, "throttles", None))
    if throttles is not None:
        rec["throttles"] = throttles
    iv = Interval(run, secs, rec, hists, counters, peers)
    if run.kernel:
        _kernel_part(iv, cur, prev)
    return iv


def _devices(cur, prev):
    """Block requests per device over the interval."""
    out = {}
    for dev, d in cur.devs.items():
        p = prev.devs.get(dev, {}) if prev else {}
        n = d["count"] - p.get("count", 0)
        if n:
            out[dev] = {"count": n,
                        "mean_us": round((d["sum_ns"] - p.get("sum_ns", 0)) /
                                         max(1, n) / 1000, 1),
                        "bytes": d["bytes"] - p.get("bytes", 0)}
    return out


def _kernel_part(iv, cur, prev):
    """The kernel stages, thread roles, attribution, shards and verdict of
    Interval `iv`: its record's and its raw figures; the histograms they
    used are added to its hists."""
    run, rec, hists, counters, secs = iv.run, iv.record, iv.hists, \
        iv.counters, iv.secs
    roles, vocab = run.roles, run.vocab
    kst, per_role = report.kernel_stages(hists, roles, vocab)
    iv.kernel, iv.per_role = kst, per_role
    iv.roles = report.role_deltas(cur, prev, roles, secs)
    kernel = {}
    for name in vocab.kernel:
        s = _summary_with_hist(kst[name])
        if name in per_role:
            s["by_role"] = {r: _summary_with_hist(rh)
                            for r, rh in per_role[name].items()}
        kernel[name] = s
    kernel["block_rq"]["by_device"] = _devices(cur, prev)
    # wake-ups and switch-ins no program ran for (probes/osdstage/
    # sched.bpf.h unseen_switch_in): counted, never hidden (a capture
    # made before they were counted cannot say)
    if "wake_unseen" in vocab.counters:
        kernel["wakeup_delay"]["unseen"] = counters.get("wake_unseen", 0)
    threads = report.thread_rows(iv.roles, roles)
    rec["kernel"] = kernel
    rec["threads"] = threads
    if getattr(cur, "behind", None) is not None:
        rec["behind"] = behind_rows(cur.behind, roles.names, run.pid,
                                    vocab.behind_unknown)
    worker = roles.names[roles.worker]
    attr = wakers = None
    if "queue_wait" in run.stages:
        attr, wakers = report.attribution(hists, counters, vocab)
        rec["attribution"] = attr
        rec["wakers"] = wakers
        iv.shards = report.shard_deltas(cur, prev, cur.threads)
        rec["shards"] = report.shard_rows(iv.shards, vocab.attr_parts)
        rec["worker_sleep_pct"] = threads.get(worker, {}).get("offcpu_pct")
    stage_hists = {k: hists.get(k, Hist()) for k in run.stages}
    stages = rec["stages"]
    v = verdict.verdict(
        stage_hists, kst, attr, wakers, threads, worker,
        stages.get("replica_wait", {}).get("by_peer"), run.scheduler,
        rec.get("throttles"), secs,
        stages.get("queue_wait", {}).get("by_queue_class"), vocab.background,
        stages.get("shard_read", {}).get("by_peer"), run.name,
        (rec.get("behind") or {}).get(worker))
    rec["cause"] = v.cause
    rec["verdict"] = v.text
    rec["slow_osd"] = v.slow
    hists.update({"kernel." + k: v for k, v in kst.items()})
    for stage, per in per_role.items():
        hists.update({"role.%s.%s" % (stage, r): h for r, h in per.items()})
    rec["worker_role"] = worker


def host_record(runs, ivs, ts, secs, overhead=None):
    """Several OSDs' reports of one interval (an Interval each): {"osds":
    {name: interval object}}, a summary row per OSD and the host's cost
    (live runs)."""
    osds = {run.name: iv.record for run, iv in zip(runs, ivs)}
    verdict.host_verdicts(osds)
    out = {"type": "host", "ts": round(ts, 6), "interval_s": round(secs, 3),
           "osds": osds,
           "summary": [report.osd_summary(run.name, iv.record)
                       for run, iv in zip(runs, ivs)]}
    if overhead is not None:
        out["overhead"] = overhead
    return out
