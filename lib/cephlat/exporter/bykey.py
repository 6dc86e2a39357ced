"""--by KEY: each OSD's completed client ops by client, pool, PG or RBD
image, as counters whose label values are bounded.

The full tier's programs hand every client op over at its end (the
traces ring, struct op_trace of probes/osdstage.h), as for a live
`osdstage --by` (cli/liveby.py); every turn of the loop they are read,
keyed (model/breakdown.py: keys_of, with the cluster's pool and image
names where this host can read them; a client by its entity, the name it
authenticated as in an info series beside) and summed into the OSD's
counters: ops, op_total seconds, queue-wait seconds, bytes written and
read. A key gets its own
series while the OSD has fewer than `top` of them; later keys are summed
under "other", until a key has had no op for IDLE_S: its series go (a
client that came and went) and the next new key takes its place. So an
OSD has at most top + 1 series per family, however many short-lived
clients come; "other" and every kept series only ever grow.

The ops counted are those of the full tier's attached time (a duty
cycle that bounds the cost is a sample of them: osdstage_attached_
seconds_total{tier="full"} says how much)."""
from ..model import breakdown
from .config import DEFAULT_BY_TOP
IDLE_S = 600.0          # a key with no op this long gives its series up
OTHER = "other"


def key_sums(traced, evs):
    """{key: (ops, op_total ns, queue-wait ns, bytes in, bytes out)} of
    decoded op_trace records `evs`, keyed by `traced`
    (breakdown.TracedOps; a key not known: "unknown")."""
    cols = breakdown.trace_columns(evs)
    out = {}
    for k, *v in zip(traced.keys(cols).tolist(), [1] * len(evs),
                     *(cols[c].tolist() for c in (
                         "total_ns", "qwait_ns", "bytes_in", "bytes_out"))):
        k = breakdown.UNKNOWN if k is None else k
        out[k] = tuple(a + b for a, b in zip(out.get(k, (0,) * 5), v))
    return out


class ByKeys:
    """The exporter's --by: take() every turn of the loop."""

    def __init__(self, kind, top=DEFAULT_BY_TOP, lookup=None):
        self.kind, self.top = kind, top
        # a client's series keep its entity alone (a cephx name that came
        # later would start another series of the same client): its name
        # is an info series of its own
        self.traced = breakdown.TracedOps(kind, lookup, cephx=False)

    @property
    def lookup(self):
        return self.traced.lookup

    @lookup.setter
    def lookup(self, lookup):
        self.traced.lookup = lookup

    def take(self, tracer, runs, exported, now):
        """The full tier's ops handed over since the last take, into
        `exported` (collect.py's Exported) per OSD (runs: the tracer's
        RunInfos, one per slot, their names the OSDs')."""
        per = self.traced.take(tracer.take_traces(), len(runs))
        names = self.traced.names.get("clients") \
            if self.kind == "client" else None
        for slot, evs in sorted(per.items()):
            exported.add_by(runs[slot].name, self.kind,
                            key_sums(self.traced, evs), self.top, now,
                            names)

    def stop(self):
        self.traced.stop()


def keep_or_other(seen, key, top, now, idle_s=IDLE_S):
    """The label `key` counts under: itself while it has a series or
    fewer than `top` keys have one (`seen`: {key: last op's time}, kept
    here), else OTHER. -> (label, [keys whose series go: idle])"""
    gone = []
    if key not in seen and len(seen) >= top:
        gone = [k for k, t in seen.items() if now - t >= idle_s]
        for k in gone:
            del seen[k]
    if key in seen or len(seen) < top:
        seen[key] = now
        return key, gone
    return OTHER, gone
