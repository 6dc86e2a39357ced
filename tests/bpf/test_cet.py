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


def _bias_on_endbr64(monkeypatch):
    """The CET function probed at its first byte, endbr64, which the
    kernel single-steps: what probing a CET build naively costs here."""
    with monkeypatch.context() as m:
        m.setattr(ElfSymbols, "mark_cet", lambda self, sym: sym)
        return _bias(True)


def test_probe_cost_is_alike_on_both_flavours(bpf_ready, monkeypatch):
    """Rounds taking turns (plain, after endbr64, on endbr64), medians: a
    probe after endbr64 costs what a probe on a plain function costs, much
    less than what single-stepping endbr64 adds (docs/ceph.md, CET): the
    difference is judged against that step, measured here, not against a
    fixed ratio (the calibration's median moves with the machine's load)."""
    plain, after, on = [], [], []
    for _ in range(3):
        plain.append(_bias(False))
        after.append(_bias(True))
        on.append(_bias_on_endbr64(monkeypatch))
    plain, after, on = (sorted(x)[1] for x in (plain, after, on))
    assert plain > 0 and after > 0
    step = on - plain               # what the single-step adds
    assert step > 0, (plain, after, on)
    assert abs(after - plain) < step / 2, (plain, after, on)
