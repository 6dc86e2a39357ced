"""What a uprobe + uretprobe pair adds to the time of the call it brackets,
on this machine, measured at start on a trivial function of our own
(build/libcephlat_calib.so) with the same programs that time Ceph's calls:
struct ctl's call_* fields (probes/osdstage.h), which the return program
(probes/osdstage/calls.bpf.h call_bias) turns into the cost taken out of
each call.

The cost depends on the state of the CPU. On a 2-core VM the pair
cost 0.85 us when the thread had slept 0.5 ms between calls, 2.2-2.5 us
after 5 ms and 5-7 us after 30 ms (an idle vCPU's caches go cold), and the
entry program's own run up to its stamp grew with it (0.16, 0.66-0.80,
1.5-2.0 us): one line, pair = a + s * entry run, with s 3.2-4.0 at every
gap. The OSD's threads show the same: under an mClock limit (a worker runs
an op every ~30 ms) BlueStore::read's entry program took 0.9-1.1 us and the
stage read 2.3-3.2 us above Ceph's read_lat; under load 0.16 us and 0.1-0.3
us above.

"Warm" calls (0.5 ms apart) are not always warm: in one calibration of six
here the whole set ran semi-cold (pair median 1.66-1.80 us, entry median
330-360 ns, against 0.83-0.91 us and 160 ns), on the same line. Taking such
a median out of every call took 0.5 us of real time out of truly warm calls
(a 2-us call read 1.3-1.5 us), so the line is followed below the warm
calls' median too, down to what calls made back to back cost (hot: the
thread never sleeps between them, so its CPU never idles); and when the
warm calls were as cold as the cold ones, the slope above is taken from
the hot calls to the cold ones.
"""
import ctypes
import os
import time

from ..model.hist import UNITS_PER_US, slot_bounds_us, slot_of_ns
from .stats import hist_delta

# the cold correction's slope at most (x16): 16 us of pair per us of entry
# run; one 2-core VM measured 3.2-4.0, another (entry runs of 30-40 ns
# warm) 8 and more
COLD_X16_MAX = 256
# the least rise from the hot calls' entry run to the warm ones' that gives
# the slope below the warm point: the histograms' resolution there (62 ns;
# in one slot, the two medians say nothing of a slope)
WARM_RISE_MIN_NS = 1000 // UNITS_PER_US
# how far beyond the cold calls' median entry run the slope is applied:
# the OSD's coldest calls (a worker's op every ~30 ms) run longer than the
# calibration's; at 1x of 10-ms calibration calls the sleeper's 20-ms calls
# kept 1.3-3 us of their 5-6.5 us of cold cost
COLD_REACH = 2
# struct ctl's fields this sets; all zero: nothing is taken out
NONE = {"call_bias_ns": 0, "call_warm_ns": 0, "call_warm_x16": 0,
        "call_bias_min_ns": 0, "call_cold_ns": 0, "call_cold_x16": 0,
        "call_cold_max_ns": 0}


def calibrate(tracer, calls=100, gap_s=0.0005, cold_calls=16,
              cold_gap_s=0.02, hot_calls=100):
    """Time the trivial function through `tracer` (loaded, its programs
    not yet attached to the target) -> struct ctl's call_* fields:

    `hot_calls` made back to back (the thread never sleeps, its CPU never
    idles), `calls` spaced by `gap_s` (warm) and `cold_calls` spaced by
    `cold_gap_s`, each set's medians a point (entry run, pair). The warm
    pair is call_bias_ns, at entry run call_warm_ns. A call whose entry
    ran longer than the warm calls' third quartile (call_cold_ns: a warm
    call's spread takes nothing more out) has more taken out by the slope
    from the warm point to the cold one (call_cold_x16; from the hot point
    when the cold calls' entry run is not above the warm ones' by more than
    their spread and the histogram's resolution there: cold_rise_min),
    up to COLD_REACH times the cold calls' entry run (call_cold_max_ns: a
    colder call gets no more; the correction may leave cost in rather
    than extrapolate real time out). One whose entry ran shorter than the
    warm calls' has less taken out, by the slope from the hot point to the
    warm one (call_warm_x16), never less than the hot pair
    (call_bias_min_ns). The probes stay attached (detaching costs ~0.2 s);
    they fire only in this process. NONE when the library is missing or
    too few warm calls were seen.

    The function is of the target's flavour: built with CET (starting
    with endbr64, probed right after it) when the target's functions
    are, else without."""
    fn = _attach(tracer)
    if fn is None:
        return dict(NONE)
    sid, eid = tracer.vocab.calib_id, tracer.vocab.calib_entry_id

    def timed(n, gap):
        base = tracer.reader.read(sid), tracer.reader.read(eid)
        for i in range(n):
            if gap:
                time.sleep(gap)
            fn(i)
        pair = hist_delta(tracer.reader.read(sid), base[0])
        entry = hist_delta(tracer.reader.read(eid), base[1])
        return pair, entry, min(pair.count, entry.count) >= n // 2

    hot = timed(hot_calls, 0)
    warm = timed(calls, gap_s)
    if not warm[2]:
        return dict(NONE)
    cold = timed(cold_calls, cold_gap_s)   # after the warm ones: colder
    return fields(warm, cold, hot)


def fields(warm, cold, hot):
    """struct ctl's call_* fields from the warm, cold and hot calls'
    (pair Hist, entry-run Hist, enough calls seen) (calibrate): the line
    through their medians, warm to cold above the warm point (hot to
    cold when the warm calls were as cold as the cold ones), hot to warm
    below it."""
    med = lambda h: int(h.percentile_us(0.5) * 1000)   # noqa: E731 (ns)
    out = dict(NONE)
    w = med(warm[1]), med(warm[0])      # (entry run, pair)
    out.update(call_bias_ns=w[1], call_warm_ns=w[0], call_bias_min_ns=w[1],
               call_cold_ns=int(warm[1].percentile_us(0.75) * 1000))
    h = (med(hot[1]), med(hot[0])) if hot[2] else None
    if h and h[1] < w[1]:
        out["call_bias_min_ns"] = h[1]
        out["call_warm_x16"] = _x16(h, w, WARM_RISE_MIN_NS)
    if not cold[2]:
        return out
    c = med(cold[1]), med(cold[0])
    rise = cold_rise_min(warm[1])
    x16 = _x16(w, c, rise) or (h and _x16(h, c, rise))
    if x16:
        out.update(call_cold_x16=x16, call_cold_max_ns=COLD_REACH * c[0])
    return out


def cold_rise_min(entry):
    """The least rise of the entry run above the warm calls' (their entry
    Hist) that tells a colder state from their own: their spread (third
    quartile over median) and the width of the histogram's slot at their
    median, whichever is more. A fixed figure does not fit every machine:
    warm entry runs took 160 ns on one 2-core VM and 30-40 ns on another,
    whose cold calls' ran 80-300 ns in most calibrations."""
    med = entry.percentile_us(0.5)
    lo, hi = slot_bounds_us(slot_of_ns(int(med * 1000)))
    return int(1000 * max(entry.percentile_us(0.75) - med, hi - lo))


def _x16(a, b, min_rise):
    """16 x the slope from point a to point b, (entry run, pair) in ns; 0
    when b is not above a by `min_rise` of entry run and some pair."""
    rise, extra = b[0] - a[0], b[1] - a[1]
    if rise < min_rise or extra <= 0:
        return 0
    return min(COLD_X16_MAX, round(16 * extra / rise))


def _attach(tracer):
    """The calibration function of the tracer's flavour, its entry and
    return probes attached in this process -> a callable (None when the
    library is not built)."""
    lib_path = os.path.join(tracer.bpf_dir, "libcephlat_calib%s.so" % (
        "_cet" if tracer.cet else ""))
    if not os.path.exists(lib_path):
        return None
    from .elfsym import ElfSymbols
    with ElfSymbols(lib_path) as elf:
        sym = elf.mark_cet(elf.find("cephlat_calib_target")[0])
    fn = ctypes.CDLL(lib_path).cephlat_calib_target
    fn.restype, fn.argtypes = ctypes.c_long, [ctypes.c_long]
    sid = tracer.vocab.calib_id
    for ret in (False, True):
        tracer.obj.attach_uprobes("stage_return" if ret else "stage_entry",
                                  lib_path, [(sym.probe_offset, sid,
                                              sym.name)],
                                  pid=os.getpid(), retprobe=ret)
    fn(0)                          # first hit: page-in, not a sample
    return fn
