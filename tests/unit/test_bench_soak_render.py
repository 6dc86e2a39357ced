"""bench/soak_render.py's rows for BENCHMARKS.md (of bench/exporter_soak.py's soak): the scrape figures say
what was timed, and a cost whose pairs spread wider than the bound is
not called met."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import exporter_soak  # noqa: E402
import soak_render  # noqa: E402


def _res(**kw):
    res = {"rss_drift_pct": 0.5, "rss_first_kb": 60000,
           "rss_last_kb": 60300, "rss_max_kb": 60400,
           "samples": [{"t": 30.0, "rss_kb": 60000},
                       {"t": 1800.0, "rss_kb": 60300}],
           "threads_fullness_first": 0.08, "threads_fullness_last": 0.08,
           "ops_fullness_max": 0.004, "in_flight_max": 200,
           "scrape_max_ms": 6.0, "scrape_timed": "GET",
           "prometheus_scrape_max_ms": 90.0, "prometheus_scrape_p99_ms": 20.0,
           "prometheus_self_scrape_max_ms": 80.0,
           "prometheus_self_scrape_p99_ms": 15.0,
           "bound_pct": 1.0, "pairs": [{}] * 4, "pair_secs": 40,
           "exporter_cpu_pct": 0.4, "estimate_pct_last": 0.4,
           "attached_fraction": 0.15,
           "measured_pct": {"median": 0.5, "min": 0.1, "max": 0.9}}
    res.update(kw)
    return {what: (got, ok) for what, _, got, ok in
            soak_render.soak_rows(res)}


def test_scrape_row_says_what_was_timed():
    got, ok = _res()["slowest scrape"]
    assert "the GET alone" in got and ok is True
    assert "90.0 ms, p99 20.0 ms" in got
    assert "Prometheus scraping itself on the same machine: 80.0 ms" in got
    assert "samples" not in got         # a soak that did not count them
    got, _ = _res(page_samples=2905, page_bytes=[316508, 23127])[
        "slowest scrape"]
    assert got.endswith("the page: 2905 samples, 317 kB (23 kB "
                        "gzip-compressed, as Prometheus asks for it)")
    # an older soak timed the bench's parse too, and had no control
    got, ok = _res(scrape_timed=None, prometheus_self_scrape_max_ms=None,
                   prometheus_scrape_p99_ms=None, scrape_max_ms=150.0)[
        "slowest scrape"]
    assert "the bench's own parse" in got and "itself" not in got
    assert ok is False


SOAK3 = dict(monitor_nice=-10, scrape_max_ms=30.0, scrape_p99_ms=17.0,
             scrape_gets=360, scrape_errors=0, scrape_timed="GET gzip",
             prometheus_scrape_max_ms=60.0, prometheus_scrape_p99_ms=33.0,
             prometheus_self_scrape_max_ms=39.0,
             prometheus_self_scrape_p99_ms=26.0,
             colocated_scrape_max_ms=140.0, colocated_scrape_p99_ms=61.0,
             colocated_self_scrape_max_ms=90.0,
             colocated_self_scrape_p99_ms=31.0)


def test_scrape_row_judges_the_answer_and_the_monitoring_side():
    got, ok = _res(**SOAK3)["slowest scrape"]
    assert ok is True
    assert "by a client at nice -10): 30.0 ms, p99 17.0 ms over 360 " \
        "GETs, 0 failed" in got
    assert "at nice -10, a monitoring host with CPU to spare: 60.0 ms, " \
        "p99 33.0 ms, scraping itself 39.0 ms" in got
    # the co-located Prometheus is shown, not judged
    assert "(shown, not judged): 140.0 ms, p99 61.0 ms, scraping itself " \
        "90.0 ms" in got
    # either judged figure over the target, or a failed GET: not met
    for bad in ({"scrape_max_ms": 101.0}, {"prometheus_scrape_max_ms": 120.0},
                {"scrape_errors": 1}, {"scrape_gets": 0}):
        assert _res(**dict(SOAK3, **bad))["slowest scrape"][1] is False, bad


@pytest.mark.parametrize("measured,want", [
    ({"median": 0.5, "min": 0.1, "max": 0.9}, True),
    ({"median": 1.5, "min": 1.1, "max": 1.9}, False),
    ({"median": -5.0, "min": -19.8, "max": 6.1}, "cannot tell"),
    (None, None)])
def test_cost_is_met_only_when_the_pairs_can_tell(measured, want):
    _, ok = _res(measured_pct=measured)["measured cost vs the default bound"]
    if isinstance(want, str):
        assert want in ok
    else:
        assert ok is want


def test_fixed_rate_row_only_when_measured():
    rows = _res()
    assert not any("fixed rate" in k for k in rows)
    rows = _res(rate_iops=600, full_write_iops=1200.0,
                rate_pairs=[{}] * 4,
                rate_measured_pct={"median": 0.6, "min": 0.2, "max": 1.1})
    got, ok = rows["measured cost vs the default bound, fio held at a "
                   "fixed rate"]
    assert "fio at 600 writes + 600 reads/s, 50 % of the soak's 1200" in got
    assert ok is True
    got, ok = _res(rate_iops=600, full_write_iops=1200.0,
                   rate_pairs=[{}] * 4, rate_measured_pct={
                       "median": 0.6, "min": -2.0, "max": 1.1})[
        "measured cost vs the default bound, fio held at a fixed rate"]
    assert "cannot tell" in ok


def test_parts_add_up_to_the_upper_bound():
    # 40 s on the bench's CPUs: 0.4 s of the exporter, 0.05 s of programs,
    # 20000 uprobe runs (a tracepoint program's runs are no traps)
    secs = 40.0
    share = 100.0 / (secs * exporter_soak.bench.NCPU)
    p0 = {7: {"type": 2, "run_cnt": 1000, "run_time_ns": 10 ** 6},
          8: {"type": 26, "run_cnt": 50, "run_time_ns": 10 ** 5}}
    p1 = {7: {"type": 2, "run_cnt": 21000, "run_time_ns": 41 * 10 ** 6},
          8: {"type": 26, "run_cnt": 99050, "run_time_ns": 101 * 10 ** 5},
          9: {"type": 5, "run_cnt": 0, "run_time_ns": 0}}
    got = exporter_soak._parts(0.4, p0, p1, secs)
    assert got["uprobe_traps"] == 20000
    assert got["exporter_pct"] == round(0.4 * share, 3)
    assert got["bpf_pct"] == round(0.05 * share, 3)
    assert got["traps_pct"] == round(
        20000 * exporter_soak.TRAP_NS / 1e9 * share, 3)
    assert got["pct"] == round(got["exporter_pct"] + got["bpf_pct"] +
                               got["traps_pct"], 3)


@pytest.mark.parametrize("pcts,want", [((0.6, 0.7, 0.8), True),
                                       ((0.6, 0.7, 1.2), False)])
def test_parts_row_judged_by_its_largest_pair(pcts, want):
    pairs = [{"traced": {"secs": 40.0, "parts": {
        "exporter_pct": 0.4, "bpf_pct": 0.05, "uprobe_traps": 8000,
        "traps_pct": pct - 0.45, "pct": pct}}} for pct in pcts]
    rows = _res(rate_iops=600, full_write_iops=1200.0, rate_pairs=pairs,
                rate_measured_pct={"median": 2.0, "min": -0.5, "max": 2.5},
                trap_ns=2000,
                rate_parts_pct=exporter_soak._spread(
                    pairs, lambda p: p["traced"]["parts"]["pct"]))
    got, ok = rows["the same, from the cost's parts (an upper bound), at "
                   "half load"]
    assert ok is want
    assert "the exporter process 0.400 %" in got
    assert "200 uprobe traps/s at 2.0 us" in got
    # the whole host's difference is still shown, and still judged alone
    assert "cannot tell" in rows[
        "measured cost vs the default bound, fio held at a fixed rate"][1]


@pytest.mark.parametrize("pcts,want", [((0.9, 1.2, 1.4), True),
                                       ((0.9, 1.2, 1.6), False)])
def test_parts_at_saturation_judged_against_the_saturated_bound(pcts, want):
    """At saturation the whole (the lean tier always on, the full one
    cycled, the exporter) is held to 1.5 %, its largest pair."""
    pairs = [{"traced": {"secs": 40.0, "parts": {
        "exporter_pct": 0.4, "bpf_pct": 0.05, "uprobe_traps": 8000,
        "traps_pct": pct - 0.45, "pct": pct}}} for pct in pcts]
    rows = _res(pairs=pairs, trap_ns=2000,
                measured_pct={"median": 0.5, "min": -1.0, "max": 1.0},
                parts_pct=exporter_soak._spread(
                    pairs, lambda p: p["traced"]["parts"]["pct"]))
    got, ok = rows["the same, from the cost's parts (an upper bound), at "
                   "saturation"]
    assert ok is want
    assert got.startswith("1.20 %% (0.90-%.2f)" % pcts[-1]), got


@pytest.mark.parametrize("total,anon,want", [
    (0.5, 0.4, True),
    (-5.3, -0.2, True),       # library pages dropped by the kernel
    (-5.3, -5.2, False),      # its own memory fell: not flat either
    (5.3, 0.2, False),        # grew
    (0.3, 6.0, False)])
def test_rss_is_judged_on_the_exporters_own_memory(total, anon, want):
    got, ok = _res(rss_drift_pct=total, rss_anon_drift_pct=anon,
                   rss_file_kb=[24000, 20900])[
        "exporter RSS over the soak (after 2 min)"]
    assert ok is want
    assert "its own (anonymous) memory %+.2f %%" % anon in got
    assert "24000 -> 20900 kB" in got
    # an older soak without the split: the total alone
    _, ok = _res(rss_drift_pct=total)[
        "exporter RSS over the soak (after 2 min)"]
    assert ok is (abs(total) <= 5)


def test_pairs_are_aba_and_a_drift_cancels():
    """The host's CPU per op drifting up steadily over a pair (untraced
    before, traced, untraced after) is no cost; 0.2 s more busy time in
    the traced window is."""
    def w(host_s):
        return {"ops": 16000, "secs": 40.0, "host_s": host_s}
    p = exporter_soak._pair_cost(w(30.0), w(31.0), w(32.0))
    assert p["cost_pct"] == 0
    assert p["untraced"] == {"ops": 32000, "secs": 80.0, "host_s": 62.0}
    p = exporter_soak._pair_cost(w(30.0), w(31.2), w(32.0))
    share = 100.0 * 0.2 / 40.0 / exporter_soak.bench.NCPU
    assert p["cost_pct"] == pytest.approx(share, abs=1e-3)
    # untraced then traced alone would have read the drift as a cost
    assert exporter_soak._pair_cost(w(30.0), w(31.0), w(30.0))[
        "cost_pct"] > 0


def test_the_pairs_line_says_how_the_pairs_ran():
    w = {"ops": 16000, "secs": 40.0, "host_s": 30.0}
    aba = [exporter_soak._pair_cost(w, w, w)]
    old = [{"untraced": w, "traced": w, "cost_pct": 0.0}]
    got = soak_render._pairs_line({"pair_secs": 40, "pairs": aba})
    assert "80 s untraced (before and after, together) / 40 s" in got
    assert "32000 (60.0) / 16000 (30.0)" in got
    got = soak_render._pairs_line({"pair_secs": 40, "pairs": old})
    assert "40 s untraced (before) / 40 s" in got


def _soak_sample(t, rss, lean_ops, attached, lean_attached, traced):
    return {"t": t, "rss_kb": rss, "rss_anon_kb": rss - 30000,
            "rss_file_kb": 30000, "cpu_s": t / 100, "ops_fullness": 0.001,
            "threads_fullness": 0.08, "in_flight": 3, "estimate_pct": 0.4,
            "attached_s": attached, "lean_attached_s": lean_attached,
            "lean_ops": lean_ops, "traced_s": traced, "lost": 0,
            "otlp_chosen_sample": t / 100, "otlp_chosen_slow": t / 1000,
            "otlp_ops_dropped": 0, "otlp_spans_sent": t / 10,
            "otlp_spans_dropped": 0}


def test_soak_results_hold_every_figure_the_section_reads():
    """soak_results() from a made-up soak: its figures follow from the
    samples and snapshots, and the section renders from them with every
    key a real soak's results file holds."""
    import json
    samples = [_soak_sample(30.0, 90000, 1000, 1.0, 30.0, 30.0),
               _soak_sample(150.0, 100000, 50000, 3.0, 150.0, 150.0),
               _soak_sample(1800.0, 101000, 400000, 36.0, 1800.0, 1800.0)]
    # each OSD: (cpu s, ops counted, client ops)
    soak = {"samples": samples, "lean0": 0,
            "s0": {"t": 0.0, "osds": [(10.0, 0, 0), (20.0, 0, 0)]},
            "s1": {"t": 1800.0, "osds": [(110.0, 500000, 250000),
                                         (170.0, 500000, 150000)]},
            "ex_cpu": 7.2, "wall": 1800.0,
            "get_ms": [float(i) for i in range(1, 101)], "get_errors": 0,
            "prom_ms": {(p, q, job): 10.0 * (p == "co") + 5.0 * q +
                        (job == "prometheus")
                        for p in ("mon", "co") for q in (1, 0.99)
                        for job in ("osdstage", "prometheus")},
            "samples_scraped": [({}, 4000.0), ({}, 4341.0)],
            "page": [481000, 34000], "lost_by_reason": {},
            "jaeger_cpu": 9.0}
    res = exporter_soak.soak_results(soak, [], [], 450, 900.0)
    assert res["otlp"]["spans_sent_per_s"] == 0.1
    assert res["otlp"]["spans_sent"] == 165.0     # after the warm-up
    assert res["rss_first_kb"] == 100000          # after the warm-up
    assert res["rss_drift_pct"] == 1.0 and res["rss_max_kb"] == 101000
    assert res["ops_counted"] == [400000, 400000]
    assert res["lean_attached_fraction"] == 1.0
    assert res["attached_fraction"] == 0.02
    assert res["exporter_cpu_pct"] == round(
        100 * 7.2 / (1800 * exporter_soak.bench.NCPU), 3)
    assert res["osd_us_per_op_traced"] == 250.0   # 250 s over 1 M ops
    assert res["scrape_max_ms"] == 100.0 and res["scrape_p99_ms"] == 100.0
    assert res["prometheus_scrape_max_ms"] == 5.0
    assert res["colocated_self_scrape_p99_ms"] == 10.0 + 4.95 + 1
    assert res["page_samples"] == 4341
    saved = os.path.join(REPO, "bench", "results", "pacific.exporter.json")
    with open(saved) as f:
        want = set(json.load(f)) - {"machine", "commit", "date",
                                    "soak_min", "bound_pct"}
    # a soak from before the exporter sent traces has no "otlp"
    assert set(res) - ({"otlp"} - want) == want


OTLP = {"url": "http://127.0.0.1:4318", "sample": 100, "over_us": 50000,
        "secs": 1680.0, "spans_sent_per_s": 12.5, "spans_dropped_per_s": 0.0,
        "spans_sent": 21000, "spans_dropped": 0, "ops_sampled_per_s": 1.2,
        "ops_slow_per_s": 0.3, "ops_dropped_per_s": 0.0,
        "jaeger_cpu_pct": 0.41}


def test_otlp_row_and_the_saturated_bound_with_traces():
    rows = _res(parts_pct={"median": 1.2, "min": 1.1, "max": 1.3},
                pairs=[{"traced": {"secs": 40.0, "parts": {
                    "pct": 1.2, "exporter_pct": 0.6, "bpf_pct": 0.3,
                    "traps_pct": 0.3, "uprobe_traps": 3000}}}] * 4,
                trap_ns=2000)
    sat = "the same, from the cost's parts (an upper bound), at saturation"
    assert rows[sat][1] is True           # 1.5 % without traces
    assert not any(k.startswith("OTLP") for k in rows)
    rows = _res(parts_pct={"median": 1.2, "min": 1.1, "max": 1.3},
                pairs=[{"traced": {"secs": 40.0, "parts": {
                    "pct": 1.2, "exporter_pct": 0.6, "bpf_pct": 0.3,
                    "traps_pct": 0.3, "uprobe_traps": 3000}}}] * 4,
                trap_ns=2000, otlp=OTLP)
    assert rows[sat][1] is False          # the bound itself with them
    got, ok = rows["OTLP traces (1 op in 100 by request id and every op "
                   "over 50 ms, to Jaeger on the same host)"]
    assert ok is True
    assert got.startswith("12.50 spans/s sent (21000 over 1680 s), "
                          "0.00/s dropped (0)")
    assert "Jaeger's own CPU 0.410 %" in got
    got, ok = _res(otlp=dict(OTLP, spans_dropped=3))[
        "OTLP traces (1 op in 100 by request id and every op over 50 ms, "
        "to Jaeger on the same host)"]
    assert ok is False


def test_otlp_results_are_rates_between_two_samples():
    first = {"t": 120.0, "otlp_spans_sent": 100, "otlp_spans_dropped": 0,
             "otlp_chosen_sample": 10, "otlp_chosen_slow": 2,
             "otlp_ops_dropped": 0}
    last = {"t": 1800.0, "otlp_spans_sent": 100 + 16800,
            "otlp_spans_dropped": 168, "otlp_chosen_sample": 10 + 1680,
            "otlp_chosen_slow": 2 + 336, "otlp_ops_dropped": 0}
    got = exporter_soak._otlp_results(first, last, {
        "jaeger_cpu": 18.0, "wall": 1800.0})
    assert got["spans_sent_per_s"] == 10.0 and got["spans_sent"] == 16800
    assert got["spans_dropped_per_s"] == 0.1 and got["spans_dropped"] == 168
    assert got["ops_sampled_per_s"] == 1.0 and got["ops_slow_per_s"] == 0.2
    assert got["jaeger_cpu_pct"] == round(
        100.0 * 18.0 / (1800.0 * exporter_soak.bench.NCPU), 3)
