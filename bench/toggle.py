"""The tracing modes' cost in the OSD from windows seconds apart (make bench
BENCH=toggle; in --part all too).

The main part starts a tracer for each traced window: 8-s windows tens
of seconds apart, between which the untraced OSD's own CPU per op swings
by several us (BENCHMARKS.md, "How it is measured"), so its pairs cannot
tell a 2.5-us tier from a 5-us one. Here one tracer per mode is set up
the way osdstage.py sets it up (engine.session, in this process), all
three loaded at once, and their probes are attached and detached every
`secs` seconds under one steady fio run of 4 KiB random reads, the modes
in turns: untraced, lean, untraced, userspace, untraced, default,
untraced, optracker, untraced, lean, ... (a round: one window of each
mode), so every mode samples the whole run. The optracker mode is Ceph's
own OpTracker, the cost operators already accept: no tracer, and
osd_enable_op_tracker set off at run time for its window (on, Ceph's
default, in every other window), its cost the untraced windows' less
its own. Each traced window is set against the mean of the untraced
windows on either side of it (a drift slower than a window cancels),
and the default mode against OpTracker round by round: the default's
added CPU less OpTracker's in the same round. A window is timed
between snapshots taken after attach() has returned (or detach()) and
before the next detach() starts (or attach()): the probes are all on, or
all off, for the whole of it. Per window: the ceph-osd's CPU time (every
thread, /proc/PID/task/*/schedstat, ns), its shard workers' alone
(tp_osd_tp, where the uprobes on the op path fire) and its messenger's
(msgr-worker-N, where none fires), and the host's busy time (every
CPU, /proc/stat), over the client ops Ceph counted (op_r + op_w, admin
socket; its perf dump costs the OSD the same in every window). Then one
traced window more with the kernel's BPF run statistics on (they cost
each program run two clock reads): uprobe hits and program time per op,
and the tool's own estimates of its cost there, set against the added
host CPU measured. Figures: the mean of the pairs'
differences with its standard error, their median and min-max; a trap
per hit = (the userspace mode's added CPU - its programs) / its hits (it
runs no kernel program). Merged into bench/results/<release>.json as
"toggled" (the main part keeps it when it rewrites the file; --out
FILE: into FILE).
"""
import math
import os
import statistics
import sys
import time

from labkit import (RESULTS, Fio, _spread, git_commit, host_busy_s,
                    lab_env, machine, osd_op_counts, prefill, read_results,
                    write_results)
from measure import set_op_tracker, task_cpu_s

from cephlat.ceph import adminsock

# mode -> osdstage.py's options for it (Want's fields)
MODES = (("lean", {"lean": True}), ("userspace", {"no_kernel": True}),
         ("default", {}))
OPTRACKER = "optracker"     # Ceph's own OpTracker: a mode of no tracer
WORKERS = "tp_osd_tp"       # the shard workers' thread name
MESSENGER = "msgr-worker-"  # the messenger's threads, by name prefix
WARMUP_S = 5
KEY = "toggled"             # in bench/results/<release>.json
# per window: all the OSD's threads, its shard workers alone, its
# messenger's, the host's (every CPU's busy time), IOPS
FIGURES = ("osd_us_per_op", "workers_us_per_op", "msgr_us_per_op",
           "host_us_per_op", "iops")
# the tool's estimate of its own cost agrees with the measure within this
# share of it (or two standard errors of the measure, if wider)
ESTIMATE_WITHIN = 0.25


def _snap(pid, asok):
    total, by = task_cpu_s(pid)
    return (time.monotonic(), total, by.get(WORKERS, 0.0),
            osd_op_counts(asok)[1],
            sum(s for name, s in by.items() if name.startswith(MESSENGER)),
            host_busy_s())


def _window(a, b, traced):
    secs, ops = b[0] - a[0], b[3] - a[3]
    if ops <= 0:
        sys.exit("bench: no client op counted in a %.1f-s window: is fio "
                 "running?" % secs)
    return {"traced": traced, "secs": secs, "ops": ops, "iops": ops / secs,
            "osd_us_per_op": 1e6 * (b[1] - a[1]) / ops,
            "workers_us_per_op": 1e6 * (b[2] - a[2]) / ops,
            "msgr_us_per_op": 1e6 * (b[4] - a[4]) / ops,
            "host_us_per_op": 1e6 * (b[5] - a[5]) / ops}


def toggled_windows(tracers, pid, asok, rounds, secs):
    """`rounds` rounds of one traced window per mode (tracers: {mode:
    tracer}, in that order), an untraced window before the first and
    after every traced one, each `secs` seconds: [window dicts, a traced
    one's "mode" set]."""
    def window(tracer=None):
        if tracer:
            tracer.attach()
        a = _snap(pid, asok)
        time.sleep(secs)
        b = _snap(pid, asok)
        if tracer:
            tracer.detach()
        return _window(a, b, tracer is not None)
    wins = [window()]
    for _ in range(rounds):
        for mode, tracer in tracers.items():
            wins.append(dict(window(tracer), mode=mode))
            wins.append(window())
    return wins


class OpTrackerOff:
    """The optracker mode's stand-in for a tracer: Ceph's OpTracker off
    while "attached" (its window), on again when "detached"."""

    def __init__(self, asok):
        self.asok = asok

    def attach(self):
        set_op_tracker(self.asok, False)

    def detach(self):
        set_op_tracker(self.asok, True)


def aba(wins, key, ratio=False, mode=None):
    """Each traced window's figure (of `mode` only, when given) against
    the mean of the untraced windows on either side: the difference, or
    the ratio. The optracker mode's window is the one without it: its
    figure is the base's against it (what OpTracker adds)."""
    out = []
    for i in range(1, len(wins) - 1, 2):
        if mode is not None and wins[i].get("mode") != mode:
            continue
        base = (wins[i - 1][key] + wins[i + 1][key]) / 2
        got = wins[i][key]
        if wins[i].get("mode") == OPTRACKER:
            base, got = got, base
        out.append(got / base if ratio else got - base)
    return out


def against_optracker(wins, mode="default"):
    """`mode`'s added OSD CPU per read less OpTracker's, round by round
    (the same round's windows: a drift slower than a round cancels) ->
    spread(), or None without both."""
    a = aba(wins, "osd_us_per_op", mode=mode)
    b = aba(wins, "osd_us_per_op", mode=OPTRACKER)
    n = min(len(a), len(b))
    return spread([x - y for x, y in zip(a[:n], b[:n])]) if n else None


def spread(values, digits=2):
    """labkit._spread's median, min and max of `values`, with their mean,
    its standard error and n."""
    n = len(values)
    sem = statistics.stdev(values) / math.sqrt(n) if n > 1 else None
    return dict(_spread(values, digits), n=n,
                mean=round(statistics.mean(values), digits),
                sem=None if sem is None else round(sem, digits))


def stats_window(tracer, pid, asok, secs):
    """One traced window with the BPF run statistics on: -> {uprobe hits
    per op, our programs' us per op, and the tool's own estimates of its
    cost per op, in us: "estimate_us" as a live run's header has it (its
    hits at fixed prices: duty.CostMeter), "estimate_runs_us" as
    --max-overhead and the exporter have it (its programs' measured runs
    and a calibrated trap per uprobe run: duty.RunCost)}."""
    from cephlat.engine import duty
    meter = duty.CostMeter(tracer)
    tracer.measure_runs()
    tracer.attach()
    r0, a = tracer.run_totals(), _snap(pid, asok)
    c0, sw0 = tracer.snapshot_counters(), meter.switches()
    time.sleep(secs)
    r1, b = tracer.run_totals(), _snap(pid, asok)
    c1, sw1 = tracer.snapshot_counters(), meter.switches()
    tracer.detach()
    if r0 is None or r1 is None:
        sys.exit("bench: the kernel refused the BPF run statistics")
    ops = b[3] - a[3]
    hits = dict({k: v - c0.get(k, 0) for k, v in c1.items()},
                host_switches=sw1 - sw0)
    runs = r1["uprobe_runs"] - r0["uprobe_runs"]
    prog = r1["prog_ns"] - r0["prog_ns"]
    return {"hits": runs / ops, "prog_us": prog / ops / 1000.0,
            "estimate_us": meter.cost_ns(hits) / ops / 1000.0,
            "estimate_runs_us": (prog + runs * meter.uprobe_ns) / ops /
            1000.0}


def estimate_check(est, measured):
    """The tool's estimate `est` (us per op) against the measured added
    host CPU (spread()): its ratio to the mean, and whether it is within
    ESTIMATE_WITHIN of it or two standard errors, the wider."""
    m, sem = measured["mean"], measured["sem"] or 0.0
    slack = max(ESTIMATE_WITHIN * abs(m), 2 * sem)
    return {"us": round(est, 2),
            "ratio": round(est / m, 2) if m > 0 else None,
            "agrees": abs(est - m) <= slack}


def measure_modes(pid, asok, rounds, secs):
    """Every mode's figures: their tracers set up at once, toggled in
    turns, closed. -> ({mode: figures}, the windows)"""
    # here, not at the top: rendering BENCHMARKS.md needs no tracer
    from cephlat.engine.session import Session, Want
    from cephlat.errors import UserError
    tracers, toggled = {}, False
    try:
        for mode, opts in MODES:
            tracer = tracers[mode] = Session(Want(pid=[pid], **opts),
                                             sys.stderr).tracer
            tracer.start()      # calibrates and attaches: off to begin
            tracer.detach()
        toggled = True
        wins = toggled_windows(dict(tracers, **{
            OPTRACKER: OpTrackerOff(asok)}), pid, asok, rounds, secs)
        runs = {mode: stats_window(tracer, pid, asok, 2 * secs)
                for mode, tracer in tracers.items()}
        runs[OPTRACKER] = None      # no probe, no program, no estimate
    except UserError as e:      # no such OSD, no BTF, ...: one line
        sys.exit("bench: toggle part: %s" % e)
    finally:
        if toggled:             # Ceph's default, whatever befell
            set_op_tracker(asok, True)
        for tracer in tracers.values():
            tracer.close()
    base = [w["osd_us_per_op"] for w in wins if not w["traced"]]
    out = {}
    for mode, got in runs.items():
        got = got or {"hits": 0.0, "prog_us": 0.0}
        host = spread(aba(wins, "host_us_per_op", mode=mode))
        out[mode] = {
            "added_us": spread(aba(wins, "osd_us_per_op", mode=mode)),
            "host_added_us": host,
            "workers_added_us": spread(aba(wins, "workers_us_per_op",
                                           mode=mode)),
            "msgr_added_us": spread(aba(wins, "msgr_us_per_op",
                                        mode=mode)),
            "iops_ratio": spread(aba(wins, "iops", ratio=True, mode=mode),
                                 3),
            "untraced_us_per_op": spread(base, 1),
            "uprobe_hits_per_op": round(got["hits"], 3),
            "prog_us_per_op": round(got["prog_us"], 3)}
        for key in ("estimate_us", "estimate_runs_us"):
            if key in got:
                out[mode][key] = estimate_check(got[key], host)
    out["default"]["vs_optracker_us"] = against_optracker(wins)
    return out, [dict({k: round(w[k], 2) for k in FIGURES},
                      mode=w.get("mode")) for w in wins]


def trap(modes):
    """A trap per hit inside the OSD from the userspace mode: (its added
    CPU - its programs) / its hits, in us, with the standard error of the
    added CPU over the hits; None without it."""
    u = modes.get("userspace")
    if not u or not u["uprobe_hits_per_op"]:
        return None
    hits = u["uprobe_hits_per_op"]
    return {"us": round((u["added_us"]["mean"] - u["prog_us_per_op"]) /
                        hits, 3),
            "sem": round((u["added_us"]["sem"] or 0) / hits, 3),
            "hits": hits}


def toggle_part(a):
    """The modes toggled on the 1-OSD lab's osd.0 (in `--part all` the
    osds part ran before it on the 3-OSD lab: rebuilt); -> its section."""
    t0 = time.monotonic()
    env = lab_env(osds=1)
    pid = int(env["OSD_PID"])
    asok = adminsock.find_osd_socket(pid, "0")
    prefill(env, if_needed=True)
    res = {"date": time.strftime("%Y-%m-%d"), "commit": git_commit(),
           "pairs": a.toggle_pairs, "secs": a.toggle_secs,
           "client": "fio rbd engine, 4 KiB random reads, iodepth 16",
           "loadavg_start": round(os.getloadavg()[1], 2), "modes": {}}
    m = machine(env, pid)
    fio = Fio(env, "randread")
    try:
        time.sleep(WARMUP_S)
        res["modes"], res["windows"] = measure_modes(
            pid, asok, a.toggle_pairs, a.toggle_secs)
    finally:
        fio.stop()
    for mode, got in res["modes"].items():
        print("bench: toggled %-9s %s us/op added (+- %s), IOPS ratio %s" % (
            mode, got["added_us"]["mean"], got["added_us"]["sem"],
            got["iops_ratio"]["mean"]), file=sys.stderr)
    vs = res["modes"]["default"]["vs_optracker_us"]
    if vs:
        print("bench: toggled default less OpTracker %s us/op (+- %s)" % (
            vs["mean"], vs["sem"]), file=sys.stderr)
    res["trap"] = trap(res["modes"])
    res["runtime_s"] = round(time.monotonic() - t0)
    res["loadavg_end"] = round(os.getloadavg()[1], 2)
    out = a.out or os.path.join(RESULTS, m["release"] + ".json")
    prev = read_results(out)
    prev[KEY] = res
    prev.setdefault("machine", m)
    write_results(out, prev)
    return "\n".join(render_section([prev])) + "\n"


def _us(s, unit=" us"):
    """mean +- standard error (median, min to max)."""
    return "%.2f +- %.2f%s (median %.2f, %.2f to %.2f)" % (
        s["mean"], s["sem"] or 0, unit, s["median"], s["min"], s["max"])


def render_section(results):
    """BENCHMARKS.md's section of the toggled windows, every release
    that has them ([] when none has)."""
    got = [(r["machine"]["release"], r[KEY]) for r in results if KEY in r]
    if not got:
        return []
    lines = ["## Attached and detached every few seconds", "",
             __doc__.split("\n\n", 1)[1].strip().replace("\n", " "), "",
             "| release | mode | pairs | added OSD CPU per read | of it in "
             "the shard workers | in the messenger | IOPS ratio | untraced "
             "OSD CPU per read | uprobe hits per read | their programs per "
             "read |", "|---|---|---|---|---|---|---|---|---|---|"]
    for rel, t in got:
        for mode in [m for m, _ in MODES] + [OPTRACKER]:
            s = t["modes"].get(mode)
            if not s:
                continue
            r = s["iops_ratio"]
            msgr = s.get("msgr_added_us")
            lines.append("| %s | %s | %d x %g s | %s | %s | %s | %.3f +- "
                         "%.3f | %.1f us | %.2f | %.2f us |" % (
                             rel, mode, t["pairs"], t["secs"],
                             _us(s["added_us"]), _us(s["workers_added_us"]),
                             "%.2f +- %.2f us" % (msgr["mean"],
                                                  msgr["sem"] or 0)
                             if msgr else "-", r["mean"], r["sem"] or 0,
                             s["untraced_us_per_op"]["median"],
                             s["uprobe_hits_per_op"], s["prog_us_per_op"]))
    lines.append("")
    for rel, t in got:
        vs = t["modes"].get("default", {}).get("vs_optracker_us")
        if vs:
            lines.append(
                "%s: the default mode's added OSD CPU per read less Ceph's "
                "own OpTracker's, round by round: %s." % (
                    rel.capitalize(), _us(vs)))
        tr = t.get("trap")
        if tr:
            lines.append(
                "%s (%s, tools at %s): a trap per hit inside the OSD "
                "%.2f +- %.2f us (the userspace mode's added CPU less its "
                "programs, over its %.2f hits per read)." % (
                    rel.capitalize(), t["date"], t["commit"], tr["us"],
                    tr["sem"], tr["hits"]))
    return lines + [""] + _estimate_table(got)


def _estimate_table(got):
    """The tool's own estimates against the measure, every traced mode
    of every release whose run has them."""
    rows = []
    for rel, t in got:
        for mode, _ in MODES:
            s = t["modes"].get(mode) or {}
            if "estimate_us" not in s:
                continue
            rows.append("| %s | %s | %s | %s | %s |" % (
                rel, mode, _us(s["host_added_us"]),
                _estimate(s["estimate_us"]),
                _estimate(s["estimate_runs_us"])))
    if not rows:
        return []
    return ["The tool's own estimate of what it costs, per read, beside the "
            "added host CPU the toggled pairs measured (every CPU's busy "
            "time, /proc/stat: the scheduler programs run in any task): as "
            "a live run's header has it (its hits at fixed prices), and as "
            "`--max-overhead` and the exporter have it (its programs' "
            "measured runs and a calibrated trap per uprobe run), in the "
            "window with the kernel's BPF run statistics on. It agrees when "
            "within %d %% of the measure or two standard errors of it, the "
            "wider." % round(100 * ESTIMATE_WITHIN), "",
            "| release | mode | added host CPU per read (measured) | "
            "estimate, live header | estimate, --max-overhead and the "
            "exporter |", "|---|---|---|---|---|"] + rows + [""]


def _estimate(e):
    return "%.2f us (%s x the measure%s)" % (
        e["us"], "-" if e["ratio"] is None else "%.2f" % e["ratio"],
        "" if e["agrees"] else ", **off**")
