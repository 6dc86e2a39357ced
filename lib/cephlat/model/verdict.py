"""The verdict: an interval's figures in plain words (the cause, and the
numbers behind it), and a line about a slow replica when several OSDs are
traced together. From model/interval.py's figures; render/ prints it."""

from . import sched as scheduler


# The throttle is named the cause when its connections' blocked time per
# op is at least this share of op_total's mean. Less than all of it: that
# time is only what the connections' retries show, and the messages
# behind the head-of-line one wait unread in the socket on top of it (the
# clients' 64 reads over a cap of 4 wait mostly there). A slow OSD fills
# the throttle too: then its own time is far the larger (mClock holding
# ops 25 ms against 2.5 ms blocked per op), and the OSD's cause is named.
# Under CPU contention the two came close (0.13 ms blocked against 0.14 ms
# in the OSD, a busy loop beside the Reef lab): the throttle still holds
# the clients' ops, 60 of their 64 outside the OSD.
THROTTLE_CAUSE_SHARE = 0.5

# Background work is named the cause when client ops queued (the cause
# would otherwise be the scheduler's hold, busy workers or CPU) and the
# items of the background classes (recovery messages and items, scrub,
# snap trim, PG deletes) were at least this share of what the shard
# queues served: a fifth of the dequeues is work the clients' ops wait
# behind, or whose reservation mClock keeps from them.
BACKGROUND_CAUSE_SHARE = 0.2

# Ops that wait behind busy, locked or blocked workers wait for the CPUs
# instead when the workers spend at least this many times as long runnable as
# running (their thread statistics): more workers would only queue for
# the same CPUs. On the 2-core Reef lab under 16 concurrent reads, one
# worker of one shard ran 64 % of the time and was runnable 21 % (the
# worker is the limit); eight workers of one shard each ran 10 % and were
# runnable 40 % (the CPUs are).
CPU_BOUND_RATIO = 1.0


def _ms(us):
    return "%.2f ms" % (us / 1000.0) if us >= 100 else "%.0f us" % us


CAUSES = {
    "throttle": "messenger throttle",
    "held": "scheduler limit",
    "background": "background work",
    "busy": "workers saturated",
    "lock": "workers waiting for locks",
    "blocked": "workers blocked in ops",
    "signal": "wake-ups late",
    "missed": "wake-ups missed",
    "runq": "CPU contention",
    "storage": "storage",
    "syncfs": "syncfs stalls",
    "replica": "slow replica",
    "idle": "no queueing",
    "none": "no ops",
}


def _storage_line(stages, qw):
    """Storage versus queueing, when the op's whole life is known: the
    object store's share is its calls plus the wait after the worker
    handed the op off (a write's commit), measured as op_total minus the
    queue and the worker's own time. -> the verdict's line, or None."""
    tot = stages.get("op_total")
    if tot is None or not tot.count:
        return None

    def mean(name):
        h = stages.get(name)
        return h.mean_us() if h is not None and h.count else 0.0
    worker_us = mean("dequeue_op") or mean("do_op")
    after = max(0.0, tot.mean_us() - qw.mean_us() - worker_us)
    storage = after + mean("bluestore_read") + mean("bluestore_submit")
    st_share = storage / tot.mean_us()
    q_share = qw.mean_us() / tot.mean_us()
    if st_share <= max(q_share, 0.3):
        return None
    return ("storage dominates: ops spent %d %% of their time in the object "
            "store (%s waiting after the worker handed them off, e.g. for "
            "the commit), %d %% in shard queues." % (
                round(100 * st_share), _ms(after), round(100 * q_share)))


# a replica is "slow" when it is the last to reply to most replicated
# writes (SLOW_LAST_PCT, or half of them with waits SLOW_VS_PEERS times
# the other replicas'), and the replicas' wait clearly exceeds the
# primary's own commit (SLOW_VS_LOCAL)
SLOW_LAST_PCT = 70.0
SLOW_VS_PEERS = 1.3
SLOW_VS_LOCAL = 1.3


def _replica_line(stages, peers):
    """Replicated writes: how long they waited for replicas, and who was
    last. -> (line or None, the slow replica's name or None)"""
    rw = stages.get("replica_wait")
    if rw is None or not rw.count or not peers:
        return None, None
    rs = rw.summary()
    name, p = max(peers.items(), key=lambda kv: kv[1]["last"])
    line = "writes waited %s for replicas (p99 %s); %s was last in %d %% " \
        "of them" % (_ms(rs["mean_us"]), _ms(rs["p99_us"]), name,
                     round(p["last_pct"]))
    lc = stages.get("local_commit")
    local = lc.mean_us() if lc is not None and lc.count else 0.0
    if local:
        line += " (own commit: %s)" % _ms(local)
    others = [q["mean_us"] for n, q in peers.items()
              if n != name and q.get("count")]
    ahead = others and p.get("count") and \
        p["mean_us"] >= SLOW_VS_PEERS * (sum(others) / len(others))
    slow = len(peers) > 1 and rw.mean_us() > SLOW_VS_LOCAL * local and (
        p["last_pct"] >= SLOW_LAST_PCT or (p["last_pct"] >= 50 and ahead))
    return line + (": look at %s." % name if slow else "."), \
        name if slow else None


def _shard_read_line(stages, peers, me):
    """Erasure-coded reads: how long they waited for their shards, and
    the slowest shard. A read waits for its k shards, its primary's own
    often among them and first (no network), and a PG's reads go to that
    PG's shards only: the remote shards are compared among themselves
    (their replies' mean waits), and the slowest is slow when it takes
    SLOW_VS_PEERS times the others' and was last in most of the reads it
    served (SLOW_LAST_PCT). -> (line or None, the slow shard's name or
    None)"""
    sr = stages.get("shard_read")
    if sr is None or not sr.count or not peers:
        return None, None
    ss = sr.summary()
    remote = {n: q for n, q in peers.items() if n != me and q.get("count")}
    if not remote:
        return None, None
    name, p = max(remote.items(), key=lambda kv: kv[1]["mean_us"])
    served = 100.0 * p["last"] / p["count"]
    line = "erasure-coded reads waited %s for their shards (p99 %s); the " \
        "slowest, %s, took %s and was last in %d %% of the reads it " \
        "served" % (_ms(ss["mean_us"]), _ms(ss["p99_us"]), name,
                    _ms(p["mean_us"]), round(served))
    others = [q["mean_us"] for n, q in remote.items() if n != name]
    slow = bool(others) and served >= SLOW_LAST_PCT and \
        p["mean_us"] >= SLOW_VS_PEERS * (sum(others) / len(others))
    return line + (": look at %s." % name if slow else "."), \
        name if slow else None


def _kernel_lines(kstages, lines, cause):
    """Block requests and syncfs in the verdict -> the cause."""
    br = kstages.get("block_rq")
    if br is not None and br.count:
        bs = br.summary()
        lines.append("block requests: %d, mean %s, p99 %s." % (
            bs["count"], _ms(bs["mean_us"]), _ms(bs["p99_us"])))
    sf = kstages.get("syncfs")
    if sf is not None and sf.count:
        ss = sf.summary()
        stall = ss["p99_us"] >= 50000
        lines.append("syncfs: %d calls, mean %s, p99 %s%s." % (
            ss["count"], _ms(ss["mean_us"]), _ms(ss["p99_us"]),
            " - syncfs stalls" if stall else ""))
        if stall and cause in ("none", "idle"):
            cause = "syncfs"
    return cause


def _held_lines(attr, sched, head, rate=None):
    """mClock held the queued ops: by how much, and the settings an
    operator changes (rate: ops dequeued per second). -> lines"""
    lines = ["%s; %d %% of it the scheduler held them: mClock had the "
             "workers wait, with ops queued, until the time it gave (held "
             "p50 %s). That is the scheduler's choice, not a missed "
             "wake-up." % (head, round(100 * attr["held"]["share"]),
                           _ms(attr["held"]["p50_us"]))]
    if not sched or "classes" not in sched:
        # no OSD settings to name (a probe spec's program)
        return lines
    lim = scheduler.limit_iops(sched, "client")
    if lim:
        cl = sched["classes"]["client"]
        line = ("client ops are limited to %s x %s IOPS = %.0f IOPS "
                "(osd_mclock_profile %s, osd_mclock_scheduler_client_lim "
                "%s; capacity %s = %s, %s)" % (
                    scheduler.fmt(cl["lim"]),
                    scheduler.fmt(sched["capacity_iops"]), lim,
                    sched.get("profile"), scheduler.fmt(cl["lim"]),
                    sched["capacity_setting"],
                    scheduler.fmt(sched["capacity_iops"]),
                    scheduler.source_words(sched)))
        if sched.get("capacity_source", "default") == "default":
            line += (": set %s to what the device does, or raise the "
                     "client limit or change the profile." %
                     sched["capacity_setting"])
        else:
            line += (": raise the client limit, change the profile, or "
                     "check the measured capacity.")
        lines.append(line)
    else:
        lines.append(
            "no limit binds client ops (profile %s): the holds come from "
            "the classes' reservations and limits against the capacity "
            "(%s; the scheduler line above gives them)." % (
                sched.get("profile"),
                scheduler.fmt(sched.get("capacity_iops")) + " IOPS"
                if sched.get("capacity_iops") else "unknown"))
        if rate and sched.get("capacity_iops"):
            # a custom limit removed after its profile stays in force
            # while the config says none (docs/ceph.md): the rate shows it
            lines.append(
                "ops were dequeued at %.0f per second, %.2f x the capacity: "
                "if that is a limit no longer configured, set the profile "
                "again (a custom limit removed after its profile stays in "
                "force)." % (rate, rate / sched["capacity_iops"]))
    return lines


def _throttle_lines(throttles, stages):
    """A messenger throttle was full: which, its cap, how long the
    head-of-line messages waited, and what the OSD cannot see. -> (lines,
    is it the cause: the connections were blocked, per op, at least
    THROTTLE_CAUSE_SHARE of what the ops took inside the OSD)"""
    full = [(n, t) for n, t in (throttles or {}).items()
            if t["fails"] or t["waits"]]
    if not full:
        return [], False
    tw, tot = stages.get("throttle_wait"), stages.get("op_total")
    ops = tot.count if tot is not None and tot.count else 0
    in_osd_s = tot.summary()["mean_us"] / 1e6 if ops else 0.0
    lines, cause = [], False
    for name, t in full:
        per_op = t["blocked_s"] / ops if ops else 0.0
        cause = cause or bool(ops and
                              per_op >= THROTTLE_CAUSE_SHARE * in_osd_s)
        head = ("messenger throttle %s was full (cap %s%s): %d reads of "
                "a message found it full%s" % (
                    name, t["max"], ", " + t["setting"] if t.get("setting")
                    else "", t["fails"],
                    " and %d waited for it" % t["waits"] if t["waits"]
                    else ""))
        if ops:
            head += (", about %s blocked per op against %s per op in the "
                     "OSD (op_total)" % (_ms(per_op * 1e6),
                                         _ms(in_osd_s * 1e6)))
        if tw is not None and tw.count:
            s = tw.summary()
            head += ("; the head-of-line messages waited up to %s "
                     "(throttle_wait p99 %s)" % (_ms(s["max_us"]),
                                                 _ms(s["p99_us"])))
        lines.append(head + ".")
    lines.append("the messages behind them waited unread in the socket, "
                 "which no stamp shows: clients wait longer than the OSD "
                 "measures. Raise the throttle's cap or spread the load "
                 "over more OSDs.")
    return lines, cause


def _background_lines(stages, qclasses, sched, secs, background):
    """What the shard queues served besides client ops: recovery
    messages (by their scheduler class), recovery items, scrub, snap trim
    and PG deletes, and the profile that shares the workers out. -> (lines,
    the share of the dequeues that was background work)"""
    if not qclasses or not qclasses.get("client", {}).get("count"):
        return [], 0.0
    items = {n: stages[n].count for n in background
             if n in stages and stages[n].count}
    msgs = {c: qclasses.get(c, {}).get("count", 0)
            for c in ("background_recovery", "background_best_effort")}
    bg = sum(items.values()) + sum(msgs.values())
    total = bg + sum(q.get("count", 0) for c, q in qclasses.items()
                     if c not in msgs)
    share = bg / total if total else 0.0
    if not bg:
        return [], 0.0
    cl = qclasses["client"]
    parts = ["%d recovery messages (push, pull, backfill, scan)" %
             msgs["background_recovery"]] if msgs["background_recovery"] \
        else []
    if msgs["background_best_effort"]:
        parts.append("%d best-effort recovery messages" %
                     msgs["background_best_effort"])
    parts += ["%d %s items" % (n, name.replace("_", " "))
              for name, n in items.items()]
    line = ("background work was %d %% of what the shard queues served "
            "(%s) while client ops waited %s (p99 %s; held %s of it)" % (
                round(100 * share), ", ".join(parts), _ms(cl["mean_us"]),
                _ms(cl["p99_us"]),
                "%d %%" % round(100 * scheduler.held_share(cl))))
    busy_ns = sum(stages[n].sum_ns for n in items)
    if busy_ns and secs:
        line += ("; the workers spent %s per second in those items" %
                 _ms(busy_ns / secs / 1e3))
    lines = [line + "."]
    if sched and sched.get("mclock") and "classes" in sched:
        c = sched["classes"]
        rec, cli = c.get("background_recovery", {}), c.get("client", {})
        words = ("mClock profile %s: background recovery res %s wgt %s lim "
                 "%s against client res %s wgt %s lim %s" % (
                     sched.get("profile"), *(scheduler.fmt(rec.get(k))
                                             for k in ("res", "wgt", "lim")),
                     *(scheduler.fmt(cli.get(k))
                       for k in ("res", "wgt", "lim"))))
        favours = (rec.get("wgt") or 0) > (cli.get("wgt") or 0) or \
            (rec.get("res") or 0) > (cli.get("res") or 0)
        if favours:
            words += (": the profile favours recovery. Set "
                      "osd_mclock_profile high_client_ops to favour client "
                      "ops while it runs, or let it finish.")
        else:
            words += (": the profile does not favour recovery; the client "
                      "ops wait behind the items themselves (fewer at once: "
                      "osd_recovery_max_active, osd_max_backfills).")
        lines.append(words)
    elif sched and not sched.get("mclock"):
        lines.append("%s queues by priority alone: fewer recovery items at "
                     "once (osd_recovery_max_active, osd_max_backfills) or "
                     "a recovery sleep (osd_recovery_sleep_hdd/ssd) leaves "
                     "the workers to client ops." % (sched.get("queue") or
                                                    "the scheduler"))
    return lines, share


class Verdict(tuple):
    """A verdict built whole: (cause, text), and `.slow`, the OSD its
    text names as the slow replica or shard ("osd.N"), else None (several
    OSDs traced together: host_verdicts adds that OSD's own line)."""

    def __new__(cls, cause, text, slow=None):
        v = super().__new__(cls, (cause, text))
        v.slow = slow
        return v

    cause = property(lambda self: self[0])
    text = property(lambda self: self[1])


def _cpu_bound(wk):
    """The shard workers' thread statistics (wk: the worker role's row)
    -> (runnable %, on-CPU %) when they waited for a CPU at least
    CPU_BOUND_RATIO times as long as they ran, else None."""
    off, rq = wk.get("offcpu_pct"), wk.get("runq_pct")
    if off is None or rq is None:
        return None
    on = max(0.0, 100.0 - off - rq)
    return (rq, on) if rq and rq >= CPU_BOUND_RATIO * on else None


def _cpu_words(cpu, wk):
    """The end of a CPU-contention line: when the workers waited for a
    CPU at least as long as they ran (cpu: _cpu_bound's), their figures
    and that more of them will not help."""
    if not cpu:
        return "."
    return (" (%d workers, each runnable %d %% and on CPU %d %% of the "
            "time). The CPUs are the limit, not the number of workers: "
            "more workers will not help." % (
                wk.get("threads", 0), round(cpu[0]), round(cpu[1])))


def _queue_lines(qw, attr, wakers, sched, secs, wk):
    """What the shard queues' wait was mostly made of (attr: the
    attribution's parts; wk: the workers' thread statistics) -> (cause,
    lines): held by the scheduler, missed or slow wake-ups, CPU
    contention (also when the workers were busy, locked or blocked but
    mostly waited for a CPU), busy workers, workers waiting for locks or
    blocked otherwise; idle when the wait is short."""
    lines = []
    woke = wakers["enqueuer"] + wakers["other"] + wakers["timeout"]
    shares = {p: attr[p]["share"] for p in attr}
    top = max(("held", "busy", "lock", "blocked", "signal", "runq"),
              key=lambda p: shares.get(p, 0.0))
    cpu = _cpu_bound(wk)
    qs = qw.summary()
    head = "ops waited %s in shard queues (p99 %s)" % (
        _ms(qs["mean_us"]), _ms(qs["p99_us"]))
    to_pct = 100.0 * wakers["timeout"] / woke if woke else 0.0
    if top == "held":
        cause = "held"
        lines.extend(_held_lines(attr, sched, head,
                                 qw.count / secs if secs else None))
    elif top == "signal" or (to_pct >= 50 and shares["signal"] >= 0.25):
        cause = "missed" if to_pct >= 50 else "signal"
        lines.append(
            "%s; %d %% of it was workers asleep with work queued (signal "
            "delay p50 %s; %d %% of wake-ups came only from the timed "
            "wait expiring, %d times with work queued)." % (
                head, round(100 * shares["signal"]),
                _ms(attr["signal"]["p50_us"]), round(to_pct),
                wakers["timeouts_with_work"]))
        if cause == "missed":
            lines.append("wake-ups are being missed: queued work is "
                         "found only when the workers' timed wait "
                         "expires.")
    elif top == "runq":
        cause = "runq"
        lines.append(
            "%s; %d %% of it workers were runnable but waiting for a CPU "
            "(run-queue delay p99 %s): CPU contention%s" % (
                head, round(100 * shares["runq"]),
                _ms(attr["runq"]["p99_us"]), _cpu_words(cpu, wk)))
    elif cpu and top in ("busy", "lock", "blocked"):
        cause = "runq"
        lines.append(
            "%s; the workers were busy with earlier ops (%d %% of it on "
            "CPU, %d %% asleep in them) or waiting for a CPU (%d %%), and "
            "they waited for a CPU %s: CPU contention%s" % (
                head, round(100 * shares.get("busy", 0.0)),
                round(100 * (shares.get("lock", 0.0) +
                             shares.get("blocked", 0.0))),
                round(100 * shares.get("runq", 0.0)),
                "%.1f x as long as they ran" % (cpu[0] / cpu[1]) if cpu[1]
                else "and hardly ran", _cpu_words(cpu, wk)))
    elif top == "lock":
        cause = "lock"
        lines.append(
            "%s; %d %% of it the worker was waiting for a lock: a PG's, "
            "held by another worker serving an op of that PG (or a lock "
            "inside earlier ops). Ops of one PG run one at a time: more "
            "workers do not speed them up; spread the load over more PGs "
            "(pg_num) or more objects." % (
                head, round(100 * shares["lock"])))
    elif top == "blocked" and "lock" not in attr:
        # a capture from before `lock` was split off: blocked holds both
        cause = "blocked"
        lines.append(
            "%s; %d %% of it the worker was asleep inside earlier ops: "
            "waiting for a lock (a PG's, held by another worker serving an "
            "op of that PG) or for I/O. Ops of one PG run one at a time: "
            "more workers do not speed them up; spread the load over more "
            "PGs (pg_num), or see the block requests for I/O." % (
                head, round(100 * shares["blocked"])))
    elif top == "blocked":
        cause = "blocked"
        lines.append(
            "%s; %d %% of it the worker was asleep inside earlier ops, not "
            "on a lock: waiting for I/O (a read from the disk, a page "
            "fault) or for a completion. See the block requests and "
            "bluestore_read: a slower disk makes every op of the shard "
            "wait behind the ones reading." % (
                head, round(100 * shares["blocked"])))
    else:
        cause = "busy"
        lines.append(
            "%s; %d %% of it the worker was %s earlier ops: the shard "
            "workers are saturated." % (
                head, round(100 * shares["busy"]),
                # a capture from before `blocked` was split off: busy
                # holds the sleeps inside ops too
                "on CPU with" if "blocked" in attr else "busy with"))
    if qs["mean_us"] < 50 and cause != "missed":
        cause = "idle"
        lines[-1] += " (short: queueing is not the problem)"
    return cause, lines


def verdict(stages, kstages, attr, wakers, threads, worker_role, peers=None,
            sched=None, throttles=None, secs=None, qclasses=None,
            background=(), read_peers=None, me=None):
    """-> Verdict (cause, text; .slow): the dominant reason ops waited,
    in plain words, with the numbers behind it. peers: replica_wait's
    by_peer; sched: the OSD's scheduler (ceph/scheduler.py); throttles:
    the messenger's
    (throttle_deltas); secs: the interval's length; qclasses: queue_wait's
    by_queue_class; background: the stages of background work (vocab);
    read_peers: shard_read's by_peer; me: the OSD's own name ("osd.N")."""
    qw = stages.get("queue_wait")
    lines = []
    cause = "none"
    named = None
    wk = threads.get(worker_role, {})
    sleep_pct = wk.get("offcpu_pct")
    if attr is None:                  # kernel stages only
        pass
    elif qw is None or qw.count == 0:
        lines.append("no ops were dequeued in this interval.")
    else:
        cause, lines = _queue_lines(qw, attr, wakers, sched, secs, wk)
        bglines, bgshare = _background_lines(stages, qclasses, sched, secs,
                                             background)
        if bgshare < BACKGROUND_CAUSE_SHARE:
            bglines = bglines[:1]       # a fact, without the advice
        elif cause in ("held", "busy", "lock", "blocked", "runq"):
            cause = "background"
            lines[:0] = bglines
            bglines = []
        lines.extend(bglines)
        storage = _storage_line(stages, qw)
        if storage:
            cause = "storage"
            lines.insert(0, storage)
        replica, slow = _replica_line(stages, peers)
        if replica:
            lines.insert(0, replica)
        if slow:
            cause, named = "replica", slow
        shards, slow = _shard_read_line(stages, read_peers, me)
        if shards:
            lines.insert(0, shards)
        if slow:
            cause, named = "replica", slow
        lines.append("CPU run-queue delay %s; workers slept %s of the time." %
                     (_ms(attr["runq"]["mean_us"]),
                      "%d %%" % round(sleep_pct) if sleep_pct is not None
                      else "an unknown share"))
    tlines, throttled = _throttle_lines(throttles, stages)
    if throttled:
        cause = "throttle"
    lines[:0] = tlines
    cause = _kernel_lines(kstages, lines, cause)
    return Verdict(cause, "\n".join(lines),
                   named if cause == "replica" else None)


def host_verdicts(recs):
    """Several OSDs traced together: a slow replica named in a primary's
    verdict gets a line of its own numbers, from its report ({name:
    interval object}, changed in place: a line added, none rewritten)."""
    for name, rec in recs.items():
        # the one its verdict named: a write's replica or shard, or an
        # erasure-coded read's shard
        slow = rec.get("slow_osd")
        peer = recs.get(slow) if slow else None
        if peer is None:
            continue
        qw = peer["stages"].get("queue_wait", {})
        rp = peer["stages"].get("repop", {})
        extra = "%s's own queue wait p99 %s" % (slow, _ms(qw.get("p99_us",
                                                                 0)))
        if rp.get("count"):
            extra += ", its replica ops p99 %s" % _ms(rp["p99_us"])
        if peer.get("cause") and peer["cause"] not in ("none", "idle"):
            extra += " (%s: %s)" % (slow, CAUSES.get(peer["cause"],
                                                      peer["cause"]))
        rec["verdict"] += "\n%s." % extra
