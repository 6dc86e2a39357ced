"""The wall clock of a capture's timestamps, and how far to trust it.

A capture's timestamps are CLOCK_MONOTONIC ns (bpf_ktime_get_ns). To line
captures of several hosts up, each carries samples of the host's wall
clock against them: at the start and at the end (capture/format.py), so
that a reader maps a timestamp to wall time by the offset interpolated
between the two (NTP slews the wall clock while the monotonic one runs
on) and knows how good the mapping is:

- read_ns: the width of the closest of a few monotonic / wall / monotonic
  read brackets (the mapping's own error on this host);
- which clock it is (clocks.clock_id: the kernel's boot id): files of
  one kernel share its monotonic clock and line up exactly;
- the kernel's NTP state (adjtimex(2), read-only): whether a time daemon
  keeps the clock synchronized, and its estimated and maximum error. Two
  hosts' wall clocks agree within the sum of their errors; where that is
  more than a segment between them (a network hop), the segment cannot be
  told from the clocks (say so, never print a negative time).
"""
import numpy as np

from ..clocks import clock_id, fake_skew_ns, ntp_state, wall_minus_mono


def sample(tries=5):
    """One sample of the wall clock against the monotonic one:
    {"mono_ns", "offset_ns" (wall - monotonic), "read_ns" (the bracket),
    and ntp_state()'s fields}; the lab's fake skew (clocks.fake_skew_ns)
    added to the offset."""
    mono, offset, read = wall_minus_mono(tries)
    offset += fake_skew_ns()
    out = {"mono_ns": mono, "offset_ns": offset, "read_ns": read}
    ntp = ntp_state()
    out.update(ntp if ntp is not None else
               {"synced": False, "esterror_ns": 0, "maxerror_ns": 0})
    return out


def offset_at(samples, mono_ns):
    """wall - monotonic at `mono_ns`: interpolated between the first and the
    last of `samples` (sorted by mono_ns), held beyond them; exact in
    integer ns (offsets_at's for one timestamp)."""
    if not samples:
        return 0
    a, b = samples[0], samples[-1]
    if b["mono_ns"] <= a["mono_ns"] or mono_ns <= a["mono_ns"]:
        return a["offset_ns"]
    if mono_ns >= b["mono_ns"]:
        return b["offset_ns"]
    return a["offset_ns"] + int(_step(a, b, mono_ns))


def offsets_at(samples, mono):
    """offset_at for an array of monotonic ns -> int64 array."""
    mono = np.asarray(mono, np.int64)
    if not samples:
        return np.zeros(len(mono), np.int64)
    a, b = samples[0], samples[-1]
    out = np.full(len(mono), a["offset_ns"], np.int64)
    if b["mono_ns"] <= a["mono_ns"]:
        return out
    out[mono >= b["mono_ns"]] = b["offset_ns"]
    mid = (mono > a["mono_ns"]) & (mono < b["mono_ns"])
    out[mid] = a["offset_ns"] + _step(a, b, mono[mid]).astype(np.int64)
    return out


def _step(a, b, mono):
    """How far the offset moved from sample a at `mono` (a number or an
    array, between a's and b's monotonic times), to the ns: the change
    alone goes through a float, never the offset itself (a wall offset
    of 1.7e18 ns as a float is 256 ns coarse)."""
    f = (mono - a["mono_ns"]) / float(b["mono_ns"] - a["mono_ns"])
    return np.round(f * (b["offset_ns"] - a["offset_ns"]))


def uncertainty_ns(samples):
    """How far a timestamp's wall time may be off on this host: the widest
    read bracket, plus the time daemon's estimated error where it keeps
    the clock synchronized; None when it does not (no bound is known)."""
    if not samples or not all(s["synced"] for s in samples):
        return None
    return max(s["read_ns"] + s["esterror_ns"] for s in samples)
