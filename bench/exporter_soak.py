"""bench/run.py --part exporter: the exporter left running on the
3-OSD lab under load, as an operator would leave it, scraped by real
Prometheus servers every 5 s.

Soak (default 30 min) with fio randrw against rbd/img1 the whole time.
Every 30 s: the exporter's RSS and CPU, the map fullness and ops in flight
it reports, its cost estimate. At the end: RSS drift (last sample vs the
first after a 2-min warm-up: flat within 5 %; judged on its own,
anonymous, memory, and no growth of the whole: pages of its libraries the
kernel drops while the lab's page cache presses are not its doing), map
entries (not growing), the slowest scrape (target <= 100 ms), and the
share of Ceph's client ops the exported op counts hold (the lean tier's,
attached all the time: 100 %).

A scrape is timed three ways, every 5 s, over the whole soak:
- the exporter's answer: a GET of /metrics as Prometheus asks for it
  (gzip), timed by a client process of its own at nice MONITOR_NICE (so
  that the figure is the exporter's answer, not the client's own wait for
  a CPU on the saturated lab);
- Prometheus' scrape_duration_seconds, which also holds its parse and
  store of every sample, with Prometheus at MONITOR_NICE: a monitoring
  host with CPU to spare, as Prometheus runs in a deployment;
- the same from a second Prometheus at the OSDs' own priority on the
  same two cores (co-located: shown, not judged). Each Prometheus also
  scrapes itself: what a scrape takes there when the exporter has no
  part.

Then the measured cost against the bound (default 1 % of the host's CPU),
as the main part measures cost: interleaved pairs of windows under the
same load, without the exporter, with it (started afresh, its first
duty cycles settled) and without it again: the host's busy CPU time per
op (all CPUs, so the exporter process, the uprobe traps in the OSDs and
the kernel programs in any task all count), traced minus the two
untraced windows together, times the traced op rate, as a % of the
host's CPU. Median and spread over the pairs. The pairs run
twice: under the soak's load (fio as fast as it goes: the host is
saturated, and the cost shows as ops lost, through the op rate's own
swings), then under fio held at a fixed rate (RATE_FRACTION of the soak's
write rate in each direction: the host has idle time, and the cost shows
as busy time at the same op rate).

Whole-host differences swing by about 2 points of the host's CPU from one
40-s pair to the next on this lab (the OSDs' own CPU per op varies that
much), so they cannot tell a 1 % bound. Both sets of pairs therefore
also add up the cost from its parts, each measured in the traced window
(the targets: at most 1.5 % at saturation, the bound at half load):
the exporter process's CPU (/proc: map reads, /metrics, attach and detach
syscalls), every run of its BPF programs (kernel.bpf_stats_enabled: the
uprobe programs in the OSDs' threads, the scheduler and block programs in
any task's), and the uprobe traps themselves (counted exactly as the
uprobe programs' runs) at TRAP_NS each. That sum is an upper bound: the
bound holds when it is under it.

The exporter sends ops as OTLP traces all along (--otlp, as an operator
who runs a tracing system leaves it: 1 op in OTLP_SAMPLE by request id
and every op over OTLP_OVER_US, at most the default rate) to a real
Jaeger on the same host (vagrant/jaeger.sh, standing for a collector
elsewhere: its CPU is shown, not counted in the exporter's cost): the
spans it sent and dropped a second, the ops chosen and why, come from its
own counters; the cost pairs run with --otlp too.

Results: bench/results/<release>.exporter.json; soak_render.py's render_soak() is its
section of BENCHMARKS.md.
"""
import json
import os
import subprocess
import sys
import time

import labkit as bench
from cephlat.exporter import families as F  # (labkit: lib on the path)
from soak_render import SAMPLE_S, SCRAPE_S, render_soak

sys.path.insert(0, os.path.join(bench.REPO, "tests"))   # promserver.py

EXPORTER = os.path.join(bench.REPO, "tools", "osdstage_exporter.py")
JAEGER = os.path.join(bench.REPO, "vagrant", "jaeger.sh")
OTLP_URL = "http://127.0.0.1:4318"     # jaeger.sh's OTLP/HTTP receiver
OTLP_SAMPLE = 100
OTLP_OVER_US = 50000
PROMETHEUS = "/usr/bin/prometheus"
MONITOR_NICE = -10     # the monitoring side's priority (module docstring)
WARMUP_S = 120
PAIR_S = 40            # a cost window: four duty periods
PAIR_SETTLE_S = 15     # the exporter's start-up and first duty window
RATE_FRACTION = 0.5    # the fixed-rate pairs' load, of the soak's rate
# What a uprobe trap is charged in the parts' sum, on top of its program's
# measured run time: more than a whole uprobe + uretprobe pair (two traps
# and their programs) takes here, as the tool's own calibration measures it
# in the main part (call_bias_us, 1.4-1.95 us on Pacific and Reef)
TRAP_NS = 2000


def _rss(pid):
    """{"rss_kb", "rss_anon_kb", "rss_file_kb"} of process `pid`: its
    resident memory, and the part of it that is its own (anonymous: the
    heap, where a leak shows) apart from mapped files (its libraries'
    pages, which the kernel drops when the page cache presses and reads
    back when touched)."""
    want = {"VmRSS:": "rss_kb", "RssAnon:": "rss_anon_kb",
            "RssFile:": "rss_file_kb"}
    out = dict.fromkeys(want.values(), 0)
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k = line.split(None, 1)[0] if line.strip() else ""
            if k in want:
                out[want[k]] = int(line.split()[1])
    return out


def _scrape(port):
    """{sample name + labels: value} of the exporter's /metrics."""
    from promserver import scrape
    return scrape(port)


def _page_bytes(port):
    """[bytes of /metrics as text, gzip-compressed (as Prometheus asks)]."""
    from promserver import get
    return [len(get(port, gzip=gz)[1]) for gz in (False, True)]


class _GetTimer:
    """A client process of its own (no share of the bench's interpreter
    lock) at nice MONITOR_NICE that times a GET of /metrics, gzip as
    Prometheus asks, every SCRAPE_S until stop() -> ([ms], errors)."""

    def __init__(self, port):
        self.out = open("/tmp/osdstage-soak-gets.txt", "w+")
        self.p = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "time-gets",
             str(port)], stdout=self.out, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.nice(MONITOR_NICE))

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=30)
        self.out.seek(0)
        ms, errors = [], 0
        for line in self.out:
            if line.startswith("error"):
                errors += 1
            elif line.strip():
                ms.append(float(line))
        self.out.close()
        return ms, errors


def time_gets(port):
    """The _GetTimer process: one line per GET, its ms or "error ..."."""
    import signal
    from promserver import get
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(SCRAPE_S)
        t0 = time.monotonic()
        try:
            get(port, gzip=True)
            print("%.2f" % (1e3 * (time.monotonic() - t0)), flush=True)
        except OSError as e:
            print("error %s" % e, flush=True)


def _q(values, q):
    v = sorted(values)
    return round(v[min(len(v) - 1, int(q * len(v)))], 2) if v else None


def _scrape_ms(prom, q, job, secs):
    """The q-quantile (1: the max) of Prometheus' scrape_duration_seconds
    of `job` over the last `secs`, in ms; None without samples."""
    r = prom.query('quantile_over_time(%g, scrape_duration_seconds{job="%s"}'
                   '[%ds])' % (q, job, secs))
    return round(1e3 * max(v for _, v in r), 2) if r else None


def _sum(m, name, **labels):
    return sum(v for (n, lab), v in m.items() if n == name and
               all(dict(lab).get(k) == x for k, x in labels.items()))


def _lean_ops(m):
    """The client ops the exporter's op_latency counted (the lean tier's,
    every op: osdstage_stage_tier_info)."""
    return _sum(m, F.STAGE_LATENCY + "_count", stage="op_latency")


def _cpu_per_op(s0, s1):
    cpu = sum(b[0] - a[0] for a, b in zip(s0["osds"], s1["osds"]))
    ops = sum(b[1] - a[1] for a, b in zip(s0["osds"], s1["osds"]))
    return {"cpu_s": cpu, "ops": ops, "secs": s1["t"] - s0["t"],
            "us_per_op": 1e6 * cpu / ops if ops else None}


def _jaeger(cmd):
    """vagrant/jaeger.sh `cmd` -> its stdout; its error ends the bench."""
    p = subprocess.run(["bash", JAEGER, cmd], capture_output=True,
                       text=True, timeout=1800)
    if p.returncode:
        sys.exit("bench: jaeger.sh %s: %s" % (
            cmd, (p.stderr.strip().splitlines() or ["failed"])[-1]))
    return p.stdout.strip()


def _start_exporter(port, bound):
    errf = open("/tmp/osdstage-soak-exporter.err", "a")
    ex = subprocess.Popen([sys.executable, EXPORTER, "--listen",
                           "127.0.0.1:%d" % port, "--max-overhead",
                           str(bound), "--otlp", OTLP_URL, "--otlp-sample",
                           str(OTLP_SAMPLE), "--otlp-over",
                           str(OTLP_OVER_US)],
                          stdout=subprocess.DEVNULL, stderr=errf)
    deadline = time.time() + 60
    while True:
        try:
            if _sum(_scrape(port), F.TARGETS) == 3:
                return ex
        except OSError:
            pass
        if ex.poll() is not None or time.time() > deadline:
            sys.exit("bench: the exporter did not trace 3 OSDs")
        time.sleep(0.5)


def _stop(ex):
    ex.terminate()
    ex.wait(timeout=60)


def _window(pids, asoks, ex=None):
    """A cost window; with the exporter `ex` (BPF statistics on), its
    cost's parts too."""
    s0 = bench.osd_snapshot(pids, asoks)
    if ex is not None:
        c0, p0 = bench.proc_cpu_s(ex.pid), bench.tracer_progs(ex.pid)
    time.sleep(PAIR_S)
    s1 = bench.osd_snapshot(pids, asoks)
    ops = sum(b[1] - a[1] for a, b in zip(s0["osds"], s1["osds"]))
    w = {"ops": ops, "secs": s1["t"] - s0["t"],
         "host_s": s1["host_s"] - s0["host_s"]}
    if ex is not None:
        w["parts"] = _parts(bench.proc_cpu_s(ex.pid) - c0, p0,
                            bench.tracer_progs(ex.pid), w["secs"])
    return w


def _parts(ex_cpu_s, p0, p1, secs):
    """The exporter's cost over a window from its parts (the module's
    docstring), each as % of the host's CPU; "pct" is their sum."""
    runs = bpf_ns = 0
    for pid_, s in p1.items():
        b = p0.get(pid_, {"run_cnt": 0, "run_time_ns": 0})
        bpf_ns += s["run_time_ns"] - b["run_time_ns"]
        if s["type"] == bench.BPF_PROG_TYPE_KPROBE:
            runs += s["run_cnt"] - b["run_cnt"]
    share = 100.0 / (secs * bench.NCPU)
    parts = {"exporter_pct": round(ex_cpu_s * share, 3),
             "bpf_pct": round(bpf_ns / 1e9 * share, 3),
             "uprobe_traps": runs,
             "traps_pct": round(runs * TRAP_NS / 1e9 * share, 3)}
    parts["pct"] = round(parts["exporter_pct"] + parts["bpf_pct"] +
                         parts["traps_pct"], 3)
    return parts


def _pair(pids, asoks, port, bound, parts=False):
    """An untraced window, one with the exporter (started afresh), and an
    untraced one again (A-B-A: a drift of the lab's CPU per op over the
    pair, from RocksDB's compactions or the image filling, cancels out):
    the host's busy CPU per op, traced minus the two untraced windows
    together, at the traced op rate, as % of the host's CPU; with
    `parts`, the traced window's cost from its parts too."""
    time.sleep(3)
    before = _window(pids, asoks)
    ex = _start_exporter(port, bound)
    try:
        time.sleep(PAIR_SETTLE_S)
        if parts:
            with bench.bpf_stats_on():
                t = _window(pids, asoks, ex)
        else:
            t = _window(pids, asoks)
    finally:
        _stop(ex)
    time.sleep(3)
    return _pair_cost(before, t, _window(pids, asoks))


def _pair_cost(before, t, after):
    """A pair from its three windows: the cost as % of the host's CPU."""
    u = {k: before[k] + after[k] for k in ("ops", "secs", "host_s")}
    cost = None
    if u["ops"] and t["ops"]:
        added = t["host_s"] / t["ops"] - u["host_s"] / u["ops"]
        cost = 100.0 * added * (t["ops"] / t["secs"]) / bench.NCPU
    return {"untraced": u, "untraced_windows": [before, after],
            "traced": t,
            "cost_pct": round(cost, 3) if cost is not None else None}


def _spread(pairs, cost=lambda p: p["cost_pct"]):
    """{median, min, max} of the pairs' measured costs, or None."""
    return bench._spread([cost(p) for p in pairs], 3)


def soak_part(a):
    """The soak, then the cost pairs under its load and at a fixed rate;
    writes bench/results/<release>.exporter.json -> its section."""
    from promserver import Prometheus, free_port
    env = bench.lab_env(osds=3)
    pids = [int(p) for p in env["OSD_PIDS"].split(",")]
    asoks = env["OSD_ASOKS"].split(",")
    bench.prefill(env, if_needed=True)
    soak_s = int(a.soak_min * 60)
    load = bench.Fio(env, "randrw", soak_s + a.soak_pairs * (
        3 * PAIR_S + PAIR_SETTLE_S + 40) + 120)
    port = free_port()
    ex = mon = prom = gets = None
    try:
        _jaeger("up")
        jaeger = int(_jaeger("pid"))
        time.sleep(5)
        ex = _start_exporter(port, a.soak_bound)
        target = ["127.0.0.1:%d" % port]
        mon = Prometheus(target, scrape_s=SCRAPE_S, self_scrape=True,
                         nice=MONITOR_NICE)
        prom = Prometheus(target, scrape_s=SCRAPE_S, self_scrape=True)
        gets = _GetTimer(port)
        jaeger_cpu0 = bench.proc_cpu_s(jaeger)
        soak = _soak(ex, port, pids, asoks, soak_s)
        soak["jaeger_cpu"] = bench.proc_cpu_s(jaeger) - jaeger_cpu0
        soak["get_ms"], soak["get_errors"] = gets.stop()
        gets = None
        # each Prometheus' time per scrape of us, and of itself (the part
        # that is not the exporter's)
        soak["prom_ms"] = {
            (p, q, job): _scrape_ms(srv, q, job, soak_s + 60)
            for p, srv in (("mon", mon), ("co", prom))
            for q in (1, 0.99) for job in ("osdstage", "prometheus")}
        soak["samples_scraped"] = mon.query(
            'max_over_time(scrape_samples_scraped{job="osdstage"}[%ds])'
            % (soak_s + 60))
        soak["page"] = _page_bytes(port)
        soak["lost_by_reason"] = {
            dict(k[1])["reason"]: v for k, v in _scrape(port).items()
            if k[0] == F.EVENTS_LOST and v}
        _stop(ex)
        pairs = [_pair(pids, asoks, port, a.soak_bound, parts=True)
                 for _ in range(a.soak_pairs)]
        w_iops, _ = load.stop()
        load = None
        rate = max(1, int(RATE_FRACTION * w_iops))
        load = bench.Fio(env, "randrw", a.soak_pairs * (
            3 * PAIR_S + PAIR_SETTLE_S + 40) + 60, rate_iops=rate)
        time.sleep(5)
        rate_pairs = [_pair(pids, asoks, port, a.soak_bound, parts=True)
                      for _ in range(a.soak_pairs)]
    finally:
        if gets is not None:
            gets.stop()
        for srv in (mon, prom):
            if srv is not None:
                srv.stop()
        if ex is not None and ex.poll() is None:
            ex.kill()
        if load is not None:
            load.stop()
        subprocess.run(["bash", JAEGER, "down"], capture_output=True)
    res = {"machine": bench.machine(env, pids[0]),
           "commit": bench.git_commit(), "date": time.strftime("%Y-%m-%d"),
           "soak_min": a.soak_min, "bound_pct": a.soak_bound}
    res.update(soak_results(soak, pairs, rate_pairs, rate, w_iops))
    rel = res["machine"]["release"]
    with open(os.path.join(bench.RESULTS, rel + ".exporter.json"), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    return "\n".join(render_soak(res)) + "\n"


def _soak(ex, port, pids, asoks, soak_s):
    """The soak itself, the exporter `ex` serving on `port`: a sample
    every SAMPLE_S s -> {samples, the OSDs' snapshots before and after
    (s0, s1), the lean op count at the start (lean0), the exporter's
    CPU s (ex_cpu) and the wall s it took}."""
    t_start = time.monotonic()
    s0 = bench.osd_snapshot(pids, asoks)
    lean0 = _lean_ops(_scrape(port))
    cpu0 = bench.proc_cpu_s(ex.pid)
    samples = []
    while time.monotonic() - t_start < soak_s:
        time.sleep(SAMPLE_S)
        samples.append(_sample(_scrape(port), ex.pid, cpu0,
                               time.monotonic() - t_start))
        if ex.poll() is not None:
            sys.exit("bench: the exporter exited during the soak")
    s1 = bench.osd_snapshot(pids, asoks)
    return {"samples": samples, "s0": s0, "s1": s1, "lean0": lean0,
            "ex_cpu": bench.proc_cpu_s(ex.pid) - cpu0,
            "wall": time.monotonic() - t_start}


def _sample(m, pid, cpu0, t):
    """One soak sample at `t` s: the exporter's (pid) memory and CPU
    since cpu0 and what its page `m` (_scrape's) says."""
    full, attached = F.MAP_FULLNESS, F.ATTACHED
    return {"t": round(t, 1), **_rss(pid),
            "cpu_s": bench.proc_cpu_s(pid) - cpu0,
            "ops_fullness": _sum(m, full, map="ops"),
            "threads_fullness": _sum(m, full, map="threads"),
            "in_flight": _sum(m, F.OPS_IN_FLIGHT),
            "estimate_pct": round(100 * _sum(m, F.OVERHEAD), 4),
            "attached_s": _sum(m, attached, tier="full"),
            "lean_attached_s": _sum(m, attached, tier="lean"),
            "lean_ops": _lean_ops(m),
            "traced_s": _sum(m, F.TRACED),
            "lost": _sum(m, F.EVENTS_LOST),
            "otlp_chosen_sample": _sum(m, F.OTLP_OPS_CHOSEN, why="sample"),
            "otlp_chosen_slow": _sum(m, F.OTLP_OPS_CHOSEN, why="slow"),
            "otlp_ops_dropped": _sum(m, F.OTLP_OPS_DROPPED),
            "otlp_spans_sent": _sum(m, F.OTLP_SPANS_SENT),
            "otlp_spans_dropped": _sum(m, F.OTLP_SPANS_DROPPED)}


def soak_results(soak, pairs, rate_pairs, rate, w_iops):
    """The results' figures from what the soak measured (_soak's, with
    the scrape timings soak_part adds) and the cost pairs: under the
    soak's load (`pairs`, fio at `w_iops` writes/s) and at a fixed
    `rate` (`rate_pairs`)."""
    samples, s0, s1 = soak["samples"], soak["s0"], soak["s1"]
    traced = _cpu_per_op(s0, s1)
    ops_s = traced["ops"] / traced["secs"] if traced["secs"] else 0
    ex_pct = 100.0 * soak["ex_cpu"] / (soak["wall"] * bench.NCPU)
    warm = [s for s in samples if s["t"] >= WARMUP_S] or samples
    first, last = warm[0], samples[-1]
    rss0, rss1 = first["rss_kb"], last["rss_kb"]
    get_ms, prom_ms = soak["get_ms"], soak["prom_ms"]
    scraped = soak["samples_scraped"]
    res = {
        "load": "fio rbd randrw 4 KiB iodepth 16 on rbd/img1 (3-OSD lab, "
                "pool size 3)",
        "samples": samples,
        "rss_first_kb": rss0, "rss_last_kb": rss1,
        "rss_max_kb": max(s["rss_kb"] for s in warm),
        "rss_drift_pct": round(100.0 * (rss1 - rss0) / rss0, 2),
        "rss_anon_drift_pct": round(100.0 * (
            last["rss_anon_kb"] - first["rss_anon_kb"]) /
            max(first["rss_anon_kb"], 1), 2),
        "rss_file_kb": [first["rss_file_kb"], last["rss_file_kb"]],
        "scrape_max_ms": _q(get_ms, 1), "scrape_p99_ms": _q(get_ms, 0.99),
        "scrape_gets": len(get_ms), "scrape_errors": soak["get_errors"],
        "scrape_timed": "GET gzip",
        "monitor_nice": MONITOR_NICE,
        "page_samples": int(max(v for _, v in scraped)) if scraped else None,
        "page_bytes": soak["page"],
        "ops_fullness_max": max(s["ops_fullness"] for s in samples),
        "threads_fullness_first": first["threads_fullness"],
        "threads_fullness_last": last["threads_fullness"],
        "in_flight_max": max(s["in_flight"] for s in samples),
        "estimate_pct_last": last["estimate_pct"],
        "attached_fraction": round(last["attached_s"] /
                                   max(last["traced_s"], 1e-9), 3),
        "lean_attached_fraction": round(last["lean_attached_s"] /
                                        max(last["traced_s"], 1e-9), 3),
        # the ops the lean tier counted over Ceph's client ops, from the
        # soak's start to its last sample (the exporter's figures lag by up
        # to a refresh, Ceph's are read at the end)
        "ops_counted": [last["lean_ops"] - soak["lean0"], sum(
            b[2] - a[2] for a, b in zip(s0["osds"], s1["osds"]))],
        "lost": last["lost"],
        "lost_by_reason": soak["lost_by_reason"],
        "exporter_cpu_pct": round(ex_pct, 3),
        "osd_us_per_op_traced": round(traced["us_per_op"], 2)
        if traced["us_per_op"] else None,
        "ops_per_s": round(ops_s, 1),
        "pairs": pairs, "pair_secs": PAIR_S,
        "measured_pct": _spread(pairs),
        "parts_pct": _spread(pairs, lambda p: p["traced"]["parts"]["pct"]),
        "rate_iops": rate, "full_write_iops": round(w_iops, 1),
        "rate_pairs": rate_pairs, "rate_measured_pct": _spread(rate_pairs),
        "trap_ns": TRAP_NS,
        "rate_parts_pct": _spread(rate_pairs,
                                  lambda p: p["traced"]["parts"]["pct"]),
        "otlp": _otlp_results(warm[0], last, soak),
    }
    # each Prometheus' scrape of us and of itself, max and p99
    for who, mon_or_co in (("prometheus", "mon"), ("colocated", "co")):
        for job, what in (("osdstage", "scrape"),
                          ("prometheus", "self_scrape")):
            for q, stat in ((1, "max"), (0.99, "p99")):
                res["%s_%s_%s_ms" % (who, what, stat)] = \
                    prom_ms[mon_or_co, q, job]
    return res


def _otlp_results(first, last, soak):
    """What the exporter sent as OTLP traces between two soak samples, a
    second, from its own counters; Jaeger's CPU over the soak."""
    secs = max(last["t"] - first["t"], 1e-9)

    def rate(k):
        return round((last[k] - first[k]) / secs, 2)
    return {"url": OTLP_URL, "sample": OTLP_SAMPLE, "over_us": OTLP_OVER_US,
            "secs": round(secs, 1),
            "spans_sent_per_s": rate("otlp_spans_sent"),
            "spans_dropped_per_s": rate("otlp_spans_dropped"),
            "spans_sent": last["otlp_spans_sent"] - first["otlp_spans_sent"],
            "spans_dropped": last["otlp_spans_dropped"] -
            first["otlp_spans_dropped"],
            "ops_sampled_per_s": rate("otlp_chosen_sample"),
            "ops_slow_per_s": rate("otlp_chosen_slow"),
            "ops_dropped_per_s": rate("otlp_ops_dropped"),
            "jaeger_cpu_pct": round(100.0 * soak["jaeger_cpu"] / (
                soak["wall"] * bench.NCPU), 3)}


if __name__ == "__main__" and sys.argv[1:2] == ["time-gets"]:
    time_gets(int(sys.argv[2]))
