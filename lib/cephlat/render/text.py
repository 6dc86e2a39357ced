"""Text rendering of a run's head (print_header), of the slowest ops of
a capture window and an op's listing, and of the OSD list; the reports
themselves, an Interval each, are render/interval_text.py's."""
import textwrap
import time

from ..model import costs, report


NBSP = "\u00a0"


def wrap(out, text, indent="  "):
    """`text` filled to 78 columns; a no-break space (NBSP) keeps a
    figure with its unit ("4 KiB") on one line and prints as a space."""
    out.write(textwrap.fill(text, 78, subsequent_indent=indent,
                            break_on_hyphens=False).replace(NBSP, " ") +
              "\n")


def _clock(ts, secs):
    """Wall time `ts` as HH:MM:SS, with the decimals a span of `secs`
    needs."""
    secs = round(secs, 6)
    dec = 0 if secs >= 10 else 1 if secs >= 1 else 2 if secs >= 0.1 else 3
    s = time.strftime("%H:%M:%S", time.localtime(ts))
    return s + ("%.*f" % (dec, ts % 1))[1:] if dec else s


def span(t0, t1):
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
    wrap(out, who + (": " + each if several else ""))
    mode = "mode: " + costs.MODE_WORDS.get(hdr.get("mode"), hdr.get("mode"))
    cost = costs.per_op(hdr.get("mode"))
    mode += ": " + cost if cost else ": its cost per op is not benchmarked"
    if cost and (hdr.get("capture") or hdr.get("writing")):
        mode += "; recording adds to it"
    if hdr.get("bound_pct"):
        mode += "; attached part of the time, to cost under %g %% of the " \
                "CPUs" % hdr["bound_pct"]
    wrap(out, mode)
    if hdr.get("capture"):
        src = "capture %s" % hdr["capture"]
        if hdr.get("window"):
            src += ", window %s" % span(*hdr["window"])
            if hdr.get("filters"):
                src += "; only %s" % ", ".join(hdr["filters"])
        elif hdr.get("span"):
            n = hdr.get("reports", 0)
            src += ": %s, %d report%s" % (span(*hdr["span"]), n,
                                          "" if n == 1 else "s")
    else:
        src = "live: %s" % hdr.get("reports_words", "")
        if hdr.get("writing"):
            src += "; recording to %s" % hdr["writing"]
    wrap(out, src)
    if hdr.get("otlp"):
        wrap(out, "OTLP traces: " + hdr["otlp"], "  ")
    if not opts.explain:
        out.write("(--explain: a line under each table says what it "
                  "shows)\n")
    out.write("\n")
    out.flush()


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
        _waits(out, r)
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


def _waits(out, r):
    """Where its worker slept while it ran it (-w --stacks): innermost
    frame first, and who woke it."""
    for w in r.get("waits", ()):
        who = report.UNSEEN_WAKER if w.get("unseen") else "%s (%d)" % (
            w["waker"], w["waker_tid"]) if w["waker_tid"] else \
            "outside the OSD"
        _op_line(out, "   +%s asleep %s us (%s) in %s%s; woken by %s%s" % (
            w["at_us"], w["us"], w["kind"], " < ".join(w["frames"]) or "?",
            " (unwind: %s)" % w["unwind"] if w.get("unwind") else "", who,
            ": " + " < ".join(w["waker_frames"]) if w["waker_frames"]
            else ""))


def print_stacks(out, opts, st):
    """A capture's stacks summed (cli/windows.py: the window record's
    "stacks"): where the threads waited, what they ran."""
    div, unit = (1000.0, "ms") if opts.milliseconds else (1.0, "us")
    if st.get("waits") is not None:
        out.write("\nWHERE THREADS WAITED (waits recorded with their "
                  "stacks; innermost frame first)\n")
        if not st["waits"]:
            out.write("no wait of the threshold in the window\n")
        for w in st["waits"]:
            _op_line(out, "%s %s: %.1f %s asleep in %d wait%s, in %s%s; "
                     "woken by %s%s" % (
                         w["role"] or "?", w["kind"] or "?",
                         w["us"] / div, unit, w["waits"],
                         "" if w["waits"] == 1 else "s",
                         " < ".join(w["where"]) or "?",
                         " (%s)" % w["lock"] if w.get("lock") else "",
                         " < ".join(w["woken_by"]) or
                         (report.UNSEEN_WAKER if w["waker_is_osd"] is None else "?"),
                         " (outside the OSD)" if w["waker_is_osd"] is False
                         else ""))
    if st.get("on_cpu") is not None:
        out.write("\nWHAT THREADS RAN (sampled on their CPUs%s)\n" % (
            ", %d a second" % st["oncpu_hz"] if st.get("oncpu_hz") else ""))
        if not st["on_cpu"]:
            out.write("no sample of the OSD's threads in the window\n")
        for c in st["on_cpu"]:
            _op_line(out, "%s: %.0f %% of its samples in %s%s (%d)" % (
                c["role"] or "?", c["role_pct"], c["function"],
                ", from " + c["from"] if c["from"] else "", c["samples"]))
    out.flush()


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
