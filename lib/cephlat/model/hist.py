"""Latency histograms: the slot layout shared with probes/osdstage.h,
percentiles, and bcc-style text rendering.

Kernel side: values are counted in units of 1/16 us. Values below 8 units
get one slot each; above, each power of two is split into 8 sub-buckets.
Power-of-two microsecond boundaries are slot boundaries, so the log2 usecs
histogram is an exact sum of slots.
"""
import math
from itertools import compress

# Mirrors probes/osdstage.h (tests/unit/test_hist.py checks it).
HIST_FRAC_BITS = 4
HIST_SUB_BITS = 3
HIST_SUB = 1 << HIST_SUB_BITS
HIST_SLOTS = 512
UNITS_PER_US = 1 << HIST_FRAC_BITS


def slot_of_ns(ns):
    """The slot a duration in ns lands in (same arithmetic as the BPF side)."""
    v = (int(ns) << HIST_FRAC_BITS) // 1000
    if v < HIST_SUB:
        return v
    p = v.bit_length() - 1
    slot = HIST_SUB + (p - HIST_SUB_BITS) * HIST_SUB + \
        ((v >> (p - HIST_SUB_BITS)) & (HIST_SUB - 1))
    return min(slot, HIST_SLOTS - 1)


def slot_bounds_units(slot):
    """[lo, hi) of a slot in 1/16-us units."""
    if slot < HIST_SUB:
        return slot, slot + 1
    p = (slot - HIST_SUB) // HIST_SUB + HIST_SUB_BITS
    sub = (slot - HIST_SUB) % HIST_SUB
    shift = p - HIST_SUB_BITS
    return (HIST_SUB + sub) << shift, (HIST_SUB + sub + 1) << shift


def slot_bounds_us(slot):
    lo, hi = slot_bounds_units(slot)
    return lo / UNITS_PER_US, hi / UNITS_PER_US


# per slot: its bounds in us, and the power-of-two usecs bucket holding it
# (exact: a slot's low bound is a multiple of its bucket's), computed once
_BOUNDS_US = [slot_bounds_us(i) for i in range(HIST_SLOTS)]
_SLOT_INDEX = range(HIST_SLOTS)
_LOG2_US = [0 if lo < 2 else int(lo).bit_length() - 1
            for lo, _ in _BOUNDS_US]


class Hist:
    """Aggregated latency of one stage: count, sum, max and fine slots."""

    __slots__ = ("count", "sum_ns", "max_ns", "slots")

    def __init__(self, count=0, sum_ns=0, max_ns=0, slots=None):
        self.count, self.sum_ns, self.max_ns = count, sum_ns, max_ns
        self.slots = list(slots) if slots is not None else [0] * HIST_SLOTS

    @classmethod
    def from_ns(cls, values):
        """The histogram of durations `values` (ns: any iterable; numpy,
        slot by slot as slot_of_ns)."""
        import numpy as np
        from .events import slots_of_ns
        ns = np.asarray(values if hasattr(values, "__len__") else
                        list(values), np.uint64)
        if not len(ns):
            return cls()
        return cls(len(ns), int(ns.sum(dtype=np.uint64)), int(ns.max()),
                   np.bincount(slots_of_ns(ns),
                               minlength=HIST_SLOTS).tolist())

    def add_ns(self, ns, n=1):
        self.count += n
        self.sum_ns += ns * n
        self.max_ns = max(self.max_ns, ns)
        self.slots[slot_of_ns(ns)] += n

    def merge(self, other):
        if not other.count:
            return
        self.count += other.count
        self.sum_ns += other.sum_ns
        self.max_ns = max(self.max_ns, other.max_ns)
        # a window merges one histogram per op, most of them of one value:
        # its slot is its sum's; else the non-empty slots are found in C
        mine, theirs = self.slots, other.slots
        if other.count == 1:
            i = slot_of_ns(other.sum_ns)
            if theirs[i] == 1:
                mine[i] += 1
                return
        for i in compress(_SLOT_INDEX, theirs):
            mine[i] += theirs[i]

    def mean_us(self):
        return self.sum_ns / self.count / 1000.0 if self.count else 0.0

    def max_us(self):
        return self.max_ns / 1000.0

    def percentile_us(self, q):
        """The q-quantile (0 < q <= 1) in us: the slot holding rank
        ceil(q*N), linearly interpolated inside the slot, never above max."""
        return self.percentiles_us((q,))[0]

    def percentiles_us(self, qs):
        """percentile_us of each of the ascending quantiles `qs`, in one
        pass over the slots."""
        n = sum(self.slots)
        if n == 0:
            return [0.0] * len(qs)
        ranks = [max(1, math.ceil(q * n - 1e-9)) for q in qs]
        out, j, cum = [], 0, 0
        for i, c in enumerate(self.slots):
            if not c:
                continue
            while j < len(ranks) and cum + c >= ranks[j]:
                lo, hi = _BOUNDS_US[i]
                v = lo + (hi - lo) * (ranks[j] - cum - 0.5) / c
                out.append(min(v, self.max_us()) if self.max_ns else v)
                j += 1
            if j == len(ranks):
                return out
            cum += c
        return out + [self.max_us()] * (len(ranks) - j)

    def log2_buckets(self, unit_us=1):
        """bcc-style power-of-two buckets in `unit_us` units (1 = usecs,
        1000 = msecs): [(lo, hi, count)] with bucket 0 = [0, 2) units and
        bucket k = [2^k, 2^(k+1)). For usecs the counts are exact; for other
        units each fine slot goes to the bucket holding its midpoint."""
        counts = {}
        for i, c in enumerate(self.slots):
            if not c:
                continue
            if unit_us == 1:
                k = _LOG2_US[i]
            else:
                lo, hi = _BOUNDS_US[i]
                v = (lo + hi) / 2 / unit_us
                k = 0 if v < 2 else int(math.floor(math.log2(v)))
            counts[k] = counts.get(k, 0) + c
        if not counts:
            return []
        out = []
        for k in range(0, max(counts) + 1):
            lo = 0 if k == 0 else 1 << k
            out.append((lo, 1 << (k + 1), counts.get(k, 0)))
        # start at the first non-empty bucket
        first = next(i for i, b in enumerate(out) if b[2])
        return out[first:]

    def summary(self):
        p50, p90, p99 = self.percentiles_us((0.50, 0.90, 0.99))
        return {
            "count": self.count,
            "mean_us": round(self.mean_us(), 3),
            "p50_us": round(p50, 3),
            "p90_us": round(p90, 3),
            "p99_us": round(p99, 3),
            "max_us": round(self.max_us(), 3),
        }


def render_log2(buckets, unit_name, width=40):
    """bcc's print_log2_hist look:
         usecs               : count     distribution
             0 -> 1          : 3        |****                                    |
    """
    lines = []
    if not buckets:
        return lines
    peak = max(c for _, _, c in buckets) or 1
    lines.append("%-24s : count     distribution" % ("     " + unit_name))
    for lo, hi, c in buckets:
        stars = int(round(c * width / peak)) if c else 0
        lines.append("%10d -> %-10d : %-8d |%-*s|" % (lo, hi - 1, c, width,
                                                       "*" * stars))
    return lines
