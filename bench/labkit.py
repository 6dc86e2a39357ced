"""bench/labkit.py - what every part of `make bench` uses to drive the lab
and measure it: the lab's environment, fio on the lab's image, the OSD's
CPU time and op counts, the BPF programs' run statistics, the machine's
description and the figures' formatting. The bench's other modules
(measure.py, measure_reader.py, summary.py, targets.py, why.py,
render.py, run.py) and exporter_soak.py (the exporter's soak) with its
report, soak_render.py, import it; it imports none of them, and those two import nothing else of
the bench."""
import contextlib
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.ceph import adminsock  # noqa: E402
from cephlat.engine import bpfsys  # noqa: E402


LAB = os.path.join(REPO, "vagrant", "lab.sh")


BPF_PROG_TYPE_KPROBE = bpfsys.BPF_PROG_TYPE_KPROBE


CLK_TCK = os.sysconf("SC_CLK_TCK")


NCPU = os.cpu_count() or 1


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


class Fio:
    """fio against rbd/img1 in the background: `secs` seconds, or until
    stop() (SIGINT: fio ends its jobs and still reports)."""

    def __init__(self, env, rw, secs=None, rate_iops=None):
        """rate_iops: at most this many I/Os a second in each direction
        (fio --rate_iops); default: as fast as it goes."""
        self.rw = rw
        args = ["fio", "--name=bench", "--ioengine=rbd", "--clientname=admin",
                "--pool=rbd", "--rbdname=img1", "--rw=" + rw, "--bs=4k",
                "--iodepth=16", "--runtime=%d" % (secs or 3600),
                "--time_based", "--direct=1", "--output-format=json",
                "--randseed=1"]
        if rate_iops:
            args.append("--rate_iops=%d" % rate_iops)
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ,
                                           CEPH_CONF=env["CEPH_CONF"]))

    def stop(self, wait=False):
        """-> (iops, p99_us) over fio's whole run."""
        if not wait and self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
        out, err = self.p.communicate(timeout=None if wait else 120)
        if "{" not in out:
            sys.exit("bench: fio failed: " + err.strip()[-500:])
        job = json.loads(out[out.index("{"):])["jobs"][0]
        side = job["read"] if "read" in self.rw else job["write"]
        return side["iops"], side["clat_ns"]["percentile"]["99.000000"] / 1e3


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


def tracer_progs(pid):
    """The BPF programs a process holds, from its descriptors' fdinfo:
    {prog_id: {"type", "run_cnt", "run_time_ns"}} (run counters move only
    while kernel.bpf_stats_enabled is 1)."""
    out = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        info = bpfsys.prog_fdinfo(pid, int(fd))
        if info is not None:
            out[info.pop("id")] = info
    return out


def prog_names(ids):
    """{prog_id: name} from bpftool."""
    p = sh(["bpftool", "prog", "show", "-j"])
    names = {}
    for prog in json.loads(p.stdout or "[]"):
        if prog.get("id") in ids:
            names[prog["id"]] = prog.get("name", "") or "prog%d" % prog["id"]
    return names


def proc_cpu_s(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def host_busy_s():
    """Busy time of all CPUs in seconds: everything in /proc/stat's cpu
    line but idle and iowait (guest time is inside user and nice)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / CLK_TCK


def osd_op_counts(asok):
    """(ops, client ops) an OSD handled, from its own counters: ops =
    client ops (op_r + op_w) + replica writes (subop_w)."""
    d = adminsock.perf_dump(asok)["osd"]
    client = d["op_r"] + d["op_w"]
    return client + d["subop_w"], client


def osd_snapshot(pids, asoks, tracer=None, stats=False, client=None):
    snap = {"t": time.monotonic(), "host_s": host_busy_s(),
            "osds": [(proc_cpu_s(p),) + osd_op_counts(a)
                     for p, a in zip(pids, asoks)]}
    if client is not None:
        snap["client_s"] = proc_cpu_s(client)
    if tracer is not None:
        snap["tracer_s"] = tracer.cpu_s()
        if stats:
            snap["progs"] = tracer_progs(tracer.pid)
            snap["names"] = prog_names(set(snap["progs"]))
    return snap


def _spread(values, digits=2):
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None
    return {"median": round(statistics.median(values), digits),
            "min": round(min(values), digits),
            "max": round(max(values), digits)}


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


def machine(env, pid):
    cpu = cpu_model()
    # never run the target's binary: a container's may not run here
    from cephlat.engine.elfsym import ElfSymbols
    with ElfSymbols("/proc/%d/exe" % pid) as elf:
        ver = elf.version_string()
        cet = any(elf.mark_cet(s).cet for s in elf.find("OSD::enqueue_op"))
    return {"cpu_model": cpu, "cores": os.cpu_count(),
            "kernel": platform.release(), "ceph": ver, "cet": cet,
            "release": env.get("CEPH_RELEASE") or "pacific",
            "container": bool(env.get("LAB_CONTAINER"))}


@contextlib.contextmanager
def bpf_stats_on():
    """The kernel's BPF run statistics on (kernel.bpf_stats_enabled: each
    program run also times itself), restored afterwards."""
    path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(path) as f:
        old = f.read().strip()
    with open(path, "w") as f:
        f.write("1")
    try:
        yield
    finally:
        with open(path, "w") as f:
            f.write(old)


def git_commit():
    """The tree measured: its commit, "+dirty" with local changes."""
    head = sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
    if head.returncode:
        return None
    dirty = sh(["git", "-C", REPO, "status", "--porcelain", "--",
                "probes", "lib", "tools"]).stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


RESULTS = os.path.join(REPO, "bench", "results")


def read_results(path):
    """A results file's content, {} when there is none yet: the parts that
    share a release's file keep one another's keys."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def write_results(path, res):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=1)


def _sp(s, fmt="%.1f", unit=""):
    """A {median, min, max} as 'median (min-max)', '-' when absent."""
    if not s:
        return "-"
    return (fmt + "%s (%s)") % (s["median"], unit,
                                _range(s["min"], s["max"], fmt))


def _range(lo, hi, fmt="%.1f"):
    """'lo-hi', or 'lo to hi' when either is negative."""
    sep = " to " if lo < 0 or hi < 0 else "-"
    return (fmt + sep + fmt) % (lo, hi)


def _release(res):
    return res["machine"].get("release", "pacific")


def _met(ok):
    """A target's verdict: met, not met, not measured (None), or a str
    saying why the measure cannot tell."""
    if isinstance(ok, str):
        return ok
    if ok is None:
        return "not measured"
    return "met" if ok else "**not met**"

