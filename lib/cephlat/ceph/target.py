"""The traced process: pre-flight checks, ceph-osd discovery and release."""
import os
import re

from ..errors import UserError

TRACEFS_PATHS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
BTF_PATH = "/sys/kernel/btf/vmlinux"


def require_root(tool):
    if os.geteuid() != 0:
        raise UserError("%s: must run as root (BPF needs CAP_BPF, CAP_PERFMON "
                        "and CAP_SYS_ADMIN); try: sudo %s" % (tool, tool))


def tracefs_dir():
    """The mounted tracefs (needed to attach tracepoints), or None."""
    for d in TRACEFS_PATHS:
        if os.path.isdir(os.path.join(d, "events")):
            return d
    return None


def require_tracefs():
    d = tracefs_dir()
    if d is None:
        raise UserError("tracefs is not mounted; mount it with: "
                        "mount -t tracefs tracefs /sys/kernel/tracing")
    return d


def require_btf():
    if not os.path.exists(BTF_PATH):
        raise UserError("kernel BTF (%s) is missing; a kernel built with "
                        "CONFIG_DEBUG_INFO_BTF=y is needed" % BTF_PATH)


def read_comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def read_cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0): check its state
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except OSError:
        return False


def _ppid_sid(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[3])


def forked_by_an_osd(pid):
    """A process an OSD forked to run a helper (smartctl, say), before its
    exec: named ceph-osd, its parent one too, and not leading a session (a
    daemonizing ceph-osd's child, the OSD itself, calls setsid())."""
    ppid, sid = _ppid_sid(pid)
    if sid == pid or ppid <= 1:
        return False
    try:
        return read_comm(ppid) == "ceph-osd"
    except OSError:
        return False


def still_an_osd(target):
    """Whether a Target found as a ceph-osd still is one: alive, named
    ceph-osd and running the executable it ran then (a helper an OSD
    forked execs another program)."""
    try:
        return pid_alive(target.pid) and \
            read_comm(target.pid) == "ceph-osd" and \
            os.readlink("/proc/%d/exe" % target.pid) == target.exe
    except OSError:
        return False


def osd_id_of(pid):
    """The OSD id from a ceph-osd command line (-i N / --id N / --id=N)."""
    args = read_cmdline(pid)
    for i, a in enumerate(args):
        if a in ("-i", "--id") and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--id="):
            return a.split("=", 1)[1]
    return None


class Target:
    """A running ceph-osd (or, with allow_any, any process)."""

    def __init__(self, pid, allow_any=False, expect="ceph-osd"):
        self.pid = pid
        if pid <= 0 or not os.path.isdir("/proc/%d" % pid) or not pid_alive(pid):
            raise UserError("no such process: %d" % pid)
        try:
            self.comm = read_comm(pid)
        except OSError:
            raise UserError("no such process: %d" % pid)
        try:
            self.exe = os.readlink("/proc/%d/exe" % pid)
        except PermissionError:
            raise UserError("cannot inspect process %d: permission denied" % pid)
        except OSError:
            # kernel threads have no executable
            raise UserError("process %d is %s (a kernel thread), not a %s" % (
                pid, self.comm, expect))
        base = os.path.basename(self.exe.replace(" (deleted)", ""))
        if not allow_any and expect not in (self.comm, base):
            raise UserError("process %d is %s (%s), not a %s; find the OSD's "
                            "pid with: pgrep -a %s" % (pid, self.comm, self.exe,
                                                       expect, expect))
        # Read and probe the binary through /proc/PID/exe so that an OSD in a
        # container (other mount namespace) resolves to its own file.
        self.exe_path = "/proc/%d/exe" % pid
        self.osd_id = osd_id_of(pid) if not allow_any else None
        self._version = None
        self._sched = False

    def alive(self):
        return pid_alive(self.pid)

    def ceph_version(self, elf=None):
        """'18.2.7' or None, never by running the binary (a container's
        binary may need a newer libc than the host has): the version
        string embedded in the executable (elf: the engine's reader of
        it, opened through /proc/PID/exe, the container's own file: its
        version_string()), else the OSD's admin socket, found inside its
        mount namespace. Read once."""
        if self._version is not None:
            return self._version or None
        try:
            self._version = (elf.version_string() or "") if elf else ""
        except UserError:
            self._version = ""
        if not self._version:
            self._version = self._asok_version() or ""
        return self._version or None

    def scheduler(self):
        """The OSD's op scheduler and its settings (ceph/scheduler.py),
        read once from its admin socket; None for a process that is not
        an OSD or whose socket does not answer."""
        if self._sched is False:
            from . import scheduler
            self._sched = scheduler.read(self.pid, self.osd_id) \
                if self.osd_id is not None or self.comm == "ceph-osd" \
                else None
        return self._sched

    def set_scheduler(self, sched):
        """The scheduler a probe spec declares for a process that has no
        admin socket to read it from."""
        self._sched = sched

    def throttles(self):
        """The messenger throttles' counters now (ceph/throttles.py), or
        None (not an OSD, or its socket does not answer)."""
        if self.osd_id is None and self.comm != "ceph-osd":
            return None
        from . import throttles
        return throttles.read(self.pid, self.osd_id)

    def mclock(self):
        s = self.scheduler()
        return bool(s and s.get("mclock"))

    def _asok_version(self):
        from . import adminsock
        try:
            path = adminsock.find_osd_socket(self.pid, self.osd_id)
            if path:
                v = adminsock.command(path, "version", timeout=5.0)
                m = re.match(r"(\d+\.\d+\.\d+)", v.get("version", ""))
                return m.group(1) if m else None
        except (OSError, ValueError, UserError, AttributeError):
            pass
        return None


NETNS_DIR = "/run/netns"


def netns_id(name):
    """The identity (device, inode) of the named network namespace (`ip
    netns add NAME`): a lab aid, where a namespace stands for a host. One
    line when there is none of that name."""
    if not name or "/" in name:
        raise UserError("--host-netns: not a namespace name: %r" % name)
    try:
        st = os.stat(os.path.join(NETNS_DIR, name))
    except OSError:
        raise UserError("--host-netns: no network namespace %s (ip netns "
                        "list)" % name)
    return (st.st_dev, st.st_ino)


def netns_of(pid):
    """The identity of process `pid`'s network namespace (as netns_id)."""
    st = os.stat("/proc/%d/ns/net" % pid)
    return (st.st_dev, st.st_ino)


def find_ceph_osds(netns=None):
    """[(pid, osd id or None)] of every ceph-osd process on the host
    (containers included: /proc shows them all); with `netns` (netns_id's)
    those in that network namespace only."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if read_comm(pid) != "ceph-osd" or forked_by_an_osd(pid):
                continue
            if netns is not None and netns_of(pid) != netns:
                continue
            out.append((pid, osd_id_of(pid)))
        except OSError:
            continue
    return sorted(out)
