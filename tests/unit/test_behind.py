"""Whom threads waited behind for a CPU: the report's rows
(model/behind.py) from the behind map's figures, and the names of a task's
cgroup, unit or container (engine/tasks.py)."""
import os

from conftest import REPO  # noqa: F401  (the path set-up)
from cephlat.engine import tasks
from cephlat.model.behind import behind_rows, who_words

UNKNOWN = 0xffffffff
ROLES = ("other", "tp_osd_tp", "msgr")


def _st(ns, waits, pid=0, comm=None, cgroup=None, unit=None, process=None):
    return {"ns": ns, "waits": waits, "pid": pid, "thread": comm,
            "cgroup": cgroup, "unit": unit, "process": process}


def test_rows_are_the_longest_first_with_the_rest_summed():
    behind = {
        (1, 4211): _st(6_000_000, 40, 4211, "fio", "/user.slice/x.scope",
                       "x.scope", "fio"),
        (1, 100): _st(2_000_000, 300, 101, "msgr-worker-1", "/", None,
                      "ceph-osd"),
        (1, 0): _st(1_000_000, 12),
        (1, UNKNOWN): _st(500_000, 2),
        (1, 77): _st(300_000, 3, 77, "a", "/", None, "a"),
        (1, 78): _st(200_000, 3, 78, "b", "/", None, "b"),
        (2, 4211): _st(1_000, 1, 4211, "fio", "/", None, "fio"),
        (7, 9): _st(1_000, 1),            # a role the run does not have
    }
    rows = behind_rows(behind, ROLES, 100, UNKNOWN, top=4)
    assert sorted(rows) == ["msgr", "tp_osd_tp"]
    w = rows["tp_osd_tp"]
    assert w["wait_us"] == 10000.0
    assert [r["kind"] for r in w["by"]] == ["process", "itself", "idle",
                                            "unknown"]
    assert [r["us"] for r in w["by"]] == [6000.0, 2000.0, 1000.0, 500.0]
    assert w["other_us"] == 500.0
    # the shares are of the role's whole wait, the rest's included
    assert round(sum(r["share"] for r in w["by"]), 6) == 0.95
    fio = w["by"][0]
    assert (fio["tgid"], fio["pid"], fio["unit"]) == (4211, 4211, "x.scope")
    assert who_words(fio) == "fio (pid 4211, x.scope)"
    assert who_words(w["by"][1]) == \
        "its own threads (last: msgr-worker-1)"
    assert who_words(w["by"][2]) == "the idle CPU waking"
    assert w["by"][2]["tgid"] is None and w["by"][3]["pid"] is None
    assert rows["msgr"]["by"][0]["share"] == 1.0


def test_a_role_that_never_waited_has_no_row():
    assert behind_rows({(1, 5): _st(0, 0)}, ROLES, 1, UNKNOWN) == {}


def test_units_and_containers_of_cgroup_paths():
    assert tasks.unit_of("/system.slice/ceph-osd@2.service") == \
        "ceph-osd@2.service"
    assert tasks.unit_of(
        "/machine.slice/libpod-0123456789abcdef0123456789.scope/container") \
        == "container 0123456789ab"
    assert tasks.unit_of("/system.slice/docker-" + "f" * 64 + ".scope") == \
        "container " + "f" * 12
    assert tasks.unit_of("/user.slice/user-0.slice/session-3.scope") == \
        "session-3.scope"
    assert tasks.unit_of("/user.slice") == "user.slice"
    assert tasks.unit_of("/") is None
    assert tasks.unit_of("/osdstage-test") is None
    assert tasks.unit_of(None) is None


def test_this_process_is_named_from_proc(tmp_path):
    names = tasks.TaskNames()
    me = os.getpid()
    d = names.describe(me, me, 0, "pytest-thread")
    with open("/proc/self/comm") as f:
        assert d["process"] == f.read().strip()
    assert d["thread"] == "pytest-thread"
    want = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                want = line[3:].strip() or "/"
    assert d["cgroup"] == want
    # a task gone: its cgroup from the id (the directory's inode), its
    # name from the thread's
    gone = names.describe(0x7ffffffe, 0x7ffffffe, 0, "gone")
    assert gone["process"] == "gone" and gone["cgroup"] is None
    if names.root:
        ino = os.stat(names.root).st_ino
        assert names.cgroup(0x7ffffffe, ino) == "/"


def test_the_unified_hierarchy_is_found_in_mountinfo(tmp_path):
    mi = tmp_path / "mountinfo"
    mi.write_text(
        "25 30 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
        "26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 "
        "rw,nsdelegate\n"
        "27 25 0:24 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
    assert tasks.cgroup2_mount(str(mi)) == "/sys/fs/cgroup/unified"
    mi.write_text("27 25 0:24 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw\n")
    assert tasks.cgroup2_mount(str(mi)) is None
    assert tasks.cgroup2_mount(str(tmp_path / "none")) is None


def test_the_exporters_series_are_capped_with_the_rest_as_other():
    from cephlat.exporter import collect
    from cephlat.exporter import families as F
    st = collect.OsdState("osd.0")
    got = []
    for i in range(collect.BEHIND_SERIES + 5):
        row = {"kind": "process", "process": "p%d" % i, "cgroup": "/c%d" % i}
        label = collect._capped(st, collect._behind_label(row))
        st.count(F.THREAD_RUNQUEUE_BEHIND, ("tp_osd_tp",) + label, 1.0)
        got.append(label)
    assert got[:collect.BEHIND_SERIES] == [
        ("p%d" % i, "/c%d" % i) for i in range(collect.BEHIND_SERIES)]
    assert set(got[collect.BEHIND_SERIES:]) == {("other", "")}
    # one seen before keeps its series
    assert collect._capped(st, ("p3", "/c3")) == ("p3", "/c3")
    series = {k for k in st.counters if k[0] == F.THREAD_RUNQUEUE_BEHIND}
    assert len(series) == collect.BEHIND_SERIES + 1
    assert collect._behind_label({"kind": "idle", "process": None,
                                  "cgroup": None}) == ("idle", "")


def test_a_ceph_osd_is_named_by_its_id(tmp_path, monkeypatch):
    """A ceph-osd that ran instead is osd.N (its command line's id)."""
    files = {"/proc/4242/comm": "ceph-osd\n",
             "/proc/4243/comm": "fio\n"}
    real_open = open

    def fake_open(path, *a, **kw):
        if path in files:
            p = tmp_path / path.replace("/", "_")
            p.write_text(files[path])
            return real_open(p, *a, **kw)
        return real_open(path, *a, **kw)
    monkeypatch.setattr("builtins.open", fake_open)
    monkeypatch.setattr(tasks, "osd_id_of",
                        lambda pid: {4242: "2"}.get(pid))
    assert tasks.TaskNames.process(4242) == "osd.2"
    assert tasks.TaskNames.process(4243) == "fio"
