"""The client library's Objecter offsets rbdrecord reads (lib/cephlat/ceph/
objecter.py), checked against the DWARF of every copy the client has
(libceph-common, librados, librbd: Debian's librados2-dbg and librbd1-dbg)
with gdb; and every copy is found where the recorder looks."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import CONTAINER_LAB, REPO, gdb_offsets, need

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
    _check_copy(name, libs, dbg)


def _check_copy(name, libs, dbg, prefix=(), root=""):
    """Copy `name` of the Objecter (libs: the client's libraries, dbg: its
    debug file; under `prefix`, gdb runs in a container whose root is
    `root` on the host) against the release's offsets."""
    # the release: the copies come from one build (libceph-common says it)
    version = ebpf.library_version(libs.get("libceph-common", libs[name]))
    key = ".".join((version or "").split(".")[:2])
    assert key in objecter.OFFSETS, "no offsets for %s (%s)" % (key, name)
    want = objecter.OFFSETS[key]
    exprs = dict(objecter.DWARF)
    if name == "libceph-common":      # the protocol's op codes, once
        exprs.update({"op_" + k: k for k in objecter.OSD_OPS})
    text, got = gdb_offsets(dbg[len(root):], exprs, "ptype /o Objecter::Op",
                            prefix=prefix)
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


# the client libraries in a container lab's root (Debian's paths)
CTR_LIBS = {"librbd": "/usr/lib/x86_64-linux-gnu/librbd.so.1",
            "librados": "/usr/lib/x86_64-linux-gnu/librados.so.2",
            "libceph-common":
                "/usr/lib/x86_64-linux-gnu/ceph/libceph-common.so.2"}


@pytest.fixture(scope="module")
def ctr_client(container_lab):
    """The container lab's client libraries, as the host sees them (its
    OSD's root), with their debug files and gdb installed there."""
    p = subprocess.run(["bash", CONTAINER_LAB, container_lab["release"],
                        "client-debug"], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr
    root = "/proc/%d/root" % container_lab["pid"]
    return container_lab, root, {n: root + p for n, p in CTR_LIBS.items()}


@pytest.mark.parametrize("name", objecter.LIBS)
def test_container_offsets_match_dwarf(ctr_client, name):
    """Reef's and Tentacle's offsets (their client libraries in the
    container labs) against their librados2-dbg and librbd1-dbg, as for
    Pacific's on the host."""
    lab, root, libs = ctr_client
    dbg = _debug(libs[name])
    assert dbg and dbg.startswith(root), (libs[name], dbg)
    version = ebpf.library_version(libs["libceph-common"])
    assert version.startswith(lab["version"]), version
    if name not in objecter.COPIES[lab["version"].rstrip(".")]:
        # Tentacle's librados and librbd: no copy, hidden or not
        with ElfSymbols(libs[name], debug=True) as elf:
            for q, params in objecter.FUNCS.values():
                assert not elf.find(q, re.compile(params)), (name, q)
        return
    _check_copy(name, libs, dbg, prefix=lab["exec"], root=root)


def test_container_copies_are_probed(ctr_client):
    """In the container labs' client libraries too, every copy of both
    functions is found (Reef's hidden ones through the container's debug
    files; Tentacle has libceph-common's only) and the release has
    offsets."""
    lab, root, libs = ctr_client
    site = ebpf.ObjecterSite(libs)
    assert site.why is None, site.why
    assert site.release.startswith(lab["version"]), site.release
    assert {(r, p) for r, p, _, _ in site.sites} == {
        (r, libs[n]) for r in objecter.FUNCS
        for n in objecter.COPIES[lab["version"].rstrip(".")]}


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
