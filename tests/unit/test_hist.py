"""Histogram bucketing and percentile maths against hand-computed values."""
import pytest

from cephlat import abi
from cephlat.model import hist
from cephlat.model.hist import Hist, render_log2, slot_bounds_us, slot_of_ns

from conftest import BUILD


def test_constants_match_bpf_header():
    """model/hist.py does the BPF side's slot maths (offline readers need
    no build): its constants are the header's, through the build."""
    a = abi.load("osdstage", BUILD)
    assert a.const("HIST_FRAC_BITS") == hist.HIST_FRAC_BITS
    assert a.const("HIST_SUB_BITS") == hist.HIST_SUB_BITS
    assert a.const("HIST_SLOTS") == hist.HIST_SLOTS
    assert a.struct("stage_stats").by_name["slots"]["size"] == \
        8 * hist.HIST_SLOTS
    # the BPF side masks slot indexes with HIST_SLOTS - 1
    assert hist.HIST_SLOTS & (hist.HIST_SLOTS - 1) == 0


@pytest.mark.parametrize("ns,slot", [
    (0, 0),            # 0 units
    (62, 0),           # 62*16/1000 = 0.992 -> 0
    (63, 1),           # 1.008 units
    (437, 6),          # 6.99 units
    (500, 8),          # 8 units = 0.5 us: first log-linear slot
    (1000, 16),        # 16 units = 1 us: p=4, sub=0 -> 8 + 8 + 0
    (1999, 23),        # 31.98 units: p=4, sub=7 -> 23
    (2000, 24),        # 2 us
    (3000, 28),        # 48 units: p=5, (48>>2)&7 = 4 -> 8+16+4
    (1500000, 8 + 11 * 8 + 3),   # 24000 units: p=14, (24000>>11)&7 = 3
])
def test_slot_of_ns_hand_computed(ns, slot):
    assert slot_of_ns(ns) == slot


def test_slot_bounds_contain_their_values():
    for ns in (1, 100, 999, 1000, 1234, 65432, 10**6, 123456789, 10**10):
        lo, hi = slot_bounds_us(slot_of_ns(ns))
        us = ns / 1000.0
        assert lo <= us < hi + 1e-9, (ns, lo, hi)
        # log-linear: a slot above 0.5 us is at most 12.5 % wide
        if us >= 0.5:
            assert (hi - lo) / lo <= 0.125 + 1e-12


def test_huge_values_clamp_to_last_slot():
    assert slot_of_ns(10**30) == hist.HIST_SLOTS - 1


def test_slots_are_contiguous():
    for s in range(1, 300):
        assert slot_bounds_us(s - 1)[1] == slot_bounds_us(s)[0]


def test_percentiles_hand_computed():
    # 100 values: 90 of 1 us, 5 of 97 us and 5 of 103 us
    h = Hist.from_ns([1000] * 90 + [97000] * 5 + [103000] * 5)
    # p50 -> rank 50 in slot [1, 1.125): 1 + 0.125*(50-0.5)/90
    assert h.percentile_us(0.50) == pytest.approx(1 + 0.125 * 49.5 / 90)
    # p90 -> rank 90, still the 1 us slot: 1 + 0.125*89.5/90
    assert h.percentile_us(0.90) == pytest.approx(1 + 0.125 * 89.5 / 90)
    # p99 -> rank 99 in slot [96, 104) holding 10: 96 + 8*(99-90-0.5)/10
    assert h.percentile_us(0.99) == pytest.approx(96 + 8 * 8.5 / 10)
    assert h.mean_us() == pytest.approx((90 * 1 + 5 * 97 + 5 * 103) / 100)
    assert h.max_us() == 103.0


def test_percentile_never_exceeds_max():
    h = Hist.from_ns([96000])
    assert h.percentile_us(1.0) <= 96.0
    assert Hist().percentile_us(0.5) == 0.0


def test_log2_buckets_usecs_exact():
    h = Hist.from_ns([500, 1500, 2000, 3999, 4000, 1500000])
    b = h.log2_buckets(1)
    assert b[0] == (0, 2, 2)        # 0.5 us and 1.5 us
    assert b[1] == (2, 4, 2)        # 2.0 and 3.999
    assert b[2] == (4, 8, 1)
    assert b[-1] == (1024, 2048, 1)
    assert sum(c for _, _, c in b) == h.count


def test_log2_buckets_msecs():
    h = Hist.from_ns([500000, 3000000, 5000000])   # 0.5, 3, 5 ms
    assert h.log2_buckets(1000) == [(0, 2, 1), (2, 4, 1), (4, 8, 1)]


def test_merge_and_summary():
    a = Hist.from_ns([1000, 2000])
    b = Hist.from_ns([4000])
    a.merge(b)
    s = a.summary()
    assert s["count"] == 3 and s["max_us"] == 4.0
    assert s["mean_us"] == pytest.approx(7 / 3, abs=1e-3)


def test_render_log2_bcc_style():
    lines = render_log2([(0, 2, 1), (2, 4, 4)], "usecs", width=8)
    assert lines[0].split() == ["usecs", ":", "count", "distribution"]
    assert lines[1].rstrip().endswith("|**      |")
    assert lines[2].rstrip().endswith("|********|")
    assert "0 -> 1" in lines[1] and "2 -> 3" in lines[2]
    assert all(len(l) < 80 for l in render_log2([(0, 2, 10**6)], "usecs"))
