"""The floor of a uprobe hit on this machine (make bench BENCH=floor).

floor/target.c's functions start with known instructions; the program of
floor/floor.bpf.c only returns. Each kind below is timed as the CPU time of the calling
thread per call (the trap, the kernel's handling and the program all run
in it), probed against the same function unprobed, in interleaved rounds;
the figure is the median of the rounds' differences, per probe hit
(bench/results/floor.json; BENCHMARKS.md puts the OSD's own trap per hit
beside it):

  push    entry probe on `push %rbp` (emulated: one trap), classic link
  multi   the same through a uprobe_multi link, as the tracer attaches
  cet     entry probe after endbr64, on its push (Reef's and Tentacle's)
  endbr   entry probe on the endbr64 itself (what the tracer avoids)
  xol     entry probe on an instruction single-stepped out of line
  jcc     probe on a conditional jump, 3 bytes in (emulated)
  nop5    entry probe on a 5-byte nop (rewritten into a call to the
          kernel's uprobe trampoline after the first hit, where the kernel
          has the uprobe syscall)
  ret     entry + return probe on the `push` function (2 hits a call)
  slept   the push probe hit right after the thread slept (GAP_US before
          each call, fewer calls): the state an OSD's worker is in when
          it wakes for an op, its caches and TLB shared with whatever ran
          meanwhile

  floor.py [--rounds N] [--calls N] [--json]   (root)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SRC = os.path.join(HERE, "floor")        # target.c, floor.bpf.c
sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.abi import default_bpf_dir         # noqa: E402
from cephlat.engine import bpf                  # noqa: E402
from cephlat.engine.elfsym import ElfSymbols    # noqa: E402
from cephlat.errors import UserError            # noqa: E402

# kind -> (function, offset from its start, program, return probe too,
#          hits per call, what it is[, us slept before each call])
GAP_US = 20
GAP_CALLS = 25           # a slept kind makes calls / GAP_CALLS calls
KINDS = {
    "push": ("f_push", 0, "floor_hit", False, 1,
             "entry probe on `push %rbp` (emulated), classic link"),
    "multi": ("f_push", 0, "floor_multi", False, 1,
              "the same through a uprobe_multi link (the tracer's)"),
    "cet": ("f_cet", 4, "floor_hit", False, 1,
            "entry probe after `endbr64`, on its push (CET builds)"),
    "endbr": ("f_cet", 0, "floor_hit", False, 1,
              "entry probe on `endbr64` itself (single-stepped)"),
    "xol": ("f_xol", 0, "floor_hit", False, 1,
            "entry probe on `lea` (single-stepped out of line)"),
    "jcc": ("f_jcc", 3, "floor_hit", False, 1,
            "entry probe on a conditional jump (emulated)"),
    "nop5": ("f_nop5", 0, "floor_hit", False, 1,
             "entry probe on a 5-byte nop (uprobe syscall once optimized)"),
    "ret": ("f_push", 0, "floor_hit", True, 2,
            "entry + return probe (uretprobe), per hit"),
    "slept": ("f_push", 0, "floor_hit", False, 1,
              "the push probe, each call after a %d-us sleep (an OSD "
              "worker waking for an op)" % GAP_US, GAP_US),
}


def build(out):
    """Compile the target (gcc) and the BPF object (clang, against the
    build's vmlinux.h) into directory `out`. -> (target, object)"""
    exe, obj = os.path.join(out, "target"), os.path.join(out, "floor.bpf.o")
    vmlinux = os.path.join(default_bpf_dir(), "vmlinux.h")
    if not os.path.exists(vmlinux):
        raise UserError("%s missing: run 'make' first" % vmlinux)
    for cmd in (["gcc", "-O2", "-o", exe, os.path.join(SRC, "target.c")],
                ["clang", "-O2", "-g", "-target", "bpf", "-I",
                 default_bpf_dir(), "-c", os.path.join(SRC, "floor.bpf.c"),
                 "-o", obj]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise UserError("%s failed: %s" % (cmd[0], p.stderr.strip()))
    return exe, obj


def run(exe, fn, calls, gap_us=0):
    """-> (thread CPU ns per call, the function's first 5 bytes, hex)"""
    p = subprocess.run([exe, fn, str(calls)] +
                       ([str(gap_us)] if gap_us else []), capture_output=True,
                       text=True, timeout=600)
    if p.returncode:
        raise UserError("target %s: exit %d %s" % (fn, p.returncode,
                                                   p.stderr.strip()))
    ns, code = p.stdout.split()
    return float(ns), code


def measure(rounds=5, calls=1000000):
    """Every kind, `rounds` interleaved rounds. -> JSON-able dict"""
    if os.geteuid() != 0:
        raise UserError("the probe-floor bench needs root (uprobes)")
    out = tempfile.mkdtemp(prefix="osdstage-floor-")
    try:
        exe, obj_path = build(out)
        with ElfSymbols(exe) as elf:
            offs = {fn: elf.find(fn)[0].offset
                    for fn in {k[0] for k in KINDS.values()}}
        per = {k: [] for k in KINDS}
        base = {k: [] for k in KINDS}
        code = {}
        with bpf.BPFObject(obj_path) as obj:    # detaches all on the way out
            obj.use_uprobe_multi(["floor_multi"])
            obj.load()
            for _ in range(rounds):
                for kind, (fn, off, prog, ret, hits, _w, *gap) in \
                        KINDS.items():
                    gap = gap[0] if gap else 0
                    n = max(1, calls // GAP_CALLS) if gap else calls
                    b, _c = run(exe, fn, n, gap)
                    probes = [(offs[fn] + off, 0, fn)]
                    links = obj.attach_uprobes(prog, exe, probes)
                    try:
                        if ret:
                            links += obj.attach_uprobes(prog, exe, probes,
                                                        retprobe=True)
                        t, code[kind] = run(exe, fn, n, gap)
                    finally:
                        for ln in links:
                            ln.destroy()
                    base[kind].append(b)
                    per[kind].append((t - b) / hits)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    res = {"rounds": rounds, "calls": calls, "kernel": os.uname().release,
           "kinds": {}}
    for kind, (fn, off, prog, ret, hits, what, *gap) in KINDS.items():
        res["kinds"][kind] = {
            "what": what, "hits_per_call": hits,
            "ns_per_hit": round(statistics.median(per[kind]), 1),
            "min": round(min(per[kind]), 1), "max": round(max(per[kind]), 1),
            "base_ns_per_call": round(statistics.median(base[kind]), 2),
            "first_bytes_after": code[kind]}
    nop5 = res["kinds"]["nop5"]
    nop5["optimized"] = nop5["first_bytes_after"].startswith("e8")
    return res


def render(res, osd=None):
    """BENCHMARKS.md lines for `res` (measure()'s), with the OSD's own
    trap per hit beside it: `osd` = {release: us per trap} or None."""
    k = res["kinds"]
    out = ["| probe | ns per hit (median) | min-max | what |",
           "|---|---|---|---|"]
    for kind, r in k.items():
        what = r["what"]
        if kind == "nop5":
            what += "; rewritten: %s (first bytes after the run: %s)" % (
                "yes" if r["optimized"] else "no", r["first_bytes_after"])
        out.append("| %s | %.0f | %.0f-%.0f | %s |" % (
            kind, r["ns_per_hit"], r["min"], r["max"], what))
    for rel, us in sorted((osd or {}).items()):
        out.append("| inside the busy OSD, %s | %.0f | | the "
                   "uprobe traps of the userspace mode's added OSD CPU, per "
                   "hit |" % (rel, us * 1000))
    out += ["", "%d rounds of %s calls per kind, kernel %s; the thread's "
            "CPU time per call probed minus unprobed (the same function), "
            "per hit." % (res["rounds"], "{:,}".format(res["calls"]),
                          res["kernel"])]
    return out


RESULTS = os.path.join(HERE, "results", "floor.json")


def floor_part(a):
    """make bench's part: measure, write RESULTS; -> its text."""
    try:
        res = measure(a.floor_rounds, a.floor_calls)
    except UserError as e:
        sys.exit("bench: floor: %s" % e)
    res["date"] = time.strftime("%Y-%m-%d")
    with open(RESULTS, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    return "\n".join(render(res)) + "\n"


def load():
    """The floor part's last results (RESULTS), None before a floor
    run."""
    if not os.path.exists(RESULTS):
        return None
    with open(RESULTS) as f:
        return json.load(f)


def render_section(osd):
    """BENCHMARKS.md's section from RESULTS (none before a floor run);
    `osd`: {release: the OSD's own trap per hit, us}."""
    res = load()
    if res is None:
        return []
    k = res["kinds"]
    push, multi = k["push"]["ns_per_hit"], k["multi"]["ns_per_hit"]
    step = min(k["xol"]["ns_per_hit"], k["endbr"]["ns_per_hit"])
    said = ["A single-stepped probe costs %.1f times an emulated one here "
            "(the tracer probes after `endbr64` and moves an op event's "
            "probe off any other single-stepped entry: osdstage.py "
            "--list); a uprobe_multi link %+.0f ns a hit against a classic "
            "one (%s the push rounds' spread of %.0f ns)." % (
                step / push, multi - push,
                "within" if abs(multi - push) <= k["push"]["max"] -
                k["push"]["min"] else "beyond",
                k["push"]["max"] - k["push"]["min"])]
    slept = k.get("slept", {}).get("ns_per_hit")
    if slept:
        said.append("The same probe hit right after the thread slept costs "
                    "%.1f times its tight-loop figure (its rounds spread "
                    "over %.0f-%.0f ns: the sleep's own CPU time, in both "
                    "runs of a round, varies from call to call). On a "
                    "machine busy with other work the gap widens (2.3 us "
                    "against 1.1 us while the test suite ran, 2026-11-27): "
                    "the trap's path (the exception, the uprobe's lookup, "
                    "the program's dispatch) then runs from caches and TLB "
                    "that whatever ran meanwhile has taken." % (
                        slept / push, k["slept"]["min"], k["slept"]["max"]))
    if osd:
        said.append("Inside the busy OSD (each release's last run of "
                    "the part named) a trap costs %s the floor's emulated "
                    "push%s: the OSD's workers sleep between ops and share 2 cores "
                    "with fio, the messenger and BlueStore's threads, where "
                    "the tight loop keeps its code and data cached." % (
                        ", ".join("%s %.1f times" % (rel, 1000 * us / push)
                                  for rel, us in sorted(osd.items())),
                        "" if not slept else ", %s the slept one's" %
                        ", ".join("%s %.1f times" % (rel, 1000 * us / slept)
                                  for rel, us in sorted(osd.items()))))
    said = [line for s in said for line in (s, "")]
    return ["## The floor of a probe hit", "",
            "`make bench BENCH=floor` (no lab): a uprobe with a program "
            "that only returns, on functions whose first instruction is "
            "known (bench/floor/target.c), against the trap per hit the "
            "OSD pays in the main or the toggle part (its userspace "
            "mode's added OSD CPU less its programs, per hit). Measured "
            "%s." % res.get("date", "?"), ""] + render(res, osd) + [""] + said


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="What one uprobe hit costs on this machine, by the "
        "instruction probed and the link (root).",
        epilog="example: floor.py --rounds 5 --calls 1000000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1000000)
    ap.add_argument("--json", action="store_true", help="print JSON")
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.calls < 1:
        ap.error("--rounds and --calls must be positive")
    try:
        res = measure(a.rounds, a.calls)
    except UserError as e:
        print("floor.py: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(res, indent=1) if a.json else "\n".join(render(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
