"""Who a task is, for the reports of whom a target's threads waited behind
for a CPU (engine/mapread.py take_behind): its process's name, its
cgroup (v2, the unified hierarchy: the one the kernel's cgroup ids name,
on a hybrid v1/v2 host too) and the systemd unit or container that
cgroup belongs to. Read from /proc while the task lives; a cgroup id of a
task gone is looked up in the unified hierarchy's directories (a
cgroup's id is its directory's inode number)."""
import os
import re

from ..ceph.target import osd_id_of

# a container's scope (podman, docker, containerd, CRI-O) or a systemd
# unit, the innermost in the path
_CONTAINER = re.compile(
    r"(?:libpod|docker|cri-containerd|crio)-([0-9a-f]{12})[0-9a-f]*\.scope")
_UNIT = re.compile(r"[^/]+\.(?:service|scope|slice)$")


def cgroup2_mount(mountinfo="/proc/self/mountinfo"):
    """Where the unified (v2) hierarchy is mounted, or None."""
    try:
        with open(mountinfo) as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    return left.split()[4]
    except OSError:
        pass
    return None


def unit_of(path):
    """The container ("container <12 hex>") or systemd unit a cgroup path
    is in, or None (the root, or a cgroup made by hand)."""
    if not path:
        return None
    m = None
    for m in _CONTAINER.finditer(path):
        pass
    if m is not None:
        return "container " + m.group(1)
    parts = [p for p in path.split("/") if _UNIT.match(p)]
    for p in reversed(parts):
        if not p.endswith(".slice"):
            return p
    return parts[-1] if parts else None


class TaskNames:
    """Names of processes and cgroups (read as asked: a pid is reused;
    the cgroup directories' ids walked once, and again for an id not
    seen)."""

    def __init__(self):
        self.root = cgroup2_mount()
        self._by_id = {}            # cgroup id -> path (None: not found)

    @staticmethod
    def process(tgid):
        """The process's name (its main thread's; a ceph-osd's: osd.N),
        or None when gone."""
        try:
            with open("/proc/%d/comm" % tgid) as f:
                name = f.read().strip()
        except OSError:
            return None
        if name == "ceph-osd":
            try:
                n = osd_id_of(tgid)
            except OSError:
                n = None
            if n is not None:
                return "osd." + n
        return name

    def cgroup(self, pid, cgid):
        """Task pid's cgroup path in the unified hierarchy ("/" its root),
        from /proc while it lives, else from cgroup id `cgid`; None when
        neither says."""
        try:
            with open("/proc/%d/cgroup" % pid) as f:
                for line in f:
                    if line.startswith("0::"):
                        return line[3:].strip() or "/"
        except OSError:
            pass
        return self._walk(cgid)

    def _walk(self, cgid):
        if not cgid or not self.root:
            return None
        if cgid not in self._by_id:
            for d, _dirs, _files in os.walk(self.root):
                try:
                    ino = os.stat(d).st_ino
                except OSError:
                    continue
                self._by_id[ino] = "/" + os.path.relpath(d, self.root) \
                    if d != self.root else "/"
            self._by_id.setdefault(cgid, None)
        return self._by_id[cgid]

    def describe(self, tgid, pid, cgid, comm):
        """-> {"process", "thread", "cgroup", "unit"} of a task that ran
        (any of them None when unknown)."""
        path = self.cgroup(pid, cgid)
        return {"process": self.process(tgid) or comm or None,
                "thread": comm or None, "cgroup": path,
                "unit": unit_of(path)}
