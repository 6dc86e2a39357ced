"""The names the cluster gives what an OSD's ops carry only as ids: pools
(id -> name) and RBD images (the id in their data objects' names,
rbd_data.<id>.<n> -> the image's name), read from the cluster the traced
OSD belongs to when this host can read it: the OSD's own ceph.conf (its
-c / --conf, else /etc/ceph/<cluster>.conf, as the OSD sees its root),
the client identity the conf gives (client.admin by default) and
python3-rados / python3-rbd (which ceph-common brings), every call with
a timeout. A capture records them (capture/format.py, the "names"
event) so that `-r --by pool|image` names what it can wherever it is
read; where the cluster cannot be read, ids stay ids.

NamesLookup runs the look-up in a process of its own (librados, its
threads and its timeouts never in the tracer's process: it is killed,
not waited for, when the tracer ends), from a thread, once and then
every REFRESH_S (images come and go). The tracer waits for the first at most
FIRST_S before it attaches (first()), so that the look-up's own reads
(each RBD pool's directory: a client op or two on the OSDs) are not in a
short capture; those of a later one are, and a breakdown by client says
whose they are (its "self")."""
import json
import os
import subprocess
import sys
import threading

from ..errors import UserError
from .target import read_cmdline

TIMEOUT_S = 5.0         # connect and every call
REFRESH_S = 300.0       # the names again, this often
FIRST_S = 2.0           # the tracer waits this long for the first


def osd_conf(pid):
    """The ceph.conf OSD `pid` runs with, as a path this host can open
    (through /proc/PID/root: an OSD in a container), or None."""
    args = read_cmdline(pid)
    conf, cluster = None, "ceph"
    for i, a in enumerate(args):
        if a in ("-c", "--conf") and i + 1 < len(args):
            conf = args[i + 1]
        elif a.startswith("--conf="):
            conf = a.split("=", 1)[1]
        elif a == "--cluster" and i + 1 < len(args):
            cluster = args[i + 1]
        elif a.startswith("--cluster="):
            cluster = a.split("=", 1)[1]
    if conf is None:
        conf = "/etc/ceph/%s.conf" % cluster
    if not conf.startswith("/"):
        try:
            conf = os.path.join(os.readlink("/proc/%d/cwd" % pid), conf)
        except OSError:
            return None
    for path in ("/proc/%d/root%s" % (pid, conf), conf):
        if os.path.isfile(path):
            return path
    return None


def lookup(conf):
    """{"fsid", "pools": {id: name}, "images": {image id: name}, "self":
    the look-up's own client entity (client.4123: its reads of the RBD
    directories are client ops too)} of the cluster of ceph.conf `conf`
    (ids as strings: JSON keys). UserError saying why when it cannot be
    read."""
    try:
        import rados
        import rbd
    except ImportError:
        raise UserError("python3-rados and python3-rbd are not installed "
                        "(ceph-common brings them)")
    t = str(int(TIMEOUT_S))
    try:
        cluster = rados.Rados(conffile=conf, conf={
            "client_mount_timeout": t, "rados_mon_op_timeout": t,
            "rados_osd_op_timeout": t, "log_to_stderr": "false",
            "err_to_stderr": "false"})
    except (rados.Error, OSError) as e:
        raise UserError("%s: %s" % (conf, e))
    try:
        try:
            cluster.connect(timeout=int(TIMEOUT_S))
        except rados.Error as e:
            raise UserError("cannot connect with %s: %s" % (conf, e))
        out = {"fsid": cluster.get_fsid(), "pools": {}, "images": {},
               "self": "client.%d" % cluster.get_instance_id()}
        for name in cluster.list_pools():
            try:
                pid = cluster.pool_lookup(name)
            except rados.Error:
                continue
            out["pools"][str(pid)] = name
            try:
                with cluster.open_ioctx(name) as io:
                    for img in rbd.RBD().list2(io):
                        out["images"][img["id"]] = img["name"]
            except (rados.Error, rbd.Error):
                continue        # not an RBD pool, or not ours to read
        return out
    finally:
        cluster.shutdown()


def lookup_in_child(conf, started=None):
    """lookup(conf) in a process of its own (`python3 -m` this module) ->
    its result; UserError saying why there is none. started: called with
    the child's Popen (so that its owner can kill it)."""
    pkg = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=pkg + (
        os.pathsep + os.environ["PYTHONPATH"]
        if os.environ.get("PYTHONPATH") else ""))
    p = subprocess.Popen([sys.executable, "-m", __name__, conf],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    if started is not None:
        started(p)
    try:
        out, err = p.communicate(timeout=3 * TIMEOUT_S)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise UserError("the cluster did not answer in %g s" %
                        (3 * TIMEOUT_S))
    if p.returncode != 0:
        lines = (err or "").strip().splitlines()
        raise UserError(lines[-1] if lines else "exit status %d"
                        % p.returncode)
    return json.loads(out)


class NamesLookup:
    """The names of OSD `pid`'s cluster, looked up in a thread: take()
    gives each new result once to each reader (None until there is one:
    a capture's writer and a live breakdown each read them); `why` says
    why there is none."""

    def __init__(self, pid, refresh_s=REFRESH_S):
        self.pid, self.refresh_s = pid, refresh_s
        self.why = None
        self._got, self._lock = None, threading.Lock()
        self._n, self._seen = 0, {}     # results so far, each reader's
        self._stop = threading.Event()
        self._tried = threading.Event()
        self._child = None
        threading.Thread(target=self._run, daemon=True,
                         name="osdstage-names").start()

    def _run(self):
        while not self._stop.is_set():
            conf = osd_conf(self.pid)
            try:
                if conf is None:
                    raise UserError("no ceph.conf of pid %d found"
                                    % self.pid)
                got = lookup_in_child(conf, self._started)
                with self._lock:
                    self._got, self.why = got, None
                    self._n += 1
            except (UserError, ValueError) as e:
                if not self._stop.is_set():
                    self.why = str(e)
            self._tried.set()
            self._stop.wait(self.refresh_s)

    def first(self, secs=FIRST_S):
        """Wait for the first try (at most `secs`)."""
        self._tried.wait(secs)

    def take(self, reader="capture"):
        """The latest result if `reader` has not had it yet, else None."""
        with self._lock:
            if self._seen.get(reader, 0) == self._n:
                return None
            self._seen[reader] = self._n
            return self._got

    def _started(self, child):
        self._child = child
        if self._stop.is_set():
            child.kill()

    def stop(self):
        """No more look-ups; one under way is killed."""
        self._stop.set()
        child = self._child
        if child is not None and child.poll() is None:
            child.kill()


def main(argv):
    """`python3 -m cephlat.ceph.clusternames CONF`: lookup(CONF) as JSON
    on stdout, or why not as one line on stderr (exit status 1)."""
    try:
        print(json.dumps(lookup(argv[0]), sort_keys=True))
    except UserError as e:
        sys.stderr.write("%s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

