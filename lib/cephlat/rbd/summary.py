"""--summary: per image, ops, bytes and mean latency per type, request
sizes, an offset heat-map and the read/write mix (text or JSON)."""
import collections
import json

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


def summary(path, zones, as_json, out):
    """Summarize the trace at `path` on `out`. -> exit status"""
    tr = RbdTrace(path)
    res = {"trace": path, "images": {}, "incomplete": tr.incomplete,
           "unmatched_completions": tr.unmatched}
    for ictx, reqs in tr.by_image().items():
        img = tr.images.get(ictx, {})
        s = image_summary(reqs, zones)
        s["pool"] = img.get("pool")
        res["images"][tr.image_name(ictx)] = s
    if as_json:
        out.write(json.dumps(res) + "\n")
        return 0
    for name, s in res["images"].items():
        write_image(out, name, s)
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


def _human(n):
    for unit in ("", "K", "M", "G", "T"):
        if n < 1024 or unit == "T":
            return "%d%s" % (n, unit) if n == int(n) else "%.1f%s" % (n, unit)
        n /= 1024.0
