"""build/libcephlat_rec.so (lib/native/recorder.c): the C side of
recording, loaded through ctypes with every function's signature, and
RawRing, a ring buffer its thread drains."""
import ctypes
import errno
import os
import struct

from ..errors import UserError


def load(bpf_dir):
    """build/libcephlat_rec.so (lib/native/recorder.c) with its functions'
    signatures: the capture recorder (rec_*) and the raw drain (raw_*)."""
    lib_path = os.path.join(bpf_dir, "libcephlat_rec.so")
    try:
        lib = ctypes.CDLL(lib_path, use_errno=True)
    except OSError as e:
        raise UserError("cannot load %s (run: make): %s" % (lib_path, e))
    vp = ctypes.c_void_p
    for name, res, args in (
            ("rec_open", vp, [ctypes.c_int, ctypes.c_char_p,
                              ctypes.c_char_p, ctypes.c_uint]),
            ("rec_start", ctypes.c_int, [vp, ctypes.c_uint]),
            ("rec_consume", ctypes.c_int, [vp]),
            ("rec_flush", ctypes.c_int, [vp]),
            ("rec_stats", None, [vp, ctypes.POINTER(ctypes.c_uint64)]),
            ("rec_passes", None, [vp, ctypes.POINTER(ctypes.c_uint64)]),
            ("rec_close", None, [vp]),
            ("rec_halt", None, [vp]),
            ("raw_open", vp, [ctypes.c_int]),
            ("raw_consume", ctypes.c_long, [vp]),
            ("raw_data", vp, [vp]),
            ("raw_reset", None, [vp]),
            ("raw_start", ctypes.c_int, [vp, ctypes.c_uint]),
            ("raw_take", ctypes.c_long, [vp, ctypes.POINTER(vp)]),
            ("raw_free", None, [vp]),
            ("raw_close", None, [vp])):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


_SIZE = struct.Struct("<I")


def split_records(data):
    """The records of a raw-mode buffer (u32 length, 4 bytes of padding,
    the record, padded to 8), oldest first ([bytes])."""
    out, pos, n = [], 0, len(data)
    view = memoryview(data)
    while pos + 8 <= n:
        (size,) = _SIZE.unpack_from(data, pos)
        out.append(bytes(view[pos + 8:pos + 8 + size]))
        pos += 8 + (size + 7) // 8 * 8
    return out


class RawRing:
    """BPF ring buffer map `ring_map` drained every `interval_us` by a
    thread of the library (raw mode): what the programs submit is taken
    off the ring at once, however late take() comes."""

    def __init__(self, bpf_dir, ring_map, interval_us):
        self.lib = load(bpf_dir)
        ctypes.set_errno(0)
        self.h = self.lib.raw_open(ring_map.fd)
        if not self.h:
            raise UserError("cannot read ring buffer %s: %s" % (
                ring_map.name, os.strerror(ctypes.get_errno() or errno.EIO)))
        rc = self.lib.raw_start(self.h, interval_us)
        if rc < 0:
            self.close()
            raise UserError("cannot start draining ring buffer %s: %s" % (
                ring_map.name, os.strerror(-rc)))

    def take(self):
        """The records gathered since the last take, oldest first."""
        if not self.h:
            return []
        ptr = ctypes.c_void_p()
        n = self.lib.raw_take(self.h, ctypes.byref(ptr))
        if n < 0:
            raise OSError(-n, "draining a ring buffer: %s" %
                          os.strerror(-n))
        if not n:
            return []
        try:
            data = ctypes.string_at(ptr, n)
        finally:
            self.lib.raw_free(ptr)
        return split_records(data)

    def close(self):
        if self.h:
            self.lib.raw_close(self.h)
            self.h = None
