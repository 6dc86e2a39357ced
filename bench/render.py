"""bench/render.py - BENCHMARKS.md from the saved results: render_md puts
together the tracing modes' targets table (render_targets), the lean
tier's (render_lean_targets: the lean tier, the exporter's soak, the trap
against the floor part's), the why section (why.render_why), the
reader's targets (render_reader_targets), how it is measured (METHOD, DEFAULTS_WHY), the
releases side by side and each in full, the reader part's figures and
the osds part (sections.py), the exporter soak (soak_render.render_soak),
the floor, the client recorder, the merged reader and the toggled
windows (their parts' modules). Text only: it reads results dicts and
bench/results/ and measures nothing; run.py also prints the sections of
the parts it ran."""
from labkit import _met, _release, _sp
from sections import render_reader, render_osds, render_release
from summary import cost_parts, load_results
from targets import reader_rows, lean_rows, target_rows
from why import render_why


METHOD = (
    "Every figure comes from interleaved pairs: an untraced window and a "
    "traced one, the traced one first in every other pair (the lab's "
    "IOPS drift between windows; with the untraced window always first a "
    "downward drift was charged to every mode), for each mode in turn "
    "(pair 1 of every mode, then pair 2, ...), after a warm-up run per "
    "workload. A window runs under a "
    "steady fio load: fio starts, the tracer is started on the busy OSD "
    "(as someone would), and once it says it is tracing and has settled, "
    "the window measures: the ceph-osd's CPU time (utime+stime, "
    "/proc/PID/stat) over the ops Ceph itself counted (op_r+op_w, admin "
    "socket) -- uprobe traps and their programs run in the OSD's threads, "
    "so traced minus untraced is the tracing's cost in the OSD; the "
    "host's CPU time (all CPUs, /proc/stat, everything but idle and "
    "iowait) per op, where the scheduler, futex and block programs also "
    "show; the tracer's own CPU per op; IOPS from Ceph's op count over "
    "the window; p99 latency from fio over its whole run. \"other\" = "
    "host added - OSD added - fio client added - tracer: the BPF "
    "programs run in other tasks' context (scheduler, futex, block), "
    "plus whatever else moves with the IOPS (the mon and mgr, per-op "
    "batching). Uprobe hits "
    "per op come from osdstage's own hit counters (names from "
    "build/osdstage.abi.json) over its whole run; the BPF statistics "
    "come from one more window per mode with kernel.bpf_stats_enabled, "
    "read from the tracer's own program descriptors (the bpftrace "
    "reference's uprobe runs too). The by mode is the default mode with "
    "`--by client`: every op handed over at its end (a ring record) and "
    "broken down by the tracer each report. The stacks and oncpu modes "
    "are the record mode with `--stacks 1000` (the stacks of a target "
    "thread's waits of 1 ms or more in an op or for a lock) and with "
    "`--on-cpu 99` (on-CPU samples of its threads at 99 Hz a CPU). "
    "The optracker mode runs no "
    "tracer: "
    "its base window has Ceph's own OpTracker off "
    "(osd_enable_op_tracker false, set at run time), its other window on "
    "(Ceph's default, which every other mode's windows keep): what the "
    "OpTracker operators already run costs. `--max-overhead 2` promises that "
    "hits x cost stays under 2 % of all CPUs' time (duty.py, OVERHEAD in "
    "osdstage(8)), so its measured cost is the added host CPU per op "
    "times the traced IOPS over all CPUs' time (tracer included); its "
    "window opens after the first full-rate second and spans two duty "
    "periods. Every figure is the median over the pairs, with min-max in "
    "brackets.")


DEFAULTS_WHY = (
    "Defaults (Makefile BENCH_PAIRS=4, BENCH_SECS=8): 4 pairs of 8-s "
    "windows (bounded: 20 s, two duty periods) for each mode and both "
    "workloads, about 38 minutes for the main part and 44 with the osds "
    "part: the most pairs that fit a 30-40 minute `make bench` on this "
    "2-core machine. The spread comes from the machine, not the window: "
    "inside a window the CPU per op is exact to well under 1 us (10-ms "
    "ticks over 10^4-10^5 ops), but the untraced OSD's own CPU per op "
    "swings with its IOPS from run to run (the OSD untraced column; "
    "anything else on the 2 cores moves it), and a traced run at a lower "
    "rate pays more per op for the same work (less batching). Untraced "
    "and traced side by side cancel slow drift, and more pairs narrow "
    "the median where longer windows do not; with 4 pairs the spread "
    "shown is min-max (an IQR would be the middle two).")


def render_targets(results, osds_results):
    lines = ["## Targets: the tracing modes", "",
             "From the last run of each release (medians, min-max over the "
             "pairs in brackets; Pacific's 1-OSD run is the reference). A "
             "target is met when the median is. Missed targets stay here "
             "until a run meets them.", "",
             "| measure | measured | target | |", "|---|---|---|---|"]
    return lines + _rows(target_rows(results, osds_results))


def render_lean_targets(results, soak, floor_res):
    """The lean tier's, the exporter's and the trap's targets, each from
    its part's last run: Pacific's toggle part (else its main part), the
    exporter's soak and the floor."""
    lines = ["## Targets: the lean tier, the exporter and the trap", "",
             "The lean tier and the default mode from Pacific's toggle "
             "part where it has run (below, \"Attached and detached every "
             "few seconds\": mean +- standard error over its pairs; met "
             "when the mean is two standard errors inside the target, not "
             "met when two outside), else its main part (medians, min-max "
             "over the pairs; met when the median is), the exporter from "
             "its soak (%s; its cost from its parts: every pair), the "
             "trap against the floor part's (%s)." % (
                 "commit %s, %s" % (soak.get("commit"), soak.get("date"))
                 if soak else "not run",
                 floor_res.get("date", "?") if floor_res else "not run"), "",
             "| measure | measured | target | |", "|---|---|---|---|"]
    return lines + _rows(lean_rows(results, soak, floor_res))


def render_reader_targets(results):
    res = next((r for r in results if r.get("reader")), None)
    lines = ["## Targets: reading and recording captures", "",
             "From the reader part's last run (`make bench BENCH=reader`"
             "%s): the reader on a "
             "capture of the controlled program (tests/bpf/progs/shardq.cc) "
             "made by the bench, the recorder alone driven by "
             "tests/bpf/ringgen.py; no Ceph lab needed (the last row is the "
             "main part's record mode on the lab). Details below, under "
             "\"Reading a large capture\"." % (
                 ", %s, tools at %s" % (res["reader"]["date"],
                                         res["reader"]["commit"])
                 if res and res["reader"].get("commit") else ""), "",
             "| measure | measured | target | |", "|---|---|---|---|"]
    return lines + _rows(reader_rows(results))


def _rows(rows):
    """A targets table's rows: (measure, measured, target, met)."""
    return ["| %s | %s | %s | %s |" % (measure, got, target, _met(met))
            for measure, got, target, met in rows] + [""]


def render_md(results, osds_results=None):
    """BENCHMARKS.md: the targets, the releases side by side,
    then each in full, then the osds part of every release that has
    one."""
    if osds_results is None:
        osds_results = load_results(".osds")
    # a results file may hold only the reader part's figures (--part
    # reader before any main run)
    readers = [r for r in results if r.get("reader")]
    results = [r for r in results if "modes" in r]
    lines = ["# Benchmarks", "",
             "Generated by `make bench` (and `make bench CEPH=reef`, "
             "`CEPH=tentacle` for the container labs) from "
             "`bench/results/<release>.json` and, for the part that traces "
             "several OSDs (`make bench BENCH=osds` runs only that part), "
             "`bench/results/<release>.osds.json`; do not edit by hand.", ""]
    soaks = load_results(".exporter")
    soak = soaks[0] if soaks else None
    import floor
    floor_res = floor.load()
    lines += render_targets(results, osds_results)
    lines += render_lean_targets(results, soak, floor_res)
    lines += render_why(results, osds_results, soak, floor_res)
    lines += render_reader_targets(readers)
    lines += ["## How it is measured", "", METHOD, "", DEFAULTS_WHY, "",
              "## Releases side by side", "",
              "| release | Ceph | CET | runs | default randread IOPS ratio | "
              "default randread added OSD CPU per op | userspace randread "
              "IOPS ratio | uprobe hits per op | probe pair cost "
              "(calibrated) |", "|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        m, modes = res["machine"], res["modes"]
        d = modes["default"]["randread"]
        lines.append("| %s | %s | %s | %d x %d s | %.3f (%.3f-%.3f) | %s | "
                     "%.3f | %s | %s |" % (
                         _release(res), m["ceph"],
                         "yes" if m.get("cet") else "no", res["pairs"],
                         res["secs"], d["iops_ratio_median"],
                         d["iops_ratio_min"], d["iops_ratio_max"],
                         _sp(d.get("osd_added_us_per_op"), unit=" us")
                         if d.get("osd_added_us_per_op") else
                         "not measured",
                         modes["userspace"]["randread"]["iops_ratio_median"],
                         "%.2f" % res["hits_per_op"]
                         if res.get("hits_per_op") is not None else "-",
                         "%.2f us" % res["call_bias_us"]
                         if res.get("call_bias_us") is not None else "-"))
    lines += ["", "The probe pair cost is what a uprobe + uretprobe pair "
              "adds to a call, measured at start-up on a function of the "
              "target's flavour (with endbr64 on CET builds, probed after "
              "it). Releases whose last run predates the per-op CPU "
              "measure show only IOPS figures.", ""]
    for res in results:
        lines += render_release(res).splitlines()[2:] + [""]
    for res in readers[:1]:
        lines += render_reader(res)
    for res in osds_results:
        lines += render_osds(res).splitlines() + [""]
    if soak:
        import soak_render
        lines += soak_render.render_soak(soak)
    traps = {}
    for res in results:
        c = cost_parts(res)
        if c:
            traps["%s (%s part)" % (_release(res), "toggle" if c["toggled"]
                                    else "main")] = c["per_hit"]
    lines += floor.render_section(traps)
    import toggle
    lines += toggle.render_section(results)
    import client_cost
    lines += client_cost.render_section()
    import merged_reader
    lines += merged_reader.render_section()
    return "\n".join(lines).rstrip("\n") + "\n"
