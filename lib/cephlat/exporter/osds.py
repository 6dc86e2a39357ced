"""The host's ceph-osd processes, as the exporter's loop looks for them
every second: which are there (OsdScan), which of them serve and are old
enough to trace (wanted: a daemonizing ceph-osd forks, and only its child
serves)."""
import os
import time

from ..ceph.target import (netns_of, osd_id_of, pid_alive, read_cmdline,
                           read_comm)

SETTLE_S = 1.0          # a process this young is looked at again later
PREFORK_S = 20.0        # not forked after this: in the foreground by config
FOREGROUND = ("-f", "--foreground", "-d")
# a ceph-osd run for one task, never serving (ceph_osd.cc's modes: making
# an OSD, its keys or journal, answering a question about its store):
# `ceph-osd --mkfs -i N` runs seconds in the foreground when an OSD is
# deployed, and tracing it would re-attach every OSD of the host twice
ONE_SHOT = ("--mkfs", "--mkjournal", "--mkkey", "--flush-journal",
            "--convert-filestore", "--version", "-v")
ONE_SHOT_PREFIXES = ("--get-", "--check-", "--dump-")


def one_shot(cmdline):
    """Does this ceph-osd command line run one task and exit?"""
    return any(a in ONE_SHOT or a.startswith(ONE_SHOT_PREFIXES)
               for a in cmdline)


def _stat(pid):
    """(parent pid, seconds since the process started, session id), or
    None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return (int(fields[1]), up - int(fields[19]) / os.sysconf("SC_CLK_TCK"),
            int(fields[3]))


def daemonized(pid, sid, age):
    """Is this ceph-osd the process that will serve? One run in the
    foreground (-f, -d: containers, systemd units) is; a daemonizing one is
    once it has forked and its child called setsid() (it leads its session).
    Before that, the first process reads the monitors' config and the
    store's label, seconds of work, then forks: traced then, it would be
    traced twice. A process that has not forked after PREFORK_S is taken
    to run in the foreground by configuration (daemonize = false). A
    one-shot run (--mkfs, --get-osd-fsid, ...: one_shot) never serves."""
    try:
        cmdline = read_cmdline(pid)
    except OSError:
        return False
    if one_shot(cmdline):
        return False
    return sid == pid or age >= PREFORK_S or \
        any(a in FOREGROUND for a in cmdline)


class OsdScan:
    """The host's ceph-osd processes, for a loop that looks every second
    (as ceph/target.py's find_ceph_osds, reading less): a process's name
    is read when its pid is new, while it is young (a fork that has not
    exec'd ceph-osd yet) and always for ceph-osd processes; an older
    process of another name is not read again."""

    RECHECK_S = 10.0

    def __init__(self, netns=None):
        self.seen = {}       # pid -> (first seen, monotonic; is ceph-osd)
        # the host's network namespace (target.netns_id; a lab aid): only
        # the ceph-osd processes in it
        self.netns = netns

    def osds(self):
        """[(pid, osd id or None)], by pid."""
        now = time.monotonic()
        seen, out = {}, []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            first, osd = self.seen.get(pid, (now, None))
            if osd is None or osd or now - first < self.RECHECK_S:
                try:
                    osd = read_comm(pid) == "ceph-osd"
                except OSError:
                    continue
            seen[pid] = (first, osd)
            if osd:
                try:
                    if self.netns is not None and \
                            netns_of(pid) != self.netns:
                        continue
                    out.append((pid, osd_id_of(pid)))
                except OSError:
                    continue
        self.seen = seen
        return sorted(out)


def _id_order(osd_id):
    return (0, int(osd_id)) if osd_id and osd_id.isdigit() else (1, 0)


def wanted(scan, osd_filter, traced):
        """The pids to trace now, in OSD id order: every ceph-osd of the
        host (or those of --osd), each at least SETTLE_S old and
        daemonized(). A ceph-osd that daemonizes forks, and the parent
        waits for its child to be up before it exits: a process whose
        child is a ceph-osd of the same id is that parent, and is left
        alone."""
        found = []
        for pid, osd_id in scan.osds():
            if osd_filter != "all" and osd_id not in osd_filter:
                continue
            st = _stat(pid) if pid_alive(pid) else None
            if st is not None:
                found.append((pid, osd_id) + st)
        parents = {(ppid, osd_id) for _, osd_id, ppid, _, _ in found}
        out = [(osd_id, pid) for pid, osd_id, _, age, sid in found
               if (pid, osd_id) not in parents and
               (pid in traced or
                (age >= SETTLE_S and daemonized(pid, sid, age)))]
        return tuple(pid for osd_id, pid in
                     sorted(out, key=lambda o: (_id_order(o[0]), o[1])))
