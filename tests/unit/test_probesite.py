"""engine/probesite.py: an op event's probe moves off an entry the kernel
would single-step, to the first emulated instruction every call reaches
with the argument it reads unchanged; nothing else moves."""
import pytest

from cephlat.engine import probesite
from conftest import need


@pytest.fixture(autouse=True)
def capstone():
    need(probesite._load(), "python3-capstone missing "
         "(make setup)")

SUB = "4881ecb8000000"          # sub rsp, 0xb8
MOV_RBP_RDI = "4889fd"          # mov rbp, rdi
LOAD_RDI = "488b3e"             # mov rdi, [rsi]
TEST = "4885ff"                 # test rdi, rdi
JE5 = "7405"                    # je +5
BODY = "488d4701c3"             # lea rax, [rdi+1]; ret
OUT = "31c0c3"                  # xor eax, eax; ret
ADDR = 0x1000


def code(*parts):
    return bytes.fromhex("".join(parts))


def test_an_emulated_entry_stays():
    for first in ("55", "4157", "e800000000", "7400", "0f1f440000"):
        s = probesite.place(code(first, BODY), ADDR, 2)
        assert (s.offset, s.single_step) == (0, False), first


def test_a_single_stepped_entry_moves_to_the_first_jcc():
    f = code(SUB, MOV_RBP_RDI, LOAD_RDI, TEST, JE5, BODY, OUT)
    s = probesite.place(f, ADDR, 2)             # reads rsi: untouched
    assert s.offset == len(code(SUB, MOV_RBP_RDI, LOAD_RDI, TEST))
    assert not s.single_step and s.insn.startswith("je")
    assert s.entry_insn == "sub rsp, 0xb8"
    # no argument read at all: the same
    assert probesite.place(f, ADDR, 0).offset == s.offset


def test_it_stays_when_its_argument_is_written_first():
    f = code(SUB, MOV_RBP_RDI, LOAD_RDI, TEST, JE5, BODY, OUT)
    s = probesite.place(f, ADDR, 1)             # rdi: overwritten
    assert (s.offset, s.single_step) == (0, True)
    # a sub-register write counts too (mov esi, 1)
    f = code(SUB, "be01000000", TEST, JE5, BODY, OUT)
    assert probesite.place(f, ADDR, 2).single_step


def test_it_stays_when_the_site_is_a_branch_target():
    # je at +7; later "jmp" back to it: it would be reached twice
    head = code(SUB)
    je_at = ADDR + len(head)
    tail = code(JE5, "4883c701")                # je +5; add rdi, 1
    pos = ADDR + len(head) + len(tail)
    back = je_at - (pos + 2)
    f = head + tail + bytes([0xeb, back & 0xff]) + code(OUT)
    s = probesite.place(f, ADDR, 2)
    assert (s.offset, s.single_step) == (0, True)


def test_a_call_stage_never_moves():
    f = code(SUB, TEST, JE5, BODY, OUT)
    s = probesite.place(f, ADDR, None)
    assert (s.offset, s.single_step) == (0, True)


def test_prefixed_and_indirect_branches_are_not_emulated():
    f = code(SUB, "f2eb00", JE5, BODY, OUT)      # bnd jmp: stops the scan
    assert probesite.place(f, ADDR, 2).single_step
    f = code(SUB, "ffd0", JE5, BODY, OUT)        # call rax: stops it too
    assert probesite.place(f, ADDR, 2).single_step
