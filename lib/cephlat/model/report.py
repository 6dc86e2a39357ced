"""From two kernel snapshots to what an operator reads: kernel stages per
thread role, the queue-wait attribution, per-shard numbers, the messenger
throttles, losses in words (the verdict: model/verdict.py)."""
from .events import PeerKey
from .hist import Hist


def _merge(hists):
    out = Hist()
    for h in hists:
        out.merge(h)
    return out


def role_name(roles, role):
    """A thread's role name: its index in `roles` (a model/roles.py
    Roles), "other" past them."""
    return roles.names[role] if role < len(roles.names) else "other"


def role_deltas(cur, prev, roles, secs):
    """Per role, over the interval prev -> cur: threads, the span they
    existed in, and the nanoseconds asleep, runnable and in futex waits,
    and wake-ups (raw sums: thread_rows' percentages, the exporter's
    counters)."""
    rows = {}
    end = cur.mono_ns
    start = prev.mono_ns if prev else end - int(secs * 1e9)
    for tid, t in cur.threads.items():
        p = prev.threads.get(tid) if prev else None
        if t["died"] and t["died"] < start:
            continue
        name = role_name(roles, t["role"])
        r = rows.setdefault(name, {"threads": 0, "sleep_ns": 0, "runq_ns": 0,
                                   "futex_ns": 0, "wakeups": 0, "span_ns": 0})
        r["threads"] += 1
        # the part of the interval this thread existed in
        r["span_ns"] += max(0, min(end, t["died"] or end) - max(start, t["born"]))
        for k in ("sleep_ns", "runq_ns", "futex_ns", "wakeups"):
            r[k] += t[k] - (p[k] if p else 0)
    return rows


def thread_rows(rows, roles):
    """Per role of role_deltas' `rows`: threads, % of time asleep off-CPU,
    % waiting for a CPU, % of the off-CPU time in futex waits, wake-ups."""
    out = {}
    for name in roles.names:
        r = rows.get(name)
        if not r:
            continue
        denom = max(r["span_ns"], 1)
        out[name] = {
            "threads": r["threads"],
            "offcpu_pct": round(min(100.0, 100.0 * r["sleep_ns"] / denom), 1),
            "runq_pct": round(min(100.0, 100.0 * r["runq_ns"] / denom), 1),
            "futex_pct_of_offcpu": round(min(100.0, 100.0 * r["futex_ns"] /
                                             r["sleep_ns"]), 1)
            if r["sleep_ns"] else 0.0,
            "wakeups": r["wakeups"],
        }
    return out


def kernel_stages(hists, roles, vocab):
    """Overall kernel stages, and per role."""
    out, per_role = {}, {}
    for stage, _base in vocab.role_stages:
        per = {}
        for r, name in enumerate(roles.names):
            h = hists.get("%s.%d" % (stage, r))
            if h is not None and h.count:
                per[name] = h
        out[stage] = _merge(per.values())
        per_role[stage] = per
    for stage in vocab.kernel:
        if stage not in out:
            out[stage] = hists[stage]
    return out, per_role


# who woke a worker that slept with its op queued (vocab.wakers), as
# reports name them: in a count of many wake-ups, and of one op's
# who woke a wait whose wake-up no probe saw (the kernel ran no tracing
# program for it: its time is rebuilt from the scheduler's own accounting)
UNSEEN_WAKER = "an unseen waker (no probe ran for its wake-up)"
WAKER_WORDS = {"enqueuer": ("the enqueuer", "the enqueuer"),
               "other": ("another thread", "another thread"),
               "timeout": ("their timed wait",
                           "its timed wait expiring (timeout)")}


def wakers_in_words(wakers):
    """A report's "wakers" -> [(words, count)] in the vocabulary's order
    (timeouts_with_work left out)."""
    return [(WAKER_WORDS.get(k, (k, k))[0], n) for k, n in wakers.items()
            if k != "timeouts_with_work"]


# the parts of a queue wait (vocab.attr_parts), as reports name them
ATTR_LABELS = {"held": "held by the scheduler", "busy": "worker busy",
               "lock": "worker waiting for a lock",
               "blocked": "worker blocked (I/O, other)",
               "signal": "signal delay (asleep)", "runq": "run-queue delay",
               "pickup": "pickup"}


def attr_label(part, parts):
    """The report's name of queue-wait part `part` among `parts` (the
    run's or capture's): busy is the worker on CPU once the sleeps inside
    ops are a part of their own, and blocked holds lock waits until they
    are a part of their own (captures from before hold them together)."""
    if part == "busy" and "blocked" in parts:
        return "worker busy (on CPU)"
    if part == "blocked" and "lock" not in parts:
        return "worker blocked (lock, I/O)"
    return ATTR_LABELS.get(part, part)


def attribution(hists, counters, vocab):
    parts = {p: hists["attr." + p] for p in vocab.attr_parts}
    total = sum(h.sum_ns for h in parts.values())
    out = {}
    for p, h in parts.items():
        s = h.summary()
        out[p] = {"mean_us": s["mean_us"], "p50_us": s["p50_us"],
                  "p99_us": s["p99_us"],
                  "share": round(h.sum_ns / total, 3) if total else 0.0}
    wakers = {w: counters.get("wake_" + w, 0) for w in vocab.wakers}
    wakers["timeouts_with_work"] = counters.get("timeouts_with_work", 0)
    return out, wakers


def shard_deltas(cur, prev, threads):
    """Per shard: the set of workers whose queue is one condition variable
    (the cv they are woken from by enqueuers). Ops attributed to a cv that
    no worker calls its queue now, or before a worker's queue was known,
    are summed in a last row with shard "?".

    -> [(shard index or "?", cv key or None, workers, field deltas)] in
    shard order (raw sums: shard_rows', the exporter's counters)."""
    workers = {}
    for t in threads.values():
        if t.get("cv"):
            workers[t["cv"]] = workers.get(t["cv"], 0) + 1
    deltas = {}
    for key, c in cur.shards.items():
        p = prev.shards.get(key, {}) if prev else {}
        row = "?" if key not in workers else key
        d = deltas.setdefault(row, {})
        # the sums the snapshot has (struct shard_stats; a capture's own)
        for k, v in c.items():
            if k != "qwait_max_ns":
                d[k] = d.get(k, 0) + v - p.get(k, 0)
    keys = sorted(k for k in deltas if k != "?") + \
        (["?"] if "?" in deltas else [])
    return [(i if key != "?" else "?", key if key != "?" else None,
             workers.get(key, 0), deltas[key])
            for i, key in enumerate(keys)]


def shard_rows(deltas, parts):
    """Per shard of shard_deltas' `deltas` that had ops: ops, mean queue
    wait, the shares of the queue wait by cause (`parts`: the run's
    vocab.attr_parts), wake-ups."""
    rows = []
    for shard, key, workers, d in deltas:
        if not d["ops"]:
            continue
        q = d["qwait_ns"] or 1
        row = {
            "shard": shard,
            "cv": "0x%x" % key if key is not None else None,
            "workers": workers,
            "ops": d["ops"],
            "queue_wait_mean_us": round(d["qwait_ns"] / d["ops"] / 1000, 1)}
        row.update({p: round(d[p + "_ns"] / q, 3) for p in parts})
        # who woke its workers (struct shard_stats: wake_<enum wake_kind>)
        row.update((k, d[k]) for k in d if k.startswith("wake_"))
        row["timeouts_with_work"] = d["timeouts_with_work"]
        rows.append(row)
    return rows


# the async messenger retries a throttled connection's read every 1 ms:
# each failed try (get_or_fail_fail) stands for about this long blocked
THROTTLE_RETRY_S = 0.001


def throttle_deltas(cur, prev):
    """The messenger throttles over an interval, from their counters at
    its ends (ceph/throttles.py): {name: {"setting", "max", "val", "gets",
    "fails", "waits", "blocked_s"}}; blocked_s: the connections' time
    blocked, about (fails x the 1-ms retry + the blocking waits' sum).
    None when either end was not read."""
    if not cur or not prev:
        return None
    out = {}
    for name, c in sorted(cur.items()):
        p = prev.get(name)
        if p is None:
            continue
        fails = max(0, c["fails"] - p["fails"])
        waits = max(0, c["waits"] - p["waits"])
        wait_s = max(0.0, c["wait_s"] - p["wait_s"])
        out[name] = {"setting": c.get("setting"),
                     "max": c["max"], "val": c["val"],
                     "gets": max(0, c["get"] - p["get"]), "fails": fails,
                     "waits": waits,
                     "blocked_s": round(fails * THROTTLE_RETRY_S + wait_s,
                                        3)}
    return out


def interval_deltas(cur, prev):
    """The histograms and counters of the interval from prev to cur (the
    snapshot that closed the interval carries its histograms)."""
    hists = dict(cur.interval)
    counters = {k: v - (prev.counters.get(k, 0) if prev else 0)
                for k, v in cur.counters.items()}
    return hists, counters


def split_counters(counters, vocab):
    """The counters that count losses (not results)."""
    return {k: v for k, v in counters.items()
            if k not in vocab.result_counters}


# What each loss counter (enum counter_id before CNT__RESULTS, and the
# tracer's own op_aged_out) means for the figures, and what to do about
# it: every report that prints a loss says it in these words
# (tests/unit/test_report.py: one per counter).
# the loss the tracer counts itself (ops it forgot), beside the header's
AGED_OUT = "op_aged_out"

LOSS_WORDS = {
    "start_map_full": "stage timings not taken: a thread had no task "
                      "storage (should not happen: report it)",
    "no_start": "returns seen without their entry, not timed: calls that "
                "began before tracing started (growing: a function "
                "re-enters itself)",
    "negative": "timings ending before they started, dropped (should not "
                "happen: report it)",
    "op_map_full": "ops not followed: the op table was full (raise "
                   "--max-ops)",
    "op_unknown": "dequeues or completions of ops not seen enqueued, not "
                  "timed: ops that began before tracing started",
    "bad_arg": "ops whose request could not be read, not followed: a probe "
               "offset does not fit this build (check --release or the "
               "probe table)",
    "op_replaced": "ops that never completed before their memory was "
                   "reused by a new op, dropped (aborted ops, or ops older "
                   "than --op-timeout)",
    "thread_map_full": "threads not followed: the thread table was full "
                       "(their sleeps and wake-ups are missing)",
    "attr_truncated": "ops that waited through more than the worker's "
                      "recorded state changes: the oldest part of their "
                      "queue wait counts as worker busy (a few: nothing to "
                      "do)",
    "rq_map_full": "block requests not timed: the request table was full",
    "events_lost": "capture events the ring buffer had no room for (raise "
                   "--ring-mb)",
    "behind_map_full": "run-queue waits not told behind whom: too many "
                       "processes ran on the CPUs in one interval",
    "reply_unknown": "replica replies to ops not seen sending sub-ops, not "
                     "counted: sub-ops sent before tracing started",
    "req_map_full": "replicated ops whose replies cannot be matched: the "
                    "request table was full",
    AGED_OUT: "ops idle longer than --op-timeout, forgotten: ops "
                   "that never completed (client gone, op dropped)",
    "msg_unstamped": "ops without the messenger stages: their message's "
                     "stamps were missing or out of order (ops Ceph made "
                     "itself, or a messenger offset that does not fit)",
    "enq_from_dispatch": "ops whose enqueue is their message's dispatch "
                         "stamp, not OpTracker's queued_for_pg: the OSD's "
                         "OpTracker is off (osd_enable_op_tracker false), "
                         "so their dispatch is shorter and their "
                         "queue_wait longer by the OSD's own dispatch work",
    "stack_map_full": "waits recorded without their stacks: more threads "
                      "asleep at once than the stack table holds",
}

# A capture's report (osdstage -r) says what the counters whose words
# advise a tracing option mean for the recording, in these words: the
# option is the recording's, never one to give -r.
CAPTURE_WORDS = {
    "op_map_full": "ops not followed: the recording's op table was full "
                   "(record again with a larger --max-ops)",
    "bad_arg": "ops whose request could not be read, not followed: a probe "
               "offset of the recording's probe table does not fit the "
               "OSD's build",
    "op_replaced": "ops that never completed before their memory was "
                   "reused by a new op, dropped (aborted ops, or ops older "
                   "than the recording's op timeout)",
    "events_lost": "capture events the ring buffer had no room for, not "
                   "in the capture (record again with a larger --ring-mb)",
    AGED_OUT: "ops idle longer than the recording's op timeout, forgotten: "
              "ops that never completed (client gone, op dropped)",
}

# The counters that count what was under way when the probes attached:
# not lost, only begun before tracing started (an op queued then is
# dequeued without its enqueue seen). Reports name them apart from the
# losses, in these words.
BEGUN_BEFORE = {
    "op_unknown": "ops begun before tracing started (not timed)",
    "no_start": "calls begun before tracing started (not timed)",
    "reply_unknown": "replies to sub-ops sent before tracing started (not "
                     "counted)",
}

# the losses that forget ops: an op forgotten and then dequeued or
# completed counts in op_unknown too
FORGETTING = ("op_map_full", "op_replaced", AGED_OUT)


def loss_lines(lost, capture=False):
    """One line per loss counter that counted, the attach-time ones
    (BEGUN_BEFORE) left out: 'name=N: what it means'; capture: in a
    capture's words (CAPTURE_WORDS)."""
    words = dict(LOSS_WORDS, **CAPTURE_WORDS) if capture else LOSS_WORDS
    return ["%s=%d: %s" % (k, v, words.get(k, "lost"))
            for k, v in lost.items() if v and k not in BEGUN_BEFORE]


def begun_lines(lost):
    """One line per attach-time counter that counted: 'ops begun before
    tracing started (not timed): N (op_unknown)'; op_unknown also counts
    forgotten ops when a loss forgot some."""
    forgot = any(lost.get(k) for k in FORGETTING)
    return ["%s: %d (%s%s)" % (BEGUN_BEFORE[k], lost[k], k,
                               ", or ops forgotten: see lost"
                               if forgot and k == "op_unknown" else "")
            for k in BEGUN_BEFORE if lost.get(k)]


# the stages a host summary shows per OSD (when traced), p99 in us
SUMMARY_STAGES = ("queue_wait", "op_total", "replica_wait", "repop")


def osd_summary(name, rec):
    """One OSD's row of a host summary, from its interval object."""
    row = {"osd": name, "pid": rec["pid"],
           "ops": rec["stages"].get("op_total", rec["stages"].get(
               "queue_wait", {})).get("count", 0)}
    for stage in SUMMARY_STAGES:
        s = rec["stages"].get(stage)
        row[stage + "_p99_us"] = s["p99_us"] if s and s["count"] else None
    row["cause"] = rec.get("cause")
    row["verdict"] = (rec.get("verdict") or "").split("\n")[0]
    return row


def peers(hists, stage):
    """The per-peer histograms of `stage` (model/events.py's PeerKey) ->
    {osd id: (its replies' wait Hist or None, the times it was last)},
    by OSD id."""
    waits, lasts = {}, {}
    for k, h in hists.items():
        if isinstance(k, PeerKey) and k.stage == stage:
            if k.what == "wait":
                if h.count:
                    waits[k.osd] = h
            else:
                lasts[k.osd] = h.count
    return {p: (waits.get(p), lasts.get(p, 0))
            for p in sorted(set(waits) | set(lasts))}


def by_peer(hists, stage="replica_wait"):
    """replica_wait per replica (or shard_read per shard): peer_rows of
    its peers."""
    return peer_rows(peers(hists, stage))


def peer_rows(per):
    """A stage's `peers` -> per peer, its replies' waits and how often it
    was the last to reply: {"osd.N": summary + last, last_pct}."""
    total = sum(last for _, last in per.values())
    out = {}
    for peer, (wait, last) in per.items():
        s = wait.summary() if wait is not None else {"count": 0}
        s["last"] = last
        s["last_pct"] = round(100.0 * last / total, 1) if total else 0.0
        out["osd.%d" % peer] = s
    return out
