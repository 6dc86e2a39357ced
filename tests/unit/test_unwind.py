"""User stacks unwound offline from .eh_frame (stacks/unwind.py) and
named from the files' own symbols (engine/elfsym.py: function_at), on a
program built as Ceph is (-O2: no frame pointers), stopped in a known
place: its registers from /proc/PID/syscall (a thread blocked in a
system call: its stack pointer and resume address), the top of its stack
from /proc/PID/mem, as the probes copy them."""
import os
import shutil
import subprocess
import time

import pytest

from conftest import need
from cephlat.engine.elfsym import ElfSymbols
from cephlat.stacks.unwind import (COPY, END, Stack, Unwinder, build_id,
                                   read_maps)

SOURCE = r"""
#include <time.h>
extern "C" __attribute__((noinline)) void leaf(int n)
{
    struct timespec t = {1000, 0};
    volatile char buf[300];
    buf[n] = 1;
    nanosleep(&t, 0);
    buf[0] = buf[n];
}
namespace sim {
__attribute__((noinline)) void middle(int n)
{
    volatile long a[50];
    a[n] = n;
    leaf(n + 1);
    a[1] = a[n];
}
}
__attribute__((noinline)) static void outer(int n)
{
    sim::middle(n + 1);
    asm volatile("");
}
int main() { outer(1); return 0; }
"""
# innermost first, as the unwind gives them
EXPECTED = ["clock_nanosleep", "nanosleep", "leaf", "sim::middle", "outer",
            "main"]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    need(shutil.which("g++") is not None, "g++ missing (run: make setup)")
    d = tmp_path_factory.mktemp("unwind")
    (d / "nest.cc").write_text(SOURCE)
    exe = str(d / "nest")
    subprocess.run(["g++", "-O2", "-o", exe, str(d / "nest.cc")],
                   check=True)
    p = subprocess.Popen([exe])
    try:
        deadline = time.time() + 10
        while True:
            with open("/proc/%d/syscall" % p.pid) as f:
                f_ = f.read().split()
            if f_ and f_[0] == "230":       # clock_nanosleep
                break
            assert time.time() < deadline, f_
            time.sleep(0.05)
        sp, pc = int(f_[-2], 16), int(f_[-1], 16)
        data = b""
        with open("/proc/%d/mem" % p.pid, "rb", buffering=0) as m:
            while len(data) < 8192:
                try:
                    m.seek(sp + len(data))
                    data += m.read(1024)
                except OSError:
                    break           # the stack's end
        yield exe, read_maps(p.pid), sp, pc, data
    finally:
        p.kill()
        p.wait()


def _names(frames):
    out, syms = [], {}
    for _, m, vaddr, _ in frames:
        if m is None or vaddr is None:
            out.append(None)
            continue
        if m.path not in syms:
            syms[m.path] = ElfSymbols(m.path)
        out.append(syms[m.path].function_at(vaddr))
    for s in syms.values():
        s.close()
    return out


def test_unwinds_every_frame_to_the_threads_first(stopped):
    exe, maps, sp, pc, data = stopped
    u = Unwinder(maps)
    try:
        frames, why = u.unwind(pc, sp, None, Stack(sp, data))
    finally:
        u.close()
    names = _names(frames)
    assert names[:len(EXPECTED)] == EXPECTED, names
    # then libc's start-up, ending at the program's entry, whose return
    # address is undefined: the thread's first frame
    assert names[-1] == "_start" and why == END, (names, why)
    assert frames[2][1].path == exe


def test_a_short_copy_stops_the_unwind_and_says_so(stopped):
    exe, maps, sp, pc, data = stopped
    u = Unwinder(maps)
    try:
        # leaf's frame holds a 300-byte buffer: 256 bytes do not reach
        # its return address
        frames, why = u.unwind(pc, sp, None, Stack(sp, data[:256]))
    finally:
        u.close()
    assert why == COPY, why
    assert _names(frames) == EXPECTED[:len(frames)], _names(frames)
    assert 2 <= len(frames) < len(EXPECTED)


def test_the_build_id_is_the_files(stopped):
    exe = stopped[0]
    with ElfSymbols(exe) as s:
        assert build_id(exe) == s.build_id()
    assert build_id(os.devnull) is None
