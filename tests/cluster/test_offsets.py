"""The probe table's per-release offsets are the ones each release's own
machine code uses (no DWARF needed: tests/cluster/machinecode.py), read
from the binary of each lab's running OSD through /proc/PID/exe."""
from cephlat.ceph import probetable
from cephlat.engine.elfsym import ElfSymbols

from machinecode import rmw_of, stamps_of


def _check(pid):
    exe = "/proc/%d/exe" % pid
    with ElfSymbols(exe) as elf:
        rel = probetable.release_for(elf.version_string())
    assert rel is not None and rel.rmw is not None
    assert rmw_of(exe) == rel.rmw, rel.key
    # the lean tier's: the op's message and Ceph's dequeue stamp
    assert stamps_of(exe) == (rel.offsets["msg_off"],
                              rel.offsets["deq_time_off"]), rel.key
    return rel


def test_pacific_offsets_are_its_machine_codes(lab):
    assert _check(lab["pid"]).key == "16.2"
