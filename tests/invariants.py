"""A report never contradicts itself: invariants of the window reports
of a capture (osdstage -r with --from/--to and filters), checked over
many random windows through the library itself, not the command line.
tests/unit/test_report_invariants.py runs them on the fixture captures;
the BPF and cluster tiers call check_capture() on captures they make.

The window rule they hold the reports to (docs/stages.md, "Windows"): a
figure belongs to the window that holds its stage's end; a stage's
per-class rows go with the stage; --slowest ranks the ops whose
ranking stage ends in the window; a window lies inside the part of the
capture recorded with all its probes attached."""
import random
import re
from types import SimpleNamespace

from cephlat.capture.reader import Capture
from cephlat.cli.windows import window_record
from cephlat.errors import UserError
from cephlat.model import verdict as verdictmod
from cephlat.model.interval import RunInfo

# workers that slept more than this % of the time are never saturated
SLEPT_MOST = 50.0


def _args(t0, t1, **kw):
    a = dict(t_from=None if t0 is None else ("rel", t0),
             t_to=None if t1 is None else ("rel", t1), thread_role=None,
             op_class=None, slowest=0, html=None, perfetto=None,
             timeline_ms=20.0, osd=None)
    a.update(kw)
    return SimpleNamespace(**a)


def windows(cap, n, rng):
    """n random windows of the capture as (from, to) in seconds from its
    start (None: its start or end), mostly in the part recorded with all
    its probes attached, some past its ends."""
    lo, hi = ((t - cap.first_ns) / 1e9 for t in cap.traced_span())
    span = hi - lo
    out = []
    for _ in range(n):
        a = rng.uniform(lo - 0.05 * span, hi)
        b = a + rng.choice([rng.uniform(0.001, 0.05), rng.uniform(0, span),
                            rng.uniform(0, 1.5 * span)])
        r = rng.random()
        if r < 0.1:
            a = None
        elif r < 0.2:
            b = None
        if a is not None and b is not None and b <= a:
            b = a + 0.001
        out.append((a, b))
    return out


def filters(cap, rng):
    """Random filters the capture allows: --op-class, --thread-role,
    --slowest (mostly: the accounting)."""
    kw = {"slowest": rng.choice([0, 1, 3, 5, 5])}
    r = rng.random()
    if r < 0.3 and cap.info.get("classes"):
        kw["op_class"] = rng.choice(cap.vocab.op_classes)
    elif r < 0.5:
        kw["thread_role"] = rng.choice(cap.roles.names)
    return kw


def check_counts(rec, calls_match=False):
    """Per-class rows add up to their stage's count; do_op ends at
    dequeue_op's return, so never counts more (calls_match: the same:
    every dequeue_op of the capture ran do_op); the shard table holds
    no more ops than queue_wait."""
    st = rec["stages"]
    for name, s in st.items():
        bc = s.get("by_class")
        if bc:
            assert sum(c["count"] for c in bc.values()) == s["count"], (
                name, s["count"], {k: c["count"] for k, c in bc.items()})
    if "do_op" in st and "dequeue_op" in st:
        d, e = st["do_op"]["count"], st["dequeue_op"]["count"]
        if calls_match:
            assert d == e, (d, e)
        else:
            # an older capture's do_op ended at its own return, just
            # before dequeue_op's: one op may straddle a bound
            assert d <= e + 1, (d, e)
    shards = rec.get("shards") or []
    if "queue_wait" in st:
        assert sum(r["ops"] for r in shards) <= st["queue_wait"]["count"]


def check_attribution(rec):
    """The attribution's parts add up to the queue wait (their means to
    its mean when every dequeued op was attributed) and their shares
    to 1; each shard's shares to 1."""
    a = rec.get("attribution")
    qw = rec["stages"].get("queue_wait")
    if not a or not qw or not qw["count"]:
        return
    total = sum(p["share"] for p in a.values())
    if any(p["mean_us"] for p in a.values()):
        assert abs(total - 1) <= 0.0006 * len(a), a
    shards = rec.get("shards") or []
    if sum(r["ops"] for r in shards) == qw["count"]:
        means = sum(p["mean_us"] for p in a.values())
        assert abs(means - qw["mean_us"]) <= 0.06 * (len(a) + 1) + \
            1e-4 * qw["mean_us"], (means, qw["mean_us"], a)
    for r in shards:
        if r["queue_wait_mean_us"]:
            got = sum(r[p] for p in a)
            assert abs(got - 1) <= 0.0006 * len(a), r


def _share(x):
    """A share as the attribution and shard tables print it."""
    return "%.0f" % (100 * x)


def check_verdict(rec):
    """The verdict quotes the tables' own figures, and never calls the
    workers saturated (or busy) when their thread statistics say they
    slept most of the time."""
    text = " ".join((rec.get("verdict") or "").split())
    if not text:
        return
    a = rec.get("attribution") or {}
    shares = {_share(p["share"]) for p in a.values()}
    worker = rec.get("worker_role")
    wk = (rec.get("threads") or {}).get(worker, {})
    for line in (rec.get("verdict") or "").splitlines():
        line = " ".join(line.split())
        if not line.startswith("ops waited"):
            continue
        head, _, rest = line.partition("; ")
        # what the queue wait was made of: the attribution table's
        # shares (the thread figures are checked below)
        rest = re.sub(r"\(\d+ workers, each runnable [0-9.]+ % and on CPU "
                      r"[0-9.]+ % of the time\)", "", rest)
        rest = re.sub(r"\d+ % of wake-ups", "", rest)
        rest = re.sub(r"slept [0-9.]+ %", "", rest)
        for m in re.finditer(r"(\d+(?:\.\d+)?) %", rest):
            assert m.group(1) in shares, (m.group(0), shares, line)
        m = re.search(r"each runnable ([0-9.]+) % and on CPU ([0-9.]+) %",
                      line)
        if m:
            assert m.group(1) == "%.1f" % wk["runq_pct"], (line, wk)
            on = max(0.0, 100.0 - wk["offcpu_pct"] - wk["runq_pct"])
            assert m.group(2) == "%.1f" % on, (line, wk)
    m = re.search(r"workers slept ([0-9.]+) % of the time", text)
    if m:
        assert m.group(1) == "%.1f" % wk["offcpu_pct"], (m.group(0), wk)
    slept = wk.get("offcpu_pct")
    if slept is not None and slept > SLEPT_MOST:
        label = verdictmod.CAUSES.get(rec["cause"], rec["cause"])
        assert rec["cause"] != "busy", (rec["cause"], text)
        assert "saturated" not in text and "saturated" not in label, text
        assert not re.search(r"\bbusy\b(?! or blocked)", text), text


def _union(ivs):
    """The length of the union of intervals [(a, b)]."""
    tot, at = 0.0, None
    for a, b in sorted(ivs):
        if at is None or a > at:
            tot += b - a
            at = b
        elif b > at:
            tot += b - at
            at = b
    return tot


def check_slowest(rec):
    """Each --slowest row accounts for its whole span: its queue wait,
    stages, replies and own commit, and the gaps between them named, add
    up to op_total; the gaps are where nothing else is; the slowest of
    the rows is the window's op_total maximum."""
    rows = rec.get("slowest") or []
    for r in rows:
        if r.get("total_us") is None:
            continue
        end = r["done_us"]
        assert abs(end - r["total_us"]) <= 0.15, r
        parts = []
        if "dequeue" in r:
            parts.append((0.0, r["dequeue"]["at_us"]))
        parts += [(s["start_us"], s["end_us"]) for s in r["stages"]]
        parts += [(x["at_us"] - x["wait_us"], x["at_us"])
                  for x in r.get("replies", []) + r.get("shard_reads", [])]
        if r.get("local_commit_wait_us"):
            parts.append((r["local_commit_us"] - r["local_commit_wait_us"],
                          r["local_commit_us"]))
        parts = [(max(0.0, a), min(end, b)) for a, b in parts
                 if b > 0 and a < end]
        gaps = [(g["start_us"], g["end_us"]) for g in r["gaps"]]
        for g in r["gaps"]:
            assert g["what"] in ("commit", "probes", "detached",
                                 "unaccounted"), g
            assert g["words"], g
        # rounding: 0.1 us a bound
        slack = 0.1 * (len(parts) + len(gaps) + 2)
        whole = _union(parts + gaps)
        assert abs(whole - end) <= slack, (whole, end, r)
        measured = _union(parts)
        assert abs(measured + sum(b - a for a, b in gaps) - end) <= slack, (
            measured, gaps, end, r)
    totals = [r["total_us"] for r in rows if r.get("total_us") is not None]
    ot = rec["stages"].get("op_total")
    # a row's total is rounded to 0.1 us, the stage's max to 0.001 us
    tol = 0.05 + 0.0005 + 1e-9
    if totals and ot:
        assert max(totals) <= ot["max_us"] + tol, (totals, ot)
        if len(totals) == len(rows):
            assert abs(rows[0]["total_us"] - ot["max_us"]) <= tol or \
                max(totals) == rows[0]["total_us"], (totals, ot)
            assert abs(max(totals) - ot["max_us"]) <= tol, (totals, ot)


def check_window(rec, cap):
    """The window lies inside the part the capture recorded with all its
    probes attached."""
    a, b = cap.traced_span()
    w = rec["window"]
    assert w["from_s"] >= round((a - cap.first_ns) / 1e9, 6) - 1e-6, w
    assert w["to_s"] <= round((b - cap.first_ns) / 1e9, 6) + 1e-6, w


def check_record(rec, cap, calls_match=False):
    check_window(rec, cap)
    check_counts(rec, calls_match)
    check_attribution(rec)
    check_verdict(rec)
    check_slowest(rec)


def check_capture(path, n=100, seed=1, calls_match=False):
    """Every invariant over n random windows and filters of each OSD of
    the capture at `path` -> how many window reports were checked."""
    rng = random.Random(seed)
    probe = Capture(path)
    checked = 0
    for slot in range(len(probe.targets)):
        cap = probe if slot == 0 else Capture(path, slot)
        run = RunInfo.from_capture(cap)
        for t0, t1 in windows(cap, n, rng):
            args = _args(t0, t1, **filters(cap, rng))
            try:
                rec = window_record(args, cap, run)[0].record
            except UserError:
                continue        # nothing recorded fully in it
            try:
                check_record(rec, cap, calls_match)
            except AssertionError as e:
                raise AssertionError("%s slot %d, window %s..%s, %s: %s" % (
                    path, slot, t0, t1, {k: getattr(args, k) for k in (
                        "op_class", "thread_role", "slowest")}, e)) from e
            checked += 1
    return checked
