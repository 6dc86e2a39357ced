"""The workers' top place and function in a capture's stacks (the
verdict's line about them): a wait's place is its innermost frames
outside the system's libraries, a sample's function its innermost frame
outside them (the libraries and the kernel under it count for it); the
shares are of the role's waits of those kinds, or of its samples."""
from cephlat.stacks.waits import (Frame, Sample, Wait, lock_shares,
                                  top_cpu, top_wait, wait_summary)

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
OSD = "/usr/bin/ceph-osd"


def _f(name, path=OSD):
    return Frame(0x1000, path, name)


def _sample(role, user, kernel=()):
    s = Sample()
    s.ts, s.tid, s.role, s.in_op = 0, 1, role, True
    s.user, s.kernel, s.stopped = list(user), list(kernel), "end"
    return s


def _wait(role, kind, off_ns, user):
    w = Wait()
    w.ts, w.tid, w.role, w.kind, w.off_ns = 0, 1, role, kind, off_ns
    w.user, w.kernel, w.stopped = list(user), [], "end"
    w.waker_tid, w.waker_user = 2, [_f("Other::unlock")]
    w.waker_kernel = []
    return w


def test_a_sample_counts_for_its_first_frame_outside_the_libraries():
    crc = [_f("memcpy", LIBC), _f("crc32c"), _f("OSD::dequeue_op")]
    ss = [_sample("worker", crc), _sample("worker", crc[1:]),
          _sample("worker", crc, [_f("copy_user", None)]),
          _sample("worker", [_f("PG::lock")]),
          _sample("msgr", [_f("Messenger::read")])]
    top = top_cpu(ss, "worker")
    assert top == {"function": "crc32c", "samples": 3, "share": 0.75,
                   "kernel_share": 0.333}
    assert top_cpu(ss, "kv") is None


def test_a_sample_in_the_kernel_alone_is_named_by_its_kernel_frame():
    ss = [_sample("worker", [], [_f("schedule", None)])] * 2
    assert top_cpu(ss, "worker")["function"] == "schedule_[k]"


def test_the_top_wait_is_the_longest_place_of_its_kinds():
    lock = [_f("__lll_lock_wait", LIBC), _f("PG::lock"), _f("OSD::op")]
    ws = [_wait("worker", "lock", 3000, lock),
          _wait("worker", "lock", 1000, [_f("Shard::lock")]),
          # other kinds and roles do not count
          _wait("worker", "idle", 90000, [_f("Shard::wait")]),
          _wait("msgr", "lock", 90000, lock)]
    top = top_wait(ws, "worker", ("lock",))
    assert top["where"] == ["PG::lock", "OSD::op"], top
    assert top["share"] == 0.75 and top["waits"] == 1, top
    assert top["lock"] == "the PG's lock", top
    assert top_wait(ws, "worker", ("work",)) is None


def test_a_lock_wait_names_the_osds_lock_by_where_it_slept():
    """PG::lock on the stack: the PG's; the shard's worker loop itself
    (its mutexes taken inline): the shard's own; anywhere else, or a
    wait of another kind in those places: no name."""
    loop = _f("OSD::ShardedOpWQ::_process")
    cond = _f("pthread_cond_wait", LIBC)
    ws = [_wait("worker", "lock", 4000, [_f("__lll_lock_wait", LIBC),
                                         _f("PG::lock"), loop]),
          _wait("worker", "lock", 3000, [_f("__lll_lock_wait", LIBC),
                                         loop]),
          _wait("worker", "lock", 2000, [_f("BlueStore::queue")]),
          _wait("worker", "idle", 1000, [cond, loop])]
    got = {(r["kind"],) + tuple(r["where"]): r["lock"]
           for r in wait_summary(ws)}
    assert got == {
        ("lock", "PG::lock", "OSD::ShardedOpWQ::_process"): "the PG's lock",
        ("lock", "OSD::ShardedOpWQ::_process"): "the shard's own locks",
        ("lock", "BlueStore::queue"): None,
        ("idle", "OSD::ShardedOpWQ::_process"): None}, got


def test_the_lock_waits_time_by_the_lock_named():
    """Each named lock's share of the role's lock waits' time (the
    unnamed count in the whole, not as a lock of their own); none for a
    role without lock waits."""
    loop = _f("OSD::ShardedOpWQ::_process")
    lll = _f("__lll_lock_wait", LIBC)
    ws = [_wait("worker", "lock", 5000, [lll, _f("PG::lock"), loop]),
          _wait("worker", "lock", 3000, [lll, loop]),
          _wait("worker", "lock", 1000, [lll, loop]),
          _wait("worker", "lock", 1000, [_f("BlueStore::queue")]),
          _wait("worker", "idle", 90000, [lll, loop]),
          _wait("msgr", "lock", 90000, [lll, _f("PG::lock")])]
    got = lock_shares(ws, "worker")
    assert got == {"the PG's lock": 0.5, "the shard's own locks": 0.4}, got
    assert list(got) == ["the PG's lock", "the shard's own locks"]
    assert lock_shares(ws, "kv") is None


def test_a_wait_whose_wake_up_no_probe_saw_names_no_waker():
    """A wait rebuilt at its thread's next switch-out (the kernel ran no
    probe for its wake-up) is listed with its own stack and an unseen
    waker: never "outside the OSD", never another wait's waker."""
    import io
    from types import SimpleNamespace
    from cephlat.model.report import UNSEEN_WAKER
    from cephlat.model.verdict import stack_line
    from cephlat.render import text
    from cephlat.stacks.waits import op_waits, sleep_notes
    aio = [_f("IOContext::aio_wait"), _f("BlueStore::read")]
    seen, unseen = _wait("worker", "work", 3000, aio), \
        _wait("worker", "work", 1000, aio)
    seen.ts, unseen.ts, unseen.unseen = 5000, 9000, True
    unseen.waker_tid, unseen.waker_user = 0, []
    rows = wait_summary([seen, unseen])
    assert [(r["us"], r["waker_is_osd"], r["woken_by"]) for r in rows] == \
        [(3.0, True, ["Other::unlock"]), (1.0, None, [])], rows
    got = op_waits([seen, unseen], 1, 0, 10 ** 6, 0, lambda tid: "bstore")
    assert [(w["waker"], w.get("unseen")) for w in got] == \
        [("bstore", None), (None, True)], got
    notes = sleep_notes([unseen], {1}, lambda tid: "bstore")
    assert notes[0]["waker"] == UNSEEN_WAKER, notes
    out = io.StringIO()
    text._waits(out, {"waits": got})
    words = " ".join(out.getvalue().split())
    assert words.count(UNSEEN_WAKER) == 1, words
    assert "outside the OSD" not in words, words
    out = io.StringIO()
    text.print_stacks(out, SimpleNamespace(milliseconds=False),
                      {"waits": rows[1:]})
    words = " ".join(out.getvalue().split())
    assert UNSEEN_WAKER in words and "outside the OSD" not in words, words
    row = dict(rows[1], share=1.0)
    line = stack_line("blocked", {"blocked": row})
    assert UNSEEN_WAKER in line and "outside the OSD" not in line, line
