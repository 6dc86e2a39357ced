"""The ctypes mirror of the BPF object's read-only globals matches the
compiled object (symbol offsets in .rodata), so settings land where the
programs read them."""
import os

from elftools.elf.elffile import ELFFile

from cephlat.engine.tracer import _Rodata

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
    fields = {name: (getattr(_Rodata, name).offset,
                     getattr(_Rodata, name).size)
              for name, _ in _Rodata._fields_}
    assert set(syms) == set(fields)
    assert syms == fields


def test_bss_holds_only_ctl():
    need(os.path.exists(OBJ), "BPF objects not built (run: make)")
    # StageTracer writes struct ctl {u64 call_bias_ns; u32 gen; u32 pad}
    # as the whole .bss value
    assert _section_symbols(OBJ, ".bss") == {"ctl": (0, 16)}
