"""The scheduler's description (ceph/scheduler.py) and its wording in
reports (model/sched.py), from `config diff` answers as an OSD gives them."""
from cephlat.ceph.scheduler import from_config
from cephlat.model import sched

DIFF = {"osd_mclock_profile": {"default": "balanced", "mon": "custom",
                               "final": "custom"},
        "osd_mclock_scheduler_client_lim": {"default": 0, "mon": 0.5,
                                            "final": 0.5},
        "osd_mclock_scheduler_client_res": {"default": 0.5, "final": 0.5},
        "osd_mclock_max_capacity_iops_hdd": {"default": "315.000000"}}


def test_wpq_is_named_and_never_holds():
    s = from_config({}, "wpq", None)
    assert s == {"queue": "wpq", "mclock": False}
    assert sched.limit_iops(s) is None
    assert sched.describe(s) == "scheduler: wpq (never holds queued ops)."


def test_mclock_settings_capacity_and_its_source():
    s = from_config(DIFF, "mclock_scheduler", 1)
    assert s["profile"] == "custom"
    assert s["classes"]["client"] == {"res": 0.5, "wgt": None, "lim": 0.5}
    assert (s["device"], s["capacity_iops"], s["capacity_source"]) == \
        ("hdd", 315.0, "default")
    assert sched.limit_iops(s) == 157.5
    line = sched.describe(s)
    assert line.startswith("scheduler: mClock, profile custom (client res "
                           "0.5 wgt ? lim 0.5; ")
    assert "capacity 315 IOPS (osd_mclock_max_capacity_iops_hdd = 315, the " \
        "default for hdd devices)" in line


def test_a_measured_capacity_and_no_limit():
    d = dict(DIFF, osd_mclock_max_capacity_iops_ssd={
        "default": 21500, "mon": 8000, "final": 8000})
    d["osd_mclock_scheduler_client_lim"] = {"default": 0, "final": 0}
    s = from_config(d, "mclock_scheduler", 0)
    assert (s["device"], s["capacity_iops"], s["capacity_source"]) == \
        ("ssd", 8000.0, "mon")
    assert sched.limit_iops(s) is None          # lim 0: no limit
    assert "lim none" in sched.describe(s)
    assert "start-up benchmark" in sched.source_words(s)


def test_an_unknown_device_class_leaves_the_capacity_out():
    s = from_config(DIFF, "mclock_scheduler", None)
    assert s["device"] is None and "capacity_iops" not in s
    assert sched.limit_iops(s) is None
    assert "capacity" not in sched.describe(s)


def test_a_declared_scheduler_without_settings():
    """A probe spec says "mclock" for a program with no OSD settings."""
    s = {"queue": "mclock_scheduler", "mclock": True}
    assert sched.limit_iops(s) is None
    assert sched.describe(s) == \
        "scheduler: mClock (no settings read: not an OSD)."
