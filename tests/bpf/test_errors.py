"""Bad input: one clear line on stderr, non-zero exit, never a traceback."""
import os
import shutil
import subprocess

import pytest

from cephlat.ceph import probetable
from conftest import OSDSTAGE, PYTHON, assert_one_line_error, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def sleeper(cxx):
    return cxx(os.path.join(HERE, "progs", "sleeper.cc"), "sleeper")


@pytest.fixture
def running(sleeper, tmp_path, spawn):
    """start(name) -> pid of a sleeper whose executable is called `name`."""
    def start(name="sleeper"):
        exe = str(tmp_path / name)
        shutil.copy(sleeper, exe)
        return spawn([exe, "1000", "1"], stdin=subprocess.PIPE,
                     stdout=subprocess.DEVNULL).pid
    return start


def test_not_root(bpf_ready):
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                        "--clear-groups", PYTHON, OSDSTAGE, "-p", "1", "1", "1"],
                       capture_output=True, text=True)
    assert_one_line_error(p, "must run as root", status=1)


def test_no_such_pid(bpf_ready):
    pid = 4194303          # above any pid_max default in use
    while os.path.exists("/proc/%d" % pid):
        pid -= 1
    p = run_tool([OSDSTAGE, "-p", str(pid), "1", "1"])
    assert_one_line_error(p, "no such process: %d" % pid, status=1)


def test_not_a_ceph_osd(bpf_ready, running):
    pid = running("sleeper")
    p = run_tool([OSDSTAGE, "-p", str(pid), "1", "1"])
    assert_one_line_error(p, "process %d is sleeper" % pid, "not a ceph-osd")


def test_function_missing_in_binary(bpf_ready, running):
    # named ceph-osd, but none of the OSD's functions are in it
    pid = running("ceph-osd")
    p = run_tool([OSDSTAGE, "-p", str(pid), "--release", "16.2", "1", "1"])
    # the first default stage names it (the messenger stages, then
    # queue_wait: all start at enqueue_op)
    assert_one_line_error(p, "stage %s unavailable" %
                          probetable.DEFAULT_STAGES[0],
                          "OSD::enqueue_op(spg_t, ", "not found")
    p = run_tool([OSDSTAGE, "-p", str(pid), "--release", "16.2", "-S",
                  "get_object_context", "1", "1"])
    assert_one_line_error(p, "stage get_object_context unavailable",
                          "PrimaryLogPG::get_object_context", "not found")


def test_unknown_release(bpf_ready, running):
    pid = running("ceph-osd")
    p = run_tool([OSDSTAGE, "-p", str(pid), "--release", "9.2.1", "1", "1"])
    assert_one_line_error(p, "Ceph 9.2.1 has no probe table",
                          "known releases: 15.2 (octopus), 16.2 (pacific), 17.2 (quincy), 18.2 (reef), 19.2 (squid)")


def test_release_undetectable(bpf_ready, running):
    pid = running("ceph-osd")          # its --version prints no ceph version
    p = run_tool([OSDSTAGE, "-p", str(pid), "1", "1"])
    assert_one_line_error(p, "cannot tell the Ceph release", "--release")


def test_tracefs_missing(bpf_ready, running):
    pid = running("ceph-osd")
    script = ("umount /sys/kernel/tracing; umount -l /sys/kernel/debug "
              "2>/dev/null; exec %s %s -p %d --release 16.2 1 1"
              % (PYTHON, OSDSTAGE, pid))
    p = subprocess.run(["unshare", "--mount", "--propagation", "private",
                        "sh", "-c", script], capture_output=True, text=True)
    assert_one_line_error(p, "tracefs is not mounted",
                          "mount -t tracefs tracefs /sys/kernel/tracing")


def test_several_targets_bad_input(bpf_ready, running):
    a = running()
    # the same process twice: a usage error, before anything is looked at
    p = run_tool([OSDSTAGE, "-p", "%d,%d" % (a, a), "1", "1"])
    assert_one_line_error(p, "-p names a target twice: %d,%d" % (a, a),
                          status=2)
    # one of them is not a ceph-osd
    p = run_tool([OSDSTAGE, "-p", "%d,%d" % (os.getpid(), a), "1", "1"])
    assert_one_line_error(p, "not a ceph-osd", status=1)
    # an OSD id that does not run here
    p = run_tool([OSDSTAGE, "--osd", "9998,9999", "1", "1"])
    assert_one_line_error(p, "no running ceph-osd with id 9998", status=1)
    # --bpftrace-args is for one OSD
    p = run_tool([OSDSTAGE, "-p", "%d,%d" % (a, running("other")),
                  "--bpftrace-args"])
    assert_one_line_error(p, "--bpftrace-args is for one ceph-osd",
                          status=2)
