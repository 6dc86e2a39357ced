"""One op's story (osdstage -r CAPTURES... [TRACE] --op REQID): every op
with its request id on every OSD of the captures (the client op on its
primary with its replicas' replies, a reply's own op, the replica ops),
each replica's way there and back, and, with a client's trace that sent
it, the client's send, reply and completion and its latency split end
to end (e2e.py). Times are from the story's first event, on the wall
clock (captures of several hosts line up on it).

Built once (build_story) from what the driver read: the ops of each
capture (capture/lookup.py: request_ops) and the client's op
(rbd/clientops.py: client_op); read by the sinks: the text and JSON
(render/e2e.py), an OTLP trace (render/otlp.py: story_request, from its
record)."""
from dataclasses import dataclass, field

from .e2e import client_segments, replica_segments
from .slowest import op_row


@dataclass
class Story:
    """reqid: the request id; pg: its PG (not a shard; None when no op
    names one); osds: {OSD name: [op rows]}, each row slowest.op_row's
    with its "role" (primary, replica, reply: a replica's reply, an op
    of its own on the primary; other) and "enqueued_at_us"; client: the
    client's part (client_block's dict) or None; replicas: per replica of
    the primary row, its ways and own time (e2e.replica_segments); clocks:
    the files' clocks (cli/lineup.py) or None; t0_ns: the story's time 0,
    wall ns (the client's call or send, else the first enqueue)."""
    reqid: str
    osds: dict
    t0_ns: int
    pg: str = None
    client: dict = None
    replicas: list = field(default_factory=list)
    clocks: list = None

    @property
    def record(self):
        """The JSON object ("op": model/report-schema.json)."""
        out = {"type": "op", "reqid": self.reqid, "osds": self.osds}
        if self.clocks is not None:
            out["clocks"] = self.clocks
        if self.pg is not None:
            out["pg"] = self.pg
        if self.client is not None:
            out["client"] = self.client
        if self.replicas:
            out["replicas"] = self.replicas
        return out


def _wall_ns(cap, ns):
    """Timestamp `ns` of capture `cap` as wall-clock ns."""
    return ns + cap.wall_offset_ns(ns)


def build_story(reqid, found, client=None, clocks=None):
    """The story of request id `reqid` -> Story, or None when no capture
    has it. found: {OSD name: (capture, [OpRec])}, the ops of the request
    in each capture that has any (capture/lookup.py: request_ops; the
    capture gives their clock and names, as op_row takes it); client:
    its op in the clients' traces (rbd/clientops.py: client_op) or
    None."""
    if not found:
        return None
    t0 = min(_wall_ns(c, o.enq_ns) for c, rows in found.values()
             for o in rows)
    if client:
        t0 = min(t0, client["call"]["submit"] if client["call"] else
                 client["send"])
    story = Story(reqid, {}, t0, clocks=clocks)
    primary_at = None
    for name, (c, rows) in found.items():
        story.osds[name] = []
        primary = any(o.done or o.replies for o in rows)
        for o in sorted(rows, key=lambda o: o.enq_ns):
            row = op_row(c, o)
            # a replica's reply is an op of its own on the primary
            row["role"] = "primary" if o.done or o.replies else \
                "replica" if o.repop else "reply" if primary else "other"
            row["enqueued_at_us"] = round((_wall_ns(c, o.enq_ns) - t0) /
                                          1000, 1)
            story.osds[name].append(row)
            if o.pg and (row["role"] == "primary" or story.pg is None):
                story.pg = o.pg.split("s")[0]    # the PG, not a shard
            if row["role"] == "primary" and o.done:
                first = min([s["start_us"] for s in row["stages"]
                             if s["start_us"] < 0], default=None)
                enq = _wall_ns(c, o.enq_ns)
                primary_at = (name, enq, None if first is None else
                              enq + int(first * 1000),
                              _wall_ns(c, o.done["ts"]))
    if client:
        story.client = client_block(client, t0, primary_at)
    story.replicas = replica_segments(story.record)
    return story


def client_block(client, t0, primary_at):
    """The story's "client": when it sent, got the reply and completed
    the op, and (with the primary's row) the segments end to end.
    client: client_op's dict; t0: the story's time 0 (wall ns);
    primary_at: (the primary's name, its enqueue, its message's first
    stamp (None without stamps), its completion: wall ns) or None."""
    def at(ns):
        return None if ns is None else round((ns - t0) / 1000, 1)
    block = {"trace": client["trace"], "osd": "osd.%d" % client["osd"],
             "object": client["object"], "sent_at_us": at(client["send"]),
             "reply_at_us": at(client["reply"]),
             "done_at_us": at(client["done"])}
    call = client["call"]
    if call:
        # the librbd call the op is part of (rbdrecord links them)
        block["call"] = {"op": call["op"], "offset": call["offset"],
                         "length": call["length"],
                         "called_at_us": at(call["submit"]),
                         "completed_at_us": at(call["done"]),
                         "released_at_us": at(call["released"]),
                         "osd_ops": call["osd_ops"]}
    if client["reply"] is None:
        block["segments"] = None
        return block
    if primary_at is None:
        block["segments"] = None
        block["why"] = "its primary's completion is not in the captures"
        return block
    name, enq, first, done = primary_at
    block["primary"] = name
    block.update(client_segments(client, enq, first, done))
    return block
