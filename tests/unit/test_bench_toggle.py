"""bench/toggle.py's figures (make bench BENCH=toggle) and how
BENCHMARKS.md uses them: each traced window against the untraced ones on
either side, so a drift slower than a window cancels; the mean with its
standard error; the trap per hit from the userspace mode; the lean
tier's targets' lean and default rows judged on the mean two standard errors from the
target, and the trap row and the cost table taking the toggled figures
where a run has them."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import summary  # noqa: E402
import targets  # noqa: E402
import toggle  # noqa: E402
import why  # noqa: E402
from test_bench_why import _floor, _res, _row  # noqa: E402


def _wins(base, added, drift=0.0):
    """Untraced windows at `base` us per op drifting by `drift` a window,
    traced ones `added` over the drifted base."""
    out = []
    for i in range(7):
        b = base + drift * i
        on = i % 2 == 1
        out.append({"traced": on, "osd_us_per_op": b + (added if on else 0),
                    "iops": 1000.0 * (0.9 if on else 1.0)})
    return out


def test_a_linear_drift_cancels_and_each_pair_is_its_neighbours():
    assert toggle.aba(_wins(80.0, 3.0, drift=5.0), "osd_us_per_op") == \
        [3.0, 3.0, 3.0]
    assert toggle.aba(_wins(80.0, 3.0), "iops", ratio=True) == \
        [0.9, 0.9, 0.9]
    # a drift charged to the traced window when it was set against the
    # window before it only: 3 + 5 each time
    w = _wins(80.0, 3.0, drift=5.0)
    assert w[1]["osd_us_per_op"] - w[0]["osd_us_per_op"] == 8.0


def test_modes_in_turns_each_take_their_own_windows():
    wins = [{"traced": False, "x": 10.0}]
    for added in (1.0, 5.0, 2.0, 6.0):
        wins += [{"traced": True, "mode": "ab"[added > 4], "x": 10 + added},
                 {"traced": False, "x": 10.0}]
    assert toggle.aba(wins, "x", mode="a") == [1.0, 2.0]
    assert toggle.aba(wins, "x", mode="b") == [5.0, 6.0]
    assert toggle.aba(wins, "x") == [1.0, 5.0, 2.0, 6.0]


def test_spread_has_the_mean_and_its_standard_error():
    s = toggle.spread([1.0, 2.0, 3.0, 6.0])
    assert s == {"mean": 3.0, "sem": 1.08, "median": 2.5, "min": 1.0,
                 "max": 6.0, "n": 4}
    assert toggle.spread([4.0])["sem"] is None


def _toggled(lean=4.0, userspace=10.0, default=14.0, sem=0.5):
    def mode(added, hits, progs):
        return {"added_us": {"mean": added, "sem": sem, "median": added,
                             "min": added - 3, "max": added + 3, "n": 30},
                "workers_added_us": {"mean": added - 1, "sem": sem,
                                     "median": added - 1, "min": 0,
                                     "max": added, "n": 30},
                "iops_ratio": {"mean": 0.96, "sem": 0.005, "median": 0.96,
                               "min": 0.9, "max": 1.0, "n": 30},
                "untraced_us_per_op": {"median": 80.0},
                "uprobe_hits_per_op": hits, "prog_us_per_op": progs}
    modes = {"lean": mode(lean, 1.0, 1.0),
             "userspace": mode(userspace, 6.0, 4.0),
             "default": mode(default, 6.0, 8.0)}
    return {"pairs": 30, "secs": 2.0, "date": "2026-11-30",
            "commit": "abc1234", "modes": modes, "trap": toggle.trap(modes)}


def test_the_trap_is_the_userspace_modes_rest_over_its_hits():
    t = _toggled(userspace=10.0, sem=0.6)
    assert t["trap"] == {"us": 1.0, "sem": 0.1, "hits": 6.0}  # (10-4)/6
    assert toggle.trap({"lean": t["modes"]["lean"]}) is None


def test_cost_parts_take_the_toggled_figures_where_the_run_has_them():
    res = _res(default_us=20.0, userspace_us=15.0)
    assert summary.cost_parts(res)["toggled"] is False
    res["toggled"] = _toggled(userspace=10.0, default=14.0)
    c = summary.cost_parts(res)
    assert c["toggled"] is True
    assert (c["osd_added"], c["userspace_added"], c["traps"]) == \
        (14.0, 10.0, 6.0)
    assert c["per_hit"] == 1.0
    text = "\n".join(why.render_why([res], []))
    assert "| pacific | 30 x 2 s toggled | 14.0 us | 6.0 us (6.00 hits) |" \
        in text


def _judged(row, target, mean, sem, met):
    """A toggled row: its target, its figure (mean +- sem, the pairs) and
    its verdict (True, False or the start of a "cannot tell")."""
    _, got, tgt, ok = row
    assert tgt == target
    assert got.startswith("%.2f +- %.2f us (30 x 2 s toggled" % (mean, sem))
    if isinstance(met, str):
        assert ok.startswith(met), ok
    else:
        assert ok is met, (mean, sem, ok)


def test_lean_and_default_rows_are_judged_two_standard_errors_out():
    res = _res()
    for lean, sem, met in ((4.0, 0.5, False), (2.0, 0.2, True),
                           (2.8, 0.5, "**cannot tell**")):
        res["toggled"] = _toggled(lean=lean, sem=sem)
        rows = targets.lean_rows([res], None, None)
        _judged(_row(rows, "lean tier (`--lean`), added"), "<= 2.5 us",
                lean, sem, met)
        # 0.96 +- 0.005: two standard errors under 0.98
        assert _row(rows, "lean tier (`--lean`), IOPS")[3] is False
        assert _row(rows, "default mode, added")[3] is False  # 14 > 8
    # without them, the main part's medians as before
    del res["toggled"]
    got = _row(targets.lean_rows([res], None, None),
               "default mode, added")[1]
    assert got == "14.0 us (0.0-28.0)"


def test_the_trap_row_says_where_its_figure_comes_from():
    res = _res()
    res["toggled"] = _toggled(userspace=10.0, sem=0.6)
    _, got, _, met = _row(targets.lean_rows([res], None, _floor()),
                       "trap cost per uprobe hit")
    assert got == "pacific 1000 ns (+- 100, 30 x 2 s toggled) vs push " \
        "1000 ns = 1.00 x"
    assert met is True


def test_the_section_lists_every_mode_and_the_trap():
    res = {"machine": {"release": "pacific"}, "toggled": _toggled()}
    text = "\n".join(toggle.render_section([res]))
    assert text.startswith("## Attached and detached every few seconds")
    for mode in ("lean", "userspace", "default"):
        assert "| pacific | %s | 30 x 2 s |" % mode in text
    assert "4.00 +- 0.50 us (median 4.00, 1.00 to 7.00)" in text
    assert "a trap per hit inside the OSD 1.00 +- 0.08 us" in text
    assert toggle.render_section([{"machine": {"release": "reef"}}]) == []


def test_the_lean_paragraph_splits_the_toggled_cost_by_thread():
    res = _res()
    res["bpf_stats"]["lean"] = {"uprobe_runs_per_op": 1.0, "programs": {
        "op_lean": {"runs": 1000, "runs_per_op": 1.0, "avg_ns": 900.0}}}
    res["modes"]["lean"] = {"randread": {"osd_added_us_per_op": {
        "median": 5.0, "min": 2.0, "max": 7.0}}}
    res["toggled"] = _toggled(lean=5.0, userspace=10.0)
    res["toggled"]["modes"]["lean"]["msgr_added_us"] = {
        "mean": 1.1, "sem": 0.3, "median": 1.0, "min": 0.0, "max": 2.0,
        "n": 30}
    text = "\n".join(why.render_why([res], [], None, _floor()))
    # the trap per hit from the toggled userspace mode: (10 - 4) / 6
    assert "its 1.00 uprobe hits per op cost 1.00 us in a trap each " \
        "(inside the busy OSD, the userspace mode's toggled pairs) and " \
        "0.90 us in its one program: about 1.9 us, within the target." \
        in text
    assert "5.00 +- 0.50 us per read, of it 4.00 +- 0.50 us in the shard " \
        "workers" in text
    assert "1.10 +- 0.30 us more per read at 0.960 of the untraced IOPS" \
        in text
    assert "swinging between windows" not in text


def test_a_tracer_that_cannot_be_set_up_is_one_line():
    with pytest.raises(SystemExit) as e:
        toggle.measure_modes(2 ** 22 + 7, "/nonexistent.asok", 1, 0.1)
    assert str(e.value) == "bench: toggle part: no such process: %d" % (
        2 ** 22 + 7)


def test_optrackers_window_is_the_one_without_it():
    """OpTracker is on in every window but its mode's: what it adds is
    the untraced windows' figure less its own, and its IOPS ratio theirs
    over its own."""
    wins = [{"traced": False, "x": 10.0}]
    for mode, x in (("default", 14.0), ("optracker", 7.0),
                    ("default", 15.0), ("optracker", 8.0)):
        wins += [{"traced": True, "mode": mode, "x": x},
                 {"traced": False, "x": 10.0}]
    assert toggle.aba(wins, "x", mode="optracker") == [3.0, 2.0]
    assert toggle.aba(wins, "x", mode="optracker", ratio=True) == \
        [10.0 / 7.0, 10.0 / 8.0]
    assert toggle.aba(wins, "x", mode="default") == [4.0, 5.0]


def test_the_default_mode_is_set_against_optracker_round_by_round():
    wins = [{"traced": False, "osd_us_per_op": 80.0}]
    for added, optracker in ((14.0, 3.0), (12.0, 5.0), (13.0, 4.0)):
        for mode, x in (("lean", 82.0), ("default", 80.0 + added),
                        ("optracker", 80.0 - optracker)):
            wins += [{"traced": True, "mode": mode, "osd_us_per_op": x},
                     {"traced": False, "osd_us_per_op": 80.0}]
    got = toggle.against_optracker(wins)
    assert (got["n"], got["min"], got["median"], got["max"]) == \
        (3, 7.0, 9.0, 11.0)         # 14 - 3, 12 - 5, 13 - 4
    assert toggle.against_optracker([{"traced": False,
                                      "osd_us_per_op": 1.0}]) is None


def test_the_target_row_sets_the_default_against_optracker():
    res = _res()
    for vs, sem, met in ((-2.0, 0.5, True), (3.0, 0.5, False),
                         (0.5, 0.5, "**cannot tell**")):
        res["toggled"] = _toggled()
        res["toggled"]["modes"]["default"]["vs_optracker_us"] = {
            "mean": vs, "sem": sem, "median": vs, "min": vs - 1,
            "max": vs + 1, "n": 30}
        _judged(_row(targets.lean_rows([res], None, None),
                     "default mode against"), "<= 0 us", vs, sem, met)
    del res["toggled"]
    assert _row(targets.lean_rows([res], None, None),
                "default mode against")[1] == "-"


def test_the_section_has_optracker_and_the_default_against_it():
    t = _toggled()
    t["modes"]["optracker"] = dict(t["modes"]["lean"],
                                   uprobe_hits_per_op=0.0,
                                   prog_us_per_op=0.0)
    t["modes"]["default"]["vs_optracker_us"] = {
        "mean": 10.0, "sem": 0.5, "median": 10.0, "min": 8.0, "max": 12.0,
        "n": 30}
    text = "\n".join(toggle.render_section([{
        "machine": {"release": "pacific"}, "toggled": t}]))
    assert "| pacific | optracker | 30 x 2 s |" in text
    assert "Pacific: the default mode's added OSD CPU per read less " \
        "Ceph's own OpTracker's, round by round: 10.00 +- 0.50 us" in text


def test_the_estimate_agrees_within_a_quarter_or_two_standard_errors():
    m = {"mean": 10.0, "sem": 0.5}
    assert toggle.estimate_check(12.4, m) == {"us": 12.4, "ratio": 1.24,
                                              "agrees": True}
    assert toggle.estimate_check(7.4, m)["agrees"] is False
    assert toggle.estimate_check(13.0, m)["agrees"] is False
    # a noisy measure: two standard errors are the wider
    assert toggle.estimate_check(13.0, {"mean": 10.0, "sem": 2.0})[
        "agrees"] is True
    assert toggle.estimate_check(1.0, {"mean": 0.0, "sem": None}) == {
        "us": 1.0, "ratio": None, "agrees": False}


def test_the_estimates_table_and_row():
    t = _toggled()
    for mode, est, runs in (("lean", 4.2, 3.0), ("userspace", 9.0, 11.0),
                            ("default", 14.5, 16.0)):
        s = t["modes"][mode]
        s["host_added_us"] = dict(s["added_us"])
        s["estimate_us"] = toggle.estimate_check(est, s["host_added_us"])
        s["estimate_runs_us"] = toggle.estimate_check(runs,
                                                      s["host_added_us"])
    text = "\n".join(toggle.render_section([{
        "machine": {"release": "pacific"}, "toggled": t}]))
    assert "| pacific | lean | 4.00 +- 0.50 us (median 4.00, 1.00 to " \
        "7.00) | 4.20 us (1.05 x the measure) | 3.00 us (0.75 x the " \
        "measure) |" in text
    res = _res()
    res["toggled"] = t
    _, got, target, ok = _row(targets.lean_rows([res], None, None),
                              "the tool's own cost estimate")
    assert got.startswith("lean 4.20 and 3.00 us vs 4.00 +- 0.50; "), got
    assert ok is True
    t["modes"]["default"]["estimate_us"] = toggle.estimate_check(
        8.0, t["modes"]["default"]["host_added_us"])
    assert "8.00 us (0.57 x the measure, **off**)" in "\n".join(
        toggle.render_section([{"machine": {"release": "pacific"},
                                "toggled": t}]))
    assert _row(targets.lean_rows([res], None, None),
                "the tool's own cost estimate")[3] is False
