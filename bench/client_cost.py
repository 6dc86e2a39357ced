"""What rbdrecord costs the client it records (make bench BENCH=client;
the aim: cheap enough to leave on for a benchmark run).

On the lab (the host lab, Pacific: the release with the Objecter's
offsets), fio's rbd engine (4 KiB random reads and writes, half each,
iodepth 16, --secs seconds, on rbd/img1) runs alone and under
`rbdrecord.py -o DIR -- fio ...` (the librbd calls and every OSD op, as
recorded by default), in interleaved pairs. Per op (fio's own I/O count):

  client CPU   fio's CPU time, every thread (librbd's, the messenger's:
               the uprobe traps and programs run there) included: its
               wait4 rusage (plain: ours; recorded: rbdrecord's, which it
               prints), recorded minus plain;
  recorder     rbdrecord's own CPU per op (draining the ring, writing the
               trace): the wait4 rusage of the whole run minus fio's,
               minus its start-up and stop (`rbdrecord -- true`: Python,
               the libraries' symbol tables, loading the BPF object),
               which is paid once and shown apart;
  hits         probe hits per op (events written / fio's ops);
  IOPS ratio   recorded / plain, and the trace's bytes per op.

Writes bench/results/client.json; BENCHMARKS.md's section comes from it.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")
RESULTS = os.path.join(HERE, "results", "client.json")
JOB = """[global]
ioengine=rbd
clientname=admin
pool=rbd
rbdname=img1
direct=1
time_based=1
runtime=%d
[mix]
rw=randrw
rwmixread=50
bs=4k
iodepth=16
"""


def _run(argv, env):
    """argv to its end: (its wait4 CPU seconds, children included)."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read()
    if p.returncode:
        sys.exit("bench: client: %s failed (%d): %s" % (
            " ".join(argv[:4]), p.returncode, err.strip()[-800:]))
    return ru.ru_utime + ru.ru_stime, err


def window(env, secs, recorded, tmp):
    """One fio run, plain or recorded -> its figures."""
    job = os.path.join(tmp, "job.fio")
    with open(job, "w") as f:
        f.write(JOB % secs)
    out = os.path.join(tmp, "fio.json")
    fio = ["fio", "--output-format=json", "--output=%s" % out, job]
    trace = os.path.join(tmp, "trace")
    argv = [sys.executable, RBDRECORD, "-o", trace, "--force", "--"] + \
        fio if recorded else fio
    cpu, err = _run(argv, env)
    with open(out) as f:
        j = json.load(f)["jobs"][0]
    client_cpu = cpu
    if recorded:
        said = re.search(r"fio used ([0-9.]+) s of CPU", err)
        if not said:
            sys.exit("bench: client: rbdrecord did not say fio's CPU:\n" +
                     err[-800:])
        client_cpu = float(said.group(1))
    ops = j["read"]["total_ios"] + j["write"]["total_ios"]
    runtime = j["job_runtime"] / 1000.0
    res = {"ops": ops, "iops": ops / runtime,
           "client_us_per_op": client_cpu / ops * 1e6,
           "whole_us_per_op": cpu / ops * 1e6}
    if recorded:
        if "none lost" not in err or "not recorded" in err:
            sys.exit("bench: client: the recording lost events or OSD "
                     "ops:\n" + err[-800:])
        events = int(err.split("wrote", 1)[1].split(":", 1)[1].split()[0])
        size = sum(os.path.getsize(os.path.join(d, n))
                   for d, _, names in os.walk(trace) for n in names)
        res.update(events_per_op=events / ops, bytes_per_op=size / ops)
        shutil.rmtree(trace)
    return res


def startup_s(env, tmp, runs=3):
    """rbdrecord's CPU seconds to start and stop around a command that
    does nothing: the median of `runs`."""
    trace = os.path.join(tmp, "idle")
    return statistics.median(
        _run([sys.executable, RBDRECORD, "-o", trace, "--force", "--",
              "true"], env)[0] for _ in range(runs))


def measure(env, pairs, secs):
    env = dict(os.environ, CEPH_CONF=env["CEPH_CONF"])
    tmp = tempfile.mkdtemp(prefix="bench-client-", dir="/var/tmp")
    runs = []
    try:
        window(env, 3, False, tmp)          # warm the image and the cache
        startup = startup_s(env, tmp)
        for i in range(pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            got = {rec: window(env, secs, rec, tmp) for rec in order}
            runs.append({"plain": got[False], "recorded": got[True]})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median

    def diff(key):
        return [r["recorded"][key] - r["plain"][key] for r in runs]
    res = {
        "pairs": pairs, "secs": secs, "runs": runs,
        "client_us_per_op": med(diff("client_us_per_op")),
        "client_us_per_op_range": [min(diff("client_us_per_op")),
                                   max(diff("client_us_per_op"))],
        "recorder_startup_s": startup,
        "recorder_us_per_op": med(
            [r["recorded"]["whole_us_per_op"] -
             r["recorded"]["client_us_per_op"] -
             startup / r["recorded"]["ops"] * 1e6 for r in runs]),
        "ops_per_run": med([r["recorded"]["ops"] for r in runs]),
        "plain_client_us_per_op": med(
            [r["plain"]["client_us_per_op"] for r in runs]),
        "iops_ratio": med([r["recorded"]["iops"] / r["plain"]["iops"]
                           for r in runs]),
        "events_per_op": med([r["recorded"]["events_per_op"] for r in runs]),
        "bytes_per_op": med([r["recorded"]["bytes_per_op"] for r in runs]),
    }
    return res


def client_part(a, env, commit):
    """make bench's part: measure, write RESULTS; -> its text."""
    res = measure(env, a.client_pairs, a.client_secs)
    res["date"] = time.strftime("%Y-%m-%d")
    res["commit"] = commit
    with open(RESULTS, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    return "\n".join(render_section()) + "\n"


def render_section():
    """BENCHMARKS.md's section from RESULTS (none before a run)."""
    if not os.path.exists(RESULTS):
        return []
    with open(RESULTS) as f:
        r = json.load(f)
    lo, hi = r["client_us_per_op_range"]
    return [
        "## What rbdrecord costs the client it records", "",
        "`make bench BENCH=client`: fio rbd randrw 4 KiB iodepth 16 on "
        "rbd/img1, alone and under `rbdrecord.py -- fio` (the librbd calls "
        "and every OSD op the Objecter sends), %d interleaved pairs of %d s "
        "(bench/client_cost.py); commit %s, %s." % (
            r["pairs"], r["secs"], r["commit"], r["date"]), "",
        "| measure | measured |", "|---|---|",
        "| client CPU added per op (fio and its job processes: the traps "
        "and programs run in their threads) | %.1f us (%.1f to %.1f), on %.1f us "
        "untraced (%.1f %%) |" % (
            r["client_us_per_op"], lo, hi, r["plain_client_us_per_op"],
            100.0 * r["client_us_per_op"] / r["plain_client_us_per_op"]),
        "| rbdrecord's own CPU per op (draining, writing the trace; on "
        "a core of its own on a real client) | %.1f us, and %.2f s once "
        "to start and stop (%.0f ops a run) |" % (
            r["recorder_us_per_op"], r["recorder_startup_s"],
            r["ops_per_run"]),
        "| events per op (probe hits, one an event) | %.2f |" %
        r["events_per_op"],
        "| trace bytes per op | %.0f |" % r["bytes_per_op"],
        "| IOPS recorded / plain (2 cores: fio, rbdrecord and the OSD "
        "share them) | %.3f |" % r["iops_ratio"], "",
        "Per op the client takes 8 probe hits (5 entries, 3 returns: "
        "the aio call and its return, rbd_aio_get_return_value and its "
        "return, rbd_aio_release, Objecter::_send_op, handle_osd_op_reply "
        "and its return); a return probe traps twice. rbdrecord decodes "
        "and writes each event in Python.", ""]
