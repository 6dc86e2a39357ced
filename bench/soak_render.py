"""The exporter soak's report (bench/exporter_soak.py measures it): the
soak's targets' rows, the exporter's rows of the lean tier's targets
and the BENCHMARKS.md section, from a soak's results; and the targets and sampling settings both sides use.
Imports labkit.py only."""
import statistics

import labkit as bench

SAMPLE_S = 30
SCRAPE_S = 5           # Prometheus' scrape interval, and the timed GETs'
SCRAPE_TARGET_MS = 100
RSS_TARGET_PCT = 5.0
# the whole (the lean tier always on, the full tier cycled, the
# exporter itself) at saturation, from its parts; at half load: the bound
SATURATED_PCT = 1.5


def _ms(res, key):
    """"max X ms, p99 Y ms" of a scrape time in a soak's results."""
    mx, p99 = res.get(key + "_max_ms"), res.get(key + "_p99_ms")
    if mx is None:
        return "-"
    return "%.1f ms" % mx + (", p99 %.1f ms" % p99 if p99 is not None
                             else "")


def soak_rows(res):
    """The soak's targets table's rows for one soak."""
    ok_rss = abs(res["rss_drift_pct"]) <= RSS_TARGET_PCT
    anon = res.get("rss_anon_drift_pct")
    anon_txt = ""
    if anon is not None:
        # its own memory within the target, and no growth at all: resident
        # pages of its libraries the kernel dropped (the lab's page cache
        # presses) are not the exporter's doing
        ok_rss = abs(anon) <= RSS_TARGET_PCT and \
            res["rss_drift_pct"] <= RSS_TARGET_PCT
        f0, f1 = res["rss_file_kb"]
        anon_txt = "; its own (anonymous) memory %+.2f %%, mapped files " \
            "%d -> %d kB" % (anon, f0, f1)
    grew = res["threads_fullness_last"] > res["threads_fullness_first"] \
        * 1.05 + 0.001
    # and from 10 minutes on: growth that stops (new series, allocator
    # arenas) is told apart from a leak
    late = [x for x in res["samples"] if x["t"] >= 600]
    late_txt = "; from 10 min on %+.2f %%" % (
        100.0 * (late[-1]["rss_kb"] - late[0]["rss_kb"]) /
        late[0]["rss_kb"]) if len(late) > 1 else ""
    return [
        ("exporter RSS over the soak (after 2 min)", "flat within 5 %",
         "%+.2f %% (%d -> %d kB, max %d%s%s)" % (
             res["rss_drift_pct"], res["rss_first_kb"], res["rss_last_kb"],
             res["rss_max_kb"], late_txt, anon_txt), ok_rss),
        ("BPF maps", "not growing",
         "threads table %.4f -> %.4f full; ops table at most %.4f full "
         "(%d in flight)" % (res["threads_fullness_first"],
                             res["threads_fullness_last"],
                             res["ops_fullness_max"],
                             res["in_flight_max"]), not grew),
        _scrape_row(res),
        ("measured cost vs the default bound", "<= %g %%" % res["bound_pct"],
         "%s of the host's CPU (%d pairs of %d s; the exporter process "
         "alone %.3f %% in the soak; its own estimate %.3f %%, the full "
         "tier attached %.0f %% of the time%s)" % (
             bench._sp(res["measured_pct"], "%.2f", " %")
             if res["measured_pct"] else "-", len(res["pairs"]),
             res["pair_secs"], res["exporter_cpu_pct"],
             res["estimate_pct_last"], 100 * res["attached_fraction"],
             ", the lean tier %.0f %%" % (
                 100 * res["lean_attached_fraction"])
             if "lean_attached_fraction" in res else ""),
         _cost_met(res, res["measured_pct"])),
    ] + ([_parts_row(res, "pairs", "parts_pct", _saturated_target(res),
                     "at saturation")] if res.get("parts_pct") else []) + \
        ([_counted_row(res)] if "ops_counted" in res else []) + \
        (_rate_rows(res) if "rate_pairs" in res else []) + \
        ([_otlp_row(res["otlp"])] if "otlp" in res else [])


def _saturated_target(res):
    """The whole's bound at saturation: SATURATED_PCT; with ops sent as
    OTLP traces, the default bound itself (the traces' cost is held to
    the exporter's bound even there)."""
    return res["bound_pct"] if "otlp" in res else SATURATED_PCT


def _otlp_row(o):
    """What the exporter sent as OTLP traces over the soak: none dropped
    while the collector keeps up."""
    return (
        "OTLP traces (1 op in %d by request id and every op over %g ms, "
        "to Jaeger on the same host)" % (o["sample"], o["over_us"] / 1e3),
        "none dropped",
        "%.2f spans/s sent (%d over %.0f s), %.2f/s dropped (%d); ops "
        "chosen %.2f/s in the sample and %.2f/s over the threshold, %.2f/s "
        "not handed over (rate cap, ring); Jaeger's own CPU %.3f %% of the "
        "host's (not in the exporter's cost)" % (
            o["spans_sent_per_s"], o["spans_sent"], o["secs"],
            o["spans_dropped_per_s"], o["spans_dropped"],
            o["ops_sampled_per_s"], o["ops_slow_per_s"],
            o["ops_dropped_per_s"], o["jaeger_cpu_pct"]),
        o["spans_sent"] > 0 and not o["spans_dropped"])


def _counted_row(res):
    """The share of Ceph's client ops the exported op counts hold (the
    lean tier's, attached all the time): the target is 100 %."""
    got, ceph = res["ops_counted"]
    share = 100.0 * got / ceph if ceph else 0.0
    # the exporter's last refresh may miss the last seconds' ops
    lag = 100.0 * res["ops_per_s"] * res.get("refresh_s", 5.0) / ceph \
        if ceph else 0.0
    return ("ops counted (op_latency, lean tier) vs Ceph's op_r + op_w",
            "100 %", "%.2f %% (%d of %d over the soak; the figures lag by "
            "up to a refresh: %.2f %% of them)" % (share, got, ceph, lag),
            ceph > 0 and abs(100.0 - share) <= max(1.0, lag))


def _scrape_row(res):
    """The slowest scrape's row: judged on the exporter's answer and on
    Prometheus at the monitoring side's priority; the co-located
    Prometheus is shown (module docstring). Soaks before that had one
    Prometheus, at the OSDs' priority, and were judged on it."""
    what, target = "slowest scrape", "<= %d ms" % SCRAPE_TARGET_MS
    if "monitor_nice" not in res:
        got = "%.1f ms (ours, every %d s: %s), %s (Prometheus' scrape_" \
            "duration_seconds, every 5 s)%s%s" % (
                res["scrape_max_ms"], SAMPLE_S,
                "the GET alone" if res.get("scrape_timed") == "GET" else
                "the GET and the bench's own parse of the page",
                _ms(res, "prometheus_scrape"),
                "; Prometheus scraping itself on the same machine: %s" %
                _ms(res, "prometheus_self_scrape")
                if res.get("prometheus_self_scrape_max_ms") is not None
                else "", _page_txt(res))
        worst = max(res["scrape_max_ms"],
                    res["prometheus_scrape_max_ms"] or 0)
        return what, target, got, worst <= SCRAPE_TARGET_MS
    nice = res["monitor_nice"]
    got = ("the exporter's answer (a GET as Prometheus asks, gzip, every "
           "%d s, by a client at nice %d): %s over %d GETs, %d failed; "
           "Prometheus' scrape_duration_seconds (its parse and store of "
           "every sample included) at nice %d, a monitoring host with CPU "
           "to spare: %s, scraping itself %s; a second Prometheus at the "
           "OSDs' priority on the same 2 cores (shown, not judged): %s, "
           "scraping itself %s%s" % (
               SCRAPE_S, nice, _ms(res, "scrape"), res["scrape_gets"],
               res["scrape_errors"], nice, _ms(res, "prometheus_scrape"),
               _ms(res, "prometheus_self_scrape"),
               _ms(res, "colocated_scrape"),
               _ms(res, "colocated_self_scrape"), _page_txt(res)))
    ok = not res["scrape_errors"] and res["scrape_gets"] > 0 and \
        max(res["scrape_max_ms"], res["prometheus_scrape_max_ms"]) \
        <= SCRAPE_TARGET_MS
    return what, target, got, ok


def _page_txt(res):
    """"; the page: N samples, X kB (Y kB gzip)" when the soak counted."""
    if not res.get("page_samples"):
        return ""
    plain, gz = res["page_bytes"]
    return "; the page: %d samples, %.0f kB (%.0f kB gzip-compressed, " \
        "as Prometheus asks for it)" % (res["page_samples"], plain / 1e3,
                                       gz / 1e3)


def _rate_rows(res):
    """The fixed-rate pairs' rows: the whole host's difference and, when
    measured, the upper bound from the cost's parts (judged by it)."""
    load = "fio at %d writes + %d reads/s, %.0f %% of the soak's %.0f " \
        "writes/s" % (res["rate_iops"], res["rate_iops"],
                      100.0 * res["rate_iops"] / max(res["full_write_iops"],
                                                     1),
                      res["full_write_iops"])
    diff = "%s of the host's CPU (%d pairs of %d s; %s)" % (
        bench._sp(res["rate_measured_pct"], "%.2f", " %")
        if res["rate_measured_pct"] else "-", len(res["rate_pairs"]),
        res["pair_secs"], load)
    rows = [("measured cost vs the default bound, fio held at a fixed rate",
             "<= %g %%" % res["bound_pct"], diff,
             _cost_met(res, res["rate_measured_pct"]))]
    if res.get("rate_parts_pct"):
        rows.append(_parts_row(res, "rate_pairs", "rate_parts_pct",
                               res["bound_pct"], "at half load"))
    return rows


def _parts_row(res, pairs_key, key, target, load):
    """The cost of the whole from its parts in the pairs `pairs_key`
    (an upper bound), judged against `target` %."""
    parts = res[key]
    ps = [p["traced"]["parts"] for p in res[pairs_key]]
    med = {k: statistics.median(x[k] for x in ps)
           for k in ("exporter_pct", "bpf_pct", "traps_pct")}
    traps = statistics.median(p["traced"]["parts"]["uprobe_traps"] /
                              p["traced"]["secs"] for p in res[pairs_key])
    return (
        "the same, from the cost's parts (an upper bound), %s" % load,
        "<= %g %%" % target,
        "%s of the host's CPU in the same pairs: the exporter process "
        "%.3f %%, its BPF programs (both tiers) %.3f %%, %.0f uprobe "
        "traps/s at %.1f us %.3f %% (medians); an OSD's CPU per op swings "
        "too much for the whole host's difference above to tell 1 %%" % (
            bench._sp(parts, "%.2f", " %"), med["exporter_pct"],
            med["bpf_pct"], traps, res["trap_ns"] / 1e3, med["traps_pct"]),
        parts["max"] <= target)


def _cost_met(res, m):
    """Met when the median `m` is within the bound, unless the pairs
    spread wider than twice the bound: then the measure cannot tell."""
    if not m:
        return None
    if m["max"] - m["min"] > 2 * res["bound_pct"]:
        return ("**cannot tell**: the pairs spread over %.1f points, the "
                "bound is %g" % (m["max"] - m["min"], res["bound_pct"]))
    return m["median"] <= res["bound_pct"]


def render_soak(res):
    lines = ["## The exporter left running (%d-min soak, %s)" % (
        res["soak_min"], bench._release(res).capitalize()), "",
        "`make bench BENCH=exporter` (also in `make bench`): %s; "
        "tools/osdstage_exporter.py with its default cost bound (%g %%)%s, "
        "scraped every 5 s by %s; commit %s, %s." % (
            res["load"], res["bound_pct"],
            ", sending ops as OTLP traces (--otlp --otlp-sample %d "
            "--otlp-over %d)" % (res["otlp"]["sample"],
                                 res["otlp"]["over_us"])
            if "otlp" in res else "",
            "two Prometheus servers, one at nice %d (standing for a "
            "monitoring host), one at the OSDs' priority" %
            res["monitor_nice"] if "monitor_nice" in res else "Prometheus",
            res.get("commit") or "?", res["date"]), "",
        "| measure | target | measured | met |", "|---|---|---|---|"]
    for what, target, got, ok in soak_rows(res):
        lines.append("| %s | %s | %s | %s |" % (what, target, got,
                                                 bench._met(ok)))
    lines += ["", "During the soak: %.0f ops/s (all three OSDs' ops, "
              "replica ops included), %s us of OSD CPU per op; measurements "
              "lost: %s (with duty cycles, an op enqueued or sent to its "
              "replicas while the probes were off is unknown when it is "
              "dequeued, done or replied to: op_unknown, reply_unknown; the "
              "others: osdstage(8), JSON, lost)." % (
                  res["ops_per_s"],
                  "%.1f" % res["osd_us_per_op_traced"]
                  if res["osd_us_per_op_traced"] else "-",
                  ", ".join("%s %d" % kv for kv in
                            sorted(res.get("lost_by_reason", {}).items()))
                  or "none"),
              "", _pairs_line(res)]
    if "rate_pairs" in res:
        lines += ["", "At the fixed rate: %s." % _pair_list(
            res["rate_pairs"])]
    lines.append("")
    return lines


def _pairs_line(res):
    """The cost pairs' windows. A-B-A pairs have an untraced window after
    the traced one too; results files without "untraced_windows", before
    it only."""
    aba = bool(res["pairs"]) and "untraced_windows" in res["pairs"][0]
    return ("The cost pairs, ops in %d s untraced (%s) / %d s with the "
            "exporter (host busy s): %s." % (
                res["pair_secs"] * (2 if aba else 1),
                "before and after, together" if aba else "before",
                res["pair_secs"], _pair_list(res["pairs"])))


def _pair_list(pairs):
    return "; ".join("%d (%.1f) / %d (%.1f)" % (
        p["untraced"]["ops"], p["untraced"]["host_s"], p["traced"]["ops"],
        p["traced"]["host_s"]) for p in pairs)
