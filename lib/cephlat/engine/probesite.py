"""Where an entry probe lands, instruction-wise: emulated or single-stepped.

At a uprobe, x86-64 kernels emulate a few instructions (a push of a
register, a relative jmp, jcc or call, the 5-byte nop) and copy every
other one out of line to single-step it: a second trap. Here that costs
about ten times as much (make bench BENCH=floor: ~0.5 us a hit on a push or
a jcc, ~5 us on a single-stepped `lea` or `endbr64`). Most of Ceph's
functions start with a push; some do not (Tentacle's
ReplicatedBackend::do_repop_reply and op_commit start with
`sub $N,%rsp`).

An op event's program reads one argument register (some, several) and
the clock, so its probe may move into the function's straight-line
start, to the first emulated instruction, when nothing before it writes
those registers and no direct branch of the function jumps to it: every
call then reaches it exactly once, with the arguments the entry had,
some ns later. A call
stage's probes stay at the entry: the return probe needs the return
address where the entry has it.

Instructions are decoded with Capstone (python3-capstone); without it
nothing moves and nothing is said.
"""
capstone = None     # python3-capstone, once _load() has imported it
_LOADED = []


def _load():
    """Import Capstone when first needed: it pulls setuptools in (about
    15 MB that reading a capture, which never places a probe, has no use
    for). -> whether it is there."""
    global capstone
    if not _LOADED:
        try:
            import capstone as cs
        except ImportError:         # pragma: no cover - make setup has it
            cs = None
        capstone = cs
        _LOADED.append(True)
    return capstone is not None

# the argument registers of the SysV x86-64 ABI, with their sub-registers
ARG_REGS = (("rdi", "edi", "di", "dil"), ("rsi", "esi", "si", "sil"),
            ("rdx", "edx", "dx", "dl"), ("rcx", "ecx", "cx", "cl"),
            ("r8", "r8d", "r8w", "r8b"), ("r9", "r9d", "r9w", "r9b"))
NOP5 = bytes.fromhex("0f1f440000")
# how far into a function a moved probe may go
MAX_SCAN = 256


def _disasm():
    _load()
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    return md


def emulated(insn):
    """Whether the kernel emulates `insn` at a uprobe (no single-step)."""
    if any(insn.prefix):
        return False
    groups = set(insn.groups)
    if capstone.x86.X86_GRP_BRANCH_RELATIVE in groups:
        return True                 # jmp, jcc, call rel
    if insn.mnemonic == "push" and len(insn.operands) == 1 and \
            insn.operands[0].type == capstone.x86.X86_OP_REG and \
            insn.size <= 2:
        return True
    return bytes(insn.bytes) in (b"\x90", NOP5)


class Site:
    """Where a probe goes: `offset` into the function past its
    probe_offset (0: the entry), the instruction there, and whether it
    single-steps."""

    def __init__(self, offset, insn, single_step, entry_insn=None):
        self.offset, self.insn, self.single_step = offset, insn, single_step
        self.entry_insn = entry_insn     # the entry's, when moved

    def __repr__(self):
        return "Site(+%d %s%s)" % (self.offset, self.insn,
                                   " single-step" if self.single_step else "")


def _text(insn):
    return ("%s %s" % (insn.mnemonic, insn.op_str)).strip()


def _writes(insn, names):
    try:
        _, written = insn.regs_access()
    except capstone.CsError:
        return True
    return any(insn.reg_name(r) in names for r in written)


def place(code, addr, arg=None):
    """The site of an entry probe in a function whose bytes from its
    probe offset are `code` (at address `addr`). `arg`: the argument
    number (1-6) the program reads, a tuple of those when it reads
    several, 0 for none, or None for a probe that must stay at the entry
    (a call stage's). -> Site, or None without Capstone."""
    if not _load() or not code:
        return None
    md = _disasm()
    first = next(md.disasm(code[:16], addr, 1), None)
    if first is None:
        return None
    args = arg if isinstance(arg, tuple) else (arg,)
    if emulated(first) or arg is None or \
            not all(0 <= a <= len(ARG_REGS) for a in args):
        return Site(0, _text(first), not emulated(first))
    insns = list(md.disasm(code, addr))     # the whole function, once
    # direct branch targets anywhere in the function: a site must not be
    # one (it would be reached twice)
    targets = set()
    for insn in insns:
        if capstone.x86.X86_GRP_BRANCH_RELATIVE in insn.groups and \
                insn.operands and \
                insn.operands[0].type == capstone.x86.X86_OP_IMM:
            targets.add(insn.operands[0].imm)
    keep = set(r for a in args if a for r in ARG_REGS[a - 1])
    for insn in insns:
        if insn.address - addr > MAX_SCAN:
            break
        if insn.address != addr and emulated(insn) and \
                insn.address not in targets:
            return Site(insn.address - addr, _text(insn), False,
                        _text(first))
        groups = set(insn.groups)
        if groups & {capstone.CS_GRP_JUMP, capstone.CS_GRP_CALL,
                     capstone.CS_GRP_RET, capstone.CS_GRP_INT,
                     capstone.CS_GRP_IRET} or _writes(insn, keep):
            break                   # the straight-line start ends here
    return Site(0, _text(first), True)
