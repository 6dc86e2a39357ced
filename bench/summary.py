"""bench/summary.py - from measurements to results: a mode's interleaved
untraced/traced windows summarized into medians and min-max spreads
(summarize; summarize_main on the 1-OSD lab, every figure and each pair;
summarize_osds per OSD on the 3-OSD lab), every release's saved results
read back from bench/results/ (load_results), and where the default
mode's added OSD CPU per read goes, taken apart from one release's
results (cost_parts). Computation over dicts only: nothing here drives
the lab, judges a target or renders text."""
import json
import os
import statistics

from labkit import NCPU, RESULTS, _spread
from measure import UPROBE_HITS


def report_hits(report):
    """The tool's hit counters over its run: {counter: hits} (a host
    report, --osd all, carries them at the top)."""
    return dict(((report or {}).get("overhead") or {}).get("hits") or {})


def summarize(pairs):
    ratios = [b["iops"] / a["iops"] for a, b in pairs]
    p99 = [b["p99_us"] / a["p99_us"] for a, b in pairs if a["p99_us"]]
    return {"iops_ratio_median": round(statistics.median(ratios), 4),
            "iops_ratio_min": round(min(ratios), 4),
            "iops_ratio_max": round(max(ratios), 4),
            "p99_ratio_median": round(statistics.median(p99), 4) if p99 else None,
            "untraced_iops_median": round(statistics.median(
                a["iops"] for a, _ in pairs)),
            "traced_iops_median": round(statistics.median(
                b["iops"] for _, b in pairs)),
            "pairs": len(pairs)}


def _sub(x, y):
    return None if x is None or y is None else x - y


def summarize_main(pairs):
    """One mode and workload on the 1-OSD lab, over its pairs: every
    figure as {median, min, max}; per pair too (`per_pair`)."""
    s = summarize(pairs)
    rows = []
    for a, b in pairs:
        ua, ub = a["osds"][0]["cpu_us_per_op"], b["osds"][0]["cpu_us_per_op"]
        osd_added = _sub(ub, ua)
        host_added = _sub(b["host_us_per_op"], a["host_us_per_op"])
        tracer = b.get("tracer_us_per_op")
        hits = report_hits(b.get("report"))
        life_ops = b.get("life_ops") or 0
        up = [hits[n] for n in UPROBE_HITS if n in hits]
        rows.append({
            "iops_ratio": b["iops"] / a["iops"],
            "p99_ratio": b["p99_us"] / a["p99_us"] if a["p99_us"] else None,
            "osd_added_us_per_op": osd_added,
            "osd_untraced_us_per_op": ua,
            "host_added_us_per_op": host_added,
            "host_untraced_us_per_op": a["host_us_per_op"],
            "tracer_us_per_op": tracer,
            "client_added_us_per_op": _sub(b["client_us_per_op"],
                                           a["client_us_per_op"]),
            "other_us_per_op": _sub(_sub(_sub(host_added, osd_added),
                                         tracer), _sub(b["client_us_per_op"],
                                                       a["client_us_per_op"])),
            # what the tracing takes of the machine: the added host CPU
            # per op at the traced rate, over all CPUs' time
            "cost_pct": None if host_added is None else
            100 * host_added * b["iops"] / 1e6 / NCPU,
            "osd_cost_pct": None if osd_added is None or not ua else
            100 * osd_added / ua,
            "uprobe_hits_per_op": sum(up) / life_ops if up and life_ops
            else None,
            "hits_per_op": {n: round(v / life_ops, 3)
                            for n, v in hits.items()} if life_ops else {}})
    digits = {"iops_ratio": 4, "p99_ratio": 3, "cost_pct": 3,
              "osd_cost_pct": 2, "uprobe_hits_per_op": 3}
    for k in rows[0]:
        if k == "hits_per_op":
            continue
        s[k] = _spread([r[k] for r in rows], digits.get(k, 2))
    names = sorted({n for r in rows for n in r["hits_per_op"]})
    s["hits_per_op"] = {n: round(statistics.median(
        r["hits_per_op"].get(n, 0) for r in rows), 3) for n in names}
    s["per_pair"] = [{k: (round(v, 4) if isinstance(v, float) else v)
                      for k, v in r.items() if k != "hits_per_op"}
                     for r in rows]
    return s


def summarize_osds(pairs, n_osds):
    """summarize()'s IOPS figures plus, per OSD, the added CPU per op
    (traced minus untraced, each pair on its own) and the untraced base."""
    s = summarize(pairs)
    per = []
    for i in range(n_osds):
        added, base, ops = [], [], []
        for a, b in pairs:
            ua = a["osds"][i]["cpu_us_per_op"]
            ub = b["osds"][i]["cpu_us_per_op"]
            if ua is not None and ub is not None:
                added.append(ub - ua)
                base.append(ua)
            ops.append(b["osds"][i]["ops"])
        per.append({"osd": i, "added_us_per_op": _spread(added),
                    "untraced_us_per_op": _spread(base),
                    "traced_ops_median": round(statistics.median(ops)),
                    "added_us_per_op_pairs": [round(x, 2) for x in added]})
    s["per_osd"] = per
    ops = [sum(o["ops"] for o in b["osds"]) for _, b in pairs]
    s["tracer_cpu_s_per_10k_ops"] = round(statistics.median(
        b["tracer_cpu_s"] / max(1, n) * 1e4 for (_, b), n in zip(pairs, ops)),
        4)
    return s


RELEASE_ORDER = ["pacific", "reef", "tentacle"]


def load_results(kind=""):
    """Every release's last bench run (bench/results/<release>.json; kind
    ".osds": the osds part's, <release>.osds.json)."""
    out = []
    for rel in RELEASE_ORDER:
        path = os.path.join(RESULTS, rel + kind + ".json")
        if os.path.exists(path):
            with open(path) as f:
                out.append(json.load(f))
    return out


def _get(d, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _prog_us(programs, uprobe):
    """Sum of runs per op x ns per run of the programs that ran, in us:
    the uprobe programs (uprobe True) or the kernel ones (False)."""
    return sum(p["runs_per_op"] * p["avg_ns"] for p in programs.values()
               if p.get("runs") and bool(p.get("uprobe")) == uprobe) / 1000.0


def toggled_pairs(res):
    """How many toggled pairs of how long a release's toggle part ran
    ("30 x 2 s toggled"), for the rows that take its figures."""
    t = res["toggled"]
    return "%d x %g s toggled" % (t["pairs"], t["secs"])


def cost_parts(res):
    """Where the default mode's added OSD CPU per read goes, from one
    release's run: the uprobe programs and the kernel programs (BPF run
    statistics), the uprobe traps as the rest (userspace mode: what is
    left of the OSD's added CPU once its programs are taken out, so that
    the kernel programs' share of the OSD does not matter); the added CPU,
    the userspace mode's programs and hits from the toggle part where the
    run has it ("toggled" True); None when the run lacks a figure."""
    d = _get(res, "modes", "default", "randread") or {}
    u = _get(res, "modes", "userspace", "randread") or {}
    st, su = _get(res, "bpf_stats", "default"), _get(res, "bpf_stats",
                                                      "userspace")
    hits = _get(u, "uprobe_hits_per_op", "median")
    if not (d.get("osd_added_us_per_op") and u.get("osd_added_us_per_op")
            and st and su and hits):
        return None
    uprobe_us = _prog_us(su["programs"], True)
    added = d["osd_added_us_per_op"]["median"]
    us_added = u["osd_added_us_per_op"]["median"]
    tog = _get(res, "toggled", "modes") or {}
    toggled = "userspace" in tog and "default" in tog
    if toggled:
        # the toggle part's figures, where the run has them: the same
        # quantities from windows seconds apart (bench/toggle.py)
        added = tog["default"]["added_us"]["mean"]
        us_added = tog["userspace"]["added_us"]["mean"]
        uprobe_us = tog["userspace"]["prog_us_per_op"]
        hits = tog["userspace"]["uprobe_hits_per_op"]
    traps = us_added - uprobe_us
    return {"osd_added": added, "userspace_added": us_added,
            "toggled": toggled,
            "uprobe_progs": _prog_us(st["programs"], True),
            "kernel_progs": _prog_us(st["programs"], False),
            "traps": traps, "hits": hits, "per_hit": traps / hits,
            "host_untraced": _get(d, "host_untraced_us_per_op", "median"),
            "host_added": _get(d, "host_added_us_per_op", "median"),
            "iops_ratio": d.get("iops_ratio_median")}
