"""The contract between a BPF object and Python, as the build wrote it.

`make` compiles probes/NAME.bpf.c and runs probes/abigen.py over the
object: build/NAME.abi.json holds its enums, struct layouts, .rodata/.bss
globals and programs, read from the object's DWARF and symbols. Python
learns every id, name, layout and program name from here; the header
(probes/NAME.h) is the one source and nothing here copies it.
"""
import ctypes
import json
import os
import struct

from .errors import UserError

_FMT = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q",
        "s8": "b", "s16": "h", "s32": "i", "s64": "q"}
_CTYPES = {"u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
           "u32": ctypes.c_uint32, "u64": ctypes.c_uint64,
           "s32": ctypes.c_int32, "s64": ctypes.c_int64}


def default_bpf_dir():
    """Where the build's objects are: $OSDSTAGE_BPF_DIR; else beside the
    package when installed (`make install`, the .deb: the package, the BPF
    objects, their ABI files and the .so files in one directory,
    PREFIX/lib/osdstage); else the checkout's build/."""
    env = os.environ.get("OSDSTAGE_BPF_DIR")
    if env:
        return env
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.exists(os.path.join(top, "osdstage.abi.json")):
        return top
    return os.path.normpath(os.path.join(top, "..", "build"))


def labels(pairs):
    """Enumerators -> labels by value: the common prefix (up to its last
    '_') dropped, lower case: [["WK_NONE", 0], ...] -> ["none", ...]."""
    if not pairs:
        return []
    names = [n for n, _ in pairs]
    prefix = os.path.commonprefix(names)
    prefix = prefix[:prefix.rfind("_") + 1]
    out = [None] * (max(v for _, v in pairs) + 1)
    for n, v in pairs:
        out[v] = n[len(prefix):].lower()
    return out


class Struct:
    """A struct of the header: its layout, and (un)packing of its scalar
    members by name (arrays and nested structs are skipped as bytes)."""

    def __init__(self, name, d):
        self.name, self.size = name, d["size"]
        self.members = d["members"]
        self.by_name = {m["name"]: m for m in self.members}
        fmt, pos, names = "<", 0, []
        for m in self.members:
            if m["offset"] > pos:
                fmt += "%dx" % (m["offset"] - pos)
            if m["kind"] in _FMT:
                fmt += _FMT[m["kind"]]
                names.append(m["name"])
            else:
                fmt += "%dx" % m["size"]
            pos = m["offset"] + m["size"]
        if self.size > pos:
            fmt += "%dx" % (self.size - pos)
        self._struct = struct.Struct(fmt)
        self.scalars = tuple(names)
        assert self._struct.size == self.size, name

    def offset(self, member):
        return self.by_name[member]["offset"]

    def unpack(self, raw, offset=0):
        return dict(zip(self.scalars, self._struct.unpack_from(raw, offset)))

    def ctype(self):
        """A ctypes.Structure with this layout (scalars and char arrays by
        name, anything else as padding bytes)."""
        fields, pos = [], 0
        for m in self.members:
            if m["offset"] > pos:
                fields.append(("_pad%d" % pos, ctypes.c_uint8 *
                               (m["offset"] - pos)))
            if m["kind"] in _CTYPES:
                t = _CTYPES[m["kind"]]
            elif m["kind"] == "array" and (m["type"] or "").startswith(
                    "char["):
                t = ctypes.c_char * m["size"]
            else:
                t = ctypes.c_uint8 * m["size"]
            fields.append((m["name"], t))
            pos = m["offset"] + m["size"]
        if self.size > pos:
            fields.append(("_pad%d" % pos, ctypes.c_uint8 * (self.size - pos)))
        return type(self.name, (ctypes.Structure,),
                    {"_pack_": 1, "_fields_": fields})

    def pack(self, **values):
        """The struct's bytes: the given scalar members, zeros elsewhere."""
        unknown = set(values) - set(self.scalars)
        if unknown:
            raise KeyError("%s has no member %s" % (self.name, unknown.pop()))
        return self._struct.pack(*[values.get(n, 0) for n in self.scalars])


class Abi:
    def __init__(self, d, path="<abi>"):
        self.path = path
        self.enums = d["enums"]
        self._structs = d["structs"]
        self.programs = d["programs"]          # name -> ELF section
        self.globals = d["globals"]            # section -> [variable]
        self._cache = {}

    def enum(self, name):
        """{enumerator: value} of enum `name`, in declaration order."""
        return dict((n, v) for n, v in self.enums[name])

    def const(self, enumerator):
        for pairs in self.enums.values():
            for n, v in pairs:
                if n == enumerator:
                    return v
        raise KeyError(enumerator)

    def labels(self, enum_name):
        return labels(self.enums[enum_name])

    def struct(self, name):
        s = self._cache.get(name)
        if s is None:
            s = self._cache[name] = Struct(name, self._structs[name])
        return s

    def section(self, program):
        """The ELF section (= attach type) of BPF program `program`; a
        program the object lacks is a build older than the code."""
        try:
            return self.programs[program]
        except KeyError:
            raise UserError("%s has no BPF program %s: the BPF objects are "
                            "older than this code (run: make)" % (
                                self.path, program)) from None

    def programs_in(self, *prefixes):
        """Program names whose section starts with one of `prefixes`."""
        return [p for p, sec in sorted(self.programs.items())
                if sec.split("/")[0] in prefixes]

    def ctypes_globals(self, section, structs=None):
        """A ctypes.Structure laid out like the object's `section` (for
        .rodata: the const volatile settings), each variable at its
        offset. Arrays of structs take their element type from
        `structs` {struct name: ctypes type}."""
        fields, pos = [], 0
        for i, g in enumerate(self.globals.get(section, [])):
            if g["offset"] > pos:
                fields.append(("_pad%d" % i, ctypes.c_uint8 *
                               (g["offset"] - pos)))
            fields.append((g["name"], self._ctype(g, structs or {})))
            pos = g["offset"] + g["size"]
        return type("Globals" + section.replace(".", "_"),
                    (ctypes.Structure,), {"_pack_": 1, "_fields_": fields})

    def _ctype(self, g, structs):
        if g["kind"] in _CTYPES:
            return _CTYPES[g["kind"]]
        if g["kind"] == "array":
            elem = g["type"].split("[")[0]
            if elem.startswith("struct ") and elem[7:] in structs:
                et = structs[elem[7:]]
                return et * (g["size"] // ctypes.sizeof(et))
        return ctypes.c_uint8 * g["size"]


_LOADED = {}


def load(name="osdstage", bpf_dir=None):
    """The ABI of build/NAME.bpf.o (cached)."""
    path = os.path.join(bpf_dir or default_bpf_dir(), name + ".abi.json")
    a = _LOADED.get(path)
    if a is None:
        try:
            with open(path) as f:
                a = _LOADED[path] = Abi(json.load(f), path)
        except OSError:
            raise UserError("cannot read %s: the BPF objects are not built "
                            "(run: make)" % path)
        except (ValueError, KeyError) as e:
            raise UserError("%s is damaged (%s): run make again" % (path, e))
    return a
