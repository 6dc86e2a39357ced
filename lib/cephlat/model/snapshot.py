"""A snapshot: the cumulative state of one run at one moment (live: read
from the kernel maps; offline: recorded in a capture)."""


class Snapshot:
    """Cumulative state read from the kernel at one moment; `interval`
    holds the histograms of the report interval it closed (exact: each
    measurement lands in one interval) and `gen` that interval's number."""

    def __init__(self, hists, counters, threads, shards, devs, mono_ns,
                 interval=None, gen=None):
        self.hists, self.counters = hists, counters
        self.threads, self.shards, self.devs = threads, shards, devs
        self.mono_ns = mono_ns
        self.interval, self.gen = interval, gen
        # the messenger throttles' counters (ceph/throttles.py), read from
        # the OSD's admin socket at the same moment (live runs); a
        # capture's snapshot holds instead their deltas over the interval
        # it closed, as the live report had them (throttles_over)
        self.throttles = None
        self.throttles_over = None
        # the run-queue waits of the interval it closed, by the process
        # that ran instead (engine/mapread.py take_behind; None: not
        # read, as in a capture)
        self.behind = None

    def __iter__(self):             # hists, counters = tracer.snapshot()
        return iter((self.hists, self.counters))

