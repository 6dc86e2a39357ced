"""The exporter's container (deploy/container/) on the 3-OSD lab, run the
way deploy/container/run.sh runs it: the host's PID namespace, every
capability dropped but CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE, the seccomp
profile of deploy/container/seccomp.json, tracefs read-only, a read-only
root file system. Not privileged.

- with exactly these privileges it traces every OSD of the lab:
  osdstage_osd_info names each one with its current pid, and the probes
  of each one run under a write load;
- with any one of the three capabilities taken away it traces none, and
  says why on stderr (the set is the least that works, deploy/README.md).

The image is built when missing or when lib/, the exporter or build/
changed (deploy/container/build-image.sh: an mmdebstrap root filesystem of
Debian bookworm, cached, then the Containerfile; a few seconds once the
base exists) and kept as localhost/osdstage-exporter:latest. Under CI=true
this fails when it cannot run.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

import promserver
from conftest import REPO, Bench, lab_env, need
from cephlat.exporter import families as F
from promserver import free_port

IMAGE = "localhost/osdstage-exporter:latest"
BUILD_IMAGE = os.path.join(REPO, "deploy", "container", "build-image.sh")
RUN_SH = os.path.join(REPO, "deploy", "container", "run.sh")
CAPS = ("CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE")
NAME = "osdstage-exporter-test"
START_S = 60       # loading the programs and attaching 3 OSDs


def podman(*args, timeout=120):
    return subprocess.run(["podman"] + list(args), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def scrape(port):
    """promserver.scrape; {} when nothing listens."""
    try:
        return promserver.scrape(port, timeout=5)
    except OSError:
        return {}


def infos(m):
    """{ceph_daemon: labels} of osdstage_osd_info."""
    return {dict(k[1])["ceph_daemon"]: dict(k[1])
            for k in m if k[0] == F.OSD_INFO}


def lab_osds():
    """{osd.N: pid} of the lab now (another test may have restarted one)."""
    env = lab_env()
    assert env and env.get("OSD_PIDS"), env
    return {"osd.%d" % i: int(p)
            for i, p in enumerate(env["OSD_PIDS"].split(","))}


@pytest.fixture(scope="module")
def image(lab3):
    need(shutil.which("podman") is not None,
         "podman missing (run: make setup-containers)")
    need(shutil.which("mmdebstrap") is not None or
         podman("image", "exists", IMAGE).returncode == 0,
         "mmdebstrap missing (run: make setup-containers)")
    p = subprocess.run(["bash", BUILD_IMAGE, IMAGE], capture_output=True,
                       text=True, timeout=1800, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    assert podman("image", "exists", IMAGE).returncode == 0
    return IMAGE


class Running:
    """The exporter's container started by run.sh with `caps`."""

    def __init__(self, caps, port, extra=()):
        self.port, self.name = port, "%s-%d" % (NAME, port)
        podman("rm", "-f", self.name)
        script = RUN_SH
        if tuple(caps) != CAPS:
            # run.sh with one capability less, the same command otherwise
            with open(RUN_SH) as f:
                text = f.read()
            text = text.replace("--cap-add=" + ",".join(CAPS),
                                "--cap-add=" + ",".join(caps))
            text = text.replace('"$HERE/seccomp.json"', '"%s"' % os.path.join(
                os.path.dirname(RUN_SH), "seccomp.json"))
            assert ",".join(caps) in text and "$HERE/" not in text
            fd, script = tempfile.mkstemp(prefix="run-", suffix=".sh")
            with os.fdopen(fd, "w") as f:
                f.write(text)
        env = dict(os.environ, NAME=self.name, IMAGE=IMAGE,
                   PODMAN_ARGS="-d", PODMAN_RUNTIME="runc")
        try:
            p = subprocess.run(
                ["bash", script, "--listen", "127.0.0.1:%d" % port,
                 "--refresh", "1", "--max-overhead", "0"] + list(extra),
                capture_output=True, text=True, timeout=120, env=env,
                stdin=subprocess.DEVNULL)
        finally:
            if script != RUN_SH:
                os.unlink(script)
        assert p.returncode == 0, p.stdout + p.stderr

    def logs(self):
        p = podman("logs", self.name)
        return p.stdout + p.stderr

    def inspect(self, fmt):
        return podman("inspect", "-f", fmt, self.name).stdout.strip()

    def running(self):
        return self.inspect("{{.State.Running}}") == "true"

    def stop(self):
        podman("stop", "-t", "20", self.name, timeout=60)
        podman("rm", "-f", self.name)


@pytest.fixture
def container(image):
    started = []

    def start(caps=CAPS):
        c = Running(caps, free_port())
        started.append(c)
        return c
    yield start
    for c in started:
        c.stop()


def test_traces_every_lab_osd_with_exactly_these_privileges(container):
    c = container()
    # what the container really holds
    assert c.inspect("{{.HostConfig.Privileged}}") == "false"
    eff = set(re.findall(r"CAP_\w+", c.inspect("{{.EffectiveCaps}}")))
    assert eff == set(CAPS), eff
    assert c.inspect("{{.HostConfig.PidMode}}") == "host"
    deadline = time.time() + START_S
    want = lab_osds()
    got = {}
    while time.time() < deadline:
        assert c.running(), c.logs()
        got = infos(scrape(c.port))
        if set(want) <= set(got):
            break
        time.sleep(1)
        want = lab_osds()
    assert set(want) <= set(got), (want, got, c.logs())
    for name, pid in want.items():
        assert int(got[name]["pid"]) == pid, (name, got[name], pid)
        assert got[name]["release"], got[name]
    # the probes run: a write load reaches every OSD (pool size 3)
    before = scrape(c.port)
    Bench(lab3_env(), "write", 6, threads=8).wait()
    time.sleep(3)                    # one refresh (1 s) and a margin
    after = scrape(c.port)

    def hits(m, name):
        return sum(v for (n, l), v in m.items()
                   if n == F.PROBE_HITS and
                   dict(l).get("ceph_daemon") == name)
    for name in want:
        assert hits(after, name) > hits(before, name), (name, c.logs())
    assert "Traceback" not in c.logs()


def lab3_env():
    env = lab_env()
    return {"CEPH_CONF": env["CEPH_CONF"]}


@pytest.mark.parametrize("missing", CAPS)
def test_one_capability_less_traces_nothing(container, missing):
    c = container(tuple(x for x in CAPS if x != missing))
    assert missing not in c.inspect("{{.EffectiveCaps}}")
    why = {"CAP_BPF": "cannot load BPF programs",
           "CAP_PERFMON": "cannot load BPF programs",
           "CAP_SYS_PTRACE": "permission denied"}[missing]
    deadline = time.time() + 20
    while time.time() < deadline and why not in c.logs():
        time.sleep(1)
    logs = c.logs()
    assert why in logs, logs
    assert c.running(), logs          # it keeps trying, never a traceback
    assert "Traceback" not in logs
    assert infos(scrape(c.port)) == {}, logs
