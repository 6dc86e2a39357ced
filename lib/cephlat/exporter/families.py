"""The exporter's metric families: the one list of names, types, labels
and help texts (the Prometheus contract). exporter/collect.py fills them,
deploy/grafana/osdstage.json queries them, man/man8/osdstage_exporter.8
lists them; tests/unit/test_exporter_families.py keeps the three in step.

Names follow Ceph's own (the mgr prometheus module, ceph-exporter):
prefix ceph_, label ceph_daemon="osd.N" so that dashboards join them with
Ceph's metrics, base unit seconds. The tool's own figures are ceph_osdstage_*.
"""
from collections import namedtuple

Family = namedtuple("Family", "name type labels help")

# Histogram buckets: power-of-two microseconds from 1 us to 2^24 us
# (16.8 s), then +Inf. Every bucket boundary is a boundary of the kernel
# side's fine slots (model/hist.py), so bucket counts are exact.
BUCKET_EXPONENTS = range(0, 25)
BUCKETS_S = tuple((1 << k) / 1e6 for k in BUCKET_EXPONENTS)

D = ("ceph_daemon",)

FAMILIES = (
    # --- where ops spend their time ---------------------------------------
    Family("ceph_osd_stage_latency_seconds", "histogram",
           D + ("stage", "op_class"),
           "Time ops spent in each traced stage of the OSD (op_class "
           "read/write/other where the op classes make up the stage: "
           "op_total and op_latency, and the lean tier's queue_wait, where "
           "the release splits them; else "
           "all). Each stage from one tier (ceph_osdstage_stage_tier): the "
           "lean tier's (every client op its primary completed) where it "
           "has the stage, else the full tier's (the ops of its attached "
           "seconds)"),
    Family("ceph_osd_kernel_latency_seconds", "histogram",
           D + ("stage", "role"),
           "Kernel-side waits of the OSD's threads: futex_wait, offcpu and "
           "wakeup_delay per thread role; syncfs and block_rq with role all"),
    Family("ceph_osd_replica_wait_seconds", "histogram", D + ("peer",),
           "A primary's wait for each replica's commit reply"),
    Family("ceph_osd_replica_last_total", "counter", D + ("peer",),
           "Replicated writes whose last reply came from this peer"),
    Family("ceph_osd_shard_read_wait_seconds", "histogram", D + ("peer",),
           "An erasure-coded pool's primary: its wait for each shard's "
           "reply to a client read's sub-reads (only OSDs with such reads "
           "have it)"),
    Family("ceph_osd_shard_read_last_total", "counter", D + ("peer",),
           "Erasure-coded client reads whose last shard reply came from "
           "this peer"),
    # --- why queued ops wait ----------------------------------------------
    Family("ceph_osd_queue_wait_seconds_total", "counter",
           D + ("shard", "cause"),
           "Queue wait of ops split by what their shard's workers were "
           "doing: held (mClock held the queued ops: up to the end of the "
           "dequeuing worker's last timed wait on its queue), then busy "
           "(on CPU with other ops), lock (asleep waiting for a lock: a "
           "PG's, or one inside other ops), blocked (asleep otherwise "
           "inside other ops: I/O), signal (asleep with work queued), runq "
           "(woken, waiting for a CPU), pickup (running, not yet "
           "dequeuing)"),
    Family("ceph_osd_queue_ops_total", "counter", D + ("shard",),
           "Ops dequeued from each shard's queue"),
    Family("ceph_osd_scheduler_class_queue_wait_seconds", "histogram",
           D + ("scheduler_class",),
           "Queue wait of the ops dequeued through dequeue_op by the class "
           "the OSD's op scheduler gives them (Ceph's op_scheduler_class: "
           "client, background_recovery, background_best_effort, "
           "immediate)"),
    Family("ceph_osd_scheduler_class_held_seconds_total", "counter",
           D + ("scheduler_class",),
           "The part of that queue wait the scheduler held (mClock: the "
           "op was not yet due)"),
    Family("ceph_osd_queue_wakeups_total", "counter", D + ("shard", "waker"),
           "Shard worker wake-ups by waker: enqueuer (the thread that "
           "queued work), other, timeout"),
    Family("ceph_osd_queue_timeouts_with_work_total", "counter",
           D + ("shard",),
           "Worker wake-ups by timeout with work already queued (missed "
           "wake-ups)"),
    # --- the OSD's threads ------------------------------------------------
    Family("ceph_osd_thread_offcpu_seconds_total", "counter", D + ("role",),
           "Time the OSD's threads of each role spent asleep off-CPU"),
    Family("ceph_osd_thread_runqueue_seconds_total", "counter",
           D + ("role",),
           "Time the OSD's threads of each role spent runnable, waiting "
           "for a CPU"),
    Family("ceph_osd_thread_futex_seconds_total", "counter", D + ("role",),
           "Off-CPU time of each role spent in futex waits"),
    Family("ceph_osd_thread_wakeups_total", "counter", D + ("role",),
           "Wake-ups of the OSD's threads of each role"),
    Family("ceph_osd_threads", "gauge", D + ("role",),
           "The OSD's threads of each role"),
    # --- the tool itself --------------------------------------------------
    Family("ceph_osdstage_info", "gauge",
           D + ("pid", "ceph_version", "release", "probe_table",
                "probe_table_exact", "stages"),
           "One per traced OSD: its process, Ceph release and the probe "
           "table used"),
    Family("ceph_osdstage_overhead_ratio", "gauge", D,
           "CPU cost of tracing this OSD as a fraction of the host's CPU "
           "time since it was attached: measured (the kernel's BPF run "
           "statistics, a calibrated trap per uprobe run), split between "
           "the OSDs by their probe hits (the first OSD carries the "
           "host-wide part)"),
    Family("ceph_osdstage_self_cpu_ratio", "gauge", (),
           "CPU time of the exporter process itself (reading the maps, "
           "serving /metrics; attach cycles are in "
           "ceph_osdstage_overhead_ratio) as a fraction of the host's CPU "
           "time since the exporter started (over at least 10 s). The cost "
           "of tracing is the sum of the overhead ratios plus this"),
    Family("ceph_osdstage_overhead_bound_ratio", "gauge", (),
           "The cost bound (--max-overhead) as a fraction; 0: none"),
    Family("ceph_osdstage_traced_seconds_total", "counter", D,
           "Time this OSD has been traced by the exporter, attached or not"),
    Family("ceph_osdstage_attached_seconds_total", "counter",
           D + ("tier",),
           "Time each tier's probes were attached: the lean tier's all the "
           "time, the full tier's in duty cycles that bound the cost (the "
           "figures it feeds cover only these seconds)"),
    Family("ceph_osdstage_stage_tier", "gauge", D + ("stage", "tier"),
           "Which tier feeds each stage's figures (1): lean (attached all "
           "the time: every op) or full (duty cycles: a sample); stage "
           "scheduler_class: the per-scheduler-class families"),
    Family("ceph_osdstage_attaches_total", "counter", D,
           "Times the exporter started tracing this OSD: once, then once "
           "more whenever a ceph-osd of the host starts (one tracer for "
           "all the host's OSDs: it is rebuilt)"),
    Family("ceph_osdstage_probe_hits_total", "counter", D + ("kind",),
           "Probe program runs: entry and return uprobes, scheduler and "
           "syscall tracepoints"),
    Family("ceph_osdstage_events_lost_total", "counter", D + ("reason",),
           "Measurements the tool could not make, by reason (a full map, an "
           "op aged out, ...)"),
    Family("ceph_osdstage_ops_in_flight", "gauge", D,
           "Ops enqueued and not completed, held in the ops table"),
    Family("ceph_osdstage_map_fullness_ratio", "gauge", ("map",),
           "How full the tool's fixed-size BPF tables are (ops, threads)"),
    Family("ceph_osdstage_targets", "gauge", (),
           "OSDs traced now"),
)

BY_NAME = {f.name: f for f in FAMILIES}
