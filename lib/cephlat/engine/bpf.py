"""Minimal ctypes binding to libbpf.so.1 (Debian's libbpf1).

Only what the tools need: open a compiled BPF object, set read-only globals
before load, load, attach uprobes (with a cookie) and tracepoints, read and
clear maps. libbpf's own log lines are captured and surfaced in errors.

Uprobes come two ways. Classic: one perf-event link per function
(bpf_program__attach_uprobe_opts). uprobe_multi (kernel >= 6.6): one link
for many functions of one binary, with a cookie each; unregistering waits
for an RCU grace period per link (~0.1 s here), so detaching N functions
costs one wait instead of N. Debian bookworm's libbpf 1.1 predates
bpf_program__attach_uprobe_multi, so the link is created with the bpf(2)
syscall directly (attach_uprobe_multi), on programs loaded with the
expected attach type BPF_TRACE_UPROBE_MULTI (use_uprobe_multi, before
load); such a program cannot take a classic uprobe, and the other way
round: choose before load (bpfsys.uprobe_multi_supported).

Why ctypes: libbpf is the reference loader for CO-RE objects and ships as a
shared library on every distribution; binding a dozen functions keeps the
run-time dependency to libbpf1 alone (no compiler, no kernel headers, no BCC).
"""
import ctypes
import ctypes.util
import errno
import os

from ..errors import UserError
from .bpfsys import (BPF_F_UPROBE_MULTI_RETURN, BPF_LINK_CREATE,
                     BPF_TRACE_UPROBE_MULTI, UprobeMultiLinkAttr, sys_bpf)

_LIBBPF_NAMES = ("libbpf.so.1", "libbpf.so")

LIBBPF_WARN, LIBBPF_INFO, LIBBPF_DEBUG = 0, 1, 2

_log = []          # recent libbpf messages, newest last
_LOG_KEEP = 50

_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                             ctypes.c_void_p)


class _UprobeOpts(ctypes.Structure):
    # struct bpf_uprobe_opts (libbpf >= 0.8); sz lets newer libbpf accept it.
    _fields_ = [("sz", ctypes.c_size_t),
                ("ref_ctr_offset", ctypes.c_size_t),
                ("bpf_cookie", ctypes.c_uint64),
                ("retprobe", ctypes.c_bool),
                ("func_name", ctypes.c_char_p)]


_lib = None
_libc = None
_printer = None


def _load():
    global _lib, _libc, _printer
    if _lib is not None:
        return _lib
    last = None
    for name in _LIBBPF_NAMES:
        try:
            _lib = ctypes.CDLL(name, use_errno=True)
            break
        except OSError as e:
            last = e
    if _lib is None:
        raise UserError("libbpf.so.1 not found (%s); install it: apt-get install "
                        "libbpf1" % last)
    _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    _libc.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                ctypes.c_char_p, ctypes.c_void_p]
    L = _lib
    vp, cp, i, u32, u64, sz = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                               ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t)
    sigs = {
        "libbpf_set_print": (vp, [_PRINT_FN]),
        "libbpf_get_error": (ctypes.c_long, [vp]),
        "bpf_object__open_file": (vp, [cp, vp]),
        "bpf_object__load": (i, [vp]),
        "bpf_object__close": (None, [vp]),
        "bpf_object__find_map_by_name": (vp, [vp, cp]),
        "bpf_object__find_program_by_name": (vp, [vp, cp]),
        "bpf_object__next_program": (vp, [vp, vp]),
        "bpf_program__name": (cp, [vp]),
        "bpf_program__fd": (i, [vp]),
        "bpf_program__set_autoload": (i, [vp, ctypes.c_bool]),
        "bpf_program__set_expected_attach_type": (i, [vp, ctypes.c_int]),
        "bpf_map__fd": (i, [vp]),
        "bpf_map__initial_value": (vp, [vp, ctypes.POINTER(sz)]),
        "bpf_map__set_max_entries": (i, [vp, u32]),
        "bpf_map__value_size": (u32, [vp]),
        "bpf_map__key_size": (u32, [vp]),
        "bpf_map__max_entries": (u32, [vp]),
        "bpf_program__attach_uprobe_opts": (vp, [vp, ctypes.c_int, cp, sz,
                                                 ctypes.POINTER(_UprobeOpts)]),
        "bpf_program__attach_tracepoint": (vp, [vp, cp, cp]),
        "bpf_program__attach_perf_event": (vp, [vp, ctypes.c_int]),
        "bpf_program__attach": (vp, [vp]),
        "bpf_link__destroy": (i, [vp]),
        "bpf_map_lookup_elem": (i, [i, vp, vp]),
        "bpf_map_update_elem": (i, [i, vp, vp, u64]),
        "bpf_map_delete_elem": (i, [i, vp]),
        "bpf_map_get_next_key": (i, [i, vp, vp]),
        "bpf_map_lookup_batch": (i, [i, vp, vp, vp, vp,
                                     ctypes.POINTER(u32), vp]),
        "bpf_map_update_batch": (i, [i, vp, vp, ctypes.POINTER(u32), vp]),
        "libbpf_num_possible_cpus": (i, []),
        "bpf_enable_stats": (i, [ctypes.c_int]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(L, name)
        f.restype = res
        f.argtypes = args

    def printer(level, fmt, ap):
        buf = ctypes.create_string_buffer(65536)
        _libc.vsnprintf(buf, len(buf), fmt, ap)
        msg = buf.value.decode("utf-8", "replace").rstrip()
        if level <= LIBBPF_INFO and msg:
            _log.append(msg)
            del _log[:-_LOG_KEEP]
        if os.environ.get("OSDSTAGE_LIBBPF_DEBUG"):
            import sys
            sys.stderr.write("libbpf: %s\n" % msg)
        return 0

    _printer = _PRINT_FN(printer)
    L.libbpf_set_print(_printer)
    return L


def _ptr_error(ptr):
    """libbpf 1.x returns NULL and sets errno on error."""
    if not ptr:
        return ctypes.get_errno() or errno.EINVAL
    return 0


def last_log(n=3):
    """The last few warnings libbpf printed, for error messages."""
    lines = [l for l in _log if l]
    return "; ".join(lines[-n:])


def num_possible_cpus():
    return _load().libbpf_num_possible_cpus()


BPF_STATS_RUN_TIME = 0          # enum bpf_stats_type (UAPI)


def enable_run_stats():
    """Turn the kernel's BPF run statistics on (each program run also adds
    its time to its program's run_time_ns and run_cnt; for every program
    of the host, not only ours) until the returned descriptor is closed:
    an fd, or None where the kernel refuses (before Linux 5.8, or without
    CAP_SYS_ADMIN)."""
    fd = _load().bpf_enable_stats(BPF_STATS_RUN_TIME)
    return fd if fd >= 0 else None


# entries a batch read of a hash map asks for at a time (Map.items)
ITEMS_BATCH = 1024


class Map:
    def __init__(self, obj, ptr, name):
        L = _load()
        self.name = name
        self._ptr = ptr
        self.obj = obj
        self.fd = L.bpf_map__fd(ptr)
        self.key_size = L.bpf_map__key_size(ptr)
        self.value_size = L.bpf_map__value_size(ptr)
        self.max_entries = L.bpf_map__max_entries(ptr)

    def lookup(self, key_bytes, value_size):
        buf = ctypes.create_string_buffer(value_size)
        kb = ctypes.create_string_buffer(key_bytes, len(key_bytes))
        if _load().bpf_map_lookup_elem(self.fd, kb, buf) != 0:
            return None
        return buf.raw

    def update(self, key_bytes, value_bytes):
        kb = ctypes.create_string_buffer(key_bytes, len(key_bytes))
        vb = ctypes.create_string_buffer(value_bytes, len(value_bytes))
        if _load().bpf_map_update_elem(self.fd, kb, vb, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "bpf_map_update_elem(%s): %s" % (self.name,
                                                               os.strerror(e)))

    def lookup_range(self, first, n, value_size):
        """The values of array keys first .. first+n-1 in one system call
        (BPF_MAP_LOOKUP_BATCH; for a per-CPU array, value_size is every
        CPU's copy): n values back to back, or None where the kernel has no
        batch operations (the caller then reads key by key)."""
        L = _load()
        keys = ctypes.create_string_buffer(4 * n)
        vals = ctypes.create_string_buffer(value_size * n)
        out = ctypes.create_string_buffer(4)
        count = ctypes.c_uint32(n)
        # the batch starts after in_batch: the key before the first
        prev = ctypes.create_string_buffer(
            (first - 1).to_bytes(4, "little"), 4) if first else None
        r = L.bpf_map_lookup_batch(self.fd, prev, out, keys, vals,
                                   ctypes.byref(count), None)
        if (r != 0 and ctypes.get_errno() != errno.ENOENT) or \
                count.value != n:
            return None
        return vals.raw

    def zero_range(self, first, n, value_size):
        """Zero array keys first .. first+n-1 in one system call
        (BPF_MAP_UPDATE_BATCH); False where the kernel cannot."""
        keys = b"".join((first + k).to_bytes(4, "little") for k in range(n))
        kb = ctypes.create_string_buffer(keys, len(keys))
        vb = ctypes.create_string_buffer(value_size * n)
        count = ctypes.c_uint32(n)
        return _load().bpf_map_update_batch(self.fd, kb, vb,
                                            ctypes.byref(count), None) == 0 \
            and count.value == n

    def delete(self, key_bytes):
        kb = ctypes.create_string_buffer(key_bytes, len(key_bytes))
        return _load().bpf_map_delete_elem(self.fd, kb) == 0

    def items(self, value_size):
        """[(key bytes, value bytes)] of every entry of a hash map, in as
        few system calls as the kernel allows (BPF_MAP_LOOKUP_BATCH,
        ITEMS_BATCH entries a call; for a per-CPU map, value_size is every
        CPU's copy), else key by key. A map changing under the read may
        give an entry added meanwhile or miss one deleted, as key by key
        does."""
        L = _load()
        n = max(1, min(self.max_entries, ITEMS_BATCH))
        ks, vs = self.key_size, value_size
        keys = ctypes.create_string_buffer(ks * n)
        vals = ctypes.create_string_buffer(vs * n)
        # the kernel's position in a hash map is a u32 bucket index
        pos = [ctypes.create_string_buffer(max(8, ks)) for _ in range(2)]
        out, first = [], True
        while True:
            count = ctypes.c_uint32(n)
            r = L.bpf_map_lookup_batch(self.fd, None if first else pos[0],
                                       pos[1], keys, vals,
                                       ctypes.byref(count), None)
            err = ctypes.get_errno() if r != 0 else 0
            if r != 0 and err != errno.ENOENT:
                break                   # no batch operations (or ENOSPC)
            kr, vr = keys.raw, vals.raw
            out.extend((kr[i * ks:(i + 1) * ks], vr[i * vs:(i + 1) * vs])
                       for i in range(count.value))
            if err == errno.ENOENT:
                return out
            pos.reverse()
            first = False
        out = []
        for k in self.keys():
            v = self.lookup(k, value_size)
            if v is not None:
                out.append((k, v))
        return out

    def keys(self):
        L = _load()
        out = []
        cur = None
        nxt = ctypes.create_string_buffer(self.key_size)
        while True:
            if L.bpf_map_get_next_key(self.fd, cur, nxt) != 0:
                break
            out.append(nxt.raw)
            cur = ctypes.create_string_buffer(nxt.raw, self.key_size)
        return out


class Link:
    """A libbpf link (ptr), or a link fd of our own (fd: uprobe_multi);
    `n` functions attached by it."""

    def __init__(self, ptr, what, fd=None, n=1):
        self._ptr = ptr
        self._fd = fd
        self.multi = fd is not None
        self.what = what
        self.n = n
        self.tag = None        # the caller's (StageTracer: kind of probe)

    @property
    def alive(self):
        return bool(self._ptr) or self._fd is not None

    def destroy(self):
        if self._ptr:
            _load().bpf_link__destroy(self._ptr)
            self._ptr = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class BPFObject:
    """A compiled BPF object file: open, set rodata, load, attach."""

    def __init__(self, path):
        L = _load()
        if not os.path.exists(path):
            raise UserError("BPF object %s not found; run 'make' first" % path)
        self.path = path
        ctypes.set_errno(0)
        self._ptr = L.bpf_object__open_file(path.encode(), None)
        err = _ptr_error(self._ptr)
        if err:
            self._ptr = None
            raise UserError("cannot open BPF object %s: %s %s" % (
                path, os.strerror(err), last_log(1)))
        self.links = []
        self.loaded = False
        self.multi_progs = set()   # loaded for uprobe_multi links

    # --- before load ---------------------------------------------------
    def set_rodata(self, ctype_struct):
        """Copy a ctypes.Structure over the object's .rodata (const volatile
        globals) before load. The structure's layout must match the globals'
        order in the C source."""
        L = _load()
        m = self._find_map_ptr(".rodata")
        size = ctypes.c_size_t(0)
        addr = L.bpf_map__initial_value(m, ctypes.byref(size))
        if not addr:
            raise UserError("BPF object %s has no .rodata" % self.path)
        n = ctypes.sizeof(ctype_struct)
        if n > size.value:
            raise UserError("internal: rodata struct %d > %d bytes" %
                            (n, size.value))
        ctypes.memmove(addr, ctypes.addressof(ctype_struct), n)

    def set_max_entries(self, map_name, n):
        if _load().bpf_map__set_max_entries(self._find_map_ptr(map_name), n):
            raise UserError("cannot resize map %s" % map_name)

    def set_autoload(self, prog_name, on):
        _load().bpf_program__set_autoload(self._find_prog_ptr(prog_name), on)

    def use_uprobe_multi(self, progs):
        """Load uprobe programs `progs` for uprobe_multi links (before
        load; see bpfsys.uprobe_multi_supported()): they then attach with
        attach_uprobe_multi only. libbpf 1.1 passes the expected attach
        type of a SEC("uprobe") program through to the kernel at load."""
        L = _load()
        for prog in progs:
            if L.bpf_program__set_expected_attach_type(
                    self._find_prog_ptr(prog), BPF_TRACE_UPROBE_MULTI):
                raise UserError("internal: cannot set the attach type of "
                                "%s (object already loaded)" % prog)
            self.multi_progs.add(prog)

    def load(self):
        L = _load()
        ctypes.set_errno(0)
        r = L.bpf_object__load(self._ptr)
        if r != 0:
            err = -r if r < 0 else (ctypes.get_errno() or errno.EINVAL)
            hint = ""
            if err == errno.EPERM:
                hint = " (need root or CAP_BPF+CAP_PERFMON)"
            raise UserError("cannot load BPF programs: %s%s %s" % (
                os.strerror(err), hint, last_log(2)))
        self.loaded = True

    # --- lookup --------------------------------------------------------
    def _find_map_ptr(self, name):
        m = _load().bpf_object__find_map_by_name(self._ptr, name.encode())
        if not m:
            raise UserError("internal: map %s not in %s" % (name, self.path))
        return m

    def _find_prog_ptr(self, name):
        p = _load().bpf_object__find_program_by_name(self._ptr, name.encode())
        if not p:
            raise UserError("internal: program %s not in %s" % (name, self.path))
        return p

    def map(self, name):
        return Map(self, self._find_map_ptr(name), name)

    def programs(self):
        L = _load()
        out = []
        p = L.bpf_object__next_program(self._ptr, None)
        while p:
            out.append((L.bpf_program__name(p).decode(), L.bpf_program__fd(p)))
            p = L.bpf_object__next_program(self._ptr, p)
        return out

    # --- attach --------------------------------------------------------
    def attach_uprobe(self, prog, binary, offset, pid=-1, retprobe=False,
                      cookie=0, what=None):
        """Attach program `prog` at file offset `offset` of `binary`."""
        L = _load()
        opts = _UprobeOpts(sz=ctypes.sizeof(_UprobeOpts), ref_ctr_offset=0,
                           bpf_cookie=cookie, retprobe=retprobe, func_name=None)
        ctypes.set_errno(0)
        link = L.bpf_program__attach_uprobe_opts(
            self._find_prog_ptr(prog), pid, binary.encode(), offset,
            ctypes.byref(opts))
        err = _ptr_error(link)
        if err:
            raise UserError("cannot attach %s to %s+0x%x: %s %s" % (
                "uretprobe" if retprobe else "uprobe", what or binary, offset,
                os.strerror(err), last_log(1)))
        return self._add_link(Link(link, what))

    def attach_uprobe_multi(self, prog, binary, offsets, cookies, pid=-1,
                            retprobe=False, what=None):
        """Attach program `prog` (loaded for it: use_uprobe_multi) at every
        file offset of `offsets` in `binary`, each with its cookie
        (bpf_get_attach_cookie()), in process `pid` only (-1: any process
        mapping `binary`), at entry or (retprobe) return: one link."""
        L = _load()
        n = len(offsets)
        if not n or len(cookies) != n:
            raise UserError("internal: %d offsets, %d cookies" % (
                n, len(cookies)))
        path = ctypes.create_string_buffer(binary.encode())
        offs = (ctypes.c_uint64 * n)(*offsets)
        cks = (ctypes.c_uint64 * n)(*cookies)
        fd = L.bpf_program__fd(self._find_prog_ptr(prog))
        attr = UprobeMultiLinkAttr(
            prog_fd=fd, attach_type=BPF_TRACE_UPROBE_MULTI,
            path=ctypes.addressof(path), offsets=ctypes.addressof(offs),
            cookies=ctypes.addressof(cks), cnt=n,
            um_flags=BPF_F_UPROBE_MULTI_RETURN if retprobe else 0,
            pid=max(pid, 0))
        link, err = (-1, errno.EBADF) if fd < 0 else \
            sys_bpf(BPF_LINK_CREATE, attr)
        if link < 0:
            hint = ""
            if err == errno.ESRCH:
                hint = " (process %d has exited)" % pid
            elif err == errno.EINVAL and prog not in self.multi_progs:
                hint = " (%s was not loaded for uprobe_multi)" % prog
            raise UserError("cannot attach %s to %s in %s (%s): %s%s" % (
                "uretprobes" if retprobe else "uprobes",
                what or ", ".join("0x%x" % o for o in offsets), binary,
                prog, os.strerror(err), hint))
        return self._add_link(Link(None, what, fd=link, n=n))

    def attach_uprobes(self, prog, binary, probes, pid=-1, retprobe=False):
        """Attach `prog` at every (offset, cookie, what) of `probes`: one
        uprobe_multi link when the program was loaded for it, else one
        classic link each. -> [Link]"""
        if prog in self.multi_progs:
            whats = [w for _, _, w in probes]
            what = whats[0] if len(whats) == 1 else "%s and %d more" % (
                whats[0], len(whats) - 1)
            return [self.attach_uprobe_multi(
                prog, binary, [o for o, _, _ in probes],
                [c for _, c, _ in probes], pid=pid, retprobe=retprobe,
                what=what)]
        return [self.attach_uprobe(prog, binary, off, pid=pid,
                                   retprobe=retprobe, cookie=cookie,
                                   what=what)
                for off, cookie, what in probes]

    def attach_tracepoint(self, prog, category, name):
        L = _load()
        ctypes.set_errno(0)
        link = L.bpf_program__attach_tracepoint(
            self._find_prog_ptr(prog), category.encode(), name.encode())
        err = _ptr_error(link)
        if err:
            raise UserError("cannot attach tracepoint %s:%s: %s %s" % (
                category, name, os.strerror(err), last_log(1)))
        return self._add_link(Link(link, "%s:%s" % (category, name)))

    def attach_perf_event(self, prog, pfd, what):
        """Program `prog` on perf event fd `pfd` (the link owns it: it is
        closed with the link)."""
        L = _load()
        ctypes.set_errno(0)
        link = L.bpf_program__attach_perf_event(self._find_prog_ptr(prog),
                                                pfd)
        err = _ptr_error(link)
        if err:
            os.close(pfd)
            raise UserError("cannot attach %s: %s %s" % (
                what, os.strerror(err), last_log(1)))
        return self._add_link(Link(link, what))

    def attach(self, prog, what=None):
        """Attach by the program's section (tp_btf/..., tracepoint/...)."""
        L = _load()
        ctypes.set_errno(0)
        link = L.bpf_program__attach(self._find_prog_ptr(prog))
        err = _ptr_error(link)
        if err:
            raise UserError("cannot attach %s: %s %s" % (
                what or prog, os.strerror(err), last_log(1)))
        return self._add_link(Link(link, what or prog))

    def _add_link(self, link):
        # destroyed links go (duty cycles attach and detach for hours)
        self.links = [l for l in self.links if l.alive] + [link]
        return link

    def detach(self):
        """Destroy every link, concurrently: each waits for RCU grace
        periods, which concurrent waits share."""
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(Link.destroy, self.links))
        self.links = []

    def close(self):
        self.detach()
        if self._ptr:
            _load().bpf_object__close(self._ptr)
            self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
