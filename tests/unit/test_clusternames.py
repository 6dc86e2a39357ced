"""ceph/clusternames.py: the traced OSD's ceph.conf from its command
line (through its root: an OSD in a container), and the look-up in a
process and a thread of its own that hands each line over once to each
reader and says why there is none; its lines fold into the names a
breakdown reads, a client named by its cephx name. Reading a real cluster: tests/cluster/test_by_clients.py."""
import subprocess
import sys
import time

import numpy as np

from cephlat.ceph import clusternames
from cephlat.model import breakdown
from cephlat.errors import UserError


def _proc(*args):
    return subprocess.Popen([sys.executable, "-c",
                             "import time; time.sleep(30)"] + list(args))


def test_the_osds_conf_from_its_command_line(tmp_path):
    conf = tmp_path / "lab.conf"
    conf.write_text("[global]\n")
    for args in (["--conf", str(conf)], ["--conf=%s" % conf],
                 ["-c", str(conf)]):
        p = _proc("-i", "0", *args)
        try:
            time.sleep(0.1)
            # /proc/PID/root is / here: the path through it
            assert clusternames.osd_conf(p.pid) == "/proc/%d/root%s" % (
                p.pid, conf), args
        finally:
            p.kill()
            p.wait()
    p = _proc("-i", "0", "--conf", str(tmp_path / "missing.conf"))
    try:
        time.sleep(0.1)
        assert clusternames.osd_conf(p.pid) is None
    finally:
        p.kill()
        p.wait()


def test_the_lookup_hands_each_line_over_once(monkeypatch, tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("[global]\n")
    got = {"fsid": "x", "pools": {"1": "rbd"}, "images": {},
           "clients": {"client.4": "client.admin"}}
    later = {"clients": {"client.5": "client.vm17"}}
    calls = []

    def fake(path, started=None, refresh_s=None, clients_s=None):
        calls.append(path)
        if len(calls) == 1:
            raise UserError("cannot connect with %s: timed out" % path)
        yield got
        yield later
    monkeypatch.setattr(clusternames, "lookup_in_child", fake)
    monkeypatch.setattr(clusternames, "osd_conf", lambda pid: str(conf))
    lk = clusternames.NamesLookup(1, refresh_s=0.05)
    try:
        end = time.time() + 5
        seen = []
        while len(seen) < 2 and time.time() < end:
            seen += lk.take()
            time.sleep(0.01)
        assert seen[:2] == [got, later] and lk.why is None
        assert calls[0] == str(conf)
    finally:
        lk.stop()
    # each reader has each line once (a capture's writer and a live
    # breakdown both read them), its first take the last full line and
    # those since
    calls.append("past the failure")
    lk = clusternames.NamesLookup(1, refresh_s=60)
    try:
        lk.first(5)
        end = time.time() + 5
        while len(lk._since_full) < 2 and time.time() < end:
            time.sleep(0.01)
        assert lk.take() == [got, later] and lk.take() == []
        assert lk.take("by") == [got, later] and lk.take("by") == []
    finally:
        lk.stop()
    # a failure says why, and nothing is handed over
    monkeypatch.setattr(clusternames, "osd_conf", lambda pid: None)
    lk = clusternames.NamesLookup(1, refresh_s=60)
    try:
        end = time.time() + 5
        while lk.why is None and time.time() < end:
            time.sleep(0.01)
        assert lk.why == "no ceph.conf of pid 1 found"
        assert lk.take() == []
    finally:
        lk.stop()


def test_lines_fold_into_the_names_and_clients_get_their_cephx_name():
    names = {}
    breakdown.merge_names(names, {"fsid": "x", "pools": {"1": "rbd"},
                                  "images": {}, "self": "client.9",
                                  "clients": {"client.4": "client.admin"}})
    breakdown.merge_names(names, {"clients": {"client.5": "client.vm17"}})
    breakdown.merge_names(names, {"fsid": "x", "pools": {"1": "rbd"},
                                  "images": {}, "self": "client.9",
                                  "clients": {}})
    assert names["fsid"] == "x" and names["selves"] == ["client.9"]
    cols = {"client": np.array(["client.4", "client.5", "client.9",
                                "client.6", None, "client.4"], object)}
    assert breakdown.keys_of("client", cols, names).tolist() == [
        "client.4 (client.admin)", "client.5 (client.vm17)",
        "client.9" + breakdown.SELF, "client.6", None,
        "client.4 (client.admin)"]


def test_the_child_says_why_in_one_line(tmp_path):
    """The look-up's own process: a conf that names no monitor is one
    line, the child's last, never a traceback."""
    conf = tmp_path / "none.conf"
    conf.write_text("[global]\nmon host = \n")
    try:
        list(clusternames.lookup_in_child(str(conf)))
    except UserError as e:
        why = str(e)
    else:
        raise AssertionError("no error")
    assert "\n" not in why and "Traceback" not in why, why
    assert why, why
