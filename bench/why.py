"""bench/why.py - why each missed target is missed: the
default mode's cost per read taken apart with each run's own figures (the
table), one paragraph per missed target from those figures
(WHY: a target's row prefix and the function that says why), and what
the tracer does about it, with the alternatives (TRIED). Reads results dicts only; targets.py judges the
rows."""
from labkit import _range, _release, _sp
from summary import _get, cost_parts, toggled_pairs
from targets import (
    BOUND_PCT, TARGETS, floor_ns, lean_rows, target_rows)


# What the bench cannot measure itself: what the tracer does against each
# missed target, and the alternatives measured or left (kept with the code
# that renders the figures).
TRIED = [
    ("uprobe hits per read", "11 -> 6: do_op ends at the return of the "
     "enclosing dequeue_op (no return probe of its own); dequeue_op starts "
     "in op_dequeue's program (no stage_entry on it); do_op and "
     "get_object_context are opt-in (`-S all`)"),
    ("BPF programs", "ops, block requests and the request-id index moved "
     "from hash maps to direct-mapped 4-way arrays (a hash insert or "
     "delete costs ~0.8 us here); shard and device statistics per CPU, no "
     "atomics; block requests read through BTF and filtered to the "
     "targets' devices; uprobe arguments read straight from the context; "
     "scheduler hits counted after the target filter; futex waits taken "
     "from the scheduler programs (a task's saved registers) instead of "
     "syscall tracepoints, which put every task's syscalls on the tracing "
     "slow path"),
    ("attach/detach", "one uprobe_multi link per (program, target, "
     "direction): detaching 3 OSDs 4.6 s -> 0.4 s; the duty cycles' own "
     "CPU comes out of their budget, and the bound is held on a measured "
     "cost (the kernel's BPF run statistics) over the whole run"),
    ("the trap inside the OSD", "no probe wakes a task: ring events are "
     "sent without a wake-up (BPF_RB_NO_WAKEUP; the recorder's thread "
     "polls the ring); the CET builds are probed after their endbr64 (a "
     "single-stepped probe costs about 14 times an emulated one, the floor "
     "part); one uprobe_multi link per program (a little cheaper a hit than a "
     "classic link); our programs' time is taken out of the trap's "
     "figure (their run statistics). What is left is the kernel's trap "
     "path run cold in a worker that slept between ops (the floor part's "
     "hit after a sleep) and, in Pacific's glibc-malloc OSD, the mprotect "
     "calls that take the mmap lock for writing, which a trap's probe "
     "lookup can meet (docs/ceph.md, \"The binary\")"),
    ("measured and left out", "computing the thread id once in op_dequeue "
     "(its first dequeue of a followed op asks for it twice): 1,043-1,155 "
     "ns a run against 998-1,076 without, in four runs each (BPF run "
     "statistics under 16 concurrent reads): no gain, left out"),
    ("not done", "moving the queue-wait attribution out of op_dequeue "
     "into user space (a per-CPU event the reader attributes: ~0.7 us "
     "less in the OSD per op, at the price of an event per op); fewer "
     "default stages (bluestore_read opt-in would save 2 hits, ~3 us, "
     "and lose the disk-vs-queue split operators ask for first)"),
]


def _cet_why(pac, rows):
    """The other releases' uprobe side against Pacific's (pac): the
    userspace mode's added OSD CPU per op (no kernel programs); rows are
    [(release's results, its cost_parts)]."""
    other = [(_release(r), c) for r, c in rows if _release(r) != "pacific"]
    if not pac or not other:
        return ""
    return (" The uprobe side alone (userspace mode, no kernel programs) "
            "added %s against Pacific's %.1f us per op: the CET builds "
            "are probed after their endbr64, so their traps cost what "
            "Pacific's do." % (
                ", ".join("%s %.1f us" % (rel, c["userspace_added"])
                          for rel, c in other), pac["userspace_added"]))


def _lab3_why(osds_results):
    """The osds part's answer to "does tracing 3 OSDs cost more per op":
    osd.0 traced alone on the 3-OSD lab against each OSD with all three
    traced (reads)."""
    osds = next((r for r in osds_results if _release(r) == "pacific"), None)
    one = _get(osds, "workloads", "randread", "one", "per_osd") or []
    per = _get(osds, "workloads", "randread", "all", "per_osd") or []
    alone = next((p["added_us_per_op"] for p in one if p["osd"] == 0), None)
    if not alone or not per:
        return ""
    return (" The 3-OSD lab itself costs more per op: there osd.0 traced "
            "alone added %s per read, all three traced %s (the osds "
            "part, same lab): the lab's per-op cost (3 OSDs' threads "
            "switching on 2 cores, over each OSD's share of the ops), not "
            "the number of OSDs traced." % (
                _sp(alone, unit=" us"),
                ", ".join("osd.%d %.1f us" % (p["osd"],
                                              p["added_us_per_op"]["median"])
                          for p in per)))


def render_why(results, osds_results, soak=None, floor_res=None):
    """BENCHMARKS.md's "Where the cost per read goes": the table, then a
    paragraph per missed target (the tracing modes' rows and the lean
    tier's), then TRIED.
    `soak`, `floor_res`: the exporter and floor parts' results."""
    rows = [(r, cost_parts(r)) for r in results]
    rows = [(r, c) for r, c in rows if c]
    if not rows:
        return []
    lines = _parts_table(rows)
    every_row = target_rows(results, osds_results) + \
        lean_rows(results, soak, floor_res)
    pac_res, pac = next(((r, c) for r, c in rows
                         if _release(r) == "pacific"), (None, None))
    rows_pac = pac
    pac, instead = _trap_floor(pac_res, pac, floor_res or {})
    ctx = {"pac": pac, "pac_res": pac_res, "rows": rows,
           "rows_pac": rows_pac,
           "osds_results": osds_results, "floor": floor_res or {},
           # where the paragraphs' trap per hit comes from
           "trap_from": "the floor's hit after a sleep, see above"
           if instead else "inside the busy OSD, the userspace mode's "
           "%s" % ("toggled pairs" if pac and pac.get("toggled") else
                   "pairs")}
    why = [instead] if instead else []
    for prefixes, say in WHY:
        # a target missed, or one its measure cannot tell (a str)
        if any(met is False or isinstance(met, str)
               for m, _, _, met in every_row
               if m.startswith(prefixes)):
            text = say(ctx)
            if text:
                why.append("- " + text)
    if why:
        lines += ["", "Per target missed (or not told apart):", ""] + why
    lines += ["", "What the tracer does about it, and the alternatives:",
              ""]
    lines += ["- %s: %s." % (k, v) for k, v in TRIED]
    return lines + [""]


def _trap_floor(pac_res, pac, floor_res):
    """Pacific's cost parts for the paragraphs, and a line saying so when
    its trap per hit (the pairs' userspace figure less its programs) is
    below what a trap costs the trivial target: that is the pairs' noise,
    and the paragraphs take the floor's hit after a sleep (an OSD worker
    waking for an op; else its tight loop's) instead."""
    kinds = floor_res.get("kinds") or {}
    floor = (kinds.get("slept") or kinds.get("push") or {}).get(
        "ns_per_hit")
    own = floor_ns(pac_res, floor_res)[1] if pac else None
    if not own or not floor or 1000 * pac["per_hit"] >= own:
        return pac, None
    per_hit = floor / 1000.0
    line = ("- (The pairs' own trap per hit, %.2f us, is below the floor "
            "itself: the pairs' noise. The paragraphs below take the "
            "floor's hit %s, %.2f us, instead.)" % (
                pac["per_hit"], "right after a 20-us sleep" if
                kinds.get("slept") else "in a tight loop", per_hit))
    return dict(pac, per_hit=per_hit, traps=per_hit * pac["hits"]), line


def _parts_table(rows):
    """The cost per read taken apart, a row per release: rows are
    [(release's results, its cost_parts)]."""
    lines = ["### Where the cost per read goes (why targets are missed)", "",
             "The default mode's added OSD CPU per 4 KiB read, taken apart "
             "with each run's own figures: its uprobe programs and its "
             "scheduler and block programs (BPF run statistics: runs per "
             "op x ns per run); the uprobe traps are what is left of the "
             "userspace mode's added OSD CPU once its programs are taken "
             "out (that mode runs no kernel programs), per hit over its "
             "uprobe hits per op. The kernel programs run partly in the "
             "OSD's threads (a switch-out, a wake-up by an OSD thread) and "
             "partly elsewhere.", "",
             "| release | pairs | OSD added, default | uprobe traps | "
             "uprobe programs | scheduler + block programs | trap per hit "
             "| OSD added, userspace | probe pair cost (calibrated) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r, c in rows:
        pairs = toggled_pairs(r) if c["toggled"] else \
            "%d x %d s" % (r["pairs"], r["secs"])
        lines.append("| %s | %s | %.1f us | %.1f us (%.2f hits) | "
                     "%.1f us | %.1f us | %.2f us | %.1f us | %s |" % (
                         _release(r), pairs, c["osd_added"],
                         c["traps"], c["hits"], c["uprobe_progs"],
                         c["kernel_progs"], c["per_hit"],
                         c["userspace_added"],
                         "%.2f us" % r["call_bias_us"]
                         if r.get("call_bias_us") is not None else "-"))
    return lines + [
        "", "A release with the toggle part's figures (pairs \"toggled\": "
        "below, \"Attached and detached every few seconds\") has its "
        "added CPU, the userspace mode's programs and hits from there: "
        "means over many short pairs. The others' are medians over few "
        "pairs, each of which spreads by several us (the release "
        "sections): a trap per hit below half the calibrated uprobe + "
        "uretprobe pair is the pairs' noise, not a cheaper trap."]


def _push_ns(ctx):
    return _get(ctx["floor"], "kinds", "push", "ns_per_hit")


def _why_default(ctx):
    pac, t, push = ctx["pac"], TARGETS, _push_ns(ctx)
    if not pac:
        return None
    most = min(t["default_added_us_per_read"],
               t["default_added_us_per_read_lean"])
    return (
        "**added OSD CPU per read <= %g us, and the tighter <= %g us**: "
        "the %.2f uprobe hits cost %.1f us in traps alone "
        "(%.2f us each, %s, against %s for an emulated "
        "`push` in a tight loop: the floor part); their programs add "
        "%.1f us and the scheduler and block programs up to %.1f us. "
        "With every program free the traps would still be %.0f %% of "
        "the %g us budget." % (
            t["default_added_us_per_read"],
            t["default_added_us_per_read_lean"], pac["hits"], pac["traps"],
            pac["per_hit"], ctx["trap_from"],
            "%.2f us" % (push / 1000) if push else
            "~0.9 us", pac["uprobe_progs"], pac["kernel_progs"],
            100 * pac["traps"] / most, most))


def _why_trap(ctx):
    pac, push = ctx["pac"], _push_ns(ctx)
    if not (pac and push):
        return None
    slept = _get(ctx["floor"], "kinds", "slept", "ns_per_hit")
    return (
        "**a trap inside the OSD within %gx the floor**: the floor's "
        "program only returns and the same probe hit right after a "
        "20-us sleep costs %.0f ns (%.2fx the tight loop's %.0f ns), "
        "the OSD's %.0f ns %s. Our programs are not in the trap's "
        "figure (they are taken out: the uprobe programs' run "
        "statistics); what is left is the kernel's trap path (the "
        "exception, the uprobe's lookup, the program's dispatch) "
        "running cold in a worker that slept between ops on 2 cores "
        "shared with fio, the messenger and BlueStore." % (
            TARGETS["trap_vs_floor"], slept or 0, (slept or 0) / push, push,
            1000 * pac["per_hit"],
            "is %.2fx the slept figure" % (1000 * pac["per_hit"] / slept)
            if slept else "is what a worker pays"))


def _why_userspace(ctx):
    pac, most = ctx["pac"], TARGETS["userspace_added_us_per_op"]
    if not pac:
        return None
    return (
        "**userspace mode <= %.0f us per op**: below the traps' own "
        "%.1f us for the %.2f hits a read needs for its default stages; "
        "reaching it takes at most %d hits per op at this trap cost." % (
            most, pac["traps"], pac["hits"], int(most // pac["per_hit"])))


def _why_iops(ctx):
    pac, least = ctx["pac"], TARGETS["default"]
    if not (pac and pac["host_untraced"] and pac["host_added"] is not None
            and pac["iops_ratio"]):
        return None
    base, added = pac["host_untraced"], pac["host_added"]
    return (
        "**IOPS ratio >= %.2f at full rate**: the lab is CPU-bound "
        "(2 cores), so IOPS follow the host's CPU per op: %.0f us "
        "untraced plus %.1f us added gives %.3f (measured %.3f); %.2f "
        "needs at most %.1f us added per op on the whole host." % (
            least, base, added, base / (base + added), pac["iops_ratio"],
            least, base * (1 / least - 1)))


def _why_lean(ctx):
    pac, t = ctx["pac"], TARGETS
    lean = _get(ctx["pac_res"], "bpf_stats", "lean")
    if not (pac and lean):
        return None
    prog = sum(p["avg_ns"] * p["runs_per_op"]
               for p in (lean.get("programs") or {}).values()
               if p.get("runs")) / 1000.0
    spread = _get(ctx["pac_res"], "modes", "lean", "randread",
                  "osd_added_us_per_op") or {}
    trap = lean["uprobe_runs_per_op"] * pac["per_hit"]
    est, most = trap + prog, t["lean_added_us_per_read"]
    if est > most:
        judged = "over the target%s (the trap's floor is the way " \
            "down)" % (", the trap alone" if trap > most else "")
    else:
        judged = "within the target"
    text = (
        "**lean tier <= %.1f us per read, IOPS ratio >= %.2f**: its "
        "%.2f uprobe hits per op cost %.2f us in a trap each (%s) and "
        "%.2f us in its one program: about %.1f us, %s." % (
            most, t["lean"], lean["uprobe_runs_per_op"], pac["per_hit"],
            ctx["trap_from"], prog, est, judged))
    tog = _get(ctx["pac_res"], "toggled", "modes", "lean")
    if not tog:
        return text + (
            " The pairs' own figure (%s us) is the untraced OSD's CPU per "
            "op swinging between windows, not the tier's cost." %
            _range(spread.get("min", 0), spread.get("max", 0)))
    a, w = tog["added_us"], tog["workers_added_us"]
    m = tog.get("msgr_added_us")
    return text + (
        " Measured with it attached and detached every %g s: %.2f +- "
        "%.2f us per read, of it %.2f +- %.2f us in the shard workers, "
        "where its trap and its program run; %s" % (
            ctx["pac_res"]["toggled"]["secs"], a["mean"], a["sem"] or 0,
            w["mean"], w["sem"] or 0,
            "the messenger's threads, where none of its probes fires, "
            "%.2f +- %.2f us more per read at %.3f of the untraced IOPS "
            "(the same work at a lower rate, with less of it batched: "
            "the likely reason, not taken apart further)." % (
                m["mean"], m["sem"] or 0, tog["iops_ratio"]["mean"])
            if m else "the other %.1f us are in the OSD's other threads, "
            "where none of its probes fires." % (a["mean"] - w["mean"])))


def _why_slowest(ctx):
    return (
        "**slowest program <= 200 ns**: op_dequeue does the queue-wait "
        "attribution (the worker's state ring, four histograms, the "
        "shard's statistics) in the probe; a trivial uprobe program "
        "measured 220-250 ns per run on this VM under the kernel's run "
        "statistics, so 200 ns is at the floor of what a uprobe program "
        "can show here.")


def _why_bounded(ctx):
    b = _get(ctx["pac_res"], "modes", "bounded", "randread") or {}
    est, cost = b.get("estimated_pct"), b.get("cost_pct")
    if not (est and cost):
        return None
    spread = cost["max"] - cost["min"]
    client = b.get("client_added_us_per_op")
    return (
        "**`--max-overhead 2`**: its own estimate (its hits at their "
        "calibrated cost and its programs' runs) said %s %%, the pairs "
        "measured %s %% of all CPUs (IOPS ratio %.3f). %s%s" % (
            _sp(est, "%.2f"), _sp(cost, "%.2f"),
            b.get("iops_ratio_median") or 0,
            "A whole-host difference of 2 %% is inside the pairs' spread "
            "(%.1f points), which comes from the untraced OSD's own CPU "
            "per op swinging between windows." % spread
            if spread > 2 * BOUND_PCT else
            "The pairs agree: the estimate leaves out a cost of the "
            "traced windows that this run does not take apart.",
            " The fio client, which is not traced, took %.1f us more CPU "
            "per op in the same windows: the host as a whole ran slower "
            "then, not only the OSD." % client["median"]
            if client and client["median"] > 2 else ""))


def _why_releases(ctx):
    spread = _get(ctx["pac_res"], "modes", "default", "randread",
                  "osd_added_us_per_op")
    return (
        "**other releases and 3 OSDs within 20 % of Pacific**:" +
        (" Pacific's own 1-OSD pairs ranged %s us around its median of "
         "%.1f us, so medians of 2-4 pairs are not held to a 20 %% band "
         "by the pairs alone." % (
             _range(spread["min"], spread["max"]), spread["median"])
         if spread else "") +
        ("" if ctx["pac"] is not ctx["rows_pac"] else
         _cet_why(ctx["pac"], ctx["rows"])) + _lab3_why(ctx["osds_results"]))


# (the prefixes of the target rows it answers for, what says why), in
# the order BENCHMARKS.md gives them
WHY = [
    (("default mode, added OSD CPU",), _why_default),
    (("trap cost per uprobe hit",), _why_trap),
    (("user-space stages only",), _why_userspace),
    (("default mode, IOPS ratio",), _why_iops),
    (("lean tier",), _why_lean),
    (("slowest BPF program",), _why_slowest),
    (("`--max-overhead 2`, measured cost",), _why_bounded),
    (("Reef", "Tentacle", "3 OSDs"), _why_releases),
]
