"""The exporter's loop (exporter/service.py) without a tracer.

The exporter's own share of the host's CPU is judged against the bound
(exporter/budget.py, own_share_note): said once it is over the bound by
itself, never with no bound, never in the first OWN_AFTER_S.

Which ceph-osd processes the exporter traces (Exporter.wanted), on real
processes named ceph-osd (a shell run through a link of that name, so
/proc shows comm "ceph-osd" and "-i ID"):

- a daemonizing ceph-osd before its fork (not its session's leader) is
  left alone, however many seconds it has run: traced then, it would be
  traced again when its child comes (3 attaches for 2 restarts);
- its child, which called setsid(), is traced;
- one run in the foreground (-f, -d, --foreground) is traced as it is;
- the parent of a child of the same id is left alone;
- a one-shot run (--mkfs, --get-osd-fsid, ...), even in the foreground,
  leading its session or old, is never traced: the soak's exporter
  re-attached every OSD for processes named ceph-osd that served nothing;
- nothing is traced in its first second;
- a new process that cannot be planned is held back (HOLD_S), said once,
  and the OSDs traced stay attached; a first start that fails traces the
  others at once (_Looked: the loop over fake tracers).
"""
import argparse
import io
import os
import subprocess
import time

import pytest

from cephlat.engine import duty
from cephlat.exporter import budget, osds, service
from cephlat.exporter.osds import daemonized
from cephlat.exporter.budget import lean_share_note, own_share_note, \
    whole_share_note
from cephlat.exporter.config import ExporterConfig
from cephlat.exporter.service import Exporter

# a shell that stays one process (no exec of the last command)
LOOP = "sleep 30; :"


@pytest.fixture
def fake_osd(tmp_path, spawn):
    link = tmp_path / "ceph-osd"
    os.symlink("/bin/sh", str(link))

    def start(osd_id, *extra, session=False):
        pid = spawn([str(link), "-c", LOOP, "x", "-i", osd_id] +
                    list(extra), start_new_session=session).pid
        _sleeping(pid)
        return pid
    return start


def _sleeping(pid):
    """Wait for the shell's `sleep` to have exec'd: between its fork and
    exec the child is a ceph-osd of the same id, and its shell, that
    child's parent, rightly left alone (osds.wanted): on a loaded machine
    that window can outlast SETTLE_S."""
    for _ in range(1000):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
            comms = []
            for k in kids:
                with open("/proc/%s/comm" % k) as f:
                    comms.append(f.read().strip())
        except OSError:
            comms = []
        if comms and all(c == "sleep" for c in comms):
            return
        time.sleep(0.01)
    raise AssertionError("the fake OSD %d never ran its sleep" % pid)


def exporter(ids):
    return Exporter(ExporterConfig(osd=list(ids)), None, io.StringIO())


def settled():
    time.sleep(osds.SETTLE_S + 0.3)


def test_prefork_process_waits_child_is_traced(fake_osd):
    ex = exporter(["91", "92"])
    pre = fake_osd("91")
    child = fake_osd("92", session=True)
    assert ex.wanted() == ()            # both younger than SETTLE_S
    settled()
    for _ in range(3):
        assert ex.wanted() == (child,)
        time.sleep(0.2)


@pytest.mark.parametrize("flag", ["-f", "--foreground", "-d"])
def test_foreground_is_traced(fake_osd, flag):
    ex = exporter(["93"])
    pid = fake_osd("93", flag)
    settled()
    assert ex.wanted() == (pid,)


def test_prefork_is_traced_after_prefork_s(fake_osd):
    pid = fake_osd("94")
    settled()
    assert not daemonized(pid, os.getsid(pid), osds.SETTLE_S)
    assert daemonized(pid, os.getsid(pid), osds.PREFORK_S)
    assert daemonized(pid, pid, 0.0)


@pytest.mark.parametrize("task", [["--mkfs", "-f"], ["--get-osd-fsid"],
                                  ["--check-needs-journal"], ["--version"]])
def test_one_shot_is_never_traced(fake_osd, task):
    ex = exporter(["96", "97"])
    serving = fake_osd("96", "-f")
    pid = fake_osd("97", *task, session=True)
    settled()
    for _ in range(3):
        assert ex.wanted() == (serving,)
        time.sleep(0.2)
    assert not daemonized(pid, pid, osds.PREFORK_S)


def test_waiting_parent_is_left_alone(tmp_path):
    link = tmp_path / "ceph-osd"
    os.symlink("/bin/sh", str(link))
    # as a daemonizing ceph-osd after its fork: the child leads its own
    # session; the parent, waiting for it, is a ceph-osd of the same id
    inner = "setsid %s -c '%s' x -i 95 & wait" % (link, LOOP)
    parent = subprocess.Popen([str(link), "-c", inner, "x", "-i", "95"],
                              start_new_session=True)
    kids = []
    try:
        settled()
        kids = [int(p) for p in subprocess.check_output(
            ["pgrep", "-P", str(parent.pid)], text=True).split()]
        assert len(kids) == 1 and os.getsid(kids[0]) == kids[0]
        for _ in range(3):
            assert exporter(["95"]).wanted() == (kids[0],)
            time.sleep(0.2)
    finally:
        subprocess.run(["pkill", "-KILL", "-s", str(parent.pid)])
        for k in kids:
            subprocess.run(["pkill", "-KILL", "-s", str(k)])
        parent.wait()


def test_own_share_note():
    n = duty.ncpus()
    long_s = budget.OWN_AFTER_S * 2
    # 1.6 % of the host at --refresh 1 against a 1 % bound: said
    over = own_share_note(0.016 * long_s * n, long_s, 1.0, 1)
    assert over and "1.60 %" in over and "--refresh 1" in over, over
    assert "1 % bound" in over
    # over what the bound sets aside for it (0.9 of 0.8 %), under the
    # bound: said, in other words
    keep = duty.OTHER_SHARE * duty.MARGIN
    near = own_share_note((keep + 0.001) / 100 * long_s * n, long_s, 1.0, 5)
    assert near and "more than the 0.72 % the 1 % bound sets aside" in near
    assert "over the" not in near and "--refresh 5" in near, near
    assert own_share_note((keep - 0.001) / 100 * long_s * n, long_s, 1.0,
                          5) is None
    # under the bound, no bound, too early: nothing
    assert own_share_note(0.004 * long_s * n, long_s, 1.0, 5) is None
    assert own_share_note(0.5 * long_s * n, long_s, 0, 1) is None
    early = budget.OWN_AFTER_S / 2
    assert own_share_note(0.5 * early * n, early, 1.0, 1) is None


def test_whole_share_note():
    """The probes' estimate and the exporter's own CPU since the start
    over the bound together: said with both figures and their sum; at or
    under it, with no bound or too early: nothing."""
    long_s = budget.OWN_AFTER_S * 2
    said = whole_share_note(0.58, 0.50, long_s, 1.0)
    assert said and "an estimated 0.58 %" in said and "(0.50 %)" in said, \
        said
    assert "took 1.08 %" in said and "over the 1 % bound" in said, said
    assert whole_share_note(0.5, 0.5, long_s, 1.0) is None
    assert whole_share_note(0.6, 0.3, long_s, 1.0) is None
    assert whole_share_note(5.0, 0.5, long_s, 0) is None
    assert whole_share_note(5.0, 0.5, budget.OWN_AFTER_S / 2, 1.0) is None


def test_lean_share_note():
    """The lean tier, always attached, with the exporter's own CPU over
    what the bound sets aside for them (0.9 of 0.8 % at 1 %): said, with
    both figures; under it, with no bound or too early: nothing."""
    long_s = budget.OWN_AFTER_S * 2
    note = lean_share_note(0.6, 0.3, long_s, 1.0)
    assert note and "0.60 %" in note and "0.30 %" in note, note
    assert "0.72 % the 1 % bound sets aside" in note, note
    assert "--tiers full" in note, note
    assert lean_share_note(0.4, 0.3, long_s, 1.0) is None
    assert lean_share_note(5.0, 0.3, long_s, 0) is None
    assert lean_share_note(5.0, 0.3, budget.OWN_AFTER_S / 2, 1.0) is None


class _Looked(Exporter):
    """An Exporter whose tracers are a list of the pids they trace, over a
    host of `host` pids of which `bad` cannot be planned (their plan
    raises: a process that exited, a binary no table knows)."""

    def __init__(self, host, bad):
        super().__init__(ExporterConfig(max_ops=64), None, io.StringIO())
        self.host, self.bad, self.starts, self.stops = host, bad, [], 0

    def wanted(self):
        return tuple(self.host)

    def start(self, pids):
        self.starts.append(tuple(pids))
        if set(pids) & set(self.bad):
            raise service.UserError("cannot trace pid %d" % min(
                set(pids) & set(self.bad)))
        self.tiers = [argparse.Namespace(name=n) for n in ("lean", "full")]
        self.pids = tuple(pids)
        self.names = ["osd.%d" % p for p in pids]

    def stop(self):
        self.stops += 1
        self.tiers, self.pids, self.names = [], (), []


@pytest.fixture
def plans(monkeypatch):
    """service.plan_targets raising for the pids of looked.bad."""
    looked = []

    def plan(want, err):
        for ex in looked:
            bad = set(want.pid) & set(ex.bad)
            if bad:
                raise service.UserError("no probe table for pid %d" %
                                        min(bad))
        return None
    monkeypatch.setattr(service, "plan_targets", plan)
    return looked


def test_a_new_process_that_cannot_be_traced_leaves_the_others(plans,
                                                               monkeypatch):
    ex = _Looked([11, 12], bad={13})
    plans.append(ex)
    ex.look()
    assert ex.starts == [(11, 12)] and ex.pids == (11, 12)
    ex.host.append(13)
    for _ in range(3):          # held back, said once, nothing re-attached
        ex.look()
    assert ex.starts == [(11, 12)] and ex.stops == 0 and ex.pids == (11, 12)
    said = ex.err.getvalue()
    assert said.count("ceph-osd pid 13 not traced: no probe table for pid "
                      "13; the other OSDs stay traced") == 1, said
    # a new one that can be: re-attached with it, 13 still held
    ex.host.append(14)
    ex.look()
    assert ex.starts[-1] == (11, 12, 14) and ex.stops == 1
    # tried again once HOLD_S has passed
    monkeypatch.setattr(service, "HOLD_S", 0.0)
    ex.held = {p: 0.0 for p in ex.held}
    ex.look()
    assert ex.err.getvalue().count("pid 13 not traced") == 1
    assert 13 in ex.held and ex.pids == (11, 12, 14) and ex.stops == 1
    # and once it can be (its admin socket up, say): traced with them
    ex.bad = set()
    ex.held = {}
    ex.look()
    assert ex.pids == (11, 12, 13, 14) and ex.stops == 2


def test_a_first_start_traces_what_it_can(plans):
    ex = _Looked([11, 12, 13], bad={12})
    plans.append(ex)
    ex.look()
    # the whole set failed: the one that cannot be planned is held back,
    # the others traced at once
    assert ex.starts == [(11, 12, 13), (11, 13)] and ex.pids == (11, 13)
    assert "ceph-osd pid 12 not traced" in ex.err.getvalue()
    ex.look()
    assert ex.starts == [(11, 12, 13), (11, 13)]


def test_nothing_plannable_is_tried_again(plans):
    ex = _Looked([11], bad={11})
    plans.append(ex)
    with pytest.raises(service._Retry):
        ex.look()
    assert "cannot trace pid 11" in ex.err.getvalue()
