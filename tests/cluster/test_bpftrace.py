"""probes/*.bt: compiled without attaching, and run for real on the lab OSD."""
import glob
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import (OSDSTAGE, PYTHON, REPO, Bench, need, prefill,
                      stop_bpftrace)
from cephlat.engine.btargs import declarations

BT = sorted(glob.glob(os.path.join(REPO, "probes", "*.bt")))


def bpftrace_compile(path, out, args=()):
    """bpftrace >= 0.18 has --dry-run; Debian's 0.17 compiles to an ELF
    object with --emit-elf without attaching anything."""
    help_text = subprocess.run(["bpftrace", "--help"], capture_output=True,
                               text=True)
    flags = ["--dry-run"] if "--dry-run" in help_text.stdout + \
        help_text.stderr else ["--emit-elf", out]
    return subprocess.run(["bpftrace"] + flags + [path] + list(args),
                          capture_output=True, text=True, timeout=120)


def osdstages_args(pid):
    """osdstages.bt names no function: osdstage.py gives its arguments."""
    p = subprocess.run([PYTHON, OSDSTAGE, "-p", str(pid),
                        "--bpftrace-args"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    args = p.stdout.split()
    assert len(args) == 2 + len(declarations()), args
    assert args[0].startswith("/proc/%d/root/" % pid)
    return args


def _offline_args(binary):
    """The same arguments for a binary that is not running (compiling)."""
    from cephlat.engine.btargs import bt_args
    from cephlat.engine.elfsym import ElfSymbols
    from cephlat.engine.plan import choose_release
    with ElfSymbols(binary) as elf:
        return bt_args(binary, elf, choose_release(
            elf, elf.version_string()), 0)


@pytest.mark.parametrize("path", BT, ids=[os.path.basename(p) for p in BT])
def test_bt_compiles(bpf_ready, tmp_path, path):
    need(shutil.which("bpftrace") is not None, "bpftrace missing (make setup)")
    args = []
    if os.path.basename(path) == "osdstages.bt":
        need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed")
        args = _offline_args("/usr/bin/ceph-osd")
        assert "_Z" not in open(path).read()     # no mangled name in it
    p = bpftrace_compile(path, str(tmp_path / "out.o"), args)
    assert p.returncode == 0, p.stderr
    head = open(path).read(4000)
    assert "USAGE:" in head and "Example" in head


def _attached(p, timeout=60):
    """Wait for bpftrace (Popen, text pipes) to say it attached; else
    fail with what it printed on stderr."""
    t0 = time.time()
    line = ""
    while "Hit Ctrl-C" not in line and time.time() - t0 < timeout:
        line = p.stdout.readline()
        if not line and p.poll() is not None:
            break
    assert "Hit Ctrl-C" in line, p.stderr.read()


def bpftraces(argvs, during):
    """The bpftrace command lines `argvs` at once (one terminal each):
    all attached, then during() runs, then Ctrl-C to each. -> what each
    printed, in order"""
    need(shutil.which("bpftrace") is not None, "bpftrace missing (make setup)")
    ps = []
    try:
        for argv in argvs:
            ps.append(subprocess.Popen(argv, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True))
        for p in ps:
            _attached(p)
        during()
        ends = [stop_bpftrace(p) for p in ps]
    finally:
        for p in ps:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(ps, ends):
        assert p.returncode == 0, err
    return [out for out, _ in ends]


def osdstages_argv(pid):
    """The command line that runs probes/osdstages.bt on the OSD `pid`."""
    return ["bpftrace", "-p", str(pid),
            os.path.join(REPO, "probes", "osdstages.bt")] + \
        osdstages_args(pid)


def osdstages_bts(pids, during):
    """probes/osdstages.bt on each OSD of `pids` at once (as one terminal
    per OSD would), around during() -> what each printed, in order"""
    return bpftraces([osdstages_argv(pid) for pid in pids], during)


def run_bt(script, pid, secs, args=()):
    return run_bts([script], pid, secs, args)[0]


def run_bts(scripts, pid, secs, args=(), extra=()):
    """probes/SCRIPT... on `pid` and the commands `extra` (argv lists) at
    once, for `secs` after the last one attached -> their outputs, in
    order (the scripts', then extra's)."""
    return bpftraces([["bpftrace", os.path.join(REPO, "probes", script),
                       str(pid)] + list(args) for script in scripts] +
                     [list(a) for a in extra], lambda: time.sleep(secs))


def hist_total(out, name):
    """Sum of one bpftrace histogram map's counts, all keys matching."""
    total = 0
    for m in re.finditer(r"^@%s(\[[^\]]*\])?:\s*\n((?:\[.*\n)+)" % name, out,
                         re.M):
        total += sum(int(c) for c in re.findall(
            r"^\[[^\])]*[\])]\s+(\d+)\s+\|", m.group(2), re.M))
    return total


def kernel_scripts(lab, least, osdstages=False):
    """futexwait, shardwake and syncfs under random reads (with
    `osdstages`, osdstages.bt beside them), blockrq under writes, on
    `lab`'s OSD: each attaches and prints histograms with more than
    `least` entries. -> (blockrq.bt's output, osdstages.bt's or None)"""
    need(shutil.which("bpftrace") is not None, "bpftrace missing (make setup)")
    prefill(lab, 3)
    bench = Bench(lab, "rand", 60, threads=4)
    try:
        time.sleep(2)
        # the three (or four) at once (each its own probes and maps), as
        # that many terminals would
        fut, wake, sync, *stages = run_bts(
            ["futexwait.bt", "shardwake.bt", "syncfs.bt"], lab["pid"], 3,
            extra=[osdstages_argv(lab["pid"])] if osdstages else ())
        assert re.search(r"^@futex_wait_us\[tp_osd_tp\]:", fut, re.M), fut
        assert hist_total(fut, r"futex_wait_us\[tp_osd_tp\]") > least
        assert hist_total(wake, "wakeup_delay_us") > least, wake
        assert hist_total(wake, "sleep_us") > least, wake
        # BlueStore never calls syncfs
        assert "syncfs calls: 0" in sync, sync
    finally:
        bench.stop()
    bench = Bench(lab, "write", 15, threads=8)
    try:
        time.sleep(2)
        out = run_bt("blockrq.bt", lab["pid"], 3)
    finally:
        bench.stop()
    assert hist_total(out, "block_rq_us") > 100, out
    return out, stages[0] if stages else None


def test_bt_scripts_on_the_lab(lab):
    """The kernel scripts and osdstages.bt on the lab's OSD, osdstages.bt
    under the reads with the first three."""
    out, stages = kernel_scripts(lab, 500, osdstages=True)
    for stage in ("queue_wait", "dequeue_op", "do_op", "get_object_context",
                  "bluestore_read", "op_total"):
        assert hist_total(stages, stage + "_us") > 1000, (stage, stages)
    loop = subprocess.run(["losetup", "-j", "/var/tmp/osdstage-lab/disk/"
                           "osd-block.img", "-O", "MAJ:MIN", "-n"],
                          capture_output=True, text=True).stdout.split()
    maj, mnr = loop[0].split(":")
    assert hist_total(out, r"block_rq_us\[%s, %s\]" % (maj, mnr)) > 100, out
