"""The lab's own life cycle through the Makefile (runs last in the cluster
tier: it stops and restarts the lab, and leaves it up).

- `make lab` on a running lab is harmless and quick (same OSD process);
- `make -s lab-env` prints the two export lines;
- osdstage survives the OSD going away: it prints what it collected and
  exits 0;
- `make lab-down` leaves no lab process, no loop device and no mount;
- `make lab` builds it again in under 60 s;
- `make lab LAB_OSD_OPTS=...` restarts the OSD with those options.
"""
import glob
import json
import os
import re
import subprocess
import time

from conftest import OSDSTAGE, PYTHON, REPO, lab_env, wait_for_line


def make(*args, env=None, timeout=300):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(["make", "-s", "-C", REPO] + list(args),
                          capture_output=True, text=True, timeout=timeout,
                          env=e)


def tp_threads(pid):
    n = 0
    for comm in glob.glob("/proc/%d/task/*/comm" % pid):
        try:
            if open(comm).read().strip() == "tp_osd_tp":
                n += 1
        except OSError:
            pass
    return n


def lab_pids():
    out = []
    for pf in glob.glob("/var/tmp/osdstage-lab/run/*.pid"):
        try:
            out.append(int(open(pf).read().strip()))
        except (OSError, ValueError):
            pass
    return out


def test_lab_lifecycle(lab):
    pid = lab["pid"]
    t0 = time.time()
    p = make("lab")
    assert p.returncode == 0, p.stderr
    assert time.time() - t0 < 10
    env = lab_env()
    assert int(env["OSD_PID"]) == pid           # left running, untouched

    p = make("lab-env")
    lines = p.stdout.strip().splitlines()
    assert lines == ["export CEPH_CONF=%s" % env["CEPH_CONF"],
                     "export OSD_PID=%d" % pid,
                     "export OSD_PIDS=%d" % pid,
                     "export OSD_ASOKS=%s" % env["OSD_ASOKS"],
                     "export LAB_POOL=replicated"]
    assert env["OSD_ASOKS"].endswith("/run/ceph-osd.0.asok")

    # the OSD goes away under a running osdstage
    tr = subprocess.Popen([PYTHON, OSDSTAGE, "-p", str(pid), "-j", "-S",
                           "do_op"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    wait_for_line(tr.stderr, "Tracing", 30)
    loops = subprocess.run(["losetup", "-a"], capture_output=True,
                           text=True).stdout
    assert "/var/tmp/osdstage-lab" in loops
    p = make("lab-down")
    assert p.returncode == 0, p.stderr
    out, err = tr.communicate(timeout=30)
    assert tr.returncode == 0, err
    assert "ceph-osd %d exited; detached." % pid in err
    assert "Traceback" not in err
    assert json.loads(out)["type"] == "interval"

    # nothing left behind
    assert not any(os.path.exists("/proc/%d" % p) for p in [pid] + lab_pids())
    ps = subprocess.run(["pgrep", "-af", "osdstage-lab"], capture_output=True,
                        text=True).stdout
    assert ps.strip() == "", ps
    loops = subprocess.run(["losetup", "-a"], capture_output=True,
                           text=True).stdout
    assert "osdstage-lab" not in loops, loops
    mounts = open("/proc/mounts").read()
    assert "osdstage-lab" not in mounts
    assert lab_env() is None
    p = make("lab-env")
    assert p.returncode != 0 and p.stdout == ""

    # up again, from scratch, in under 60 s
    t0 = time.time()
    p = make("lab")
    assert p.returncode == 0, p.stdout + p.stderr
    assert time.time() - t0 < 60
    pid = int(lab_env()["OSD_PID"])
    assert tp_threads(pid) == 5               # hdd defaults: 5 shards x 1

    # extra OSD options restart the OSD with them
    p = make("lab", env={"LAB_OSD_OPTS": "osd_op_num_shards=2 "
                                         "osd_op_num_threads_per_shard=4"})
    assert p.returncode == 0, p.stdout + p.stderr
    pid2 = int(lab_env()["OSD_PID"])
    assert pid2 != pid and tp_threads(pid2) == 8
    conf = open(lab_env()["CEPH_CONF"]).read()
    assert re.search(r"osd[_ ]op[_ ]num[_ ]shards\s*=\s*2", conf)

    # and back to the defaults
    p = make("lab")
    assert p.returncode == 0, p.stdout + p.stderr
    pid3 = int(lab_env()["OSD_PID"])
    assert pid3 != pid2 and tp_threads(pid3) == 5
