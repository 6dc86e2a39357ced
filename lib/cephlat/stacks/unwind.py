"""User stacks unwound offline from the binaries' own unwind tables.

Ceph's Debian builds have no frame pointers, so a user stack cannot be
walked by following rbp. What the probes keep of a thread at a wait is
its user registers (rip, rsp, rbp) and a copy of the top of its stack;
here the stack is walked as a C++ exception would walk it: for each
frame, the function's call frame information in the binary's .eh_frame
(every function has it: C++ unwinding needs it) says where the frame's
return address and saved registers are relative to the canonical frame
address (CFA), and the CFA relative to the registers. pyelftools decodes
the CFI; .eh_frame_hdr's sorted table finds a function's entry without
decoding the other tens of thousands (ceph-osd has 33,000: all of them
take a minute to decode in Python, one takes a millisecond).

An unwind stops at a frame whose return address is undefined (the
thread's first frame: clone's), at an address no mapping or table
covers, or where the copy of the stack ends: the frames found so far
are kept, and why it stopped is said.
"""
import bisect
import os
import struct

from elftools.common.exceptions import ELFError
from elftools.dwarf.callframe import CallFrameInfo, RegisterRule
from elftools.elf.elffile import ELFFile

# DWARF register numbers of x86-64 (the psABI's table)
RBP, RSP, RA = 6, 7, 16
# frames at most: deeper is a loop in corrupt data
MAX_FRAMES = 64

# why an unwind stopped
END = "end"                 # the thread's first frame
NO_MAP = "no mapping"       # an address in no mapped file
NO_CFI = "no unwind info"   # the file has no entry for the address
COPY = "stack copy"         # the frame's data is past the copied bytes
RULE = "unsupported rule"   # a CFA or register rule computed by DWARF
#                             expression (signal frames, PLT stubs)

_U64 = struct.Struct("<Q")


def _encoded(data, pos, enc, base):
    """One pointer of .eh_frame_hdr in DW_EH_PE encoding `enc` (the
    encodings its writers use: udata4, sdata4, udata8, pc- or
    data-relative) at data[pos] -> (value, next pos)."""
    fmt = {0x03: "<I", 0x0b: "<i", 0x04: "<Q", 0x0c: "<q"}.get(enc & 0x0f)
    if fmt is None or enc & 0x70 not in (0x00, 0x10, 0x30):
        raise ValueError("eh_frame_hdr encoding 0x%x" % enc)
    v = struct.unpack_from(fmt, data, pos)[0]
    if enc & 0x70 == 0x10:
        v += base + pos         # pc-relative: the field's own address
    elif enc & 0x70 == 0x30:
        v += base               # data-relative: the section's
    return v, pos + struct.calcsize(fmt)


class UnwindTable:
    """One ELF file's call frame information: row(vaddr) -> the CFA and
    register rules in force at that address of the file."""

    def __init__(self, path):
        self.path = path
        self._f = open(path, "rb")
        try:
            self._elf = ELFFile(self._f)
            self.loads = [s for s in self._elf.iter_segments()
                          if s["p_type"] == "PT_LOAD"]
            eh = self._elf.get_section_by_name(".eh_frame")
            hdr = self._elf.get_section_by_name(".eh_frame_hdr")
            self._cfi = None
            self._starts, self._fdes = [], []
            if eh is not None and hdr is not None:
                self._index(hdr, eh)
        except (ELFError, ValueError, struct.error):
            self._f.close()
            raise
        self._rows = {}             # FDE offset -> its decoded rows

    def close(self):
        self._f.close()

    def _index(self, hdr, eh):
        data = hdr.data()
        base = hdr["sh_addr"]
        if data[0] != 1:
            raise ValueError("eh_frame_hdr version %d" % data[0])
        ptr_enc, count_enc, table_enc = data[1], data[2], data[3]
        _, pos = _encoded(data, 4, ptr_enc, base)
        n, pos = _encoded(data, pos, count_enc, base)
        step = struct.calcsize({0x03: "<I", 0x0b: "<i", 0x04: "<Q",
                                0x0c: "<q"}[table_enc & 0x0f])
        for _ in range(n):
            start, pos = _encoded(data, pos, table_enc, base)
            fde, pos = _encoded(data, pos, table_enc, base)
            self._starts.append(start)
            self._fdes.append(fde - eh["sh_addr"])
        dwarf = self._elf.get_dwarf_info(follow_links=False)
        sec = dwarf.eh_frame_sec        # its stream: the section's bytes
        # one entry decoded at a time, at the offset the table gives: the
        # parser's own entry point for it (pyelftools 0.29)
        self._cfi = CallFrameInfo(stream=sec.stream, size=sec.size,
                                  address=sec.address,
                                  base_structs=dwarf.structs,
                                  for_eh_frame=True)

    def vaddr_of(self, file_offset):
        """A file offset -> its virtual address in the file (None: in no
        loaded segment)."""
        for s in self.loads:
            if s["p_offset"] <= file_offset < s["p_offset"] + s["p_filesz"]:
                return file_offset - s["p_offset"] + s["p_vaddr"]
        return None

    def row(self, vaddr):
        """The rules in force at `vaddr`: {"cfa": CFARule, regno:
        RegisterRule}, or None when no entry covers it."""
        i = bisect.bisect_right(self._starts, vaddr) - 1
        if i < 0 or self._cfi is None:
            return None
        off = self._fdes[i]
        rows = self._rows.get(off)
        if rows is None:
            fde = self._cfi._parse_entry_at(off)
            h = fde.header
            end = h["initial_location"] + h["address_range"]
            rows = (end, [(r["pc"], r) for r in fde.get_decoded().table])
            self._rows[off] = rows
        end, table = rows
        if vaddr >= end or not table:
            return None
        j = bisect.bisect_right([pc for pc, _ in table], vaddr) - 1
        return table[max(j, 0)][1]


def vdso_image(path):
    """This process's vDSO copied to file `path` (an ELF image of the
    running kernel's), or None when it has none."""
    for m in read_maps(os.getpid()):
        if m.path == VDSO:
            with open("/proc/self/mem", "rb", buffering=0) as f:
                f.seek(m.start)
                data = f.read(m.end - m.start)
            with open(path, "wb") as out:
                out.write(data)
            return path
    return None


def build_id(path):
    """The GNU build id (hex) of ELF file `path`; None when it has none
    or cannot be read."""
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            for sec in elf.iter_sections():
                if sec["sh_type"] != "SHT_NOTE":
                    continue
                for note in sec.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID":
                        return note["n_desc"]
    except (OSError, ELFError, ValueError, struct.error):
        pass
    return None


class Mapping:
    """A file mapped into the process: [start, end) at file `offset`
    (path None: a file not at hand: no unwind information)."""
    __slots__ = ("start", "end", "offset", "path")

    def __init__(self, start, end, offset, path):
        self.start, self.end, self.offset, self.path = \
            start, end, offset, path


# the kernel's code mapped into every process (clock_gettime runs there):
# an ELF image of the running kernel's, not a file
VDSO = "[vdso]"


def read_maps(pid):
    """The file mappings of process `pid` (/proc/PID/maps), executable
    or not (a file's text and its tables can be mapped apart), and the
    vDSO; not the devices, the kernel's own ([aio] rings) or files
    deleted since."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].rstrip("\n") == VDSO:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append(Mapping(lo, hi, 0, VDSO))
                continue
            if len(parts) < 6 or not parts[5].startswith("/") or \
                    parts[5].startswith(("/dev/", "/[")) or \
                    parts[5].rstrip("\n").endswith(" (deleted)"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append(Mapping(lo, hi, int(parts[2], 16),
                               parts[5].rstrip("\n")))
    return out


class Stack:
    """The top of one thread's user stack as copied: `data` from address
    `sp` up; `returns`: {address on the stack: the return address it
    stands for} of the functions a uretprobe was waiting on (the kernel
    put its trampoline's address there until they return)."""

    def __init__(self, sp, data, returns=None):
        self.sp, self.data = sp, data
        self.returns = returns or {}

    def u64(self, addr):
        if addr in self.returns:
            return self.returns[addr]
        off = addr - self.sp
        if off < 0 or off + 8 > len(self.data):
            return None
        return _U64.unpack_from(self.data, off)[0]


class Unwinder:
    """Unwinds stacks of one process from its mappings (Mapping, sorted
    or not), opening each file's table once; `root`: the process's root
    directory (a container's /proc/PID/root) the paths are under."""

    def __init__(self, maps, root=""):
        self.maps = sorted(maps, key=lambda m: m.start)
        self._starts = [m.start for m in self.maps]
        self.root = root
        self.tables = {}            # path -> UnwindTable, or None

    def close(self):
        for t in self.tables.values():
            if t is not None:
                t.close()

    def locate(self, pc):
        """-> (Mapping, its table or None, the file's vaddr or None)."""
        i = bisect.bisect_right(self._starts, pc) - 1
        if i < 0 or pc >= self.maps[i].end:
            return None, None, None
        m = self.maps[i]
        if m.path is None:
            return m, None, None
        if m.path not in self.tables:
            try:
                self.tables[m.path] = UnwindTable(self.root + m.path)
            except (OSError, ELFError, ValueError, struct.error):
                self.tables[m.path] = None
        t = self.tables[m.path]
        if t is None:
            return m, None, None
        return m, t, t.vaddr_of(pc - m.start + m.offset)

    def unwind(self, ip, sp, bp, stack):
        """The frames of a thread stopped at `ip` with `sp` and `bp`,
        `stack` its Stack -> ([(pc, Mapping or None, vaddr or None, the
        frame's CFA or None)], why it stopped: END, NO_MAP, NO_CFI, COPY
        or RULE). Each frame after the first is its call's return
        address; a frame's (pc, CFA) is the same in every unwind of the
        thread while that call lasts."""
        frames = []
        regs = {RSP: sp, RBP: bp}
        pc, first = ip, True
        why = END
        while len(frames) < MAX_FRAMES:
            m, table, vaddr = self.locate(pc)
            frames.append([pc, m, vaddr, None])
            if m is None:
                why = NO_MAP
                break
            if table is None or vaddr is None:
                why = NO_CFI
                break
            # a return address is after its call: look up the call
            row = table.row(vaddr if first else vaddr - 1)
            if row is None:
                why = NO_CFI
                break
            cfa_rule = row["cfa"]
            if cfa_rule.expr is not None or regs.get(cfa_rule.reg) is None:
                why = RULE
                break
            cfa = regs[cfa_rule.reg] + cfa_rule.offset
            frames[-1][3] = cfa
            ra_rule = row.get(RA)
            if ra_rule is None or ra_rule.type == RegisterRule.UNDEFINED:
                why = END
                break
            if ra_rule.type != RegisterRule.OFFSET:
                why = RULE
                break
            new = {RSP: cfa}
            for reg in (RBP,):
                rule = row.get(reg)
                if rule is None or rule.type == RegisterRule.SAME_VALUE:
                    new[reg] = regs.get(reg)
                elif rule.type == RegisterRule.OFFSET:
                    new[reg] = stack.u64(cfa + rule.arg)
                else:
                    new[reg] = None
            ra = stack.u64(cfa + ra_rule.arg)
            if ra is None:
                why = COPY
                break
            if ra == 0:
                why = END
                break
            regs, pc, first = new, ra, False
        return [tuple(f) for f in frames], why
