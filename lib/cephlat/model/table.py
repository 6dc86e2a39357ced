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


def match(a, b):
    """Rows of key columns b (a tuple of int arrays) -> the index of the
    row of a with equal keys (the first such), or -1."""
    na = len(a[0])
    if not na or not len(b[0]):
        return np.full(len(b[0]), -1, np.int64)
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
