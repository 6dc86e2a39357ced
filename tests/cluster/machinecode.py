"""Offsets read from a ceph-osd's machine code, without DWARF (Reef's and
Tentacle's debug packages are ~650 MB each): the ground truth the probe
table's per-release offsets are checked against."""
import re
import subprocess

from cephlat.engine.elfsym import ElfSymbols


def _disasm(path, sym, length=2048):
    p = subprocess.run(
        ["objdump", "-d", "-C", "--no-show-raw-insn",
         "--start-address=0x%x" % sym.addr,
         "--stop-address=0x%x" % (sym.addr + min(length, sym.size or length)),
         path], capture_output=True, text=True, timeout=120, check=True)
    return [l.split("\t", 1)[1].strip() for l in p.stdout.splitlines()
            if re.match(r"^\s+[0-9a-f]+:\t", l)]


def _one(elf, qualified):
    syms = elf.find(qualified)
    assert len(syms) == 1, (qualified, syms)
    return syms[0]


def rmw_of(path):
    """(offset of OpRequest::op_info.rmw_flags, read bit, write bit) as the
    binary's own code uses them: PrimaryLogPG::log_op_stats takes
    &op.op_info (`lea DISP(%op),%reg`) and passes it to OpInfo::may_read;
    OpInfo::need_read_cap / need_write_cap pass their bit to check_rmw,
    which tests the first word of OpInfo."""
    with ElfSymbols(path) as elf:
        stats = _disasm(path, _one(elf, "PrimaryLogPG::log_op_stats"))
        call = next(i for i, l in enumerate(stats)
                    if l.startswith("call") and "OpInfo::may_read()" in l)
        arg = next(re.match(r"mov\s+(%\w+),%rdi$", l).group(1)
                   for l in reversed(stats[:call])
                   if re.match(r"mov\s+%\w+,%rdi$", l))
        disp = next(int(m.group(1), 16) for l in reversed(stats[:call])
                    for m in [re.match(r"lea\s+0x([0-9a-f]+)\(%\w+\)," +
                                       re.escape(arg) + "$", l)] if m)
        bits = []
        for f in ("OpInfo::need_read_cap", "OpInfo::need_write_cap"):
            code = _disasm(path, _one(elf, f), 32)
            bits.append(next(int(m.group(1), 16) for l in code
                             for m in [re.match(r"mov\s+\$0x([0-9a-f]+),%esi$",
                                                l)] if m))
        check = _disasm(path, _one(elf, "OpInfo::check_rmw"), 32)
        assert any(re.match(r"mov\s+\(%rdi\),%rax$", l) for l in check), check
    return (disp, bits[0], bits[1])


def stamps_of(path):
    """(offset of OpRequest::request, of OpRequest::dequeued_time) as the
    binary's own code uses them: PrimaryLogPG::log_op_stats(const
    OpRequest& op, ...) loads op.request (`mov DISP(%rsi),%reg`, before
    anything else moves %rsi), calls clock_gettime for `now` and computes
    now - m->get_recv_stamp() and now - op.get_dequeued_time(): the first
    utime_t (two 32-bit loads, DISP and DISP + 4) read from the register
    the op was copied to after that call is dequeued_time."""
    with ElfSymbols(path) as elf:
        code = _disasm(path, _one(elf, "PrimaryLogPG::log_op_stats"), 600)
    op_reg = next(re.match(r"mov\s+%rsi,(%\w+)$", l).group(1) for l in code
                  if re.match(r"mov\s+%rsi,%\w+$", l))
    msg = next(int(m.group(1), 16) for l in code
               for m in [re.match(r"mov\s+0x([0-9a-f]+)\(%rsi\),%\w+$", l)]
               if m)
    call = next(i for i, l in enumerate(code)
                if l.startswith("call") and "clock_gettime" in l)
    loads = [int(m.group(1), 16) for l in code[call:]
             for m in [re.match(r"mov\s+0x([0-9a-f]+)\(" + re.escape(op_reg) +
                                r"\),%e\w+$", l)] if m]
    assert len(loads) >= 2 and abs(loads[0] - loads[1]) == 4, loads
    return msg, min(loads[:2])
