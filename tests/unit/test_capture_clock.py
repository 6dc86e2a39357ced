"""capture/clock.py: the wall clock against a capture's timestamps.

- a sample's offset is the wall clock less the monotonic one, within its
  own read bracket (and the bracket is a few clock reads wide);
- the kernel's NTP state is read without changing anything (adjtimex
  with modes 0): the same twice, maximum error at least the estimate;
- a timestamp between two samples gets the offset interpolated between
  them (a time daemon slews the wall clock), held beyond them;
- the uncertainty is the widest bracket plus the daemon's estimate, and
  unknown (None) when the clock was not kept synchronized.
"""
import time

from cephlat.capture import clock


def test_sample_is_wall_minus_monotonic_within_its_bracket():
    for _ in range(5):
        s = clock.sample()
        m0 = time.monotonic_ns()
        w = time.time_ns()
        m1 = time.monotonic_ns()
        # the two offsets, each within its bracket of the truth (and the
        # wall clock does not step between two reads a few us apart)
        assert abs((w - (m0 + m1) // 2) - s["offset_ns"]) <= \
            s["read_ns"] + (m1 - m0) + 10 ** 6, (s, m0, w, m1)
        assert 0 < s["read_ns"] < 10 ** 7, s
        assert s["mono_ns"] < m1


def test_ntp_state_is_read_not_changed():
    a, b = clock.ntp_state(), clock.ntp_state()
    assert a is not None and set(a) == {"synced", "esterror_ns",
                                        "maxerror_ns"}
    assert a["synced"] == b["synced"] and isinstance(a["synced"], bool)
    assert a["maxerror_ns"] >= a["esterror_ns"] >= 0, a


def _s(mono, off, read=100, synced=True, est=0):
    return {"mono_ns": mono, "offset_ns": off, "read_ns": read,
            "synced": synced, "esterror_ns": est, "maxerror_ns": est}


def test_offset_interpolated_between_samples_and_held_beyond():
    samples = [_s(1000, 5000), _s(3000, 5400)]
    assert clock.offset_at(samples, 1000) == 5000
    assert clock.offset_at(samples, 2000) == 5200
    assert clock.offset_at(samples, 2500) == 5300
    assert clock.offset_at(samples, 500) == 5000
    assert clock.offset_at(samples, 9000) == 5400
    assert clock.offset_at(samples[:1], 9000) == 5000
    assert clock.offset_at([], 9000) == 0


def test_uncertainty_known_only_for_a_synchronized_clock():
    assert clock.uncertainty_ns([_s(0, 0, 300, est=2000),
                                 _s(9, 0, 100, est=5000)]) == 5100
    assert clock.uncertainty_ns([_s(0, 0), _s(9, 0, synced=False)]) is None
    assert clock.uncertainty_ns([]) is None
