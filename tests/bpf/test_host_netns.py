"""--host-netns (osdstage.py, osdstage_exporter.py): a lab aid where a
network namespace stands for a host (one tracer per host). On
real processes named ceph-osd, one started inside a namespace made here
and one outside it:

- the host's OSDs are those in the namespace: find_ceph_osds, --list, the
  exporter's scan see the one inside only;
- bad input is one line: a namespace that does not exist, a -p process
  outside it, an --osd id not in it, --host-netns with -r.
"""
import json
import os
import shutil
import subprocess

import pytest

from cephlat.ceph.target import find_ceph_osds, netns_id, netns_of
from cephlat.exporter.osds import OsdScan
from conftest import OSDSTAGE, assert_one_line_error, need, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def sleeper(cxx):
    return cxx(os.path.join(HERE, "progs", "sleeper.cc"), "sleeper")


@pytest.fixture
def netns():
    need(os.geteuid() == 0, "needs root")
    need(shutil.which("ip") is not None, "iproute2 (ip) not installed")
    name = "osdstage-t%d" % os.getpid()
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name])


@pytest.fixture
def osds(sleeper, tmp_path, spawn, netns):
    """(pid inside the namespace, pid outside), both named ceph-osd."""
    exe = str(tmp_path / "ceph-osd")
    shutil.copy(sleeper, exe)
    inside = spawn(["ip", "netns", "exec", netns, exe, "1000", "1"],
                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL).pid
    outside = spawn([exe, "1000", "1"], stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL).pid
    # ip netns exec runs the program in its own process (exec)
    for _ in range(50):
        try:
            with open("/proc/%d/comm" % inside) as f:
                if f.read().strip() == "ceph-osd":
                    break
        except OSError:
            pass
        subprocess.run(["sleep", "0.1"])
    return inside, outside


def test_the_host_is_the_namespace(osds, netns):
    inside, outside = osds
    ns = netns_id(netns)
    assert netns_of(inside) == ns != netns_of(outside)
    assert [p for p, _ in find_ceph_osds(ns)] == [inside]
    everywhere = [p for p, _ in find_ceph_osds()]
    assert inside in everywhere and outside in everywhere
    assert [p for p, _ in OsdScan(ns).osds()] == [inside]


def test_list_shows_the_namespaces_osds_only(osds, netns, bpf_ready):
    inside, _ = osds
    p = run_tool([OSDSTAGE, "--list", "--json", "--host-netns", netns])
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["osds"]
    assert [r["pid"] for r in rows] == [inside], rows


def test_bad_host_netns_is_one_line(osds, netns, bpf_ready):
    inside, outside = osds
    p = run_tool([OSDSTAGE, "--host-netns", "osdstage-nosuch", "--osd", "all",
                  "1", "1"])
    assert_one_line_error(p, "no network namespace osdstage-nosuch")
    p = run_tool([OSDSTAGE, "--host-netns", netns, "-p", str(outside), "1",
                  "1"])
    assert_one_line_error(p, "pid %d is not in network namespace %s" % (
        outside, netns))
    p = run_tool([OSDSTAGE, "--host-netns", netns, "--osd", "77", "1", "1"])
    assert_one_line_error(p, "no running ceph-osd with id 77 in network "
                          "namespace %s" % netns)
    p = run_tool([OSDSTAGE, "--host-netns", netns, "-r", "/tmp"])
    assert_one_line_error(p, "--host-netns", "not with -r")
