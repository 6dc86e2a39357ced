"""BPF tier: CET builds (every function starts with endbr64, as Debian's
Reef and Tentacle binaries do). The kernel cannot emulate endbr64 and
single-steps it, so the probes go right after it; the probe-cost
calibration then times a function of the same flavour. The exact per-hit
costs are `make bench`'s; here only that they are of the same order."""
import os

import pytest

from cephlat.engine.elfsym import ENDBR64, ElfSymbols
from cephlat.engine.plan import Plan
from cephlat.engine.tracer import StageTracer

from conftest import BUILD, need


@pytest.mark.parametrize("lib,cet", [("libcephlat_calib.so", False),
                                     ("libcephlat_calib_cet.so", True)])
def test_calibration_functions_have_both_flavours(lib, cet):
    path = os.path.join(BUILD, lib)
    need(os.path.exists(path), "%s not built (run: make)" % path)
    with ElfSymbols(path) as elf:
        sym = elf.mark_cet(elf.find("cephlat_calib_target")[0])
        assert sym.cet == cet
        # after endbr64 (or at the start): a push, which the kernel emulates
        first = elf.read_at_vaddr(sym.addr + (sym.probe_offset - sym.offset),
                                  1)
        assert first == b"\x55"                       # push %rbp
        assert (elf.read_at_vaddr(sym.addr, 4) == ENDBR64) == cet


def _bias(cet):
    t = StageTracer(os.getpid(), "/proc/self/exe", Plan(), kernel=False)
    t.cet = cet
    t.calibrate_always = True
    t.start()
    try:
        return t.call_bias_ns
    finally:
        t.close()


def test_probe_cost_is_alike_on_both_flavours(bpf_ready):
    """Three rounds each, medians: a probe after endbr64 costs what a probe
    on a plain function costs (single-stepping endbr64 would cost several
    times more: docs/ceph.md, CET)."""
    plain = sorted(_bias(False) for _ in range(3))[1]
    cet = sorted(_bias(True) for _ in range(3))[1]
    assert plain > 0 and cet > 0
    assert 0.5 <= cet / plain <= 2.0, (plain, cet)
