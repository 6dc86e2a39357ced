"""Reading the BPF side's statistics: the per-CPU histograms of the
`stats` map (two halves, one per report parity) and the counters."""
import struct

import numpy as np

from ..model.hist import Hist, slot_bounds_us
from . import bpf


class StatsReader:
    """Reads the per-CPU `stats` map into cumulative Hists."""

    def __init__(self, stats_map, vocab, abi):
        self.map, self.vocab = stats_map, vocab
        self.ncpu = bpf.num_possible_cpus()
        self.stride = (stats_map.value_size + 7) // 8 * 8
        self.words = self.stride // 8
        st = abi.struct("stage_stats")
        self.count, self.sum, self.max, self.slots = (
            st.offset(m) // 8 for m in ("count", "sum_ns", "max_ns", "slots"))
        self.nslots = st.by_name["slots"]["size"] // 8

    def index(self, stage_id, half, slot):
        """The stats map key of (stage, half, target): probes/
        osdstage.bpf.c, map "stats"."""
        return stage_id + (slot * 2 + half) * self.vocab.max_stages

    def _key(self, stage_id, half, slot):
        return struct.pack("<I", self.index(stage_id, half, slot))

    def read(self, stage_id, half=0, slot=0):
        raw = self.map.lookup(self._key(stage_id, half, slot),
                              self.stride * self.ncpu)
        return self.parse(raw)

    def read_all(self, half=0, slot=0):
        """[Hist] of every stage id of (half, slot): one batch read where
        the kernel has them (an exporter's refresh reads them all)."""
        n, size = self.vocab.n_ids, self.stride * self.ncpu
        raw = self.map.lookup_range(self.index(0, half, slot), n, size)
        if raw is None:
            return [self.read(sid, half, slot) for sid in range(n)]
        # every stage's per-CPU copies summed at once; a Hist built only
        # where something was counted (most ids count nothing)
        a = np.frombuffer(raw, dtype=np.uint64, count=n * self.ncpu *
                          self.words).reshape(n, self.ncpu, self.words)
        counts = a[:, :, self.count].sum(axis=1)
        out = [Hist() for _ in range(n)]
        for i in np.nonzero(counts)[0]:
            h = out[i]
            h.count = int(counts[i])
            h.sum_ns = int(a[i, :, self.sum].sum())
            h.max_ns = int(a[i, :, self.max].max())
            h.slots = a[i, :, self.slots:self.slots + self.nslots].sum(
                axis=0).tolist()
        return out

    def parse(self, raw, stride=None, at=0):
        """A Hist from per-CPU values `raw`: struct stage_stats at byte
        `at` of each CPU's value (`stride` bytes apart)."""
        h = Hist()
        if raw is None:
            return h
        w = (stride or self.stride) // 8
        a = np.frombuffer(raw, dtype=np.uint64,
                          count=self.ncpu * w).reshape(self.ncpu, w)
        a = a[:, at // 8:]
        counts = a[:, self.count]
        if not counts.any():
            return h
        h.count = int(counts.sum())
        h.sum_ns = int(a[:, self.sum].sum())
        h.max_ns = int(a[:, self.max].max())
        h.slots = a[:, self.slots:self.slots + self.nslots].sum(
            axis=0).tolist()
        return h

    def clear(self, half, slot=0):
        if self.map.zero_range(self.index(0, half, slot), self.vocab.n_ids,
                               self.stride * self.ncpu):
            return
        zero = bytes(self.stride * self.ncpu)
        for sid in range(self.vocab.n_ids):
            self.map.update(self._key(sid, half, slot), zero)


def read_counters(cmap, vocab, abi, slot=0, half=None):
    """The counters of target slot `slot`: CNT__MAX per slot and interval
    half (probes/osdstage.h HALF_SHIFT); half None: both summed (the
    totals so far), else that half's (complete once its interval closed)."""
    ncpu = bpf.num_possible_cpus()
    ids = abi.enum("counter_id")
    n = abi.const("CNT__MAX")
    halves = (0, 1) if half is None else (half,)
    out = {name: 0 for name in vocab.counters}
    for h in halves:
        base = (slot * 2 + h) * n
        raw = cmap.lookup_range(base, n, 8 * ncpu)      # one call for all
        if raw is not None:
            per = struct.unpack("<%dQ" % (n * ncpu), raw)
            for name in vocab.counters:
                i = ids["CNT_" + name.upper()]
                out[name] += sum(per[i * ncpu:(i + 1) * ncpu])
            continue
        for name in vocab.counters:
            raw = cmap.lookup(struct.pack(
                "<I", base + ids["CNT_" + name.upper()]), 8 * ncpu)
            out[name] += sum(struct.unpack("<%dQ" % ncpu, raw)) if raw else 0
    return out


def hist_delta(cur, prev):
    """cur - prev of cumulative histograms. The interval's max is exact when
    the cumulative max grew in it; otherwise it is bounded by the top of the
    highest non-empty slot."""
    if prev is None:
        return cur
    slots = [a - b for a, b in zip(cur.slots, prev.slots)]
    mx = cur.max_ns
    if cur.max_ns == prev.max_ns:
        top = max((i for i, c in enumerate(slots) if c), default=None)
        mx = 0 if top is None else min(
            cur.max_ns, int(slot_bounds_us(top)[1] * 1000))
    return Hist(cur.count - prev.count, cur.sum_ns - prev.sum_ns, mx, slots)

