"""The ctypes image of the BPF object's read-only globals (built from
build/osdstage.abi.json) matches the compiled object's symbols in .rodata,
so settings land where the programs read them."""
import os

from elftools.elf.elffile import ELFFile

from cephlat import abi
from cephlat.engine.loadtime import rodata_type

from conftest import BUILD, need

OBJ = os.path.join(BUILD, "osdstage.bpf.o")


def _section_symbols(path, section):
    with open(path, "rb") as f:
        elf = ELFFile(f)
        idx = next(i for i, s in enumerate(elf.iter_sections())
                   if s.name == section)
        out = {}
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            if sym["st_shndx"] == idx and sym["st_info"]["type"] == "STT_OBJECT":
                out[sym.name] = (sym["st_value"], sym["st_size"])
        return out


def test_rodata_offsets_match_the_object():
    need(os.path.exists(OBJ), "BPF objects not built (run: make)")
    syms = _section_symbols(OBJ, ".rodata")
    ro = rodata_type(abi.load("osdstage", BUILD))
    fields = {name: (getattr(ro, name).offset, getattr(ro, name).size)
              for name, _ in ro._fields_ if not name.startswith("_pad")}
    assert set(syms) == set(fields)
    assert syms == fields
    # the role prefixes: an array of struct role_prefix, each with its name
    assert [n for n, _ in ro._fields_ if n == "roles"] == ["roles"]
    assert len(ro().roles) == abi.load("osdstage", BUILD).const("MAX_ROLES")


def test_bss_holds_only_ctl():
    need(os.path.exists(OBJ), "BPF objects not built (run: make)")
    # StageTracer writes struct ctl {u64 call_bias_ns; u32 call_cold_ns,
    # call_cold_x16, call_cold_max_ns, call_warm_ns, call_warm_x16,
    # call_bias_min_ns; s64 real_off_ns, tai_off_ns; u32 gen;
    # u32 mclock; u32 behind; u32 targets[MAX_TARGETS]} as the whole .bss
    # value (8-byte aligned)
    a = abi.load("osdstage", BUILD)
    ctl = a.struct("ctl")
    assert _section_symbols(OBJ, ".bss") == {"ctl": (0, ctl.size)}
    assert ctl.size == (60 + 4 * a.const("MAX_TARGETS") + 7) // 8 * 8
    assert ctl.offset("targets") == 60
    assert ctl.unpack(ctl.pack(call_bias_ns=7, call_cold_x16=56,
                               real_off_ns=-5, tai_off_ns=37, gen=3)) == {
        "call_bias_ns": 7, "call_cold_ns": 0, "call_cold_x16": 56,
        "call_cold_max_ns": 0, "call_warm_ns": 0, "call_warm_x16": 0,
        "call_bias_min_ns": 0, "real_off_ns": -5, "tai_off_ns": 37,
        "gen": 3, "mclock": 0,
        "behind": 0}
