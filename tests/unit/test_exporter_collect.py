"""The exporter's sums and their Prometheus rendering (exporter/collect.py,
exporter/families.py), without a tracer:

- power-of-two buckets from the kernel's fine slots are exact: the
  cumulative count at le is the number of durations below le;
- sums add up across refreshes (and so across tracers: the state is the
  exporter's, not the tracer's);
- every family of families.py is in /metrics from the start (TYPE and
  HELP), names and labels are what families.py says, and the text parses
  with prometheus_client's own parser.
"""
import random

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cephlat.exporter.collect import LE, Exported, HistSum
from cephlat.exporter import families as F
from cephlat.exporter.families import BUCKETS_S, FAMILIES
from cephlat.model.hist import Hist
from cephlat.model.interval import build_interval


def parsed(name):
    """A family's name as prometheus_client's parser gives it (a counter's
    without _total)."""
    return name[:-len("_total")] if name.endswith("_total") else name


def durations(n, seed):
    rnd = random.Random(seed)
    # log-uniform from 100 ns to 20 s, away from bucket boundaries
    out = []
    while len(out) < n:
        v = int(10 ** rnd.uniform(2, 10.3))
        if all(abs(v - le * 1e9) > 2 for le in BUCKETS_S):
            out.append(v)
    return out


def test_buckets_are_exact():
    for seed in range(3):
        vals = durations(5000, seed)
        s = HistSum()
        s.add(Hist.from_ns(vals))
        cum = dict(s.cumulative())
        for le in BUCKETS_S:
            assert cum["%g" % le] == sum(1 for v in vals if v < le * 1e9), le
        assert cum["+Inf"] == len(vals) == s.count
        assert abs(s.sum_s - sum(vals) / 1e9) < 1e-6


def test_sums_add_across_refreshes():
    a, b = durations(300, 7), durations(500, 8)
    s = HistSum()
    s.add(Hist.from_ns(a))
    s.add(Hist())                   # an empty interval changes nothing
    s.add(Hist.from_ns(b))
    whole = HistSum()
    whole.add(Hist.from_ns(a + b))
    assert s.cumulative() == whole.cumulative()
    assert s.count == 800


def _render(exported):
    reg = CollectorRegistry(auto_describe=False)
    reg.register(exported)
    return generate_latest(reg).decode()


def test_every_family_is_served_from_the_start():
    text = _render(Exported(1.0))
    for f in FAMILIES:
        # (a counter's TYPE line drops _total once it has samples)
        assert "# TYPE %s %s" % (f.name, f.type) in text or \
            "# TYPE %s %s" % (f.name[:-len("_total")], f.type) in text, \
            f.name
        assert "# HELP %s" % f.name in text, f.name
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(fams) == {parsed(f.name) for f in FAMILIES}
    assert fams[F.OVERHEAD_BOUND].samples[0].value == 0.01
    assert fams[F.TARGETS].samples[0].value == 0


def test_an_osds_series_render_and_parse():
    ex = Exported(0.0)
    ex.attached("osd.3", ("123", "16.2.15", "pacific", "16.2", "true",
                          "queue_wait,op_total"))
    vals = durations(1000, 3)
    with ex.lock:
        st = ex.osd("osd.3")
        st.hist(F.STAGE_LATENCY, ("queue_wait", "read"), Hist.from_ns(vals))
        st.count(F.QUEUE_WAIT, ("0", "busy"), 1.5)
        st.count(F.QUEUE_WAIT, ("0", "busy"), 0.5)
    text = _render(ex)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    h = fams[F.STAGE_LATENCY]
    buckets = [s for s in h.samples if s.name.endswith("_bucket")]
    assert [float(s.labels["le"]) for s in buckets] == \
        [float(x) for x in LE]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and counts[-1] == 1000
    for s in h.samples:
        assert s.labels["ceph_daemon"] == "osd.3"
        assert s.labels["stage"] == "queue_wait"
        assert s.labels["op_class"] == "read"
    q = fams[parsed(F.QUEUE_WAIT)]
    assert q.samples[0].value == 2.0
    assert q.samples[0].labels == {"ceph_daemon": "osd.3", "shard": "0",
                                   "cause": "busy"}
    info = fams[F.OSD_INFO].samples[0]
    assert info.labels["pid"] == "123" and info.value == 1
    assert fams[parsed(F.ATTACHES)].samples[0].value == 1
    # an OSD that exits keeps its sums, loses its info
    ex.detached(["osd.3"])
    fams = {f.name: f for f in text_string_to_metric_families(_render(ex))}
    assert not fams[F.OSD_INFO].samples
    assert fams[parsed(F.QUEUE_WAIT)].samples[0].value == 2.0


def test_a_stage_is_exported_per_op_class_only_where_its_classes_make_it_up():
    """op_total: every completed op has an op class, so its classes add up
    to it (exported per class). queue_wait: every dequeued op counts,
    replica ops and recovery messages too, which complete with no op
    class: exported whole, as osdstage's own queue_wait row, or its
    percentiles would be the client ops' alone."""
    from cephlat.engine.tracer import CLASS_SUMMED
    from cephlat.model import vocab as vocabmod
    from cephlat.model.interval import RunInfo
    from cephlat.model.roles import CEPH_ROLES
    from cephlat.model.snapshot import Snapshot
    vocab = vocabmod.live()
    run = RunInfo(1, "16.2.15", ["queue_wait", "op_total"], {},
                  {"queue_wait", "op_total"}, 0, False, CEPH_ROLES, vocab)
    run.partitioned = set(CLASS_SUMMED)
    reads, repops = durations(300, 1), durations(700, 2)
    hists = {"queue_wait": Hist.from_ns(reads + repops),
             "queue_wait.read": Hist.from_ns(reads),
             "op_total": Hist.from_ns(reads),
             "op_total.read": Hist.from_ns(reads)}
    cur = Snapshot(hists, {}, {}, {}, {}, 0, dict(hists), 0)
    ex = Exported(0.0)
    ex.add_interval("osd.0", build_interval(run, cur, None, 0, 1.0, 0),
                    {"interval_attached_fraction": 1.0, "estimated_pct": 0})
    fams = {f.name: f for f in text_string_to_metric_families(_render(ex))}
    counts = {(s.labels["stage"], s.labels["op_class"]): s.value
              for s in fams[F.STAGE_LATENCY].samples
              if s.name.endswith("_count")}
    assert counts[("queue_wait", "all")] == 1000
    assert ("queue_wait", "read") not in counts
    assert counts[("op_total", "read")] == 300
    assert ("op_total", "all") not in counts


def test_each_stage_from_the_one_tier_that_feeds_it():
    """Two tiers over one OSD (exporter/service.py): a stage both give is
    taken from the lean tier alone (never summed: its ops would count
    twice), the full tier's own stages from it; each tier's attached
    seconds apart, the traced seconds once, the costs added, and which
    tier feeds each stage in osdstage_stage_tier_info."""
    from cephlat.engine.tracer import CLASS_SUMMED
    from cephlat.exporter.collect import SCHED_CLASSES
    from cephlat.model import vocab as vocabmod
    from cephlat.model.interval import RunInfo
    from cephlat.model.roles import CEPH_ROLES
    from cephlat.model.snapshot import Snapshot
    vocab = vocabmod.live()
    sources = {"queue_wait": "lean", "op_total": "lean", "repop": "full",
               SCHED_CLASSES: "full"}
    ex = Exported(1.0)
    ex.attached("osd.0", ("1", "16.2.15", "pacific", "16.2", "true",
                          "queue_wait,op_total,repop"), sources)
    lean_ops, full_ops, repops = (durations(400, 3), durations(90, 4),
                                  durations(50, 5))
    for tier, stages, ops, frac, pct in (
            ("lean", ["queue_wait", "op_total"], lean_ops, 1.0, 0.2),
            ("full", ["queue_wait", "op_total", "repop"], full_ops, 0.25,
             0.5)):
        run = RunInfo(1, "16.2.15", stages, {}, {"op_total"}, 0, False,
                      CEPH_ROLES, vocab)
        run.partitioned = set(CLASS_SUMMED)
        hists = {"queue_wait": Hist.from_ns(ops),
                 "queue_wait.client": Hist.from_ns(ops),
                 "op_total": Hist.from_ns(ops),
                 "op_total.read": Hist.from_ns(ops)}
        if tier == "full":
            hists["repop"] = Hist.from_ns(repops)
        cur = Snapshot(hists, {}, {}, {}, {}, 0, dict(hists), 0)
        ex.add_interval("osd.0", build_interval(run, cur, None, 0, 10.0,
                                                None),
                        {"interval_attached_fraction": frac,
                         "estimated_pct": pct}, tier=tier,
                        sources=sources, traced=tier == "lean")
    fams = {f.name: f for f in text_string_to_metric_families(_render(ex))}
    counts = {(s.labels["stage"], s.labels["op_class"]): s.value
              for s in fams[F.STAGE_LATENCY].samples
              if s.name.endswith("_count")}
    assert counts == {("queue_wait", "all"): 400, ("op_total", "read"): 400,
                      ("repop", "all"): 50}, counts
    qc = [s for s in fams[F.SCHED_CLASS_QUEUE_WAIT].samples
          if s.name.endswith("_count")]
    assert [(s.labels["scheduler_class"], s.value) for s in qc
            if s.value] == [("client", 90)], qc
    att = {s.labels["tier"]: s.value
           for s in fams[parsed(F.ATTACHED)].samples}
    assert att == {"lean": 10.0, "full": 2.5}, att
    assert fams[parsed(F.TRACED)].samples[0].value == 10.0
    assert abs(fams[F.OVERHEAD].samples[0].value -
               0.007) < 1e-9
    fed = {(s.labels["stage"], s.labels["tier"])
           for s in fams[F.STAGE_TIER_INFO].samples}
    assert fed == {("queue_wait", "lean"), ("op_total", "lean"),
                   ("repop", "full"), (SCHED_CLASSES, "full")}, fed
    # gone with the OSD's process, as its info
    ex.detached(["osd.0"])
    fams = {f.name: f for f in text_string_to_metric_families(_render(ex))}
    assert not fams[F.STAGE_TIER_INFO].samples


def test_kernel_stages_go_to_their_own_families():
    """Each kernel stage of the BPF side (vocab.kernel) has a family of
    its own (families.KERNEL_STAGES): a thread's sleeps, futex waits and
    wake-up delays per role, syncfs calls and block requests per OSD;
    nothing is exported as a latency with a stage label any more."""
    from cephlat.model import vocab as vocabmod
    from cephlat.model.interval import RunInfo
    from cephlat.model.roles import CEPH_ROLES
    from cephlat.model.snapshot import Snapshot
    vocab = vocabmod.live()
    assert set(vocab.kernel) == set(F.KERNEL_STAGES), vocab.kernel
    per_role = {base for base, _ in vocab.role_stages}
    for stage, name in F.KERNEL_STAGES.items():
        labels = F.BY_NAME[name].labels
        assert F.BY_NAME[name].type == "histogram", name
        assert labels == (("ceph_daemon", "role") if stage in per_role
                          else ("ceph_daemon",)), (stage, labels)
    run = RunInfo(1, "16.2.15", ["op_total"], {}, set(), 0, True,
                  CEPH_ROLES, vocab)
    worker = CEPH_ROLES.names.index("tp_osd_tp")
    n = {"offcpu": 11, "futex_wait": 12, "wakeup_delay": 13, "syncfs": 14,
         "block_rq": 15}
    hists = {}
    for stage, count in n.items():
        key = "%s.%d" % (stage, worker) if stage in per_role else stage
        hists[key] = Hist.from_ns(durations(count, count))
    cur = Snapshot({}, {}, {}, {}, {}, 10**9, dict(hists), 0)
    ex = Exported(0.0)
    ex.add_interval("osd.2", build_interval(run, cur, None, 0, 1.0, None),
                    {"interval_attached_fraction": 1.0, "estimated_pct": 0})
    fams = {f.name: f for f in text_string_to_metric_families(_render(ex))}
    for stage, count in n.items():
        got = [s for s in fams[F.KERNEL_STAGES[stage]].samples
               if s.name.endswith("_count")]
        want = {"ceph_daemon": "osd.2"}
        if stage in per_role:
            want["role"] = "tp_osd_tp"
        assert [(s.labels, s.value) for s in got] == [(want, count)], stage
