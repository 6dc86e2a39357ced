#!/usr/bin/python3
"""mkdashboard.py - write the Grafana dashboard deploy/grafana/osdstage.json.

USAGE: deploy/grafana/mkdashboard.py > deploy/grafana/osdstage.json

The dashboard is generated (one place for its panels, its layout and its
PromQL) and checked in; tests/unit/test_exporter_dashboard.py checks that
the file is this script's output, that Grafana can load it, and that its
queries use only the metric families of lib/cephlat/exporter/families.py.
Every query filters on ceph_daemon=~"$osd" (or reads a host-wide family);
"$stage" picks user-space stages. Units are Grafana's: s, percentunit, ops.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "lib"))
from cephlat.exporter import families as F  # noqa: E402  (the names)

DS = {"type": "prometheus", "uid": "${datasource}"}
OSD = 'ceph_daemon=~"$osd"'
RI = "$__rate_interval"
STAGE_BUCKET = F.STAGE_LATENCY + "_bucket"


class Layout:
    """Panels in rows of Grafana's 24-column grid, with unique ids."""

    def __init__(self):
        self.panels, self.next_id, self.y, self.x, self.row_h = [], 1, 0, 0, 0

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def row(self, title, repeat=None):
        self._newline()
        p = {"type": "row", "id": self._id(), "title": title,
             "collapsed": False, "panels": [],
             "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}}
        if repeat:
            p["repeat"] = repeat
        self.panels.append(p)
        self.y += 1

    def _newline(self):
        if self.x:
            self.y += self.row_h
            self.x, self.row_h = 0, 0

    def add(self, panel, w, h):
        if self.x + w > 24:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        panel.setdefault("datasource", DS)
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)
        return panel


def target(expr, legend="", ref="A", **kw):
    t = {"datasource": DS, "refId": ref, "expr": expr,
         "legendFormat": legend or "__auto", "range": True}
    t.update(kw)
    return t


def targets(*pairs):
    return [target(e, l, chr(ord("A") + i)) for i, (e, l) in
            enumerate(pairs)]


def with_exemplars(tgts):
    """The quantiles of the histograms whose buckets carry exemplars with
    --otlp (families.py EXEMPLARS: the trace ids of ops sent as traces)
    ask for them: Grafana draws each as a point that links to its trace
    (the Prometheus data source's exemplarTraceIdDestinations,
    deploy/README.md)."""
    for t in tgts:
        if t.get("range") and "histogram_quantile(" in t["expr"] and any(
                f + "_bucket{" in t["expr"] for f in F.EXEMPLARS):
            t["exemplar"] = True
    return tgts


def timeseries(title, desc, tgts, unit, stack=False, fill=10):
    with_exemplars(tgts)
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": fill,
              "showPoints": "never", "spanNulls": False,
              "stacking": {"mode": "normal" if stack else "none",
                           "group": "A"}}
    return {"type": "timeseries", "title": title, "description": desc,
            "targets": tgts,
            "fieldConfig": {"defaults": {"unit": unit, "custom": custom},
                            "overrides": []},
            "options": {"legend": {"displayMode": "table",
                                   "placement": "right",
                                   "calcs": ["mean", "max"],
                                   "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def p99(metric, by, match, q="0.99"):
    return ('histogram_quantile(%s, sum by (%s, le) (rate(%s{%s}[%s])))'
            % (q, by, metric, match, RI))


def build():
    L = Layout()

    # --- overview ---------------------------------------------------------
    L.row("Overview")
    L.add({"type": "stat", "title": "OSDs traced",
           "description": "OSDs of the selection the exporters trace now "
                          "(%s: one per traced OSD)" % F.OSD_INFO,
           "targets": [target('count(%s{%s})' % (F.OSD_INFO, OSD),
                              "traced", instant=True, range=False)],
           "fieldConfig": {"defaults": {"unit": "none"}, "overrides": []},
           "options": {"reduceOptions": {"calcs": ["lastNotNull"]},
                       "colorMode": "value", "graphMode": "none"}}, 4, 5)
    L.add({"type": "stat", "title": "Op p99 (worst OSD)",
           "description": "The highest p99 of op_total (enqueue to "
                          "log_op_stats) among the selected OSDs",
           "targets": [target('max(%s)' % p99(STAGE_BUCKET, "ceph_daemon",
                                              'stage="op_total", %s' % OSD),
                              "p99")],
           "fieldConfig": {"defaults": {"unit": "s"}, "overrides": []},
           "options": {"reduceOptions": {"calcs": ["lastNotNull"]},
                       "colorMode": "value", "graphMode": "area"}}, 5, 5)
    L.add({"type": "table", "title": "Traced OSDs: process, release, "
                                     "probe table",
           "description": F.OSD_INFO + ": the Ceph release read from "
                          "each OSD's binary and the probe table used",
           "targets": [target('max by (ceph_daemon, pid, ceph_version, '
                              'release, probe_table, probe_table_exact, '
                              'stages) (%s{%s})' % (F.OSD_INFO, OSD), "",
                              format="table", instant=True, range=False)],
           "transformations": [{"id": "organize", "options": {
               "excludeByName": {"Time": True, "Value": True}}}],
           "fieldConfig": {"defaults": {}, "overrides": []},
           "options": {"showHeader": True}}, 15, 5)

    # --- latency ------------------------------------------------------------
    L.row("Stage latency")
    L.add(timeseries(
        "p99 per stage per OSD",
        "histogram_quantile(0.99) of each stage's histogram, per OSD (all "
        "op classes). Buckets are powers of two from 1 us: the quantile "
        "is exact to within one bucket. With the exporter's --otlp, "
        "exemplars: ops sent as traces, each in its bucket, linked to its "
        "trace (deploy/README.md, Grafana).",
        [target(p99(STAGE_BUCKET, "ceph_daemon, stage",
                    'stage=~"$stage", %s' % OSD),
                "{{ceph_daemon}} {{stage}}")], "s", fill=0), 12, 9)
    L.add(timeseries(
        "Mean per stage per OSD",
        "rate(sum) / rate(count) of each stage's histogram",
        [target('sum by (ceph_daemon, stage) (rate('
                '%s_sum{stage=~"$stage", %s}'
                '[%s])) / sum by (ceph_daemon, stage) (rate('
                '%s_count{stage=~"$stage", %s}'
                '[%s]))' % (F.STAGE_LATENCY, OSD, RI, F.STAGE_LATENCY, OSD,
                            RI),
                "{{ceph_daemon}} {{stage}}")], "s", fill=0), 12, 9)
    L.add(timeseries(
        "Ops per second per stage (by op class)",
        "How many ops each stage measured per second, by op class "
        "(read / write / other where the release splits it, else all)",
        [target('sum by (stage, op_class) (rate('
                '%s_count{stage=~"$stage", %s}'
                '[%s]))' % (F.STAGE_LATENCY, OSD, RI),
                "{{stage}} {{op_class}}")],
        "ops", fill=0), 24, 8)

    # heatmaps: one row per OSD, one heatmap per stage
    L.row("Latency heatmaps: $osd", repeat="osd")
    L.add({"type": "heatmap", "title": "$stage",
           "description": "Ops per latency bucket over time (the "
                          "stage's histogram, rate per second)",
           "repeat": "stage", "repeatDirection": "h", "maxPerRow": 4,
           "targets": [target('sum by (le) (rate(%s{stage=~"$stage", %s}'
                              '[%s]))' % (STAGE_BUCKET, OSD, RI), "{{le}}",
                              format="heatmap")],
           "fieldConfig": {"defaults": {"custom": {
               "scaleDistribution": {"type": "linear"}}}, "overrides": []},
           "options": {"calculate": False,
                       "yAxis": {"unit": "s", "axisPlacement": "left"},
                       "rowsFrame": {"layout": "le"},
                       "color": {"mode": "scheme", "scheme": "Oranges",
                                 "exponent": 0.5, "fill": "dark-orange",
                                 "scale": "exponential", "steps": 64},
                       "cellGap": 1, "showValue": "never",
                       "tooltip": {"show": True, "yHistogram": True},
                       "legend": {"show": True}}}, 6, 8)

    # --- queue wait ---------------------------------------------------------
    L.row("Why queued ops wait")
    L.add(timeseries(
        "Queue wait by cause (stacked)",
        "Seconds of queue wait per second, split by what the shard's "
        "workers were doing: held (mClock held the queued ops), busy (on "
        "CPU with other ops), lock (asleep waiting for a lock: a PG's), "
        "blocked (asleep otherwise inside other ops: I/O), signal (asleep "
        "with work queued: a late or missed wake-up), runq (woken, waiting for a CPU), pickup (running, not "
        "yet dequeuing)",
        [target('sum by (cause) (rate(%s{%s}[%s]))'
                % (F.QUEUE_WAIT, OSD, RI), "{{cause}}")], "s", stack=True,
        fill=60), 12, 9)
    L.add(timeseries(
        "Mean queue wait per op by cause, per OSD",
        "Each cause's seconds divided by the ops dequeued",
        [target('sum by (ceph_daemon, cause) (rate('
                '%s{%s}[%s])) / on '
                '(ceph_daemon) group_left sum by (ceph_daemon) (rate('
                '%s{%s}[%s]))' % (F.QUEUE_WAIT, OSD, RI, F.QUEUE_OPS, OSD,
                                  RI),
                "{{ceph_daemon}} {{cause}}")], "s", stack=True, fill=40),
        12, 9)
    L.add(timeseries(
        "Shard worker wake-ups by waker",
        "enqueuer: the thread that queued the work woke the worker; "
        "other: anyone else; timeout: the timed wait expired",
        [target('sum by (waker) (rate(%s{%s}[%s]))'
                % (F.QUEUE_WAKEUPS, OSD, RI), "{{waker}}")], "ops",
        stack=True,
        fill=60), 12, 8)
    L.add(timeseries(
        "Queue wait p99 by scheduler class",
        "The ops dequeued through dequeue_op by the class the op scheduler "
        "gives them (client, background_recovery, background_best_effort, "
        "immediate): client ops waiting behind recovery show here",
        [target(p99(F.SCHED_CLASS_QUEUE_WAIT + "_bucket",
                    "scheduler_class", OSD), "{{scheduler_class}}")], "s",
        fill=0), 12, 8)
    L.add(timeseries(
        "Held by the scheduler, by class (mean per op)",
        "Seconds the scheduler held each class's ops (mClock: not yet due) "
        "per op dequeued",
        [target('sum by (scheduler_class) (rate('
                '%s{%s}[%s])) / '
                'sum by (scheduler_class) (rate('
                '%s_count{%s}[%s]))'
                % (F.SCHED_CLASS_HELD, OSD, RI, F.SCHED_CLASS_QUEUE_WAIT, OSD,
                   RI), "{{scheduler_class}}")], "s", fill=0),
        12, 8)
    L.add(timeseries(
        "Missed wake-ups (timeouts with work queued) per OSD",
        "A worker woken by its timeout although work was queued: the "
        "enqueuer's notify did not reach it",
        [target('sum by (ceph_daemon) (rate('
                '%s{%s}[%s]))'
                % (F.QUEUE_TIMEOUTS_WITH_WORK, OSD, RI), "{{ceph_daemon}}")],
        "ops", fill=0), 12, 8)

    # --- threads ------------------------------------------------------------
    L.row("OSD threads")
    L.add(timeseries(
        "Off-CPU by thread role",
        "Seconds per second the OSD's threads of each role spent asleep "
        "(all selected OSDs)",
        [target('sum by (role) (rate(%s{%s}[%s]))'
                % (F.THREAD_OFFCPU, OSD, RI), "{{role}}")], "s", stack=True,
        fill=40), 8, 8)
    L.add(timeseries(
        "Run-queue by thread role",
        "Seconds per second the threads of each role were runnable and "
        "waited for a CPU (CPU starvation)",
        [target('sum by (role) (rate(%s{%s}[%s]))'
                % (F.THREAD_RUNQUEUE, OSD, RI), "{{role}}")], "s",
        stack=True, fill=40), 8, 8)
    L.add(timeseries(
        "Run-queue waits behind (process)",
        "Seconds per second the OSD's threads waited for a CPU, by the "
        "process that ran on it meanwhile (its cgroup in the legend)",
        [target('topk(8, sum by (process, cgroup) (rate(%s{%s}[%s])))'
                % (F.THREAD_RUNQUEUE_BEHIND, OSD, RI),
                "{{process}} {{cgroup}}")], "s", stack=True, fill=40), 8, 8)
    L.add(timeseries(
        "Futex wait by thread role",
        "Off-CPU seconds per second spent in futex waits (condition "
        "variables, mutexes)",
        [target('sum by (role) (rate(%s{%s}[%s]))'
                % (F.THREAD_FUTEX_WAIT, OSD, RI), "{{role}}")], "s",
        stack=True, fill=40), 8, 8)
    L.add(timeseries(
        "Sleep length p99 by thread role",
        "How long each sleep lasted: switched out while not runnable, "
        "until woken (kernel histogram)",
        [target(p99(F.THREAD_OFFCPU_DURATION + "_bucket", "role", OSD),
                "{{role}}")], "s", fill=0), 8, 8)
    L.add(timeseries(
        "Wake-up delay p99 by thread role",
        "From sched_waking to back on a CPU: each wake-up's time in the "
        "run queue (kernel histogram)",
        [target(p99(F.THREAD_WAKEUP_DELAY + "_bucket", "role", OSD),
                "{{role}}")], "s", fill=0), 8, 8)
    L.add(timeseries(
        "Futex wait length p99 by thread role",
        "How long each futex wait slept (kernel histogram)",
        [target(p99(F.THREAD_FUTEX_WAIT_DURATION + "_bucket", "role", OSD),
                "{{role}}")], "s", fill=0), 8, 8)
    L.add(timeseries(
        "Wake-ups by thread role",
        "Wake-ups per second of the threads of each role",
        [target('sum by (role) (rate(%s{%s}[%s]))'
                % (F.THREAD_WAKEUPS, OSD, RI), "{{role}}")], "ops",
        stack=True, fill=40), 8, 8)
    L.add(timeseries(
        "Threads by role",
        "The OSD's threads of each role (all selected OSDs)",
        [target('sum by (role) (%s{%s})' % (F.THREADS, OSD), "{{role}}")],
        "none", stack=True, fill=40), 8, 8)
    L.add(timeseries(
        "Block requests and syncfs p99 per OSD",
        "Each block request the OSD issued, issue to completion, and each "
        "syncfs(2) call (FileStore; none on BlueStore)",
        targets((p99(F.BLOCK_REQUEST_DURATION + "_bucket", "ceph_daemon",
                     OSD), "block {{ceph_daemon}}"),
                (p99(F.SYNCFS_DURATION + "_bucket", "ceph_daemon", OSD),
                 "syncfs {{ceph_daemon}}")), "s", fill=0), 8, 8)

    # --- replicas -----------------------------------------------------------
    L.row("Replication")
    for fams, titles, texts in (
            ((F.REPLICA_WAIT, F.REPLICA_LAST_REPLY),
             ("Replica wait p99 per primary and peer", "Last reply by peer"),
             ("A primary's wait for each replica's commit reply",
              "Replicated writes per second whose last reply came from each "
              "peer: a slow replica is the last one most of the time")),
            ((F.SHARD_READ_WAIT, F.SHARD_READ_LAST_REPLY),
             ("Shard read wait p99 per primary and peer",
              "Last shard read reply by peer"),
             ("An erasure-coded pool's primary: its wait for each shard's "
              "reply to a client read (empty without erasure-coded reads)",
              "Erasure-coded client reads per second whose last shard reply "
              "came from each peer"))):
        L.add(timeseries(
            titles[0], texts[0],
            [target(p99(fams[0] + "_bucket", "ceph_daemon, peer", OSD),
                    "{{ceph_daemon}} <- {{peer}}")], "s", fill=0), 12, 8)
        L.add(timeseries(
            titles[1], texts[1],
            [target('sum by (peer) (rate(%s{%s}[%s]))' % (fams[1], OSD, RI),
                    "{{peer}}")], "ops", stack=True, fill=40), 12, 8)

    # --- slowest OSDs -------------------------------------------------------
    L.row("Slowest OSDs")
    L.add({"type": "bargauge", "title": "Top 10 OSDs by op p99",
           "description": "op_total p99 over the dashboard's rate "
                          "interval, worst first",
           "targets": [target('topk(10, %s)' % p99(
               STAGE_BUCKET, "ceph_daemon", 'stage="op_total", %s' % OSD),
               "{{ceph_daemon}}", instant=True, range=False)],
           "fieldConfig": {"defaults": {"unit": "s", "min": 0},
                           "overrides": []},
           "options": {"orientation": "horizontal", "displayMode": "gradient",
                       "reduceOptions": {"calcs": ["lastNotNull"]}}}, 12, 9)
    L.add({"type": "bargauge", "title": "Top 10 OSDs by queue wait",
           "description": "Seconds of queue wait per second (all causes)",
           "targets": [target('topk(10, sum by (ceph_daemon) (rate('
                              '%s{%s}[%s])))'
                              % (F.QUEUE_WAIT, OSD, RI), "{{ceph_daemon}}",
                              instant=True,
                              range=False)],
           "fieldConfig": {"defaults": {"unit": "s", "min": 0},
                           "overrides": []},
           "options": {"orientation": "horizontal", "displayMode": "gradient",
                       "reduceOptions": {"calcs": ["lastNotNull"]}}}, 12, 9)

    # --- whose ops (--by) ----------------------------------------------------
    L.row("Whose ops (--by)")
    L.add(timeseries(
        "Ops by key",
        "Client ops completed per second by the exporter's --by key "
        "(client, pool, pg or image; the ten busiest; other: the keys "
        "past --by-top), while the full tier is attached",
        [target('topk(10, sum by (by, key) (rate(%s{%s}[%s])))'
                % (F.OPS_BY_KEY, OSD, RI), "{{by}} {{key}}")], "ops",
        stack=True, fill=40), 8, 8)
    L.add(timeseries(
        "Mean op_total by key",
        "Each key's op time over its ops: enqueue to completion",
        [target('topk(10, sum by (key) (rate(%s{%s}[%s])) / sum by (key) '
                '(rate(%s{%s}[%s])))' % (F.OP_SECONDS_BY_KEY, OSD, RI,
                                         F.OPS_BY_KEY, OSD, RI),
                "{{key}}")], "s", fill=0), 8, 8)
    L.add(timeseries(
        "Queue wait by key",
        "Seconds per second the keys' ops spent queued (the ten that "
        "waited most); missed: ops per second no key counts (the ring "
        "handing them over was full)",
        targets(('topk(10, sum by (key) (rate(%s{%s}[%s])))'
                 % (F.QUEUE_WAIT_BY_KEY, OSD, RI), "{{key}}"),
                ('sum(rate(%s{%s}[%s]))' % (F.OPS_BY_KEY_MISSED, OSD, RI),
                 "missed (ops/s)")), "s", fill=0), 8, 8)
    L.add(timeseries(
        "Bytes by key",
        "Bytes per second the keys' ops wrote (in) and read (out), as "
        "Ceph counts them (op_in_bytes, op_out_bytes): the ten busiest "
        "each way",
        targets(('topk(10, sum by (key) (rate(%s{%s}[%s])))'
                 % (F.BYTES_IN_BY_KEY, OSD, RI), "in {{key}}"),
                ('topk(10, sum by (key) (rate(%s{%s}[%s])))'
                 % (F.BYTES_OUT_BY_KEY, OSD, RI), "out {{key}}")),
        "Bps", fill=0), 16, 8)
    L.add({"type": "table", "title": "Clients' names",
           "description": F.CLIENT_INFO + " (--by client): the name each "
                          "client with a series authenticated as (its "
                          "cephx user), as the cluster's monitors list "
                          "their sessions",
           "targets": [target('max by (key, name) (%s{%s})'
                              % (F.CLIENT_INFO, OSD), "",
                              format="table", instant=True, range=False)],
           "transformations": [{"id": "organize", "options": {
               "excludeByName": {"Time": True, "Value": True}}}],
           "fieldConfig": {"defaults": {}, "overrides": []},
           "options": {"showHeader": True}}, 8, 8)

    # --- the tool's cost ----------------------------------------------------
    L.row("Tool cost and losses")
    L.add(timeseries(
        "Tracing cost vs bound",
        "The exporter's measured CPU cost of tracing each OSD as a "
        "fraction of its host's CPU time (the first OSD of a host carries "
        "the host-wide part), the exporter process's own CPU (reading maps, "
        "serving /metrics) per exporter, and the bound (--max-overhead; "
        "0: none)",
        targets(('%s{%s}' % (F.OVERHEAD, OSD), "{{ceph_daemon}}"),
                (F.SELF_CPU, "exporter {{instance}}"),
                ('max(%s)' % F.OVERHEAD_BOUND, "bound")),
        "percentunit", fill=0), 8, 8)
    L.add(timeseries(
        "Attached fraction per tier",
        "Share of the time each tier's probes were attached: the lean "
        "tier's all the time (its stages count every op), the full tier's "
        "in duty cycles that keep the cost under the bound (the figures it "
        "feeds cover only these seconds)",
        [target('sum by (ceph_daemon, tier) (rate('
                '%s{%s}[%s])) / on '
                '(ceph_daemon) group_left sum by (ceph_daemon) (rate('
                '%s{%s}[%s]))'
                % (F.ATTACHED, OSD, RI, F.TRACED, OSD, RI),
                "{{ceph_daemon}} {{tier}}")],
        "percentunit", fill=0), 8, 8)
    L.add(timeseries(
        "Full tier escalations",
        "Times the lean tier saw an OSD's op latency tail move (p99 over "
        "--escalate-factor x its baseline, or an op over --escalate-over) "
        "and asked for the full tier at once, in the last hour, by "
        "outcome: attached, already (it was), spent (the budget could "
        "not pay: its next regular window)",
        [target('sum by (ceph_daemon, reason, outcome) (increase('
                '%s{%s}[1h]))' % (F.ESCALATIONS, OSD),
                "{{ceph_daemon}} {{reason}} {{outcome}}")], "none", fill=0),
        8, 8)
    L.add({"type": "table", "title": "Which tier feeds each stage",
           "description": F.STAGE_TIER_INFO + ": lean (attached all the "
                          "time: every op) or full (duty cycles: a sample); "
                          "the number of OSDs so fed",
           "targets": [target('count by (stage, tier) ('
                              '%s{%s})' % (F.STAGE_TIER_INFO, OSD), "",
                              format="table", instant=True, range=False)],
           "transformations": [{"id": "organize", "options": {
               "excludeByName": {"Time": True}}}],
           "fieldConfig": {"defaults": {}, "overrides": []},
           "options": {"showHeader": True}}, 8, 8)
    L.add(timeseries(
        "Probe hits by kind",
        "BPF program runs per second: entry/return uprobes, scheduler "
        "and syscall tracepoints",
        [target('sum by (kind) (rate(%s{%s}[%s]))'
                % (F.PROBE_HITS, OSD, RI), "{{kind}}")], "ops", stack=True,
        fill=40), 8, 8)
    L.add(timeseries(
        "Events lost by reason",
        "Measurements the tool could not make per second (a full map, an "
        "op aged out, ...): non-zero means the figures undercount",
        [target('sum by (reason) (rate(%s{%s}[%s]))'
                % (F.EVENTS_LOST, OSD, RI), "{{reason}}")], "ops", fill=0),
        8, 8)
    L.add(timeseries(
        "BPF map fullness",
        "How full the tool's fixed-size tables are (host-wide)",
        [target('max by (map) (%s)' % F.MAP_FULLNESS,
                "{{map}}")], "percentunit", fill=0), 8, 8)
    L.add(timeseries(
        "Ops in flight, targets, attaches",
        "Ops held in the ops table per OSD; OSDs traced per exporter; "
        "(re)attaches in the last hour (restarts of an OSD)",
        targets(('%s{%s}' % (F.OPS_IN_FLIGHT, OSD),
                 "in flight {{ceph_daemon}}"),
                ('sum(%s)' % F.TARGETS, "targets"),
                ('sum by (ceph_daemon) (increase(%s{%s}[1h]))'
                 % (F.ATTACHES, OSD),
                 "attaches {{ceph_daemon}}")), "none", fill=0), 8, 8)
    L.add(timeseries(
        "OTLP traces (--otlp)",
        "Ops chosen to be sent as traces per second, by why (sample, "
        "slow); chosen ops dropped (rate cap, full ring); spans the "
        "collector took, and spans dropped (queue full: the collector "
        "is slow or gone; refused by it)",
        targets(('sum by (why) (rate(%s{%s}[%s]))'
                 % (F.OTLP_OPS_CHOSEN, OSD, RI), "chosen {{why}}"),
                ('sum by (reason) (rate(%s{%s}[%s]))'
                 % (F.OTLP_OPS_DROPPED, OSD, RI), "ops dropped {{reason}}"),
                ('sum(rate(%s{%s}[%s]))'
                 % (F.OTLP_SPANS_SENT, OSD, RI), "spans sent"),
                ('sum by (reason) (rate(%s{%s}[%s]))'
                 % (F.OTLP_SPANS_DROPPED, OSD, RI),
                 "spans dropped {{reason}}")), "ops", fill=0), 8, 8)

    var_q = {"type": "query", "datasource": DS, "refresh": 2,
             "includeAll": True, "multi": True, "allValue": ".+",
             "current": {"selected": True, "text": ["All"],
                         "value": ["$__all"]},
             "options": [], "hide": 0, "skipUrlSync": False, "regex": ""}
    osd_q = "label_values(%s, ceph_daemon)" % F.OSD_INFO
    stage_q = "label_values(%s, stage)" % STAGE_BUCKET
    templating = [
        {"type": "datasource", "name": "datasource", "label": "Data source",
         "query": "prometheus", "current": {}, "hide": 0, "options": [],
         "refresh": 1, "regex": "", "skipUrlSync": False},
        dict(var_q, name="osd", label="OSD", definition=osd_q, sort=3,
             query={"query": osd_q, "refId": "osd"}),
        dict(var_q, name="stage", label="Stage", definition=stage_q,
             sort=1, query={"query": stage_q, "refId": "stage"}),
    ]
    return {
        "__inputs": [],
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana",
                                         "uid": "-- Grafana --"},
            "enable": True, "hide": True, "iconColor":
            "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts",
            "type": "dashboard"}]},
        "description": "Per-stage latency, queue-wait attribution, thread "
                       "times and tracing cost of every Ceph OSD, from "
                       "osdstage_exporter",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "liveNow": False,
        "panels": L.panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["ceph", "osd", "latency", "ebpf"],
        "templating": {"list": templating},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "Ceph OSD stages (osdstage)",
        "uid": "osdstage",
        "version": 1,
        "weekStart": "",
    }


def main():
    json.dump(build(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
