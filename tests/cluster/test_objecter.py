"""The client library's Objecter offsets rbdrecord reads (lib/cephlat/ceph/
objecter.py), checked against the DWARF of every copy the client has
(libceph-common, librados, librbd: Debian's librados2-dbg and librbd1-dbg)
with gdb; and every copy is found where the recorder looks."""
import os
import re
import shutil
import sys

import pytest

from conftest import REPO, gdb_offsets, need

sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.ceph import objecter                       # noqa: E402
from cephlat.engine.elfsym import ElfSymbols             # noqa: E402
from cephlat.rbd import ebpf                             # noqa: E402
from cephlat.rbd.record import find_libraries           # noqa: E402

_HEAD = re.compile(r"^/\*\s+(\d+)(?::\s*\d+)?\s+\|\s+\d+(?::\s*\d+)? \*/")


def ptype_offsets(text):
    """gdb's `ptype /o TYPE` -> {member path tuple: offset}. Nested
    members' offsets are the outer type's (gdb prints them so); a nested
    struct's name comes on its closing line."""
    out, stack = {}, [[]]            # each open struct: [(name, off)...]
    opened = []                      # (column, offset) of open structs
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m:
            rest = line[m.end():]
            col = m.end() + len(rest) - len(rest.lstrip())
            decl = rest.strip()
            if decl.endswith("{"):
                opened.append((col, int(m.group(1))))
                stack.append([])
                continue
            name = re.search(r"(\w+)(\[\d+\])?;$", decl)
            if name:
                stack[-1].append(((name.group(1),), int(m.group(1))))
            continue
        close = re.match(r"^(\s+)\} (\w+);$", line)
        if close and opened and opened[-1][0] == len(close.group(1)):
            _, off = opened.pop()
            inner = stack.pop()
            name = close.group(2)
            stack[-1].append(((name,), off))
            stack[-1] += [((name,) + p, o) for p, o in inner]
    for p, o in stack[0]:
        out.setdefault(p, o)
    return out


def test_ptype_parser_reads_nested_members():
    text = "\n".join([
        "/* offset      |    size */  type = struct Objecter::Op {",
        "/*     40      |     408 */    struct Objecter::op_target_t {",
        "/*     40      |       4 */        int flags;",
        "/*    160      |      32 */        struct object_t {",
        "/*    160      |      32 */            std::string name;",
        "                                   } target_oid;",
        "/*    440      |       4 */        int osd;",
        "                               } target;",
        "/*   1144      |       8 */    ceph_tid_t tid;",
    ])
    got = ptype_offsets(text)
    assert got[("target",)] == 40
    assert got[("target", "flags")] == 40
    assert got[("target", "target_oid")] == 160
    assert got[("target", "osd")] == 440
    assert got[("tid",)] == 1144


def _copies():
    libs = find_libraries()
    need("librbd" in libs, "librbd not installed (make setup)")
    return [libs[n] for n in objecter.LIBS if n in libs]


def _debug(path):
    with ElfSymbols(path) as elf:
        return elf.debug_file()


@pytest.mark.parametrize("name", objecter.LIBS)
def test_offsets_match_dwarf_of_each_copy(name):
    need(shutil.which("gdb") is not None, "gdb not installed (make setup)")
    libs = find_libraries()
    need(name in libs, "%s not installed (make setup)" % name)
    dbg = _debug(libs[name])
    assert dbg, "no debug file for %s (make setup installs librados2-dbg " \
        "and librbd1-dbg)" % libs[name]
    # the release: the copies come from one build (libceph-common says it)
    version = ebpf.library_version(libs.get("libceph-common", libs[name]))
    key = ".".join((version or "").split(".")[:2])
    assert key in objecter.OFFSETS, "no offsets for %s (%s)" % (key, name)
    want = objecter.OFFSETS[key]
    exprs = dict(objecter.DWARF)
    if name == "libceph-common":      # the protocol's op codes, once
        exprs.update({"op_" + k: k for k in objecter.OSD_OPS})
    text, got = gdb_offsets(dbg, exprs, "ptype /o Objecter::Op")
    for k, code in objecter.OSD_OPS.items():
        if name == "libceph-common":
            assert got.get("op_" + k) == code, (k, got.get("op_" + k))
    # Message and Messenger are libceph-common's own classes (the copies
    # in librados and librbd have no DWARF of them, only inlined reads
    # compiled from the same headers): checked there
    expected = {o for o in objecter.DWARF
                if name == "libceph-common" or not o.startswith("msg")}
    assert set(got) >= expected, text[-2000:]
    for off in expected:
        assert got[off] == want[off], (name, off, got[off], want[off])
    members = ptype_offsets(text.split("@@off")[0])
    for off, path in objecter.OP_MEMBERS.items():
        assert path in members, (name, path)
        # the std::string's data pointer and the spg_t's pg_t are their
        # structs' first members: the offset is the member's own
        assert members[path] == want[off], (name, off, members[path],
                                            want[off])


def test_every_copy_is_probed():
    """The recorder probes both functions in librados and in librbd (their
    own hidden copies: a copy left out would lose its ops) and in
    libceph-common, which exports them."""
    site = ebpf.ObjecterSite(find_libraries())
    assert site.why is None, site.why
    assert site.offsets is not None
    copies = _copies()
    assert {(r, p) for r, p, _, _ in site.sites} == {
        (r, p) for r in objecter.FUNCS for p in copies}
    # each at an address the library's code has there (not a .cold part)
    for role, path, at, what in site.sites:
        assert at > 0, what


def test_the_skipped_sub_op_is_cephs():
    """probes/rbdrecord.h's set-alloc-hint code is Ceph's (whose value
    test_offsets_match_dwarf_of_each_copy reads from the DWARF)."""
    from conftest import header_enum
    assert header_enum("rbd_osd_op", "rbdrecord.h") == {
        "RBD_OSD_OP_SETALLOCHINT":
            objecter.OSD_OPS["CEPH_OSD_OP_SETALLOCHINT"]}
