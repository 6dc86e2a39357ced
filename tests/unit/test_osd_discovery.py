"""Which processes named ceph-osd are OSDs (ceph/target.py), on real
processes started here through a link named ceph-osd:

- a helper an OSD forks (to exec smartctl, say) is named ceph-osd until
  its exec: not an OSD of its own (--osd all would have traced it, then
  read another program's binary);
- a daemonizing OSD's child, leading its session, is the OSD;
- a process that execs another program after it was found is no longer
  the OSD found (still_an_osd).
"""
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))

from cephlat.ceph.target import (Target, find_ceph_osds,   # noqa: E402
                                 forked_by_an_osd, still_an_osd)

# a parent OSD forking two children and printing their pids: a helper
# (no setsid) and a daemon (setsid), all named ceph-osd; each waits for
# stdin to close
FORKS = r"""
import os, sys, time
kids = []
for lead in (False, True):
    pid = os.fork()
    if pid == 0:
        if lead:
            os.setsid()
        sys.stdin.read()
        os._exit(0)
    kids.append(pid)
# the daemon's setsid() may come after the parent goes on: the pids are
# printed once it leads its session (as the test asserts of it)
while os.getsid(kids[1]) != kids[1]:
    time.sleep(0.001)
print(*kids, flush=True)
sys.stdin.read()
for k in kids:
    os.waitpid(k, 0)
"""


def _comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


@pytest.fixture
def link(tmp_path):
    def make(target):
        p = tmp_path / "ceph-osd"
        os.symlink(target, str(p))
        return str(p)
    return make


def test_a_helper_an_osd_forked_is_not_an_osd(link):
    exe = link(sys.executable)
    p = subprocess.Popen([exe, "-c", FORKS, "-i", "7"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        helper, daemon = map(int, p.stdout.readline().split())
        assert _comm(helper) == _comm(daemon) == _comm(p.pid) == "ceph-osd"
        assert forked_by_an_osd(helper)
        assert not forked_by_an_osd(daemon)
        assert not forked_by_an_osd(p.pid)
        found = [pid for pid, _ in find_ceph_osds()]
        assert p.pid in found and daemon in found, found
        assert helper not in found, found
    finally:
        p.stdin.close()
        p.wait(timeout=30)


def test_a_process_that_execs_another_program_is_no_longer_the_osd(link):
    exe = link("/bin/sh")
    p = subprocess.Popen([exe, "-c", "read x; exec sleep 60", "-i", "7"],
                         stdin=subprocess.PIPE, text=True)
    try:
        t = Target(p.pid)
        assert t.comm == "ceph-osd" and still_an_osd(t)
        p.stdin.write("go\n")
        p.stdin.flush()
        for _ in range(100):
            if _comm(p.pid) == "sleep":
                break
            time.sleep(0.05)
        assert not still_an_osd(t)
    finally:
        p.kill()
        p.wait(timeout=30)
    assert not still_an_osd(t)


def test_osd_all_leaves_out_what_it_cannot_trace_or_fails_in_one_line(
        link, monkeypatch):
    """--osd all over processes named ceph-osd that cannot be traced
    (shells, no Ceph symbols): with none left the run's error is the
    first one's, one line, nothing said before it."""
    import io
    from cephlat.engine import session
    from cephlat.errors import UserError
    exe = link("/bin/sh")
    procs = [subprocess.Popen([exe, "-c", "sleep 60; :", "x", "-i", i])
             for i in ("7", "8")]
    try:
        for p in procs:
            for _ in range(100):
                if _comm(p.pid) == "ceph-osd":
                    break
                time.sleep(0.01)
        monkeypatch.setattr(session, "find_ceph_osds", lambda netns=None: [
            (p.pid, i) for p, i in zip(procs, ("7", "8"))])
        err = io.StringIO()
        with pytest.raises(UserError) as e:
            session.plan_targets(session.Want(osd="all"), err)
        assert err.getvalue() == "", err.getvalue()
        assert "\n" not in str(e.value) and str(e.value), e.value
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)
