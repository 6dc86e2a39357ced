"""The capture recorder alone (lib/native/recorder.c, as osdstage -w runs
it): progs/ringgen.bpf.c fills a ring buffer at a set rate with records
shaped like osdstage's events, this process drains it into stream files
and reports what was made, written and lost and the recorder thread's CPU.

  ringgen.py [RATE [SECS [RING_MB [DRAIN_US|python]]]]  (root; events/s)

Used by test_recorder_rate.py; a figure for the bench too."""
import ctypes
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "lib"))

from cephlat.abi import default_bpf_dir          # noqa: E402
from cephlat.capture import format as capfmt    # noqa: E402
from cephlat.engine import bpf                  # noqa: E402
from cephlat.engine.loadtime import ring_bytes  # noqa: E402

SRC = os.path.join(HERE, "progs", "ringgen.bpf.c")
EVENT = 80                                      # bytes, as op_enqueue


def build(out_dir, bpf_dir=None):
    """Compile progs/ringgen.bpf.c against the build's vmlinux.h."""
    obj = os.path.join(out_dir, "ringgen.bpf.o")
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf",
                    "-I", bpf_dir or default_bpf_dir(), "-c", SRC, "-o", obj],
                   check=True)
    return obj


class _Ro(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint32), ("per_call", ctypes.c_uint32),
                ("skew_every", ctypes.c_uint32), ("skew_ns", ctypes.c_uint64)]


def _metadata(path):
    """A CTF metadata (and an empty stream_meta) describing ringgen's
    records, so that babeltrace2 reads what the recorder wrote to `path`.
    -> the trace's uuid (the recorder's packets must carry it)"""
    from cephlat.capture import ctf
    classes = [ctf.EventClass("ringgen:unused", []),        # id 0
               ctf.EventClass("ringgen:rec",                # id 1
                              [("p%d" % i, "u64") for i in range(7)] +
                              [("p7", "u32")])]
    w = ctf.Writer(path, classes, force=True, stream="stream_meta",
                   event_context=[("cpu", "u32"), ("interval", "u32"),
                                  ("target", "u8")], whole_packets=False)
    w.close()
    return w.uuid.bytes


def _thread_cpu_s(comm):
    """CPU seconds of this process's thread `comm` (None: the process)."""
    if comm is None:
        t = os.times()
        return t.user + t.system
    for t in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % t) as f:
                if f.read().strip() != comm:
                    continue
            with open("/proc/self/task/%s/schedstat" % t) as f:
                return int(f.read().split()[0]) / 1e9
        except OSError:
            pass
    return None


def run(obj_path, rate, secs, ring_mb=32, per_call=64, bpf_dir=None,
        drain_us=capfmt.CaptureWriter.DRAIN_US, skew_every=0, skew_ns=0,
        keep=None, migrate=False):
    """Fill the ring at `rate` events/s for `secs` while the recorder
    drains it (drain_us None: no recorder thread, this loop drains every
    0.1 s as osdstage's did before the recorder had one). skew_every,
    skew_ns: stamp every N-th record that much early (progs/ringgen.bpf.c).
    keep: a new directory to leave the trace in, with metadata (else it is
    removed). migrate: move this thread to another CPU at every call.
    -> dict: made, events (written), lost, rate (achieved events/s),
    cpu_pct (the recorder thread's share of one core), reordered"""
    obj = bpf.BPFObject(obj_path)
    d = keep or tempfile.mkdtemp(prefix="ringgen-", dir="/var/tmp")
    rec = None
    cpus = sorted(os.sched_getaffinity(0))
    try:
        uuid = _metadata(d) if keep else os.urandom(16)
        obj.set_rodata(_Ro(os.getpid(), per_call, skew_every, skew_ns))
        obj.set_max_entries("events", ring_bytes(ring_mb))
        obj.load()
        obj.attach_tracepoint("gen", "syscalls", "sys_enter_getppid")
        rec = capfmt.Recorder(bpf_dir or default_bpf_dir(),
                              obj.map("events"), d, uuid, 65536)
        if drain_us is not None:
            rec.start(drain_us)
        comm = "osdstage-rec" if drain_us is not None else None
        cpu0 = _thread_cpu_s(comm)
        next_poll = 0
        calls, t0 = 0, time.monotonic()
        getppid = os.getppid
        while True:
            el = time.monotonic() - t0
            if el >= secs:
                break
            due = int(rate * el / per_call)
            while calls < due:
                if migrate:
                    os.sched_setaffinity(0, {cpus[calls % len(cpus)]})
                getppid()
                calls += 1
            if drain_us is None and el >= next_poll:
                rec.consume()
                next_poll = el + 0.1
            time.sleep(0.0005)
        el = time.monotonic() - t0
        cpu1 = _thread_cpu_s(comm)
        rec.consume()
        rec.flush()
        st = rec.stats()
        bss = obj.map(".bss").lookup(b"\0\0\0\0", 16)
        made, lost = int.from_bytes(bss[:8], "little"), \
            int.from_bytes(bss[8:], "little")
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    finally:
        if migrate:
            os.sched_setaffinity(0, cpus)
        if rec is not None:
            rec.close()
        obj.close()
        if not keep:
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))
            os.rmdir(d)
    return {"made": made, "events": st["events"], "lost": lost,
            "reordered": st["reordered"],
            "bytes": size, "secs": round(el, 2),
            "rate": round(st["events"] / el),
            "cpu_pct": round(100 * (cpu1 - cpu0) / el, 1),
            "passes": st["passes"], "busy_passes": st["busy_passes"]}


def main(argv):
    rate = float(argv[0]) if argv else 500000
    secs = float(argv[1]) if len(argv) > 1 else 5
    ring_mb = float(argv[2]) if len(argv) > 2 else 32
    drain_us = capfmt.CaptureWriter.DRAIN_US
    if len(argv) > 3:
        drain_us = None if argv[3] == "python" else int(argv[3])
    d = tempfile.mkdtemp(prefix="ringgen-")
    try:
        res = run(build(d), rate, secs, ring_mb, drain_us=drain_us)
    finally:
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)
    print(res)
    return 0 if res["lost"] == 0 and res["events"] == res["made"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
