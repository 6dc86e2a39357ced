"""bench/measure_reader.py - the reader's and the recorder's figures,
measured on the controlled program without a Ceph lab (the reader part,
`make bench BENCH=reader`): a capture of >= 10 million events of tests/bpf/progs/shardq.cc recorded
by osdstage -w, read back with -j, --slowest 5 -j and --html, each read
timed in a child process of its own (reader_bench), a capture of its
waits' stacks read back (stacks_bench), and the recorder
alone at set rates, driven by tests/bpf/ringgen.py (recorder_rates);
reader_part merges them into the release's results file. It
uses measure.py's paths to the tool and its capture summary line; the
figures are judged in targets.py and rendered in render.py."""
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

from labkit import (REPO, RESULTS, cpu_model, git_commit, read_results,
                    sh, write_results)
from measure import (OSDSTAGE, PY, SHARDQ, SHARDQ_SPEC, captured_events,
                     recorder_throughput)


# --- the reader on a large capture, the recorder alone --------------------

READER_MIN_EVENTS = 10000000
# shardq 2 2 ITEMS normal 20 0 20 8 0 makes about 1.85 events per item
# on the idle 2-core machine (more when other work shares the cores: more
# context switches), ~31k items/s: 5.7 M items, ~10.5 M events in ~3 min
READER_ITEMS = 5700000
READER_SMOKE_ITEMS = 20000
# each read this many times, the reads taking turns (the same read's wall
# time varied by 15-25 % between bench runs here): the median is reported,
# with the spread
READ_RUNS = 3
SHARDQ_READER_ARGS = ["2", "2", "{items}", "normal", "20", "0", "20", "8", "0"]
# The lab's peak event rate: a 5-s capture at the lab's peak held 599k
# events; a 10-minute capture at that rate, ~72 M events.
LAB_PEAK_EVENTS_PER_S = 119800
TEN_MIN_EVENTS = LAB_PEAK_EVENTS_PER_S * 600
READS = [
    # (key, osdstage arguments after -r CAP)
    ("json", ["-j"]),
    ("slowest", ["--slowest", "5", "-j"]),
    ("html", ["--html", "{html}"]),
]
# The stacks of waits read back: the program's lock case (a burst of two
# items every 500 us, the second waiting ~300 us for its PG's lock held by
# the first), recorded with --stacks STACKS_MIN_US: ~2,000 waits with
# stacks a second, each unwound when the capture is read
SHARDQ_STACKS_ARGS = ["2", "2", "{items}", "lock", "500", "0", "50", "2",
                      "300"]
STACKS_MIN_US = 100
STACKS_ITEMS = 40000
STACKS_SMOKE_ITEMS = 400
STACK_READS = [
    ("folded", ["--folded", "waits"]),
    ("window", ["--from", "0", "-j"]),
]
RINGGEN_RATES = (500000, 1000000, 2000000)
RINGGEN_SECS = 3.0
READER_KEYS = ("reader", "recorder_rates")
# one command in a child of its own: its wall time, its own peak RSS
# (RUSAGE_CHILDREN of this wrapper holds only that command) and CPU
TIMED = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.monotonic()\n"
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,\n"
    "                   stderr=subprocess.PIPE)\n"
    "secs = time.monotonic() - t\n"
    "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'rc': p.returncode, 'secs': secs,\n"
    "                  'maxrss_kb': ru.ru_maxrss,\n"
    "                  'cpu_s': ru.ru_utime + ru.ru_stime,\n"
    "                  'err': p.stderr.decode(errors='replace')[-800:]}))\n")


def record_shardq(exe, cap, items, d, prog_args=SHARDQ_READER_ARGS,
                  extra=()):
    """Record the controlled program (`prog_args`, `items` items) under
    osdstage -w CAP --ring-mb 256 EXTRA until it exits. -> dict"""
    args = [a.replace("{items}", str(items)) for a in prog_args]
    prog = subprocess.Popen([exe] + args, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    errpath = os.path.join(d, "record.err")
    with open(errpath, "w") as errf:
        tool = subprocess.Popen([PY, OSDSTAGE, "-p", str(prog.pid),
                                 "--probes", SHARDQ_SPEC, "-w", cap,
                                 "--ring-mb", "256"] + list(extra) +
                                ["1"],
                                stdout=subprocess.DEVNULL, stderr=errf)
    try:
        deadline = time.monotonic() + 60
        while True:
            with open(errpath) as f:
                if "Tracing" in f.read():
                    break
            if tool.poll() is not None or time.monotonic() > deadline:
                with open(errpath) as f:
                    sys.exit("bench: reader capture failed: " + f.read())
            time.sleep(0.1)
        t0 = time.monotonic()
        prog.stdin.write("go\n")
        prog.stdin.flush()
        prog.stdout.read()
        prog.wait(3600)
        secs = time.monotonic() - t0
        tool.wait(600)
    finally:
        for p in (prog, tool):
            if p.poll() is None:
                p.kill()
                p.wait()
    with open(errpath) as f:
        err = f.read()
    got = captured_events(err)
    if got is None:
        sys.exit("bench: reader capture wrote no capture: " + err[-800:])
    m = re.search(r"capture \S+: \d+ events, ([\d.]+) MB", err)
    return {"program": "shardq " + " ".join(args), "items": items,
            "events": got[0], "lost": got[1],
            "capture_mb": float(m.group(1)) if m else None,
            "record_secs": round(secs, 1)}


def time_read(cap, extra, html=None):
    """osdstage -r CAP EXTRA in a child of its own ({html}: the file html).
    -> dict"""
    args = [x.replace("{html}", html or "") for x in extra]
    p = sh([PY, "-c", TIMED, PY, OSDSTAGE, "-r", cap] + args)
    if p.returncode:
        sys.exit("bench: timing wrapper failed: " + p.stderr[-800:])
    r = json.loads(p.stdout.strip().splitlines()[-1])
    if r["rc"]:
        sys.exit("bench: osdstage -r %s failed (%d): %s" % (
            " ".join(extra), r["rc"], r["err"]))
    return {"args": "-r CAP " + " ".join(extra).replace("{html}", "F"),
            "secs": round(r["secs"], 2),
            "peak_rss_mb": round(r["maxrss_kb"] / 1024, 1),
            "cpu_s": round(r["cpu_s"], 2)}


def _median_read(runs, n, rate_key):
    """One read's timed runs -> the median run's figures (by wall time)
    with every run's wall time, the highest peak RSS of all, and
    `rate_key`: n over the median wall time."""
    rs = sorted(runs, key=lambda x: x["secs"])
    r = dict(rs[len(rs) // 2])
    r["runs_s"] = [x["secs"] for x in runs]
    r["peak_rss_mb"] = max(x["peak_rss_mb"] for x in rs)
    r[rate_key] = round(n / r["secs"]) if r["secs"] else None
    return r


def reader_bench(smoke=False):
    """A capture of >= 10 M events of the controlled
    program, read back with -j, --slowest 5 -j and --html, each in a child
    of its own: events/s and peak RSS. The capture is deleted."""
    d = tempfile.mkdtemp(prefix="bench-reader-", dir="/var/tmp")
    try:
        exe = os.path.join(d, "shardq")
        sh(["g++", "-O2", "-g", "-pthread", "-o", exe, SHARDQ], check=True)
        cap = os.path.join(d, "big.ctf")
        items = READER_SMOKE_ITEMS if smoke else READER_ITEMS
        rec = record_shardq(exe, cap, items, d)
        print("bench: reader capture: %d events (%d lost), %.0f MB in %.0f s"
              % (rec["events"], rec["lost"], rec["capture_mb"] or 0,
                 rec["record_secs"]), file=sys.stderr)
        if not smoke and rec["events"] < READER_MIN_EVENTS:
            # too few: once more with the items scaled up, 5 % to spare
            shutil.rmtree(cap, ignore_errors=True)
            items = int(items * 1.05 * READER_MIN_EVENTS / rec["events"])
            rec = record_shardq(exe, cap, items, d)
            print("bench: reader capture again: %d events" % rec["events"],
                  file=sys.stderr)
        n = rec["events"]
        rec["reads"] = {}
        runs = {key: [] for key, _ in READS}
        for _ in range(1 if smoke else READ_RUNS):
            for key, extra in READS:
                html = os.path.join(d, "report.html")
                r = time_read(cap, extra, html)
                if key == "html":
                    r["html_mb"] = round(os.path.getsize(html) / 1e6, 1)
                    os.unlink(html)
                runs[key].append(r)
        for key, _ in READS:
            rec["reads"][key] = r = _median_read(runs[key], n,
                                                 "events_per_s")
            print("bench: reader %-26s %6.1f s, %9d events/s, %5.0f MB RSS"
                  % (r["args"], r["secs"], r["events_per_s"] or 0,
                     r["peak_rss_mb"]), file=sys.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    h = rec["reads"]["html"]["events_per_s"]
    rec["lab_peak_events_per_s"] = LAB_PEAK_EVENTS_PER_S
    rec["ten_min_events"] = TEN_MIN_EVENTS
    rec["ten_min_html_s"] = round(TEN_MIN_EVENTS / h, 1) if h else None
    return rec


def _count_events(cap, name):
    """How many events of class `name` capture `cap` holds."""
    from cephlat.capture.reader import Capture  # (labkit: lib on the path)
    return sum(len(r) for ch in Capture(cap).chunks([name])
               for r in ch.recs.values())


def stacks_bench(smoke=False):
    """The controlled program's lock case recorded with --stacks
    (SHARDQ_STACKS_ARGS), read back with --folded waits and a window's
    report (which sums the waits' stacks): wall time, waits unwound a
    second, peak RSS; the median of READ_RUNS. The capture is deleted."""
    d = tempfile.mkdtemp(prefix="bench-stacks-", dir="/var/tmp")
    try:
        exe = os.path.join(d, "shardq")
        sh(["g++", "-O2", "-g", "-pthread", "-o", exe, SHARDQ], check=True)
        cap = os.path.join(d, "stacks.ctf")
        rec = record_shardq(exe, cap, STACKS_SMOKE_ITEMS if smoke else
                            STACKS_ITEMS, d, SHARDQ_STACKS_ARGS,
                            ["--stacks", str(STACKS_MIN_US)])
        rec["stacks_min_us"] = STACKS_MIN_US
        rec["waits"] = n = _count_events(cap, "wait_stack")
        rec["reads"] = {}
        runs = {key: [] for key, _ in STACK_READS}
        for _ in range(1 if smoke else READ_RUNS):
            for key, extra in STACK_READS:
                runs[key].append(time_read(cap, extra))
        for key, _ in STACK_READS:
            rec["reads"][key] = r = _median_read(runs[key], n, "waits_per_s")
            print("bench: stacks %-26s %6.1f s, %7d waits/s, %5.0f MB RSS"
                  % (r["args"], r["secs"], r["waits_per_s"] or 0,
                     r["peak_rss_mb"]), file=sys.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return rec


def recorder_rates(rates=RINGGEN_RATES, secs=RINGGEN_SECS):
    """The recorder alone (tests/bpf/ringgen.py: a BPF
    program fills the ring at a set rate, lib/native/recorder.c drains it
    into stream files): achieved events/s, lost, the recorder thread's
    CPU as a share of one core, per rate."""
    sys.path.insert(0, os.path.join(REPO, "tests", "bpf"))
    import ringgen
    d = tempfile.mkdtemp(prefix="bench-ringgen-", dir="/var/tmp")
    rows = []
    try:
        obj = ringgen.build(d)
        for rate in rates:
            r = ringgen.run(obj, rate, secs, ring_mb=32)
            r["set_rate"] = rate
            rows.append(r)
            print("bench: recorder at %d events/s: %d events/s, %d lost, "
                  "%.1f %% of a core" % (rate, r["rate"], r["lost"],
                                         r["cpu_pct"]), file=sys.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {"ring_mb": 32, "secs": secs, "rows": rows}


def reader_part(a, traced=True):
    """The reader's and the recorder's figures on the controlled program
    (no lab needed), merged into bench/results/<release>.json. traced:
    also the traced program's event rate (recorder_throughput; the main
    part has it).
    -> the results file's new content"""
    t_start = time.monotonic()
    rel = os.environ.get("CEPH") or "pacific"
    out = a.out or os.path.join(RESULTS, rel + ".json")
    reader = reader_bench(a.smoke)
    reader["stacks"] = stacks_bench(a.smoke)
    reader.update({"date": time.strftime("%Y-%m-%d"),
                   "commit": git_commit(),
                   "machine": {"cpu_model": cpu_model(),
                               "cores": os.cpu_count(),
                               "kernel": platform.release()}})
    rates = recorder_rates((RINGGEN_RATES[0],) if a.smoke else
                           RINGGEN_RATES, 1.0 if a.smoke else RINGGEN_SECS)
    res = read_results(out)
    res["reader"] = reader
    res["recorder_rates"] = rates
    if traced:
        rec = recorder_throughput(50000 if a.smoke else 300000)
        old = res.get("recorder") or {}
        rec["lab_peak_cpu_pct"] = old.get("lab_peak_cpu_pct")
        rec["lab_peak_events_per_s"] = old.get("lab_peak_events_per_s")
        res["recorder"] = rec
    reader["runtime_s"] = round(time.monotonic() - t_start)
    write_results(out, res)
    return res
