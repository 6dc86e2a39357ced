#!/usr/bin/python3
"""abigen: the contract between a BPF object and Python, read from the
object itself.

USAGE: abigen.py OBJECT.bpf.o > OBJECT.abi.json      (run by make)

Reads the object's DWARF (clang -g) and ELF symbols and writes JSON with
  enums     every enum declared in probes/*.h: [[enumerator, value]...]
            in declaration order
  structs   every struct declared in probes/*.h: size and members (name,
            offset, size, kind, type name as written in the header)
  globals   the .rodata / .bss variables: offset, size, type
  programs  every BPF program: its ELF section (= its attach type)
Python (lib/cephlat/abi.py) reads this file and nothing else to learn
ids, names, layouts and program names: the header is the one source.
"""
import json
import os
import re
import sys

from elftools.elf.elffile import ELFFile

BASE = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}


def _attr(die, name, default=None):
    a = die.attributes.get(name)
    return a.value if a is not None else default


def _name(die):
    n = _attr(die, "DW_AT_name")
    return n.decode() if n is not None else None


class Dwarf:
    def __init__(self, elf):
        self.info = elf.get_dwarf_info(relocate_dwarf_sections=False)

    def dies(self):
        for cu in self.info.iter_CUs():
            yield from cu.iter_DIEs()

    def type_of(self, die):
        """-> (kind, size, written name): kind is the base kind after
        typedefs (u8..u64, s8..s64, struct, array, enum, pointer)."""
        written = None
        t = die.get_DIE_from_attribute("DW_AT_type")
        while True:
            if t.tag == "DW_TAG_typedef":
                written = written or _name(t)
                t = t.get_DIE_from_attribute("DW_AT_type")
            elif t.tag in ("DW_TAG_volatile_type", "DW_TAG_const_type"):
                t = t.get_DIE_from_attribute("DW_AT_type")
            else:
                break
        if t.tag == "DW_TAG_base_type":
            size = _attr(t, "DW_AT_byte_size")
            signed = _attr(t, "DW_AT_encoding") in (0x5, 0x6, 0xd)  # signed*
            kind = ("s" if signed else "u") + str(8 * size)
            if _name(t) == "char":
                kind = "char"
            return kind, size, written or _name(t)
        if t.tag == "DW_TAG_structure_type":
            return "struct", _attr(t, "DW_AT_byte_size"), \
                written or "struct " + (_name(t) or "")
        if t.tag == "DW_TAG_enumeration_type":
            return "enum", _attr(t, "DW_AT_byte_size"), \
                written or "enum " + (_name(t) or "")
        if t.tag == "DW_TAG_pointer_type":
            return "pointer", 8, written
        if t.tag == "DW_TAG_array_type":
            ek, es, ew = self.type_of(t)
            n = 1
            for sub in t.iter_children():
                if sub.tag == "DW_TAG_subrange_type":
                    cnt = _attr(sub, "DW_AT_count")
                    if cnt is None:
                        cnt = _attr(sub, "DW_AT_upper_bound", -1) + 1
                    n *= cnt
            return "array", es * n, "%s[%d]" % (ew or ek, n)
        return t.tag[7:], _attr(t, "DW_AT_byte_size", 0), written


def declared_in_headers(here):
    """(enum names, struct names) defined in probes/*.h: the object's
    DWARF also holds the kernel's types (vmlinux.h)."""
    enums, structs = set(), set()
    for n in os.listdir(here):
        if n.endswith(".h") and n != "vmlinux.h":
            with open(os.path.join(here, n)) as f:
                text = f.read()
            for kind, name in re.findall(r"\b(enum|struct)\s+(\w+)\s*\{",
                                         text):
                (enums if kind == "enum" else structs).add(name)
    return enums, structs


def generate(path):
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        dw = Dwarf(elf)
        our_enums, our_structs = declared_in_headers(
            os.path.dirname(os.path.abspath(__file__)))
        enums, structs, globs = {}, {}, {}
        for die in dw.dies():
            name = _name(die)
            if die.tag == "DW_TAG_enumeration_type" and name in our_enums:
                enums[name] = [[_name(c), _attr(c, "DW_AT_const_value")]
                               for c in die.iter_children()
                               if c.tag == "DW_TAG_enumerator"]
            elif die.tag == "DW_TAG_structure_type" and \
                    name in our_structs and \
                    not _attr(die, "DW_AT_declaration"):
                members = []
                for c in die.iter_children():
                    if c.tag != "DW_TAG_member":
                        continue
                    kind, size, written = dw.type_of(c)
                    members.append({
                        "name": _name(c), "kind": kind, "size": size,
                        "offset": _attr(c, "DW_AT_data_member_location"),
                        "type": written})
                structs[name] = {"size": _attr(die, "DW_AT_byte_size"),
                                 "members": members}
            elif die.tag == "DW_TAG_variable" and name and \
                    die.get_parent().tag == "DW_TAG_compile_unit":
                kind, size, written = dw.type_of(die)
                globs[name] = {"kind": kind, "size": size, "type": written}
        sections = [s.name for s in elf.iter_sections()]
        programs, placed = {}, {}
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            shndx = sym["st_shndx"]
            if not isinstance(shndx, int):
                continue
            sec = sections[shndx]
            kind = sym["st_info"]["type"]
            if kind == "STT_FUNC" and sym["st_info"]["bind"] == "STB_GLOBAL" \
                    and sec != ".text":
                programs[sym.name] = sec
            elif kind == "STT_OBJECT" and sec in (".rodata", ".bss") and \
                    sym.name in globs:
                placed.setdefault(sec, []).append(dict(
                    globs[sym.name], name=sym.name, offset=sym["st_value"]))
    for sec in placed.values():
        sec.sort(key=lambda g: g["offset"])
    return {"object": os.path.basename(path), "enums": enums,
            "structs": structs, "globals": placed, "programs": programs}


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: abigen.py OBJECT.bpf.o\n")
        return 2
    json.dump(generate(argv[1]), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
