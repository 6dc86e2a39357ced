"""The exporter's metric families: the one list of names, types, labels
and help texts (the Prometheus contract). exporter/collect.py fills them,
deploy/grafana/mkdashboard.py and deploy/prometheus/osdstage-alerts.yml
query them, man/man8/osdstage_exporter.8 lists them; the unit tests
(tests/unit/test_exporter_*.py) keep them all in step with this file and
take their names from it.

Names: prefix osdstage_ (the tool's own namespace: Ceph's ceph_ names are
Ceph's, and a metric Ceph adds later must not collide with one of ours),
label ceph_daemon="osd.N" as Ceph's own metrics have it, so that queries
join them with Ceph's (on (ceph_daemon)); base unit seconds. A duration
histogram of one kind of event is *_duration_seconds (or says what it
times: *_latency_seconds, *_wait_seconds, *_delay_seconds), the total
time of a thread state is *_seconds_total, an info-like series (value 1,
its labels carry the information) ends in _info.
"""
from collections import namedtuple

Family = namedtuple("Family", "name type labels help")

# Histogram buckets: power-of-two microseconds from 1 us to 2^24 us
# (16.8 s), then +Inf. Every bucket boundary is a boundary of the kernel
# side's fine slots (model/hist.py), so bucket counts are exact.
BUCKET_EXPONENTS = range(0, 25)
BUCKETS_S = tuple((1 << k) / 1e6 for k in BUCKET_EXPONENTS)

D = ("ceph_daemon",)
PREFIX = "osdstage_"

# The names, one constant each: collect.py, mkdashboard.py and the tests
# use these (the alert rules and the man page are checked against them).
# where ops spend their time
STAGE_LATENCY = "osdstage_stage_latency_seconds"
REPLICA_WAIT = "osdstage_replica_wait_seconds"
REPLICA_LAST_REPLY = "osdstage_replica_last_reply_total"
SHARD_READ_WAIT = "osdstage_shard_read_wait_seconds"
SHARD_READ_LAST_REPLY = "osdstage_shard_read_last_reply_total"
# the kernel's view: one histogram per kind of event
THREAD_OFFCPU_DURATION = "osdstage_thread_offcpu_duration_seconds"
THREAD_FUTEX_WAIT_DURATION = "osdstage_thread_futex_wait_duration_seconds"
THREAD_WAKEUP_DELAY = "osdstage_thread_wakeup_delay_seconds"
SYNCFS_DURATION = "osdstage_syncfs_duration_seconds"
BLOCK_REQUEST_DURATION = "osdstage_block_request_duration_seconds"
# why queued ops wait
QUEUE_WAIT = "osdstage_queue_wait_seconds_total"
QUEUE_OPS = "osdstage_queue_ops_total"
SCHED_CLASS_QUEUE_WAIT = "osdstage_scheduler_class_queue_wait_seconds"
SCHED_CLASS_HELD = "osdstage_scheduler_class_held_seconds_total"
QUEUE_WAKEUPS = "osdstage_queue_wakeups_total"
QUEUE_TIMEOUTS_WITH_WORK = "osdstage_queue_timeouts_with_work_total"
# the OSD's threads: time per state
THREAD_OFFCPU = "osdstage_thread_offcpu_seconds_total"
THREAD_RUNQUEUE = "osdstage_thread_runqueue_seconds_total"
THREAD_RUNQUEUE_BEHIND = "osdstage_thread_runqueue_behind_seconds_total"
THREAD_FUTEX_WAIT = "osdstage_thread_futex_wait_seconds_total"
THREAD_WAKEUPS = "osdstage_thread_wakeups_total"
THREADS = "osdstage_threads"
# the tool itself
OSD_INFO = "osdstage_osd_info"
OVERHEAD = "osdstage_overhead_ratio"
SELF_CPU = "osdstage_self_cpu_ratio"
OVERHEAD_BOUND = "osdstage_overhead_bound_ratio"
TRACED = "osdstage_traced_seconds_total"
ATTACHED = "osdstage_attached_seconds_total"
STAGE_TIER_INFO = "osdstage_stage_tier_info"
ATTACHES = "osdstage_attaches_total"
ESCALATIONS = "osdstage_full_tier_escalations_total"
PROBE_HITS = "osdstage_probe_hits_total"
EVENTS_LOST = "osdstage_events_lost_total"
OPS_IN_FLIGHT = "osdstage_ops_in_flight"
MAP_FULLNESS = "osdstage_map_fullness_ratio"
TARGETS = "osdstage_targets"
# whose ops (--by)
OPS_BY_KEY = "osdstage_by_key_ops_total"
OP_SECONDS_BY_KEY = "osdstage_by_key_op_seconds_total"
QUEUE_WAIT_BY_KEY = "osdstage_by_key_queue_wait_seconds_total"
BYTES_IN_BY_KEY = "osdstage_by_key_in_bytes_total"
BYTES_OUT_BY_KEY = "osdstage_by_key_out_bytes_total"
OPS_BY_KEY_MISSED = "osdstage_by_key_missed_ops_total"
CLIENT_INFO = "osdstage_by_key_client_info"
# ops sent as OTLP traces (--otlp)
OTLP_OPS_CHOSEN = "osdstage_otlp_ops_chosen_total"
OTLP_OPS_DROPPED = "osdstage_otlp_ops_dropped_total"
OTLP_SPANS_SENT = "osdstage_otlp_spans_sent_total"
OTLP_SPANS_DROPPED = "osdstage_otlp_spans_dropped_total"

# the kernel stages (model/vocab.py's vocab.kernel) -> their histogram;
# the per-role ones are labelled by role
KERNEL_STAGES = {
    "offcpu": THREAD_OFFCPU_DURATION,
    "futex_wait": THREAD_FUTEX_WAIT_DURATION,
    "wakeup_delay": THREAD_WAKEUP_DELAY,
    "syncfs": SYNCFS_DURATION,
    "block_rq": BLOCK_REQUEST_DURATION,
}
# the 1.x names (Ceph's ceph_ prefix, before osdstage_) -> today's; a
# kernel stage of the old ceph_osd_kernel_latency_seconds{stage=...} is
# KERNEL_STAGES' family
RENAMED = {
    "ceph_osd_stage_latency_seconds": STAGE_LATENCY,
    "ceph_osd_kernel_latency_seconds": None,
    "ceph_osd_replica_wait_seconds": REPLICA_WAIT,
    "ceph_osd_replica_last_total": REPLICA_LAST_REPLY,
    "ceph_osd_shard_read_wait_seconds": SHARD_READ_WAIT,
    "ceph_osd_shard_read_last_total": SHARD_READ_LAST_REPLY,
    "ceph_osd_queue_wait_seconds_total": QUEUE_WAIT,
    "ceph_osd_queue_ops_total": QUEUE_OPS,
    "ceph_osd_scheduler_class_queue_wait_seconds": SCHED_CLASS_QUEUE_WAIT,
    "ceph_osd_scheduler_class_held_seconds_total": SCHED_CLASS_HELD,
    "ceph_osd_queue_wakeups_total": QUEUE_WAKEUPS,
    "ceph_osd_queue_timeouts_with_work_total": QUEUE_TIMEOUTS_WITH_WORK,
    "ceph_osd_thread_offcpu_seconds_total": THREAD_OFFCPU,
    "ceph_osd_thread_runqueue_seconds_total": THREAD_RUNQUEUE,
    "ceph_osd_thread_futex_seconds_total": THREAD_FUTEX_WAIT,
    "ceph_osd_thread_wakeups_total": THREAD_WAKEUPS,
    "ceph_osd_threads": THREADS,
    "ceph_osdstage_info": OSD_INFO,
    "ceph_osdstage_overhead_ratio": OVERHEAD,
    "ceph_osdstage_self_cpu_ratio": SELF_CPU,
    "ceph_osdstage_overhead_bound_ratio": OVERHEAD_BOUND,
    "ceph_osdstage_traced_seconds_total": TRACED,
    "ceph_osdstage_attached_seconds_total": ATTACHED,
    "ceph_osdstage_stage_tier": STAGE_TIER_INFO,
    "ceph_osdstage_attaches_total": ATTACHES,
    "ceph_osdstage_probe_hits_total": PROBE_HITS,
    "ceph_osdstage_events_lost_total": EVENTS_LOST,
    "ceph_osdstage_ops_in_flight": OPS_IN_FLIGHT,
    "ceph_osdstage_map_fullness_ratio": MAP_FULLNESS,
    "ceph_osdstage_targets": TARGETS,
}

# the families with series only when ops are sent as traces (--otlp)
OTLP_ONLY = (OTLP_OPS_CHOSEN, OTLP_OPS_DROPPED, OTLP_SPANS_SENT,
             OTLP_SPANS_DROPPED)
# the families with series only when the ops are broken down (--by)
BY_ONLY = (OPS_BY_KEY, OP_SECONDS_BY_KEY, QUEUE_WAIT_BY_KEY,
           BYTES_IN_BY_KEY, BYTES_OUT_BY_KEY, OPS_BY_KEY_MISSED,
           CLIENT_INFO)
# the histograms whose buckets carry OpenMetrics exemplars with --otlp:
# ops sent as traces (exporter/exemplars.py: why these and no others)
EXEMPLARS = (STAGE_LATENCY, REPLICA_WAIT, SCHED_CLASS_QUEUE_WAIT)
# the families that came after the renaming: no old name
NO_OLD_NAME = OTLP_ONLY + BY_ONLY + (THREAD_RUNQUEUE_BEHIND, ESCALATIONS)

FAMILIES = (
    # --- where ops spend their time ---------------------------------------
    Family(STAGE_LATENCY, "histogram",
           D + ("stage", "op_class"),
           "Time ops spent in each traced stage of the OSD (op_class "
           "read/write/other where the op classes make up the stage: "
           "op_total and op_latency, and the lean tier's queue_wait, where "
           "the release splits them; else "
           "all). Each stage from one tier (" + STAGE_TIER_INFO + "): the "
           "lean tier's (every client op its primary completed) where it "
           "has the stage, else the full tier's (the ops of its attached "
           "seconds)"),
    Family(REPLICA_WAIT, "histogram", D + ("peer",),
           "A primary's wait for each replica's commit reply"),
    Family(REPLICA_LAST_REPLY, "counter", D + ("peer",),
           "Replicated writes whose last reply came from this peer"),
    Family(SHARD_READ_WAIT, "histogram", D + ("peer",),
           "An erasure-coded pool's primary: its wait for each shard's "
           "reply to a client read's sub-reads (only OSDs with such reads "
           "have it)"),
    Family(SHARD_READ_LAST_REPLY, "counter", D + ("peer",),
           "Erasure-coded client reads whose last shard reply came from "
           "this peer"),
    # --- the kernel's view of the OSD's threads and I/O --------------------
    Family(THREAD_OFFCPU_DURATION, "histogram", D + ("role",),
           "How long each sleep of the OSD's threads of each role lasted: "
           "switched out while not runnable, until woken (off-CPU time, "
           "not an op's latency)"),
    Family(THREAD_FUTEX_WAIT_DURATION, "histogram", D + ("role",),
           "How long each futex wait of the OSD's threads of each role "
           "slept: switched out inside futex(2), until woken (condition "
           "variables, mutexes)"),
    Family(THREAD_WAKEUP_DELAY, "histogram", D + ("role",),
           "Each wake-up's delay for the OSD's threads of each role: from "
           "sched_waking to back on a CPU (time in the run queue)"),
    Family(SYNCFS_DURATION, "histogram", D,
           "How long each syncfs(2) call of the OSD took (FileStore; "
           "BlueStore OSDs make none)"),
    Family(BLOCK_REQUEST_DURATION, "histogram", D,
           "Block requests the OSD issued: each one's time from issue to "
           "completion"),
    # --- why queued ops wait ----------------------------------------------
    Family(QUEUE_WAIT, "counter",
           D + ("shard", "cause"),
           "Queue wait of ops split by what their shard's workers were "
           "doing: held (mClock held the queued ops: up to the end of the "
           "dequeuing worker's last timed wait on its queue), then busy "
           "(on CPU with other ops), lock (asleep waiting for a lock: a "
           "PG's, or one inside other ops), blocked (asleep otherwise "
           "inside other ops: I/O), signal (asleep with work queued), runq "
           "(woken, waiting for a CPU), pickup (running, not yet "
           "dequeuing)"),
    Family(QUEUE_OPS, "counter", D + ("shard",),
           "Ops dequeued from each shard's queue"),
    Family(SCHED_CLASS_QUEUE_WAIT, "histogram",
           D + ("scheduler_class",),
           "Queue wait of the ops dequeued through dequeue_op by the class "
           "the OSD's op scheduler gives them (Ceph's op_scheduler_class: "
           "client, background_recovery, background_best_effort, "
           "immediate)"),
    Family(SCHED_CLASS_HELD, "counter",
           D + ("scheduler_class",),
           "The part of that queue wait the scheduler held (mClock: the "
           "op was not yet due)"),
    Family(QUEUE_WAKEUPS, "counter", D + ("shard", "waker"),
           "Shard worker wake-ups by waker: enqueuer (the thread that "
           "queued work), other, timeout"),
    Family(QUEUE_TIMEOUTS_WITH_WORK, "counter",
           D + ("shard",),
           "Worker wake-ups by timeout with work already queued (missed "
           "wake-ups)"),
    # --- the OSD's threads ------------------------------------------------
    Family(THREAD_OFFCPU, "counter", D + ("role",),
           "Time the OSD's threads of each role spent asleep off-CPU"),
    Family(THREAD_RUNQUEUE, "counter",
           D + ("role",),
           "Time the OSD's threads of each role spent runnable, waiting "
           "for a CPU"),
    Family(THREAD_RUNQUEUE_BEHIND, "counter",
           D + ("role", "process", "cgroup"),
           "Time the OSD's threads of each role waited for a CPU, by the "
           "process that ran on it meanwhile (process: its name, or "
           "itself, idle, unknown, other; at most 12 of them "
           "per OSD, the later ones summed as other)"),
    Family(THREAD_FUTEX_WAIT, "counter", D + ("role",),
           "Off-CPU time of each role spent in futex waits"),
    Family(THREAD_WAKEUPS, "counter", D + ("role",),
           "Wake-ups of the OSD's threads of each role"),
    Family(THREADS, "gauge", D + ("role",),
           "The OSD's threads of each role"),
    # --- the tool itself --------------------------------------------------
    Family(OSD_INFO, "gauge",
           D + ("pid", "ceph_version", "release", "probe_table",
                "probe_table_exact", "stages"),
           "One per traced OSD (1): its process, Ceph release and the "
           "probe table used"),
    Family(OVERHEAD, "gauge", D,
           "CPU cost of tracing this OSD as a fraction of the host's CPU "
           "time since it was attached: measured (the kernel's BPF run "
           "statistics, a calibrated trap per uprobe run), split between "
           "the OSDs by their probe hits (the first OSD carries the "
           "host-wide part)"),
    Family(SELF_CPU, "gauge", (),
           "CPU time of the exporter process itself (reading the maps, "
           "serving /metrics; attach cycles are in "
           + OVERHEAD + ") as a fraction of the host's CPU "
           "time since the exporter started (over at least 10 s). The cost "
           "of tracing is the sum of the overhead ratios plus this"),
    Family(OVERHEAD_BOUND, "gauge", (),
           "The cost bound (--max-overhead) as a fraction; 0: none"),
    Family(TRACED, "counter", D,
           "Time this OSD has been traced by the exporter, attached or not"),
    Family(ATTACHED, "counter",
           D + ("tier",),
           "Time each tier's probes were attached: the lean tier's all the "
           "time, the full tier's in duty cycles that bound the cost (the "
           "figures it feeds cover only these seconds)"),
    Family(STAGE_TIER_INFO, "gauge", D + ("stage", "tier"),
           "Which tier feeds each stage's figures (1): lean (attached all "
           "the time: every op) or full (duty cycles: a sample); stage "
           "scheduler_class: the per-scheduler-class families"),
    Family(ATTACHES, "counter", D,
           "Times the exporter started tracing this OSD: once, then once "
           "more whenever a ceph-osd of the host starts (one tracer for "
           "all the host's OSDs: it is rebuilt)"),
    Family(ESCALATIONS, "counter", D + ("reason", "outcome"),
           "Times the lean tier saw this OSD's op latency tail move and "
           "asked for the full tier at once, by reason: p99 (over "
           "--escalate-factor x its baseline) or slow (an op over "
           "--escalate-over); and outcome: attached (on at once), already "
           "(it was: it stays on longer) or spent (the budget could not "
           "pay: its next regular window)"),
    Family(PROBE_HITS, "counter", D + ("kind",),
           "Probe program runs: entry and return uprobes, scheduler and "
           "syscall tracepoints"),
    Family(EVENTS_LOST, "counter", D + ("reason",),
           "Measurements the tool could not make, by reason (a full map, an "
           "op aged out, ...)"),
    Family(OPS_IN_FLIGHT, "gauge", D,
           "Ops enqueued and not completed, held in the ops table"),
    Family(MAP_FULLNESS, "gauge", ("map",),
           "How full the tool's fixed-size BPF tables are (ops, threads)"),
    Family(TARGETS, "gauge", (),
           "OSDs traced now"),
    # --- whose ops (--by) -------------------------------------------------
    Family(OPS_BY_KEY, "counter", D + ("by", "key"),
           "Client ops completed while the full tier was attached, by "
           "--by's key (by: client, pool, pg or image; key: client.4123, a "
           "pool's or image's name, 3.1a, or unknown): the first --by-top "
           "keys seen get a series each, later ones are summed as other "
           "until a key idle for 10 minutes gives its series up"),
    Family(OP_SECONDS_BY_KEY, "counter", D + ("by", "key"),
           "Their op_total (enqueue to completion), summed: over " +
           OPS_BY_KEY + ", the mean"),
    Family(QUEUE_WAIT_BY_KEY, "counter", D + ("by", "key"),
           "Their queue wait (enqueue to dequeue), summed"),
    Family(BYTES_IN_BY_KEY, "counter", D + ("by", "key"),
           "The bytes they wrote, as Ceph counts them (op_in_bytes)"),
    Family(BYTES_OUT_BY_KEY, "counter", D + ("by", "key"),
           "The bytes they read, as Ceph counts them (op_out_bytes)"),
    Family(OPS_BY_KEY_MISSED, "counter", D,
           "Client ops completed while the full tier was attached that no "
           "key counts: the ring handing them over was full"),
    Family(CLIENT_INFO, "gauge", D + ("key", "name"),
           "With --by client, one per client with a series (1): the name "
           "it authenticated as (its cephx user, client.admin), as the "
           "cluster's monitors list their sessions; join it on key"),
    # --- ops sent as OTLP traces (--otlp) ---------------------------------
    Family(OTLP_OPS_CHOSEN, "counter", D + ("why",),
           "Ops the full tier's programs chose at their end to send as "
           "OTLP traces (--otlp): why sample (in the 1-in-N sample by "
           "request id, the same ops on every host) or slow (not sampled, "
           "over --otlp-over); only while the full tier is attached"),
    Family(OTLP_OPS_DROPPED, "counter", D + ("reason",),
           "Chosen ops not handed to the exporter, by reason: rate (over "
           "--otlp-rate) or ring (the traces ring buffer was full)"),
    Family(OTLP_SPANS_SENT, "counter", D,
           "Spans the OTLP collector took"),
    Family(OTLP_SPANS_DROPPED, "counter", D + ("reason",),
           "Spans not sent, by reason: queue_full (the queue to the "
           "collector was full: it is slow or gone) or collector (it "
           "refused them or did not answer)"),
)

BY_NAME = {f.name: f for f in FAMILIES}
