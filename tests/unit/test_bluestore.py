"""loadtime.bluestore() and attached_kernel_programs(): the syncfs syscall
tracepoints are left off only when every target is a BlueStore OSD, told
by the "type" file next to the fsid file the process holds open."""
import itertools
import os
import subprocess
import sys

import pytest

from cephlat import abi
from cephlat.engine import loadtime

HOLD = ("import sys, time\n"
        "f = open(sys.argv[1]) if sys.argv[1] != '-' else None\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")


@pytest.fixture
def holder(tmp_path, spawn):
    """holder(store_type or None, open_fsid=True) -> pid of a process
    holding <data dir>/fsid open, as an OSD does."""
    dirs = itertools.count()

    def start(store_type, open_fsid=True):
        d = tmp_path / ("osd-%d" % next(dirs))
        d.mkdir()
        (d / "fsid").write_text("00000000-0000-0000-0000-000000000000\n")
        if store_type is not None:
            (d / "type").write_text(store_type + "\n")
        p = spawn([sys.executable, "-c", HOLD,
                   str(d / "fsid") if open_fsid else "-"],
                  stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        return p.pid
    return start


def test_the_type_file_says_bluestore(holder):
    assert loadtime.bluestore(holder("bluestore")) is True


@pytest.mark.parametrize("store_type", ["filestore", "memstore", None])
def test_anything_else_is_not(holder, store_type):
    assert loadtime.bluestore(holder(store_type)) is False


def test_no_fsid_open_or_no_process(holder):
    assert loadtime.bluestore(holder("bluestore", open_fsid=False)) is False
    assert loadtime.bluestore(os.getpid()) is False
    assert loadtime.bluestore(2 ** 22 + 1) is False     # above pid_max


def test_syscall_tracepoints_only_when_a_target_may_call_syncfs(holder):
    a = abi.load("osdstage")
    every = loadtime.kernel_programs(a)
    sys_progs = set(loadtime.syscall_programs(a))
    assert sys_progs and sys_progs < set(every)
    blue = [holder("bluestore"), holder("bluestore")]
    filestore = holder("filestore")
    assert set(loadtime.attached_kernel_programs(a, blue)) == \
        set(every) - sys_progs
    assert loadtime.attached_kernel_programs(a, blue + [filestore]) == every
    assert loadtime.attached_kernel_programs(a, []) == every
