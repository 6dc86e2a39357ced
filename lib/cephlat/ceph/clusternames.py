"""The names the cluster gives what an OSD's ops carry only as ids: pools
(id -> name), RBD images (the id in their data objects' names,
rbd_data.<id>.<n> -> the image's name) and clients (an op's client.4123
-> the cephx name it authenticated as, client.admin: what the monitors'
sessions hold), read from the cluster the traced OSD belongs to when this
host can read it: the OSD's own ceph.conf (its -c / --conf, else
/etc/ceph/<cluster>.conf, as the OSD sees its root), the client identity
the conf gives (client.admin by default) and python3-rados / python3-rbd
(which ceph-common brings), every call with a timeout. A capture records
them (capture/format.py, the "names" event) so that `-r --by
pool|image|client` names what it can wherever it is read; where the
cluster cannot be read, ids stay ids.

NamesLookup runs the look-up in a process of its own (librados, its
threads and its timeouts never in the tracer's process: it is killed,
not waited for, when the tracer ends), read from a thread. The process
connects once and writes a line of JSON each time it learns something:
the pools and images first and every REFRESH_S (images come and go), the
clients' names every CLIENTS_S (clients come and go faster: a short
librados client is named if it was connected at one of those reads),
only those new since its last line. The tracer waits for the first line
at most FIRST_S before it attaches (first()), so that the look-up's own
reads (each RBD pool's directory: a client op or two on the OSDs) are not
in a short capture; those of a later one are, and a breakdown by client
says whose they are (its "self"). The monitors' sessions are the
monitors' own (one command to each monitor), no OSD op."""
import json
import os
import subprocess
import sys
import threading
import time

from ..errors import UserError
from .target import read_cmdline

TIMEOUT_S = 5.0         # connect and every call
REFRESH_S = 300.0       # the pools and images again, this often
CLIENTS_S = 10.0        # the clients' names again, this often
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


def _connect(conf):
    """A connected rados.Rados of ceph.conf `conf`; UserError saying why
    not."""
    try:
        import rados
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
        cluster.connect(timeout=int(TIMEOUT_S))
    except rados.Error as e:
        cluster.shutdown()
        raise UserError("cannot connect with %s: %s" % (conf, e))
    return cluster


def _pools_and_images(cluster):
    """{"fsid", "pools": {id: name}, "images": {image id: name}, "self":
    the look-up's own client entity (client.4123: its reads of the RBD
    directories are client ops too)} (ids as strings: JSON keys)."""
    import rados
    try:
        import rbd
    except ImportError:
        raise UserError("python3-rbd is not installed (ceph-common brings "
                        "it)")
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


def _mon_json(cluster, cmd, target=None):
    """A monitor command's JSON answer (target: one monitor's name, as
    `ceph tell mon.NAME` asks it), or None when it failed."""
    import rados
    cmd = json.dumps(dict(cmd, format="json"))
    kw = {"timeout": int(TIMEOUT_S)}
    if target is not None:
        kw["target"] = target
    try:
        ret, out, _ = cluster.mon_command(cmd, b"", **kw)
        return json.loads(out) if ret == 0 and out else None
    except (rados.Error, ValueError):
        return None


def _clients(cluster):
    """{client entity ("client.4123"): the cephx name it authenticated
    as ("client.admin")} of the clients the monitors have sessions with:
    each monitor's own `sessions` (a client keeps one, with the monitor
    it authenticated with)."""
    mons = (_mon_json(cluster, {"prefix": "mon dump"}) or {}).get("mons")
    out = {}
    for m in mons or ():
        for ses in _mon_json(cluster, {"prefix": "sessions"},
                             m["name"]) or ():
            # a client's entity is client.<its global id> (the session's
            # own name is often client.?, from before the id was given)
            gid, cephx = ses.get("global_id"), ses.get("entity_name") or ""
            if gid and cephx.startswith("client."):
                out["client.%d" % gid] = cephx
    return out


def watch(conf, write, refresh_s=REFRESH_S, clients_s=CLIENTS_S,
          alive=lambda: True):
    """Connect once and write(dict) what the cluster names: the pools
    and images (_pools_and_images') with every client seen so far
    (_clients') at once and every `refresh_s`, the clients new since the
    last line ({"clients": ...}) every `clients_s` in between, while
    alive()."""
    import rados
    cluster = _connect(conf)
    try:
        seen, names_at = {}, None
        while alive():
            now = time.monotonic()
            clients = _clients(cluster)
            new = {k: v for k, v in clients.items() if seen.get(k) != v}
            seen.update(clients)
            if names_at is None or now - names_at >= refresh_s:
                names_at = now
                # a full line holds every client seen: a reader's first
                # take starts from it
                got = _pools_and_images(cluster)
                got["clients"] = dict(seen)
                write(got)
            elif new:
                write({"clients": new})
            time.sleep(clients_s)
    except rados.Error as e:
        raise UserError("reading the cluster with %s: %s" % (conf, e))
    finally:
        cluster.shutdown()


def lookup_in_child(conf, started=None, refresh_s=REFRESH_S,
                    clients_s=CLIENTS_S):
    """watch(conf) in a process of its own (`python3 -m` this module) ->
    yields each line's dict as it comes; UserError saying why it ended
    (or never began: no first line in 3 x TIMEOUT_S). started: called
    with the child's Popen (so that its owner can kill it)."""
    pkg = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=pkg + (
        os.pathsep + os.environ["PYTHONPATH"]
        if os.environ.get("PYTHONPATH") else ""))
    p = subprocess.Popen([sys.executable, "-m", __name__, conf,
                          "%g" % refresh_s, "%g" % clients_s],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    if started is not None:
        started(p)
    expired = []

    def expire():
        expired.append(True)
        p.kill()
    first = threading.Timer(3 * TIMEOUT_S, expire)
    first.daemon = True
    first.start()
    try:
        for line in p.stdout:
            first.cancel()
            yield json.loads(line)
    finally:
        first.cancel()
        if p.poll() is None:
            p.kill()
        p.wait()
        err = p.stderr.read()
        p.stdout.close()
        p.stderr.close()
    if expired:
        raise UserError("the cluster did not answer in %g s" %
                        (3 * TIMEOUT_S))
    lines = (err or "").strip().splitlines()
    raise UserError(lines[-1] if lines else "the look-up ended (exit "
                    "status %d)" % p.returncode)


class NamesLookup:
    """The names of OSD `pid`'s cluster, looked up in a thread: take()
    gives each reader (a capture's writer, a live breakdown) the lines
    the look-up wrote since its last take, each once (its first take: the
    last full line and those since); `why` says why there are none."""

    def __init__(self, pid, refresh_s=REFRESH_S, clients_s=CLIENTS_S):
        self.pid, self.refresh_s, self.clients_s = pid, refresh_s, clients_s
        self.why = None
        self._lock = threading.Lock()
        self._since_full = []           # the last full line and those since
        self._pending = {}              # each reader's lines not taken
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
                for got in lookup_in_child(conf, self._started,
                                           self.refresh_s, self.clients_s):
                    self._add(got)
            except (UserError, ValueError) as e:
                if not self._stop.is_set():
                    self.why = str(e)
            self._tried.set()
            self._stop.wait(self.refresh_s)

    def _add(self, got):
        with self._lock:
            if "pools" in got:
                self._since_full = []
            self._since_full.append(got)
            for lines in self._pending.values():
                lines.append(got)
            self.why = None
        self._tried.set()

    def first(self, secs=FIRST_S):
        """Wait for the first line or failure (at most `secs`)."""
        self._tried.wait(secs)

    def take(self, reader="capture"):
        """The lines `reader` has not had yet -> [dict], oldest first."""
        with self._lock:
            if reader not in self._pending:
                self._pending[reader] = []
                return list(self._since_full)
            got, self._pending[reader] = self._pending[reader], []
            return got

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
    """`python3 -m cephlat.ceph.clusternames CONF [REFRESH_S
    CLIENTS_S]`: watch(CONF) as a line of JSON on stdout each time it
    learns something, until its parent is gone; or why it cannot as one
    line on stderr (exit status 1)."""
    refresh_s = float(argv[1]) if len(argv) > 1 else REFRESH_S
    clients_s = float(argv[2]) if len(argv) > 2 else CLIENTS_S
    parent = os.getppid()

    def write(got):
        print(json.dumps(got, sort_keys=True), flush=True)
    try:
        watch(argv[0], write, refresh_s, clients_s,
              lambda: os.getppid() == parent)
    except UserError as e:
        sys.stderr.write("%s\n" % e)
        return 1
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
