"""The wall clock of a capture's timestamps, and how far to trust it.

A capture's timestamps are CLOCK_MONOTONIC ns (bpf_ktime_get_ns). To line
captures of several hosts up, each carries samples of the host's wall
clock against them: at the start and at the end (capture/format.py), so
that a reader maps a timestamp to wall time by the offset interpolated
between the two (NTP slews the wall clock while the monotonic one runs
on) and knows how good the mapping is:

- read_ns: the width of the closest of a few monotonic / wall / monotonic
  read brackets (the mapping's own error on this host);
- the kernel's NTP state (adjtimex(2), read-only): whether a time daemon
  keeps the clock synchronized, and its estimated and maximum error. Two
  hosts' wall clocks agree within the sum of their errors; where that is
  more than a segment between them (a network hop), the segment cannot be
  told from the clocks (issue 26: say so, never print a negative time).
"""
import ctypes
import ctypes.util

from ..clocks import wall_minus_mono

# struct timex (include/uapi/linux/timex.h, 64-bit): what adjtimex reads
_LONG, _INT = ctypes.c_long, ctypes.c_int


class _Timex(ctypes.Structure):
    _fields_ = [("modes", ctypes.c_uint), ("offset", _LONG),
                ("freq", _LONG), ("maxerror", _LONG), ("esterror", _LONG),
                ("status", _INT), ("constant", _LONG),
                ("precision", _LONG), ("tolerance", _LONG),
                ("tv_sec", _LONG), ("tv_usec", _LONG), ("tick", _LONG),
                ("ppsfreq", _LONG), ("jitter", _LONG), ("shift", _INT),
                ("stabil", _LONG), ("jitcnt", _LONG), ("calcnt", _LONG),
                ("errcnt", _LONG), ("stbcnt", _LONG), ("tai", _INT),
                ("_pad", _INT * 11)]


STA_UNSYNC = 0x0040           # the clock is not synchronized
TIME_ERROR = 5                # adjtimex's answer for an unsynchronized clock
_libc = None


def ntp_state():
    """{"synced": bool, "esterror_ns", "maxerror_ns"} from adjtimex(2) with
    modes 0 (reads, changes nothing); None where the call fails."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6",
                            use_errno=True)
    tx = _Timex()
    state = _libc.adjtimex(ctypes.byref(tx))
    if state < 0:
        return None
    return {"synced": state != TIME_ERROR and not tx.status & STA_UNSYNC,
            "esterror_ns": max(0, tx.esterror) * 1000,
            "maxerror_ns": max(0, tx.maxerror) * 1000}


def sample(tries=5):
    """One sample of the wall clock against the monotonic one:
    {"mono_ns", "offset_ns" (wall - monotonic), "read_ns" (the bracket),
    and ntp_state()'s fields}."""
    mono, offset, read = wall_minus_mono(tries)
    out = {"mono_ns": mono, "offset_ns": offset, "read_ns": read}
    ntp = ntp_state()
    out.update(ntp if ntp is not None else
               {"synced": False, "esterror_ns": 0, "maxerror_ns": 0})
    return out


def offset_at(samples, mono_ns):
    """wall - monotonic at `mono_ns`: interpolated between the first and the
    last of `samples` (sorted by mono_ns), held beyond them."""
    if not samples:
        return 0
    a, b = samples[0], samples[-1]
    if b["mono_ns"] <= a["mono_ns"] or mono_ns <= a["mono_ns"]:
        return a["offset_ns"]
    if mono_ns >= b["mono_ns"]:
        return b["offset_ns"]
    f = (mono_ns - a["mono_ns"]) / float(b["mono_ns"] - a["mono_ns"])
    return int(round(a["offset_ns"] + f * (b["offset_ns"] - a["offset_ns"])))


def uncertainty_ns(samples):
    """How far a timestamp's wall time may be off on this host: the widest
    read bracket, plus the time daemon's estimated error where it keeps
    the clock synchronized; None when it does not (no bound is known)."""
    if not samples or not all(s["synced"] for s in samples):
        return None
    return max(s["read_ns"] + s["esterror_ns"] for s in samples)
