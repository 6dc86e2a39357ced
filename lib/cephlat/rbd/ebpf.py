"""librbd client I/O recorded with eBPF: uprobes on the client's librbd
and librados (probes/rbdrecord.bpf.c), and on its Objecter (each op sent to
an OSD and its reply), their records drained from the ring buffer, decoded
(records.py) and written as a CTF trace of librbd's own tracepoints and
rbdrecord's OSD-op events (events.py)."""
import collections
import ctypes
import mmap
import os
import re
import socket
import struct

from . import cacheconf, events, records
from .. import abi as abimod, clocks
from ..ceph import librbd_cache, objecter
from ..engine import bpf, bpfsys, native
from ..engine.elfsym import ElfSymbols
from ..errors import UserError

# (library, symbol, programs of probes/rbdrecord.bpf.c attached to it):
# entry or return probe as the program's section says (the build's ABI)
PROBES = [
    ("librados", "rados_ioctx_create", ("ioctx_create", "ioctx_create_ret")),
    ("librbd", "rbd_open", ("open_rw", "open_ret")),
    ("librbd", "rbd_open_read_only", ("open_ro", "open_ret")),
    ("librbd", "rbd_close", ("close_enter", "close_ret")),
    ("librbd", "rbd_aio_read", ("aio_read", "aio_ret")),
    ("librbd", "rbd_aio_read2", ("aio_read2", "aio_ret")),
    ("librbd", "rbd_aio_write", ("aio_write", "aio_ret")),
    ("librbd", "rbd_aio_write2", ("aio_write2", "aio_ret")),
    ("librbd", "rbd_aio_discard", ("aio_discard", "aio_ret")),
    ("librbd", "rbd_aio_flush", ("aio_flush", "aio_ret")),
    ("librbd", "rbd_aio_writesame", ("aio_writesame", "aio_ret")),
    ("librbd", "rbd_aio_write_zeroes", ("aio_write_zeroes", "aio_ret")),
    ("librbd", "rbd_aio_get_return_value", ("get_rval", "get_rval_ret")),
    ("librbd", "rbd_aio_release", ("aio_release",)),
    ("librbd", "rbd_flush", ("flush_enter", "flush_ret")),
]

# the Debian package with each library's symbol table
DBG_PACKAGES = {"librados": "librados2-dbg", "librbd": "librbd1-dbg"}

# the programs of probes/rbdrecord.bpf.c on each Objecter role
OBJECTER_PROGRAMS = {"send": ("osdop_send",),
                     "reply": ("osdop_reply", "osdop_reply_ret")}


# the programs of probes/rbdrecord/cache.bpf.h on each cache role
CACHE_PROGRAMS = {"dispatch": "cache_dispatch", "done": "cache_done",
                  "oc_write": "cache_oc_write"}


def library_version(path):
    """The Ceph version a client library was built from ("16.2.15"), or
    None: libceph-common keeps the bare version string (its
    ceph_version_to_str), the daemons keep it beside "ceph version "."""
    with ElfSymbols(path) as elf:
        v = elf.version_string()
    if v:
        return v
    try:
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        found = set(re.findall(rb"\0(\d{2}\.\d+\.\d+)\0", m))
    finally:
        m.close()
    return found.pop().decode() if len(found) == 1 else None


class ObjecterSite:
    """Where the Objecter of one client is -- every copy: libceph-common
    exports it; up to Reef (18.2) Ceph also links a hidden copy into
    librados and one into librbd (librbd sends its data ops through its
    own copy; the replies come through the copy that made the Objecter,
    librados'); Tentacle's (20.2) use libceph-common's (objecter.COPIES).
    Hidden copies are found in the -dbg packages' symbol tables
    (librados2-dbg, librbd1-dbg). -> release, offsets, sites; or why it is
    not recorded (`why`)."""

    def __init__(self, libs):
        self.release = self.offsets = None
        self.sites = []         # (role, path, file offset, what)
        self.why = None
        version = None
        for name in objecter.LIBS:
            if libs.get(name) and os.path.exists(libs[name]):
                version = version or library_version(libs[name])
        key = ".".join(version.split(".")[:2]) if version else None
        self.release = version
        if key not in objecter.OFFSETS:
            self.why = ("no checked Objecter offsets for Ceph %s" % (
                version or "of unknown version"))
            return
        missing = []
        for name in objecter.COPIES[key]:
            path = libs.get(name)
            if not path or not os.path.exists(path):
                continue
            with ElfSymbols(path, debug=True) as elf:
                found = []
                for role, (q, params) in objecter.FUNCS.items():
                    syms = elf.find(q, re.compile(params))
                    if len(syms) == 1:
                        found.append((role, path, elf.mark_cet(syms[0])
                                      .probe_offset, "%s in %s" % (
                                          q, os.path.basename(path))))
            if len(found) == len(objecter.FUNCS):
                self.sites += found
            elif name != "libceph-common":
                missing.append(name)
        if missing or not self.sites:
            # a copy not probed would lose its ops: all or nothing
            self.sites = []
            self.why = ("no Objecter symbols in %s (install %s)" % (
                " and ".join(missing), " and ".join(
                    DBG_PACKAGES[m] for m in missing))) if missing else \
                "no Objecter symbols in the client's libraries"
            return
        self.offsets = objecter.OFFSETS[key]

    def rodata(self):
        """The BPF globals: objecter_on and the offsets (zeros when off)."""
        out = {"objecter_on": int(self.offsets is not None)}
        out.update(self.offsets or {})
        return out


class CacheSite:
    """Where librbd's cache is in one client (librbd_cache.FUNCS: local
    symbols, in librbd1-dbg's symbol table): all of them or none (a
    write seen taken and never finished would be held for ever), and
    ObjectCacherObjectDispatch::write when it is there too. -> sites
    (role, path, file offset, what), the offsets; or why the cache is not
    recorded (`why`: one line; the calls and OSD ops still are)."""

    def __init__(self, libs, version=None):
        self.sites, self.offsets, self.why = [], None, None
        path = libs.get("librbd")
        if not path or not os.path.exists(path):
            self.why = "no librbd"
            return
        for name in objecter.LIBS:      # libceph-common says it
            if not version and libs.get(name) and os.path.exists(libs[name]):
                version = library_version(libs[name])
        key = ".".join(version.split(".")[:2]) if version else None
        if key not in librbd_cache.OFFSETS:
            self.why = "no checked offsets of librbd's cache for Ceph %s" % (
                version or "of unknown version")
            return
        found = {}
        with ElfSymbols(path, debug=True) as elf:
            for role, (q, params) in dict(librbd_cache.FUNCS,
                                          **librbd_cache.OPTIONAL).items():
                syms = elf.find(q, re.compile(params))
                if len(syms) == 1:
                    found[role] = (role, path, elf.mark_cet(syms[0])
                                   .probe_offset, "%s in %s" % (
                                       q, os.path.basename(path)))
        if not all(r in found for r in librbd_cache.FUNCS):
            self.why = "no symbols of librbd's cache in %s (install %s)" % (
                os.path.basename(path), librbd_cache.DBG_PACKAGE)
            return
        self.sites = list(found.values())
        self.offsets = dict(librbd_cache.OFFSETS[key])
        self.offsets["oc_on"] = int("oc_write" in found)

    def rodata(self):
        """The BPF globals: cache_on and the offsets (zeros when off)."""
        out = {"cache_on": int(self.offsets is not None)}
        out.update(self.offsets or {})
        return out


class EbpfRecorder:
    """Uprobes on the client's librbd/librados, drained into a trace."""

    POLL_S = 0.1

    def __init__(self, pid, out_dir, libs, bpf_dir, comm=None):
        self.pid, self.out_dir = pid, out_dir
        self.abi = abimod.load("rbdrecord", bpf_dir)
        self.obj = bpf.BPFObject(os.path.join(bpf_dir, "rbdrecord.bpf.o"))
        self.objecter = ObjecterSite(libs)
        self.cache = CacheSite(libs, self.objecter.release)
        self.obj.set_rodata(self.abi.ctypes_globals(".rodata")(
            targ_tgid=pid, **self.objecter.rodata(), **self.cache.rodata()))
        self.libs = libs
        self.bpf_dir = bpf_dir
        self.comm = comm
        self.reordered = 0
        self.counts = collections.Counter()
        self._last_ts = 0

    def start(self):
        # one uprobe_multi link per program and library when the kernel
        # has them (>= 6.6): taking them off at the end waits for the
        # kernel once for all, not once per function (~3.5 s for the 41
        # functions of a Reef client)
        if bpfsys.uprobe_multi_supported():
            self.obj.use_uprobe_multi(self.abi.programs_in("uprobe",
                                                           "uretprobe"))
        self.obj.load()
        sites = collections.OrderedDict()   # (prog, path) -> [(at, 0, what)]
        for lib, path in self.libs.items():
            with ElfSymbols(path) as elf:
                for plib, sym, progs in PROBES:
                    found = elf.find(sym) if plib == lib else None
                    if not found:
                        continue    # e.g. rbd_aio_write_zeroes before 15.2
                    # on a CET build (Reef, Tentacle) after endbr64
                    at = elf.mark_cet(found[0]).probe_offset
                    for p in progs:
                        sites.setdefault((p, path), []).append((at, 0, sym))
        if self.objecter.offsets:
            for role, path, at, what in self.objecter.sites:
                for p in OBJECTER_PROGRAMS[role]:
                    sites.setdefault((p, path), []).append((at, 0, what))
        for role, path, at, what in self.cache.sites:
            sites.setdefault((CACHE_PROGRAMS[role], path), []).append(
                (at, 0, what))
        for (p, path), probes in sites.items():
            self.obj.attach_uprobes(
                p, path, probes, pid=self.pid,
                retprobe=self.abi.section(p) == "uretprobe")
        self.lib = lib = native.load(self.bpf_dir)
        self.h = lib.raw_open(self.obj.map("events").fd)
        if not self.h:
            raise UserError("cannot read the ring buffer")
        self.decoder = records.Decoder(self.pid, self.abi)
        # the wall clock of the trace's monotonic stamps (osdstage -r
        # lines a client's trace up with the OSDs' captures by it), and
        # how closely it was read
        _, offset, width = clocks.wall_minus_mono()
        skew = clocks.fake_skew_ns()
        ntp = clocks.ntp_state() or {"synced": False, "esterror_ns": 0}
        env = {"hostname": socket.gethostname(), "pid": self.pid,
               "procname": self.comm or "", "librbd": self.libs.get(
                   "librbd", ""), "clock_read_ns": width,
               "clock_id": clocks.clock_id(), "fake_clock_skew_ns": skew,
               "clock_synced": int(ntp["synced"]),
               "clock_esterror_ns": ntp["esterror_ns"],
               "cache_recorded": int(bool(self.cache.sites))}
        env.update(cacheconf.env_fields(cacheconf.configured(self.pid)))
        self.writer = events.open_trace(self.out_dir, env, offset + skew)

    def poll(self):
        n = self.lib.raw_consume(self.h)
        if n < 0:
            raise UserError("reading the ring buffer failed: %s" %
                            os.strerror(-n))
        if not n:
            return 0
        data = ctypes.string_at(self.lib.raw_data(self.h), n)
        self.lib.raw_reset(self.h)
        evs = self.decoder.decode(data)
        evs.sort(key=lambda e: e[0])
        for ts, name, ctx, vals in evs:
            if ts < self._last_ts:       # raced the previous batch
                ts = self._last_ts
                self.reordered += 1
            self._last_ts = ts
            self.writer.write(name, ts, *vals, ctx=ctx)
            self.counts[name] += 1
        return len(evs)

    def lost(self):
        """{label of enum rbd_lost: count}: "ring", "completions",
        "unread", "cache_unread", "unknown_comp", "pcs"."""
        m = self.obj.map("lost")
        labels = self.abi.labels("rbd_lost")
        out = {}
        for i in range(self.abi.enum("rbd_lost")["RBD_LOST__COUNT"]):
            raw = m.lookup(struct.pack("<I", i), 8)
            out[labels[i]] = struct.unpack("<Q", raw)[0] if raw else 0
        return out

    def stop(self):
        """Detach, drain, close the trace. -> (counts, lost, reordered)"""
        self.obj.detach()
        self.poll()
        lost = self.lost()
        self.writer.close()
        self.lib.raw_close(self.h)
        self.obj.close()
        return self.counts, lost, self.reordered
