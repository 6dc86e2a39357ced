"""Text rendering of reports (bcc-style histograms and tables), of the
slowest ops of a capture window, and of the OSD list."""
import textwrap
import time

from ..model import costs, report, sched as schedmod, verdict
from ..model.hist import render_log2
from ..model.schema import json_line
from .otlp import summary_words


def _row(out, fmt, div, name, s):
    out.write(fmt % (name, s["count"], s["mean_us"] / div, s["p50_us"] / div,
                     s["p90_us"] / div, s["p99_us"] / div, s["max_us"] / div))


def _wrap(out, text, indent="  "):
    out.write(textwrap.fill(text, 78, subsequent_indent=indent,
                            break_on_hyphens=False) + "\n")


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
    "classes": "(ops by the scheduler's class; HELD: the share of their "
               "wait it held them)",
    "histograms": "(histograms: each stage's events per power-of-two "
                  "latency bucket)",
    "host": "(causes: each OSD's verdict; its p99 of each stage; OPS: "
            "op_total's count)",
}


def _explain(out, opts, table):
    if opts.explain:
        _wrap(out, EXPLAIN[table], " ")


def _clock(ts, secs):
    """Wall time `ts` as HH:MM:SS, with the decimals a span of `secs`
    needs."""
    secs = round(secs, 6)
    dec = 0 if secs >= 10 else 1 if secs >= 1 else 2 if secs >= 0.1 else 3
    s = time.strftime("%H:%M:%S", time.localtime(ts))
    return s + ("%.*f" % (dec, ts % 1))[1:] if dec else s


def _span(t0, t1):
    """'HH:MM:SS to HH:MM:SS (N s)'"""
    secs = t1 - t0
    return "%s to %s (%s s)" % (_clock(t0, secs), _clock(t1, secs),
                                "%.3g" % secs)


def print_header(out, opts, hdr):
    """Once per run, before the reports (text only): what was traced
    (host, OSDs, pids, release), the mode and its cost per op as the
    bench measured it, and the source: live, or a capture and its span
    or window. hdr: cli/header.py's dict; a field it lacks is left
    out."""
    each = ", ".join("%s (pid %d)" % (n, p) if n else "pid %d" % p
                     for n, p in hdr["targets"])
    several = len(hdr["targets"]) > 1
    who = "%d OSDs" % len(hdr["targets"]) if several else each
    if hdr.get("host"):
        who += " on %s" % hdr["host"]
    if hdr.get("mode") == "probes":
        if hdr.get("release"):
            who += ", program %s" % hdr["release"]
    elif hdr.get("ceph_version"):
        who += ", Ceph %s" % hdr["ceph_version"] + (
            " (%s)" % hdr["release"] if hdr.get("release") else "")
    elif hdr.get("release"):
        who += ", Ceph %s" % hdr["release"]
    _wrap(out, who + (": " + each if several else ""))
    mode = "mode: " + costs.MODE_WORDS.get(hdr.get("mode"), hdr.get("mode"))
    cost = costs.per_op(hdr.get("mode"))
    mode += ": " + cost if cost else ": its cost per op is not benchmarked"
    if cost and (hdr.get("capture") or hdr.get("writing")):
        mode += "; recording adds to it"
    if hdr.get("bound_pct"):
        mode += "; attached part of the time, to cost under %g %% of the " \
                "CPUs" % hdr["bound_pct"]
    _wrap(out, mode)
    if hdr.get("capture"):
        src = "capture %s" % hdr["capture"]
        if hdr.get("window"):
            src += ", window %s" % _span(*hdr["window"])
            if hdr.get("filters"):
                src += "; only %s" % ", ".join(hdr["filters"])
        elif hdr.get("span"):
            n = hdr.get("reports", 0)
            src += ": %s, %d report%s" % (_span(*hdr["span"]), n,
                                          "" if n == 1 else "s")
    else:
        src = "live: %s" % hdr.get("reports_words", "")
        if hdr.get("writing"):
            src += "; recording to %s" % hdr["writing"]
    _wrap(out, src)
    if hdr.get("otlp"):
        _wrap(out, "OTLP traces: " + hdr["otlp"], "  ")
    if not opts.explain:
        out.write("(--explain: a line under each table says what it "
                  "shows)\n")
    out.write("\n")
    out.flush()


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
        head = _span(t1 - rec["interval_s"], t1) + (": " + what if what
                                                     else "")
    else:
        head = what or ""
    if head:
        _wrap(out, head)


def _otlp(out, rec):
    """A live run's --otlp: the ops chosen as traces since the start and
    what became of them (the last report's: the run's, final)."""
    if rec.get("otlp"):
        _wrap(out, "OTLP traces since the start: " +
              summary_words(rec["otlp"]), "    ")


def print_text(out, opts, rec, hists, title=None):
    """One report as text, top down: its interval (or `title`), the
    verdict with what it rests on (losses included), the summary table,
    the queue-wait attribution and shards, the thread roles, the
    scheduler classes, the slowest ops (a window's, --slowest), then the
    histograms; --brief: the verdict and the summary table. An interval
    without ops is one line. opts: render/options.py's TextOptions."""
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
        _wrap(out, line, "    ")
    _summary_table(out, opts, rec)
    if not opts.brief:
        if rec.get("attribution"):
            _attribution(out, opts, rec)
        if rec.get("threads"):
            _thread_roles(out, opts, rec["threads"])
        _queue_classes(out, opts, rec, 1000.0 if opts.milliseconds else 1.0)
    if rec.get("slowest"):
        print_slowest(out, rec["slowest"])
    if not opts.brief:
        _histograms(out, opts, rec, hists, unit, unit_us)
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
        _wrap(out, "lost: " + line, "    ")


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


def print_slowest(out, rows):
    out.write("\nSLOWEST OPS (times in us from the enqueue)\n")
    _print_ops(out, rows)


def print_op(out, row):
    """One op's listing (slowest.op_row's dict), unnumbered: a row of an
    op's story (render/e2e.py)."""
    _print_ops(out, [row], numbered=False)


def _op_title(r):
    """op ADDR [reqid pg object] class-or-kind: how long, queue_wait"""
    who = " %s pg %s" % (r["reqid"], r["pg"]) if r.get("reqid") else ""
    if r.get("object"):
        who += " " + r["object"]
    what = r["class"] or r.get("kind")
    if r.get("queue_class") and r["queue_class"] != "client":
        what = "%s (scheduler class %s)" % (what or "op", r["queue_class"])
    if r["total_us"] is not None:
        took = "%s us in all" % r["total_us"]
    elif r.get("repop_us") is not None:
        took = "%s us to its commit reply" % r["repop_us"]
    else:
        took = "completion not probed"
    return "op %s%s%s: %s, queue_wait %s us%s" % (
        r["op"], who, " " + what if what else "", took,
        r.get("queue_wait_us", "?"),
        " (partial: %s)" % r["partial"] if r.get("partial") else "")


def _running_parts(w):
    """An op whose worker was not woken for it: what the worker did
    while the op waited (busy always; lock, blocked and run queue when
    some)."""
    parts = ["worker busy %s us" % w["busy_us"]]
    parts += ["%s %s us" % (name, w[key]) for name, key in
              (("waiting for a lock", "lock_us"), ("blocked", "blocked_us"),
               ("run queue", "runq_us"))
              if w.get(key)]
    return ", ".join(parts)


def _op_line(out, text):
    """One line of an op's listing ("   +at what"), wrapped at 78 columns
    under its text."""
    out.write(textwrap.fill(text, 78, subsequent_indent="       ",
                            break_on_hyphens=False) + "\n")


def _print_ops(out, rows, numbered=True):
    for i, r in enumerate(rows, 1):
        out.write(textwrap.fill("%s%s" % ("%d. " % i if numbered else "",
                                          _op_title(r)), 78,
                                subsequent_indent="   ",
                                break_on_hyphens=False) + "\n")
        out.write("   enqueued %s by %s (%d)\n" % (
            time.strftime("%H:%M:%S", time.localtime(r["enqueue"]["ts"])) +
            ("%.6f" % (r["enqueue"]["ts"] % 1))[1:],
            r["enqueue"]["thread"], r["enqueue"]["tid"]))
        if "dequeue" in r:
            w = r["woken"]
            how = ("how it was woken is unknown (no kernel stages)"
                   if w["by"] is None else
                   "was running (%s)" % _running_parts(w)
                   if w["by"] == "none" else
                   "woken by %s%s: signal %s us, run queue %s us, pickup %s "
                   "us" % (report.WAKER_WORDS.get(
                       w["by"], (w["by"], w["by"]))[1],
                           " %s (%d)" % (w["waker"], w["waker_tid"])
                           if w["waker_tid"] and w["by"] != "timeout" else "",
                           w["signal_us"], w["runq_us"], w["pickup_us"]))
            if w.get("held_us"):
                how = "held by the op scheduler %s us; %s" % (w["held_us"],
                                                              how)
            _op_line(out, "   +%s dequeued by %s (%d); %s" % (
                r["dequeue"]["at_us"], r["dequeue"]["thread"],
                r["dequeue"]["tid"], how))
        _stages_and_gaps(out, r)
        _replication(out, r)
        if "done_us" in r:
            out.write("   +%s done\n" % r["done_us"])
    out.flush()


def _stages_and_gaps(out, r):
    """An op's stages and, in time order among them, the gaps no stage
    covers (model/slowest.py: op_gaps); the probes' own, a few us each,
    summed in one line."""
    lines = [(st["start_us"], "%s" % st["stage"], st["end_us"])
             for st in r["stages"]]
    small = [g for g in r.get("gaps", ()) if g["what"] == "probes"]
    lines += [(g["start_us"], g["words"], g["end_us"])
              for g in r.get("gaps", ()) if g["what"] != "probes"]
    for a, words, b in sorted(lines, key=lambda x: x[0]):
        _op_line(out, "   %+.1f..%+.1f %s" % (a, b, words))
    if small:
        out.write("   (%.1f us in %d gap%s between stages: the probes' own "
                  "cost)\n" % (sum(g["us"] for g in small), len(small),
                               "" if len(small) == 1 else "s"))


def _replication(out, r):
    """A replicated write's replies and own commit, a replica op's end."""
    for rp in r.get("replies", ()):
        _op_line(out, "   +%s %s replied (waited %s us since the sub-ops "
                 "went out)" % (rp["at_us"], rp["peer"], rp["wait_us"]))
    for rp in r.get("shard_reads", ()):
        _op_line(out, "   +%s %s's shard read (waited %s us since the "
                 "sub-reads went out)" % (rp["at_us"], rp["peer"],
                                           rp["wait_us"]))
    if r.get("local_commit_us") is not None:
        out.write("   +%s own commit\n" % r["local_commit_us"])
    if r.get("repop_us") is not None:
        out.write("   +%s committed, reply sent (repop)\n" % r["repop_us"])


def emit(out, opts, recs, host=None):
    """One report, live or read back: the host object when several OSDs
    were traced (host_record), else the one OSD's interval object; as
    JSON (opts.json) or text. recs: (interval object, histograms) per
    OSD."""
    if opts.json:
        out.write(json_line(host if host is not None else recs[0][0]))
        out.flush()
    elif host is not None:
        print_host(out, opts, host, recs)
    else:
        print_text(out, opts, *recs[0])


def print_host(out, opts, host, recs):
    """A report on several OSDs: its interval, the host summary (each
    OSD's cause and p99s), then each OSD's report (top down, as one
    OSD's). recs: (interval object, histograms) per OSD, in host["osds"]
    order."""
    ops = sum(r["ops"] for r in host["summary"])
    _head(out, host, None, "%d OSDs, %d op%s" % (
        len(host["osds"]), ops, "" if ops == 1 else "s"))
    _otlp(out, host)
    print_host_summary(out, opts, host)
    for name, (rec, hists) in zip(host["osds"], recs):
        print_text(out, opts, rec, hists, title="%s %s (pid %d) %s" % (
            "=" * 10, name, rec["pid"], "=" * 10))
    out.flush()


def print_host_summary(out, opts, host):
    """The host summary of a report on several OSDs: each OSD's cause,
    then one row of p99s per OSD."""
    div, unit = (1000.0, "ms") if opts.milliseconds else (1.0, "us")
    cols = [st for st in report.SUMMARY_STAGES
            if any(r[st + "_p99_us"] is not None for r in host["summary"])]
    out.write("\nHOST SUMMARY (%d OSDs)\n" % len(host["summary"]))
    _wrap(out, "causes: " + "; ".join(
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


def _fn(demangled):
    """A function's name without its parameters."""
    return demangled.split("(", 1)[0]


def print_list(out, rows):
    """The OSD list (engine/inventory.py) as a table."""
    if not rows:
        out.write("no ceph-osd process is running\n")
        return
    out.write("%-6s %-8s %-10s %-9s %-7s %-4s %s\n" % (
        "OSD", "PID", "VERSION", "RELEASE", "TABLE", "CET", "STAGES"))
    for r in rows:
        ok = [s for s, v in r["stages"].items() if v == "ok"]
        stages = "all %d" % len(ok) if ok and len(ok) == len(r["stages"]) \
            else (",".join(ok) or "-")
        table = "-" if not r.get("probe_table") else r["probe_table"] + (
            "" if r["probe_table_exact"] else "*")
        cet = "-" if r.get("cet") is None else ("yes" if r["cet"] else "no")
        out.write("%-6s %-8d %-10s %-9s %-7s %-4s %s\n" % (
            r["osd"] or "?", r["pid"], r["ceph_version"] or "?",
            r["release"] or "?", table, cet, stages))
        for note in (r.get("notice"), r.get("error")):
            if note:
                out.write("       %s\n" % note)
        for s, v in r["stages"].items():
            if v != "ok":
                out.write("       %s: %s\n" % (s, v))
        for m in r.get("probes_moved", ()):
            out.write("       probe moved %d bytes in, to `%s`: %s (its "
                      "entry `%s` would single-step)\n" % (
                          m["offset"], m["at"], _fn(m["function"]),
                          m["entry"]))
        for m in r.get("probes_single_step", ()):
            out.write("       probe single-steps `%s`: %s (~10 times the "
                      "cost of a hit)\n" % (m["at"], _fn(m["function"])))
    if any(r.get("probe_table") and not r["probe_table_exact"]
           for r in rows):
        out.write("(* the newest probe table entry whose every function "
                  "resolves: the release is newer than the table)\n")
