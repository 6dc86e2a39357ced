"""Finding ops in a capture (capture/reader.py's Capture has these
methods): the ops of a window, pieced together from their events by
OpTracker (capture/ops.py) as they are read; the ops of one request id,
found first by numpy scans and then followed alone; those a timeline
draws; the first of a window. What they use of the Capture: chunks(),
_op_scan(), OP_EVENTS, first_ns and last_ns."""
import numpy as np

from .ops import OpTracker, reqid_fields
from ..model.table import give_back


class OpLookups:
    def op_stream(self, t0, t1, t_start=None, keep=None):
        """The ops dequeued, completed or with a call stage ending in
        [t0, t1] (those `keep` accepts, if given), with their call stages
        (OpTracker) -> (listing rank, OpRec) pairs, each once nothing
        later in the capture can change it any more; the rest at the end.
        Reading starts at t_start (default: the capture's start) and stops
        once nothing listed can change any more."""
        tr = OpTracker(self, t0, t1, keep)
        for ch in self.chunks(self.OP_EVENTS, t_start):
            yield from tr.feed(ch)
            if tr.stop:
                break
        yield from tr.finish()

    def ops(self, t0, t1, keep=None):
        """OpRecs of the ops of [t0, t1] (op_stream), in the order they
        entered the window."""
        return [o for _, o in sorted(self.op_stream(t0, t1, keep=keep),
                                     key=lambda x: x[0])]

    def ops_of(self, reqid):
        """The ops of request id `reqid` (client.4123.0:77: the client op,
        its replicas' ops and replies), without rebuilding the others:
        their addresses from the op_enqueue and op_reqid events that name
        it (numpy scans), then only those addresses' events followed
        (OpTracker's `only`), from the first one's enqueue. -> [OpRec] in
        the order they entered the capture."""
        want = reqid_fields(reqid)
        if want is None:
            return []
        found, late, late_enq = [], [], {}

        def match(r):
            names = r.dtype.names
            if "req_type" not in names:
                return None
            return ((r["req_type"] == want[0]) & (r["req_num"] == want[1]) &
                    (r["req_inc"] == want[2]) & (r["req_tid"] == want[3]))
        # an op told its request id after its enqueue (op_reqid): its
        # enqueue is the latest of its address before that
        for _, r, _ in self._op_scan(("op_reqid",)):
            m = match(r)
            if m is not None and m.any():
                late.extend(zip(r["op"][m].tolist(), r["_ts"][m].tolist()))
        for _, r, _ in self._op_scan(("op_enqueue",)):
            m = match(r)
            if m is not None and m.any():
                found.append((r["op"][m], int(r["_ts"][m].min())))
            for op, ts in late:
                t = r["_ts"][(r["op"] == op) & (r["_ts"] <= ts)]
                if len(t):
                    late_enq[(op, ts)] = max(late_enq.get((op, ts), 0),
                                             int(t.max()))
        if not found and not late:
            return []
        addrs = np.unique(np.concatenate(
            [a for a, _ in found] +
            [np.array([op for op, _ in late], np.uint64)]).astype(np.uint64))
        # from the earliest enqueue among them (from the capture's start
        # when one was enqueued before it)
        starts = [t for _, t in found] + list(late_enq.values())
        t_start = min(starts) if len(late_enq) == len(late) else None
        tr = OpTracker(self, self.first_ns, self.last_ns,
                       keep=lambda o: o.req == reqid, only=addrs)
        got = []
        for ch in self.chunks(self.OP_EVENTS, t_start):
            got.extend(tr.feed(ch))
        got.extend(tr.finish())
        tr = None
        give_back()
        return [o for _, o in sorted(got, key=lambda x: x[0])]

    def ops_overlapping(self, summary, t0, t1, a, b):
        """The ops of a window (OpSummary of window()) whose span meets
        [a, b], in the order they entered the window [t0, t1]: read again
        from the first one's enqueue only."""
        want = summary.overlapping(a, b)
        if not want:
            return []
        start = min(enq for _, enq in want)
        got = [(want[(o.op, o.enq_ns)], o) for _, o in self.op_stream(
            t0, t1, t_start=start,
            keep=lambda o: (o.op, o.enq_ns) in want)]
        return [o for _, o in sorted(got, key=lambda x: x[0])]

    def first_op(self, t0, t1):
        """The first op to enter the window [t0, t1], or None."""
        taken = []

        def keep(o):
            taken.append(o)
            return len(taken) == 1
        for _, o in self.op_stream(t0, t1, keep=keep):
            return o
        return None


def request_ops(caps, reqid):
    """The ops of request id `reqid` in each of captures `caps` (slots)
    that has any -> {its name ("osd.N", or "pid N"): (the capture, its
    OpRecs: ops_of's)}, in the captures' order (model/story.py:
    build_story)."""
    found = {}
    for c in caps:
        rows = c.ops_of(reqid)
        if rows:
            found[c.name or "pid %d" % c.pid] = (c, rows)
    return found
