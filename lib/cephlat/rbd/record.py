"""eBPF recording: the client (-p PID, or -- COMMAND started and held
until the probes are in place), the recording loop until it ends, and
the counts reported at the end (shared with LTTng mode)."""
import os
import signal
import time
from dataclasses import dataclass

from . import TOOL
from ..abi import default_bpf_dir
from ..ceph.target import require_btf, require_root
from ..errors import UserError

LIBS = ("librbd", "librados", "libceph-common")
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")


def find_libraries(pid=None):
    """{"librbd": path, "librados": path, "libceph-common": path} mapped by
    `pid`, or (no pid) the ones this host's dynamic linker would load."""
    out = {}
    if pid is not None:
        try:
            with open("/proc/%d/maps" % pid) as f:
                for line in f:
                    path = line.split(None, 5)[-1].strip()
                    base = os.path.basename(path)
                    for lib in LIBS:
                        if base.startswith(lib + ".so") and lib not in out:
                            out[lib] = "/proc/%d/root%s" % (pid, path)
        except OSError as e:
            raise UserError("cannot read /proc/%d/maps: %s" % (pid,
                                                              e.strerror))
        return out
    import ctypes.util
    for lib, so in (("librbd", "rbd"), ("librados", "rados")):
        name = ctypes.util.find_library(so)
        for d in LIB_DIRS:
            if name and os.path.exists(os.path.join(d, name)):
                out[lib] = os.path.realpath(os.path.join(d, name))
                break
    # libceph-common is private to Ceph's libraries (not on the linker's
    # path): beside them, under ceph/
    for d in LIB_DIRS:
        p = os.path.join(d, "ceph", "libceph-common.so.2")
        if os.path.exists(p):
            out["libceph-common"] = os.path.realpath(p)
            break
    return out


class Child:
    """COMMAND, started stopped (it waits on a pipe before exec) so the
    probes are in place before it loads librbd; it never runs unless
    go() is called."""

    def __init__(self, argv):
        r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:                                # child
            try:
                os.close(w)
                if os.read(r, 1):       # else rbdrecord gave up (or died)
                    os.execvp(argv[0], argv)
            except OSError as e:
                os.write(2, ("%s: cannot run %s: %s\n" % (
                    TOOL, argv[0], e.strerror)).encode())
            os._exit(127)
        os.close(r)
        self.go_fd = w
        self.status = None
        self.cpu_s = None       # its CPU time (user + system) once it ended

    def go(self):
        os.write(self.go_fd, b"x")
        os.close(self.go_fd)

    def poll(self):
        """Its exit status once it has exited, else None."""
        if self.status is None:
            pid, st, ru = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self._ended(st, ru)
        return self.status

    def _ended(self, st, ru):
        self.status = os.waitstatus_to_exitcode(st)
        self.cpu_s = ru.ru_utime + ru.ru_stime

    def kill(self):
        if self.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            self._ended(*os.wait4(self.pid, 0)[1:])

    def cancel(self):
        """Before go(): end it without running COMMAND."""
        os.close(self.go_fd)
        self.status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])


@dataclass(frozen=True)
class RecordTarget:
    """The librbd client to record: a running process (`pid`), or
    `command` (its argv), started and held until the probes are in place.
    One of the two."""
    pid: int = None
    command: tuple = ()


def _client(target):
    """-> (pid, comm, libraries, Child or None): what to record."""
    pid = target.pid
    if pid:
        if not os.path.exists("/proc/%d" % pid):
            raise UserError("no such process: %d" % pid)
        libs = find_libraries(pid)
        if "librbd" not in libs:
            raise UserError("process %d has no librbd loaded (is it a librbd "
                            "client? an rbd-nbd/qemu/fio process)" % pid)
        with open("/proc/%d/comm" % pid) as f:
            comm = f.read().strip()
        return pid, comm, libs, None
    libs = find_libraries()
    if "librbd" not in libs:
        raise UserError("librbd is not installed here (package librbd1)")
    child = Child(target.command)
    return child.pid, os.path.basename(target.command[0]), libs, child


def record_ebpf(target, output, duration, err):
    """Record `target` (a RecordTarget) to the trace directory `output`
    until it ends, `duration` seconds pass (None: no limit) or a signal
    comes. -> exit status"""
    from .ebpf import EbpfRecorder
    require_root(TOOL)
    require_btf()
    pid, comm, libs, child = _client(target)
    stopping = []
    old = {s: signal.signal(s, lambda n, f: stopping.append(n))
           for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            rec = EbpfRecorder(pid, output, libs, default_bpf_dir(), comm)
            rec.start()
        except BaseException:
            if child:
                child.cancel()
            raise
        err.write("Recording librbd I/O of %s %d (eBPF) to %s... %s\n" % (
            comm, pid, output, "Hit Ctrl-C to end." if not child
            else "until it exits."))
        if rec.objecter.why:
            err.write("%s: its OSD ops are not recorded: %s\n" % (
                TOOL, rec.objecter.why))
        if rec.cache.why:
            err.write("%s: what librbd's cache does with each write is not "
                      "recorded: %s\n" % (TOOL, rec.cache.why))
        err.flush()
        if child:
            child.go()
        status = _until_done(rec, pid, child, duration, stopping)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if child and child.poll() is None and stopping:
            child.kill()
    counts, lost, reordered = rec.stop()
    report_counts(err, output, counts, lost["ring"], reordered)
    report_cache_lost(err, lost)
    if child and child.cpu_s is not None:
        # the client's CPU, the probes' traps and programs included
        err.write("%s: %s used %.3f s of CPU (user + system)\n" % (
            TOOL, comm, child.cpu_s))
    if status:
        # the trace is kept; the exit status is the command's, as with
        # time(1): 128 + N when a signal N ended it
        err.write("%s: %s exited with status %d\n" % (TOOL, comm, status))
        return 128 - status if status < 0 else status
    return 0


def _until_done(rec, pid, child, duration, stopping):
    """Drain `rec` until the client ends, `duration` passes or a signal
    comes. -> the child's exit status (0 if none)"""
    deadline = time.monotonic() + duration if duration else None
    while not stopping:
        rec.poll()
        if child:
            code = child.poll()
            if code is not None:
                return code
        elif not os.path.exists("/proc/%d" % pid):
            break
        if deadline and time.monotonic() >= deadline:
            break
        time.sleep(rec.POLL_S)
    return 0


def report_cache_lost(err, lost):
    """The cache writes recorded without their call, or not at all."""
    words = (("unknown_comp", "cache writes of no recorded call (recorded "
              "as such: not from rbd_aio_*, or begun before the recording)"),
             ("pcs", "calls not followed into the cache (its map was full)"),
             ("cache_unread", "cache writes whose fields could not be read "
              "(not recorded)"))
    for key, what in words:
        if lost.get(key):
            err.write("%s: %d %s\n" % (TOOL, lost[key], what))


def report_counts(err, path, counts, lost, reordered=0):
    total = sum(counts.values())
    err.write("%s: wrote %s: %d events%s%s\n" % (
        TOOL, path, total, ", none lost" if not lost else
        "; %d LOST (ring buffer full)" % lost,
        "; %d reordered" % reordered if reordered else ""))
    for name, n in sorted(counts.items()):
        if name.endswith("_enter") or name.startswith("rbdrecord:"):
            err.write("  %-36s %d\n" % (name, n))
