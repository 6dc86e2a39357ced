"""Which ops are sent as traces: a consistent sample, the same on every
host (the OSDs of an op's primary and replicas, the client's recorder),
decided from the request id alone, so that a sampled write has its spans
from every host that saw it; and the ops over a latency threshold on the
host where they were slow.

The rule (kept simple enough for a BPF program to repeat it): a request
id's client number and transaction id mixed as
  h = (tid * 0x9E3779B97F4A7C15 + num) mod 2**64
and kept when (h >> 32) % N == 0 (1 in N)."""
import numpy as np

_GOLDEN = 0x9E3779B97F4A7C15


def mix(num, tid):
    """The request id's hash (numpy arrays or ints) as uint64."""
    num = np.asarray(num).astype(np.uint64)
    tid = np.asarray(tid).astype(np.uint64)
    with np.errstate(over="ignore"):
        return tid * np.uint64(_GOLDEN) + num


def sampled(num, tid, every):
    """Whether each request id is in the 1-in-`every` sample."""
    if every <= 1:
        return np.ones(np.shape(np.asarray(num)), bool)
    return (mix(num, tid) >> np.uint64(32)) % np.uint64(every) == 0
