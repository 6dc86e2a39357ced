"""The probes' cost on a call from the start-up calibration's three sets of
calls (engine/calibrate.fields), with the return program's arithmetic
(probes/osdstage/calls.bpf.h call_bias) redone here on the fields. The
figures are this machine's (the module's docstring): hot calls' pair
0.66 us at an entry run of 130 ns, warm 0.86 us at 160 ns, semi-cold warm
1.66 us at 360 ns, cold 7.0 us at 1.68 us."""
from cephlat.engine import calibrate
from cephlat.model.hist import Hist


def calls(entry_ns, pair_ns, n=100, ok=True):
    """A set of calls, all alike: (pair Hist, entry Hist, enough seen)."""
    return Hist.from_ns([pair_ns] * n), Hist.from_ns([entry_ns] * n), ok


def bias(f, c):
    """call_bias(): what a call whose entry program ran c ns has taken
    out, from struct ctl's fields f."""
    c = min(c, f["call_cold_max_ns"])
    b = f["call_bias_ns"]
    if c > f["call_cold_ns"]:
        return b + ((c - f["call_cold_ns"]) * f["call_cold_x16"] >> 4)
    if c >= f["call_warm_ns"]:
        return b
    less = (f["call_warm_ns"] - c) * f["call_warm_x16"] >> 4
    return b - less if b > f["call_bias_min_ns"] + less else \
        f["call_bias_min_ns"]


HOT, WARM, COLD = calls(130, 656), calls(160, 857), calls(1680, 7028)


def near(got, want, within):
    return abs(got - want) <= within


def test_warm_calls_that_were_warm():
    """The usual start: a warm call has the warm pair taken out, a cold
    one about the cold pair (the histograms' slots are 62 ns wide below
    0.5 us: their medians are what the line goes through)."""
    f = calibrate.fields(WARM, COLD, HOT)
    assert near(f["call_bias_ns"], 857, 0.07 * 857)
    assert f["call_bias_min_ns"] <= f["call_bias_ns"]
    assert near(bias(f, 160), 857, 0.07 * 857)
    assert near(bias(f, 1680), 7028, 0.07 * 7028)
    # no more than COLD_REACH x the cold calls' entry run would have
    assert bias(f, 10 ** 6) == bias(f, calibrate.COLD_REACH * 1680 + 100)


def test_semi_cold_warm_calls_take_nothing_real_out_of_warm_ones():
    """The warm calls all ran semi-cold (1.66 us at 360 ns): a call whose
    entry ran as fast as the hot ones' has the hot pair taken out, not
    1.66 us (what took 0.5 us of real time out of warm calls before), and
    the line between passes near the truly warm point."""
    semi = calls(360, 1663)
    f = calibrate.fields(semi, COLD, HOT)
    assert near(f["call_bias_ns"], 1663, 0.07 * 1663)
    assert near(bias(f, 130), 656, 0.07 * 656)
    assert bias(f, 160) <= 857 * 1.25
    assert bias(f, 0) == f["call_bias_min_ns"] >= 0.9 * 656
    assert near(bias(f, 1680), 7028, 0.1 * 7028)


def test_warm_calls_as_cold_as_the_cold_ones():
    """Warm and cold one state (no slope between them): the slope comes
    from the hot calls to the cold ones, and a warm call still has about
    its own cost taken out."""
    f = calibrate.fields(calls(1580, 6431), calls(1680, 7028), HOT)
    assert f["call_cold_x16"] > 0
    assert bias(f, 160) <= 857 * 1.5
    assert near(bias(f, 1580), 6431, 0.07 * 6431)


def test_without_hot_or_cold_calls():
    """Too few hot calls: nothing below the warm pair; too few cold ones
    too: the warm pair for every call."""
    f = calibrate.fields(WARM, COLD, calls(130, 656, ok=False))
    assert f["call_bias_min_ns"] == f["call_bias_ns"]
    assert f["call_warm_x16"] == 0 and f["call_cold_x16"] > 0
    f = calibrate.fields(WARM, calls(1680, 7028, ok=False),
                         calls(130, 656, ok=False))
    assert f["call_cold_x16"] == f["call_cold_max_ns"] == 0
    assert {bias(f, c) for c in (0, 160, 5000)} == {f["call_bias_ns"]}


def test_a_faster_machine_s_small_rise_still_gives_a_slope():
    """Another 2-core VM of the same kind: warm calls' entry runs of 30-40
    ns (pair 0.43 us), its cold calls' 80-160 ns (pair 1.4 us). The rise
    is beyond the warm calls' spread and the histogram's slot there, so
    the cold calls get their cost taken out; a rise inside one slot, or
    inside the warm calls' own spread, gives none."""
    warm, hot = calls(33, 430), calls(31, 340)
    f = calibrate.fields(warm, calls(156, 1437), hot)
    assert f["call_cold_x16"] > 0
    assert near(bias(f, 156), 1437, 0.15 * 1437)
    f = calibrate.fields(warm, calls(60, 1437), hot)
    assert f["call_cold_x16"] == 0
    spread = Hist.from_ns([33] * 50 + [400] * 50)
    f = calibrate.fields((Hist.from_ns([430] * 100), spread, True),
                         calls(300, 1437), hot)
    assert calibrate.cold_rise_min(spread) > 300
    assert f["call_cold_x16"] == 0
