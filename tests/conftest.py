"""Shared test helpers and fixtures for every tier.

Tiers: tests/unit (no root), tests/bpf (root, controlled programs, exact
ground truth), tests/cluster (root, the real single-node Ceph lab).
Under CI=true a tier that cannot run FAILS instead of skipping.
"""
import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "lib"))

PYTHON = sys.executable
OSDSTAGE = os.path.join(REPO, "tools", "osdstage.py")
RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")
LAB = os.path.join(REPO, "vagrant", "lab.sh")
BUILD = os.path.join(REPO, "build")
IN_CI = os.environ.get("CI") == "true"


def need(ok, why):
    """Skip when `ok` is false, except under CI where it is a failure."""
    if ok:
        return
    if IN_CI:
        pytest.fail("CI=true and this tier cannot run: " + why)
    pytest.skip(why)


def header_enum(name, header="osdstage.h"):
    """{enumerator: value} of `enum name` in probes/`header`"""
    with open(os.path.join(REPO, "probes", header)) as f:
        text = f.read()
    body = re.search(r"enum %s \{(.*?)\};" % name, text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    out, n = {}, -1
    for e in [e.strip() for e in body.split(",") if e.strip()]:
        key, _, val = e.partition("=")
        n = int(val, 0) if val.strip() else n + 1
        out[key.strip()] = n
    return out


def run_tool(args, timeout=120, **kw):
    """Run a tool (argv after the interpreter): its CompletedProcess. An
    osdstage run with -j/--json, or rbdrecord --summary with it, that
    succeeded has each line of its stdout checked against the reports'
    schema (check_reports)."""
    p = subprocess.run([PYTHON] + args, capture_output=True, text=True,
                       timeout=timeout, **kw)
    if p.returncode == 0 and args and args[0] in (OSDSTAGE, RBDRECORD) and \
            ("-j" in args or "--json" in args) and \
            (args[0] == OSDSTAGE or "--summary" in args):
        check_reports(p.stdout)
    return p


_VALIDATORS = {}


def report_errors(obj):
    """What in report `obj` breaks the reports' JSON Schema
    (lib/cephlat/model/report-schema.json), by the definition its "type"
    names (the whole schema's oneOf when it names none): [ValidationError],
    the first in the object first."""
    import jsonschema
    from cephlat.model.schema import schema
    kind = obj.get("type") if isinstance(obj, dict) else None
    if kind not in schema()["$defs"]:
        kind = None
    if kind not in _VALIDATORS:
        s = dict(schema())
        if kind:
            del s["oneOf"]
            s["$ref"] = "#/$defs/" + kind
        _VALIDATORS[kind] = jsonschema.Draft202012Validator(s)
    return sorted(_VALIDATORS[kind].iter_errors(obj),
                  key=lambda e: list(e.absolute_path))


def check_reports(text):
    """osdstage's JSON output `text`, one object a line, each checked
    against the reports' JSON Schema (report_errors) and stamped with its
    version -> the objects."""
    from cephlat.model.schema import version
    out = []
    for line in text.splitlines():
        obj = json.loads(line)
        assert list(obj)[:2] == ["type", "schema"], line[:200]
        assert obj["schema"] == version(), line[:200]
        errors = report_errors(obj)
        assert not errors, "%s: %s at %s" % (
            obj["type"], errors[0].message[:300],
            "/".join(map(str, errors[0].absolute_path)))
        out.append(obj)
    return out


def assert_one_line_error(proc, *fragments, status=None):
    """The bad-input contract: non-zero exit, one line on stderr, no
    traceback, nothing on stdout."""
    assert proc.returncode != 0, proc
    if status is not None:
        assert proc.returncode == status, proc
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(err.splitlines()) == 1, "expected one line on stderr: %r" % err
    for f in fragments:
        assert f in err, "%r not in %r" % (f, err)
    assert proc.stdout == "", proc.stdout


@pytest.fixture
def spawn():
    """spawn(argv, **Popen keywords) -> Popen: a helper process, killed
    (and waited for) when the test ends."""
    procs = []

    def start(argv, **kw):
        p = subprocess.Popen(argv, **kw)
        procs.append(p)
        return p
    yield start
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture(scope="session")
def bpf_ready():
    need(os.geteuid() == 0, "BPF tier needs root")
    need(os.path.exists("/sys/kernel/btf/vmlinux"), "kernel has no BTF")
    need(os.path.isdir("/sys/kernel/tracing/events"),
         "tracefs not mounted (run: make setup)")
    need(os.path.exists(os.path.join(BUILD, "osdstage.bpf.o")),
         "BPF objects not built (run: make)")
    return True


@pytest.fixture(scope="session")
def cxx():
    """Compile a C++ source into a tmp dir: cxx(src_path_or_text, name)."""
    import tempfile
    need(shutil.which("g++") is not None, "g++ missing (run: make setup)")
    d = tempfile.mkdtemp(prefix="osdstage-test-")

    def build(source, name, flags=("-O2", "-g")):
        src = source
        if "\n" in source:
            src = os.path.join(d, name + ".cc")
            with open(src, "w") as f:
                f.write(source)
        out = os.path.join(d, name)
        subprocess.run(["g++"] + list(flags) + ["-o", out, src], check=True)
        return out
    yield build
    shutil.rmtree(d, ignore_errors=True)


def _exports(argv):
    """{name: value} of the `export NAME=VALUE` lines (shell-quoted values)
    that `argv` prints, or None when it fails."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        return None
    env = {}
    for line in p.stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = " ".join(shlex.split(v))
    return env


def lab_env():
    """{'CEPH_CONF':…, 'OSD_PID':…, 'OSD_PIDS':…, 'OSD_ASOKS':…} of the
    running lab, or None."""
    return _exports(["bash", LAB, "env"])


def _osd_count(env):
    """How many OSDs the lab of `env` (lab_env()) runs; 0 for None."""
    if not env:
        return 0
    return len(env.get("OSD_PIDS", env.get("OSD_PID", "")).split(","))


def _host_lab_up(osds):
    """Make the host lab run `osds` OSDs (`lab.sh up` with LAB_OSDS, which
    rebuilds a lab of another count and stops the container labs).
    -> (env, started)"""
    env = lab_env()
    if env is not None and _osd_count(env) == osds and \
            "OSD_NETNS" not in env:         # not the multi-host lab's
        return env, False
    p = subprocess.run(["bash", LAB, "up"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, LAB_OSDS=str(osds),
                                             CEPH="pacific"))
    assert p.returncode == 0, "lab up (%d OSDs) failed:\n%s%s" % (
        osds, p.stdout, p.stderr)
    return lab_env(), True


@pytest.fixture
def hog_cgroup():
    """A cgroup of its own in the unified (v2) hierarchy for a test's CPU
    hogs (test_behind_shardq.py, test_cpu_contenders.py): its path,
    removed after (the hogs gone)."""
    from cephlat.engine import tasks
    root = tasks.cgroup2_mount()
    need(root is not None, "no cgroup v2 (unified) hierarchy mounted")
    path = os.path.join(root, "osdstage-test-hogs-%d" % os.getpid())
    os.makedirs(path, exist_ok=True)
    yield path
    os.rmdir(path)


@pytest.fixture(scope="session")
def lab(bpf_ready):
    """The real single-node Ceph lab (one OSD), started by the project's
    own script if it is not up (a running 3-OSD lab is rebuilt with one).
    Left as found: stopped at the end if we started it."""
    need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed "
         "(run: make setup)")
    env, started = _host_lab_up(1)
    assert env and "OSD_PID" in env and "CEPH_CONF" in env, env
    info = dict(env)
    info["pid"] = int(env["OSD_PID"])
    from cephlat.ceph.adminsock import find_osd_socket
    info["asok"] = find_osd_socket(info["pid"], "0")
    assert info["asok"], "no admin socket for ceph-osd %d" % info["pid"]
    yield info
    if started and not os.environ.get("KEEP_LAB"):
        subprocess.run(["bash", LAB, "down"], capture_output=True, timeout=120)


def _osd_info(env, osds):
    """The per-OSD fields of lab3 / lab3_<release> from lab-env's exports."""
    info = dict(env)
    info["osds"] = osds
    info["pids"] = [int(p) for p in env["OSD_PIDS"].split(",")]
    info["asoks"] = env["OSD_ASOKS"].split(",")
    assert len(info["pids"]) == osds and len(info["asoks"]) == osds, env
    info["pid"], info["asok"] = info["pids"][0], info["asoks"][0]
    assert int(env["OSD_PID"]) == info["pid"], env
    for a in info["asoks"]:
        assert os.path.exists(a), "no admin socket %s" % a
    return info


@pytest.fixture(scope="session")
def lab3(bpf_ready):
    """The host lab with three OSDs (`make lab OSDS=3`): osd.0-2, each on
    its own loop device, pool rbd size 3, min_size 2. Started (or a
    1-OSD lab rebuilt) if it is not up; stopped at the end if started
    here (unless KEEP_LAB is set). Tests using it run after the 1-OSD
    host lab's and before the container labs' (see
    pytest_collection_modifyitems), so the lab is switched once.

    Returns a dict:
      osds       3
      pids       host PIDs of ceph-osd 0, 1, 2 (OSD_PIDS), id order
      asoks      their admin sockets (OSD_ASOKS), id order
      pid, asok  osd.0's (as the `lab` fixture gives them)
      CEPH_CONF, OSD_PID, OSD_PIDS, OSD_ASOKS: what `make -s lab-env`
                 exports
    """
    need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed "
         "(run: make setup)")
    env, started = _host_lab_up(3)
    assert env and "OSD_PIDS" in env and "CEPH_CONF" in env, env
    yield _osd_info(env, 3)
    if started and not os.environ.get("KEEP_LAB"):
        subprocess.run(["bash", LAB, "down"], capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def lab_hosts(bpf_ready):
    """The multi-host lab (`make lab HOSTS=3 LAB_NET_DELAY=1ms`): three
    hosts (network namespaces osdlab-h1..3) with one OSD each, the client's
    namespace, the wire's link delay 1 ms. Built here (whatever lab runs),
    stopped at the end unless KEEP_LAB is set. Returns lab3's dict plus
    netns (each OSD's host, id order) and client_netns."""
    need(os.path.exists("/usr/bin/ceph-osd"), "ceph-osd not installed "
         "(run: make setup)")
    p = subprocess.run(["bash", LAB, "up"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, LAB_HOSTS="3",
                                             LAB_NET_DELAY="1ms",
                                             CEPH="pacific"))
    assert p.returncode == 0, "lab up (3 hosts) failed:\n%s%s" % (
        p.stdout, p.stderr)
    env = lab_env()
    assert env and "OSD_NETNS" in env and "CLIENT_NETNS" in env, env
    info = _osd_info(env, 3)
    info["netns"] = env["OSD_NETNS"].split(",")
    info["client_netns"] = env["CLIENT_NETNS"]
    info["up_output"] = p.stderr
    yield info
    if not os.environ.get("KEEP_LAB"):
        subprocess.run(["bash", LAB, "down"], capture_output=True, timeout=120)


# ------------------------------------------------------------ container labs

CONTAINER_LAB = os.path.join(REPO, "vagrant", "container.sh")
# release -> the version prefix its ceph-osd binary carries
CONTAINER_RELEASES = {"reef": "18.2.", "tentacle": "20.2."}


def container_lab_env(release):
    """{'CEPH_CONF':…, 'OSD_PID':…, 'CEPH_RELEASE':…, 'OSD_ASOK':…,
    'LAB_EXEC':…, 'LAB_CONTAINER':…} of the running container lab of
    `release` (`container.sh RELEASE env`), or None when it is not up."""
    return _exports(["bash", CONTAINER_LAB, release, "env"])


def _container_lab(release, osds=1):
    need(os.geteuid() == 0, "the container labs need root")
    started = False
    env = container_lab_env(release)
    if env is None or _osd_count(env) != osds:
        # the first time also installs podman and builds the root filesystem
        p = subprocess.run(["bash", CONTAINER_LAB, release, "up"],
                           capture_output=True, text=True, timeout=1200,
                           env=dict(os.environ, LAB_OSDS=str(osds)))
        assert p.returncode == 0, "%s lab up failed:\n%s%s" % (
            release, p.stdout, p.stderr)
        started = True
        env = container_lab_env(release)
    assert env and "OSD_PID" in env and "CEPH_CONF" in env, env
    info = dict(env)
    info["release"] = release
    info["version"] = CONTAINER_RELEASES[release]
    info["pid"] = int(env["OSD_PID"])
    info["container"] = env["LAB_CONTAINER"]
    info["exec"] = shlex.split(env["LAB_EXEC"])
    from cephlat.ceph.adminsock import find_osd_socket
    info["asok"] = find_osd_socket(info["pid"], "0") or env["OSD_ASOK"]
    assert os.path.exists(info["asok"]), info
    if osds > 1:
        info.update({k: v for k, v in _osd_info(env, osds).items()
                     if k not in info})
    yield info
    if started and not os.environ.get("KEEP_LAB"):
        subprocess.run(["bash", CONTAINER_LAB, release, "down"],
                       capture_output=True, timeout=300)


def refresh_container_osds(lab):
    """Container lab `lab` (a lab3_<release> / container_lab dict) after
    something that may have started an OSD anew (`container.sh up` starts
    what is not running, a test stops and starts one): its OSDs' pids and
    admin sockets read again, in place (module fixtures hold the dict).
    -> [(osd id, old pid, new pid)] of the OSDs whose process changed."""
    env = container_lab_env(lab["release"])
    assert env is not None, "the %s lab is not up" % lab["release"]
    n = lab.get("osds", 1)
    old = lab.get("pids", [lab["pid"]])
    new = _osd_info(env, n) if n > 1 else {"pid": int(env["OSD_PID"])}
    for k in ("pids", "asoks", "OSD_PIDS", "OSD_ASOKS", "OSD_PID"):
        if k in new:
            lab[k] = new[k]
    from cephlat.ceph.adminsock import find_osd_socket
    lab["pid"] = new["pid"]
    lab["asok"] = find_osd_socket(lab["pid"], "0") or env["OSD_ASOK"]
    return [(i, a, b) for i, (a, b) in
            enumerate(zip(old, lab.get("pids", [lab["pid"]]))) if a != b]


def assert_lab_network_gone():
    """No namespace of a multi-host lab (osdlab-*) and no wire left."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True,
                        text=True).stdout
    assert "osdlab-" not in ns, ns
    assert subprocess.run(["pgrep", "-x", "labwire"]).returncode == 1


# the lab's wire: the process that carries the hosts' links and their
# delays (vagrant/labwire.c)
WIRE = "/var/tmp/osdstage-lab/labwire"


def wire_counters():
    """{namespace: {counter: int}} from the running wire (SIGUSR1: it
    writes them to labwire.ctl.out)."""
    out = WIRE + ".ctl.out"
    if os.path.exists(out):
        os.unlink(out)
    with open(WIRE + ".pid") as f:
        os.kill(int(f.read()), signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not os.path.exists(out):
        assert time.monotonic() < deadline, "the wire wrote no counters"
        time.sleep(0.05)
    time.sleep(0.05)
    got = {}
    with open(out) as f:
        for line in f:
            ns, *kv = line.split()
            got[ns] = {k: int(v) for k, v in (x.split("=") for x in kv)}
    return got


def container_process(root_pid, comm, proc, timeout=30):
    """The host PID of the process named `comm` (a prefix: "python3"
    matches python3.13) that `proc` (a `podman exec`) started in the
    container whose root process `root_pid`'s is (an OSD's host PID):
    the one with that comm and that root. proc must keep running."""
    r = os.stat("/proc/%d/root" % root_pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for d in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/comm" % d) as f:
                    name = f.read().strip()
                st = os.stat("/proc/%s/root" % d)
            except OSError:
                continue
            if name.startswith(comm) and \
                    (st.st_dev, st.st_ino) == (r.st_dev, r.st_ino):
                return int(d)
        time.sleep(0.1)
    raise AssertionError("no %s process in the container" % comm)


def lab_run(info, *args, timeout=120, **kw):
    """Run a Ceph command (ceph, rados, rbd, ...) with the lab's own
    client: inside the container for a container lab, on the host (with
    CEPH_CONF) for the host lab. -> subprocess.CompletedProcess (text)."""
    prefix = info.get("exec") or []
    env = dict(os.environ, CEPH_CONF=info["CEPH_CONF"])
    return subprocess.run(list(prefix) + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout,
                          env=env, **kw)


@pytest.fixture(scope="session", params=sorted(CONTAINER_RELEASES))
def container_lab(request):
    """A real single-node Ceph lab of a newer release in a podman container
    (vagrant/container.sh), once per release: a test using this fixture
    runs against Reef (18.2, Debian trixie) and against Tentacle (20.2,
    Debian sid). Use `lab_reef` / `lab_tentacle` for one of them.

    Started if it is not up (the first time on a machine this builds the
    release's root filesystem: about a minute); starting one stops any
    other lab, the host's Pacific one too. Stopped at the end if the
    fixture started it (unless KEEP_LAB is set). Tests using these fixtures
    run after every other test, grouped by release (see
    pytest_collection_modifyitems below), so that the host `lab` fixture
    and each container lab are brought up once.

    Returns a dict like `lab`'s:
      pid        host PID of the ceph-osd (the tracer's -p); its binary,
                 the release's, is /proc/PID/root/usr/bin/ceph-osd (the
                 host's /usr/bin/ceph-osd is Pacific's: never run either)
      asok       the OSD's admin socket as the host sees it
                 (/proc/PID/root/…/ceph-osd.0.asok), for perf_counters()
      CEPH_CONF  the lab's ceph.conf (same path on the host and inside)
      OSD_PID, OSD_ASOK, LAB_EXEC, LAB_CONTAINER, CEPH_RELEASE: what
                 `make -s lab-env CEPH=<release>` exports
      release    "reef" or "tentacle"; version: "18.2." or "20.2."
      container  the container's name (osdstage-<release>)
      exec       argv prefix that runs a command in the container
                 (["podman", "exec", "osdstage-reef"]); lab_run(info, "ceph",
                 "-s") uses it. The host's Pacific `rados`/`ceph` talk to
                 these clusters too, so Bench(info, …), prefill(info) and
                 trim(info) work unchanged.
    """
    yield from _container_lab(request.param)


@pytest.fixture(scope="session")
def lab_reef():
    """The Reef (18.2) container lab; see container_lab."""
    yield from _container_lab("reef")


@pytest.fixture(scope="session")
def lab_tentacle():
    """The Tentacle (20.2) container lab; see container_lab."""
    yield from _container_lab("tentacle")


@pytest.fixture(scope="session")
def lab3_reef():
    """The Reef container lab with three OSDs (`make lab CEPH=reef
    OSDS=3`): container_lab's fields plus lab3's (osds, pids, asoks; the
    admin sockets as the host sees them, /proc/PID/root/...). Its tests
    run after every other Reef test, the life-cycle ones included, so
    the Reef lab is switched to 3 OSDs once and left that way only for
    them."""
    yield from _container_lab("reef", osds=3)


@pytest.fixture(scope="session")
def lab3_tentacle():
    """The Tentacle container lab with three OSDs, like lab3_reef."""
    yield from _container_lab("tentacle", osds=3)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "lab_lifecycle: stops its lab; runs last among the "
        "tests of that lab")


def _container_release_of(item):
    names = getattr(item, "fixturenames", ())
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for name in ("container_lab", "lab3"):   # parametrized by release
            if name in names and name in callspec.params:
                return callspec.params[name]
    for release in CONTAINER_RELEASES:
        if "lab_" + release in names or "lab3_" + release in names:
            return release
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """One lab runs at a time and starting one stops the others: first the
    tests of the host lab with one OSD (and every test without a lab),
    then those of the host lab with three (lab3), then those of the
    multi-host lab (lab_hosts; those with its erasure-coded image,
    ec_hosts, after the others), then each container
    lab's, one release after the other; in each group its lab_lifecycle
    tests last, and in a release's group its 3-OSD tests (lab3_<release>)
    after those, their own lab_lifecycle ones last."""
    order = sorted(CONTAINER_RELEASES)

    def key(item):
        release = _container_release_of(item)
        last = item.get_closest_marker("lab_lifecycle") is not None
        if release is None:
            if "ec_hosts" in getattr(item, "fixturenames", ()):
                return (1, 3)
            if "lab_hosts" in getattr(item, "fixturenames", ()):
                return (1, 2 + 2 * int(last))
            if "lab3" in getattr(item, "fixturenames", ()):
                return (1, int(last))
            return (0, 0)
        three = any(n.startswith("lab3")
                    for n in getattr(item, "fixturenames", ()))
        return (2 + order.index(release), 2 + int(last) if three
                else int(last))
    items[:] = sorted(items, key=key)


class Bench:
    """A rados bench running in the background against the lab."""

    def __init__(self, env, mode, secs, threads=16):
        e = dict(os.environ, CEPH_CONF=env["CEPH_CONF"])
        args = ["rados", "-p", "rbd", "bench", str(secs), mode, "-t",
                str(threads)]
        if mode == "write":
            args += ["-b", "4096", "--no-cleanup"]
        self.proc = subprocess.Popen(args, env=e, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)

    def wait(self, timeout=120):
        out, _ = self.proc.communicate(timeout=timeout)
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def writes_until(env, counts, least=100, secs=4, threads=16, rounds=4):
    """rados bench 4 KiB writes of `secs` seconds, run again until every
    number `counts()` gives (each OSD's writes since a start, say) is
    above `least`, at most `rounds` runs. Which OSD is an object's
    primary follows from its name, and rados bench names its objects
    after the host and its own pid: how one run's writes spread over the
    OSDs differs from machine to machine and run to run (one OSD of three
    had 68 of 1,222 writes as primary in one run)."""
    got = None
    for _ in range(rounds):
        b = Bench(env, "write", secs, threads=threads)
        out = b.wait()
        assert b.proc.returncode == 0, out
        got = counts()
        if min(got) > least:
            return got
    raise AssertionError("after %d runs of %d s of writes, some OSD has "
                         "%d or fewer: %s" % (rounds, secs, least, got))


def trim(env):
    """Keep the lab OSD from filling up: every write run leaves its objects
    (--no-cleanup) and a full OSD blocks all writes."""
    p = subprocess.run(["bash", LAB, "trim"], capture_output=True, text=True,
                       timeout=900, env=dict(
                           os.environ, CEPH_CONF=env["CEPH_CONF"],
                           CEPH=env.get("release", "pacific")))
    assert p.returncode == 0, p.stdout + p.stderr


def prefill(env, secs=5):
    """Write 4 KiB objects so that `rand` reads find data."""
    trim(env)
    b = Bench(env, "write", secs)
    out = b.wait()
    assert b.proc.returncode == 0, out
    return out


def perf_counters(asok):
    """The OSD's perf dump, with "_t": the wall-clock time it was taken
    (the middle of the call), and "_t0", "_t1": the call's start and end
    (the counters were read somewhere between them)."""
    from cephlat.ceph.adminsock import perf_dump
    t0 = time.time()
    out = perf_dump(asok)
    t1 = time.time()
    out.update(_t=(t0 + t1) / 2, _t0=t0, _t1=t1)
    return out


def lat_mean_us(before, after, section, name):
    """Ceph's latency counter `section`.`name` between perf dumps `before`
    and `after` -> (its mean in us, or None when nothing counted; the
    count)."""
    b, a = before[section][name], after[section][name]
    n = a["avgcount"] - b["avgcount"]
    return (a["sum"] - b["sum"]) / n * 1e6 if n else None, n


def in_report(n, before, after, rec):
    """Ceph's count `n` between perf dumps `before` and `after`, scaled to
    the interval of report `rec` (its "interval_s"). traced_window's dumps
    are already at the report's edges (CounterPoll.window): the scale is
    then ~1 and corrects only a dump taken a little off its edge."""
    return n * rec["interval_s"] / (after["_t"] - before["_t"])


def _lerp(a, b, f):
    """Dumps a and b (alike) with every number at a + f x (b - a)."""
    if isinstance(a, dict):
        return {k: _lerp(v, b[k], f) if k in b else v
                for k, v in a.items()}
    if isinstance(a, (int, float)) and not isinstance(a, bool) and \
            isinstance(b, (int, float)):
        return a + f * (b - a)
    return b


class CounterPoll:
    """Perf dumps of admin sockets `asoks`, every POLL_S seconds in a
    thread between start() and stop(): Ceph's counters at any time of
    that span (at(t), linear between the dumps around it), so that a
    tool's report is compared with Ceph's counts over the report's own
    window and not over the dumps' bracket (the tool's start and the
    printing of its report, which a busy machine makes longer while the
    workload's rate there is not the window's: Ceph's count of a Reef
    write window, scaled so, came out 3.7 % under ours)."""
    POLL_S = 0.25

    def __init__(self, asoks):
        self.asoks = asoks
        self.dumps = []                 # [[dump per asok], ...]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _dump(self):
        self.dumps.append([perf_counters(a) for a in self.asoks])

    def _poll(self):
        while not self.done.wait(self.POLL_S):
            self._dump()

    def start(self):
        self._dump()
        self.thread.start()
        return self

    def stop(self):
        self.done.set()
        self.thread.join()
        self._dump()

    def at(self, t):
        """[dump per asok] at wall-clock time t (extrapolated from the
        nearest two dumps outside the span)."""
        d = self.dumps
        i = 0
        while i < len(d) - 2 and d[i + 1][0]["_t"] < t:
            i += 1
        out = []
        for a, b in zip(d[i], d[i + 1]):
            f = (t - a["_t"]) / (b["_t"] - a["_t"])
            out.append(dict(_lerp(a, b, f), _t=t))
        return out

    def bracket(self, line):
        """The dumps around each edge of the report on JSON line `line`:
        ([dump per asok] last taken wholly before its start, first taken
        wholly after it, last wholly before its end, first wholly after
        it), chosen per admin socket by that dump's own call (the sockets
        are asked one after another, and a busy OSD answers late). A
        count over the window lies between inner (second to third) and
        outer (first to fourth): exact bounds where interpolation
        (window) assumes a steady rate, which bursty work (recovery, PG
        by PG) has not."""
        rec = json.loads(line)
        end = float(rec["ts"])
        start = end - float(rec["interval_s"])
        n = len(self.dumps)

        def before(t):
            return [self.dumps[max([0] + [i for i in range(n) if
                                          self.dumps[i][j]["_t1"] <= t])][j]
                    for j in range(len(self.asoks))]

        def after(t):
            return [self.dumps[min([n - 1] + [i for i in range(n) if
                                              self.dumps[i][j]["_t0"] >= t])][j]
                    for j in range(len(self.asoks))]
        return before(start), after(start), before(end), after(end)

    def window(self, line):
        """([dumps] at the start, at the end) of the report on JSON line
        `line` (its wall-clock "ts" and "interval_s"); the first and the
        last dumps for any other output."""
        try:
            rec = json.loads(line)
            end = float(rec["ts"])
            start = end - float(rec["interval_s"])
        except (ValueError, TypeError, KeyError):
            return self.dumps[0], self.dumps[-1]
        return self.at(start), self.at(end)


def _kernel_stacks(pid):
    """Where each thread of `pid` is in the kernel (state, wchan, stack):
    what a test reports about a process that did not exit."""
    out = []
    for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
        d = "/proc/%d/task/%s/" % (pid, tid)
        try:
            comm = open(d + "comm").read().strip()
            state = open(d + "stat").read().rsplit(")", 1)[1].split()[0]
            wchan = open(d + "wchan").read().strip()
            stack = open(d + "stack").read().strip().replace("\n", " | ")
        except OSError as e:
            out.append("%s: %s" % (tid, e))
            continue
        out.append("%s %s %s %s: %s" % (tid, comm, state, wchan, stack))
    return "\n".join(out)


BPFTRACE_CTRL_C_AGAIN_S = 5


def stop_bpftrace(p, timeout=60):
    """Ctrl-C a running bpftrace (Popen, text pipes) and collect what it
    printed -> (stdout, stderr). bpftrace 0.17 can miss a SIGINT (seen on
    syncfs.bt and blockrq.bt, about 1 in 100), its one thread left in epoll_wait with no event to come (the scripts print
    only at the end); so, as someone at the terminal would, Ctrl-C again
    every BPFTRACE_CTRL_C_AGAIN_S seconds (the scripts' headers say so).
    One that has not exited within `timeout` seconds fails the test with
    where each of its threads was in the kernel."""
    deadline = time.time() + timeout
    while True:
        p.send_signal(signal.SIGINT)
        try:
            return p.communicate(timeout=min(BPFTRACE_CTRL_C_AGAIN_S,
                                             max(0.0, deadline - time.time())))
        except subprocess.TimeoutExpired as e:
            if time.time() < deadline:
                continue
            stacks = _kernel_stacks(p.pid)
            p.kill()
            out, err = p.communicate()
            raise AssertionError(
                "bpftrace (%s) did not exit within %ds of its SIGINTs; its "
                "threads:\n%s\nstdout: %r\nstderr: %r" % (
                    " ".join(p.args), timeout, stacks, out, err)) from e


def gdb_offsets(path, offsets, *before, prefix=()):
    """gdb -batch on `path` (a binary or its debug file): the commands
    `before`, then each {name: DWARF expression} printed as a number;
    prefix: an argv prefix gdb runs under (a container lab's `exec`, the
    path then the container's own). -> (gdb's whole stdout, {name: int} of
    those it could print)"""
    args = list(prefix) + ["gdb", "-batch", "-nx"]
    for c in list(before) + [x for name, expr in offsets.items() for x in (
            "echo @@off %s\\n" % name, "print (long)%s" % expr)]:
        args += ["-ex", c]
    p = subprocess.run(args + [path], capture_output=True, text=True,
                       timeout=600)
    got = re.findall(r"@@off (\w+)\n\$\d+ = (-?\d+)", p.stdout)
    return p.stdout, {k: int(v) for k, v in got}


def fio_rbd_job(ios, iodepth, seed, image="img1", rw="randrw",
                lat_log=None, direct=1, extra=""):
    """A fio job of fio's rbd engine on rbd/IMAGE: `ios` 4 KiB ops, half
    reads (randrw), over the image's first 64 MiB. lat_log: a path prefix
    for fio's own latency of every op (LAT_LOG_lat.1.log, read_fio_lat_log)
    on CLOCK_MONOTONIC, the clock the traces use; room for every op from
    the start (fio's least is 1024), so that fio never stops to grow the
    log (it waits for every op in flight when it does). direct=1: fio
    does not flush the image as it opens it (direct=0 does: librbd's
    write-around cache, in write-through until a flush, then acknowledges
    writes at once); extra: more job lines (such as "fsync=16")."""
    job = ("[global]\nioengine=rbd\nclientname=admin\npool=rbd\n"
           "rbdname=%s\ndirect=%d\n%s[mix]\nrw=%s\nrwmixread=50\nbs=4k\n"
           "size=64m\nnumber_ios=%d\niodepth=%d\nrandseed=%d\n" % (
               image, direct, extra, rw, ios, iodepth, seed))
    if lat_log:
        job += ("clocksource=clock_gettime\nwrite_lat_log=%s\n"
                "log_avg_msec=0\nlog_offset=1\nlog_entries=%d\n" % (
                    lat_log, max(1024, ios + 64)))
    return job


def net_delay(who, us):
    """The lab's link delay of host `who` (its namespace, or "all") to
    `us` (vagrant/lab.sh net-delay)."""
    p = subprocess.run(["bash", LAB, "net-delay", who, "%dus" % us],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def trace_hosts(lab_hosts, d, job, conf=None, env_of=None):
    """One tracer per host of the multi-host lab (osdstage --osd all
    --host-netns NS -w d/hI.ctf) around fio's `job` (its text, in
    d/job.fio) under rbdrecord in the client's namespace (trace d/client;
    conf: lines for the client's own ceph.conf's [client] section).
    env_of: {host index: extra environment of its tracer}. -> {"caps",
    "trace", "fio": fio's json report's job, "late_us": the most, over the
    links, the wire's wake-ups added per packet beyond the link's delay
    (mean), "prog_runs": per tracer, its uprobe programs' runs as they
    stood before it was stopped (uprobe_prog_runs)}"""
    caps = [str(d / ("h%d.ctf" % i)) for i in range(len(lab_hosts["netns"]))]
    conf_path = lab_hosts["CEPH_CONF"]
    if conf:
        conf_path = str(d / "client.conf")
        with open(lab_hosts["CEPH_CONF"]) as f:
            text = f.read()
        with open(conf_path, "w") as f:
            f.write(text + "\n[client]\n" + "\n".join(conf) + "\n")
    tracers = []
    wire0 = wire_counters()
    try:
        for i, (ns, cap) in enumerate(zip(lab_hosts["netns"], caps)):
            t = subprocess.Popen([PYTHON, OSDSTAGE, "--osd", "all",
                                  "--host-netns", ns, "-w", cap],
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ,
                                          **(env_of or {}).get(i, {})))
            tracers.append(t)
        # started together (each attaches to its own host's OSD)
        for t in tracers:
            wait_for_line(t.stderr, "Tracing", 60)
        (d / "job.fio").write_text(job)
        trace = str(d / "client")
        p = subprocess.run(
            ["nsenter", "--net=/run/netns/" + lab_hosts["client_netns"],
             "--", PYTHON, RBDRECORD, "-o", trace, "--", "fio",
             "--output-format=json", "--output=%s" % (d / "fio.json"),
             str(d / "job.fio")], capture_output=True, text=True,
            timeout=300, env=dict(os.environ, CEPH_CONF=conf_path))
        assert p.returncode == 0, p.stderr
        assert "none lost" in p.stderr, p.stderr
        runs = [uprobe_prog_runs(t.pid) for t in tracers]
    finally:
        for t in tracers:
            t.send_signal(signal.SIGINT)
        for t in tracers:
            t.communicate(timeout=60)
    assert [t.returncode for t in tracers] == [0] * len(tracers)
    wire1 = wire_counters()
    late = max((wire1[ns]["late_sum_us"] - wire0[ns]["late_sum_us"]) /
               max(1, wire1[ns]["forwarded"] - wire0[ns]["forwarded"])
               for ns in wire1 if ns in wire0)
    return {"caps": caps, "trace": trace, "late_us": late,
            "prog_runs": runs,
            "fio": json.load(open(d / "fio.json"))["jobs"][0]}


def uprobe_prog_runs(pid):
    """The BPF programs of uprobe type (kprobe programs, the kernel's name)
    process `pid` holds: [(run_cnt, run_time_ns)], as the kernel's run
    statistics counted them while they were on (bpf.enable_run_stats;
    the exporter holds them on while attached)."""
    from cephlat.engine import bpfsys
    out = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        info = bpfsys.prog_fdinfo(pid, int(fd))
        if info and info["type"] == bpfsys.BPF_PROG_TYPE_KPROBE:
            out.append((info["run_cnt"], info["run_time_ns"]))
    return out


def read_fio_lat_log(prefix):
    """fio's per-op total latency log (fio_rbd_job's lat_log): every op's
    (kind, offset) -> its latencies in ns in completion order. The total
    latency (fio's `lat`) runs from before fio's call into the engine to
    fio's completion stamp; its `clat` starts only once the call returned."""
    kinds = {0: "read", 1: "write"}
    got = {}
    with open(prefix + "_lat.1.log", newline="") as f:
        for row in csv.reader(f, skipinitialspace=True):
            _t, value, ddir, _bs, offset = (int(x) for x in row[:5])
            got.setdefault((kinds[ddir], offset), []).append(value)
    return got


def wait_for_line(stream, needle, timeout):
    """Read lines from a text stream until one contains `needle`."""
    t0 = time.time()
    seen = []
    while time.time() - t0 < timeout:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return line
    raise AssertionError("%r not seen within %ss; got: %r" % (needle, timeout,
                                                              seen))


def folded_stacks(cap, what="waits"):
    """`osdstage -r CAP --folded WHAT`, every frame named (the files are
    this host's) -> [(the sleeper's frames, the waker's, us asleep)] a
    line each, frames root first (the waker's from its wake-up call); of
    samples on a CPU (WHAT on-cpu): [(frames, [], samples)]."""
    p = subprocess.run([PYTHON, OSDSTAGE, "-r", cap, "--folded", what],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "addresses" not in p.stderr, p.stderr
    out = []
    for line in p.stdout.splitlines():
        stack, _, us = line.rpartition(" ")
        sleeper, _, waker = stack.partition(";--;")
        out.append((sleeper.split(";"), waker.split(";") if waker else [],
                    int(us)))
    return out


def in_order(frames, names):
    """Whether `names` appear in `frames` in that order (folded_stacks'
    frames: root first)."""
    i = 0
    for f in frames:
        if i < len(names) and f == names[i]:
            i += 1
    return i == len(names)


def c_program(src, out_dir):
    """C program `src` (a test's controlled program, threads and all)
    built into directory `out_dir` -> its path"""
    exe = os.path.join(str(out_dir), os.path.basename(src)[:-2])
    subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, src], check=True)
    return exe


def capture_program(exe, arg, probes, cap):
    """Controlled program `exe` `arg` (waiting for a line on stdin, then
    printing its measurements as one JSON line), captured to `cap` with
    no stage but its kernel ones, its threads' roles from `probes` (a
    --probes file) -> trace_until_exit()'s (truth, stdout, stderr, exit
    status)"""
    prog = subprocess.Popen([exe, str(arg)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    return trace_until_exit(prog, ["--probes", probes, "-j", "-w", cap],
                            banner="Tracing 0 stages + kernel")


def trace_until_exit(prog, tool_args, banner="Tracing"):
    """osdstage `tool_args` against `prog` (a controlled program waiting for
    "go" on stdin, printing its own measurements as one JSON line); ends
    when the program exits. -> (truth, tool's stdout, stderr, exit status)"""
    tool = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(prog.pid)] +
                            list(tool_args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for_line(tool.stderr, banner, 30)
        prog.stdin.write("go\n")
        prog.stdin.flush()
        truth = json.loads(prog.stdout.readline())
        prog.wait(60)
        out, err = tool.communicate(timeout=60)   # ends when prog exits
    finally:
        for p in (prog, tool):
            if p.poll() is None:
                p.kill()
    if "-w" in tool_args and tool.returncode == 0:
        # every capture a test makes is one every CTF reader takes
        assert_ctf_readers_accept(tool_args[list(tool_args).index("-w") + 1])
    return truth, out, err, tool.returncode


def assert_ctf_readers_accept(cap):
    """Every CTF reader takes capture `cap` whole: each stream in time
    order across its packets (our record-by-record check), and babeltrace2
    (whose muxer stops at the first message older than one it has given)
    reads as many events as our reader. -> that count"""
    from cephlat.capture.ctf import Trace
    need(shutil.which("babeltrace2") is not None,
         "babeltrace2 missing (make setup)")
    ours, faults = Trace(cap).check_order()
    assert faults == [], "%s: out of time order: %s" % (cap, faults)
    p = subprocess.run(["babeltrace2", cap, "-c", "sink.utils.counter"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    # the counter prints running totals; the last block is the whole
    counts = re.findall(r"^\s*(\d+) Event messages$", p.stdout, re.M)
    assert counts and int(counts[-1]) == ours, (cap, counts[-1:], ours)
    return ours


def parse_json_lines(text):
    return [json.loads(l) for l in text.splitlines() if l.strip()]
