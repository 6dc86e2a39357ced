"""Named numpy columns of equal length: how the end-to-end reads keep
hundreds of thousands of ops (a client's calls and OSD ops, a capture's
ops with request ids) without a Python object each."""
import numpy as np

NONE = -1       # a time not recorded (no reply, no release, no stamp)


class Table:
    """Columns by name (t.send, t.cols["send"]), all of one length."""

    def __init__(self, **cols):
        self.cols = cols

    def __getattr__(self, k):
        try:
            return self.__dict__["cols"][k]
        except KeyError:
            raise AttributeError(k)

    def __len__(self):
        return len(next(iter(self.cols.values()))) if self.cols else 0

    def take(self, idx):
        """The rows `idx` (an index or mask array), as a new Table."""
        return Table(**{k: v[idx] for k, v in self.cols.items()})


class Matcher:
    """Rows of key columns (a tuple of int arrays, `a`) found by their
    keys: find(b) -> per row of b the index of the row of a with equal
    keys (the first such), or -1. Keys of non-negative numbers that fit
    63 bits together are packed into one number and searched (a's sorted
    once: several b's are looked up against one a); others are sorted
    with each b."""

    def __init__(self, a):
        self.a = a
        self.bits = [int(np.max(c)).bit_length() if len(c) else 0
                     for c in a]
        self.packed = all(len(c) == 0 or int(np.min(c)) >= 0 for c in a) \
            and sum(self.bits) <= 63
        if self.packed:
            k = self._pack(a)
            o = np.argsort(k, kind="stable")
            self.keys = k[o]
            self.rows = o.astype(np.int32) if len(o) < 1 << 31 else o

    def _pack(self, cols):
        k = np.zeros(len(cols[0]), np.int64)
        for c, bits in zip(cols, self.bits):
            k <<= bits
            k |= np.asarray(c).astype(np.int64)
        return k

    def find(self, b):
        n = len(b[0])
        if not len(self.a[0]) or not n:
            return np.full(n, -1, np.int64)
        if not self.packed:
            return _match_sorted(self.a, b)
        fits = np.ones(n, bool)
        for c, bits in zip(b, self.bits):
            fits &= (c >= 0) & (c < (1 << bits))
        out = np.full(n, -1, np.int64)
        k = self._pack([np.where(fits, c, 0) for c in b])
        i = np.minimum(np.searchsorted(self.keys, k), len(self.keys) - 1)
        hit = fits & (self.keys[i] == k)
        out[hit] = self.rows[i[hit]]
        return out


def tenths_us(ns):
    """ns (integers, or floats holding integers; nan: none) -> us to 0.1,
    halves up, from the integers: a float's rounding would take
    9394.45 us down or up by its binary error."""
    return np.floor((np.asarray(ns, np.float64) + 50) / 100) / 10.0


def pcts(v):
    """p50, p99 and max of v, to 0.1 (None when empty)."""
    v = np.sort(np.asarray(v, float))
    if not len(v):
        return None
    return {"p50": round(float(v[len(v) // 2]), 1),
            "p99": round(float(v[min(len(v) - 1, int(len(v) * 0.99))]), 1),
            "max": round(float(v[-1]), 1)}


def match(a, b):
    """Rows of key columns b -> the index of the row of a with equal
    keys (the first such), or -1 (Matcher(a).find(b))."""
    return Matcher(a).find(b)


def _match_sorted(a, b):
    """match() by sorting a and b together (keys of any range)."""
    na = len(a[0])
    cols = [np.concatenate([x, y]) for x, y in zip(a, b)]
    side = np.concatenate([np.zeros(na, np.int8),
                           np.ones(len(b[0]), np.int8)])
    idx = np.concatenate([np.arange(na), np.arange(len(b[0]))])
    o = np.lexsort((idx, side) + tuple(reversed(cols)))
    new = np.ones(len(o), bool)
    same = np.ones(len(o) - 1, bool)
    for c in cols:
        same &= c[o][1:] == c[o][:-1]
    new[1:] = ~same
    # the group's first row is its a row, if it has one
    first = np.maximum.accumulate(np.where(new, np.arange(len(o)), 0))
    hit = side[o][first] == 0
    out = np.full(len(b[0]), -1, np.int64)
    isb = side[o] == 1
    out[idx[o][isb & hit]] = idx[o][first[isb & hit]]
    return out


def concat_parts(parts, cols, key=None):
    """Parts (dicts of arrays) -> one dict of `cols`, each column
    concatenated and the parts' copies let go as it goes (the peak: the
    result and one column more); key: the column whose stable order the
    rows are put in (None: as they come)."""
    parts = [p for p in parts if p]
    order = None
    if key is not None and parts:
        order = np.argsort(np.concatenate([p[key] for p in parts]),
                           kind="stable")
    out = {}
    for c in cols:
        v = np.concatenate([p.pop(c) for p in parts]) if parts else \
            np.zeros(0, np.int64)
        out[c] = v[order] if order is not None else v
        del v
        give_back()         # the parts' pages, column by column
    return out


_TRIM = []


def give_back():
    """Hand the heap's free pages back to the system (glibc's
    malloc_trim). A read that builds and frees many arrays of a few
    hundred kB (a span's columns) leaves holes in the heap that glibc
    keeps mapped: without this its RSS grows to twice what it holds.
    Nothing where the C library has no malloc_trim."""
    if not _TRIM:
        import ctypes
        try:
            _TRIM.append(ctypes.CDLL(None).malloc_trim)
        except (OSError, AttributeError):
            _TRIM.append(None)
    if _TRIM[0] is not None:
        _TRIM[0](0)
