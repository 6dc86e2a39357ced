"""The lab with three OSDs (`make lab OSDS=3`) on this host, and once in
the Reef container lab (`make lab CEPH=reef OSDS=3`).

- three OSDs up and in, each BlueStore OSD on its own loop device over its
  own sparse file (seen in /proc/PID/fd and in `ceph osd metadata`);
- pool rbd size 3, min_size 2, failure domain osd; rbd/img1; OpTracker
  keeps a long history (osd op history size = 2000);
- 4 KiB writes replicate: op_w grows, subop_w grows on at least 2 OSDs;
- `make -s lab-env` prints OSD_PIDS / OSD_ASOKS of the three ceph-osd;
- `make lab` without OSDS= keeps the running count; a bad OSDS= is one
  line on stderr and changes nothing;
- `make lab OSDS=1` rebuilds it as a 1-OSD lab; `lab.sh down` leaves no
  ceph process and no loop device of ours.
"""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import LAB, assert_one_line_error, lab_env, lab_run, \
    perf_counters, trim
from test_zz_lab import make

LAB_DIR = "/var/tmp/osdstage-lab"


def ceph_json(info, *args):
    p = lab_run(info, "ceph", *args, "-f", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def loop_devs_of(pid):
    """The /dev/loopN block devices process `pid` has open."""
    out = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if re.fullmatch(r"/dev/loop\d+", link):
            out.add(link)
    return out


def losetup():
    """{device: backing file} of every loop device."""
    p = subprocess.run(["losetup", "-nO", "NAME,BACK-FILE"],
                       capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        dev, _, back = line.strip().partition(" ")
        out[dev] = back.strip()
    return out


def check_three_osds(info):
    """3 OSDs up and in, every PG active+clean, pool rbd size 3 / min 2,
    each ceph-osd on its own loop device (the one its metadata names)."""
    s = ceph_json(info, "-s")
    om = s["osdmap"].get("osdmap", s["osdmap"])
    assert (om["num_osds"], om["num_up_osds"], om["num_in_osds"]) == \
        (3, 3, 3), om
    assert [x["state_name"] for x in s["pgmap"]["pgs_by_state"]] == \
        ["active+clean"], s["pgmap"]
    assert ceph_json(info, "osd", "pool", "get", "rbd", "size")["size"] == 3
    assert ceph_json(info, "osd", "pool", "get", "rbd",
                     "min_size")["min_size"] == 2
    devs = []
    for osd_id, pid in enumerate(info["pids"]):
        cmdline = open("/proc/%d/cmdline" % pid).read().split("\0")
        assert open("/proc/%d/comm" % pid).read().strip() == "ceph-osd"
        assert cmdline[cmdline.index("-i") + 1] == str(osd_id), cmdline
        mine = loop_devs_of(pid)
        assert len(mine) == 1, (pid, mine)
        meta = ceph_json(info, "osd", "metadata", str(osd_id))
        assert meta["bluestore_bdev_dev_node"] in mine, (meta, mine)
        devs += mine
    assert len(set(devs)) == 3, devs
    return devs


def test_three_osds_each_on_its_own_loop_device(lab3):
    devs = check_three_osds(lab3)
    backs = losetup()
    files = [backs[d] for d in devs]
    assert files == [LAB_DIR + "/disk/osd-block.img",
                     LAB_DIR + "/disk/osd-block-1.img",
                     LAB_DIR + "/disk/osd-block-2.img"], files
    assert open(LAB_DIR + "/loopdev").read().split() == devs


def test_pool_crush_image_and_op_history(lab3):
    pool = [p for p in ceph_json(lab3, "osd", "pool", "ls", "detail")
            if p["pool_name"] == "rbd"][0]
    rule = ceph_json(lab3, "osd", "crush", "rule", "dump")
    rule = [r for r in rule if r["rule_id"] == pool["crush_rule"]][0]
    # failure domain osd: all three OSDs share this host
    assert [st.get("type") for st in rule["steps"]
            if st["op"].startswith("choose")] == ["osd"], rule
    assert lab_run(lab3, "rbd", "info", "rbd/img1").returncode == 0
    from cephlat.ceph.adminsock import command
    for asok in lab3["asoks"]:
        conf = command(asok, "config get", var="osd_op_history_size")
        assert conf["osd_op_history_size"] == "2000", conf
    conf = command(lab3["asoks"][2], "config get",
                   var="osd_op_history_duration")
    assert conf["osd_op_history_duration"] == "900", conf


def test_writes_replicate_to_the_other_osds(lab3):
    trim(lab3)
    before = [perf_counters(a)["osd"] for a in lab3["asoks"]]
    p = lab_run(lab3, "rados", "-p", "rbd", "bench", "3", "write", "-b",
                "4096", "-t", "8", "--no-cleanup")
    assert p.returncode == 0, p.stdout + p.stderr
    after = [perf_counters(a)["osd"] for a in lab3["asoks"]]
    op_w = [a["op_w"] - b["op_w"] for a, b in zip(after, before)]
    subop_w = [a["subop_w"] - b["subop_w"] for a, b in zip(after, before)]
    assert sum(op_w) > 0, op_w
    assert sum(1 for n in subop_w if n > 0) >= 2, subop_w
    # size 3: each client write is applied on two replicas
    assert sum(subop_w) >= 1.5 * sum(op_w), (op_w, subop_w)


def test_lab_env_and_make_lab_keep_three(lab3):
    p = make("lab-env")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    pids = ",".join(str(x) for x in lab3["pids"])
    assert lines == ["export CEPH_CONF=%s" % lab3["CEPH_CONF"],
                     "export OSD_PID=%d" % lab3["pids"][0],
                     "export OSD_PIDS=%s" % pids,
                     "export OSD_ASOKS=%s" % ",".join(lab3["asoks"]),
                     "export LAB_POOL=replicated"], lines
    for pid in lab3["pids"]:
        assert open("/proc/%d/comm" % pid).read().strip() == "ceph-osd"
    assert len(set(lab3["pids"])) == 3

    # without OSDS=: the running lab, untouched and quick
    t0 = time.time()
    p = make("lab")
    assert p.returncode == 0, p.stdout + p.stderr
    assert time.time() - t0 < 15
    assert lab_env()["OSD_PIDS"] == pids

    # bad counts: one line, nothing changed
    for bad in ("0", "x", "99"):
        p = make("lab", "OSDS=" + bad)
        assert_one_line_error(p, "OSDS='%s'" % bad)
        p = subprocess.run(["bash", LAB, "up"], capture_output=True,
                           text=True, env=dict(os.environ, LAB_OSDS=bad,
                                               CEPH="pacific"))
        assert_one_line_error(p, "OSDS='%s'" % bad, status=1)
    assert lab_env()["OSD_PIDS"] == pids

    # a pool the lab cannot make: one line, before anything is touched
    for bad, words in (("ec:2", "want replicated or ec:K+M"),
                       ("ec:1+1", "k must be at least 2"),
                       ("ec:3+1", "k+m=4 shards need as many osds; the "
                                  "lab has 3")):
        t0 = time.time()
        p = subprocess.run(["bash", LAB, "up"], capture_output=True,
                           text=True, env=dict(os.environ, LAB_OSDS="3",
                                               LAB_POOL=bad, CEPH="pacific"))
        assert_one_line_error(p, "LAB_POOL=%s: %s" % (bad, words), status=1)
        assert time.time() - t0 < 10, bad
    assert lab_env()["OSD_PIDS"] == pids
    assert lab_env()["LAB_POOL"] == "replicated"


@pytest.mark.lab_lifecycle
def test_switch_to_one_osd_and_down(lab3):
    pids = lab3["pids"]

    # OSDS=1 on a 3-OSD lab: rebuilt with one OSD, pool size 1
    p = make("lab", "OSDS=1", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    env = lab_env()
    assert env["OSD_PIDS"] == env["OSD_PID"]
    assert not any(os.path.exists("/proc/%d" % x) for x in pids)
    info = {"CEPH_CONF": env["CEPH_CONF"]}
    assert ceph_json(info, "osd", "pool", "get", "rbd", "size")["size"] == 1
    ours = {d: b for d, b in losetup().items() if LAB_DIR in b}
    assert list(ours.values()) == [LAB_DIR + "/disk/osd-block.img"], ours
    assert not os.path.exists(LAB_DIR + "/disk/osd-block-1.img")

    # down: no ceph process, no loop device of ours
    p = subprocess.run(["bash", LAB, "down"], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, CEPH="pacific"))
    assert p.returncode == 0, p.stderr
    ps = subprocess.run(["pgrep", "-af", LAB_DIR + "/"],
                        capture_output=True, text=True).stdout
    assert ps.strip() == "", ps
    assert not [b for b in losetup().values() if LAB_DIR + "/" in b]
    assert lab_env() is None
    assert not os.path.exists(LAB_DIR)


@pytest.mark.lab_lifecycle
def test_container_lab_three_osds(lab3_reef):
    info = lab3_reef
    top = "/var/tmp/osdstage-lab-reef"
    devs = check_three_osds(info)
    backs = losetup()
    assert [backs[d] for d in devs] == [
        top + "/disk/osd-block.img", top + "/disk/osd-block-1.img",
        top + "/disk/osd-block-2.img"]
    for pid, asok in zip(info["pids"], info["asoks"]):
        assert asok.startswith("/proc/%d/root/" % pid), asok
        assert "op_w" in perf_counters(asok)["osd"]
    assert lab_env() is None            # the host lab is down

    p = make("lab-down", "CEPH=reef")
    assert p.returncode == 0, p.stdout + p.stderr
    assert not [b for b in losetup().values() if top in b]
    assert not any(os.path.exists("/proc/%d" % x) for x in info["pids"])
    assert not os.path.exists(top)
