"""A live run's breakdown by client, pool, PG or RBD image (osdstage
--by KEY without -r): each report interval's completed client ops of
each OSD, as `-r --by` gives a capture window's (model/breakdown.py).

The full tier's programs hand every client op over at its end (the
traces ring, struct op_trace of probes/osdstage.h: the records --otlp
chooses a sample of; here every op is chosen, with no rate cap): its
request id, PG, object name, enqueue, dequeue and end. An op the ring had
no room for is counted, never guessed ("missed" in the report's "by").
Pool and image names come from the cluster's names, looked up as a
capture looks them up (ceph/clusternames.py's NamesLookup), else ids
stay ids."""
from ..model import breakdown


class LiveBy:
    """Each OSD's completed client ops since the last report, broken down
    by `kind` (top K, the rest as "other"): take() every turn of the
    loop (it empties the ring), add() to each report its "by"."""

    def __init__(self, kind, top, slots, lookup=None):
        self.kind, self.top = kind, top or breakdown.DEFAULT_TOP
        self.ops = [[] for _ in range(slots)]
        self.traced = breakdown.TracedOps(kind, lookup)

    def take(self, tracer):
        got = self.traced.take(tracer.take_traces(), len(self.ops))
        for slot, evs in got.items():
            self.ops[slot].extend(evs)

    def build(self, slot):
        """The Breakdown of slot's ops since the last report (emptied)."""
        evs, self.ops[slot] = self.ops[slot], []
        cols = breakdown.trace_columns(evs)
        return breakdown.build(self.kind, self.traced.keys(cols),
                               cols["total_ns"], cols["qwait_ns"],
                               cols["dequeued"], self.top,
                               cols["bytes_in"], cols["bytes_out"])

    def add(self, tracer, ivs, curs, prevs):
        """Each OSD's report (ivs: an Interval each) gets its breakdown:
        iv.by and the record's "by", with the ops the ring had no room
        for since the report before (curs, prevs: the snapshots)."""
        self.take(tracer)
        for slot, (iv, cur, prev) in enumerate(zip(ivs, curs, prevs)):
            iv.by = self.build(slot)
            iv.record["by"] = dict(iv.by.record, missed=int(
                cur.counters.get("trace_ring_full", 0) -
                prev.counters.get("trace_ring_full", 0)))
