"""The exporter's bad input and empty host, without a lab:

- a port in use, an address that is not this host's, a malformed
  --listen or --max-overhead: one line on stderr, non-zero exit, no
  traceback;
- no ceph-osd on the host (the exporter in a PID namespace of its own,
  where /proc shows none): it serves /metrics with its own figures
  (osdstage_targets 0, the bound), says so in one line, keeps
  looking (still up seconds later) and exits 0 on SIGTERM; run three
  times in a row.
"""
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import PYTHON, REPO, assert_one_line_error, run_tool
from cephlat.exporter import families as F
from promserver import free_port

EXPORTER = os.path.join(REPO, "tools", "osdstage_exporter.py")


def exporter(*args, timeout=30):
    return run_tool([EXPORTER] + list(args), timeout=timeout)


def test_port_in_use(bpf_ready):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        p = exporter("--listen", "127.0.0.1:%d" % port)
    assert_one_line_error(p, "cannot listen on 127.0.0.1:%d" % port,
                          "in use", status=1)


def test_address_not_of_this_host(bpf_ready):
    # TEST-NET-1 (RFC 5737): never assigned here; bind fails, nothing sent
    p = exporter("--listen", "192.0.2.1:%d" % free_port())
    assert_one_line_error(p, "cannot listen on 192.0.2.1",
                          "not an address of this host", status=1)


def test_unresolvable_name(bpf_ready):
    p = exporter("--listen", "no-such-host.invalid:9929")
    assert_one_line_error(p, "cannot listen on no-such-host.invalid",
                          status=1)


@pytest.mark.parametrize("args,frag", [
    (("--listen", "9929x"), "not ADDR:PORT"),
    (("--listen", "127.0.0.1:70000"), "port out of range"),
    (("--max-overhead", "-1"), "0 to 100: '-1'"),
    (("--max-overhead", "200"), "0 to 100: '200'"),
    (("--refresh", "0"), "must be > 0"),
    (("--osd", "x"), "not an OSD id"),
    (("-S", "nosuchstage"), "unknown stage"),
])
def test_bad_arguments(bpf_ready, args, frag):
    p = exporter(*args)
    assert_one_line_error(p, frag, status=2)


def _get(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                timeout=5) as r:
        return r.read().decode()


@pytest.mark.parametrize("attempt", range(3))
def test_no_osd_on_the_host_serves_and_keeps_looking(bpf_ready, attempt):
    port = free_port()
    # a PID namespace with its own /proc: no ceph-osd in sight
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
         PYTHON, EXPORTER,
         "--listen", "127.0.0.1:%d" % port],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        text = None
        while text is None:
            try:
                text = _get(port)
            except OSError:
                assert proc.poll() is None, proc.communicate()
                assert time.time() < deadline, "no /metrics in 20 s"
                time.sleep(0.2)
        assert "%s 0.0" % F.TARGETS in text, text
        assert "%s 0.01" % F.OVERHEAD_BOUND in text, text
        assert "# TYPE %s histogram" % F.STAGE_LATENCY in text
        time.sleep(3)
        assert proc.poll() is None, "exited with no OSD: %s" % (
            proc.communicate(),)
        assert "%s 0.0" % F.TARGETS in _get(port)
    finally:
        # the exporter is unshare's child (PID 1 inside): signal it, and
        # unshare exits with its status
        with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
            child = int(f.read().split()[0])
        os.kill(child, signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert any("no ceph-osd on this host" in line for line in lines), err
    assert all(line.startswith("osdstage-exporter: ") for line in lines), err
    # said once, not once per look
    assert sum("no ceph-osd" in line for line in lines) == 1, err
