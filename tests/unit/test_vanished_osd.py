"""A ceph-osd found by name (--osd all, the exporter) that exits before it
is traced (a one-shot `ceph-osd --version`, a helper an OSD forked) is
left out, never the run's end; one named by pid (-p) is an error, as
before (engine/session.py pick_targets, plan_targets). On real processes
named ceph-osd (a shell run through a link of that name)."""
import io
import os
import subprocess

import pytest

from cephlat.engine import session
from cephlat.engine.session import Want, pick_targets, plan_targets
from cephlat.errors import UserError


@pytest.fixture
def fake(tmp_path, spawn):
    link = tmp_path / "ceph-osd"
    os.symlink("/bin/sh", str(link))

    def start(osd_id):
        return spawn([str(link), "-c", "read x", "x", "-i", osd_id],
                     stdin=subprocess.PIPE)
    return start


def _gone(fake):
    p = fake("8")
    p.kill()
    p.wait()
    return p.pid


def test_found_by_name_and_gone_is_left_out(fake, monkeypatch):
    live, dead = fake("7").pid, _gone(fake)
    monkeypatch.setattr(session, "find_ceph_osds",
                        lambda netns=None: [(live, "7"), (dead, "8")])
    got = pick_targets(Want(osd="all"))
    assert [t.pid for t in got] == [live]
    got = pick_targets(Want(osd=["7"]))
    assert [t.pid for t in got] == [live]


def test_every_one_gone_says_so(fake, monkeypatch):
    dead = _gone(fake)
    monkeypatch.setattr(session, "find_ceph_osds",
                        lambda netns=None: [(dead, "8")])
    with pytest.raises(UserError, match="no running ceph-osd on this host"):
        pick_targets(Want(osd="all"))


def test_named_by_pid_and_gone_is_an_error(fake):
    with pytest.raises(UserError, match="no such process"):
        pick_targets(Want(pid=[_gone(fake)]))


@pytest.mark.parametrize("by_pid", [False, True])
def test_gone_before_its_binary_is_read(fake, monkeypatch, by_pid):
    """Gone between being found and its binary's symbols being read: left
    out when found by name; said when named by pid."""
    p = fake("9")
    want = Want(pid=[p.pid]) if by_pid else Want(osd="all")
    targets = pick_targets(Want(pid=[p.pid]))
    p.kill()
    p.wait()
    monkeypatch.setattr(session, "pick_targets", lambda w, **kw: targets)
    with pytest.raises(UserError) as e:
        plan_targets(want, io.StringIO())
    if by_pid:
        assert "no running ceph-osd" not in str(e.value), e.value
    else:
        assert str(e.value) == "no running ceph-osd on this host"
