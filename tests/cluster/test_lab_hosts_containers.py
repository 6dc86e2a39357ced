"""The multi-host lab on the container labs (`make lab CEPH=reef|tentacle
HOSTS=3 LAB_NET_DELAY=1ms`, the same CEPH= as the one-host labs): the
network (namespaces, the wire) made by container.sh on the host,
/run/netns shared into the container, each OSD started there in its
host's namespace. One tracer per host, on the host (`--host-netns`), as
on real hosts; once per release:

- each OSD runs in its host's namespace, CRUSH has the three hosts,
  pool rbd size 3;
- `osdstage.py --host-netns osdlab-hK --osd all`, one per host at once,
  traces that host's OSD only: under writes from the client's namespace
  its writes as primary (op_w) waited on both other hosts' OSDs, each
  wait at least the two 1-ms links (out and back), its replica ops are
  Ceph's subop_w;
- end to end with a client of the release's own librbd (python3-rbd in the
  container, in the client's namespace) under rbdrecord: the captures of
  the three hosts and its trace merge, every op joined, each network
  segment over a delayed link, a write's story on the three hosts;
- `lab.sh net-delay h3 6ms` (CEPH=reef) slows the third host's link:
  the first host's verdict names osd.2 as the slow replica;
- a bad HOSTS=, LAB_NET_DELAY= or HOSTS= with OSDS= is one line on
  stderr and leaves the running lab alone (these two on Reef only:
  nothing in them is the release's);
- `make lab-down CEPH=<release>` leaves no namespace and no wire.

These run last among each release's 3-OSD tests (lab_lifecycle): the
single-host 3-OSD lab is rebuilt as this one."""
import json
import os
import signal
import subprocess

import pytest

from conftest import (CONTAINER_LAB, LAB, OSDSTAGE, PYTHON,
                      assert_lab_network_gone, assert_one_line_error,
                      container_lab_env, container_process, lat_mean_us,
                      perf_counters, wait_for_line)

RBDRECORD = os.path.join(os.path.dirname(OSDSTAGE), "rbdrecord.py")
DELAY_US = 1000
SLOW_US = 6000
pytestmark = pytest.mark.lab_lifecycle


@pytest.fixture(scope="module", params=["reef", "tentacle"])
def lab3(request):
    """The release's 3-OSD container lab (lab3_<release>), which the
    hosts lab replaces: named lab3 so that these tests run with that
    release's 3-OSD ones (conftest's order)."""
    return request.getfixturevalue("lab3_" + request.param)


@pytest.fixture(scope="module")
def hosts(lab3):
    release = lab3["release"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("LAB_OSDS", "LAB_POOL", "LAB_OSDS_PER_HOST")}
    env.update(LAB_HOSTS="3", LAB_NET_DELAY="1ms")
    p = subprocess.run(["bash", CONTAINER_LAB, release, "up"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    info = container_lab_env(release)
    info["release"] = release
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


def _traced_hosts(lab, namespaces):
    """osdstage --host-netns NS --osd all -j, one per namespace at once,
    around 4 KiB writes from the client's namespace -> ([each one's
    record], [(before, after) perf dumps of each OSD])."""
    ts = [subprocess.Popen([PYTHON, OSDSTAGE, "--host-netns", ns, "--osd",
                            "all", "-j"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
          for ns in namespaces]
    try:
        for t in ts:
            wait_for_line(t.stderr, "Tracing", 60)
        before = [perf_counters(a) for a in lab["asoks"]]
        _in_client(lab, "rados", "-p", "rbd", "bench", "3", "write", "-b",
                   "4096", "-t", "8", "--no-cleanup")
        after = [perf_counters(a) for a in lab["asoks"]]
    finally:
        for t in ts:
            t.send_signal(signal.SIGINT)
        outs = [t.communicate(timeout=60) for t in ts]
    for t, (_, err) in zip(ts, outs):
        assert t.returncode == 0, err
    return [json.loads(out.splitlines()[0]) for out, _ in outs], \
        list(zip(before, after))


def test_each_osd_on_its_host(hosts):
    from cephlat.ceph.target import netns_id, netns_of
    assert hosts["netns"] == ["osdlab-h1", "osdlab-h2", "osdlab-h3"]
    assert hosts["CLIENT_NETNS"] == "osdlab-client"
    for pid, ns in zip(hosts["pids"], hosts["netns"]):
        assert netns_of(pid) == netns_id(ns), (pid, ns)
        # and the OSD is the release's, from the container's root
        exe = os.readlink("/proc/%d/exe" % pid)
        assert exe == "/usr/bin/ceph-osd", exe
        mine = os.stat("/proc/%d/root/usr/bin/ceph-osd" % pid)
        host = os.stat("/usr/bin/ceph-osd")
        assert (mine.st_dev, mine.st_ino) != (host.st_dev, host.st_ino)
    tree = json.loads(subprocess.run(
        ["ceph", "osd", "tree", "-f", "json"], capture_output=True,
        text=True, timeout=60, check=True,
        env=dict(os.environ, CEPH_CONF=hosts["CEPH_CONF"])).stdout)
    crush = {n["name"]: n["children"] for n in tree["nodes"]
             if n["type"] == "host"}
    assert sorted(crush) == hosts["netns"], crush
    assert all(len(c) == 1 for c in crush.values()), crush


def test_one_tracer_per_host(hosts):
    """A tracer on each host at once, each seeing its own OSD only."""
    recs, dumps = _traced_hosts(hosts, hosts["netns"])
    for host, (rec, ns) in enumerate(zip(recs, hosts["netns"])):
        # one OSD: a single record, that host's
        assert rec["pid"] == hosts["pids"][host], (rec["pid"], ns)
        b, a = (d["osd"] for d in dumps[host])
        writes = a["op_w"] - b["op_w"]
        st = rec["stages"]
        assert writes > 0
        assert st["replica_wait"]["count"] == writes, (
            ns, writes, st["replica_wait"])
        assert st["repop"]["count"] == a["subop_w"] - b["subop_w"], ns
        peers = st["replica_wait"]["by_peer"]
        others = ["osd.%d" % i for i in range(3) if i != host]
        assert sorted(peers) == others, (ns, peers)
        for p in peers.values():
            assert p["count"] == writes, (ns, peers)
            # the sub-op out over the primary's link, the reply back over
            # the replica's: two link delays at least
            assert p["p50_us"] >= 2 * DELAY_US, (ns, peers)


# on Reef only: the slowed link is the host's wire and the verdict is the
# tool's, whatever the release (Tentacle's replica waits per peer are
# checked in test_one_tracer_per_host)
@pytest.mark.parametrize("lab3", ["reef"], indirect=True)
def test_a_slowed_hosts_osd_is_named(hosts):
    def delay(us):
        p = subprocess.run(["bash", LAB, "net-delay", "h3", "%dus" % us],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, CEPH=hosts["release"]))
        assert p.returncode == 0, p.stderr
    delay(SLOW_US)
    try:
        (rec,), dumps = _traced_hosts(hosts, ["osdlab-h1"])
    finally:
        delay(DELAY_US)
    peers = rec["stages"]["replica_wait"]["by_peer"]
    # out over h1's 1-ms link, back over h3's slowed one: every wait
    assert peers["osd.2"]["p50_us"] >= DELAY_US + SLOW_US, peers
    assert peers["osd.2"]["last_pct"] >= 70, peers
    # A wait holds the replica's own time too (Ceph's subop_w_latency,
    # receipt to commit: 2-2.6 ms a write here, more on a slower lab),
    # which can take the other peer's p50 past the slowed link's
    # delay; what is left of each, the wire and the primary's side, is
    # at least that peer's two links and larger for the slowed one.
    wire = {}
    for peer, links in (("osd.1", 2 * DELAY_US),
                        ("osd.2", DELAY_US + SLOW_US)):
        b, a = dumps[int(peer[4:])]
        own, n = lat_mean_us(b, a, "osd", "subop_w_latency")
        assert n > 0, peer
        wire[peer] = peers[peer]["mean_us"] - own
        assert wire[peer] >= links, (peer, own, peers)
    assert wire["osd.2"] > wire["osd.1"], (wire, peers)
    assert rec.get("slow_osd") == "osd.2", (rec.get("verdict"),
                                            rec.get("slow_osd"))


# A librbd client of the release's own library, through its C API (the
# calls rbdrecord probes; the container has no fio): python3-rbd's
# aio_write, DEPTH in flight for SECS, after WAIT s to be attached to.
CLIENT = r"""
import random, sys, threading, time
import rados, rbd
secs, depth, wait = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
c = rados.Rados(conffile="/etc/ceph/ceph.conf")
c.connect()
io = c.open_ioctx("rbd")
img = rbd.Image(io, "img1")
time.sleep(wait)
sem, buf = threading.Semaphore(depth), b"x" * 4096
end = time.monotonic() + secs
while time.monotonic() < end:
    sem.acquire()
    img.aio_write(buf, random.randrange(0, 64 << 20, 4096),
                  lambda comp: sem.release())
for _ in range(depth):
    sem.acquire()
img.close()
io.close()
c.shutdown()
"""


def test_end_to_end_with_the_releases_client(hosts, tmp_path):
    """One tracer per host writing a capture, rbdrecord on the release's
    librbd client in the client's namespace (inside the container), merged: every
    client op joined with its primary, each network segment over a 1-ms
    link, the segments adding up; a write's --op story spans the client
    and the three hosts."""
    p = subprocess.run(["bash", CONTAINER_LAB, hosts["release"],
                        "client-debug"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    caps = [str(tmp_path / ("h%d.ctf" % k)) for k in range(1, 4)]
    tracers = [subprocess.Popen([PYTHON, OSDSTAGE, "--host-netns", ns,
                                 "--osd", "all", "-w", cap],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
               for ns, cap in zip(hosts["netns"], caps)]
    trace = str(tmp_path / "client")
    try:
        for t in tracers:
            wait_for_line(t.stderr, "Tracing", 60)
        client = subprocess.Popen(
            ["podman", "exec", hosts["LAB_CONTAINER"], "nsenter",
             "--net=/run/netns/" + hosts["CLIENT_NETNS"], "python3",
             "-c", CLIENT, "4", "8", "3"], stderr=subprocess.PIPE, text=True)
        rec = subprocess.run([PYTHON, RBDRECORD, "-p",
                              str(container_process(hosts["pids"][0],
                                                    "python3", client)), "-o",
                              trace, "--force"], capture_output=True,
                             text=True, timeout=120)
        assert client.wait(timeout=60) == 0, client.stderr.read()
    finally:
        for t in tracers:
            t.send_signal(signal.SIGINT)
            t.communicate(timeout=60)
    assert rec.returncode == 0 and "not recorded" not in rec.stderr, \
        rec.stderr
    p = subprocess.run([PYTHON, OSDSTAGE, "-r"] + caps + [trace, "-j"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["client_ops"] >= 500 and res["joined"] == res["client_ops"], \
        {k: res[k] for k in ("client_ops", "joined", "unfinished")}
    t = res["kinds"]["write"]
    assert t["unknown"] == 0, t
    by = {g["segment"]: g for g in t["segments"]}
    # each crosses one delayed link: the client's, then the primary's
    assert by["to_osd"]["p50_us"] >= DELAY_US, by["to_osd"]
    assert by["to_client"]["p50_us"] >= DELAY_US, by["to_client"]
    assert abs(sum(g["mean_us"] for k, g in by.items() if k != "total") -
               by["total"]["mean_us"]) <= 1.0, by
    # the slowest write's story: the client, its primary, both replicas
    p = subprocess.run([PYTHON, OSDSTAGE, "-r"] + caps + [
        trace, "--slowest", "1", "-j"], capture_output=True, text=True,
        timeout=300)
    assert p.returncode == 0, p.stderr
    reqid = json.loads(p.stdout)["slowest"][0]["reqid"]
    p = subprocess.run([PYTHON, OSDSTAGE, "-r"] + caps + [
        trace, "--op", reqid, "-j"], capture_output=True, text=True,
        timeout=300)
    assert p.returncode == 0, p.stderr
    story = json.loads(p.stdout)
    assert sorted(story["osds"]) == ["osd.0", "osd.1", "osd.2"], story
    assert len(story["replicas"]) == 2, story["replicas"]
    for r in story["replicas"]:
        assert r["out_us"] >= DELAY_US and r["back_us"] >= DELAY_US, r
    assert story["client"]["total_us"] > 0, story["client"]


# on Reef only: container.sh refuses these before anything of a release
@pytest.mark.parametrize("lab3", ["reef"], indirect=True)
@pytest.mark.parametrize("var,value,fragment", [
    ("LAB_HOSTS", "7", "HOSTS='7'"),
    ("LAB_NET_DELAY", "fast", "LAB_NET_DELAY='fast'"),
    ("LAB_OSDS", "3", "HOSTS and OSDS together"),
])
def test_bad_settings_one_line(hosts, var, value, fragment):
    env = dict(os.environ, LAB_HOSTS="3")
    env[var] = value
    p = subprocess.run(["bash", CONTAINER_LAB, hosts["release"], "up"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert_one_line_error(p, fragment)
    # the running lab is untouched
    assert container_lab_env(hosts["release"])["OSD_PIDS"] == \
        hosts["OSD_PIDS"]


def test_down_leaves_no_namespace_and_no_wire(hosts):
    p = subprocess.run(["bash", CONTAINER_LAB, hosts["release"], "down"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert_lab_network_gone()
    assert not os.path.exists("/var/tmp/osdstage-lab-" + hosts["release"])
