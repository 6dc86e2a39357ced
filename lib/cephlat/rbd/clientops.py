"""A client's OSD ops, read back from rbdrecord traces, as the
end-to-end view joins them with the OSDs' captures (osdstage -r
CAPTURES... TRACE): every op as columns (client_columns, for the
end-to-end table, model/e2e_table.py), or one op by its request id
(client_op, for its story, model/story.py). Times are wall-clock ns
(each trace's own clock moved by its recorded offset)."""
import numpy as np

from .cache import STATES, ops_early
from .columns import CALL_OPS
from ..ceph import objecter
from ..model.acked import CW
from ..model.table import NONE, Table, concat_parts


def client_columns(traces):
    """The clients' OSD ops answered and completed (where a trace links
    ops to their librbd calls, those of calls: image I/O, not the image
    header's), as columns: client, inc, tid, send, reply, done, write,
    obj, trace, call, wb and the cache's record (cache_columns); "call":
    the op's call in "calls" (the traces' calls, one Table: op, off,
    len, submit, done, released), or -1; "call_ops": the names of the
    calls' op codes; "objects": per trace, its object names (obj).
    {"send": []} without ops. The traces' own op and call columns are
    let go (tens of MB a 10-minute trace)."""
    parts, calls, base, base_ops = [], [], 0, 0
    for ti, t in enumerate(traces):
        if t.cols is None:
            continue
        o, c = t.cols.ops, t.cols.calls
        m = (o.reply != NONE) & (o.done != NONE)
        if (m & (o.request >= 0)).any():
            m &= o.request >= 0
        i = np.flatnonzero(m)
        r = o.request[i]
        parts.append({
            "client": o.client[i], "inc": o.inc[i], "tid": o.tid[i],
            "send": o.send[i], "reply": o.reply[i], "done": o.done[i],
            "write": (o.flags[i] & objecter.FLAG_WRITE) != 0,
            "obj": o.obj[i], "trace": np.full(len(i), ti, np.int16),
            "call": np.where(r >= 0, r + base, -1).astype(np.int32)})
        parts[-1].update(cache_columns(t.cols, i))
        # an op of no call in a trace whose cache wrote back: the cache's
        parts[-1]["wb"] = (r < 0) & bool(
            (t.cols.cache.state == STATES.index("writeback")).any())
        # the op that let a held write go, as a row of the clients' ops
        pos = np.full(len(o) + 1, -1, np.int64)
        pos[i] = np.arange(len(i)) + base_ops
        parts[-1]["cw_held_by"] = pos[parts[-1]["cw_held_by"]]
        base_ops += len(i)
        calls.append(Table(**{k: c.cols[k] for k in (
            "op", "off", "len", "submit", "done", "released")}))
        base += len(c)
        # the table keeps its own columns of what it needs: the trace's
        # (tens of MB a 10-minute trace) go
        t.cols.ops = t.cols.calls = None
    if not parts:
        return {"send": []}
    out = concat_parts(parts, list(parts[0]))
    out["objects"] = [[] if t.cols is None else t.cols.objects.names
                      for t in traces]
    out["call_ops"] = CALL_OPS
    out["calls"] = calls[0] if len(calls) == 1 else Table(**concat_parts(
        [dict(c.cols) for c in calls], list(calls[0].cols)))
    return out


def cache_columns(cc, i):
    """The cache's record of client ops `i` of a trace (cc: its
    columns): early (1: acked before the OSDs, 0: not, -1: no record),
    taken, held (the cache held it), released, done (NONE: not
    recorded), the bytes in flight as it was taken and the limit, and
    the op (the trace's row; -1: none) of the write whose completion let
    a held one go."""
    n = len(i)
    cw = cc.cache
    k = cc.ops.cols.get("cw")
    k = k[i] if k is not None and len(cw) else np.full(n, -1, np.int64)
    has = k >= 0
    s = np.maximum(k, 0)

    def col(c, fill=NONE):
        return np.where(has, cw.cols[c][s], fill) if len(cw) else \
            np.full(n, fill, np.int64)
    first = np.full(len(cw), -1, np.int64)
    m = cc.ops.cols.get("cw", np.zeros(0, np.int64)) >= 0
    if len(cw) and m.any():
        o = np.flatnonzero(m)[::-1]
        first[cc.ops.cw[o]] = o          # the first op of each write
    hb = col("held_by", -1)
    return {"cw_early": ops_early(cw, k),
            "cw_ts": col("ts"), "cw_release": col("release"),
            "cw_done": col("done"),
            "cw_held": col("state", -1) == STATES.index("queued"),
            "cw_in_flight": col("in_flight", -1),
            "cw_max_dirty": col("max_dirty", -1),
            "cw_held_by": np.where(hb >= 0, first[np.maximum(hb, 0)],
                                   -1) if len(cw) else hb}


def client_op(traces, reqid):
    """The op `reqid` in the clients' traces: {"send", "reply", "done"
    (wall ns; reply and done None when not recorded), "osd", "object",
    "trace" (its path), "call" (its librbd call: "op", "offset",
    "length", "submit", "done", "released" (wall ns), "osd_ops" (the
    call's ops' request ids); None without one), "cache" (the cache's
    record, CW), "write"}, or None."""
    def at(v):
        return None if v == NONE else int(v)
    for tr in traces:
        cc = tr.cols
        i = cc.find(reqid) if cc is not None else None
        if i is None:
            continue
        o, c = cc.ops, cc.calls
        r = int(o.request[i])
        call = None
        if r >= 0:
            call = {"op": CALL_OPS[c.op[r]], "offset": int(c.off[r]),
                    "length": int(c.len[r]), "submit": int(c.submit[r]),
                    "done": int(c.done[r]), "released": at(c.released[r]),
                    "osd_ops": [cc.reqid(k) for k in
                                np.flatnonzero(o.request == r).tolist()]}
        # what librbd's cache did with it (an acknowledgement before the
        # OSDs had it gives the story the acked segments)
        cache = {k: int(v[0]) for k, v in cache_columns(
            cc, np.array([i])).items() if k in CW}
        return {"send": int(o.send[i]), "reply": at(o.reply[i]),
                "done": at(o.done[i]), "osd": int(o.osd[i]),
                "object": cc.objects.names[o.obj[i]], "trace": tr.path,
                "call": call, "cache": cache,
                "write": bool(o.flags[i] & objecter.FLAG_WRITE)}
    return None
