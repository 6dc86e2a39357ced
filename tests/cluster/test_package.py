"""The Debian package (`make deb`) on clean Debian roots: bookworm and
trixie, minbase, built by mmdebstrap from the host's Debian mirror and
cached where vagrant/container.sh caches its roots (minbase-SUITE.tar,
built when missing, about a minute each), imported into podman.

In a container of each root, `apt-get install ./osdstage_*.deb man-db`
resolves the dependencies from Debian (about a minute; the result is
committed as localhost/osdstage-pkgtest:SUITE for the module, removed at
its end), then:

- the package and what it pulled in: its Depends and Recommends, nothing
  of the lab (no ceph, fio, prometheus), the exporter's unit not enabled;
- each command's --help exits 0; `man -w` finds each page;
- `osdstage -r` of tests/fixtures/lab-v0.ctf (text and JSON) prints what
  the package's code prints with the host's Python;
- on the lab (the `lab` fixture): `osdstage --osd 0` in a container of
  the root, run by deploy/container/run.sh (the exporter's privileges:
  the host's PID namespace, CAP_BPF CAP_PERFMON CAP_SYS_PTRACE only, its
  seccomp profile, tracefs read-only, a read-only root), traces osd.0
  under a read load.

Needs root, podman, runc, mmdebstrap and dpkg-deb (skipped without them,
failed under CI=true).
"""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO, Bench, need, prefill, run_tool

SUITES = ("bookworm", "trixie")
CONTAINER_SH = os.path.join(REPO, "vagrant", "container.sh")
RUN_SH = os.path.join(REPO, "deploy", "container", "run.sh")
FIX = os.path.join(REPO, "tests", "fixtures")
CAPTURE = os.path.join(FIX, "lab-v0.ctf")
BASE = "localhost/osdstage-minbase:%s"
IMAGE = "localhost/osdstage-pkgtest:%s"
# the tools' Debian dependencies (packaging/debian/control), what must not
# come with them
DEPENDS = ("libbpf1", "python3", "python3-numpy", "python3-pyelftools",
           "python3-capstone")
RECOMMENDS = ("python3-prometheus-client",)
NOT_PULLED = ("ceph-osd", "ceph-common", "fio", "chromium", "prometheus")
# the report's environment, the same on the host and in the roots
ENV = {"TZ": "UTC", "COLUMNS": "80"}


def _script_default(name):
    """container.sh's `NAME=${VAR:-DEFAULT}` -> the value now: $VAR, else
    DEFAULT (the lab's cache directory, whatever it is called)."""
    with open(CONTAINER_SH) as f:
        m = re.search(r"^%s=\$\{(\w+):-([^}]*)\}" % name, f.read(), re.M)
    assert m, "no %s=${VAR:-default} line in %s" % (name, CONTAINER_SH)
    return os.environ.get(m.group(1)) or m.group(2)


def rootfs_dir():
    return _script_default("ROOTFS_DIR")


def mirror():
    """The Debian mirror container.sh uses: $CEPHLAT_MIRROR (or what
    container.sh calls it), else the host's apt source for its own suite."""
    with open(CONTAINER_SH) as f:
        m = re.search(r"\$\{(\w+_MIRROR):-\}", f.read())
    if m and os.environ.get(m.group(1)):
        return os.environ[m.group(1)]
    codename = ""
    with open("/etc/os-release") as f:
        for line in f:
            if line.startswith("VERSION_CODENAME="):
                codename = line.split("=", 1)[1].strip().strip('"')
    p = subprocess.run(["apt-get", "indextargets", "--format",
                        "$(RELEASE) $(REPO_URI)"], capture_output=True,
                       text=True)
    for line in p.stdout.splitlines():
        rel, _, uri = line.partition(" ")
        if rel == codename and uri:
            return uri
    return "http://deb.debian.org/debian"


def tail(text, n=30):
    return "\n".join(text.splitlines()[-n:])


def podman(*args, timeout=120, check=True):
    p = subprocess.run(["podman"] + list(args), capture_output=True,
                       text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert p.returncode == 0, "podman %s: %s" % (
            " ".join(args[:3]), tail(p.stdout + p.stderr))
    return p


def ulimits():
    """podman's default limits can exceed this machine's hard limits
    (runc then refuses): at most the caller's, as container.sh sets them."""
    import resource
    out = []
    for name, res, cap in (("nofile", resource.RLIMIT_NOFILE, 1048576),
                           ("nproc", resource.RLIMIT_NPROC, 32768)):
        hard = resource.getrlimit(res)[1]
        v = cap if hard == resource.RLIM_INFINITY or hard > cap else hard
        out += ["--ulimit", "%s=%d:%d" % (name, v, v)]
    return out


def in_root(suite, *cmd, timeout=120, extra=()):
    """Run `cmd` in a fresh container of the installed root (no network).
    -> CompletedProcess (text)"""
    envs = [a for k, v in ENV.items() for a in ("-e", "%s=%s" % (k, v))]
    args = ["run", "--rm", "--pull=never", "--runtime", "runc",
            "--network", "none"] + ulimits() + envs + list(extra) + \
        [IMAGE % suite] + list(cmd)
    return podman(*args, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def deb():
    need(os.geteuid() == 0, "the package test needs root (mmdebstrap, podman)")
    for tool, pkg in (("podman", "podman"), ("runc", "runc"),
                      ("mmdebstrap", "mmdebstrap"), ("dpkg-deb", "dpkg")):
        need(shutil.which(tool) is not None,
             "%s missing (run: make setup-containers, or apt-get install %s)"
             % (tool, pkg))
    p = subprocess.run(["make", "-C", REPO, "--no-print-directory", "deb"],
                       capture_output=True, text=True, timeout=900,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, tail(p.stdout + p.stderr)
    m = re.search(r"building package 'osdstage' in '([^']+)'", p.stdout)
    assert m, tail(p.stdout)
    path = os.path.join(REPO, m.group(1))
    assert re.fullmatch(r"osdstage_[0-9][^_]*_\w+\.deb",
                        os.path.basename(path)), path
    assert os.path.getsize(path) > 0
    return path


def base_image(suite):
    """The minbase root of `suite` (cached tar, built when missing) as a
    podman image."""
    d = rootfs_dir()
    tar = os.path.join(d, "minbase-%s.tar" % suite)
    if not os.path.exists(tar) or os.path.getsize(tar) == 0:
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, ".minbase-%s.%d.tar" % (suite, os.getpid()))
        try:
            # a mirror snapshot may serve a Release past its Valid-Until
            p = subprocess.run(
                ["mmdebstrap", "--mode=root", "--format=tar",
                 "--variant=minbase",
                 '--aptopt=Acquire::Check-Valid-Until "false"',
                 suite, tmp, mirror()], capture_output=True, text=True,
                timeout=1200, stdin=subprocess.DEVNULL)
            assert p.returncode == 0, "mmdebstrap %s: %s" % (
                suite, tail(p.stdout + p.stderr))
            os.replace(tmp, tar)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        podman("image", "rm", "-f", BASE % suite, check=False)
    if podman("image", "exists", BASE % suite, check=False).returncode != 0:
        podman("import", "--quiet", tar, BASE % suite, timeout=600)
    return BASE % suite


@pytest.fixture(scope="module", params=SUITES)
def installed(request, deb):
    """The package installed with apt in a clean root of the suite:
    -> the suite; its image is IMAGE % suite while the module runs."""
    suite = request.param
    base = base_image(suite)
    name = "osdstage-pkgtest-%s" % suite
    podman("rm", "-f", name, check=False)
    d, f = os.path.split(deb)
    script = ("set -e; apt-get update -q; cd /mnt/pkg; "
              "apt-get install -y -q ./%s man-db" % f)
    p = podman("run", "--pull=never", "--name", name, "--runtime", "runc",
               "--network", "host", *ulimits(),
               "-e", "DEBIAN_FRONTEND=noninteractive",
               "-v", "%s:/mnt/pkg:ro" % d, base, "sh", "-c", script,
               timeout=1200, check=False)
    try:
        assert p.returncode == 0, "apt-get install ./%s in %s: %s" % (
            f, suite, tail(p.stdout + p.stderr))
        podman("commit", "--quiet", name, IMAGE % suite, timeout=600)
    finally:
        podman("rm", "-f", name, check=False)
    yield suite
    podman("image", "rm", "-f", IMAGE % suite, check=False)


def test_installed_with_its_dependencies_only(installed):
    p = in_root(installed, "dpkg-query", "-W", "-f",
                "${Package} ${db:Status-Status}\\n")
    assert p.returncode == 0, p.stderr
    status = dict(line.split() for line in p.stdout.splitlines())
    for pkg in ("osdstage",) + DEPENDS + RECOMMENDS:
        assert status.get(pkg) == "installed", (pkg, status.get(pkg))
    for pkg in NOT_PULLED:
        assert status.get(pkg) != "installed", pkg
    p = in_root(installed, "dpkg", "-L", "osdstage")
    assert p.returncode == 0, p.stderr
    files = p.stdout.split()
    for f in ("/usr/bin/osdstage", "/usr/bin/rbdrecord",
              "/usr/bin/osdstage-exporter",
              "/usr/lib/osdstage/osdstage.bpf.o",
              "/usr/lib/osdstage/osdstage.abi.json",
              "/usr/lib/osdstage/rbdrecord.bpf.o",
              "/usr/lib/osdstage/cephlat/__init__.py",
              "/usr/lib/systemd/system/osdstage-exporter.service"):
        assert f in files, f
    # the unit is installed, not enabled; no maintainer script but prerm
    p = in_root(installed, "sh", "-c", "find / -xdev -path '*.wants/osdstage*'"
                "; ls /var/lib/dpkg/info/ | grep '^osdstage\\.'")
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.split()) == ["osdstage.list", "osdstage.md5sums",
                                        "osdstage.prerm"], p.stdout


@pytest.mark.parametrize("cmd", ["osdstage", "rbdrecord", "osdstage-exporter"])
def test_commands_help(installed, cmd):
    p = in_root(installed, cmd, "--help")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("usage:"), p.stdout[:200]
    assert "Traceback" not in p.stderr, p.stderr


def test_man_finds_the_pages(installed):
    p = in_root(installed, "man", "-w", "osdstage", "rbdrecord",
                "osdstage-exporter")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["/usr/share/man/man8/%s.8" % n for n in (
        "osdstage", "rbdrecord", "osdstage-exporter")], p.stdout
    p = in_root(installed, "man", "-P", "cat", "osdstage")
    assert p.returncode == 0, p.stderr
    assert "SEE ALSO" in p.stdout


def test_reads_a_capture_as_on_the_host(installed, deb, tmp_path):
    """The reports the root's Python and numpy print (text and JSON) are
    the ones the package's own code prints with the host's (its files
    unpacked here); what they should say is tests/unit's
    (test_capture_fixture)."""
    subprocess.run(["dpkg-deb", "-x", deb, str(tmp_path)], check=True)
    lib = str(tmp_path / "usr" / "lib" / "osdstage")
    for args in ([], ["-j"]):
        p = in_root(installed, "osdstage", "-r", CAPTURE, *args,
                    extra=["-v", "%s:%s:ro" % (FIX, FIX)])
        assert p.returncode == 0, p.stdout + p.stderr
        want = run_tool(["-c", "import sys; "
                         "sys.path.insert(0, sys.argv.pop(1)); "
                         "from cephlat.cli.osdstage import main; "
                         "sys.exit(main())", lib, "-r", CAPTURE] + args,
                        env=dict(os.environ, **ENV))
        assert want.returncode == 0, want.stderr
        assert "ops" in want.stdout, want.stdout
        if args:
            assert [json.loads(line) for line in p.stdout.splitlines()] == \
                [json.loads(line) for line in want.stdout.splitlines()]
        else:
            assert p.stdout == want.stdout


def test_traces_the_labs_osd_from_a_container_of_the_root(installed, lab):
    """osdstage --osd 0 run by deploy/container/run.sh (the exporter's
    privileges, nothing more) in a container of the installed root."""
    name = "osdstage-pkgtest-lab-%s" % installed
    podman("rm", "-f", name, check=False)
    prefill(lab, 5)
    bench = Bench(lab, "rand", 40)
    try:
        env = dict(os.environ, IMAGE=IMAGE % installed, NAME=name,
                   PODMAN_ARGS="--rm --pull=never", PODMAN_RUNTIME="runc")
        p = subprocess.run(["bash", RUN_SH, "osdstage", "--osd", "0", "-j",
                            "5", "1"], capture_output=True, text=True,
                           timeout=180, env=env, stdin=subprocess.DEVNULL)
    finally:
        bench.stop()
        podman("rm", "-f", name, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()
            if line.startswith("{")]
    recs = [r for r in recs if r.get("type") == "interval" and
            r.get("pid") == lab["pid"]]
    assert recs, "no report of osd.0 (pid %d): %s" % (
        lab["pid"], p.stdout + p.stderr)
    rec = recs[-1]
    assert rec["ceph_version"].startswith("16.2."), rec["ceph_version"]
    counts = {k: s.get("count", 0) for k, s in rec["stages"].items()}
    assert max(counts.values()) > 100, counts
