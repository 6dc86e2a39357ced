"""rbdrecord --otlp: the client's part of the traces the OSD hosts'
exporters (osdstage-exporter --otlp) send, made from the recorded trace
at the end of the recording and sent to the same collector.

Which ops: each OSD op of the client (its request id, as the OSDs know
it) in model/sample.py's 1-in-N sample by request id (the rule the
exporters' BPF programs follow: the same ops on every host), and every
op of a call that took at least --otlp-over (an op of no call: the op
itself); only ops whose reply was recorded; at most MAX_TRACES, the
slowest first.

What: per chosen op, one trace, the request id's (render/otlp.py
trace_id): the client's span (the librbd call: rbd read/write..., its
offset and length, whether librbd's cache acknowledged it before the
OSDs had it; an op of no call, the op), the parent the exporters give
the primary's op (client_span_id), and under it the op's time in the
client's Objecter, from its send to its reply. A call of several
object ops is in each of its chosen ops' traces, each trace named by
that op's request id, with links to the call's span in the others.
A call librbd's cache acknowledged from its memory (writeback) made no
op of its own: it is in no trace.

Delivery: send/otlp.py's Sender (a bounded queue, posted by a thread of
its own); at the end at most WAIT_S seconds are spent on the collector,
less when it keeps failing; what it refused or never took is counted
and said in one line, and the recording's exit status stands."""
import socket
import time
from dataclasses import dataclass

import numpy as np

from . import TOOL
from .cache import ops_early
from .columns import CALL_OPS
from ..ceph import objecter
from ..errors import UserError
from ..model.acked import which
from ..model.sample import DEFAULT_EVERY, sampled
from ..model.table import NONE
from ..render.otlp import client_request
from ..send.otlp import Sender, endpoint

MAX_TRACES = 20000      # ops sent as traces at most, the slowest first
MAX_LINKS = 16          # links from a call's span to its other ops' traces
BATCH_SPANS = 1000      # spans per request
POST_TIMEOUT_S = 5.0
WAIT_S = 30.0           # the most spent on the collector at the end
FAILING_S = 3.0         # a collector failing this long is given up


@dataclass(frozen=True)
class OtlpChoice:
    """Where and which: url, the collector's (--otlp); every: 1 op in N
    by request id (0: none); over_us: and every op of a call that took
    at least this long (None: no threshold)."""
    url: str
    every: int = DEFAULT_EVERY
    over_us: object = None


def choose(cc, every, over_us):
    """The ops of columns `cc` (columns.ClientColumns, linked) to send:
    -> (their indices, the slowest first, at most MAX_TRACES; how many
    more were chosen; each op's latency in us: its call's, submit to
    completion, else its own, send to completion or reply)."""
    o, c = cc.ops, cc.calls
    n = len(o)
    if not n:
        return np.zeros(0, np.int64), 0, np.zeros(0)
    req = o.request
    r = np.maximum(req, 0)
    has_call = (req >= 0) & (len(c) > 0)
    own = np.where(o.done != NONE, o.done, o.reply) - o.send
    us = np.where(has_call, (c.done[r] - c.submit[r]) if len(c) else 0,
                  own) / 1000.0
    pick = sampled(o.client, o.tid, every) if every else \
        np.zeros(n, bool)
    if over_us is not None:
        pick = pick | (us >= over_us)
    idx = np.flatnonzero(pick & (o.reply != NONE))
    idx = idx[np.argsort(-us[idx], kind="stable")]
    return idx[:MAX_TRACES], max(len(idx) - MAX_TRACES, 0), us


def _acked(cc, idx):
    """Per op of `idx`: (acked early by librbd's cache, inferred so)."""
    o, c = cc.ops, cc.calls
    req = o.request[idx]
    r = np.maximum(req, 0)
    t = {"send": o.send[idx], "reply": o.reply[idx],
         "call_done": np.where(req >= 0, c.done[r] if len(c) else NONE,
                               NONE),
         "write": (o.flags[idx] & objecter.FLAG_WRITE) != 0,
         "cw_early": ops_early(cc.cache, o.cols["cw"][idx])
         if "cw" in o.cols else np.full(len(idx), -1)}
    return which(t)


def _links(cc, idx):
    """{op index: the request ids of its call's other chosen ops}"""
    by = {}
    for i, q in zip(idx.tolist(), cc.ops.request[idx].tolist()):
        if q >= 0:
            by.setdefault(q, []).append(i)
    out = {}
    for ops in by.values():
        if len(ops) > 1:
            for i in ops:
                out[i] = [cc.reqid(j) for j in ops if j != i][:MAX_LINKS]
    return out


def _at(v):
    v = int(v)
    return None if v == NONE else v


def op_parts(tr, idx):
    """The chosen ops `idx` of RbdTrace `tr` -> [(client entity, the
    OTLP resourceSpans of its trace, its spans)]."""
    cc = tr.cols
    o, c = cc.ops, cc.calls
    acked, inferred = _acked(cc, idx)
    links = _links(cc, idx)
    ops_of = np.bincount(o.request[o.request >= 0],
                         minlength=len(c)) if len(c) else None
    host = tr.env.get("hostname") or socket.gethostname()
    pid = str(tr.env.get("pid", ""))
    pid = int(pid) if pid.isdigit() else None
    out = []
    for k, i in enumerate(idx.tolist()):
        op = {"reqid": cc.reqid(i), "object": cc.objects.names[o.obj[i]],
              "osd": "osd.%d" % o.osd[i],
              "pg": "%d.%x" % (o.pool[i], o.seed[i]),
              "kind": cc.kinds.names[o.subop[i]],
              "offset": int(o.offset[i]), "length": int(o.length[i]),
              "attempts": int(o.attempts[i]), "send_ns": int(o.send[i]),
              "reply_ns": _at(o.reply[i]), "done_ns": _at(o.done[i])}
        entity = "client.%d" % o.client[i]
        res = {"host.name": host, "process.pid": pid,
               "ceph.client": entity}
        call, q = None, int(o.request[i])
        if q >= 0:
            img = tr.images.get(int(c.image[q]), {})
            res.update({"rbd.pool": img.get("pool") or None,
                        "rbd.image": img.get("name") or None})
            call = {"op": CALL_OPS[c.op[q]], "offset": int(c.off[q]),
                    "length": int(c.len[q]), "submit_ns": int(c.submit[q]),
                    "done_ns": int(c.done[q]),
                    "released_ns": _at(c.released[q]),
                    "acked": bool(acked[k]), "inferred": bool(inferred[k]),
                    "osd_ops": int(ops_of[q])}
        body, n = client_request(op, call, links.get(i, ()), res)
        out.append((entity, body["resourceSpans"], n))
    return out


def _drain(sender, wait_s, failing_s):
    """Let the sender post what is queued: until it is done, `wait_s`
    passed, or the collector failed for `failing_s`; then stop it."""
    end = time.monotonic() + wait_s
    failing = None
    while sender.queued() and time.monotonic() < end:
        if sender.error is None:
            failing = None
        elif failing is None:
            failing = time.monotonic()
        elif time.monotonic() - failing >= failing_s:
            break
        time.sleep(0.05)
    sender.stop(POST_TIMEOUT_S + 1.0)


def send_calls(path, choice, err, sender=None):
    """Send the client's spans of the chosen ops of the trace at `path`
    (an eBPF-mode rbdrecord trace) to choice.url; one line on `err` says
    what was sent and what the collector refused or never took. Never
    raises: a trace that cannot be read is said too. -> the summary
    {"url", "ops", "more", "spans", "refused", "unsent", "error"}"""
    res = {"url": choice.url, "ops": 0, "more": 0, "spans": 0,
           "refused": 0, "unsent": 0, "error": None}
    try:
        res["url"] = url = endpoint(choice.url)
        parts, res["more"] = _parts(path, choice)
        if not parts:
            err.write("%s: otlp: no client op chosen (1 in %s%s): nothing "
                      "sent to %s\n" % (TOOL, choice.every or "none",
                                        _over(choice), url))
            return res
        sender = sender or Sender(
            url, max_spans=sum(n for _, _, n in parts),
            batch_spans=BATCH_SPANS, timeout=POST_TIMEOUT_S)
        sender.start()
        for key, rs, n in parts:
            sender.offer(key, rs, n)
        res["ops"] = len(parts)
        _drain(sender, WAIT_S, FAILING_S)
    except UserError as e:
        err.write("%s: otlp: nothing sent: %s\n" % (TOOL, e))
        res["error"] = str(e)
        return res
    except Exception as e:      # the recording stands, whatever this was
        err.write("%s: otlp: nothing sent: %s: %s\n" % (
            TOOL, type(e).__name__, e))
        res["error"] = str(e)
        return res
    _say(err, res, sender)
    return res


def _over(choice):
    return ", calls over %g us" % choice.over_us \
        if choice.over_us is not None else ""


def _parts(path, choice):
    """The trace at `path` read back, its chosen ops' parts. -> (parts,
    how many more were chosen than MAX_TRACES)"""
    from .reader import RbdTrace
    tr = RbdTrace(path)
    if tr.cols is None:
        raise UserError("%s is an LTTng trace: it has no OSD ops" % path)
    idx, more, _ = choose(tr.cols, choice.every, choice.over_us)
    return op_parts(tr, idx), more


def _say(err, res, sender):
    """The one line of what was sent, refused and not sent."""
    sent, dropped = sender.counts()
    res["spans"] = sum(sent.values())
    res["refused"] = sum(v for (_, why), v in dropped.items()
                         if why == "collector")
    res["unsent"] = sum(v for (_, why), v in dropped.items()
                        if why != "collector")
    res["error"] = sender.error
    lost = []
    if res["refused"]:
        lost.append("%d spans not taken by the collector" %
                    res["refused"])
    if res["unsent"]:
        lost.append("%d not sent (the collector did not take them in "
                    "time)" % res["unsent"])
    if res["more"]:
        lost.append("%d more ops chosen than the %d sent at most" % (
            res["more"], MAX_TRACES))
    err.write("%s: otlp: %d client ops as traces, %d spans sent to %s%s%s"
              "\n" % (TOOL, res["ops"], res["spans"], res["url"],
                      "; " + ", ".join(lost) if lost else "",
                      " (%s)" % res["error"] if res["error"] and (
                          res["refused"] or res["unsent"]) else ""))
