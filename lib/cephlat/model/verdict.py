"""The verdict: an interval's figures in plain words (the cause, and the
numbers behind it), and a line about a slow replica when several OSDs are
traced together. From model/interval.py's figures; render/ prints it."""

from . import sched as scheduler
from .report import UNSEEN_WAKER
from .behind import share_words, who_words
from .queue_words import ms as _ms, pct as _pct, queue_lines, \
    share as _share


# a named lock's share of the workers' lock waits that the verdict's
# line names beside the top place's
LOCK_SHARE = 0.1

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

CAUSES = {
    "throttle": "messenger throttle",
    "held": "scheduler limit",
    "background": "background work",
    "busy": "workers saturated",
    # a capture from before `blocked` was a part: busy holds both
    "busy_or_blocked": "workers busy or blocked",
    # on CPU with earlier ops, but asleep most of the time
    "uneven": "load uneven",
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


# the causes that say client ops queued (background work may take them)
QUEUE_CAUSES = ("held", "busy", "busy_or_blocked", "uneven", "lock",
                "blocked", "runq")


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


def _behind_words(behind, top=2):
    """"; waiting for a CPU behind X 61 %, Y 22 %" of the workers' row,
    or nothing."""
    if not behind or not behind["by"]:
        return ""
    return "; waiting for a CPU, they were behind %s" % ", ".join(
        "%s %s" % (who_words(r), share_words(r["share"]))
        for r in behind["by"][:top])


def verdict(stages, kstages, attr, wakers, threads, worker_role, peers=None,
            sched=None, throttles=None, secs=None, qclasses=None,
            background=(), read_peers=None, me=None, behind=None):
    """-> Verdict (cause, text; .slow): the dominant reason ops waited,
    in plain words, with the numbers behind it. peers: replica_wait's
    by_peer; sched: the OSD's scheduler (ceph/scheduler.py); throttles:
    the messenger's
    (throttle_deltas); secs: the interval's length; qclasses: queue_wait's
    by_queue_class; background: the stages of background work (vocab);
    read_peers: shard_read's by_peer; me: the OSD's own name ("osd.N");
    behind: the workers' row of whom they waited behind for a CPU
    (model/behind.py)."""
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
        cause, lines = queue_lines(qw, attr, wakers, sched, secs, wk)
        bglines, bgshare = _background_lines(stages, qclasses, sched, secs,
                                             background)
        if bgshare < BACKGROUND_CAUSE_SHARE:
            bglines = bglines[:1]       # a fact, without the advice
        elif cause in QUEUE_CAUSES:
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
        lines.append(
            "CPU run-queue delay %s; workers slept %s of the time%s." % (
                _ms(attr["runq"]["mean_us"]),
                _pct(sleep_pct) if sleep_pct is not None
                else "an unknown share", _behind_words(behind)))
    tlines, throttled = _throttle_lines(throttles, stages)
    if throttled:
        cause = "throttle"
    lines[:0] = tlines
    cause = _kernel_lines(kstages, lines, cause)
    return Verdict(cause, "\n".join(lines),
                   named if cause == "replica" else None)


# A capture with stacks: the verdict names where the workers' time went
# for its cause, a place (or function) "most" when it held at least this
# share of that time, else the top one as the largest of many
DOMINANT_SHARE = 0.5

# the causes whose time the workers spent on a CPU (with earlier ops, or
# waiting for one to run them): what they ran tells where it went
CPU_CAUSES = ("busy", "busy_or_blocked", "uneven", "runq")


def _where(share, place):
    """Where the time went: "most in X (N %)" when X held DOMINANT_SHARE
    of it, else the largest of many places."""
    if share >= DOMINANT_SHARE:
        return "most in %s (%s)" % (place, _share(share))
    return "spread out, the most in %s (%s)" % (place, _share(share))


def _locks(shares):
    """The lock waits' shares by lock named -> a sentence naming each
    (" By lock: the PG's lock 50 %, the shard's own locks 45 %.") when
    more than one held LOCK_SHARE or more, else ""."""
    named = [(k, v) for k, v in (shares or {}).items()
             if v >= LOCK_SHARE]
    if len(named) < 2:
        return ""
    return " By lock: %s." % ", ".join("%s %s" % (k, _share(v))
                                        for k, v in named)


def stack_line(cause, top):
    """A capture with stacks (-w --stacks, --on-cpu) and the verdict's
    cause: where the workers' time of that cause went. top: the window's
    stacks' "workers" ({"lock", "blocked": a wait row with its share,
    "locks": the lock waits' shares by lock named, "on_cpu": the top
    function}, cli/windows.py). -> a line, or None."""
    kind = {"lock": "lock", "blocked": "blocked",
            "busy_or_blocked": "blocked"}.get(cause)
    row = top.get(kind) if kind else None
    if row:
        waker = " < ".join(row["woken_by"]) or (
            UNSEEN_WAKER if row["waker_is_osd"] is None else "?")
        if row["waker_is_osd"] is False:
            waker += " (outside the OSD)"
        return "the workers' time %s (waits recorded with stacks) was " \
            "%s%s; woken by %s.%s" % (
                "waiting for a lock" if kind == "lock"
                else "asleep inside ops",
                _where(row["share"], " < ".join(row["where"]) or "?"),
                ", " + row["lock"] if row.get("lock") else "", waker,
                _locks(top.get("locks")) if kind == "lock" else "")
    cpu = top.get("on_cpu") if cause in CPU_CAUSES else None
    if cpu:
        return "the workers' samples on a CPU were %s%s." % (
            _where(cpu["share"], cpu["function"]),
            "; %s of those in the kernel" % _share(cpu["kernel_share"])
            if cpu["kernel_share"] else "")
    return None


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
