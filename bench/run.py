#!/usr/bin/python3
# bench/run.py - what tracing costs the OSD, measured side by side (make bench).
#
# USAGE: bench/run.py [--part all|main|osds|reader|exporter|floor|client|
#                             merged|toggle]
#                     [--pairs N] [--toggle-pairs N] [--toggle-secs S]
#                     [--secs S] [--osds-pairs N] [--osds-secs S] [--smoke]
#                     [--out FILE] [--osds-out FILE] [--md FILE]
#                     [--soak-min M] [--soak-bound PCT]
#        bench/run.py --render-only [--md FILE]
#
# On the lab OSD (started if needed): 4 KiB random reads and 4 KiB random
# writes from fio's rbd engine (a real librbd client; it reports latency
# percentiles, which rados bench does not), untraced and traced windows
# interleaved A B B A A B ... (run_pair), the tracing modes
# interleaved too. Each window
# runs under a steady load: fio starts, the tracer (when traced) is started
# on the busy OSD the way someone would, and after it has settled the
# window measures `--secs` seconds of:
#   - the OSD's CPU time (utime+stime of the ceph-osd, /proc/PID/stat) over
#     the ops Ceph itself counted (op_r+op_w, admin socket): traced minus
#     untraced is the cost of the uprobes and their programs, which run in
#     the OSD's threads;
#   - the host's CPU time (all CPUs, everything but idle and iowait,
#     /proc/stat) per op: the scheduler, futex and block programs run in
#     other tasks' context too; the tracer's own CPU per op separately;
#   - IOPS (Ceph's op count over the window), p99 latency (fio, whole run);
#   - uprobe hits per op, from the tool's own counters (names from
#     build/osdstage.abi.json).
# Then one run per mode with the kernel's BPF run statistics on
# (kernel.bpf_stats_enabled, restored afterwards; read from the tracer's own
# program descriptors, /proc/PID/fdinfo): runs per op and ns per run of
# each program, uprobe program runs per op (the bpftrace reference too;
# not the optracker mode: Ceph's own OpTracker off in its base window, on
# in the other, at run time, no tracer);
# start-up time, peak RSS, the recorder. Writes
# bench/results/<release>.json (pacific: the host lab; reef, tentacle: the
# container labs, with CEPH=) and regenerates BENCHMARKS.md from every
# release's last result, side by side, with the targets.
#
# The "osds" part (--part osds; --part all, the default, runs both): on the
# lab with three OSDs (lab.sh up with LAB_OSDS=3, pool rbd size 3), tracing
# one OSD (--osd 0) vs all three (--osd all) with one set of BPF programs,
# 4 KiB random writes (replicated) and reads, with the same windows: IOPS
# ratios from interleaved pairs, and on EACH OSD the CPU time the tracing
# adds per op (utime+stime of the ceph-osd from /proc/PID/stat over its own
# op_r+op_w+subop_w from its admin socket, traced minus untraced). Writes
# bench/results/<release>.osds.json; BENCHMARKS.md merges every results file.
#
# The "reader" part (--part reader; in --part all too; no lab needed): the
# reader's and the recorder's figures on the controlled program
# tests/bpf/progs/shardq.cc: a capture of >= 10 million events made by
# recording it (osdstage -w --ring-mb 256),
# read back with -r -j, -r --slowest 5 -j and -r --html, each in a child of
# its own, READ_RUNS times taking turns (events/s over the median wall time,
# the child's peak RSS), then deleted; a capture of its lock case made with
# --stacks, read back with -r --folded waits and -r --from 0 -j the same
# way (waits with stacks unwound a second);
# the recorder alone at set rates (tests/bpf/ringgen.py: written events/s,
# lost, the recorder thread's CPU); alone (--part reader) also the traced
# program's event rate (the main part has it). Merged into
# bench/results/<release>.json (the main part keeps them when it rewrites
# the file); --smoke: a capture of ~100k events, one rate for 1 s.
#
# The "exporter" part (--part exporter; in --part all too): the
# exporter left running on the 3-OSD lab for --soak-min minutes under fio
# randrw, scraped by a real Prometheus and sending ops as OTLP traces to a
# real Jaeger (vagrant/jaeger.sh; bench/exporter_soak.py says what is
# measured). Writes bench/results/<release>.exporter.json.
#
# The "floor" part (--part floor; in --part all too; no lab needed): what
# one uprobe hit costs on this machine by the instruction probed
# and the link (bench/floor.py says how). Writes bench/results/floor.json.
#
# The "client" part (--part client; in --part all too): what
# rbdrecord (the librbd calls and every OSD op) costs the fio client it
# records, on the host lab (bench/client_cost.py says how). Writes
# bench/results/client.json.
#
# The "merged" part (--part merged; in --part all too): the
# merged reader (osdstage -r h0 h1 h2 client) on a --merged-min-minute
# capture set of the 3-host lab (bench/merged_reader.py says how). Writes
# bench/results/merged.json.
#
# The "toggle" part (--part toggle; in --part all too): the
# lean, userspace and default modes' cost in the OSD from one tracer per
# mode attached and detached every --toggle-secs seconds under one fio
# run, and Ceph's own OpTracker's, set off and on again in turn with them
# (bench/toggle.py says how). Merged into bench/results/<release>.json
# as "toggled".
#
# --render-only measures nothing: it writes BENCHMARKS.md (--md) again from
# the saved bench/results/*.json (no lab, no root).
#
# This file parses the options, runs the parts (main_part, osds_part;
# the reader part is measure_reader.reader_part, the exporter part
# exporter_soak.soak_part, the floor part floor.floor_part, the toggle
# part toggle.toggle_part, each rendering its own section) and rewrites
# BENCHMARKS.md. What they use, each module importing only those listed
# after it: render.py (BENCHMARKS.md), sections.py (a part's run in full),
# why.py (why the missed targets are
# missed), targets.py (the targets judged; the soak's rows are
# soak_render.py's), summary.py (windows into figures; the
# saved results), measure_reader.py (the reader's figures, no lab needed),
# measure.py (the tracer and the windows on the lab), labkit.py (the lab,
# fio, the OSD's counters, the figures' formatting). exporter_soak.py
# imports labkit.py only; floor.py nothing of bench/; merged_reader.py
# client_cost.py (its fio job), measure_reader.py and labkit.py; toggle.py
# measure.py and labkit.py.
import argparse
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.ceph import adminsock  # noqa: E402
from labkit import (  # noqa: E402
    RESULTS, _spread, bpf_stats_on, git_commit, lab_env, machine, prefill,
    read_results, write_results)
from measure import (  # noqa: E402
    BOUNDED_MIN_SECS, BOUNDED_SETTLE_S, MODES, OPTRACKER, OSDS_LABELS,
    OSDS_MODES, OSDS_WORKLOADS, SETTLE_S, fio, osd_window,
    recorder_throughput, set_op_tracker, startup_idle, stats_of, stats_run)
from measure_reader import READER_KEYS, reader_part  # noqa: E402
from render import render_md  # noqa: E402
from sections import (  # noqa: E402
    render_reader, render_osds, render_release)
from summary import load_results, summarize_main, summarize_osds  # noqa: E402
from targets import TARGETS, cost_holds  # noqa: E402


def pair_traced_first(i):
    """Whether pair i of a mode runs its traced window first: every other
    pair. The lab's IOPS drift and swing between windows (2026-11-30, the
    1-OSD lab, 20-s windows with --max-overhead 2 on and off in turn: the
    untraced ones 11963-13871 IOPS, swinging over ~80 s), and with the
    untraced window always first a downward drift was charged to every
    mode: that run's pairs had Ceph's own OpTracker (no tracer at all) at
    0.78-1.13 and --max-overhead 2 at 0.79-0.99 (13 % of the CPUs against
    its own estimate of 1.4 %), where the on/off windows above gave it
    0.94-1.04, mean 0.996. In turn, a drift counts for half the pairs and
    against the other half."""
    return i % 2 == 1


def run_pair(i, base, traced):
    """Pair i's two windows, base() and traced(), run in its order
    (pair_traced_first) -> (untraced, traced)."""
    if pair_traced_first(i):
        t = traced()
        return base(), t
    return base(), traced()


def osds_part(a):
    """--part osds: one OSD traced vs three, on the 3-OSD lab."""
    env = lab_env(osds=3)
    pids = [int(p) for p in env["OSD_PIDS"].split(",")]
    asoks = env["OSD_ASOKS"].split(",")
    if len(pids) != 3 or len(asoks) != 3:
        sys.exit("bench: the lab runs %d OSDs, not 3" % len(pids))
    t0 = time.monotonic()
    prefill(env, if_needed=True)
    prefill_s = time.monotonic() - t0
    pairs_n, secs = a.osds_pairs, a.osds_secs
    workloads = OSDS_WORKLOADS
    res = {"machine": machine(env, pids[0]), "osds": len(pids),
           "pairs": pairs_n, "secs": secs,
           "client": "fio rbd engine, 4 KiB, iodepth 16, pool rbd size 3",
           "window": "steady", "pair_order": "alternating",
           "modes": {m: {"traces": OSDS_LABELS[m]} for m in OSDS_MODES},
           "workloads": {}}
    res["machine"]["osds"] = len(pids)
    for wl, rw in workloads:
        got = {m: [] for m in OSDS_MODES}
        fio(env, rw, secs)      # warm-up, not counted: the first run lags
        # the modes interleaved too: pair i of each mode, then pair i + 1
        for i in range(pairs_n):
            for mode, cmd in OSDS_MODES.items():
                base, traced = run_pair(
                    i, lambda: osd_window(env, pids, asoks, rw, secs),
                    lambda: osd_window(env, pids, asoks, rw, secs, cmd))
                got[mode].append((base, traced))
                print("bench: osds %-9s %-8s pair %d: %.0f vs %.0f IOPS; "
                      "added us/op per OSD: %s" % (
                          OSDS_LABELS[mode], wl, i + 1, base["iops"],
                          traced["iops"], " ".join(
                              "%.1f" % (t["cpu_us_per_op"] -
                                        u["cpu_us_per_op"])
                              if t["cpu_us_per_op"] and u["cpu_us_per_op"]
                              else "-" for u, t in zip(base["osds"],
                                                       traced["osds"]))),
                      file=sys.stderr)
        res["workloads"][wl] = {m: summarize_osds(p, len(pids))
                                for m, p in got.items()}
        holds, _, _ = cost_holds(res["workloads"][wl])
        res["workloads"][wl]["per_op_cost_holds"] = holds
    res["runtime_s"] = round(time.monotonic() - t0)
    res["prefill_s"] = round(prefill_s)
    out = a.osds_out or os.path.join(
        RESULTS, res["machine"]["release"] + ".osds.json")
    write_results(out, res)
    return res


def _parser():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--secs", type=int, default=8)
    ap.add_argument("--smoke", action="store_true",
                    help="one pair of 2 s windows, read only, one "
                    "untraced window the base of every mode and the BPF "
                    "statistics taken in the traced windows: for the test "
                    "suite (it checks the machinery, not the figures)")
    ap.add_argument("--out", default=None,
                    help="default: bench/results/<release>.json")
    ap.add_argument("--md", default=os.path.join(REPO, "BENCHMARKS.md"))
    ap.add_argument("--render-only", action="store_true",
                    help="run nothing: write --md again from the saved "
                    "results (bench/results/*.json)")
    ap.add_argument("--part", choices=("all", "main", "osds", "reader",
                                       "exporter", "floor", "client",
                                       "merged", "toggle"),
                    default="all",
                    help="main: the tracing modes on the 1-OSD lab; osds: "
                    "one OSD traced vs three, on the 3-OSD lab; reader: "
                    "the reader on a >= 10 M-event capture of the "
                    "controlled program and the recorder alone (no lab); "
                    "floor: what one uprobe hit costs on this machine, by "
                    "the instruction probed (bench/floor.py; no lab); "
                    "client: what rbdrecord costs the client it records "
                    "(bench/client_cost.py); merged: the merged "
                    "reader on a --merged-min 3-host capture set "
                    "(bench/merged_reader.py); toggle: the lean, "
                    "userspace and default modes attached and detached "
                    "every few seconds under one fio run, OpTracker off "
                    "and on in turn with them "
                    "(bench/toggle.py); all: every part")
    ap.add_argument("--toggle-pairs", type=int, default=30,
                    help="the toggle part's rounds: a traced window of "
                    "each mode in turn, each between two untraced ones "
                    "(default 30)")
    ap.add_argument("--toggle-secs", type=float, default=2.0,
                    help="the toggle part's window, seconds (default 2)")
    ap.add_argument("--osds-pairs", type=int, default=3)
    ap.add_argument("--osds-secs", type=int, default=8)
    ap.add_argument("--osds-out", default=None,
                    help="default: bench/results/<release>.osds.json")
    ap.add_argument("--floor-rounds", type=int, default=7,
                    help="the floor part's interleaved rounds (default 7)")
    ap.add_argument("--floor-calls", type=int, default=1000000,
                    help="the floor part's calls per run (default 1000000)")
    ap.add_argument("--client-pairs", type=int, default=4,
                    help="the client part's interleaved pairs (default 4)")
    ap.add_argument("--client-secs", type=int, default=10,
                    help="the client part's run seconds (default 10)")
    ap.add_argument("--merged-min", type=float, default=10.0,
                    help="the merged part's capture, minutes (default 10)")
    ap.add_argument("--merged-runs", type=int, default=0,
                    help="the merged part's runs of each read (default: "
                    "the reader part's, 3)")
    ap.add_argument("--merged-keep", metavar="DIR",
                    help="the merged part reads the set in DIR (recorded "
                    "there first when DIR holds none) and keeps it")
    ap.add_argument("--soak-min", type=float, default=30.0,
                    help="the exporter part's soak, minutes (default 30)")
    ap.add_argument("--soak-pairs", type=int, default=4,
                    help="the exporter part's interleaved cost pairs, "
                    "under the soak's load and again with fio held at "
                    "half its rate, where the cost is also added up from "
                    "its measured parts (default 4 of each)")
    ap.add_argument("--soak-bound", type=float, default=1.0,
                    help="the exporter's --max-overhead in the soak "
                    "(default 1: its own default)")
    return ap


def main(argv=None):
    a = _parser().parse_args(argv)
    if a.render_only:
        with open(a.md, "w") as f:
            f.write(render_md(load_results()))
        return 0
    if os.geteuid() != 0:
        sys.exit("bench: must run as root")
    if a.smoke:
        a.pairs, a.secs = 1, 2
        a.osds_pairs, a.osds_secs = 1, 2
        a.toggle_pairs, a.toggle_secs = 2, 1.0
    text = ""
    if a.part in ("all", "main"):
        text += main_part(a)
    if a.part in ("all", "osds"):
        text += render_osds(osds_part(a))
    if a.part in ("all", "reader"):
        res = reader_part(a, traced=a.part == "reader")
        text += "\n".join(["# Benchmarks", ""] + render_reader(res)) + "\n"
    if a.part in ("all", "toggle"):
        import toggle
        text += toggle.toggle_part(a)
    if a.part in ("all", "exporter") and not a.smoke:
        import exporter_soak
        text += exporter_soak.soak_part(a)
    if a.part in ("all", "floor") and not a.smoke:
        import floor
        text += floor.floor_part(a)
    if a.part in ("all", "client") and not a.smoke:
        import client_cost
        text += client_cost.client_part(a, lab_env(osds=1), git_commit())
    if a.part in ("all", "merged") and not a.smoke:
        import merged_reader
        text += merged_reader.merged_part(a, git_commit())
    if not a.smoke:
        with open(a.md, "w") as f:
            f.write(render_md(load_results()))
    sys.stdout.write(text)
    return 0


def window_of(mode, a):
    """(window seconds, settle seconds) of a mode: --max-overhead's window
    opens after its first full-rate window and spans two duty periods."""
    if mode == "bounded":
        return (a.secs if a.smoke else max(a.secs, BOUNDED_MIN_SECS),
                BOUNDED_SETTLE_S)
    return a.secs, SETTLE_S


def main_part(a):
    """The tracing modes on the 1-OSD lab's osd.0 (a lab of another
    count is rebuilt); -> its text."""
    t_start = time.monotonic()
    env = lab_env(osds=1)
    pid = int(env["OSD_PID"])
    asok = adminsock.find_osd_socket(pid, "0")
    prefill(env)
    idle_startup = startup_idle(pid)
    res = {"machine": machine(env, pid), "pairs": a.pairs, "secs": a.secs,
           "bounded_secs": window_of("bounded", a)[0],
           "client": "fio rbd engine, 4 KiB, iodepth 16", "modes": {},
           "pair_order": "alternating",
           "spread": "min-max over the pairs",
           "date": time.strftime("%Y-%m-%d"), "commit": git_commit(),
           # anything else on the cores moves every figure: say how busy
           "loadavg_start": round(os.getloadavg()[1], 2)}
    workloads = [("randread", "randread")] + ([] if a.smoke else
                                              [("write", "randwrite")])
    modes = [m for m, cmd in MODES.items() if cmd]
    got = {m: {wl: [] for wl, _ in workloads} for m in modes}
    # --smoke checks the machinery, not the figures: one untraced window
    # is every mode's base, and each traced window runs with the BPF
    # statistics on and gives them too (the full bench keeps them apart:
    # the statistics cost each program run two clock reads)
    smoke = {"base": None, "stats": {}}
    for wl, rw in workloads:
        fio(env, rw, a.secs)        # warm-up, not counted: the first run lags
        # the modes interleaved too: pair i of each mode, then pair i + 1
        for i in range(a.pairs):
            for mode in modes:
                base, traced = _main_pair(env, pid, asok, mode, rw, a, smoke,
                                          i)
                got[mode][wl].append((base, traced))
                print("bench: %-9s %-8s pair %d: %.0f vs %.0f IOPS; OSD "
                      "%.1f vs %.1f us/op, host %.1f vs %.1f us/op" % (
                          mode, wl, i + 1, base["iops"], traced["iops"],
                          base["osds"][0]["cpu_us_per_op"] or 0,
                          traced["osds"][0]["cpu_us_per_op"] or 0,
                          base["host_us_per_op"] or 0,
                          traced["host_us_per_op"] or 0), file=sys.stderr)
    for mode in modes:
        res["modes"][mode] = {wl: _mode_summary(mode, got[mode][wl], a)
                              for wl, _ in workloads}
    for mode in MODES:
        if MODES[mode] is None:
            res["modes"][mode] = {"available": False}
    res["bpf_stats"] = _bpf_stats(env, pid, asok, modes, a, smoke["stats"])
    # the tool's own figures: the default mode's start-up and RSS over
    # its traced windows, the recorder
    dflt = res["bpf_stats"]["default"]
    rr = res["modes"]["default"]["randread"]
    traced = [b for wl, _ in workloads for _, b in got["default"][wl]]
    res["programs"] = dflt["programs"]
    res["hits_per_op"] = (rr["uprobe_hits_per_op"] or {}).get("median")
    res["all_runs_per_op"] = dflt["all_runs_per_op"]
    res["tracer_cpu_s_per_10k_ops"] = round(
        (rr["tracer_us_per_op"] or {}).get("median", 0) / 100, 4)
    res["startup_s"] = round(idle_startup, 3)
    res["startup_busy_s"] = round(statistics.median(
        b["startup_s"] for b in traced), 3)
    res["peak_rss_mb"] = round(max(b["rss_mb"] for b in traced), 1)
    res["recorder"] = recorder_throughput(50000 if a.smoke else 300000)
    rec_rr = res["modes"]["record"].get("randread", {})
    res["recorder"]["lab_peak_cpu_pct"] = rec_rr.get("recorder_cpu_pct")
    res["recorder"]["lab_peak_events_per_s"] = rec_rr.get("events_per_s")
    res["targets"] = TARGETS
    res["call_bias_us"] = dflt.get("call_bias_us")
    res["runtime_s"] = round(time.monotonic() - t_start)
    res["loadavg_end"] = round(os.getloadavg()[1], 2)
    out = a.out or os.path.join(RESULTS, res["machine"]["release"] + ".json")
    # the reader part's figures (--part reader) and the toggle part's stay
    import toggle
    prev = read_results(out)
    res.update({k: prev[k] for k in READER_KEYS + (toggle.KEY,)
                if k in prev})
    write_results(out, res)
    return render_release(res)


def _main_pair(env, pid, asok, mode, rw, a, smoke, i):
    """Pair i of `mode` under fio `rw`, its windows in the pair's order
    (run_pair): -> (untraced, traced). The optracker mode's base has
    Ceph's OpTracker off; under --smoke one untraced window
    (smoke["base"]) is every mode's base and the traced window gives the
    BPF statistics (smoke["stats"])."""
    secs, settle = window_of(mode, a)

    def window(cmd, **kw):
        return osd_window(env, [pid], [asok], rw, secs, cmd, settle, **kw)

    def base():
        if MODES[mode] != OPTRACKER:
            return window(None)
        try:
            set_op_tracker(asok, False)
            return window(None)
        finally:
            set_op_tracker(asok, True)

    def traced():
        if MODES[mode] == OPTRACKER:
            return window(None)
        if not a.smoke:
            return window(MODES[mode])
        with bpf_stats_on():
            t = window(MODES[mode], stats=True)
        smoke["stats"][mode] = stats_of(t)
        return t
    if a.smoke and MODES[mode] != OPTRACKER:
        smoke["base"] = smoke["base"] or base()
        return smoke["base"], traced()
    return run_pair(i, base, traced)


def _mode_summary(mode, pairs, a):
    """One mode's figures on one workload from its pairs; the record
    mode adds the recorder's at the lab's peak, the bounded mode its own
    estimate of its cost."""
    s = summarize_main(pairs)
    s["secs"] = window_of(mode, a)[0]
    if mode == "record":
        # the recorder at the lab's peak: CPU share of one core
        s["recorder_cpu_pct"] = round(statistics.median(
            100 * b["tracer_cpu_s"] / b["secs"] for _, b in pairs), 1)
        s["events_per_s"] = round(statistics.median(
            b["events"][0] / b["life_s"] for _, b in pairs))
        s["lost"] = sum(b["events"][1] for _, b in pairs)
    if mode == "bounded":
        s["estimated_pct"] = _spread([
            ((b["report"] or {}).get("overhead") or {}).get(
                "estimated_pct") for _, b in pairs], 3)
    return s


def _bpf_stats(env, pid, asok, modes, a, smoke_stats):
    """BPF run statistics: one read window per mode (the optracker mode
    runs no program of ours); --smoke's come from its traced windows."""
    out = {}
    for mode in modes:
        if MODES[mode] == OPTRACKER:
            continue
        secs, settle = window_of(mode, a)
        st = out[mode] = smoke_stats.get(mode) or stats_run(
            env, pid, asok, MODES[mode], "randread", secs, settle)
        print("bench: %-9s BPF statistics: %.2f uprobe runs per op" % (
            mode, st["uprobe_runs_per_op"] or 0), file=sys.stderr)
    return out


if __name__ == "__main__":
    sys.exit(main())
