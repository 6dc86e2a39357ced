"""The multi-host lab on Reef's container lab (`make lab CEPH=reef HOSTS=3
LAB_NET_DELAY=1ms`, issue 26 item 1 "with CEPH= as today"): the network
(namespaces, the wire) made by container.sh on the host, /run/netns
shared into the container, each OSD started there in its host's
namespace. One tracer per host, on the host (`--host-netns`), as on real
hosts:

- each OSD runs in its host's namespace, CRUSH has the three hosts,
  pool rbd size 3;
- `osdstage.py --host-netns osdlab-hK --osd all` traces that host's OSD
  only: under writes from the client's namespace its writes as primary
  (op_w) waited on both other hosts' OSDs, each wait at least the two
  1-ms links (out and back), its replica ops are Ceph's subop_w;
- `lab.sh net-delay h3 6ms` (CEPH=reef) slows the third host's link:
  the first host's verdict names osd.2 as the slow replica;
- a bad HOSTS=, LAB_NET_DELAY= or HOSTS= with OSDS= is one line on
  stderr and leaves the running lab alone;
- `make lab-down CEPH=reef` leaves no namespace and no wire.

These run last among Reef's 3-OSD tests (lab_lifecycle): the single-host
3-OSD lab is rebuilt as this one."""
import json
import os
import signal
import subprocess

import pytest

from conftest import (CONTAINER_LAB, LAB, OSDSTAGE, PYTHON,
                      assert_one_line_error, container_lab_env,
                      perf_counters, wait_for_line)

DELAY_US = 1000
SLOW_US = 6000
pytestmark = pytest.mark.lab_lifecycle


@pytest.fixture(scope="module")
def reef_hosts(lab3_reef):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LAB_OSDS", "LAB_POOL", "LAB_OSDS_PER_HOST")}
    env.update(LAB_HOSTS="3", LAB_NET_DELAY="1ms")
    p = subprocess.run(["bash", CONTAINER_LAB, "reef", "up"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    info = container_lab_env("reef")
    info["pids"] = [int(x) for x in info["OSD_PIDS"].split(",")]
    info["asoks"] = info["OSD_ASOKS"].split(",")
    info["netns"] = info["OSD_NETNS"].split(",")
    return info


def _in_client(lab, *args):
    p = subprocess.run(["nsenter", "--net=/run/netns/" + lab["CLIENT_NETNS"],
                        "--"] + list(args), capture_output=True, text=True,
                       timeout=120,
                       env=dict(os.environ, CEPH_CONF=lab["CEPH_CONF"]))
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def _traced_host(lab, ns):
    """osdstage --host-netns NS --osd all -j around 4 KiB writes from the
    client's namespace -> (its record, {asok: (before, after)})."""
    t = subprocess.Popen([PYTHON, OSDSTAGE, "--host-netns", ns, "--osd",
                          "all", "-j"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for_line(t.stderr, "Tracing", 60)
        before = [perf_counters(a)["osd"] for a in lab["asoks"]]
        _in_client(lab, "rados", "-p", "rbd", "bench", "3", "write", "-b",
                   "4096", "-t", "8", "--no-cleanup")
        after = [perf_counters(a)["osd"] for a in lab["asoks"]]
    finally:
        t.send_signal(signal.SIGINT)
        out, err = t.communicate(timeout=60)
    assert t.returncode == 0, err
    return json.loads(out.splitlines()[0]), list(zip(before, after))


def test_each_osd_on_its_host(reef_hosts):
    from cephlat.ceph.target import netns_id, netns_of
    assert reef_hosts["netns"] == ["osdlab-h1", "osdlab-h2", "osdlab-h3"]
    assert reef_hosts["CLIENT_NETNS"] == "osdlab-client"
    for pid, ns in zip(reef_hosts["pids"], reef_hosts["netns"]):
        assert netns_of(pid) == netns_id(ns), (pid, ns)
        # and the OSD is Reef's, from the container's root
        exe = os.readlink("/proc/%d/exe" % pid)
        assert exe == "/usr/bin/ceph-osd", exe
    tree = json.loads(subprocess.run(
        ["ceph", "osd", "tree", "-f", "json"], capture_output=True,
        text=True, timeout=60, check=True,
        env=dict(os.environ, CEPH_CONF=reef_hosts["CEPH_CONF"])).stdout)
    hosts = {n["name"]: n["children"] for n in tree["nodes"]
             if n["type"] == "host"}
    assert sorted(hosts) == reef_hosts["netns"], hosts
    assert all(len(c) == 1 for c in hosts.values()), hosts


@pytest.mark.parametrize("host", range(3))
def test_one_tracer_per_host(reef_hosts, host):
    ns = reef_hosts["netns"][host]
    rec, dumps = _traced_host(reef_hosts, ns)
    # one OSD: a single record, that host's
    assert rec["pid"] == reef_hosts["pids"][host], (rec["pid"], ns)
    b, a = dumps[host]
    writes = a["op_w"] - b["op_w"]
    st = rec["stages"]
    assert writes > 0
    assert st["replica_wait"]["count"] == writes, (writes, st["replica_wait"])
    assert st["repop"]["count"] == a["subop_w"] - b["subop_w"]
    peers = st["replica_wait"]["by_peer"]
    others = ["osd.%d" % i for i in range(3) if i != host]
    assert sorted(peers) == others, peers
    for p in peers.values():
        assert p["count"] == writes, peers
        # the sub-op out over the primary's link, the reply back over the
        # replica's: two link delays at least
        assert p["p50_us"] >= 2 * DELAY_US, peers


def test_a_slowed_hosts_osd_is_named(reef_hosts):
    def delay(us):
        p = subprocess.run(["bash", LAB, "net-delay", "h3", "%dus" % us],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, CEPH="reef"))
        assert p.returncode == 0, p.stderr
    delay(SLOW_US)
    try:
        rec, _ = _traced_host(reef_hosts, "osdlab-h1")
    finally:
        delay(DELAY_US)
    peers = rec["stages"]["replica_wait"]["by_peer"]
    # out over h1's 1-ms link, back over h3's slowed one
    assert peers["osd.2"]["p50_us"] >= DELAY_US + SLOW_US > \
        peers["osd.1"]["p50_us"], peers
    assert rec.get("slow_osd") == "osd.2", (rec.get("verdict"),
                                            rec.get("slow_osd"))


@pytest.mark.parametrize("var,value,fragment", [
    ("LAB_HOSTS", "7", "HOSTS='7'"),
    ("LAB_NET_DELAY", "fast", "LAB_NET_DELAY='fast'"),
    ("LAB_OSDS", "3", "HOSTS and OSDS together"),
])
def test_bad_settings_one_line(reef_hosts, var, value, fragment):
    env = dict(os.environ, LAB_HOSTS="3")
    env[var] = value
    p = subprocess.run(["bash", CONTAINER_LAB, "reef", "up"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert_one_line_error(p, fragment)
    # the running lab is untouched
    assert container_lab_env("reef")["OSD_PIDS"] == reef_hosts["OSD_PIDS"]


def test_down_leaves_no_namespace_and_no_wire(reef_hosts):
    p = subprocess.run(["bash", CONTAINER_LAB, "reef", "down"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True,
                        text=True).stdout
    assert "osdlab-" not in ns, ns
    assert subprocess.run(["pgrep", "-x", "labwire"]).returncode == 1
    assert not os.path.exists("/var/tmp/osdstage-lab-reef")
