"""The multi-host lab (`make lab HOSTS=3 LAB_NET_DELAY=1ms`), on this
machine's Ceph:

- three hosts: each OSD runs in its own network namespace (osdlab-h1..3),
  and the osdmap gives it that host's address on the lab's subnet, public
  and cluster;
- CRUSH: three host buckets of one OSD each; pool rbd size 3; every PG's
  acting set spans the three hosts;
- the wire's link delays are real: the TCP round trip between the
  client's namespace and a host grows by two link delays (the client's
  link out, the host's back) when the delay goes from 0 to 1 ms, within
  20 %; `lab.sh net-delay h2 3ms` slows the second host's link only;
- 4 KiB writes from the client's namespace replicate across the hosts
  (op_w on primaries, subop_w on the others);
- `osdstage.py --host-netns osdlab-h2 --list` sees only that host's OSD;
- `make lab` without HOSTS= keeps it as it is; a bad HOSTS=,
  OSDS_PER_HOST= or LAB_NET_DELAY= is one line on stderr; `lab.sh down`
  leaves no namespace of the lab and no wire.
"""
import json
import os
import statistics
import subprocess

import pytest

from conftest import LAB, OSDSTAGE, assert_lab_network_gone, \
    assert_one_line_error, perf_counters, run_tool, wire_counters

ECHO = r"""
import socket, sys, time
mode, addr = sys.argv[1], sys.argv[2]
if mode == "serve":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 7777)); s.listen(1); print("ready", flush=True)
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        d = c.recv(64)
        if not d:
            break
        c.sendall(d)
else:
    c = socket.create_connection((addr, 7777))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(int(sys.argv[3])):
        t = time.perf_counter_ns(); c.sendall(b"x"); c.recv(64)
        print((time.perf_counter_ns() - t) // 1000)
"""
ROUNDS = 41


def in_ns(ns, *argv, **kw):
    return subprocess.run(["nsenter", "--net=/run/netns/" + ns, "--"] +
                          list(argv), capture_output=True, text=True,
                          timeout=120, **kw)


def rtt_us(client_ns, host_ns, host_ip):
    """(median TCP round trip, the wire's mean lateness a round trip) in us,
    of ROUNDS one-byte exchanges from client_ns to an echo server in
    host_ns: the lateness is what the wire's wake-ups added beyond the link
    delays (the mean per packet on each of the two links, summed)."""
    before = wire_counters()
    srv = subprocess.Popen(["nsenter", "--net=/run/netns/" + host_ns, "--",
                            "/usr/bin/python3", "-c", ECHO, "serve",
                            host_ip], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        p = in_ns(client_ns, "/usr/bin/python3", "-c", ECHO, "c", host_ip,
                  str(ROUNDS))
        assert p.returncode == 0, p.stderr
        rtt = statistics.median(int(x) for x in p.stdout.split())
    finally:
        srv.kill()
        srv.wait()
    after = wire_counters()
    late = 0.0
    for ns in (client_ns, host_ns):
        n = after[ns]["forwarded"] - before[ns]["forwarded"]
        assert n >= ROUNDS, (ns, n)
        late += (after[ns]["late_sum_us"] - before[ns]["late_sum_us"]) / n
    return rtt, late


def lab(*args, env=None):
    return subprocess.run(["bash", LAB] + list(args), capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, **(env or {})))


def ceph_json(info, *args):
    p = subprocess.run(["ceph", *args, "-f", "json"], capture_output=True,
                       text=True, timeout=60,
                       env=dict(os.environ, CEPH_CONF=info["CEPH_CONF"]))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def host_ip(ns):
    return "10.77.0.1" + ns[len("osdlab-h"):]


def test_each_osd_on_its_host(lab_hosts):
    from cephlat.ceph.target import netns_id, netns_of
    assert lab_hosts["netns"] == ["osdlab-h1", "osdlab-h2", "osdlab-h3"]
    dump = ceph_json(lab_hosts, "osd", "dump")
    for osd_id, (pid, ns) in enumerate(zip(lab_hosts["pids"],
                                           lab_hosts["netns"])):
        assert netns_of(pid) == netns_id(ns)
        o = next(o for o in dump["osds"] if o["osd"] == osd_id)
        assert o["up"] == 1 and o["in"] == 1
        for kind in ("public_addr", "cluster_addr"):
            assert o[kind].startswith(host_ip(ns) + ":"), (kind, o)
    # the client's namespace and the mon host (this namespace) are others
    assert netns_id(lab_hosts["client_netns"]) not in {
        netns_of(p) for p in lab_hosts["pids"]}


def test_crush_hosts_and_pgs_span_them(lab_hosts):
    tree = ceph_json(lab_hosts, "osd", "tree")
    hosts = {n["name"]: n["children"] for n in tree["nodes"]
             if n["type"] == "host"}
    assert sorted(hosts) == lab_hosts["netns"]
    assert sorted(len(c) for c in hosts.values()) == [1, 1, 1]
    host_of = {c: h for h, cs in hosts.items() for c in cs}
    pool = next(p for p in ceph_json(lab_hosts, "osd", "pool", "ls",
                                     "detail") if p["pool_name"] == "rbd")
    assert pool["size"] == 3
    pgs = ceph_json(lab_hosts, "pg", "ls-by-pool", "rbd")
    pgs = pgs["pg_stats"] if isinstance(pgs, dict) else pgs
    assert pgs
    for pg in pgs:
        assert len({host_of[o] for o in pg["acting"]}) == 3, pg


def test_link_delay_is_real(lab_hosts):
    client = lab_hosts["client_netns"]
    try:
        assert lab("net-delay", "all", "0").returncode == 0
        base, _ = rtt_us(client, "osdlab-h1", host_ip("osdlab-h1"))
        assert lab("net-delay", "all", "1ms").returncode == 0
        one = rtt_us(client, "osdlab-h1", host_ip("osdlab-h1"))
        p = lab("net-delay", "h2", "3ms")
        assert p.returncode == 0, p.stderr
        slow = rtt_us(client, "osdlab-h2", host_ip("osdlab-h2"))
        other = rtt_us(client, "osdlab-h3", host_ip("osdlab-h3"))
    finally:
        lab("net-delay", "all", "1ms")
    # a round trip's link delays (the client's link out, the host's back),
    # within 20 %, plus what the wire's own wake-ups added (it measures
    # them: a slower machine wakes it later, never earlier)
    for (rtt, late), delays in ((one, 2000), (slow, 4000), (other, 2000)):
        assert 0.8 * delays <= rtt - base <= 1.2 * delays + late, (
            base, rtt, late, delays)


def test_client_writes_replicate_across_hosts(lab_hosts):
    before = [perf_counters(a)["osd"] for a in lab_hosts["asoks"]]
    p = in_ns(lab_hosts["client_netns"], "rados", "-p", "rbd", "bench", "3",
              "write", "-b", "4096", "-t", "8", "--no-cleanup",
              env=dict(os.environ, CEPH_CONF=lab_hosts["CEPH_CONF"]))
    assert p.returncode == 0, p.stderr
    after = [perf_counters(a)["osd"] for a in lab_hosts["asoks"]]
    op_w = sum(a["op_w"] - b["op_w"] for a, b in zip(after, before))
    subop = [a["subop_w"] - b["subop_w"] for a, b in zip(after, before)]
    assert op_w > 0
    # every write reaches the two other hosts: size 3
    assert sum(subop) == 2 * op_w, (op_w, subop)


def test_host_netns_sees_its_host_only(lab_hosts):
    for k, ns in enumerate(lab_hosts["netns"]):
        p = run_tool([OSDSTAGE, "--list", "--json", "--host-netns", ns])
        assert p.returncode == 0, p.stderr
        rows = json.loads(p.stdout)["osds"]
        assert [(str(r["osd"]), r["pid"]) for r in rows] == [
            (str(k), lab_hosts["pids"][k])], rows


def test_up_without_hosts_keeps_it(lab_hosts):
    """`make lab` with no HOSTS= on the running multi-host lab keeps it:
    the same OSD processes, hosts, OSDs per host and link delay."""
    from conftest import lab_env
    env = {k: v for k, v in os.environ.items() if k not in (
        "LAB_HOSTS", "LAB_OSDS", "LAB_OSDS_PER_HOST", "LAB_NET_DELAY",
        "LAB_NET_JITTER")}
    p = subprocess.run(["bash", LAB, "up"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert lab_env()["OSD_PIDS"] == lab_hosts["OSD_PIDS"]
    with open("/var/tmp/osdstage-lab/net") as f:
        assert f.read().split()[:4] == ["3", "1", "1000", "0"]


@pytest.mark.parametrize("var,value,fragment", [
    ("LAB_HOSTS", "7", "HOSTS='7'"),
    ("LAB_NET_DELAY", "fast", "LAB_NET_DELAY='fast'"),
    ("LAB_OSDS_PER_HOST", "5", "OSDS_PER_HOST='5'"),
])
def test_bad_settings_one_line(lab_hosts, var, value, fragment):
    env = {"LAB_HOSTS": "3", var: value}
    p = lab("up", env=env)
    assert_one_line_error(p, fragment)
    # the running lab is untouched: the same OSD processes, the wire there
    from conftest import lab_env
    assert lab_env()["OSD_PIDS"] == lab_hosts["OSD_PIDS"]
    assert lab("net-delay", "h1", "1ms").returncode == 0


@pytest.mark.lab_lifecycle
def test_down_leaves_no_namespace_and_no_wire(lab_hosts):
    p = lab("down")
    assert p.returncode == 0, p.stderr
    assert_lab_network_gone()
    assert not os.path.exists("/var/tmp/osdstage-lab")
