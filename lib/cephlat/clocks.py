"""This host's wall clock against its monotonic clock, read once: the one
bracketed read both the BPF side's wall offset (engine/tracer.py: Ceph's
stamps are wall clock, bpf_ktime_get_ns monotonic) and a capture's clock
samples (capture/clock.py) are made of; which clock it is, and how well
the host's time daemon keeps it."""
import ctypes
import ctypes.util
import os
import re
import time

from .errors import UserError

# lab aid (osdstage(8), ENVIRONMENT): record captures and traces as if
# this host's wall clock were this far ahead and its own
FAKE_SKEW_ENV = "OSDSTAGE_FAKE_CLOCK_SKEW"
_UNITS = {"ns": 1, "us": 1000, "ms": 1000000, "s": 1000000000}


def duration_ns(text, what):
    """'+5ms', '-300us', '2.5ms', '1s', '1500ns' -> ns; one clear line
    when it is not one."""
    m = re.fullmatch(r"\s*([+-]?\d+(?:\.\d+)?)\s*(ns|us|ms|s)\s*", text or "")
    if not m:
        raise UserError("%s: %r is no duration (e.g. 5ms, -300us, 1.5s)"
                        % (what, text))
    return int(round(float(m.group(1)) * _UNITS[m.group(2)]))


def fake_skew_ns():
    """The lab's fake skew of this host's wall clock (FAKE_SKEW_ENV), 0
    when unset."""
    v = os.environ.get(FAKE_SKEW_ENV)
    return duration_ns(v, FAKE_SKEW_ENV) if v else 0


def clock_id():
    """Which monotonic clock the stamps are of: the kernel's boot id (files
    of one kernel share it and line up exactly, whatever the wall clock
    does); with the lab's fake skew, a clock of its own."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "unknown"
    skew = fake_skew_ns()
    return "%s+skew%d" % (boot, skew) if skew else boot


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


def wall_minus_mono(tries=3):
    """(monotonic ns, wall - monotonic ns, the read's width ns): of `tries`
    monotonic / wall / monotonic brackets, the narrowest, the wall reading
    taken at the monotonic midpoint."""
    best = None
    for _ in range(tries):
        m0 = time.monotonic_ns()
        w = time.time_ns()
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, (m0 + m1) // 2, w)
    read, mono, wall = best
    return mono, wall - mono, read
