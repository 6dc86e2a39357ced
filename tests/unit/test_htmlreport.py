"""The HTML report and the Perfetto export, on a synthetic capture: 3 shard
workers, 2 enqueuers (one not among the lanes), 200 ops, one timer
wake-up. The page is loaded in headless Chromium: DOM after its script
ran, console errors, a screenshot kept as a test artefact."""
import html
import json
import os
import random
import re
import shutil

import pytest

from browser import chromium, console_lines, dom
from conftest import need
from cephlat.model import verdict
from cephlat.render import html as htmlreport
from cephlat.render import html_timeline, perfetto
from cephlat.model.hist import Hist
from cephlat.model.interval import Interval

T0 = 10_000_000_000
WORKERS = [101, 102, 103]
ENQUEUERS = [201, 202]                 # 202 has no lane of its own
HOSTILE = '<img src=x onerror="alert(1)">&msgr'
TIMER_OP = 50                # the first wake-up from here on is a timeout
ARTEFACTS = os.environ.get("OSDSTAGE_ARTEFACTS", "/tmp/osdstage-artefacts")


def _op_stages(rng, cls, enq, deq):
    """The stages of one op dequeued at `deq`, as the probes see them."""
    done = deq + rng.randint(20_000, 120_000)
    store = "bluestore_read" if cls == "read" else "bluestore_submit"
    return [["queue_wait", enq, deq], ["dequeue_op", deq, done],
            ["do_op", deq + 1_000, done - 1_000],
            ["get_object_context", deq + 2_000, deq + 6_000],
            [store, deq + 7_000, done - 2_000],
            ["op_total", enq, done + 500]], done


def synthetic_timeline(n_ops=200, seed=7):
    rng = random.Random(seed)
    free = {w: T0 + 50_000 for w in WORKERS}    # worker busy until
    run_from = {w: T0 for w in WORKERS}
    cpu = {w: [] for w in WORKERS}
    ops, wakeups, t = [], [], T0 + 100_000
    for i in range(n_ops):
        t += rng.randint(5_000, 60_000)
        w, enq_tid = WORKERS[i % 3], ENQUEUERS[i % 2]
        cls = rng.choice(["read", "write", "other", None])
        wake = None
        start = free[w]
        if free[w] <= t:                        # asleep: woken for this op
            timer = i >= TIMER_OP and not any(o["wake"] == "timeout"
                                              for o in ops)
            wake = "timeout" if timer else "enqueuer"
            ts = t + 2_000
            start = ts + rng.randint(1_000, 30_000)
            cpu[w] += [[run_from[w], free[w], "run"], [free[w], ts, "sleep"],
                       [ts, start, "runq"]]
            run_from[w] = start
            wakeups.append({"from_tid": None if wake == "timeout" else
                            enq_tid, "to_tid": w, "ts_ns": ts,
                            "oncpu_ns": start})
        stages, free[w] = _op_stages(rng, cls, t,
                                     start + rng.randint(500, 3_000))
        ops.append({"op": "0x55d0c0%06x" % (i * 0x340), "tid": w,
                    "enqueue_ns": t, "enqueue_tid": enq_tid, "class": cls,
                    "wake": wake, "stages": stages})
    t1 = max(free.values()) + 100_000
    for w in WORKERS:
        cpu[w] += [[run_from[w], free[w], "run"], [free[w], t1, "sleep"]]
    lanes = [{"tid": w, "name": "tp_osd_tp", "role": "tp_osd_tp",
              "cpu": cpu[w]} for w in WORKERS]
    lanes.append({"tid": 201, "name": HOSTILE, "role": "msgr-worker",
                  "cpu": _enqueuer_cpu(ops, 201, t1)})
    return {"window": [T0, t1], "clock_offset_ns": 1_700_000_000 * 10 ** 9,
            "lanes": lanes, "ops": ops, "wakeups": wakeups}


def _enqueuer_cpu(ops, tid, t1):
    """Running around each enqueue (and its wake-up), asleep otherwise."""
    out, last = [], T0
    for op in ops:
        if op["enqueue_tid"] == tid:
            s, e = op["enqueue_ns"] - 3_000, op["enqueue_ns"] + 5_000
            out += [[last, s, "sleep"], [s, e, "run"]]
            last = e
    return out + [[last, t1, "sleep"]]


def _summary(values_ns):
    h = Hist.from_ns(values_ns)
    s = h.summary()
    s["hist"] = [[lo, hi, c] for lo, hi, c in h.log2_buckets(1)]
    return s


def synthetic_interval(tl):
    """A report whose numbers come from the timeline, as an Interval:
    its record and its Hist objects (by the model's keys)."""
    per_stage = {}
    for op in tl["ops"]:
        for name, s, e in op["stages"]:
            per_stage.setdefault(name, []).append(e - s)
    rec = synthetic_rec(tl, per_stage)
    hists = {n: Hist.from_ns(v) for n, v in per_stage.items()}
    hists.update({"kernel." + k: Hist.from_ns(v)
                  for k, v in _kernel_ns(tl).items()})
    return Interval(None, rec["interval_s"], rec, hists, {}, {})


def _kernel_ns(tl):
    sleeps = [e - s for lane in tl["lanes"] for s, e, st in lane["cpu"]
              if st == "sleep"]
    return {"offcpu": sleeps, "wakeup_delay": [
        w["oncpu_ns"] - w["ts_ns"] for w in tl["wakeups"]],
        "syncfs": [], "block_rq": [], "futex_wait": sleeps}


def synthetic_rec(tl, per_stage):
    """A report record whose numbers come from the timeline."""
    stages = {n: _summary(v) for n, v in per_stage.items()}
    stages["queue_wait"]["by_class"] = {
        c: Hist.from_ns([e - s for op in tl["ops"] if op["class"] == c
                         for n, s, e in op["stages"] if n == "queue_wait"])
        .summary() for c in ("read", "write", "other")}
    kernel = {k: _summary(v) for k, v in _kernel_ns(tl).items()}
    kernel["offcpu"]["by_role"] = {
        "tp_osd_tp": _summary(_kernel_ns(tl)["offcpu"][:50])}
    part = {"mean_us": 40.0, "p50_us": 30.0, "p99_us": 200.0}
    return {
        "type": "interval", "ts": 1_700_000_010.5, "interval_s": 1.0,
        "pid": 4242, "ceph_version": "16.2.15 <pacific>", "stages": stages,
        "kernel": kernel, "unavailable": {"bluestore_read": "no symbol"},
        "threads": {"tp_osd_tp": {"threads": 3, "offcpu_pct": 61.5,
                                  "runq_pct": 4.2,
                                  "futex_pct_of_offcpu": 98.0,
                                  "wakeups": 120},
                    "msgr-worker": {"threads": 2, "offcpu_pct": 80.0,
                                    "runq_pct": 1.0,
                                    "futex_pct_of_offcpu": 10.0,
                                    "wakeups": 400}},
        "attribution": {"busy": dict(part, share=0.2),
                        "signal": dict(part, share=0.5),
                        "runq": dict(part, share=0.25),
                        "pickup": dict(part, share=0.05)},
        "wakers": {"enqueuer": 90, "other": 3, "timeout": 1,
                   "timeouts_with_work": 1},
        "shards": [{"shard": 0, "cv": "0x1", "workers": 3, "ops": 200,
                    "queue_wait_mean_us": 55.0, "busy": 0.2, "signal": 0.5,
                    "runq": 0.25, "pickup": 0.05, "wake_enqueuer": 90,
                    "wake_other": 3, "wake_timeout": 1,
                    "timeouts_with_work": 1}],
        "cause": "signal",
        "verdict": "Workers were asleep with work queued <50 %>.\n"
                   "Evidence: signal delay p99 200 us & rising.",
    }


@pytest.fixture(scope="module")
def capture():
    tl = synthetic_timeline()
    return synthetic_interval(tl), tl


def expected_bars(rec):
    """Histogram bars: first to last non-empty bucket, per stage shown."""
    n = 0
    for s in list(rec["stages"].values()) + list(rec["kernel"].values()):
        nz = [i for i, b in enumerate(s["hist"]) if b[2]]
        n += nz[-1] - nz[0] + 1 if nz else 0
    return n


# --------------------------------------------------------------------------
# HTML, static

def test_html_is_self_contained(capture):
    page = htmlreport.render(*capture)
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"""(src|href|action)\s*=\s*["']?\s*[a-z]*:?//""",
                         page, re.I)
    assert re.findall(r"url\(([^)]*)\)", page) == ["#arrow"] * len(
        re.findall(r"url\(", page))
    assert "@import" not in page


def test_html_escapes_data(capture):
    page = htmlreport.render(*capture)
    assert HOSTILE not in page and "<50 %>" not in page
    assert html.escape(HOSTILE[:22]) in page
    assert "&lt;50 %&gt;" in page and "16.2.15 &lt;pacific&gt;" in page


def test_html_structure_without_a_browser(capture):
    iv, tl = capture
    rec = iv.record
    d = dom(htmlreport.render(iv, tl))
    assert {"verdict", "stages", "kernel", "attribution", "roles", "wakers",
            "shards", "timeline", "legend"} <= d.ids
    assert d.classes["lane"] == len(WORKERS) + len(ENQUEUERS)
    assert d.classes["op"] == len(tl["ops"])
    assert d.classes["stage"] == sum(len(o["stages"]) for o in tl["ops"])
    assert d.classes["wake"] == len(tl["wakeups"])
    assert d.classes["wake-timer"] == 1
    assert d.classes["bar"] == expected_bars(rec)
    assert d.classes["attr-part"] == 4
    assert d.classes["role-bar"] == 2 * len(rec["threads"])
    assert "tl-note" not in d.ids


def test_html_caps_ops(capture, monkeypatch):
    monkeypatch.setattr(html_timeline, "MAX_OPS", 50)
    page = htmlreport.render(*capture)
    assert dom(page).classes["op"] == 50
    assert "drawing the first 50 of 200 ops" in page


def test_html_merges_short_cpu_states(capture):
    """A thread switching every 100 ns is drawn as runs of the dominant
    state, not as one rect per switch."""
    iv, tl = capture
    t0, t1 = tl["window"]
    busy = [[t, t + 100, "run" if (t // 100) % 3 else "sleep"]
            for t in range(t0, t0 + 2_000_000, 100)]
    lane = {"tid": 300, "name": "bstore_kv_sync", "role": None,
            "cpu": busy}
    page = htmlreport.render(iv, dict(tl, lanes=tl["lanes"] + [lane]))
    d = dom(page)
    drawn = d.classes.get("cpu-run", 0) + d.classes.get("cpu-sleep", 0)
    assert drawn < 5 * html_timeline.PLOT_W
    assert "scheduler states merged into runs" in page
    assert re.search(r"<title>[^<]*: running [67]\d %, sleeping [23]\d %<",
                     page)


def test_html_without_kernel_or_timeline(capture):
    iv, _ = capture
    bare = {k: iv.record[k] for k in ("ts", "interval_s", "pid",
                                      "ceph_version", "stages")}
    d = dom(htmlreport.render(Interval(None, 1.0, bare, iv.hists, {}, {}),
                              None))
    assert "verdict" in d.ids and "stages" in d.ids
    assert not {"attribution", "roles", "kernel", "timeline"} & d.ids


# --------------------------------------------------------------------------
# HTML in headless Chromium

@pytest.fixture(scope="module")
def page_file(capture, tmp_path_factory):
    need(shutil.which("chromium"), "chromium missing (make setup)")
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(htmlreport.render(*capture, title="synthetic capture"))
    return str(path)


def test_chromium_dom_after_script(capture, page_file):
    iv, tl = capture
    rec = iv.record
    p = chromium(["--dump-dom", "file://" + page_file])
    assert p.returncode == 0, p.stderr[-2000:]
    assert console_lines(p.stderr) == []
    d = dom(p.stdout)
    assert d.root.get("data-js-ready") == "1", d.root
    assert "data-js-errors" not in d.root, d.root
    assert d.classes["lane"] == len(WORKERS) + len(ENQUEUERS)
    assert d.classes["op"] == len(tl["ops"])
    assert d.classes["stage"] == sum(len(o["stages"]) for o in tl["ops"])
    assert d.classes["wake"] == len(tl["wakeups"])
    assert d.classes["bar"] == expected_bars(rec)
    assert d.classes["cpu-run"] and d.classes["cpu-runq"] and \
        d.classes["cpu-sleep"]
    text = " ".join("".join(d.verdict).split())
    assert verdict.CAUSES["signal"] in text
    assert "queued <50 %>." in text and "& rising" in text
    assert 'id="tl-range">showing +0 ns to +' in p.stdout   # JS drew the axis


def test_chromium_reports_script_errors(tmp_path):
    """The checks above would see a broken script."""
    need(shutil.which("chromium"), "chromium missing (make setup)")
    path = tmp_path / "broken.html"
    path.write_text(htmlreport.render(Interval(
        None, 1, {"pid": 1, "stages": {}, "ts": 0, "interval_s": 1}, {}, {},
        {}), None)
                    .replace("zoomable(plot);", "zoomable(plot); nosuch();"))
    p = chromium(["--dump-dom", "file://%s" % path])
    assert "nosuch is not defined" in dom(p.stdout).root.get(
        "data-js-errors", "")
    assert any("Uncaught" in l for l in console_lines(p.stderr))


def test_chromium_screenshot(page_file):
    os.makedirs(ARTEFACTS, exist_ok=True)
    png = os.path.join(ARTEFACTS, "htmlreport.png")
    if os.path.exists(png):
        os.unlink(png)
    p = chromium(["--hide-scrollbars", "--screenshot=" + png,
                  "--window-size=1400,2000", "file://" + page_file])
    assert p.returncode == 0, p.stderr[-2000:]
    assert os.path.getsize(png) > 10_000
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------
# Perfetto

def test_perfetto_trace_is_valid(capture):
    _, tl = capture
    obj = perfetto.render(tl, pid=4242)
    json.dumps(obj)
    assert perfetto.validate(obj) == []
    assert obj["displayTimeUnit"] == "ns"
    ev = obj["traceEvents"]
    for e in ev:
        assert {"name", "ph", "ts", "pid", "tid"} <= set(e), e
        assert e["pid"] == 4242
    names = {e["args"]["name"] for e in ev if e["name"] == "thread_name"}
    assert HOSTILE in names and "tid 202" in names
    assert {"tp_osd_tp cpu", "tid 202 cpu"} <= names


def test_perfetto_events(capture):
    _, tl = capture
    ev = perfetto.render(tl)["traceEvents"]
    sched = [e for e in ev if e.get("cat") == "sched"]
    assert {e["name"] for e in sched} == {"running", "runnable", "sleeping"}
    assert all(e["tid"] >= perfetto.CPU_TID_BASE for e in sched)
    ops = [e for e in ev if e.get("cat") == "op" and e["ph"] == "X"]
    assert len(ops) == sum(len(o["stages"]) - 2 for o in tl["ops"])
    assert all(e["tid"] in WORKERS and set(e["args"]) == {"op", "class",
                                                          "wake"}
               for e in ops)
    spans = [e for e in ev if e["ph"] in "be"]
    assert len(spans) == 4 * len(tl["ops"])
    flows = [e for e in ev if e["ph"] in ("s", "f")]
    assert len(flows) == 2 * (len(tl["wakeups"]) - 1)
    assert all(e["bp"] == "e" for e in flows if e["ph"] == "f")
    assert [e["name"] for e in ev if e["ph"] == "i"] == ["timer wakeup"]
    assert min(e["ts"] for e in ev if e["ph"] != "M") >= 0


def test_perfetto_clamps_overlapping_stages(capture):
    _, tl = capture
    op = json.loads(json.dumps(tl["ops"][0]))
    deq = op["stages"][1]
    op["stages"].append(["do_op", deq[1] + 10, deq[2] + 50_000])
    obj = perfetto.render(dict(tl, ops=[op]))
    assert perfetto.validate(obj) == []


@pytest.mark.parametrize("breakage,problem", [
    (lambda ev: ev.pop("dur"), "without numeric dur"),
    (lambda ev: ev.update(dur=-1.0), "negative dur"),
    (lambda ev: ev.update(ts="12"), "non-numeric ts"),
    (lambda ev: ev.pop("tid"), "missing 'tid'"),
    (lambda ev: ev.update(dur=ev["dur"] + 1e6), "overlaps"),
])
def test_validate_catches_broken_slices(capture, breakage, problem):
    obj = perfetto.render(capture[1])
    ev = next(e for e in obj["traceEvents"] if e["ph"] == "X" and
              e["name"] == "get_object_context")
    breakage(ev)
    assert any(problem in p for p in perfetto.validate(obj)), \
        perfetto.validate(obj)


def test_validate_catches_unpaired_events(capture):
    obj = perfetto.render(capture[1])
    ev = obj["traceEvents"]
    ev.remove(next(e for e in ev if e["ph"] == "f"))
    ev.remove(next(e for e in ev if e["ph"] == "e"))
    ev.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": 1,
               "tid": 9, "args": {}})
    problems = perfetto.validate(obj)
    assert any(p.startswith("flow ") for p in problems), problems
    assert any(p.startswith("async slice") for p in problems), problems
    assert any("M without args.name" in p for p in problems), problems
    assert perfetto.validate({"events": []}) == ["no traceEvents list"]
