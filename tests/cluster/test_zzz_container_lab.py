"""The container labs' life cycle through the Makefile (`make lab CEPH=reef`,
`CEPH=tentacle`), one run per release; each runs last among its lab's tests
(marker lab_lifecycle) and leaves its lab down.

- the OSD is the release's own binary in its own mount, PID and UTS
  namespaces, seen from the host at a host PID (`make -s lab-env`);
- only this lab runs (starting it stopped the host lab and the other one);
- `make lab` on the running lab is quick and keeps the OSD;
- the cluster is healthy through the lab's exec helper, its admin socket
  answers from the host, `make workload` writes and reads, the host's
  Pacific client talks to it;
- LAB_OSD_OPTS restarts the OSD with those options;
- `make lab-down` leaves no container, process, mount or loop device.
"""
import glob
import json
import os
import re
import subprocess
import time

import pytest

from conftest import lab_env, lab_run
from test_zz_lab import make, tp_threads

pytestmark = pytest.mark.lab_lifecycle


def env_lines(release):
    p = make("lab-env", "CEPH=" + release)
    assert p.returncode == 0, p.stderr
    out = {}
    for line in p.stdout.splitlines():
        assert line.startswith("export "), line
        k, v = line[len("export "):].split("=", 1)
        out[k] = v
    return out


def ns(pid, kind):
    return os.readlink("/proc/%s/ns/%s" % (pid, kind))


def binary_has(path, needle):
    with open(path, "rb") as f:
        return needle.encode() in f.read()


def pids_in_ns(pidns):
    out = []
    for p in glob.glob("/proc/[0-9]*"):
        try:
            if os.readlink(p + "/ns/pid") == pidns:
                out.append(int(p[6:]))
        except OSError:
            pass
    return out


def podman(*args):
    return subprocess.run(["podman"] + list(args), capture_output=True,
                          text=True, timeout=60)


def test_container_lab_lifecycle(container_lab):
    info = container_lab
    release, pid = info["release"], info["pid"]
    top = "/var/tmp/osdstage-lab-" + release

    # the release's own ceph-osd, read through /proc/PID/root (never run)
    exe = "/proc/%d/root/usr/bin/ceph-osd" % pid
    assert binary_has(exe, info["version"]), exe
    assert os.stat(exe).st_ino != os.stat("/usr/bin/ceph-osd").st_ino or \
        os.stat(exe).st_dev != os.stat("/usr/bin/ceph-osd").st_dev
    # own mount, PID and UTS namespaces; the host's network
    for kind in ("mnt", "pid", "uts"):
        assert ns(pid, kind) != ns("self", kind), kind
    assert ns(pid, "net") == ns("self", "net")
    nspid = [l for l in open("/proc/%d/status" % pid)
             if l.startswith("NSpid:")][0].split()[1:]
    assert len(nspid) == 2 and int(nspid[0]) == pid and int(nspid[1]) != pid

    # make -s lab-env
    env = env_lines(release)
    assert list(env) == ["CEPH_CONF", "OSD_PID", "CEPH_RELEASE", "OSD_ASOK",
                         "LAB_EXEC", "LAB_CONTAINER", "OSD_PIDS", "OSD_ASOKS",
                         "LAB_POOL"]
    assert env["LAB_POOL"] == "replicated", env
    assert env["OSD_PID"] == str(pid) and env["CEPH_RELEASE"] == release
    assert env["OSD_PIDS"] == str(pid) and env["OSD_ASOKS"] == env["OSD_ASOK"]
    assert env["CEPH_CONF"] == info["CEPH_CONF"] == top + "/lab/ceph.conf"
    assert env["OSD_ASOK"].startswith("/proc/%d/root/" % pid)

    # one lab at a time: no host lab, no other container lab
    assert lab_env() is None
    running = podman("ps", "--filter", "label=osdstage.lab",
                     "--format", "{{.Names}}").stdout.split()
    assert running == ["osdstage-" + release], running

    # make lab on the running lab: quick, same OSD
    t0 = time.time()
    p = make("lab", "CEPH=" + release)
    assert p.returncode == 0, p.stdout + p.stderr
    assert time.time() - t0 < 20
    assert env_lines(release)["OSD_PID"] == str(pid)

    # healthy, through the lab's exec helper (Reef's mgr cannot load its
    # modules that import PyO3 extensions in subinterpreters: the only
    # warning accepted)
    p = lab_run(info, "ceph", "health", "detail", "-f", "json")
    assert p.returncode == 0, p.stderr
    health = json.loads(p.stdout)
    assert set(health["checks"]) <= {"MGR_MODULE_DEPENDENCY"}, health
    p = lab_run(info, "ceph", "-s", "-f", "json")
    s = json.loads(p.stdout)
    om = s["osdmap"].get("osdmap", s["osdmap"])
    assert om["num_up_osds"] == 1 and om["num_in_osds"] == 1
    assert [x["state_name"] for x in s["pgmap"]["pgs_by_state"]] == \
        ["active+clean"]
    from cephlat.ceph.adminsock import command, perf_dump
    assert command(info["asok"], "version")["version"].startswith(
        info["version"])
    assert "op_w" in perf_dump(info["asok"])["osd"]

    # make workload: rados bench writes, then reads, inside the container
    p = make("workload", "CEPH=" + release, "SECS=3", "THREADS=8",
             timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"Total writes made:\s+[1-9]", p.stdout), p.stdout
    assert re.search(r"Total reads made:\s+[1-9]", p.stdout), p.stdout
    # the host's (Pacific) client works against it too
    p = subprocess.run(["rados", "-p", "rbd", "bench", "2", "rand", "-t",
                        "4"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, CEPH_CONF=info["CEPH_CONF"]))
    assert p.returncode == 0 and "Total reads made" in p.stdout, p.stderr

    # LAB_OSD_OPTS restarts the OSD with them
    p = make("lab", "CEPH=" + release, env={
        "LAB_OSD_OPTS": "osd_op_num_shards=2 osd_op_num_threads_per_shard=4"})
    assert p.returncode == 0, p.stdout + p.stderr
    pid2 = int(env_lines(release)["OSD_PID"])
    assert pid2 != pid and tp_threads(pid2) == 8
    assert re.search(r"osd[_ ]op[_ ]num[_ ]shards\s*=\s*2",
                     open(info["CEPH_CONF"]).read())

    # down: nothing left behind
    cid = podman("inspect", "-f", "{{.Id}}", info["container"]).stdout.strip()
    pidns = ns(pid2, "pid")
    p = make("lab-down", "CEPH=" + release)
    assert p.returncode == 0, p.stdout + p.stderr
    assert podman("ps", "-a", "--filter", "name=^%s$" % info["container"],
                  "-q").stdout.strip() == ""
    assert not os.path.exists("/proc/%d" % pid2)
    assert pids_in_ns(pidns) == []
    ps = subprocess.run(["pgrep", "-af", "osdstage-lab-" + release],
                        capture_output=True, text=True).stdout
    assert ps.strip() == "", ps
    mounts = open("/proc/mounts").read()
    assert top not in mounts and cid not in mounts
    loops = subprocess.run(["losetup", "-a"], capture_output=True,
                           text=True).stdout
    assert top not in loops, loops
    assert not os.path.exists(top)
    p = make("lab-env", "CEPH=" + release)
    assert p.returncode != 0 and p.stdout == ""
