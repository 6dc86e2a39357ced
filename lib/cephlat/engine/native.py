"""build/libcephlat_rec.so (lib/native/recorder.c): the C side of
recording, loaded through ctypes with every function's signature."""
import ctypes
import os

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
            ("raw_close", None, [vp])):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib
