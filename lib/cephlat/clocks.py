"""This host's wall clock against its monotonic clock, read once: the one
bracketed read both the BPF side's wall offset (engine/tracer.py: Ceph's
stamps are wall clock, bpf_ktime_get_ns monotonic) and a capture's clock
samples (capture/clock.py) are made of."""
import time


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
