"""Find functions in an ELF file by their demangled C++ name.

Reads .symtab and .dynsym with pyelftools, demangles with the C++ runtime's
own demangler (libstdc++ __cxa_demangle, through ctypes) and converts a
symbol's virtual address into the file offset that uprobes attach at.
"""
import bisect
import ctypes
import ctypes.util
import os
import struct

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ..errors import UserError

_cxa = None


def _cxa_demangle():
    global _cxa
    if _cxa is None:
        lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        f = lib.__cxa_demangle
        f.restype = ctypes.c_void_p
        f.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                      ctypes.POINTER(ctypes.c_size_t),
                      ctypes.POINTER(ctypes.c_int)]
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.free.argtypes = [ctypes.c_void_p]
        _cxa = (f, libc.free)
    return _cxa


def demangle(name):
    """Demangled form of an Itanium C++ symbol; `name` itself if it is not
    one (C symbols, or names the demangler rejects)."""
    if not name.startswith("_Z"):
        return name
    f, free = _cxa_demangle()
    status = ctypes.c_int(0)
    p = f(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not p:
        return name
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        free(p)


def function_name(demangled):
    """'ns::Cls::fn(args) const' -> 'ns::Cls::fn' (templates kept)."""
    depth = 0
    for i, ch in enumerate(demangled):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return demangled[:i]
    return demangled


def params(demangled):
    """The parameter list text between the outermost parentheses."""
    start = demangled.find("(", len(function_name(demangled)))
    if start < 0:
        return ""
    depth = 0
    for i in range(start, len(demangled)):
        if demangled[i] == "(":
            depth += 1
        elif demangled[i] == ")":
            depth -= 1
            if depth == 0:
                return demangled[start + 1:i]
    return demangled[start + 1:]


ENDBR64 = b"\xf3\x0f\x1e\xfa"       # CET: an indirect-branch target


class Symbol:
    __slots__ = ("name", "demangled", "addr", "size", "offset", "table",
                 "cet", "moved")

    def __init__(self, name, demangled, addr, size, offset, table):
        self.name, self.demangled = name, demangled
        self.addr, self.size, self.offset, self.table = addr, size, offset, table
        self.cet = False          # starts with endbr64 (see probe_offset)
        self.moved = 0            # bytes past the entry (engine/probesite)

    @property
    def probe_offset(self):
        """Where to put a uprobe on this function. The kernel cannot
        emulate `endbr64` and single-steps it out of line (~4 us a hit
        here, against ~0.6 us on the `push` after it): on a CET build the
        probe goes right after it. The registers and the stack are those of
        the entry, so arguments and the return address (uretprobe) are
        unchanged. `moved`: an op event's probe moved off an instruction
        the kernel would single-step (engine/probesite.py)."""
        return self.offset + (len(ENDBR64) if self.cet else 0) + self.moved

    def moved_by(self, n):
        """A copy of this symbol whose probe goes `n` bytes further."""
        s = Symbol(self.name, self.demangled, self.addr, self.size,
                   self.offset, self.table)
        s.cet, s.moved = self.cet, self.moved + n
        return s

    def __repr__(self):
        return "Symbol(%s @0x%x)" % (self.demangled, self.offset)


class ElfSymbols:
    """Function symbols of one ELF file, searchable by demangled name.
    debug=True: a stripped file's .symtab is read from its separate debug
    file (a -dbg package's, found by build id: debug_file()) - where a
    library keeps functions it does not export."""

    def __init__(self, path, debug=False):
        self.path = path
        self.debug = debug
        try:
            self._f = open(path, "rb")
        except OSError as e:
            raise UserError("cannot read %s: %s" % (path, e.strerror))
        try:
            self._elf = ELFFile(self._f)
            self._segments = [s for s in self._elf.iter_segments()
                              if s["p_type"] == "PT_LOAD"]
        except ELFError as e:
            self._f.close()
            raise UserError("%s is not a readable ELF file: %s" % (path, e))
        self._by_base = None
        self._at = None             # function_at's sorted symbols

    def close(self):
        self._f.close()

    def vaddr_to_offset(self, addr):
        for seg in self._segments:
            if seg["p_vaddr"] <= addr < seg["p_vaddr"] + seg["p_memsz"]:
                return addr - seg["p_vaddr"] + seg["p_offset"]
        raise UserError("address 0x%x of %s is in no loadable segment" %
                        (addr, self.path))

    def _function_symbols(self):
        """(name, addr, size, table) of every defined function symbol.

        pyelftools locates the tables; the fixed-size Elf64_Sym records are
        then unpacked in bulk with struct, which is ~50x faster than building
        a pyelftools Symbol per entry (ceph-osd exports ~31,000 symbols and
        start-up time matters)."""
        if self._by_base is not None:
            return self._by_base
        out = []
        is64 = self._elf.elfclass == 64
        endian = "<" if self._elf.little_endian else ">"
        fmt = endian + ("IBBHQQ" if is64 else "IIIBBH")
        tables = [(self._elf, ".symtab"), (self._elf, ".dynsym")]
        dbg = None
        if self.debug and not self.has_symtab():
            path = self.debug_file()
            if path:
                dbg = open(path, "rb")
                tables.insert(0, (ELFFile(dbg), ".symtab"))
        try:
            self._read_tables(tables, fmt, is64, out)
        except ELFError as e:
            raise UserError("cannot read the symbols of %s: %s" % (
                self.path, e))
        finally:
            if dbg:
                dbg.close()
        self._by_base = out
        return out

    def _read_tables(self, tables, fmt, is64, out):
        for elf, table in tables:
            sec = elf.get_section_by_name(table)
            if sec is None or sec["sh_entsize"] == 0:
                continue
            strtab = elf.get_section(sec["sh_link"]).data()
            for rec in struct.iter_unpack(fmt, sec.data()):
                if is64:
                    st_name, st_info, _oth, shndx, value, size = rec
                else:
                    st_name, value, size, st_info, _oth, shndx = rec
                # STT_FUNC (2) or STT_GNU_IFUNC (10), defined, non-zero address
                if (st_info & 0xF) not in (2, 10) or shndx == 0 or value == 0:
                    continue
                end = strtab.find(b"\0", st_name)
                out.append((strtab[st_name:end].decode("ascii", "replace"),
                            value, size, table))

    def build_id(self):
        """The GNU build id (hex), or None."""
        for sec in self._elf.iter_sections():
            if sec["sh_type"] != "SHT_NOTE":
                continue
            for note in sec.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    return note["n_desc"]
        return None

    def debug_file(self):
        """The separate debug file of this file (Debian's -dbg packages:
        /usr/lib/debug/.build-id/xx/rest.debug), looked for in the root
        the file is in (a container's, /proc/PID/root/...) and then in
        this host's; None if there is none."""
        bid = self.build_id()
        if not bid:
            return None
        rel = "usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
        roots = ["/"]
        if self.path.startswith("/proc/"):
            parts = self.path.split("/")
            if len(parts) > 4 and parts[3] == "root":
                roots.insert(0, "/".join(parts[:4]) + "/")
        for root in roots:
            if os.path.exists(root + rel):
                return root + rel
        return None

    def find(self, qualified, param_pattern=None, hint=None):
        """All defined functions whose demangled name (without parameters)
        is `qualified`, e.g. 'PrimaryLogPG::do_op'. `hint` is a substring the
        mangled name must contain (a cheap pre-filter, default: the last name
        component); `param_pattern`, if given, is a compiled regex the
        parameter list must match. Sorted by address, de-duplicated."""
        last = qualified.rsplit("::", 1)[-1]
        hint = hint or last
        seen = {}
        for name, addr, size, table in self._function_symbols():
            if hint not in name or addr in seen:
                continue
            dm = demangle(name)
            if " [clone " in dm:
                # a compiler-made part (.cold, .isra, .constprop): not the
                # function's entry point
                continue
            if function_name(dm) != qualified:
                continue
            if param_pattern is not None and not param_pattern.search(params(dm)):
                continue
            seen[addr] = Symbol(name, dm, addr, size,
                                self.vaddr_to_offset(addr), table)
        return [seen[a] for a in sorted(seen)]

    def function_at(self, vaddr):
        """The function of this file that holds address `vaddr`, its
        demangled name without parameters (a compiler-made part, "f
        [clone .cold]", named as its function), or None: in no function
        symbol (a static function of a stripped file)."""
        if self._at is None:
            syms = sorted((addr, size, name) for name, addr, size, _ in
                          self._function_symbols())
            self._at = ([a for a, _, _ in syms], syms)
        starts, syms = self._at
        i = bisect.bisect_right(starts, vaddr) - 1
        # the symbols at one address (aliases) end at the same place: the
        # last of them stands for all; one of size 0 covers nothing
        if i < 0:
            return None
        addr, size, name = syms[i]
        if not addr <= vaddr < addr + size:
            return None
        dm = demangle(name.split("@", 1)[0])     # no symbol version
        clone = dm.find(" [clone ")
        return function_name(dm[:clone] if clone >= 0 else dm)

    def has_symtab(self):
        return self._elf.get_section_by_name(".symtab") is not None

    def read_at_vaddr(self, addr, size):
        off = self.vaddr_to_offset(addr)
        self._f.seek(off)
        return self._f.read(size)

    def mark_cet(self, sym):
        """Note whether `sym` starts with endbr64 -> sym"""
        sym.cet = self.read_at_vaddr(sym.addr, len(ENDBR64)) == ENDBR64
        return sym

    def version_string(self):
        """The Ceph version embedded in the binary ("18.2.7"), or None:
        ceph_version.cc keeps it next to the "ceph version " format, so it
        is read from the file - never by running it (a newer release's
        binary needs a newer libc than the host may have)."""
        import mmap
        import re
        self._f.seek(0)
        try:
            m = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        try:
            at = m.find(b"\0ceph version \0")
            while at >= 0:
                head = m[max(0, at - 32):at]
                # the version may follow another string without a NUL
                v = re.search(rb"(\d{2}\.\d+\.\d+(?:-\d+)?)$", head)
                if v:
                    return v.group(1).decode()
                at = m.find(b"\0ceph version \0", at + 1)
            return None
        finally:
            m.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
