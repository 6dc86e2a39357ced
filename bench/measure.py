"""bench/measure.py - driving the lab and measuring the tracing on it, for
the main and osds parts of `make bench`: the tracing modes' commands
(MODES, OSDS_MODES), the tracer started on the busy OSD (Tracer), fio
runs, one window of the OSDs', host's, fio client's and tracer's CPU over
Ceph's own op counts (osd_window), the tracer's BPF programs over a window
with the kernel's run statistics on (prog_runs, stats_run), the start-up
on the idle OSD (startup_idle) and the traced program's event rate when
recorded (recorder_throughput). It builds on labkit.py and judges or
renders nothing; summary.py turns its windows into figures."""
import json
import os
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
from cephlat.engine import duty  # noqa: E402
from cephlat.model.vocab import Vocab  # noqa: E402
from labkit import (  # noqa: E402
    BPF_PROG_TYPE_KPROBE, Fio, bpf_stats_on, osd_op_counts, osd_snapshot,
    proc_cpu_s, sh)


PY = "/usr/bin/python3"
OSDSTAGE = os.path.join(REPO, "tools", "osdstage.py")

MODES = {
    # mode: command (PID substituted) or None when not available yet
    "default": [PY, OSDSTAGE, "-p", "{pid}", "-j"],
    "userspace": [PY, OSDSTAGE, "-p", "{pid}", "-j", "--no-kernel"],
    # the lean tier: one probe hit per op, for a view left on
    "lean": [PY, OSDSTAGE, "-p", "{pid}", "-j", "--lean"],
    "record": [PY, OSDSTAGE, "-p", "{pid}", "-j", "-w", "{capture}",
               "--force"],
    "bounded": [PY, OSDSTAGE, "-p", "{pid}", "-j", "--max-overhead", "2"],
    # the default mode with each report's ops broken down: every op
    # handed over at its end (a ring record) and decoded by the tracer
    "by": [PY, OSDSTAGE, "-p", "{pid}", "-j", "--by", "client"],
    # the record mode with the stacks behind waits of 1 ms or more (a
    # worker's sleep in an op or for a lock: kernel stack, registers and
    # the top 8 KiB of its user stack), and with on-CPU samples at 99 Hz
    "stacks": [PY, OSDSTAGE, "-p", "{pid}", "-j", "-w", "{capture}",
               "--force", "--stacks", "1000"],
    "oncpu": [PY, OSDSTAGE, "-p", "{pid}", "-j", "-w", "{capture}",
              "--force", "--on-cpu", "99"],
    # osdstages.bt names no function: osdstage.py gives its arguments
    "bpftrace": ["bpftrace", "-p", "{pid}",
                 os.path.join(REPO, "probes", "osdstages.bt"), "{btargs}"],
    # Ceph's own OpTracker, the cost operators already accept: no tracer;
    # the base window with osd_enable_op_tracker off, the other with it on
    # (Ceph's default, the base of every other mode), set at run time
    "optracker": "optracker",
}
# MODES whose value is this are a Ceph setting, not a command
OPTRACKER = "optracker"


def set_op_tracker(asok, on):
    """osd_enable_op_tracker on or off, at run time (the OSD follows it at
    once: with it off, dump_ops_in_flight says the tracker is disabled)."""
    from cephlat.ceph import adminsock
    got = adminsock.command(asok, "config set", var="osd_enable_op_tracker",
                            val=["true" if on else "false"])
    if "success" not in got:
        raise RuntimeError("config set osd_enable_op_tracker: %r" % got)


# A window: fio starts; after LEAD_S its I/O runs and the tracer starts;
# SETTLE_S after the tracer says "Tracing" (all probes attached) the
# window opens. --max-overhead first runs at full rate for a window of
# duty.MIN_ON_S, then detaches: its window opens after that, and spans two
# duty periods (at least) so that it holds whole cycles.
LEAD_S = 1.5
SETTLE_S = 0.5
BOUNDED_SETTLE_S = duty.MIN_ON_S + 1.0
BOUNDED_MIN_SECS = 2 * duty.PERIOD_S
SHARDQ = os.path.join(REPO, "tests", "bpf", "progs", "shardq.cc")
SHARDQ_SPEC = os.path.join(REPO, "tests", "bpf", "progs", "shardq.json")
OSDSTAGE_ABI = abi.load("osdstage")
# every program of probes/osdstage.bpf.c, as the build lists them
OUR_PROGRAMS = tuple(OSDSTAGE_ABI.programs)
UPROBE_PROGRAMS = tuple(OSDSTAGE_ABI.programs_in("uprobe", "uretprobe"))
# the tool's uprobe hit counters, as the header marks them
UPROBE_HITS = Vocab(OSDSTAGE_ABI.enums).uprobe_hits


def fio(env, rw, secs):
    """One fio run against rbd/img1: (iops, p99_us)."""
    return Fio(env, rw, secs).stop(wait=True)


def bpftrace_args(pid):
    p = sh([PY, OSDSTAGE, "-p", str(pid), "--bpftrace-args"])
    if p.returncode != 0:
        sys.exit("bench: osdstage.py --bpftrace-args failed: " +
                 p.stderr.strip()[-500:])
    return p.stdout.split()


class Tracer:
    """A tracing tool running against the OSD: start-up time, CPU, RSS,
    its BPF programs."""

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
        self.pid = self.p.pid
        stream = self.p.stdout if self.cmd[0] == "bpftrace" else self.p.stderr
        said = []
        while True:
            line = stream.readline()
            if not line:
                self.p.wait()
                sys.exit("bench: %s ended (%s): %s" % (
                    " ".join(self.cmd[:6]), self.p.returncode,
                    ("".join(said) + self.p.stderr.read())[-1500:]))
            said.append(line)
            if "Tracing" in line:
                break
        self.startup_s = time.monotonic() - self.t0

    def cpu_s(self):
        return proc_cpu_s(self.pid)

    def stop(self):
        """SIGINT; -> (stdout, stderr, rusage, seconds it ran)."""
        self.p.send_signal(signal.SIGINT)
        life_s = time.monotonic() - self.t0
        try:
            out = self.p.stdout.read()
            err = self.p.stderr.read()
        finally:
            _, _, ru = os.wait4(self.p.pid, 0)
            if self.capture:
                shutil.rmtree(self.capture, ignore_errors=True)
        return out, err, ru, life_s


def captured_events(err):
    """(events, lost) from osdstage's last line with -w, else None."""
    m = re.search(r"capture \S+: (\d+) events, [\d.]+ MB(?:; (\d+) events "
                  r"LOST)?", err)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def osd_ops(asok):
    """The ops an OSD handled: client ops (op_r + op_w) and replica
    writes (subop_w), from its own counters."""
    return osd_op_counts(asok)[0]


def _per(num_s, ops):
    """Seconds over ops, in us per op (None without ops)."""
    return round(1e6 * num_s / ops, 3) if ops else None


def osd_window(env, pids, asoks, rw, secs, cmd=None, settle=SETTLE_S,
               stats=False):
    """One window of `secs` seconds under a steady fio load, untraced (cmd
    None) or traced by `cmd`: fio starts, after LEAD_S the tracer starts on
    the busy OSD, and `settle` seconds after it reports "Tracing" the
    window opens. -> {iops (Ceph's client ops over the window), ops,
    secs, p99_us and fio_iops (fio's whole run), osds: per OSD {cpu_s,
    ops, client_ops, cpu_us_per_op}, host_cpu_s, host_us_per_op}; traced
    also tracer_cpu_s and tracer_us_per_op (the window), startup_s,
    rss_mb, report (its last JSON line), events (-w), life_ops (client
    ops from before its start to after its end) and with stats its BPF
    programs' runs in the window."""
    job = Fio(env, rw)
    tr = None
    life0 = None
    try:
        time.sleep(LEAD_S)
        if cmd:
            tr = Tracer(cmd, pids[0])
            life0 = sum(osd_op_counts(a)[1] for a in asoks)
        time.sleep(settle)
        s0 = osd_snapshot(pids, asoks, tr, stats, job.p.pid)
        time.sleep(secs)
        s1 = osd_snapshot(pids, asoks, tr, stats, job.p.pid)
    finally:
        fio_iops, p99 = job.stop()
        if tr:
            if life0 is not None:
                life1 = sum(osd_op_counts(a)[1] for a in asoks)
            out, err, ru, life_s = tr.stop()
    dt = s1["t"] - s0["t"]
    per = []
    for (c0, o0, k0), (c1, o1, k1) in zip(s0["osds"], s1["osds"]):
        per.append({"cpu_s": round(c1 - c0, 3), "ops": o1 - o0,
                    "client_ops": k1 - k0,
                    "cpu_us_per_op": _per(c1 - c0, o1 - o0)})
    ops = sum(p["client_ops"] for p in per)
    host = s1["host_s"] - s0["host_s"]
    res = {"iops": ops / dt, "ops": ops, "secs": round(dt, 3),
           "p99_us": p99, "fio_iops": fio_iops, "osds": per,
           "host_cpu_s": round(host, 3), "host_us_per_op": _per(host, ops),
           "client_us_per_op": _per(s1["client_s"] - s0["client_s"], ops)}
    if tr:
        last = None
        for line in out.splitlines():
            if line.startswith("{"):
                last = json.loads(line)
        tcpu = s1["tracer_s"] - s0["tracer_s"]
        res.update({
            "tracer_cpu_s": round(tcpu, 3), "tracer_us_per_op": _per(tcpu, ops),
            "startup_s": tr.startup_s, "rss_mb": ru.ru_maxrss / 1024,
            "life_s": round(life_s, 3),
            "life_cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
            "life_ops": life1 - life0,
            "report": last, "events": captured_events(err)})
        if stats:
            res["progs"] = prog_runs(s0["progs"], s1["progs"], s1["names"],
                                     ops)
    return res


def prog_runs(p0, p1, names, ops):
    """The tracer's BPF programs over a window with run statistics on:
    {name: {runs, avg_ns, runs_per_op, uprobe}} (programs of one name
    summed; osdstage's by their names in the build's ABI)."""
    out = {}
    for pid_, s in p1.items():
        b = p0.get(pid_, {"run_cnt": 0, "run_time_ns": 0})
        name = names.get(pid_, "prog%d" % pid_)
        name = next((n for n in OUR_PROGRAMS if n[:15] == name), name)
        d = out.setdefault(name, {"runs": 0, "ns": 0, "n": 0,
                                  "uprobe": s["type"] == BPF_PROG_TYPE_KPROBE})
        d["runs"] += s["run_cnt"] - b["run_cnt"]
        d["ns"] += s["run_time_ns"] - b["run_time_ns"]
        d["n"] += 1
    for d in out.values():
        d["avg_ns"] = round(d["ns"] / d["runs"], 1) if d["runs"] else 0.0
        d["runs_per_op"] = round(d["runs"] / ops, 3) if ops else None
        del d["ns"]
    return out


def task_cpu_s(pid):
    """CPU seconds of a process's live threads (/proc/PID/task/*/schedstat
    field 0, ns on the CPU): -> (all of them, {thread name: seconds})."""
    total, by = 0.0, {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                s = int(f.read().split()[0]) / 1e9
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                comm = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue
        total += s
        by[comm] = by.get(comm, 0.0) + s
    return total, by


def recorder_throughput(items=300000):
    """The traced program's event rate: the controlled sharded queue
    (tests/bpf/progs/shardq.cc) with no gap between bursts of 64 items,
    recorded with -w: events written per second of the program's run
    (limited by what the probes cost the traced program, not by the
    recorder), events lost, and the tool's CPU from "go" to the program's
    exit as a share of one core (its threads' schedstat at both points),
    the recorder's drain thread (osdstage-rec) separately."""
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
        cpu0, by0 = task_cpu_s(tool.pid)
        t0 = time.monotonic()
        prog.stdin.write("go\n")
        prog.stdin.flush()
        prog.stdout.readline()
        prog.wait(300)
        secs = time.monotonic() - t0
        cpu1, by1 = task_cpu_s(tool.pid)
        tool.stdout.read()
        err = tool.stderr.read()
        tool.wait()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    got = captured_events(err)
    if got is None:
        sys.exit("bench: recorder run wrote no capture: " + err[-500:])
    rec = by1.get("osdstage-rec", 0.0) - by0.get("osdstage-rec", 0.0)
    return {"events": got[0], "lost": got[1], "secs": round(secs, 2),
            "events_per_s": round(got[0] / secs),
            "cpu_window": "go to exit",
            "cpu_pct_of_core": round(100 * (cpu1 - cpu0) / secs, 1),
            "rec_thread_cpu_pct_of_core": round(100 * rec / secs, 1)
            if "osdstage-rec" in by1 else None}


# --- tracing several OSDs at once (the "osds" part) -----------------------

OSDS_MODES = {
    # mode: osdstage's command; (label, what it traces)
    "one": [PY, OSDSTAGE, "--osd", "0", "-j"],
    "all": [PY, OSDSTAGE, "--osd", "all", "-j"],
}
OSDS_LABELS = {"one": "--osd 0", "all": "--osd all"}
OSDS_WORKLOADS = [("write", "randwrite"), ("randread", "randread")]


def stats_run(env, pid, asok, cmd, rw, secs, settle):
    """One traced window with the kernel's BPF run statistics on: the
    tracer's programs (runs per op, ns per run) and its uprobe program
    runs per op."""
    with bpf_stats_on():
        w = osd_window(env, [pid], [asok], rw, secs, cmd, settle, stats=True)
    return stats_of(w)


def stats_of(w):
    """stats_run()'s figures of a window taken with stats (osd_window's
    stats=True, under bpf_stats_on())."""
    progs = w["progs"]
    up = sum(p["runs"] for p in progs.values() if p["uprobe"])
    return {"ops": w["ops"], "secs": w["secs"], "programs": progs,
            "uprobe_runs_per_op": round(up / w["ops"], 3) if w["ops"]
            else None,
            "all_runs_per_op": round(sum(p["runs"] for p in progs.values())
                                     / w["ops"], 3) if w["ops"] else None,
            "call_bias_us": (w["report"] or {}).get("call_bias_us")}


def startup_idle(pid, n=3):
    """The default mode's start-up on the idle OSD (median of n)."""
    got = []
    for _ in range(n):
        tr = Tracer(MODES["default"], pid)
        tr.stop()
        got.append(tr.startup_s)
    return statistics.median(got)
