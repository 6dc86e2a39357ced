"""Small in-memory inputs for an op's story and the end-to-end table
(test_e2e_report.py): captures whose ops are columns (what
capture/reqops.py reads) or OpRecs (taken from tests/fixtures/lab-v0.ctf
and given a request id, replies and a replica's end), and a client's
trace whose OSD ops, librbd calls and cache records are columns (what
rbd/columns.py reads). The expected outputs under
tests/fixtures/expected/e2e-* were printed from these by the code before
the story and the table became model objects (cli/merged.py's op_story
and end_to_end)."""
import os
from types import SimpleNamespace

import numpy as np

from conftest import REPO

from cephlat.model.table import NONE, Table

LAB = os.path.join(REPO, "tests", "fixtures", "lab-v0.ctf")
US = 1000
# the client: client.4160.0, its ops' tids from 100
CLIENT, INC = 4160, 0
REQID = "client.4160.0:7"


class Cols:
    """A client's trace as rbd/columns.py's ClientColumns holds it."""

    def __init__(self, ops, calls, cache, objects):
        self.ops, self.calls, self.cache = ops, calls, cache
        self.objects = SimpleNamespace(names=objects)

    def reqid(self, i):
        o = self.ops
        return "client.%d.%d:%d" % (o.client[i], o.inc[i], o.tid[i])

    def find(self, reqid):
        for i in range(len(self.ops)):
            if self.reqid(i) == reqid:
                return i
        return None


def _cache(rows):
    """The cache's writes: [(state, ts, release, done, in_flight,
    max_dirty, held_by)]."""
    from cephlat.rbd.cache import STATES
    cols = ("state", "ts", "release", "done", "in_flight", "max_dirty",
            "held_by")
    if not rows:
        return Table(**{k: np.zeros(0, np.int64) for k in cols})
    t = {k: np.array([r[i] for r in rows], np.int64)
         for i, k in enumerate(cols) if k != "state"}
    t["state"] = np.array([STATES.index(r[0]) for r in rows], np.int8)
    return Table(**t)


def trace(ops, calls, cache=(), path="client.ctf", pid=4242):
    """ops: [dict(tid, osd, obj, send, reply, done, write, call, cw)];
    calls: [dict(op, off, len, submit, done, released)] -> a trace."""
    from cephlat.ceph import objecter
    from cephlat.rbd.columns import CALL_OPS
    n = len(ops)

    def col(k, dt=np.int64, fill=NONE):
        return np.array([o.get(k, fill) for o in ops], dt)
    o = Table(client=np.full(n, CLIENT, np.int64),
              inc=np.full(n, INC, np.int32), tid=col("tid"),
              osd=col("osd", np.int32), obj=col("obj", np.int32),
              send=col("send"), reply=col("reply"), done=col("done"),
              flags=np.array([objecter.FLAG_WRITE if x.get("write") else
                              objecter.FLAG_READ for x in ops], np.int64),
              request=col("call", np.int64, -1), cw=col("cw", np.int64, -1))
    c = Table(op=np.array([CALL_OPS.index(x["op"]) for x in calls],
                          np.int8),
              off=np.array([x["off"] for x in calls], np.int64),
              len=np.array([x["len"] for x in calls], np.int64),
              submit=np.array([x["submit"] for x in calls], np.int64),
              done=np.array([x["done"] for x in calls], np.int64),
              released=np.array([x.get("released", NONE) for x in calls],
                                np.int64))
    names = ["rbd_data.1234.%016x" % i for i in range(8)]
    return SimpleNamespace(path=path, env={"pid": pid},
                           cols=Cols(o, c, _cache(list(cache)), names))


# ----------------------------------------------------------- the story


def story_caps():
    """Three hosts' captures (the lab's, opened three times, each its
    own clock) with request REQID: a replicated write on osd.2 (both
    replicas' replies, and a reply's own op), its replica ops on osd.0
    and osd.1. -> (caps, the primary's enqueue and completion, wall ns)"""
    from cephlat.capture.reader import Capture
    caps = []
    for name, shift in (("osd.2", 0), ("osd.0", -3 * US), ("osd.1", 2 * US)):
        c = Capture(LAB)
        c.name, c.shift_ns = name, shift
        caps.append(c)
    done = [o for o in caps[0].ops(caps[0].first_ns, caps[0].last_ns)
            if o.done and o.deq]
    prim, reply = done[3], done[4]
    rows = {0: [prim, reply]}
    for o in rows[0]:
        o.req, o.pg = REQID, "2.1f"
    span = prim.done["ts"] - prim.enq_ns
    prim.replies = [(0, span // 2, prim.enq_ns + span * 3 // 4),
                    (1, span // 3, prim.enq_ns + span * 2 // 3)]
    reply.done, reply.replies = None, []
    for k, (ci, frac) in enumerate(((1, 5), (2, 6))):
        c = caps[ci]
        o = [x for x in c.ops(c.first_ns, c.last_ns) if x.done][5 + k]
        o.req, o.pg = REQID, "2.1f"
        # its enqueue where the primary's sub-op reaches it
        move = prim.enq_ns + span * frac // 10 - o.enq_ns
        o.enq_ns += move
        o.stages = [(s, a + move, b + move) for s, a, b in o.stages]
        if o.deq:
            o.deq = dict(o.deq, ts=o.deq["ts"] + move)
        o.repop = {"ts": o.enq_ns + span // 8, "repop_ns": span // 8,
                   "object": "rbd_data.1234.0000000000000001"}
        o.done = None
        rows[ci] = [o]
    for i, c in enumerate(caps):
        c.ops_of = (lambda mine: lambda reqid: list(mine) if reqid == REQID
                    else [])(rows.get(i, []))
    wall = caps[0].wall_offset_ns(prim.enq_ns)
    return caps, prim.enq_ns + wall, prim.done["ts"] + wall


def story_trace(enq, done, acked=False):
    """The client's trace of REQID (wall ns around the primary's enqueue
    and completion): a librbd write call of two OSD ops; acked: the
    cache acknowledged it at once (its record)."""
    call = {"op": "write", "off": 8192, "len": 8192, "submit": enq - 400 * US,
            "done": done + 300 * US, "released": done + 350 * US}
    if acked:
        call["done"] = enq - 150 * US
        call["released"] = enq - 140 * US
    ops = [{"tid": 7, "osd": 2, "obj": 1, "send": enq - 200 * US,
            "reply": done + 120 * US, "done": done + 200 * US, "write": 1,
            "call": 0, "cw": 0 if acked else -1},
           {"tid": 8, "osd": 1, "obj": 2, "send": enq - 190 * US,
            "reply": done + 90 * US, "done": done + 150 * US, "write": 1,
            "call": 0}]
    cache = [("acked", enq - 250 * US, NONE, done + 160 * US, 8192, 16384,
              -1)] if acked else []
    return [trace(ops, [call], cache)]


# ------------------------------------------------------ end to end


def _capture(name, offset, ops, reps):
    """A capture slot: its ops with request ids (reqops.read's Tables)
    on a monotonic clock `offset` ns behind the wall clock."""
    return SimpleNamespace(name=name, ops_read=(ops, reps),
                           wall_ns=lambda a: np.asarray(a) + offset)


def e2e_inputs(seed=7, n=48, writeback=False):
    """A client's trace of n OSD ops (reads, writes acked after the OSDs,
    writes the cache acked at once, a few held by its limit, writeback
    writes of no call: left out beside ops of calls) against three
    primaries whose captures have them, the writes' replicas' replies
    and replica ops, two ops left unfinished, one reply seen before its
    send (clocks disagree); writeback: the writeback writes in a trace
    of their own, with its flush calls. -> (caps, traces)"""
    rng = np.random.default_rng(seed)
    offs = {0: 10_000_000_000, 1: 10_000_004_000, 2: 9_999_997_000}
    per = {i: {"ops": [], "reps": []} for i in offs}
    ops, calls, cache, wb = [], [], [], []
    t = 5_000_000_000_000
    for k in range(n):
        tid = 100 + k
        osd = k % 3
        kind = ("read", "write", "write", "acked", "wb")[k % 5]
        t += int(rng.integers(200, 900)) * US
        lat = int(rng.integers(300, 4000)) * US
        send, enq = t, t + int(rng.integers(40, 120)) * US
        first = enq - int(rng.integers(5, 30)) * US
        odone = enq + lat
        reply = odone + int(rng.integers(40, 150)) * US
        if k == 11:
            reply = send - 30 * US          # the clocks disagree
        done = reply + int(rng.integers(10, 60)) * US
        op = {"tid": tid, "osd": osd, "obj": k % 8, "send": send,
              "reply": reply, "done": done, "write": kind != "read"}
        if kind != "wb":
            sub = send - int(rng.integers(20, 90)) * US
            cd = done + 30 * US
            c = {"op": "read" if kind == "read" else "write",
                 "off": 4096 * k, "len": 4096, "submit": sub, "done": cd,
                 "released": cd + 15 * US}
            if kind == "acked":
                c["done"], c["released"] = send - 5 * US, send + 5 * US
                held = k % 10 == 3
                cache.append(("queued" if held else "acked", sub + 5 * US,
                              send - 10 * US if held else NONE,
                              done + 20 * US, 4096 * (k % 4), 16384,
                              len(cache) - 1 if held else -1))
                op["cw"] = len(cache) - 1
            op["call"] = len(calls)
            calls.append(c)
        elif not cache or cache[-1][0] != "writeback":
            cache.append(("writeback", send - 50 * US, NONE, NONE, 0, 16384,
                          -1))
        (wb if kind == "wb" and writeback else ops).append(op)
        if k in (20, 33):        # answered without completing
            per[osd]["ops"].append((tid, enq, first, NONE, NONE, NONE, True))
            continue
        per[osd]["ops"].append((tid, enq, first, odone, NONE, NONE, True))
        if kind != "read":
            for r in ((osd + 1) % 3, (osd + 2) % 3):
                out = int(rng.integers(50, 400 if r != 1 else 1500)) * US
                own = int(rng.integers(100, 300)) * US
                back = int(rng.integers(50, 300)) * US
                renq = enq + 20 * US + out
                seen = renq + own + back
                per[osd]["reps"].append((len(per[osd]["ops"]) - 1, r,
                                         seen - (enq + 20 * US), seen))
                per[r]["ops"].append((tid, renq, NONE, NONE, own,
                                      renq + own, True))
    ops.append({"tid": 999, "osd": 0, "obj": 0, "send": t + 1000 * US,
                "reply": NONE, "done": NONE})   # never answered
    caps = []
    for i, off in offs.items():
        caps.append(_capture("osd.%d" % i, off, *_tables(per[i], off)))
    traces = [trace(ops, calls, cache)]
    if wb:
        flush = [{"op": "flush", "off": 0, "len": 0, "submit": a - 10 * US,
                  "done": a + 900 * US} for a in (wb[1]["send"],
                                                   wb[6]["send"])]
        traces.append(trace(wb, flush, [("writeback", wb[0]["send"] - US,
                                         NONE, NONE, 0, 16384, -1)],
                            path="writeback.ctf", pid=4343))
    return caps, traces


def _tables(p, off):
    """A capture's ops and replies as reqops.read gives them (times on
    its own clock: wall less `off`)."""
    rows = p["ops"]
    n = len(rows)

    def mono(v):
        v = np.array(v, np.int64)
        return np.where(v != NONE, v - off, NONE)
    ops = Table(req_type=np.full(n, 8, np.int8),
                req_num=np.full(n, CLIENT, np.int64),
                req_inc=np.full(n, INC, np.int32),
                req_tid=np.array([r[0] for r in rows], np.int64),
                enq=mono([r[1] for r in rows]),
                first=mono([r[2] for r in rows]),
                done=mono([r[3] for r in rows]),
                repop_ns=np.array([r[4] for r in rows], np.int64),
                repop_at=mono([r[5] for r in rows]),
                dequeued=np.array([r[6] for r in rows], bool))
    reps = p["reps"]
    rep = Table(op=np.array([r[0] for r in reps], np.int64),
                peer=np.array([r[1] for r in reps], np.int32),
                wait=np.array([r[2] for r in reps], np.int64),
                read=np.zeros(len(reps), bool),
                sent=np.zeros(len(reps), np.int64),
                ts=mono([r[3] for r in reps])) if reps else None
    return ops, rep
