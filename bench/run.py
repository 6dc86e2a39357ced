#!/usr/bin/python3
# bench/run.py - what tracing costs the OSD, measured side by side (make bench).
#
# USAGE: bench/run.py [--part all|main|osds] [--pairs N] [--secs S]
#                     [--osds-pairs N] [--osds-secs S] [--smoke] [--out FILE]
#                     [--osds-out FILE] [--md FILE]
#
# On the lab OSD (started if needed): 4 KiB random reads and 4 KiB writes
# from fio's rbd engine (a real librbd client; it reports latency
# percentiles, which rados bench does not), untraced and traced runs
# interleaved A B A B ..., for each tracing mode; then the cost per op from
# the BPF programs' own run counters (kernel.bpf_stats_enabled, restored
# afterwards), the tracer's CPU time, start-up time and peak RSS. Writes
# bench/results/<release>.json (pacific: the host lab; reef, tentacle: the
# container labs, with CEPH=) and regenerates BENCHMARKS.md from every
# release's last result, side by side.
#
# The "osds" part (--part osds; --part all, the default, runs both): on the
# lab with three OSDs (lab.sh up with LAB_OSDS=3, pool rbd size 3), tracing
# one OSD (--osd 0) vs all three (--osd all) with one set of BPF programs,
# 4 KiB random writes (replicated) and reads: IOPS ratios from interleaved
# pairs, and on EACH OSD the CPU time the tracing adds per op (utime+stime
# of the ceph-osd from /proc/PID/stat over its own op_r+op_w+subop_w from
# its admin socket, traced minus untraced). Writes
# bench/results/<release>.osds.json; BENCHMARKS.md merges every results file.
import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat import abi  # noqa: E402
from cephlat.ceph import adminsock  # noqa: E402

PY = "/usr/bin/python3"
OSDSTAGE = os.path.join(REPO, "tools", "osdstage.py")
LAB = os.path.join(REPO, "vagrant", "lab.sh")

MODES = {
    # mode: command (PID substituted) or None when not available yet
    "default": [PY, OSDSTAGE, "-p", "{pid}", "-j"],
    "userspace": [PY, OSDSTAGE, "-p", "{pid}", "-j", "--no-kernel"],
    "record": [PY, OSDSTAGE, "-p", "{pid}", "-j", "-w", "{capture}",
               "--force"],
    "bounded": [PY, OSDSTAGE, "-p", "{pid}", "-j", "--max-overhead", "2"],
    # osdstages.bt names no function: osdstage.py gives its arguments
    "bpftrace": ["bpftrace", "-p", "{pid}",
                 os.path.join(REPO, "probes", "osdstages.bt"), "{btargs}"],
}
TARGETS = {
    "default": 0.95, "userspace": 0.96, "bounded": 0.98,
    "avg_ns": 200, "startup_s": 0.5, "peak_rss_mb": 60,
    "recorder_events_per_s": 100000, "recorder_cpu_pct": 10,
}
SHARDQ = os.path.join(REPO, "tests", "bpf", "progs", "shardq.cc")
SHARDQ_SPEC = os.path.join(REPO, "tests", "bpf", "progs", "shardq.json")
# every program of probes/osdstage.bpf.c, as the build lists them
OUR_PROGRAMS = tuple(abi.load("osdstage").programs)


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def lab_env(osds=None):
    """Start the lab if needed (osds: with that many OSDs; a lab with
    another count is rebuilt), then lab.sh env's exports as a dict."""
    up = sh(["bash", LAB, "up"], env=dict(
        os.environ, **({"LAB_OSDS": str(osds)} if osds else {})))
    if up.returncode:
        sys.exit("bench: lab did not come up:\n" + up.stdout + up.stderr)
    env = {}
    for line in sh(["bash", LAB, "env"]).stdout.splitlines():
        k, v = line[len("export "):].split("=", 1)
        env[k] = v
    return env


def fio(env, rw, secs):
    """One fio run against rbd/img1: (iops, p99_us)."""
    args = ["fio", "--name=bench", "--ioengine=rbd", "--clientname=admin",
            "--pool=rbd", "--rbdname=img1", "--rw=" + rw, "--bs=4k",
            "--iodepth=16", "--runtime=%d" % secs, "--time_based",
            "--direct=1", "--output-format=json", "--randseed=1"]
    p = sh(args, env=dict(os.environ, CEPH_CONF=env["CEPH_CONF"]),
           timeout=secs + 120)
    if p.returncode:
        sys.exit("bench: fio failed: " + p.stderr.strip()[-500:])
    job = json.loads(p.stdout[p.stdout.index("{"):])["jobs"][0]
    side = job["read"] if "read" in rw else job["write"]
    return side["iops"], side["clat_ns"]["percentile"]["99.000000"] / 1000.0


def image_full(env):
    """True when every object of rbd/img1 exists (rbd du: used ==
    provisioned): prefilling again would change nothing."""
    p = sh(["rbd", "du", "--format", "json", "rbd/img1"],
           env=dict(os.environ, CEPH_CONF=env["CEPH_CONF"]), timeout=120)
    try:
        img = json.loads(p.stdout)["images"][0]
    except (ValueError, KeyError, IndexError):
        return False
    return img["used_size"] >= img["provisioned_size"]


def prefill(env, if_needed=False):
    """Write the whole image once so reads hit allocated data (after making
    room: old benchmark objects go when the OSD is half full). if_needed:
    not when the image is fully allocated already."""
    sh(["bash", LAB, "trim"], env=dict(os.environ, CEPH_CONF=env["CEPH_CONF"]),
       timeout=900)
    if if_needed and image_full(env):
        return
    args = ["fio", "--name=fill", "--ioengine=rbd", "--clientname=admin",
            "--pool=rbd", "--rbdname=img1", "--rw=write", "--bs=4M",
            "--iodepth=4", "--size=100%"]
    p = sh(args, env=dict(os.environ, CEPH_CONF=env["CEPH_CONF"]),
           timeout=600)
    if p.returncode:
        sys.exit("bench: prefill failed: " + p.stderr.strip()[-500:])


def bpftrace_args(pid):
    p = sh([PY, OSDSTAGE, "-p", str(pid), "--bpftrace-args"])
    if p.returncode != 0:
        sys.exit("bench: osdstage.py --bpftrace-args failed: " +
                 p.stderr.strip()[-500:])
    return p.stdout.split()


class Tracer:
    """A tracing tool running against the OSD: start-up time, CPU, RSS."""

    def __init__(self, cmd, pid):
        self.capture = None
        if "{capture}" in cmd:
            self.capture = tempfile.mkdtemp(prefix="bench-", dir="/var/tmp")
        self.cmd = [c.replace("{pid}", str(pid)).replace(
            "{capture}", str(self.capture)) for c in cmd]
        if "{btargs}" in self.cmd:
            at = self.cmd.index("{btargs}")
            self.cmd[at:at + 1] = bpftrace_args(pid)
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        stream = self.p.stdout if self.cmd[0] == "bpftrace" else self.p.stderr
        while True:
            line = stream.readline()
            if not line:
                sys.exit("bench: %s ended: %s" % (self.cmd[:3],
                                                   self.p.stderr.read()))
            if "Tracing" in line:
                break
        self.startup_s = time.monotonic() - self.t0


def run_traced(cmd, pid, env, rw, secs):
    """fio under a tracer. The tracer is our child: its CPU time and peak
    RSS come from wait4()."""
    tr = Tracer(cmd, pid)
    iops, p99 = fio(env, rw, secs)
    tr.p.send_signal(signal.SIGINT)
    try:
        out = tr.p.stdout.read()
        err = tr.p.stderr.read()
    finally:
        _, status, ru = os.wait4(tr.p.pid, 0)
        if tr.capture:
            shutil.rmtree(tr.capture, ignore_errors=True)
    last = None
    for line in out.splitlines():
        if line.startswith("{"):
            last = json.loads(line)
    return {"iops": iops, "p99_us": p99, "startup_s": tr.startup_s,
            "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
            "report": last, "events": captured_events(err)}


def captured_events(err):
    """(events, lost) from osdstage's last line with -w, else None."""
    m = re.search(r"capture \S+: (\d+) events, [\d.]+ MB(?:; (\d+) events "
                  r"LOST)?", err)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def recorder_throughput(items=300000):
    """Drive the recorder hard: the controlled sharded queue (tests/bpf/
    progs/shardq.cc) with no gap between bursts of 64 items, recorded with
    -w: events written per second of the program's run, events lost, and
    the recorder's CPU time as a share of one core."""
    d = tempfile.mkdtemp(prefix="bench-rec-", dir="/var/tmp")
    try:
        exe = os.path.join(d, "shardq")
        sh(["g++", "-O2", "-pthread", "-o", exe, SHARDQ], check=True)
        prog = subprocess.Popen([exe, "2", "2", str(items), "normal", "0",
                                 "0", "20", "64", "0"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        tool = subprocess.Popen([PY, OSDSTAGE, "-p", str(prog.pid), "--probes",
                                 SHARDQ_SPEC, "-j", "--max-ops", "1000000",
                                 "-w", os.path.join(d, "c.ctf")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        while "Tracing" not in tool.stderr.readline():
            if tool.poll() is not None:
                sys.exit("bench: recorder run failed: " + tool.stderr.read())
        t0 = time.monotonic()
        prog.stdin.write("go\n")
        prog.stdin.flush()
        prog.stdout.readline()
        prog.wait(300)
        secs = time.monotonic() - t0
        tool.stdout.read()
        err = tool.stderr.read()
        _, _, ru = os.wait4(tool.pid, 0)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    got = captured_events(err)
    if got is None:
        sys.exit("bench: recorder run wrote no capture: " + err[-500:])
    return {"events": got[0], "lost": got[1], "secs": round(secs, 2),
            "events_per_s": round(got[0] / secs),
            "cpu_pct_of_core": round(100 * (ru.ru_utime + ru.ru_stime) /
                                     secs, 1)}


def ceph_ops(asok):
    d = adminsock.perf_dump(asok)
    return d["osd"]["op_r"] + d["osd"]["op_w"]


def bpf_prog_stats():
    p = sh(["bpftool", "prog", "show", "-j"])
    out = {}
    for prog in json.loads(p.stdout or "[]"):
        name = prog.get("name", "")
        for ours in OUR_PROGRAMS:
            if ours[:15] == name:
                s = out.setdefault(ours, {"run_cnt": 0, "run_time_ns": 0})
                s["run_cnt"] += prog.get("run_cnt", 0)
                s["run_time_ns"] += prog.get("run_time_ns", 0)
    return out


def cost_per_op(env, pid, asok, rw, secs):
    """Run the default mode with BPF run statistics on."""
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        tr = Tracer(MODES["default"], pid)
        ops0 = ceph_ops(asok)
        fio(env, rw, secs)
        ops1 = ceph_ops(asok)
        stats = bpf_prog_stats()
        tr.p.send_signal(signal.SIGINT)
        out = tr.p.stdout.read()
        tr.p.stderr.read()
        _, _, ru = os.wait4(tr.p.pid, 0)
        reports = [json.loads(l) for l in out.splitlines() if l.strip()]
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    ops = max(1, ops1 - ops0)
    progs = {n: {"runs": s["run_cnt"],
                 "avg_ns": round(s["run_time_ns"] / s["run_cnt"], 1)
                 if s["run_cnt"] else 0.0,
                 "runs_per_op": round(s["run_cnt"] / ops, 2)}
             for n, s in stats.items()}
    uprobe_hits = sum(progs.get(n, {}).get("runs", 0) for n in
                      abi.load("osdstage").programs_in("uprobe", "uretprobe"))
    return {"ops": ops, "programs": progs,
            "hits_per_op": round(uprobe_hits / ops, 2),
            "all_runs_per_op": round(sum(p["runs"] for p in progs.values())
                                     / ops, 2),
            "tracer_cpu_s_per_10k_ops": round((ru.ru_utime + ru.ru_stime)
                                              / ops * 1e4, 4),
            "call_bias_us": reports[-1]["call_bias_us"] if reports else None}


def machine(env, pid):
    cpu = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    # never run the target's binary: a container's may not run here
    from cephlat.engine.elfsym import ElfSymbols
    with ElfSymbols("/proc/%d/exe" % pid) as elf:
        ver = elf.version_string()
        cet = any(elf.mark_cet(s).cet for s in elf.find("OSD::enqueue_op"))
    return {"cpu_model": cpu, "cores": os.cpu_count(),
            "kernel": platform.release(), "ceph": ver, "cet": cet,
            "release": env.get("CEPH_RELEASE") or "pacific",
            "container": bool(env.get("LAB_CONTAINER"))}


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

# --- tracing several OSDs at once (the "osds" part) -----------------------

OSDS_MODES = {
    # mode: osdstage's command; (label, what it traces)
    "one": [PY, OSDSTAGE, "--osd", "0", "-j"],
    "all": [PY, OSDSTAGE, "--osd", "all", "-j"],
}
OSDS_LABELS = {"one": "--osd 0", "all": "--osd all"}
OSDS_WORKLOADS = [("write", "randwrite"), ("randread", "randread")]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def osd_ops(asok):
    """The ops an OSD handled: client ops (op_r + op_w) and replica
    writes (subop_w), from its own counters."""
    d = adminsock.perf_dump(asok)["osd"]
    return d["op_r"] + d["op_w"] + d["subop_w"]


def osd_snapshot(pids, asoks):
    return [(proc_cpu_s(p), osd_ops(a)) for p, a in zip(pids, asoks)]


def osd_window(env, pids, asoks, rw, secs, cmd=None):
    """One fio run, traced by `cmd` (None: untraced): IOPS, p99 and per
    OSD the CPU seconds and ops over the run, as {cpu_s, ops,
    cpu_us_per_op}; the tracer's CPU seconds when traced."""
    tr = Tracer(cmd, pids[0]) if cmd else None
    try:
        s0 = osd_snapshot(pids, asoks)
        iops, p99 = fio(env, rw, secs)
        s1 = osd_snapshot(pids, asoks)
    finally:
        if tr:
            tr.p.send_signal(signal.SIGINT)
            tr.p.stdout.read()
            tr.p.stderr.read()
            _, _, ru = os.wait4(tr.p.pid, 0)
    per = []
    for (c0, o0), (c1, o1) in zip(s0, s1):
        ops = o1 - o0
        per.append({"cpu_s": round(c1 - c0, 2), "ops": ops,
                    "cpu_us_per_op": round(1e6 * (c1 - c0) / ops, 2)
                    if ops else None})
    out = {"iops": iops, "p99_us": p99, "osds": per}
    if tr:
        out["tracer_cpu_s"] = ru.ru_utime + ru.ru_stime
    return out


def _spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), 2),
            "min": round(min(values), 2), "max": round(max(values), 2)}


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
           "modes": {m: {"traces": OSDS_LABELS[m]} for m in OSDS_MODES},
           "workloads": {}}
    res["machine"]["osds"] = len(pids)
    for wl, rw in workloads:
        got = {m: [] for m in OSDS_MODES}
        fio(env, rw, secs)      # warm-up, not counted: the first run lags
        # the modes interleaved too: pair i of each mode, then pair i + 1
        for i in range(pairs_n):
            for mode, cmd in OSDS_MODES.items():
                base = osd_window(env, pids, asoks, rw, secs)
                traced = osd_window(env, pids, asoks, rw, secs, cmd)
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
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    return res


def render_osds(res):
    """The osds part's section of BENCHMARKS.md."""
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
             "`--osd 0`, osd.1 and osd.2 are not traced (marked untraced)."
             % (res["osds"], res["client"], res["pairs"], res["secs"],
                res["runtime_s"], res.get("prefill_s", 0)), "",
             "| workload | traced | IOPS ratio median (min-max) | p99 ratio | "
             "untraced / traced IOPS | " + " | ".join(
                 "osd.%d added CPU per op" % i for i in range(res["osds"])) +
             " | tracer CPU s per 10,000 ops |",
             "|---|---|---|---|---|" + "---|" * res["osds"] + "---|"]
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
    lines += ["", "Untraced CPU per op, for scale (median over the untraced "
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
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--secs", type=int, default=10)
    ap.add_argument("--smoke", action="store_true",
                    help="one pair of 3 s runs, read only: for the test suite")
    ap.add_argument("--out", default=None,
                    help="default: bench/results/<release>.json")
    ap.add_argument("--md", default=os.path.join(REPO, "BENCHMARKS.md"))
    ap.add_argument("--part", choices=("all", "main", "osds"), default="all",
                    help="main: the tracing modes on the running lab; osds: "
                    "one OSD traced vs three, on the 3-OSD lab; all: both")
    ap.add_argument("--osds-pairs", type=int, default=3)
    ap.add_argument("--osds-secs", type=int, default=8)
    ap.add_argument("--osds-out", default=None,
                    help="default: bench/results/<release>.osds.json")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench: must run as root")
    if a.smoke:
        a.pairs, a.secs = 1, 3
        a.osds_pairs, a.osds_secs = 1, 2
    text = ""
    if a.part in ("all", "main"):
        text += main_part(a)
    if a.part in ("all", "osds"):
        text += render_osds(osds_part(a))
    if not a.smoke:
        with open(a.md, "w") as f:
            f.write(render_md(load_results()))
    sys.stdout.write(text)
    return 0


def main_part(a):
    """The tracing modes on the running lab's osd.0; -> its text."""
    env = lab_env()
    pid = int(env["OSD_PID"])
    asok = adminsock.find_osd_socket(pid, "0")
    prefill(env)
    res = {"machine": machine(env, pid), "pairs": a.pairs, "secs": a.secs,
           "client": "fio rbd engine, 4 KiB, iodepth 16", "modes": {}}
    workloads = [("randread", "randread")] + ([] if a.smoke else
                                              [("write", "randwrite")])
    startup, rss = [], []
    for mode, cmd in MODES.items():
        res["modes"][mode] = {}
        if cmd is None:
            res["modes"][mode]["available"] = False
            continue
        for wl, rw in workloads:
            pairs = []
            for i in range(a.pairs):
                iops, p99 = fio(env, rw, a.secs)
                base = {"iops": iops, "p99_us": p99}
                traced = run_traced(cmd, pid, env, rw, a.secs)
                pairs.append((base, traced))
                if mode == "default":
                    startup.append(traced["startup_s"])
                    rss.append(traced["rss_mb"])
                print("bench: %-9s %-8s pair %d: %.0f vs %.0f IOPS" % (
                    mode, wl, i + 1, base["iops"], traced["iops"]),
                    file=sys.stderr)
            res["modes"][mode][wl] = summarize(pairs)
            if mode == "record":
                # the recorder at the lab's peak: CPU share of one core
                res["modes"][mode][wl]["recorder_cpu_pct"] = round(
                    statistics.median(100 * b["cpu_s"] / a.secs
                                      for _, b in pairs), 1)
                res["modes"][mode][wl]["events_per_s"] = round(
                    statistics.median(b["events"][0] / a.secs
                                      for _, b in pairs))
                res["modes"][mode][wl]["lost"] = sum(
                    b["events"][1] for _, b in pairs)
            if mode == "bounded":
                ov = (pairs[-1][1]["report"] or {}).get("overhead", {})
                res["modes"][mode][wl]["estimated_pct"] = ov.get(
                    "estimated_pct")
    cost = cost_per_op(env, pid, asok, "randread", a.secs)
    res["programs"] = cost["programs"]
    res["hits_per_op"] = cost["hits_per_op"]
    res["all_runs_per_op"] = cost["all_runs_per_op"]
    res["tracer_cpu_s_per_10k_ops"] = cost["tracer_cpu_s_per_10k_ops"]
    res["startup_s"] = round(statistics.median(startup), 3)
    res["peak_rss_mb"] = round(max(rss), 1)
    res["recorder"] = recorder_throughput(50000 if a.smoke else 300000)
    rec_rr = res["modes"]["record"].get("randread", {})
    res["recorder"]["lab_peak_cpu_pct"] = rec_rr.get("recorder_cpu_pct")
    res["recorder"]["lab_peak_events_per_s"] = rec_rr.get("events_per_s")
    res["targets"] = TARGETS
    res["call_bias_us"] = cost.get("call_bias_us")
    out = a.out or os.path.join(RESULTS, res["machine"]["release"] + ".json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    return render_release(res)


RESULTS = os.path.join(REPO, "bench", "results")
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


def render_md(results, osds_results=None):
    """BENCHMARKS.md: the releases side by side, then each in full, then
    the osds part of every release that has one."""
    if osds_results is None:
        osds_results = load_results(".osds")
    lines = ["# Benchmarks", "",
             "Generated by `make bench` (and `make bench CEPH=reef`, "
             "`CEPH=tentacle` for the container labs) from "
             "`bench/results/<release>.json` and, for the part that traces "
             "several OSDs (`make bench BENCH=osds` runs only that part), "
             "`bench/results/<release>.osds.json`; do not edit by hand.", "",
             "## Releases side by side", "",
             "| release | Ceph | CET | runs | default randread IOPS ratio | "
             "userspace randread | uprobe hits per op | probe pair cost "
             "(calibrated) |", "|---|---|---|---|---|---|---|---|"]
    for res in results:
        m, modes = res["machine"], res["modes"]
        lines.append("| %s | %s | %s | %d x %d s | %.3f (%.3f-%.3f) | %.3f |"
                     " %.2f | %s |" % (
                         m.get("release", "pacific"), m["ceph"],
                         "yes" if m.get("cet") else "no", res["pairs"],
                         res["secs"],
                         modes["default"]["randread"]["iops_ratio_median"],
                         modes["default"]["randread"]["iops_ratio_min"],
                         modes["default"]["randread"]["iops_ratio_max"],
                         modes["userspace"]["randread"]["iops_ratio_median"],
                         res["hits_per_op"],
                         "%.2f us" % res["call_bias_us"]
                         if res.get("call_bias_us") is not None else "-"))
    lines += ["", "The probe pair cost is what a uprobe + uretprobe pair "
              "adds to a call, measured at start-up on a function of the "
              "target's flavour (with endbr64 on CET builds, probed after "
              "it).", ""]
    for res in results:
        lines += render_release(res).splitlines()[2:] + [""]
    for res in osds_results:
        lines += render_osds(res).splitlines() + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _mark(ok):
    return "ok" if ok else "**MISSED**"


def render_release(res):
    m = res["machine"]
    lines = ["# Benchmarks", "",
             "## %s (Ceph %s%s)" % (
                 m.get("release", "pacific").capitalize(), m["ceph"],
                 ", in a container, CET build" if m.get("container") else
                 ""), "",
             "Machine: %s, %d cores, kernel %s, Ceph %s. Client: %s; %d "
             "interleaved untraced/traced pairs of %d s per mode." % (
                 m["cpu_model"], m["cores"], m["kernel"], m["ceph"],
                 res["client"], res["pairs"], res["secs"]), "",
             "| mode | workload | IOPS ratio median (min-max) | p99 ratio | "
             "untraced / traced IOPS | target |",
             "|---|---|---|---|---|---|"]
    for mode, wls in res["modes"].items():
        if wls.get("available") is False:
            lines.append("| %s | - | not available yet | | | |" % mode)
            continue
        for wl, s in wls.items():
            if not isinstance(s, dict):
                continue
            t = TARGETS.get(mode) if wl == "randread" else None
            lines.append("| %s | %s | %.3f (%.3f-%.3f) | %s | %d / %d | %s |" % (
                mode, wl, s["iops_ratio_median"], s["iops_ratio_min"],
                s["iops_ratio_max"],
                "%.2f" % s["p99_ratio_median"] if s["p99_ratio_median"]
                else "-", s["untraced_iops_median"], s["traced_iops_median"],
                "%s %s" % (">= %.2f" % t, _mark(s["iops_ratio_median"] >= t))
                if t else ""))
    lines += ["", "| BPF program | runs per op | avg ns per run | target |",
              "|---|---|---|---|"]
    for n, p in sorted(res["programs"].items()):
        lines.append("| %s | %.2f | %.0f | <= 200 %s |" % (
            n, p["runs_per_op"], p["avg_ns"], _mark(p["avg_ns"] <= 200)))
    lines += ["", "| measure | value | target |", "|---|---|---|",
              "| uprobe hits per op | %.2f | |" % res["hits_per_op"],
              "| all BPF runs per op (incl. scheduler) | %.2f | |" %
              res["all_runs_per_op"],
              "| tracer CPU s per 10,000 ops | %.4f | |" %
              res["tracer_cpu_s_per_10k_ops"],
              "| start-up to all probes attached | %.3f s | <= 0.5 s %s |" % (
                  res["startup_s"], _mark(res["startup_s"] <= 0.5)),
              "| peak RSS | %.1f MB | <= 60 MB %s |" % (
                  res["peak_rss_mb"], _mark(res["peak_rss_mb"] <= 60)),
              "| recorder events/s (controlled program, driven hard) | %d "
              "(%d lost) | >= 100,000, 0 lost %s |" % (
                  res["recorder"]["events_per_s"], res["recorder"]["lost"],
                  _mark(res["recorder"]["events_per_s"] >= 100000 and
                        not res["recorder"]["lost"])),
              "| recorder CPU, same run | %.1f %% of a core | |" %
              res["recorder"]["cpu_pct_of_core"],
              "| recorder CPU at the lab's peak (record mode, randread) | "
              "%s %% of a core, %s events/s | < 10 %% %s |" % (
                  res["recorder"]["lab_peak_cpu_pct"],
                  res["recorder"]["lab_peak_events_per_s"],
                  _mark((res["recorder"]["lab_peak_cpu_pct"] or 100) < 10)),
              ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
