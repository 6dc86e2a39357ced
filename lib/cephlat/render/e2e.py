"""An op's story (model/story.py: Story) and the end-to-end table
(model/e2e_table.py: EndToEnd), written as text or as their JSON
objects: osdstage -r CAPTURES... [TRACE] --op REQID, and -r CAPTURES...
TRACE [--slowest N]. Each sink takes the model object and the text
reports' options (render/options.py: TextOptions; these read its json
only)."""
import textwrap

from ..model.e2e import SEGMENTS
from ..model.schema import json_line
from .text import print_op


def write_story(out, story, opts):
    """-r --op: one request's ops on every OSD (story: model/story.py's
    Story), as JSON (opts.json: its record) or text."""
    if opts.json:
        out.write(json_line(story.record))
    else:
        print_story(out, story)


def print_story(out, story):
    """A Story as text: the client's part, the replicas, every op."""
    out.write("op %s, pg %s, on %d OSD%s (times in us; +at = from the "
              "%s)\n" % (story.reqid, story.pg or "?", len(story.osds),
                         "" if len(story.osds) == 1 else "s",
                         ("client's call" if story.client.get("call")
                          else "client's send") if story.client
                         else "first enqueue"))
    if story.client:
        _print_client(out, story.client)
    if story.replicas:
        _print_replicas(out, story.replicas)
    for name, rows in story.osds.items():
        for r in rows:
            out.write("\n%s, %s op, enqueued at +%s:\n" % (
                name, r["role"], r["enqueued_at_us"]))
            print_op(out, r)


def _print_replicas(out, replicas):
    """The story's replicas: each one's way out, own time, way back."""
    out.write("\n  REPLICAS   %9s %9s %9s %9s\n" % (
        "OUT", "REPLICA", "BACK", "WAIT"))
    for r in replicas:
        out.write("  %-10s %9s %9s %9s %9s%s\n" % (
            r["replica"], *["?" if r[k] is None else r[k] for k in (
                "out_us", "replica_us", "back_us", "wait_us")],
            "  (last)" if r["last"] else ""))
    off = [r for r in replicas if r.get("clock_disagreement_us")]
    if off:
        out.write("  (?: the clocks of the primary's host and %s's "
                  "disagree: a way came out %s us below zero)\n" % (
                      ", ".join(r["replica"] for r in off),
                      max(r["clock_disagreement_us"] for r in off)))
    late = [r for r in replicas if r.get("sent_late_us")]
    if late:
        out.write("  (?: %s had the sub-write %s us before the primary's "
                  "mark after the sends (preempted in between): its way "
                  "out is not known)\n" % (
                      ", ".join(r["replica"] for r in late),
                      max(r["sent_late_us"] for r in late)))
    out.write("  (out: sub-op sent -> the replica's enqueue; replica: "
              "-> its commit reply sent; back: -> the primary handling "
              "it, the reply's queue included; wait: the primary's, "
              "sent -> handled)\n")


def _print_client(out, c):
    """The client's side of an op and its latency end to end."""
    def at(v):
        return "+%s" % v if v is not None else "not in the trace"
    if c.get("call"):
        k = c["call"]
        out.write("\nclient (%s): librbd %s of %d bytes at offset %d called "
                  "at %s, completed at %s%s (%d OSD op%s); this op sent to "
                  "%s at %s, reply at %s, completion ran at %s\n" % (
                      c["trace"], k["op"], k["length"], k["offset"],
                      at(k["called_at_us"]), at(k["completed_at_us"]),
                      ", taken by the application at %s" % at(
                          k["released_at_us"]) if k.get("released_at_us")
                      is not None else "",
                      len(k["osd_ops"]), "" if len(k["osd_ops"]) == 1
                      else "s", c["osd"], at(c["sent_at_us"]),
                      at(c["reply_at_us"]), at(c["done_at_us"])))
    else:
        out.write("\nclient (%s): sent to %s at %s, reply at %s, "
                  "completion ran at %s\n" % (
                      c["trace"], c["osd"], at(c["sent_at_us"]),
                      at(c["reply_at_us"]), at(c["done_at_us"])))
    if not c.get("segments"):
        if c.get("why"):
            out.write("  end to end: %s\n" % c["why"])
        return
    if c.get("acked"):
        out.write("  END TO END %s us (acknowledged by librbd's cache "
                  "before the OSDs had it%s):\n" % (
                      c["total_us"], ", by inference: the trace has no "
                      "record of the cache" if c["acked"] == "inferred"
                      else ""))
    else:
        out.write("  END TO END %s us:\n" % c["total_us"])
    group = None
    for seg in c["segments"]:
        if seg.get("group") == "behind" and group != "behind":
            out.write("  behind the acknowledgement (the application did "
                      "not wait for this):\n")
        group = seg.get("group")
        out.write("  %-11s %10s  %s\n" % (
            seg["segment"], "?" if seg["us"] is None else seg["us"],
            seg["what"]))
    if c.get("clock_disagreement_us") is not None:
        out.write("  (?: the hosts' clocks disagree by more than that "
                  "segment: it came out %s us below zero)\n" %
                  c["clock_disagreement_us"])


_KIND_TITLES = {"read": "READS", "write": "WRITES (acknowledged after the "
                "OSDs)", "write_acked": "WRITES ACKNOWLEDGED BY THE CACHE "
                "(the application's part: its latency)",
                "write_back": "WRITES THE CACHE WROTE BACK (writeback: the "
                "application had its acks from the cache)"}


def _segment_block(out, title, t):
    """One segment table (model/e2e.py segment_table), with the ops left
    out and why."""
    why = []
    if t["unknown"]:
        why.append("%d left out (the clocks disagree)" % t["unknown"])
    if t.get("out_of_order"):
        why.append("%d left out (the client's events out of the order "
                   "librbd makes them: an op linked to another call)" %
                   t["out_of_order"])
    out.write("\n%s: %d ops%s\n" % (title, t["ops"], "".join(
        "; " + w for w in why)))
    out.write("%-13s %10s %10s %10s %14s\n" % (
        "SEGMENT", "P50", "P99", "MEAN", "P99 OPS' MEAN"))
    for g in t["segments"]:
        out.write("%-13s %10.1f %10.1f %10.1f %14.1f\n" % (
            g["segment"], g["p50_us"], g["p99_us"], g["mean_us"],
            g["p99_ops_mean_us"]))


def _print_acked(out, a):
    """What went on behind the cache's acknowledgements, and why."""
    _segment_block(out, "BEHIND THE ACKNOWLEDGEMENT (the same writes: the "
                   "application did not wait for this)", a["behind"])
    if a["inferred"]:
        out.write("(%d of the %d acknowledged early by inference: their "
                  "call completed before their op's reply; the trace has "
                  "no record of librbd's cache)\n" % (a["inferred"],
                                                     a["ops"]))
    w, b = a["writes_in_flight"], a["in_flight_bytes"]
    if w:
        out.write("in flight as each was sent: %d writes at p50, %d at most"
                  % (w["p50"], w["max"]))
        if b:
            out.write("; %d bytes at p50, %d at most" % (b["p50"], b["max"]))
        if a["limit_bytes"]:
            out.write(" (limit rbd_cache_max_dirty %d)" % a["limit_bytes"])
        out.write("\n")
    if a["held"]:
        out.write("held by the cache: %d writes (%.1f %%)%s%s\n" % (
            a["held"], a["held_pct"], ", p50 %.1f us, p99 %.1f us" % (
                a["held_us"]["p50"], a["held_us"]["p99"])
            if a["held_us"] else "", "; let go by writes to " + ", ".join(
                "%s %d" % kv for kv in sorted(a["held_by"].items()))
            if a["held_by"] else ""))
    if a.get("verdict"):
        out.write(textwrap.fill("VERDICT (writes acked by the cache): " +
                                a["verdict"]["words"], 78,
                                subsequent_indent="  ") + "\n")


def write_end_to_end(out, table, opts):
    """-r CAPTURES... TRACE: where the clients' latency went (table:
    model/e2e_table.py's EndToEnd), as JSON (opts.json: its record) or
    text."""
    if opts.json:
        out.write(json_line(table.record))
    else:
        print_end_to_end(out, table)


def print_end_to_end(out, table):
    """An EndToEnd as text: a segment table per kind of op, the writes
    the cache acknowledged, the flushes, the replicas, the slowest
    calls."""
    out.write("END TO END: %d of the client's %d OSD ops joined with their "
              "primary (us)\n" % (table.joined, table.client_ops))
    u = table.unfinished or {}
    if u.get("ops"):
        out.write("(%d answered by their primary without completing: an "
                  "error reply, such as ENOENT for an object not yet "
                  "written; %s%s)\n" % (
                      u["ops"], ", ".join(u["reqids"][:5]),
                      ", ..." if u["ops"] > 5 else ""))
    for kind, t in table.kinds.items():
        _segment_block(out, _KIND_TITLES.get(kind, kind.upper() + "S"), t)
    if table.acked:
        _print_acked(out, table.acked)
    f = table.flushes
    if f:
        out.write(textwrap.fill(
            "FLUSHES (writeback: where the application waited for the "
            "OSDs): %d calls%s; %d of the %d writes written back were sent "
            "while one waited%s" % (
                f["calls"], ", p50 %.1f us, p99 %.1f us" % (
                    f["lat_us"]["p50"], f["lat_us"]["p99"])
                if f["lat_us"] else "", f["writes"], f["of"],
                ", each sent -> reply p50 %.1f us" % f["write_us"]["p50"]
                if f["write_us"] else ""), 78,
            subsequent_indent="  ") + "\n")
    _print_replication(out, table.replication or {})
    if table.slowest:
        _print_slowest(out, table.slowest)
    out.write("\n(P99 OPS' MEAN: a segment's mean over the ops at or above "
              "the total's p99: where the slowest ops' time went. OUT: the "
              "sub-op sent -> the replica's enqueue; REPL: -> its commit "
              "reply; BACK: -> the primary handling it. osdstage(8), End "
              "to end.)\n")


def _print_replication(out, rep):
    """The replicas of the joined writes (e2e.replica_table's) and their
    verdict."""
    if rep.get("unknown"):
        out.write("\n(%d replica waits left out: the clocks disagree)\n"
                  % rep["unknown"])
    if rep.get("sent_late"):
        out.write("\n(%d shard waits left out: the shard had the sub-write "
                  "before its primary's mark, the primary preempted after "
                  "sending; their way out is not known)\n" % rep["sent_late"])
    if rep.get("replicas"):
        out.write("\nREPLICAS (writes; us)\n%-8s %7s %6s %9s %9s %9s %9s "
                  "%9s %9s\n" % ("REPLICA", "WRITES", "LAST%", "OUT_P50",
                                  "OUT_P99", "REPL_P50", "REPL_P99",
                                  "BACK_P50", "BACK_P99"))
        for name, d in rep["replicas"].items():
            out.write("%-8s %7d %6.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f"
                      "\n" % (name, d["writes"], d["last_pct"],
                              d["out_p50_us"], d["out_p99_us"],
                              d["replica_p50_us"], d["replica_p99_us"],
                              d["back_p50_us"], d["back_p99_us"]))
        if rep.get("verdict"):
            out.write("VERDICT: %s\n" % rep["verdict"]["words"])


def _print_slowest(out, slowest):
    """--slowest: the slowest calls, each segment's us."""
    keys = [k for k, _ in SEGMENTS]
    out.write("\nSLOWEST CALLS (by the client's latency; us)\n"
              "%-22s %-5s %-6s %9s %s\n" % (
                  "REQID", "KIND", "OSD", "TOTAL",
                  " ".join("%11s" % k.upper() for k in keys)))
    for r in slowest:
        out.write("%-22s %-5s %-6s %9.1f %s\n" % (
            r["reqid"], r["kind"], r["primary"], r["total_us"],
            " ".join("%11s" % ("-" if r["segments"].get(k) is None
                                and k not in r["segments"] else
                                "?" if r["segments"][k] is None else
                                "%.1f" % r["segments"][k])
                     for k in keys)))
        if r["kind"].startswith("write, acked"):
            out.write("%-22s acked early: %s\n" % ("", ", ".join(
                "%s %s" % (k, "?" if v is None else "%.1f" % v)
                for k, v in r["segments"].items())))
