"""--summary: per image, ops, bytes and mean latency per type, request
sizes, an offset heat-map and the read/write mix, and what librbd's
cache did with its writes (cachesummary.py); per OSD, the ops the
client's Objecter sent it and how long their replies took (text or
JSON)."""
import collections

from ..ceph import objecter
from ..model.schema import json_line
from .cachesummary import cache_summary, write_cache
from .reader import RbdTrace


def _pow2_bucket(n):
    b = 512
    while b < n:
        b *= 2
    return b


def image_summary(reqs, zones):
    ops, nbytes, sizes = collections.Counter(), collections.Counter(), \
        collections.Counter()
    lat = collections.defaultdict(list)
    end = max((r.off + r.len for r in reqs), default=0)
    zsize = max(1, -(-end // zones)) if end else 1
    heat = [{"reads": 0, "writes": 0, "bytes": 0} for _ in range(zones)]
    for r in reqs:
        ops[r.op] += 1
        nbytes[r.op] += r.len
        lat[r.op].append(r.done - r.submit)
        if r.len:
            sizes[_pow2_bucket(r.len)] += 1
            z = min(zones - 1, r.off // zsize)
            heat[z]["reads" if r.op == "read" else "writes"] += 1
            heat[z]["bytes"] += r.len
    reads = ops["read"]
    writes = sum(v for k, v in ops.items() if k != "read" and k != "flush")
    return {
        "ops": dict(ops), "bytes": dict(nbytes),
        "sizes": {str(k): v for k, v in sorted(sizes.items())},
        "zone_bytes": zsize,
        "zones": [dict(h, start=i * zsize) for i, h in enumerate(heat)],
        "read_pct": round(100.0 * reads / max(1, reads + writes), 1),
        "read_bytes_pct": round(100.0 * nbytes["read"] / max(
            1, sum(v for k, v in nbytes.items())), 1),
        "latency_us_mean": {k: round(sum(v) / len(v) / 1000, 1)
                            for k, v in lat.items()},
        "span_s": round((reqs[-1].done - reqs[0].submit) / 1e9, 3)
        if reqs else 0.0,
    }


def _pct(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * q))]


def osd_summary(osd_ops):
    """{osd: {kind: {"ops", "reply_us_p50", "reply_us_p99",
    "done_us_mean"}}}: per target OSD, reads and writes (by the op's
    flags): send -> reply, and reply -> its completion run; with the ops
    never replied to."""
    lat = collections.defaultdict(lambda: collections.defaultdict(list))
    after = collections.defaultdict(lambda: collections.defaultdict(list))
    unreplied = collections.Counter()
    for op in osd_ops.values():
        kind = "write" if op.flags & objecter.FLAG_WRITE else "read"
        if op.reply is None:
            unreplied[op.osd] += 1
            continue
        lat[op.osd][kind].append(op.reply - op.send)
        if op.done is not None:
            after[op.osd][kind].append(op.done - op.reply)
    out = {}
    for osd in sorted(set(lat) | set(unreplied)):
        per = {}
        for kind, v in sorted(lat[osd].items()):
            v.sort()
            a = after[osd][kind]
            per[kind] = {"ops": len(v),
                         "reply_us_p50": round(_pct(v, 0.5) / 1e3, 1),
                         "reply_us_p99": round(_pct(v, 0.99) / 1e3, 1),
                         "done_us_mean": round(sum(a) / len(a) / 1e3, 1)
                         if a else None}
        out[str(osd)] = dict(per, unreplied=unreplied[osd])
    return out


def summary(path, zones, as_json, out):
    """Summarize the trace at `path` on `out`. -> exit status"""
    tr = RbdTrace(path)
    res = {"type": "rbd_summary", "trace": path, "images": {},
           "incomplete": tr.incomplete,
           "unmatched_completions": tr.unmatched}
    for ictx, reqs in tr.by_image().items():
        img = tr.images.get(ictx, {})
        s = image_summary(reqs, zones)
        s["pool"] = img.get("pool")
        res["images"][tr.image_name(ictx)] = s
    res["cache"] = cache_summary(tr)
    for name, c in res["cache"]["images"].items():
        res["images"].setdefault(name, {})["cache"] = c
    res["osds"] = osd_summary(tr.osd_ops)
    data = [o for o in tr.osd_ops.values() if o.data_object()]
    res["osd_ops_linked"] = {
        "data_ops": len(data),
        "linked": sum(o.request is not None for o in data),
        "object_size": 1 << tr.order if tr.order else None}
    if as_json:
        out.write(json_line(res))
        return 0
    for name, s in res["images"].items():
        if "ops" in s:
            write_image(out, name, s)
        if s.get("cache"):
            write_cache(out, s["cache"])
    write_cache(out, None, res["cache"])
    if res["osds"]:
        write_osds(out, res["osds"])
        k = res["osd_ops_linked"]
        if k["data_ops"]:
            out.write("  %d of %d data ops linked to their librbd call%s\n" % (
                k["linked"], k["data_ops"], " (objects of %s)" % _human(
                    k["object_size"]) if k["object_size"] else ""))
    if tr.incomplete or tr.unmatched:
        out.write("(%d requests never completed, %d completions without "
                  "their request)\n" % (tr.incomplete, tr.unmatched))
    return 0


def write_image(out, name, s):
    """One image's summary as text."""
    out.write("image %s%s: %d ops in %.1f s, reads %.0f %% of ops, "
              "%.0f %% of bytes\n" % (
                  name, " (pool %s)" % s["pool"] if s["pool"] else "",
                  sum(s["ops"].values()), s["span_s"], s["read_pct"],
                  s["read_bytes_pct"]))
    out.write("  %-13s %9s %14s %12s\n" % ("OP", "COUNT", "BYTES",
                                          "MEAN_LAT_US"))
    for op, n in sorted(s["ops"].items()):
        out.write("  %-13s %9d %14d %12.1f\n" % (
            op, n, s["bytes"].get(op, 0), s["latency_us_mean"][op]))
    out.write("  sizes: %s\n" % ", ".join(
        "<=%s: %d" % (_human(int(k)), v) for k, v in s["sizes"].items()))
    out.write("  zones of %s (reads / writes, bytes):\n" %
              _human(s["zone_bytes"]))
    top = max((z["bytes"] for z in s["zones"]), default=0) or 1
    for z in s["zones"]:
        out.write("  %10s %7d / %-7d %s\n" % (
            _human(z["start"]), z["reads"], z["writes"],
            "#" * round(40 * z["bytes"] / top)))


def write_osds(out, osds):
    """The Objecter's ops per OSD as text."""
    out.write("OSD ops (the client's Objecter: sent -> reply; reply -> "
              "its completion ran):\n")
    out.write("  %-5s %-6s %8s %12s %12s %12s\n" % (
        "OSD", "KIND", "OPS", "REPLY_P50_US", "REPLY_P99_US", "DONE_US"))
    for osd, per in osds.items():
        for kind in ("read", "write"):
            if kind in per:
                k = per[kind]
                out.write("  %-5s %-6s %8d %12.1f %12.1f %12s\n" % (
                    "osd.%s" % osd, kind, k["ops"], k["reply_us_p50"],
                    k["reply_us_p99"], "-" if k["done_us_mean"] is None
                    else "%.1f" % k["done_us_mean"]))
        if per["unreplied"]:
            out.write("  osd.%s: %d ops never replied to in the trace\n" %
                      (osd, per["unreplied"]))


def _human(n):
    for unit in ("", "K", "M", "G", "T"):
        if n < 1024 or unit == "T":
            return "%d%s" % (n, unit) if n == int(n) else "%.1f%s" % (n, unit)
        n /= 1024.0
