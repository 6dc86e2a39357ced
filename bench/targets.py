"""bench/targets.py - judging the figures against their targets: the
targets (TARGETS, BOUND_PCT), the tracing modes' rows from every
release's results with Pacific's 1-OSD run as the reference (target_rows,
_vs_pacific, _slowest), whether the cost per op holds when three OSDs
are traced instead of one (cost_holds), the lean tier's rows (lean_rows:
the lean tier, the exporter's soak, the trap against the floor part's),
and the reader's rows (reader_rows). It reads results dicts only; the
tables around these rows are render.py's, why a missed target is missed
why.py's."""
from labkit import _range, _release, _sp
from measure_reader import READER_MIN_EVENTS, READS
from soak_render import SATURATED_PCT, _counted_row, _parts_row
from summary import RELEASE_ORDER, _get, cost_parts, toggled_pairs


BOUND_PCT = 2.0             # what the bounded mode asks (--max-overhead 2)
TARGETS = {
    "default": 0.95, "userspace": 0.96, "bounded": 0.98,
    "avg_ns": 200, "startup_s": 0.5, "peak_rss_mb": 60,
    "recorder_events_per_s": 100000, "recorder_cpu_pct": 10,
    # the tracing modes
    "default_added_us_per_read": 10.0, "userspace_added_us_per_op": 5.0,
    "bounded_cost_pct": BOUND_PCT, "hits_per_read": 6.0,
    "release_cost_within": 0.20,
    # the lean tier, the default mode's tighter bound, the trap
    "lean_added_us_per_read": 2.5, "lean": 0.98,
    "default_added_us_per_read_lean": 8.0, "trap_vs_floor": 1.3,
}


def cost_holds(wl_res):
    """Does the per-op cost on an OSD stay the same when every OSD is
    traced? Holds when each OSD's median added CPU per op under --osd all
    is at most the highest pair of osd.0 under --osd 0 (inside the
    one-OSD run-to-run spread). -> (holds, [(osd, median_all)], bound)"""
    one = wl_res["one"]["per_osd"][0]["added_us_per_op"]
    if one is None:
        return None, [], None
    got = [(p["osd"], p["added_us_per_op"]["median"])
           for p in wl_res["all"]["per_osd"] if p["added_us_per_op"]]
    return all(m <= one["max"] for _, m in got), got, one["max"]


def _slowest(res):
    """(name, avg ns) of the default mode's slowest program that ran."""
    ran = [(p["avg_ns"], n) for n, p in (res.get("programs") or {}).items()
           if p.get("runs")]
    if not ran:
        return None, None
    ns, name = max(ran)
    return name, ns


def _mark(ok):
    return "ok" if ok else "**MISSED**"


def _pacific(results):
    return next((r for r in results if _release(r) == "pacific"), None)


def _mode(res, m, wl="randread"):
    """One mode's summary in a release's results, its IOPS ratio as a
    spread whichever way the run saved it."""
    s = dict(_get(res, "modes", m, wl) or {})
    if "iops_ratio_median" in s and "iops_ratio" not in s:
        s["iops_ratio"] = {k: s["iops_ratio_" + k]
                           for k in ("median", "min", "max")}
    return s


def _cost_rows(res, m, what, us_key, ratio_key):
    """The added OSD CPU per read and the IOPS ratio of mode m: two
    rows."""
    us, most = _mode(res, m).get("osd_added_us_per_op"), TARGETS[us_key]
    r, least = _mode(res, m).get("iops_ratio"), TARGETS[ratio_key]
    return [("%s, added OSD CPU per 4 KiB read" % what,
             _sp(us, unit=" us"), "<= %g us" % most,
             us["median"] <= most if us else None),
            ("%s, IOPS ratio (4 KiB reads, full rate)" % what,
             _sp(r, "%.3f"), ">= %g" % least,
             r["median"] >= least if r else None)]


def _mean_verdict(s, most=None, least=None):
    """A toggled figure {mean, sem} against a bound: met when the mean is
    two standard errors inside it, not met when two outside, else a str
    saying the pairs cannot tell."""
    lo = s["mean"] - 2 * (s["sem"] or 0)
    hi = s["mean"] + 2 * (s["sem"] or 0)
    inside, outside = (hi <= most, lo > most) if most is not None else \
        (lo >= least, hi < least)
    if inside or outside:
        return inside
    return "**cannot tell**: the bound is within two standard errors " \
        "of the mean"


def _toggled_rows(res, m, what, us_key, ratio_key):
    """_cost_rows from the toggle part's figures of mode m where the run
    has them (mean +- standard error over its pairs)."""
    t = _get(res, "toggled", "modes", m)
    if not t:
        return _cost_rows(res, m, what, us_key, ratio_key)
    n = toggled_pairs(res)
    us, r = t["added_us"], t["iops_ratio"]
    most, least = TARGETS[us_key], TARGETS[ratio_key]
    return [("%s, added OSD CPU per 4 KiB read" % what,
             "%.2f +- %.2f us (%s; median %.2f)" % (
                 us["mean"], us["sem"] or 0, n, us["median"]),
             "<= %g us" % most, _mean_verdict(us, most=most)),
            ("%s, IOPS ratio (4 KiB reads, full rate)" % what,
             "%.3f +- %.3f (%s)" % (r["mean"], r["sem"] or 0, n),
             ">= %g" % least, _mean_verdict(r, least=least))]


def target_rows(results, osds_results):
    """The tracing modes' targets: [(measure, measured, target, met)],
    met None when not measured. Pacific's 1-OSD run is the reference."""
    pac = _pacific(results)
    rows = []

    def mode(m, wl="randread"):
        return _mode(pac, m, wl)

    rows += _cost_rows(pac, "default", "default mode",
                       "default_added_us_per_read", "default")
    dflt = mode("default").get("osd_added_us_per_op")
    us = [(wl, mode("userspace", wl).get("osd_added_us_per_op"))
          for wl in ("randread", "write")]
    got = [(wl, s) for wl, s in us if s]
    rows.append(("user-space stages only (`--no-kernel`), added OSD CPU "
                 "per op", "; ".join("%s %s" % (wl, _sp(s, unit=" us"))
                                     for wl, s in got) or "-", "<= 5 us",
                 all(s["median"] <= 5 for _, s in got) if got else None))
    r = mode("bounded").get("iops_ratio")
    rows.append(("`--max-overhead 2`, IOPS ratio (4 KiB reads)",
                 _sp(r, "%.3f"), ">= 0.98",
                 r["median"] >= 0.98 if r else None))
    cost = [(wl, mode("bounded", wl).get("cost_pct"))
            for wl in ("randread", "write")]
    got = [(wl, s) for wl, s in cost if s]
    rows.append(("`--max-overhead 2`, measured cost (added host CPU, share "
                 "of all CPUs)", "; ".join("%s %s" % (wl, _sp(
                     s, "%.2f", " %")) for wl, s in got) or "-", "<= 2 %",
                 all(s["median"] <= BOUND_PCT for _, s in got)
                 if got else None))
    name, ns = _slowest(pac) if pac else (None, None)
    rows.append(("slowest BPF program, ns per run (default mode)",
                 "%.0f ns (%s)" % (ns, name) if name else "-", "<= 200 ns",
                 ns <= 200 if name else None))
    h = mode("default").get("uprobe_hits_per_op")
    rows.append(("uprobe hits per 4 KiB read, default mode",
                 _sp(h, "%.2f"), "<= 6",
                 round(h["median"], 2) <= 6 if h else None))
    for rel in RELEASE_ORDER[1:]:
        other = next((r for r in results if _release(r) == rel), None)
        s = _get(other, "modes", "default", "randread", "osd_added_us_per_op")
        rows.append(_vs_pacific(
            "%s, default mode added OSD CPU per 4 KiB read vs Pacific 1-OSD"
            % rel.capitalize(), [("", s)], dflt))
    osds = next((r for r in osds_results if _release(r) == "pacific"), None)
    per = _get(osds, "workloads", "randread", "all", "per_osd") or []
    rows.append(_vs_pacific(
        "3 OSDs traced at once (`--osd all`), added CPU per 4 KiB read on "
        "each OSD vs Pacific 1-OSD%s" % (
            "" if not osds or osds.get("window") == "steady" else
            " (the 3-OSD run predates the steady-load windows)"), [("osd.%d " % p["osd"],
                                       p["added_us_per_op"]) for p in per],
        dflt))
    return rows


def lean_rows(results, soak, floor_res):
    """The lean tier's, the exporter's and the trap's targets, in their
    table's order: [(measure, measured, target, met)], met None when not
    measured. `soak`: the exporter part's results, `floor_res`: the floor
    part's (either None)."""
    pac = _pacific(results)
    rows = _toggled_rows(pac, "lean", "lean tier (`--lean`)",
                         "lean_added_us_per_read", "lean")
    counted = "exporter, share of the ops Ceph counted in its lean " \
        "figures (op_latency) over the soak"
    if soak and "ops_counted" in soak:
        _, target, got, ok = _counted_row(soak)
        rows.append((counted, got, target, ok))
    else:
        rows.append((counted, "-", "100 %", None))
    for key, pairs, most, load in (
            ("parts_pct", "pairs", SATURATED_PCT, "at saturation"),
            ("rate_parts_pct", "rate_pairs", 1.0, "at half load")):
        what = "exporter, cost of the whole (lean always on, full tier " \
            "cycled, the exporter itself) from its parts, %s" % load
        if soak and soak.get(key):
            _, target, got, ok = _parts_row(soak, pairs, key, most, load)
            rows.append((what, got, target, ok))
        else:
            rows.append((what, "-", "<= %g %%" % most, None))
    rows += _toggled_rows(pac, "default", "default mode",
                          "default_added_us_per_read_lean", "default")[:1]
    vs = _get(pac, "toggled", "modes", "default", "vs_optracker_us")
    what = "default mode against Ceph's own OpTracker: added OSD CPU per " \
        "4 KiB read, the default's less OpTracker's (the same run, round " \
        "by round)"
    if vs:
        rows.append((what, "%.2f +- %.2f us (%s; median %.2f)" % (
            vs["mean"], vs["sem"] or 0, toggled_pairs(pac), vs["median"]),
            "<= 0 us", _mean_verdict(vs, most=0.0)))
    else:
        rows.append((what, "-", "<= 0 us", None))
    rows.append(_estimate_row(pac))
    rows.append(_trap_row(results, floor_res))
    return rows


def _estimate_row(res):
    """The tool's own cost estimates against the toggled measure, every
    mode: met when all agree (toggle.estimate_check)."""
    what = "the tool's own cost estimate vs the measured added host CPU " \
        "per read, every mode (live header; --max-overhead and exporter)"
    modes = _get(res, "toggled", "modes") or {}
    got = [(m, s) for m, s in modes.items() if "estimate_us" in s]
    if not got:
        return (what, "-", "within 25 % (or two standard errors)", None)
    text = "; ".join("%s %.2f and %.2f us vs %.2f +- %.2f" % (
        m, s["estimate_us"]["us"], s["estimate_runs_us"]["us"],
        s["host_added_us"]["mean"], s["host_added_us"]["sem"] or 0)
        for m, s in got)
    ok = all(s[k]["agrees"] for _, s in got
             for k in ("estimate_us", "estimate_runs_us"))
    return (what, "%s (%s)" % (text, toggled_pairs(res)),
            "within 25 % (or two standard errors)", ok)


def _trap_row(results, floor_res):
    """A trap per hit inside the busy OSD (each release's last main part,
    or its toggle part where it has one: cost_parts) against the floor's
    of the same kind: a probe on `push` for Pacific's build, after
    `endbr64` for the CET builds. Judged on the median (the toggled mean),
    but one below the floor itself (less than a trap costs the trivial
    target) is the pairs' noise: it cannot tell."""
    what = "trap cost per uprobe hit inside the OSD vs the trivial " \
        "target's floor (same probe kind)"
    most = TARGETS["trap_vs_floor"]
    got = []
    for res in results:
        c = cost_parts(res)
        us = _get(res, "modes", "userspace", "randread",
                  "osd_added_us_per_op")
        kind, floor = floor_ns(res, floor_res)
        if c and c["toggled"] and floor:
            # the toggle part's: its standard error over the hits
            got.append((_release(res), 1000 * c["per_hit"],
                        "+- %.0f, %s" % (1000 * res["toggled"]["trap"]["sem"],
                                         toggled_pairs(res)), kind, floor))
        elif c and us and floor:
            # the pairs' own range, the programs taken out as for the
            # median (cost_parts)
            progs = c["userspace_added"] - c["traps"]
            got.append((_release(res), 1000 * c["per_hit"],
                        "pairs " + _range(*[1000 * (us[k] - progs) /
                                            c["hits"] for k in
                                            ("min", "max")], "%.0f"),
                        kind, floor))
    if not got:
        return what, "-", "within %gx" % most, None
    text = "; ".join("%s %.0f ns (%s) vs %s %.0f ns = %.2f x" % (
        rel, ns, spread, kind, floor, ns / floor)
        for rel, ns, spread, kind, floor in got)
    noise = [(rel, ns, floor) for rel, ns, _, _, floor in got if ns < floor]
    if noise:
        met = "**cannot tell**: %s below the floor itself (the pairs' " \
            "noise, not a cheaper trap)" % ", ".join(
                "%s's %.0f ns" % (rel, ns) for rel, ns, _ in noise)
    else:
        met = all(ns / floor <= most for _, ns, _, _, floor in got)
    return what, text, "within %gx" % most, met


def floor_ns(res, floor_res):
    """The floor part's probe kind for a release's build and its ns per
    hit (None without it): on `push`, after `endbr64` on CET builds."""
    kind = "cet" if (res.get("machine") or {}).get("cet") else "push"
    return kind, _get(floor_res, "kinds", kind, "ns_per_hit")


def _vs_pacific(measure, got, ref):
    """A "within 20 % of Pacific 1-OSD" row."""
    got = [(label, s) for label, s in got if s]
    if not got or not ref or ref["median"] <= 0:
        return (measure, "not measured" if not got else
                "; ".join("%s%s" % (lb, _sp(s, unit=" us")) for lb, s in got),
                "within 20 %", None)
    ratios = [(label, s, s["median"] / ref["median"]) for label, s in got]
    return (measure, "; ".join("%s%s = %.2f x" % (lb, _sp(s, unit=" us"), q)
                               for lb, s, q in ratios) +
            " (Pacific %.1f us)" % ref["median"], "within 20 %",
            all(abs(q - 1) <= TARGETS["release_cost_within"]
                for _, _, q in ratios))


def _n(x, fmt="{:,}"):
    return "-" if x is None else fmt.format(x)


def reader_rows(results):
    """The reader's targets: [(measure, measured, target, met)], from the
    first release's results that have the reader part (Pacific first)."""
    res = next((r for r in results if r.get("reader")), None)
    rows = []
    rd = (res or {}).get("reader") or {}
    reads = rd.get("reads") or {}
    n = rd.get("events")
    rows.append(("the capture read (controlled program, `-w --ring-mb "
                 "256`)",
                 "%s events (%s lost), %s MB" % (
                     _n(n), _n(rd.get("lost")), _n(rd.get("capture_mb"),
                                                   "{:,.0f}"))
                 if n else "-", ">= 10,000,000 events",
                 n >= READER_MIN_EVENTS if n else None))
    for key, label in (("json", "`-r CAP -j`"),
                       ("slowest", "`-r CAP --slowest 5 -j`")):
        r = reads.get(key)
        rows.append(("%s, events/s" % label,
                     "%s (%.1f s)" % (_n(r["events_per_s"]), r["secs"])
                     if r else "-", ">= 2,000,000",
                     r["events_per_s"] >= 2000000 if r else None))
    got = [(k, reads[k]["peak_rss_mb"]) for k, _ in READS if k in reads]
    rows.append(("peak RSS of each read (`-j`; `--slowest 5 -j`; `--html`)",
                 "; ".join("%s %.0f MB" % (k, mb) for k, mb in got) or "-",
                 "<= 300 MB", all(mb <= 300 for _, mb in got)
                 if got else None))
    h = reads.get("html")
    rows.append(("`--html` of a 10-minute capture at the lab's peak "
                 "(extrapolated)",
                 "%.0f s (%s events/s on this capture; %.1f M events "
                 "assumed)" % (rd["ten_min_html_s"], _n(h["events_per_s"]),
                               rd["ten_min_events"] / 1e6)
                 if h and rd.get("ten_min_html_s") else "-", "< 60 s",
                 rd["ten_min_html_s"] < 60 if h and rd.get("ten_min_html_s")
                 else None))
    rr = _get(res, "recorder_rates", "rows") or []
    r5 = next((r for r in rr if r["set_rate"] == 500000), None)
    # the highest set rate at which every event made was written
    clean = [r for r in rr if r["lost"] == 0 and r["events"] == r["made"]]
    top = max(clean, key=lambda r: r["set_rate"]) if clean else r5
    rows.append(("recorder alone (ringgen), the highest set rate with "
                 "none lost: written events/s",
                 "%s events/s at a set %s (%s made, %s written, %s lost)" % (
                     _n(top["rate"]), _n(top["set_rate"]), _n(top["made"]),
                     _n(top["events"]), _n(top["lost"])) if top else "-",
                 ">= 500,000 events/s, 0 lost",
                 top in clean and top["rate"] >= 500000 if top else None))
    rows.append(("recorder thread's CPU at 500,000 events/s",
                 "%.1f %% of a core" % r5["cpu_pct"] if r5 else "-",
                 "< 10 % of a core", r5["cpu_pct"] < 10 if r5 else None))
    pk = _get(res, "recorder", "lab_peak_cpu_pct")
    rows.append(("osdstage -w's CPU at the lab's peak (record mode, 4 KiB "
                 "reads, whole tool)", "%.1f %% of a core at %s events/s" % (
                     pk, _n(_get(res, "recorder", "lab_peak_events_per_s")))
                 if pk is not None else "-", "< 10 % of a core",
                 pk < 10 if pk is not None else None))
    return rows
