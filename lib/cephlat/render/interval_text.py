"""The interval report as text (bcc-style histograms and tables): one
OSD's Interval (model/interval.py), its record's tables and its Hist
objects' histograms, or several OSDs' under the host summary; as JSON
the record itself (emit)."""
import textwrap

from ..model import report, sched as schedmod, verdict
from ..model.behind import share_words, who_words
from ..model.hist import render_log2
from ..model.queue_words import ms
from ..model.schema import json_line
from .otlp import summary_words
from .text import print_slowest, span, wrap


def _row(out, fmt, div, name, s):
    out.write(fmt % (name, s["count"], s["mean_us"] / div, s["p50_us"] / div,
                     s["p90_us"] / div, s["p99_us"] / div, s["max_us"] / div))


# --explain: one line under each table saying what its labels mean
EXPLAIN = {
    "stages": "(COUNT: the stage's events; MEAN to MAX: their latency; "
              "indented: op classes)",
    "attribution": "(what each op's worker did while the op waited; SHARE: "
                   "of all the wait)",
    "shards": "(WRK: its workers; BUSY..: shares of its wait; TMOUT: "
              "timed waits with work)",
    "threads": "(%OFFCPU: asleep; %RUNQ: waiting for a CPU; %FUTEX/OFF: "
               "sleep in futex waits)",
    "behind": "(the run-queue waits of each role's threads, by what ran "
              "on the CPU meanwhile: the shares of their time)",
    "classes": "(ops by the scheduler's class; HELD: the share of their "
               "wait it held them)",
    "histograms": "(histograms: each stage's events per power-of-two "
                  "latency bucket)",
    "host": "(causes: each OSD's verdict; its p99 of each stage; OPS: "
            "op_total's count)",
}


def _explain(out, opts, table):
    if opts.explain:
        wrap(out, EXPLAIN[table], " ")


def _ops(rec):
    """The interval's ops in words: op_total's count (the host summary's),
    else queue_wait's; None when neither counted."""
    st = rec["stages"]
    n = st.get("op_total", {}).get("count") or \
        st.get("queue_wait", {}).get("count")
    return "%d op%s" % (n, "" if n == 1 else "s") if n else None


def _no_ops(rec):
    """An interval in which no op was seen: no stage counted anything and
    the verdict (if any) found nothing but that."""
    st = rec["stages"]
    return bool(st) and not any(s["count"] for s in st.values()) and \
        rec.get("cause") in (None, "none")


def _asleep(rec):
    worker = rec.get("worker_role")
    t = (rec.get("threads") or {}).get(worker)
    return "%s asleep %.0f %%" % (worker, t["offcpu_pct"]) if t else None


def _head(out, rec, title, what):
    """A report's first line: its span ('HH:MM:SS to HH:MM:SS (N s)') or
    `title` (an OSD of several), then `what`."""
    if title:
        head = title + (" " + what if what else "")
    elif rec.get("ts") is not None:
        t1 = rec["ts"]
        head = span(t1 - rec["interval_s"], t1) + (": " + what if what
                                                     else "")
    else:
        head = what or ""
    if head:
        wrap(out, head)


def _otlp(out, rec):
    """A live run's --otlp: the ops chosen as traces since the start and
    what became of them (the last report's: the run's, final)."""
    if rec.get("otlp"):
        wrap(out, "OTLP traces since the start: " +
              summary_words(rec["otlp"]), "    ")


def print_interval(out, opts, iv, title=None):
    """One report, an Interval (model/interval.py), as text, top down:
    its interval (or `title`), the verdict with what it rests on (losses
    included), the summary table, the queue-wait attribution and shards,
    the thread roles, the scheduler classes, the slowest ops (a window's,
    --slowest), then the histograms (its Hist objects, of the stages its
    record shows); --brief: the verdict and the summary table. An
    interval without ops is one line. opts: render/options.py's
    TextOptions."""
    rec = iv.record
    unit, unit_us = ("msecs", 1000) if opts.milliseconds else ("usecs", 1)
    if _no_ops(rec):
        parts = ["no ops"]
        if rec.get("in_flight"):
            parts[0] += " (%d in flight)" % rec["in_flight"]
        if _asleep(rec):
            parts.append(_asleep(rec))
        parts += ["%s=%d begun before tracing" % (k, rec["lost"][k])
                  for k in report.BEGUN_BEFORE if rec["lost"].get(k)]
        _head(out, rec, title, "; ".join(parts))
        _otlp(out, rec)
        _losses(out, rec, opts.capture)
        out.flush()
        return
    _head(out, rec, title, _ops(rec))
    _otlp(out, rec)
    _verdict(out, rec)
    _losses(out, rec, opts.capture)
    for line in report.begun_lines(rec["lost"]):
        wrap(out, line, "    ")
    _summary_table(out, opts, rec)
    if not opts.brief:
        if rec.get("attribution"):
            _attribution(out, opts, rec)
        if rec.get("threads"):
            _thread_roles(out, opts, rec["threads"])
        if rec.get("behind"):
            _behind(out, opts, rec["behind"])
        _queue_classes(out, opts, rec, 1000.0 if opts.milliseconds else 1.0)
    if rec.get("slowest"):
        print_slowest(out, rec["slowest"])
    if not opts.brief:
        _histograms(out, opts, rec, iv.hists, unit, unit_us)
    out.write("\n")
    out.flush()


def _verdict(out, rec):
    if not rec.get("verdict"):
        out.write("no verdict: it needs the kernel stages, which this run "
                  "did not trace\n" if "kernel" not in rec else
                  "no verdict\n")
        return
    out.write("VERDICT (%s):\n" % verdict.CAUSES.get(rec["cause"],
                                                    rec["cause"]))
    for line in rec["verdict"].splitlines():
        out.write(textwrap.fill(line, 78, initial_indent="  ",
                                subsequent_indent="    ") + "\n")


def _losses(out, rec, capture):
    """What the figures lack: stages that could not be probed, and the
    losses (a capture's in its words)."""
    for stage, why in rec["unavailable"].items():
        out.write("unavailable: %s: %s\n" % (stage, why))
    for line in report.loss_lines(rec["lost"], capture):
        wrap(out, "lost: " + line, "    ")


def _empty(rec):
    """The stages that saw nothing this interval (one line, not a
    histogram and a row of zeros each)."""
    return [st for st, s in rec["stages"].items() if not s["count"]]


def _histograms(out, opts, rec, hists, unit, unit_us):
    empty = _empty(rec)
    if opts.explain:
        out.write("\n")
        _explain(out, opts, "histograms")
    for stage in rec["stages"]:
        if stage in empty:
            continue
        out.write("\nstage = %s\n" % stage)
        lines = render_log2(hists[stage].log2_buckets(unit_us), unit)
        out.write("\n".join(lines) + "\n" if lines else "     (no events)\n")
    worker = rec.get("worker_role")
    for stage in ("offcpu", "wakeup_delay", "block_rq", "syncfs"):
        if not rec.get("kernel", {}).get(stage, {}).get("count"):
            continue
        out.write("\nkernel stage = %s\n" % stage)
        out.write("\n".join(render_log2(
            hists["kernel." + stage].log2_buckets(unit_us), unit)) + "\n")
        wh = hists.get("role.%s.%s" % (stage, worker))
        if wh is not None and wh.count:
            out.write("\nkernel stage = %s, %s threads only\n" % (stage,
                                                                  worker))
            out.write("\n".join(render_log2(wh.log2_buckets(unit_us),
                                             unit)) + "\n")


def _summary_table(out, opts, rec):
    div = 1000.0 if opts.milliseconds else 1.0
    out.write("\n%-20s %9s %9s %9s %9s %9s %9s\n" % (
        "STAGE", "COUNT", "MEAN", "P50", "P90", "P99", "MAX"))
    fmt = "%-20s %9d %9.3f %9.3f %9.3f %9.3f %9.3f\n" if opts.milliseconds \
        else "%-20s %9d %9.1f %9.1f %9.1f %9.1f %9.1f\n"
    empty = _empty(rec)
    apart = []
    for stage, s in rec["stages"].items():
        if stage in empty:
            continue
        _row(out, fmt, div, stage, s)
        classes = s.get("by_class", {})
        for cls, cs in classes.items():
            if cs["count"]:
                _row(out, fmt, div, "  " + cls, cs)
        n = sum(cs["count"] for cs in classes.values())
        if n and n != s["count"]:
            apart.append((stage, s["count"] - n))
    for stage, s in rec.get("kernel", {}).items():
        if s["count"]:
            _row(out, fmt, div, stage, s)
    out.write("(%s; interval %.1f s%s)\n" % (
        "ms" if opts.milliseconds else "us", rec["interval_s"],
        "; probe cost %.1f us/call subtracted" % rec["call_bias_us"]
        if rec["call_bias_us"] and rec["stages"] else ""))
    for stage, d in apart:
        out.write(textwrap.fill(
            "%s by class: %s (an op's class is known when it completes)"
            % (stage, "%d op%s still in flight at the interval's end" % (
                d, "s" if d > 1 else "") if d > 0 else
                "%d op%s dequeued in an interval before" % (
                    -d, "s" if d < -1 else "")), 78,
            subsequent_indent="  ") + "\n")
    if empty:
        out.write(textwrap.fill("no events in this interval: " +
                                ", ".join(empty), 78,
                                subsequent_indent="  ") + "\n")
    ov = rec.get("overhead")
    if ov:
        out.write("estimated tracing cost: %.2f %% of CPU time%s\n" % (
            ov["estimated_pct"],
            " (bound %g %%: attached %d %% of the time, %.2f %% at full "
            "rate)" % (ov["bound_pct"], round(100 * ov["attached_fraction"]),
                       ov["full_rate_pct"]) if ov["bound_pct"] else ""))
    _explain(out, opts, "stages")


def _queue_classes(out, opts, rec, div):
    """The ops dequeued through dequeue_op by scheduler class: how many,
    their queue wait and the share of it the scheduler held; then the
    scheduler's line (its settings)."""
    qc = rec["stages"].get("queue_wait", {}).get("by_queue_class") or {}
    rows = [(c, q) for c, q in qc.items() if q["count"]]
    if rows:
        out.write("\n%-22s %9s %11s %11s %7s\n" % (
            "SCHEDULER CLASS", "OPS", "QWAIT MEAN", "QWAIT P99", "HELD"))
        for c, q in rows:
            out.write("%-22s %9d %11.1f %11.1f %6d%%\n" % (
                c, q["count"], q["mean_us"] / div, q["p99_us"] / div,
                round(100 * schedmod.held_share(q))))
        _explain(out, opts, "classes")
    sched = schedmod.describe(rec.get("scheduler"))
    if sched:
        out.write("\n" + textwrap.fill(sched, 78, subsequent_indent="  ") +
                  "\n")


def _thread_roles(out, opts, threads):
    out.write("\n%-16s %7s %8s %8s %12s %9s\n" % (
        "THREAD ROLE", "THREADS", "%OFFCPU", "%RUNQ", "%FUTEX/OFF",
        "WAKEUPS"))
    for role, t in threads.items():
        out.write("%-16s %7d %8.1f %8.1f %12.1f %9d\n" % (
            role, t["threads"], t["offcpu_pct"], t["runq_pct"],
            t["futex_pct_of_offcpu"], t["wakeups"]))
    _explain(out, opts, "threads")


def _behind(out, opts, behind):
    """Per role, whom its threads waited behind for a CPU."""
    out.write("\nWAITED FOR A CPU BEHIND\n")
    for role, b in behind.items():
        parts = ["%s %s" % (who_words(r), share_words(r["share"]))
                 for r in b["by"]]
        if b["other_us"]:
            parts.append("others %s" % share_words(b["other_us"] /
                                                   b["wait_us"]))
        wrap(out, "%s: %s in all, behind %s" % (
            role, ms(b["wait_us"]), ", ".join(parts)), "    ")
    _explain(out, opts, "behind")


# the shard table's heads of the queue-wait parts longer than a column
SHARD_HEADS = {"blocked": "BLOCK"}


def _attribution(out, opts, rec):
    a, w = rec["attribution"], rec["wakers"]
    out.write("\n%-26s %9s %9s %9s %7s\n" % (
        "QUEUE_WAIT ATTRIBUTION", "MEAN", "P50", "P99", "SHARE"))
    for part, v in a.items():
        out.write("%-26s %9.1f %9.1f %9.1f %6.0f%%\n" % (
            report.attr_label(part, a), v["mean_us"], v["p50_us"],
            v["p99_us"], 100 * v["share"]))
    by = ", ".join("%s %d" % kv for kv in report.wakers_in_words(w))
    out.write(textwrap.fill(
        "workers that slept with the op queued were woken by: %s; timed "
        "waits that found work: %d" % (by, w["timeouts_with_work"]), 72,
        break_on_hyphens=False) + "\n")
    _explain(out, opts, "attribution")
    if not rec.get("shards"):
        return
    # seven parts and the shard's own columns in 80 characters
    parts = list(a)
    out.write("\n%-5s %3s %6s %8s" % ("SHARD", "WRK", "OPS", "QWAIT_US") +
              "".join(" %6s" % SHARD_HEADS.get(p, p.upper()) for p in parts) +
              " %5s\n" % "TMOUT")
    for r in rec["shards"]:
        out.write("%-5s %3d %6d %8.1f" % (r["shard"], r["workers"], r["ops"],
                                          r["queue_wait_mean_us"]) +
                  "".join(" %5.0f%%" % (100 * r.get(p, 0)) for p in parts) +
                  " %5d\n" % r["timeouts_with_work"])
    _explain(out, opts, "shards")


def emit(out, opts, ivs, host=None):
    """One report, live or read back: the host object when several OSDs
    were traced (host_record), else the one OSD's interval object (its
    Interval's record); as JSON (opts.json) or text. ivs: an Interval
    per OSD."""
    if opts.json:
        out.write(json_line(host if host is not None else ivs[0].record))
        out.flush()
    elif host is not None:
        print_host(out, opts, host, ivs)
    else:
        print_interval(out, opts, ivs[0])


def print_host(out, opts, host, ivs):
    """A report on several OSDs: its interval, the host summary (each
    OSD's cause and p99s), then each OSD's report (top down, as one
    OSD's). ivs: an Interval per OSD, in host["osds"] order."""
    ops = sum(r["ops"] for r in host["summary"])
    _head(out, host, None, "%d OSDs, %d op%s" % (
        len(host["osds"]), ops, "" if ops == 1 else "s"))
    _otlp(out, host)
    print_host_summary(out, opts, host)
    for name, iv in zip(host["osds"], ivs):
        print_interval(out, opts, iv, title="%s %s (pid %d) %s" % (
            "=" * 10, name, iv.record["pid"], "=" * 10))
    out.flush()


def print_host_summary(out, opts, host):
    """The host summary of a report on several OSDs: each OSD's cause,
    then one row of p99s per OSD."""
    div, unit = (1000.0, "ms") if opts.milliseconds else (1.0, "us")
    cols = [st for st in report.SUMMARY_STAGES
            if any(r[st + "_p99_us"] is not None for r in host["summary"])]
    out.write("\nHOST SUMMARY (%d OSDs)\n" % len(host["summary"]))
    wrap(out, "causes: " + "; ".join(
        "%s %s" % (r["osd"], verdict.CAUSES.get(r["cause"], r["cause"] or
                                                "-"))
        for r in host["summary"]))
    out.write("%-7s %7s %7s" % ("OSD", "PID", "OPS") + "".join(
        " %12s" % c.upper() for c in cols) + "\n")
    for r in host["summary"]:
        out.write("%-7s %7d %7d" % (r["osd"], r["pid"], r["ops"]) + "".join(
            " %12s" % ("-" if r[c + "_p99_us"] is None else
                       "%.1f" % (r[c + "_p99_us"] / div)) for c in cols) +
            "\n")
    ov = host.get("overhead")
    out.write("(p99 in %s%s)\n" % (
        unit, "; host: estimated cost %.2f %% of the CPUs" %
        ov["estimated_pct"] if ov else ""))
    _explain(out, opts, "host")
    out.write("\n")
    out.flush()
