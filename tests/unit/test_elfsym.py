"""Symbol lookup by demangled name on a real ELF built here."""
import re
import subprocess

from cephlat.engine.elfsym import ElfSymbols, demangle, function_name, params

SRC = r"""
#include <cstdio>
#include <string>
#include <map>
namespace store { struct Obj { int x; }; }
namespace osd {
class PG {
public:
  __attribute__((noinline)) int do_op(store::Obj &o);
  __attribute__((noinline)) int do_op(int n, const std::map<std::string, int> *m);
  __attribute__((noinline)) static long queue(unsigned a, unsigned long b);
};
int PG::do_op(store::Obj &o) { return o.x + 1; }
int PG::do_op(int n, const std::map<std::string, int> *m) { return n + (m ? 1 : 0); }
long PG::queue(unsigned a, unsigned long b) { return a * b; }
}
extern "C" __attribute__((noinline)) int plain_c(int v) { return v * 3; }
int main(int argc, char **) {
  osd::PG pg; store::Obj o{argc};
  std::printf("%d %d %ld %d\n", pg.do_op(o), pg.do_op(argc, nullptr),
              osd::PG::queue(argc, 2), plain_c(argc));
  return 0;
}
"""


def _objdump_bytes(path, addr, n=8):
    out = subprocess.run(["objdump", "-d", "--start-address=0x%x" % addr,
                          "--stop-address=0x%x" % (addr + n), path],
                         capture_output=True, text=True, check=True).stdout
    hexes = []
    for line in out.splitlines():
        m = re.match(r"\s*[0-9a-f]+:\s+((?:[0-9a-f]{2} )+)", line)
        if m:
            hexes += m.group(1).split()
    return bytes(int(h, 16) for h in hexes)[:n]


def test_demangle_helpers():
    dm = demangle("_ZN3osd2PG5do_opERN5store3ObjE")
    assert dm == "osd::PG::do_op(store::Obj&)"
    assert function_name(dm) == "osd::PG::do_op"
    assert params(dm) == "store::Obj&"
    assert demangle("plain_c") == "plain_c"
    assert demangle("_Znot_valid!") == "_Znot_valid!"
    assert function_name("a::b<c(d)>::f(int) const") == "a::b<c(d)>::f"


def test_find_by_demangled_name_and_params(cxx):
    for flags in (("-O2", "-g"), ("-O2", "-s", "-rdynamic")):
        exe = cxx(SRC, "pg" + str(len(flags[1])), flags)
        with ElfSymbols(exe) as elf:
            both = elf.find("osd::PG::do_op")
            assert len(both) == 2
            ref = elf.find("osd::PG::do_op", re.compile(r"^store::Obj&$"))
            assert len(ref) == 1
            assert ref[0].demangled == "osd::PG::do_op(store::Obj&)"
            m = elf.find("osd::PG::do_op", re.compile(r"std::map<.*> const\*$"))
            assert len(m) == 1 and m[0].addr != ref[0].addr
            assert elf.find("osd::PG::queue")[0].demangled == \
                "osd::PG::queue(unsigned int, unsigned long)"
            assert elf.find("plain_c")[0].name == "plain_c"
            assert elf.find("osd::PG::missing") == []
            # the file offset is where the function's code is in the file
            for sym in both + elf.find("plain_c"):
                with open(exe, "rb") as f:
                    f.seek(sym.offset)
                    assert f.read(8) == _objdump_bytes(exe, sym.addr), sym
        if "-s" in flags:
            assert ref[0].table == ".dynsym"     # stripped: exported only
