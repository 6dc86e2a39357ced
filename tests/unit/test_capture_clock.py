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


def test_one_timestamp_and_an_array_are_offset_alike_to_the_ns():
    """offset_at (one timestamp: the join's, --op's) and offsets_at (the
    columns') at a real wall offset (1.7e18 ns, 256 ns coarse as a
    float): equal to the ns, and to the exact interpolation."""
    import random
    from fractions import Fraction
    rnd = random.Random(7)
    base = 1764460000 * 10 ** 9 + 123456789
    for _ in range(4):
        m0 = rnd.randrange(10 ** 9, 10 ** 12)
        m1 = m0 + rnd.randrange(10 ** 9, 10 ** 12)
        samples = [_s(m0, base), _s(m1, base + rnd.randrange(-10 ** 6,
                                                              10 ** 6))]
        mono = [m0 - 5, m0, m1, m1 + 9] + [rnd.randrange(m0, m1)
                                          for _ in range(500)]
        arr = clock.offsets_at(samples, mono)
        for m, o in zip(mono, arr.tolist()):
            assert clock.offset_at(samples, m) == o
            t = min(max(m, m0), m1)
            exact = base + Fraction((samples[1]["offset_ns"] - base) *
                                    (t - m0), m1 - m0)
            assert abs(o - exact) <= 1, (m, o, exact)


def test_uncertainty_known_only_for_a_synchronized_clock():
    assert clock.uncertainty_ns([_s(0, 0, 300, est=2000),
                                 _s(9, 0, 100, est=5000)]) == 5100
    assert clock.uncertainty_ns([_s(0, 0), _s(9, 0, synced=False)]) is None
    assert clock.uncertainty_ns([]) is None


def test_durations_and_one_line_for_a_bad_one():
    import pytest
    from cephlat.clocks import duration_ns
    from cephlat.errors import UserError
    assert duration_ns("+5ms", "x") == 5000000
    assert duration_ns("-300us", "x") == -300000
    assert duration_ns("1.5s", "x") == 1500000000
    assert duration_ns("42ns", "x") == 42
    for bad in ("5", "ms", "5 m", "", "5ms5"):
        with pytest.raises(UserError) as e:
            duration_ns(bad, "--clock-offset h2=%s" % bad)
        assert "--clock-offset" in str(e.value) and \
            "\n" not in str(e.value)


def test_the_labs_fake_skew_moves_the_wall_clock_and_names_its_own(
        monkeypatch):
    from cephlat import clocks
    monkeypatch.delenv(clocks.FAKE_SKEW_ENV, raising=False)
    plain, base = clock.sample(), clocks.clock_id()
    assert len(base) == 36 and base == clocks.clock_id()    # the boot id
    monkeypatch.setenv(clocks.FAKE_SKEW_ENV, "50ms")
    skewed = clock.sample()
    # the offset moved by the skew (the two reads are within 1 ms)
    assert abs(skewed["offset_ns"] - plain["offset_ns"] - 50 * 10 ** 6) \
        < 10 ** 6
    assert clocks.clock_id() == base + "+skew50000000"


class _Cap:
    """A capture's clock: wall - monotonic = off0 + ppm x monotonic."""

    def __init__(self, off0, ppm, first_ns=0):
        self.off0, self.ppm, self.first_ns = off0, ppm, first_ns
        self.trace = object()

    def wall_offset_ns(self, ns):
        return self.off0 + int(ns * self.ppm / 1e6)

    def mono(self, wall):
        """the exact inverse, by bisection"""
        lo, hi = wall - self.off0 - 10 ** 12, wall - self.off0 + 10 ** 12
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if mid + self.wall_offset_ns(mid) < wall:
                lo = mid
            else:
                hi = mid
        return hi


def test_pictures_line_hosts_up_where_the_op_is():
    """Two hosts whose clocks drift apart at 100 ppm: 10 minutes into the
    capture, their timestamps are moved onto the first's clock with the
    offsets of that moment (within a microsecond), not the capture's
    start (60 ms off by then)."""
    from cephlat.cli.merged import _deltas, mono_at
    a = _Cap(1_700_000_000 * 10 ** 9, 0.0)
    b = _Cap(1_700_000_000 * 10 ** 9 + 5 * 10 ** 6, 100.0, first_ns=0)
    late = 600 * 10 ** 9                    # a's ns, 10 min in
    wall = late + a.wall_offset_ns(late)
    assert abs(mono_at(b, wall) - b.mono(wall)) <= 1
    d = _deltas([a, b], late)
    assert d[0] == 0
    assert abs(b.mono(wall) + d[1] - late) <= 1000
    start = _deltas([a, b], 0)[1]
    assert abs(b.mono(wall) + start - late) > 50 * 10 ** 6
    # slots of one capture share its clock: no delta at all
    same = _Cap(a.off0, 0.0)
    same.trace = a.trace
    assert _deltas([a, same], late) == [0, 0]
