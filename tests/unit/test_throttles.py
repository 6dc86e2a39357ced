"""The messenger throttles: read from a perf dump as an OSD gives it
(ceph/throttles.py), their interval deltas (model/report.py) and the
verdict's words (model/verdict.py)."""
from cephlat.ceph.throttles import from_dump
from cephlat.model import report, verdict
from cephlat.model.hist import Hist


def _dump(fails, gets, waits=0, wait_s=0.0):
    sec = {"val": 4, "max": 4, "get": gets, "get_or_fail_fail": fails,
           "get_or_fail_success": gets, "take": 0, "put": gets,
           "wait": {"avgcount": waits, "sum": wait_s, "avgtime": 0.0}}
    return {"throttle-osd_client_messages": sec,
            "throttle-bluestore_throttle_bytes": dict(sec, max=1 << 26),
            "osd": {"op_r": gets}}


def _hist(*us):
    h = Hist()
    for u in us:
        h.add_ns(int(u * 1000))
    return h


def test_only_the_messenger_throttles_with_their_settings():
    t = from_dump(_dump(10, 100))
    assert list(t) == ["osd_client_messages"]
    assert t["osd_client_messages"] == {
        "setting": "osd_client_message_cap", "max": 4, "val": 4,
        "get": 100, "fails": 10, "waits": 0, "wait_s": 0.0}


def test_deltas_and_the_time_blocked():
    d = report.throttle_deltas(from_dump(_dump(1010, 5100, 2, 0.5)),
                               from_dump(_dump(10, 100)))
    assert d["osd_client_messages"] == {
        "setting": "osd_client_message_cap", "max": 4, "val": 4,
        "gets": 5000, "fails": 1000, "waits": 2, "blocked_s": 1.5}
    assert report.throttle_deltas(from_dump(_dump(1, 1)), None) is None


def test_a_full_throttle_is_the_cause_unless_the_osd_takes_far_longer():
    thr = report.throttle_deltas(from_dump(_dump(1000, 2000)),
                                 from_dump(_dump(0, 1000)))
    # 1 s blocked over 1000 ops: 1 ms per op against 100 us in the OSD
    stages = {"op_total": _hist(*[100] * 1000),
              "throttle_wait": _hist(1, 1, 2500)}
    lines, cause = verdict._throttle_lines(thr, stages)
    text = " ".join(" ".join(lines).split())
    assert cause
    assert "osd_client_messages was full (cap 4, osd_client_message_cap)" \
        in text
    assert "1000 reads of a message found it full" in text
    assert "unread in the socket" in text
    # the same throttle full while ops take 10 ms in the OSD: named, but
    # the OSD's own time is the reason
    slow = dict(stages, op_total=_hist(*[10000] * 1000))
    lines, cause = verdict._throttle_lines(thr, slow)
    assert lines and not cause
    # about as long in the OSD as blocked (CPU contention): still the
    # throttle, whose unseen socket wait comes on top; past twice as
    # long, the OSD's time
    for osd_us, named in ((1100, True), (1900, True), (2100, False)):
        near = dict(stages, op_total=_hist(*[osd_us] * 1000))
        assert verdict._throttle_lines(thr, near)[1] == named, osd_us
    # not full: nothing to say
    idle = report.throttle_deltas(from_dump(_dump(5, 2000)),
                                  from_dump(_dump(5, 1000)))
    assert verdict._throttle_lines(idle, stages) == ([], False)
