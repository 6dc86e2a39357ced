"""Several captures (one per host) and clients' traces read as one
(osdstage -r A.ctf B.ctf client.ctf), their clocks lined up (cli/lineup.py):
one op's story end to end (--op REQID: model/story.py), and the
end-to-end table of every client call (and --slowest:
model/e2e_table.py). The driver: it reads the captures and the traces
(capture/, rbd/clientops.py), builds the model object and hands it to
its sink (render/e2e.py: text or JSON; the pictures: cli/windows.py)."""
import os
import sys

from ..errors import UserError
from ..model.e2e_table import CaptureOps, build_end_to_end, join
from ..model.interval import RunInfo
from ..model.story import build_story
from ..model.table import give_back
from ..render.e2e import write_end_to_end, write_story
from ..capture import reqops
from ..capture.lookup import request_ops
from ..ceph import messages
from ..rbd.clientops import client_columns, client_op
from ..stacks.waits import has_stacks
from .windows import add_waits, bound, end_ns, host_pictures, window_record


def op_story(args, opts, out, caps, err=None, traces=(), clocks=None):
    """--op REQID: every op with that request id on every OSD of every
    capture: the client op on its primary (with its replicas' replies),
    the replica ops; with a client's trace that sent it, the client's
    send, reply and completion, and its latency split end to end. Times
    from the first event, on the wall clock (captures of several hosts).
    opts: the text reports' options (cli/args.py: text_options)."""
    client = client_op(traces, args.op_reqid)
    if not (args.html or args.perfetto or getattr(args, "otlp", None)):
        # the pictures draw the clients' other ops; the story needs no
        # more of the traces than this op (tens of MB a long trace)
        for t in traces:
            t.cols = None
        give_back()
    found = request_ops(caps, args.op_reqid)
    story = build_story(args.op_reqid, found, client, clocks)
    if story is None:
        firsts = [c.first_op(c.first_ns, c.last_ns) for c in caps]
        if not any(o.req for o in firsts if o is not None):
            raise UserError("%s carries no request ids (recorded by an "
                            "older osdstage or without a probe table for "
                            "them)" % args.read)
        raise UserError("no op %s in %s (see --slowest for request ids)" % (
            args.op_reqid, args.read))
    for name, (c, ops) in found.items():
        if has_stacks(c):       # where its workers slept (-w --stacks)
            add_waits(c, zip(sorted(ops, key=lambda o: o.enq_ns),
                             story.osds[name]))
    write_story(out, story, opts)
    if args.html or args.perfetto:     # a timeline centred on the request
        _story_pictures(args, err, caps, traces, found, story.t0_ns)
    return 0


def _story_pictures(args, err, caps, traces, found, t0):
    """--html/--perfetto of --op: the captures' timeline around the op's
    rows (`found`: {name: (capture, OpRecs)}; t0: its first event's wall
    ns), on the first capture's clock: the others moved to it by the wall
    clock (several hosts' captures), each clock's offset taken where the
    op is (clocks drift apart over a long capture)."""
    deltas = _deltas(caps, mono_at(caps[0], t0))
    d = {id(c): k for c, k in zip(caps, deltas)}
    a = min(o.enq_ns + d[id(c)] for c, rs in found.values() for o in rs)
    b = max(end_ns(o) + d[id(c)] for c, rs in found.values() for o in rs)
    span = max(int(args.timeline_ms * 1e6), int((b - a) * 1.2))
    lo = bound(caps[0], args.t_from, caps[0].first_ns)
    hi = bound(caps[0], args.t_to, caps[0].last_ns)
    a = max(lo, (a + b) // 2 - span // 2)
    ivs = []
    if args.html:
        ivs = [window_record(args, c, RunInfo.from_capture(c))[0]
               for c in caps]
    client = None
    if traces:
        client = _client_ops(traces, caps[0].wall_offset_ns(a))
    host_pictures(args, err or sys.stderr, caps, ivs,
                  (a, min(hi, a + span)), args.op_reqid, deltas, client)


def _client_ops(traces, base):
    """The clients' OSD ops for client_band: times on the first
    capture's clock (wall ns less its offset `base`)."""
    def at(ns):
        return None if ns is None else ns - base
    ops, pids = [], []
    for t in traces:
        pids.append(str(t.env.get("pid", "?")))
        for o in t.osd_ops.values():
            r = o.request
            ops.append({"reqid": o.reqid, "osd": "osd.%d" % o.osd,
                        "send": at(o.send), "reply": at(o.reply),
                        "done": at(o.done), "call": None if r is None else {
                            "op": r.op, "length": r.len,
                            "submit": at(r.submit), "done": at(r.done),
                            "released": at(r.released)}})
    name = "client (%s pid %s)" % (
        ", ".join(os.path.basename(t.path.rstrip("/")) for t in traces),
        ", ".join(pids))
    pid = int(pids[0]) if len(pids) == 1 and pids[0].isdigit() else 0
    return {"name": name, "pid": pid, "ops": ops}


# how far from the capture's first offset mono_at looks (ns): a step of
# the wall clock during a capture moves it by that step, seconds
MONO_AT_REACH_NS = 10 ** 12


def mono_at(cap, wall_ns):
    """`cap`'s monotonic ns at wall-clock ns `wall_ns`, with its clock's
    offset taken there (interpolated between its samples), found by
    halving: a wall time rises with the monotonic one, the offset moving
    by a drift of ppm or by a step of the wall clock (a time daemon's, a
    virtual machine's after a pause; seen: 2.2 s within a 3-s capture),
    which the samples spread over the capture, too steep for taking the
    offset where the last guess landed."""
    guess = wall_ns - cap.wall_offset_ns(cap.first_ns)
    lo, hi = guess - MONO_AT_REACH_NS, guess + MONO_AT_REACH_NS
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid + cap.wall_offset_ns(mid) < wall_ns:
            lo = mid
        else:
            hi = mid
    return hi


def _deltas(caps, at):
    """Per capture (slot), ns that move its timestamps to the first's
    clock by the wall clock, at `at` (the first's ns: where the pictures
    are; two hosts' clocks drift apart by up to ~100 ppm, tens of ms over
    a long capture, so an offset taken at the capture's start would not
    do): 0 for slots of one capture, and nearly so for captures of one
    kernel."""
    wall = at + caps[0].wall_offset_ns(at)
    return [0 if c.trace is caps[0].trace else at - mono_at(c, wall)
            for c in caps]


def end_to_end(args, opts, out, caps, traces, clocks):
    """-r CAPTURES... TRACE: every op of the clients' traces whose
    primary is in the captures, its latency split end to end; the table
    of p50, p99 and where the slowest ops' time went. The clients' ops
    as columns (rbd/clientops.py), each capture's ops with request ids
    read one capture at a time (capture/reqops.py), joined and made the
    table by model/e2e_table.py."""
    cl = client_columns(traces)
    n = len(cl["send"])
    if not n:
        raise UserError("%s: no OSD ops recorded (see rbdrecord(8): the "
                        "client's Objecter)" % ", ".join(
                            t.path for t in traces))
    j = join(cl, (_capture_ops(c) for c in caps))
    cl = None
    if not j.joined.any():
        raise UserError("none of the clients' %d OSD ops has its primary "
                        "in %s (request ids differ: another cluster or "
                        "time?)" % (n, args.read))
    table = build_end_to_end(j, [t.path for t in traces], clocks,
                             args.slowest or 0)
    write_end_to_end(out, table, opts)
    return 0


def _capture_ops(c):
    """Capture slot c's ops with request ids, read (the replies' own ops
    on the primary left out: the replies tell it all)."""
    ops, rep = reqops.read(c, skip=messages.SUBOP_REPLIES)
    return CaptureOps(c.name, ops, rep, c.wall_ns)
