"""osdstage -r ... --otlp URL: the ops worth looking at, each as one OTLP
trace (render/otlp.py), sent to a collector over OTLP/HTTP (JSON).

Which ops: a consistent 1-in-N sample by request id (model/sample.py:
the same ops on every host, so each host's capture sends its part of the
same traces) and every client op whose time on its primary reached
--otlp-over, the slowest first, at most --otlp-max. Each is read back
with its story (--op's: every OSD of the captures, the client's call
where a client's trace has it) and sent in batches; what the collector
refused or never took is counted and said, never retried forever. The
posting is send/otlp.py's, shared with the exporter."""
import numpy as np

from ..capture import reqops
from ..capture.lookup import request_ops
from ..ceph import messages
from ..errors import UserError
from ..model.e2e_table import CLIENT
from ..model.sample import sampled
from ..model.story import build_story
from ..model.table import NONE
from ..render.otlp import story_request
from ..rbd.clientops import client_op
from ..rbd.records import reqid
from ..send.otlp import endpoint, post

BATCH = 20              # traces per request to the collector


def choose(caps, every, over_us, most):
    """-> [(request id, its time on the primary, us)] of the client ops
    the captures completed as their primary: sampled 1 in `every` (0:
    none), or at least `over_us` (None: no threshold); the slowest
    first, at most `most`."""
    got = {}
    for c in caps:
        ops, _ = reqops.read(c, skip=messages.SUBOP_REPLIES)
        if ops is None:
            continue
        m = (ops.req_type == CLIENT) & (ops.done != NONE)
        us = np.where(m, (ops.done - ops.enq) / 1000.0, 0.0)
        keep = m & ((sampled(ops.req_num, ops.req_tid, every) if every
                     else False) |
                    ((us >= over_us) if over_us is not None else False))
        for i in np.flatnonzero(keep).tolist():
            key = reqid(ops.req_num[i], ops.req_inc[i], ops.req_tid[i])
            got[key] = max(got.get(key, 0.0), float(us[i]))
    return sorted(got.items(), key=lambda kv: -kv[1])[:most]


def _resources(caps):
    out = {}
    for c in caps:
        env = getattr(getattr(c, "trace", None), "env", None) or {}
        if c.name:
            out[c.name] = {"host.name": env.get("hostname"),
                           "process.pid": getattr(c, "pid", None)}
    return out


def send(args, err, caps, traces, clocks):
    """Send the chosen ops' traces; -> the summary dict (also on err)."""
    url = endpoint(args.otlp)
    chosen = choose(caps, args.otlp_sample, args.otlp_over, args.otlp_max)
    res = {"url": url, "chosen": len(chosen), "sent": 0, "spans": 0,
           "dropped": 0, "not_found": 0, "error": None}
    batch = []          # (body, its spans)

    def flush():
        if not batch:
            return
        why = post(url, {"resourceSpans": [rs for b, _ in batch
                                           for rs in b["resourceSpans"]]})
        if why is None:
            res["sent"] += len(batch)
            res["spans"] += sum(n for _, n in batch)
        else:
            res["dropped"] += len(batch)
            res["error"] = why
        del batch[:]
    for rid, _ in chosen:
        story = build_story(rid, request_ops(caps, rid),
                            client_op(traces, rid), clocks)
        if story is None:
            res["not_found"] += 1
            continue
        body = story_request(story.record, _resources(caps))
        batch.append((body, sum(len(s["spans"])
                                for rs in body["resourceSpans"]
                                for s in rs["scopeSpans"])))
        if len(batch) >= BATCH:
            flush()
    flush()
    err.write("otlp: %d of %d ops sent as traces (%d spans) to %s%s\n" % (
        res["sent"], res["chosen"], res["spans"], url,
        "; %d dropped: %s" % (res["dropped"], res["error"])
        if res["dropped"] else ""))
    if res["dropped"] and not res["sent"]:
        raise UserError("--otlp: the collector at %s took none of the "
                        "traces: %s" % (url, res["error"]))
    return res
