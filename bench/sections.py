"""bench/sections.py - the sections of BENCHMARKS.md that give one
part's run in full: a release's main part (render_release: the IOPS
table, CPU per op, the BPF run statistics, the tool's own figures), the
osds part (render_osds) and the reader part (render_reader). Text only,
from results dicts; render.py puts them together, run.py prints the
parts it ran."""
from labkit import _release, _sp
from measure import OSDS_LABELS, OSDS_MODES
from measure_reader import READS
from summary import _get
from targets import TARGETS, _mark, _n, cost_holds


def pair_order(res):
    """"" when a part's pairs alternated their order (run.py
    pair_traced_first), else a sentence saying they did not."""
    if res.get("pair_order") == "alternating":
        return ""
    return (" (This run predates the alternating pairs: the untraced "
            "window came first in every pair, and a drift of the lab's "
            "IOPS between windows counts against the traced one.)")


def render_release(res):
    """A release's section of BENCHMARKS.md from its main part's
    results (with a "# Benchmarks" title: run.py prints it alone)."""
    lines = _release_head(res) + _iops_rows(res)
    if "bpf_stats" in res:
        lines += _cpu_table(res) + _bpf_stats_table(res)
    lines += _programs_and_figures(res)
    return "\n".join(lines)


def _release_head(res):
    """A release's section title, how it was run and the IOPS table's
    header."""
    m = res["machine"]
    return ["# Benchmarks", "",
            "## %s (Ceph %s%s)" % (
                _release(res).capitalize(), m["ceph"],
                ", in a container, CET build" if m.get("container") else
                ""), "",
            "Machine: %s, %d cores, kernel %s, Ceph %s. Client: %s; %d "
            "interleaved untraced/traced pairs of %d s%s per mode%s.%s" % (
                m["cpu_model"], m["cores"], m["kernel"], m["ceph"],
                res["client"], res["pairs"], res["secs"],
                " (bounded: %d s)" % res["bounded_secs"]
                if res.get("bounded_secs") not in (None, res["secs"])
                else "",
                "; %s%s%d s in all" % (
                    "run on %s, " % res["date"] if res.get("date") else "",
                    "tools at %s, " % res["commit"] if res.get("commit")
                    else "", res["runtime_s"])
                if res.get("runtime_s") else "", pair_order(res)), "",
            ] + (["Load average (5 min) of the machine at the start and "
                   "end of the run: %.2f, %.2f (%d cores; more than the "
                   "lab's own load means other work shared the cores)." % (
                       res["loadavg_start"], res["loadavg_end"],
                       m["cores"]), ""] if "loadavg_end" in res else []) + [
             "| mode | workload | IOPS ratio median (min-max) | p99 ratio | "
             "untraced / traced IOPS | target |",
             "|---|---|---|---|---|---|"]


def _iops_rows(res):
    """The IOPS table's rows: each mode and workload against its
    target."""
    lines = []
    for mode, wls in res["modes"].items():
        if wls.get("available") is False:
            lines.append("| %s | - | not available yet | | | |" % mode)
            continue
        for wl, s in wls.items():
            if not isinstance(s, dict):
                continue
            t = TARGETS.get(mode) if wl == "randread" else None
            p99 = _sp(s["p99_ratio"], "%.2f") if s.get("p99_ratio") else (
                "%.2f" % s["p99_ratio_median"] if s["p99_ratio_median"]
                else "-")
            lines.append("| %s | %s | %.3f (%.3f-%.3f) | %s | %d / %d | %s |" % (
                mode, wl, s["iops_ratio_median"], s["iops_ratio_min"],
                s["iops_ratio_max"], p99, s["untraced_iops_median"],
                s["traced_iops_median"],
                "%s %s" % (">= %.2f" % t, _mark(s["iops_ratio_median"] >= t))
                if t else ""))
    return lines


def _cpu_table(res):
    """CPU time per op, traced minus untraced, per mode and workload; the
    bounded mode's estimate against its measured cost."""
    m = res["machine"]
    lines = ["", "CPU time per op in us, traced minus untraced (the "
             "untraced base for scale), and uprobe hits per op from "
             "the tool's own counters; median (min-max) over the "
             "pairs. Cost: the added host CPU per op at the traced "
             "rate, as a share of all %d CPUs." % m["cores"], "",
             "| mode | workload | OSD added | host added | fio client "
             "added | tracer | other | OSD untraced | host untraced | "
             "uprobe hits per op | cost, % of all CPUs |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for mode, wls in res["modes"].items():
        for wl, s in wls.items():
            if not isinstance(s, dict):
                continue
            hits = _sp(s.get("uprobe_hits_per_op"), "%.2f")
            if hits == "-" and _get(res, "bpf_stats", mode,
                                    "uprobe_runs_per_op") is not None \
                    and wl == "randread":
                hits = "%.2f (BPF statistics)" % res["bpf_stats"][mode][
                    "uprobe_runs_per_op"]
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s "
                         "| %s | %s |" % (
                             mode, wl, _sp(s.get("osd_added_us_per_op")),
                             _sp(s.get("host_added_us_per_op")),
                             _sp(s.get("client_added_us_per_op")),
                             _sp(s.get("tracer_us_per_op")),
                             _sp(s.get("other_us_per_op")),
                             _sp(s.get("osd_untraced_us_per_op"), "%.0f"),
                             _sp(s.get("host_untraced_us_per_op"),
                                 "%.0f"), hits,
                             _sp(s.get("cost_pct"), "%.2f")))
    b = _get(res, "modes", "bounded", "randread") or {}
    if b.get("estimated_pct"):
        lines += ["", "`--max-overhead 2` on reads: osdstage's own "
                  "estimate %s %%, measured %s %% of all CPUs (the "
                  "OSD's added CPU over its own untraced CPU: %s %%)."
                  % (_sp(b["estimated_pct"], "%.2f"),
                     _sp(b.get("cost_pct"), "%.2f"),
                     _sp(b.get("osd_cost_pct"), "%.1f"))]
    return lines


def _bpf_stats_table(res):
    """The BPF run statistics, one read window per mode."""
    lines = ["", "BPF run statistics, one read window per mode "
             "(kernel.bpf_stats_enabled, the tracer's own programs):",
             "", "| mode | uprobe program runs per op | all BPF runs "
             "per op | slowest program (ns per run) |",
             "|---|---|---|---|"]
    for mode, st in res["bpf_stats"].items():
        ran = [(p["avg_ns"], n) for n, p in st["programs"].items()
               if p["runs"]]
        lines.append("| %s | %s | %s | %s |" % (
            mode, "%.2f" % st["uprobe_runs_per_op"]
            if st["uprobe_runs_per_op"] is not None else "-",
            "%.2f" % st["all_runs_per_op"]
            if st["all_runs_per_op"] is not None else "-",
            "%s %.0f" % (max(ran)[1], max(ran)[0]) if ran else "-"))
    return lines


def _programs_and_figures(res):
    """The default mode's programs against their target, and the tool's
    own figures (start-up, RSS, the recorder)."""
    lines = ["", "| BPF program (default mode) | runs per op | avg ns per "
             "run | target |", "|---|---|---|---|"]
    for n, p in sorted(res["programs"].items()):
        lines.append("| %s | %.2f | %.0f | <= 200 %s |" % (
            n, p["runs_per_op"] or 0, p["avg_ns"],
            _mark(p["avg_ns"] <= 200)))
    lines += ["", "| measure | value | target |", "|---|---|---|",
              "| uprobe hits per op (default, reads) | %s | |" % (
                  "%.2f" % res["hits_per_op"]
                  if res.get("hits_per_op") is not None else "-"),
              "| all BPF runs per op (incl. scheduler) | %.2f | |" %
              res["all_runs_per_op"],
              "| tracer CPU s per 10,000 ops | %.4f | |" %
              res["tracer_cpu_s_per_10k_ops"],
              "| start-up to all probes attached (idle OSD) | %.3f s | "
              "<= 0.5 s %s |" % (res["startup_s"],
                                 _mark(res["startup_s"] <= 0.5)),
              "| start-up on the busy OSD (the traced windows) | %s | |" % (
                  "%.3f s" % res["startup_busy_s"]
                  if res.get("startup_busy_s") is not None else "-"),
              "| peak RSS | %.1f MB | <= 60 MB %s |" % (
                  res["peak_rss_mb"], _mark(res["peak_rss_mb"] <= 60)),
              "| traced program's event rate, recorded (controlled "
              "program driven hard; limited by the probes' cost on the "
              "traced program, not by the recorder) | %d events/s (%d "
              "lost) | >= 100,000, 0 lost %s |" % (
                  res["recorder"]["events_per_s"], res["recorder"]["lost"],
                  _mark(res["recorder"]["events_per_s"] >= 100000 and
                        not res["recorder"]["lost"])),
              ("| osdstage -w's CPU, same run, from \"go\" to the "
               "program's exit | %.1f %% of a core (recorder thread "
               "osdstage-rec: %s) | |" % (
                   res["recorder"]["cpu_pct_of_core"],
                   "%.1f %%" % res["recorder"]["rec_thread_cpu_pct_of_core"]
                   if res["recorder"].get("rec_thread_cpu_pct_of_core")
                   is not None else "-"))
              if res["recorder"].get("cpu_window") else
              "| recorder CPU, same run (whole life of the tool) | %.1f %% "
              "of a core | |" % res["recorder"]["cpu_pct_of_core"],
              "| recorder CPU at the lab's peak (record mode, randread) | "
              "%s %% of a core, %s events/s | < 10 %% %s |" % (
                  res["recorder"]["lab_peak_cpu_pct"],
                  res["recorder"]["lab_peak_events_per_s"],
                  _mark((res["recorder"]["lab_peak_cpu_pct"] or 100) < 10)),
              ""]
    return lines


def render_osds(res):
    """The osds part's section of BENCHMARKS.md: how it ran, the
    table (_osds_rows), what it says (_osds_notes)."""
    m = res["machine"]
    lines = ["## Tracing three OSDs at once vs one (%s, Ceph %s)" % (
                 m.get("release", "pacific").capitalize(), m["ceph"]), "",
             "The lab with %d OSDs on one host (each on its own loop device, "
             "pool rbd size 3): osdstage.py with `--osd 0` (osd.0 only) and "
             "with `--osd all` (the three, one set of BPF programs). Client: "
             "%s; %d interleaved untraced/traced pairs of %d s per mode and "
             "workload (the modes interleaved too, after a warm-up run); %d s "
             "in all (prefill of the image %d s). Cost per op: the "
             "ceph-osd process's CPU time "
             "(utime+stime, /proc/PID/stat) over the ops its own counters "
             "saw (op_r+op_w+subop_w, admin socket), traced minus untraced "
             "in each pair; median (min-max) over the pairs, in us. With "
             "`--osd 0`, osd.1 and osd.2 are not traced (marked untraced). "
             "%s%s"
             % (res["osds"], res["client"], res["pairs"], res["secs"],
                res["runtime_s"], res.get("prefill_s", 0),
                "Windows as in the main part (the tracer started under "
                "load, the window opened once it had settled)."
                if res.get("window") == "steady" else
                "(This run predates the steady-load windows: the tracer "
                "was started before each fio run, the IOPS are fio's.)",
                pair_order(res)),
             "",
             "| workload | traced | IOPS ratio median (min-max) | p99 ratio | "
             "untraced / traced IOPS | " + " | ".join(
                 "osd.%d added CPU per op" % i for i in range(res["osds"])) +
             " | tracer CPU s per 10,000 ops |",
             "|---|---|---|---|---|" + "---|" * res["osds"] + "---|"]
    lines += _osds_rows(res) + _osds_notes(res) + [""]
    return "\n".join(lines)


def _osds_rows(res):
    """A row per workload and mode: IOPS, p99 and each OSD's added CPU
    per op."""
    lines = []
    for wl, modes in res["workloads"].items():
        for mode in OSDS_MODES:
            s = modes[mode]
            cells = []
            for p in s["per_osd"]:
                c = p["added_us_per_op"]
                cells.append("-" if c is None else "%.1f (%.1f-%.1f)%s" % (
                    c["median"], c["min"], c["max"],
                    "" if mode == "all" or p["osd"] == 0 else " untraced"))
            lines.append("| %s | `%s` | %.3f (%.3f-%.3f) | %s | %d / %d | %s "
                         "| %.4f |" % (
                             wl, OSDS_LABELS[mode], s["iops_ratio_median"],
                             s["iops_ratio_min"], s["iops_ratio_max"],
                             "%.2f" % s["p99_ratio_median"]
                             if s["p99_ratio_median"] else "-",
                             s["untraced_iops_median"],
                             s["traced_iops_median"], " | ".join(cells),
                             s["tracer_cpu_s_per_10k_ops"]))
    return lines


def _osds_notes(res):
    """The untraced CPU per op for scale, what an untraced OSD pays, and
    whether the cost per op holds with three OSDs traced."""
    lines = ["", "Untraced CPU per op, for scale (median over the untraced "
             "runs of the `--osd all` pairs): " + "; ".join(
                 "%s %s" % (wl, ", ".join(
                     "osd.%d %.0f us" % (p["osd"],
                                         p["untraced_us_per_op"]["median"])
                     for p in modes["all"]["per_osd"]
                     if p["untraced_us_per_op"]))
                 for wl, modes in res["workloads"].items()) + ".", ""]
    lines += ["What an OSD pays without probes of its own, from osd.1 and "
              "osd.2 under `--osd 0` (the scheduler programs filtering its "
              "events out, plus per-op CPU that moves with the IOPS tracing "
              "osd.0 costs the client; the rest of a traced OSD's figure is "
              "its probes): " + "; ".join(
                  "%s %s" % (wl, ", ".join(
                      "osd.%d %.1f us" % (p["osd"],
                                          p["added_us_per_op"]["median"])
                      for p in modes["one"]["per_osd"][1:]
                      if p["added_us_per_op"]))
                  for wl, modes in res["workloads"].items()) + ".", ""]
    lines += ["Does the cost per op stay put when three OSDs are traced "
              "instead of one? (Holds when each OSD's median under "
              "`--osd all` is at most osd.0's highest pair under `--osd 0`, "
              "i.e. inside the one-OSD run-to-run spread.)", ""]
    for wl, modes in res["workloads"].items():
        holds, got, bound = cost_holds(modes)
        one = modes["one"]["per_osd"][0]["added_us_per_op"]
        if holds is None:
            lines.append("- %s: no figure for osd.0 under `--osd 0`." % wl)
            continue
        lines.append("- %s: %s. osd.0 alone: %.1f us per op (%.1f-%.1f); "
                     "all three traced: %s." % (
                         wl, "**holds**" if holds else "**does not hold**",
                         one["median"], one["min"], one["max"], ", ".join(
                             "osd.%d %.1f us%s" % (
                                 o, med, "" if med <= bound else
                                 " (above %.1f)" % bound)
                             for o, med in got)))
    return lines


def _render_stacks(st):
    """The reader part's stacks figures: a capture of waits with their
    stacks read back."""
    lines = ["", "Stacks read back: `%s` recorded with `-w CAP --stacks %d` "
             "(each second item of a burst waits ~300 us for its PG's "
             "lock): **%s waits with stacks** (%s events, %s lost, %s MB). "
             "Each wait's user stack is unwound from the copy of its top "
             "when the capture is read, symbolized from the binaries' own "
             "symbols; the window's report sums them by place (its "
             "WHERE THREADS WAITED and the workers' top lock place). Same "
             "timing as above; waits/s = the capture's waits over the "
             "median wall time." % (
                 st["program"], st["stacks_min_us"], _n(st["waits"]),
                 _n(st["events"]), _n(st["lost"]),
                 _n(st.get("capture_mb"), "{:,.1f}")), "",
             "| command | wall | waits/s | peak RSS | CPU |",
             "|---|---|---|---|---|"]
    for r in st["reads"].values():
        runs = r.get("runs_s") or [r["secs"]]
        lines.append("| `osdstage.py %s` | %.1f s (%.1f-%.1f) | %s | %.0f MB "
                     "| %.1f s |" % (r["args"], r["secs"], min(runs),
                                     max(runs), _n(r["waits_per_s"]),
                                     r["peak_rss_mb"], r["cpu_s"]))
    return lines


def render_reader(res):
    """The reader part's figures in full (one release's results)."""
    rd = res.get("reader")
    lines = []
    if rd:
        m = rd.get("machine") or {}
        n = rd["events"]
        lines += [
            "## Reading a large capture; the recorder alone", "",
            "Machine: %s, %s cores, kernel %s; run on %s, tools at %s, %s s "
            "in all." % (m.get("cpu_model", "?"), m.get("cores", "?"),
                         m.get("kernel", "?"), rd.get("date", "?"),
                         rd.get("commit", "?"), rd.get("runtime_s", "?")), "",
            "The capture: `%s` (its producer and 4 workers on 2 shards, "
            "bursts of 8 items 20 us apart) recorded by `osdstage.py -p PID "
            "--probes tests/bpf/progs/shardq.json -w CAP --ring-mb 256 1` "
            "until it exited: **%s events** (%s lost), %s MB on disk, %.0f s "
            "of recording. Each read below ran in a child process of its "
            "own (wall time, and the peak RSS from "
            "`getrusage(RUSAGE_CHILDREN)` of a wrapper whose only child it "
            "was), the capture in the page cache, %s, the reads "
            "taking turns: the median run (min-max of the wall times in "
            "brackets; peak RSS: the highest); events/s = the capture's "
            "events over the median wall time. The capture is deleted "
            "afterwards." % (
                rd["program"], _n(n), _n(rd["lost"]),
                _n(rd.get("capture_mb"), "{:,.0f}"), rd["record_secs"],
                _times(len(rd["reads"]["json"].get("runs_s") or [1]))), "",
            "| command | wall | events/s | peak RSS | CPU |",
            "|---|---|---|---|---|"]
        for key, _ in READS:
            r = rd["reads"].get(key)
            if r:
                runs = r.get("runs_s") or [r["secs"]]
                lines.append("| `osdstage.py %s` | %.1f s (%.1f-%.1f) | %s "
                             "| %.0f MB | %.1f s |" % (
                                 r["args"], r["secs"], min(runs), max(runs),
                                 _n(r["events_per_s"]), r["peak_rss_mb"],
                                 r["cpu_s"]))
        h = rd["reads"].get("html")
        if h and rd.get("ten_min_html_s"):
            lines += ["", "`--html` of a 10-minute capture, extrapolated: "
                      "%.0f s, assuming the lab's peak of %s events/s "
                      "(a 5-s capture there held 599k events) for 10 "
                      "minutes = "
                      "%.1f M events, read at this capture's --html rate of "
                      "%s events/s (the reader streams: its time grows with "
                      "the events)." % (
                          rd["ten_min_html_s"],
                          _n(rd["lab_peak_events_per_s"]),
                          rd["ten_min_events"] / 1e6,
                          _n(h["events_per_s"]))]
    st = (rd or {}).get("stacks")
    if st:
        lines += _render_stacks(st)
    rr = res.get("recorder_rates")
    if rr:
        lines += ["", "The recorder alone: tests/bpf/ringgen.py's BPF "
                  "program fills a %s MB ring at a set rate with records "
                  "shaped like osdstage's events (80 bytes) for %.0f s while "
                  "lib/native/recorder.c's drain thread (osdstage-rec), as "
                  "`osdstage.py -w` runs it, writes them to stream files; "
                  "CPU is that thread's (schedstat) over the run." % (
                      _n(rr["ring_mb"]), rr["secs"]), "",
                  "| set rate | written events/s | made | written | lost | "
                  "recorder CPU |", "|---|---|---|---|---|---|"]
        for r in rr["rows"]:
            lines.append("| %s | %s | %s | %s | %s | %.1f %% of a core |" % (
                _n(r["set_rate"]), _n(r["rate"]), _n(r["made"]),
                _n(r["events"]), _n(r["lost"]), r["cpu_pct"]))
    return lines + [""]

def _times(k):
    return "once" if k == 1 else "%d times" % k
