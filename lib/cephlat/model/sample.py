"""Which ops are sent as traces: a consistent sample, the same on every
host (the OSDs of an op's primary and replicas, the client's recorder),
decided from the request id alone, so that a sampled write has its spans
from every host that saw it; and the ops over a latency threshold on the
host where they were slow.

The rule (kept simple enough for a BPF program to repeat it): a request
id's client number and transaction id mixed as
  h = (tid * 0x9E3779B97F4A7C15 + num) mod 2**64
and kept when (h >> 32) % N == 0 (1 in N). The exporter's BPF programs
repeat it at each op's end (probes/osdstage/ops.bpf.h, trace_op;
TraceChoice is what they are told)."""
from collections import namedtuple

_GOLDEN = 0x9E3779B97F4A7C15
# 1 op in DEFAULT_EVERY by default, in every tool that sends traces
# (osdstage -r --otlp, osdstage-exporter --otlp, rbdrecord --otlp): the
# same ops, so that each one's part joins the others'
DEFAULT_EVERY = 100


def reqid_name(num, inc, tid):
    """A client op's request id as the OSD names it (and trace ids are
    made of): client.4161.0:11457."""
    return "client.%d.%d:%d" % (num, inc, tid)


def mix(num, tid):
    """The request id's hash (numpy arrays or ints) as uint64."""
    import numpy as np      # here: request ids' names need no numpy
    num = np.asarray(num).astype(np.uint64)
    tid = np.asarray(tid).astype(np.uint64)
    with np.errstate(over="ignore"):
        return tid * np.uint64(_GOLDEN) + num


def sampled(num, tid, every):
    """Whether each request id is in the 1-in-`every` sample."""
    import numpy as np
    if every <= 1:
        return np.ones(np.shape(np.asarray(num)), bool)
    return (mix(num, tid) >> np.uint64(32)) % np.uint64(every) == 0


# Which ops the exporter's BPF programs send as traces (osdstage-exporter
# --otlp): every: 1 in `every` by request id (0: no sample); over_us: and
# those that took at least this long on the OSD (None: no threshold);
# rate: at most this many a second from one tracer, all its OSDs (0: no
# cap)
TraceChoice = namedtuple("TraceChoice", "every over_us rate")
# every op, no rate cap: what the programs hand over for --by (a live
# run's and the exporter's breakdown by client, pool, PG or image)
EVERY_OP = TraceChoice(1, None, 0)


def sampled_one(num, tid, every):
    """sampled() of one request id, in Python ints: what the BPF side
    computes in 64-bit unsigned arithmetic (every 0: no sample)."""
    if every <= 1:
        return every == 1
    h = (tid * _GOLDEN + num) & 0xFFFFFFFFFFFFFFFF
    return (h >> 32) % every == 0
