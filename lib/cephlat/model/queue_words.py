"""The shard queues' part of the verdict (model/verdict.py): what the
ops' wait in the queues was mostly made of, in words (the scheduler's
hold and its settings, missed or late wake-ups, CPU contention, busy,
locked or blocked workers), from the wait attribution's shares, the
wakers and the workers' thread statistics. Every figure is quoted as
its table prints it (share(), pct()), and no cause is named that the
figures deny: workers that slept most of the time are not saturated,
and a capture that cannot tell busy from blocked says so."""

from . import sched as scheduler

# a mean queue wait under this (us) is no queueing problem: the cause is
# "idle" (but for missed wake-ups, a fault however short)
SHORT_QUEUE_US = 50


# Ops that wait behind busy, locked or blocked workers wait for the CPUs
# instead when the workers spend at least this many times as long runnable as
# running (their thread statistics): more workers would only queue for
# the same CPUs. On the 2-core Reef lab under 16 concurrent reads, one
# worker of one shard ran 64 % of the time and was runnable 21 % (the
# worker is the limit); eight workers of one shard each ran 10 % and were
# runnable 40 % (the CPUs are).
CPU_BOUND_RATIO = 1.0

# Workers that slept more than this share of the time (their thread
# statistics: the THREAD ROLE table's %OFFCPU) are not saturated, whatever
# the ops queued behind: the verdict says what the queueing was instead
# (bursts, or a few hot shards), never "saturated".
SLEPT_MOST_PCT = 50.0


def ms(us):
    """A time in us as the verdict writes it."""
    return "%.2f ms" % (us / 1000.0) if us >= 100 else "%.0f us" % us


def share(x):
    """A share (0..1) of the attribution or the shard table, as those
    tables print it (render/interval_text.py: %.0f of 100 x the share)."""
    return "%.0f %%" % (100 * x)


def pct(x):
    """A thread statistic in % (the THREAD ROLE table's), as that table
    prints it (%.1f)."""
    return "%.1f %%" % x


def _held_lines(attr, sched, head, rate=None):
    """mClock held the queued ops: by how much, and the settings an
    operator changes (rate: ops dequeued per second). -> lines"""
    lines = ["%s; %s of it the scheduler held them: mClock had the "
             "workers wait, with ops queued, until the time it gave (held "
             "p50 %s). That is the scheduler's choice, not a missed "
             "wake-up." % (head, share(attr["held"]["share"]),
                           ms(attr["held"]["p50_us"]))]
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
    return (" (%d workers, each runnable %s and on CPU %s of the "
            "time). The CPUs are the limit, not the number of workers: "
            "more workers will not help." % (
                wk.get("threads", 0), pct(cpu[0]), pct(cpu[1])))



# the parts of a queue wait (vocab.attr_parts) a verdict can name as its
# cause; pickup (woken -> the op taken) follows the others, it is no
# cause of its own
CAUSES = ("held", "busy", "lock", "blocked", "signal", "runq")
NOT_CAUSES = ("pickup",)

def queue_lines(qw, attr, wakers, sched, secs, wk):
    """What the shard queues' wait was mostly made of (attr: the
    attribution's parts; wk: the workers' thread statistics) -> (cause,
    lines): held by the scheduler, missed or slow wake-ups, CPU
    contention (also when the workers were busy, locked or blocked but
    mostly waited for a CPU), busy workers (saturated; uneven load when
    they slept most of the time; busy_or_blocked in a capture that
    cannot tell), workers waiting for locks or blocked otherwise; idle
    when the wait is short."""
    woke = sum(n for k, n in wakers.items() if k != "timeouts_with_work")
    shares = {p: attr[p]["share"] for p in attr}
    slept = wk.get("offcpu_pct")
    top = max(CAUSES, key=lambda p: shares.get(p, 0.0))
    cpu = _cpu_bound(wk)
    qs = qw.summary()
    head = "ops waited %s in shard queues (p99 %s)" % (
        ms(qs["mean_us"]), ms(qs["p99_us"]))
    to_pct = 100.0 * wakers["timeout"] / woke if woke else 0.0
    if top == "held":
        cause = "held"
        lines = _held_lines(attr, sched, head,
                            qw.count / secs if secs else None)
    elif top == "signal" or (to_pct >= 50 and shares["signal"] >= 0.25):
        cause = "missed" if to_pct >= 50 else "signal"
        lines = _signal_lines(head, shares, attr, wakers, to_pct)
    elif top == "runq":
        cause = "runq"
        lines = [
            "%s; %s of it workers were runnable but waiting for a CPU "
            "(run-queue delay p99 %s): CPU contention%s" % (
                head, share(shares["runq"]),
                ms(attr["runq"]["p99_us"]), _cpu_words(cpu, wk))]
    elif cpu and top in ("busy", "lock", "blocked"):
        cause = "runq"
        lines = [_cpu_bound_line(head, shares, cpu, wk)]
    else:
        cause, line = _worker_line(top, head, shares, attr, slept)
        lines = [line]
    if qs["mean_us"] < SHORT_QUEUE_US and cause != "missed":
        cause = "idle"
        lines[-1] += " (short: queueing is not the problem)"
    return cause, lines


def _signal_lines(head, shares, attr, wakers, to_pct):
    """Workers asleep with work queued: how long, and whether the wake-ups
    came only from the timed wait expiring (missed) -> lines"""
    lines = [
        "%s; %s of it was workers asleep with work queued (signal "
        "delay p50 %s; %d %% of wake-ups came only from the timed "
        "wait expiring, %d times with work queued)." % (
            head, share(shares["signal"]),
            ms(attr["signal"]["p50_us"]), round(to_pct),
            wakers["timeouts_with_work"])]
    if to_pct >= 50:
        lines.append("wake-ups are being missed: queued work is "
                     "found only when the workers' timed wait "
                     "expires.")
    return lines


def _cpu_bound_line(head, shares, cpu, wk):
    """The workers were busy, locked or blocked, but mostly waited for a
    CPU (cpu: _cpu_bound's) -> the CPU-contention line. Each part as the
    attribution table has it; a capture from before `blocked` was a part
    cannot tell the worker on CPU from asleep in an op."""
    if "blocked" in shares:
        parts = ["%s of it on CPU" % share(shares.get("busy", 0.0))]
        parts += ["%s %s" % (share(shares[p]), words)
                  for p, words in (("lock", "waiting for a lock"),
                                   ("blocked", "asleep in them"))
                  if p in shares]
        inside = ", ".join(parts)
    else:
        inside = ("%s of it on CPU or asleep in them: this capture cannot "
                  "tell them apart" % share(shares.get("busy", 0.0)))
    return (
        "%s; the workers were running earlier ops (%s) or waiting for a "
        "CPU (%s), and they waited for a CPU %s: CPU contention%s" % (
            head, inside, share(shares.get("runq", 0.0)),
            "%.1f x as long as they ran" % (cpu[0] / cpu[1]) if cpu[1]
            else "and hardly ran", _cpu_words(cpu, wk)))


def _worker_line(top, head, shares, attr, slept=None):
    """The workers themselves held the ops up: waiting for a lock, asleep
    inside earlier ops, or on CPU with them -> (cause, line). slept: the
    workers' off-CPU % (None: not known): workers that slept most of the
    time are not called saturated."""
    if top == "lock":
        return "lock", (
            "%s; %s of it the worker was waiting for a lock: a PG's, "
            "held by another worker serving an op of that PG (or a lock "
            "inside earlier ops). Ops of one PG run one at a time: more "
            "workers do not speed them up; spread the load over more PGs "
            "(pg_num) or more objects." % (head, share(shares["lock"])))
    if top == "blocked" and "lock" not in attr:
        # a capture from before `lock` was split off: blocked holds both
        return "blocked", (
            "%s; %s of it the worker was asleep inside earlier ops: "
            "waiting for a lock (a PG's, held by another worker serving an "
            "op of that PG) or for I/O. Ops of one PG run one at a time: "
            "more workers do not speed them up; spread the load over more "
            "PGs (pg_num), or see the block requests for I/O." % (
                head, share(shares["blocked"])))
    if top == "blocked":
        return "blocked", (
            "%s; %s of it the worker was asleep inside earlier ops, not "
            "on a lock: waiting for I/O (a read from the disk, a page "
            "fault) or for a completion. See the block requests and "
            "bluestore_read: a slower disk makes every op of the shard "
            "wait behind the ones reading." % (head,
                                               share(shares["blocked"])))
    if "blocked" not in attr:
        # a capture from before `blocked` was split off: busy holds the
        # sleeps inside ops too
        return "busy_or_blocked", (
            "%s; %s of it the worker was busy or blocked in earlier ops: "
            "this capture cannot tell them apart (on CPU, or asleep in "
            "them: I/O, a lock; a capture of this version tells them "
            "apart)." % (
                head, share(shares["busy"])))
    if slept is not None and slept > SLEPT_MOST_PCT:
        return "uneven", (
            "%s; %s of it the worker was on CPU with earlier ops, while "
            "the workers slept %s of the time: they had time to spare; "
            "the ops came in bursts, or onto a few shards (the shard "
            "table says which)." % (head, share(shares["busy"]),
                                    pct(slept)))
    return "busy", (
        "%s; %s of it the worker was on CPU with earlier ops: the shard "
        "workers are saturated." % (head, share(shares["busy"])))
