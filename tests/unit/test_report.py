"""Verdict rules and probe-spec parsing (pure logic)."""
import pytest

from cephlat.ceph import spec
from cephlat.engine.session import spec_roles
from cephlat.model import report, verdict
from cephlat.errors import UserError
from cephlat.model.hist import Hist


def attr(busy, signal, runq, pickup=0.0):
    tot = busy + signal + runq + pickup
    return {p: {"mean_us": v, "p50_us": v, "p99_us": 2 * v,
                "share": v / tot} for p, v in
            (("busy", busy), ("signal", signal), ("runq", runq),
             ("pickup", pickup))}


WAKERS = {"enqueuer": 90, "other": 5, "timeout": 5, "timeouts_with_work": 5}
THREADS = {"tp_osd_tp": {"offcpu_pct": 66.0}}


def qw(us, n=1000):
    return Hist.from_ns([int(us * 1000)] * n)


def kst():
    return {"block_rq": Hist(), "syncfs": Hist()}


@pytest.mark.parametrize("parts,cause,words", [
    # four parts: a capture from before `blocked` was one, whose busy
    # holds the sleeps inside ops too
    ((300, 50, 50), "busy_or_blocked", "busy or blocked in earlier ops: "
     "this capture cannot tell them apart"),
    ((50, 300, 50), "signal", "asleep with work queued"),
    ((50, 50, 300), "runq", "CPU contention"),
])
def test_dominant_part_names_the_cause(parts, cause, words):
    c, text = verdict.verdict({"queue_wait": qw(400)}, kst(), attr(*parts),
                             WAKERS, THREADS, "tp_osd_tp")
    assert c == cause and words in text
    assert "workers slept 66.0 %" in text
    assert "saturated" not in text


def parts6(busy, blocked, runq, lock=None):
    """attribution parts with busy (on CPU) and blocked apart, and lock
    apart from blocked when given (captures from before lock have none)"""
    a = attr(busy, 0.0, runq)
    tot = busy + blocked + runq + (lock or 0.0)
    a["blocked"] = {"mean_us": blocked, "p50_us": blocked,
                    "p99_us": 2 * blocked, "share": blocked / tot}
    if lock is not None:
        a["lock"] = {"mean_us": lock, "p50_us": lock, "p99_us": 2 * lock,
                     "share": lock / tot}
    for p in ("busy", "runq"):
        a[p]["share"] = a[p]["mean_us"] / tot
    return a


@pytest.mark.parametrize("parts,workers,cause,words", [
    # one worker on CPU 64 %, runnable 21 %: the worker is the limit
    ((300, 50, 100), {"threads": 1, "offcpu_pct": 15.0, "runq_pct": 21.0},
     "busy", "on CPU with earlier ops: the shard workers are saturated"),
    # eight workers each on CPU 10 %, runnable 40 %: the CPUs are
    ((300, 50, 100), {"threads": 8, "offcpu_pct": 50.0, "runq_pct": 40.0},
     "runq", "waited for a CPU 4.0 x as long as they ran: CPU contention "
     "(8 workers, each "
     "runnable 40.0 % and on CPU 10.0 %"),
    ((50, 300, 100), {"threads": 8, "offcpu_pct": 50.0, "runq_pct": 40.0},
     "runq", "more workers will not help"),
    # runnable whenever not asleep: no ratio to give
    ((300, 50, 100), {"threads": 8, "offcpu_pct": 60.0, "runq_pct": 40.0},
     "runq", "waited for a CPU and hardly ran: CPU contention (8 workers, "
     "each runnable 40.0 % and on CPU 0.0 %"),
    # asleep inside earlier ops, the CPUs free (a capture from before
    # lock was a part: a lock or I/O)
    ((50, 300, 100), {"threads": 8, "offcpu_pct": 80.0, "runq_pct": 5.0},
     "blocked", "asleep inside earlier ops: waiting for a lock (a PG's"),
    # ... and told apart: I/O, or the PG's lock
    ((50, 300, 100, 20), {"threads": 8, "offcpu_pct": 80.0,
                          "runq_pct": 5.0},
     "blocked", "asleep inside earlier ops, not on a lock: waiting for I/O"),
    ((50, 20, 100, 300), {"threads": 8, "offcpu_pct": 80.0,
                          "runq_pct": 5.0},
     "lock", "waiting for a lock: a PG's"),
    # locked workers that mostly wait for a CPU: the CPUs are the limit
    ((50, 20, 100, 300), {"threads": 8, "offcpu_pct": 50.0,
                          "runq_pct": 40.0},
     "runq", "(11 % of it on CPU, 64 % waiting for a lock, 4 % asleep "
     "in them)"),
    # no runnable share known: no CPU claim
    ((300, 50, 100), {"threads": 8, "offcpu_pct": 50.0},
     "busy", "saturated"),
    # on CPU with earlier ops, but asleep most of the time: not saturated
    ((300, 50, 100), {"threads": 5, "offcpu_pct": 95.9, "runq_pct": 1.3},
     "uneven", "on CPU with earlier ops, while the workers slept 95.9 % of "
     "the time: they had time to spare"),
])
def test_busy_or_blocked_workers_that_wait_for_cpus(parts, workers, cause,
                                                    words):
    """Ops behind busy or blocked workers: the workers' own thread
    statistics say whether they ran (their number is the limit) or mostly
    waited for a CPU (the CPUs are: more workers do not help)."""
    c, text = verdict.verdict({"queue_wait": qw(400)}, kst(),
                             parts6(*parts), WAKERS,
                             {"tp_osd_tp": workers}, "tp_osd_tp")
    assert c == cause and words in text, text
    assert verdict.CAUSES[c] in ("workers saturated", "CPU contention",
                                 "workers blocked in ops",
                                 "workers waiting for locks", "load uneven")
    if workers["offcpu_pct"] > 50:
        assert "saturated" not in text


def test_missed_when_timeouts_dominate():
    w = {"enqueuer": 1, "other": 0, "timeout": 99, "timeouts_with_work": 99}
    c, text = verdict.verdict({"queue_wait": qw(2000)}, kst(),
                             attr(10, 1900, 90), w, THREADS, "tp_osd_tp")
    assert c == "missed" and "99 %" in text and "timed wait" in text


def test_short_waits_are_not_a_problem():
    c, text = verdict.verdict({"queue_wait": qw(30)}, kst(), attr(5, 5, 20),
                             WAKERS, THREADS, "tp_osd_tp")
    assert c == "idle" and "not the problem" in text


def test_storage_dominates_writes():
    stages = {"queue_wait": qw(300), "op_total": qw(3000),
              "do_op": qw(150), "bluestore_submit": qw(40)}
    c, text = verdict.verdict(stages, kst(), attr(50, 10, 240), WAKERS,
                             THREADS, "tp_osd_tp")
    assert c == "storage" and text.startswith("storage dominates")
    # 3000 - 300 - 150 = 2550 us after the hand-off, + 40 us submit
    assert "2.55 ms waiting after" in text and "86 %" in text


def test_syncfs_stalls_and_no_ops():
    k = {"block_rq": Hist(), "syncfs": Hist.from_ns([200e6] * 3)}
    c, text = verdict.verdict({}, k, None, None, {}, "worker")
    assert c == "syncfs" and "syncfs stalls" in text
    c, text = verdict.verdict({"queue_wait": Hist()}, kst(), attr(1, 1, 1),
                             WAKERS, THREADS, "tp_osd_tp")
    assert c == "none" and "no ops" in text


def test_spec_parses():
    s = spec.parse('{"name": "q", "enqueue": {"function": "a::push", '
                   '"key_arg": 2, "deref": true}, "dequeue": {"function": '
                   '"a::pop", "key_arg": 1}, "workers": "w-", '
                   '"roles": {"io-": "io"}}')
    assert s.stages() == ["queue_wait"]
    assert s.release.funcs["enqueue_op"].op_arg == (2, True)
    assert s.role_prefixes == [("w-", "worker"), ("io-", "io")]
    roles = spec_roles(s, "q.json")
    assert roles.names == ["other", "worker", "io"]
    assert roles.classify("w-3") == 1 and roles.classify("io-1") == 2
    assert spec.parse('{"workers": "x"}').stages() == []
    assert spec.parse('{"workers": "x"}').scheduler == {"queue": "wpq",
                                                        "mclock": False}
    assert spec.parse('{"workers": "x", "scheduler": "mclock"}').scheduler \
        == {"queue": "mclock_scheduler", "mclock": True}


def test_spec_roles_are_bounded_by_the_build():
    """A spec names at most MAX_ROLES - 2 roles of its own (role 0 is
    "other", role 1 its workers): one more is one clear error."""
    from cephlat.model import vocab
    room = vocab.live().max_roles - 2

    def text(n):
        return '{"workers": "w-", "roles": {%s}}' % ", ".join(
            '"p%d-": "r%d"' % (i, i) for i in range(n))
    assert len(spec_roles(spec.parse(text(room)), "s.json").names) == \
        room + 2
    with pytest.raises(UserError) as e:
        spec_roles(spec.parse(text(room + 1)), "s.json")
    assert str(e.value) == ('s.json: "roles" maps at most %d name prefixes '
                            'to role names' % room)


@pytest.mark.parametrize("text,fragment", [
    ("{", "is not a JSON probe spec"),
    ("[]", "a probe spec is a JSON object"),
    ('{"enqueue": {}}', 'missing "workers"'),
    ('{"workers": "w", "enqueue": {"function": "f", "key_arg": 1}}',
     '"enqueue" and "dequeue" go together'),
    ('{"workers": "w", "enqueue": {"function": "f", "key_arg": 9}, '
     '"dequeue": {"function": "g", "key_arg": 1}}', "key_arg must be"),
    ('{"workers": "w", "enqueue": {"function": "f", "key_arg": 1, '
     '"params": "("}, "dequeue": {"function": "g", "key_arg": 1}}',
     "not a regular expression"),
    ('{"workers": "w", "roles": ["io-"]}', '"roles" maps thread-name'),
    ('{"workers": "w", "roles": {"io-": 3}}', '"roles" maps thread-name'),
    ('{"workers": "w", "scheduler": "fifo"}',
     '"scheduler" is "wpq" or "mclock", not "fifo"'),
])
def test_spec_errors(text, fragment):
    with pytest.raises(UserError) as e:
        spec.parse(text, "s.json")
    assert fragment in str(e.value) and str(e.value).startswith("s.json")


def test_every_loss_counter_says_what_was_lost():
    """Each counter of the header that counts a loss (enum counter_id
    before CNT__RESULTS) has words for the report, and no words are left
    for a counter the header no longer has."""
    from cephlat.model.vocab import live
    v = live()
    losses = [c for c in v.counters if c not in v.result_counters]
    assert sorted(report.LOSS_WORDS) == sorted(losses + [report.AGED_OUT])
    assert set(report.CAPTURE_WORDS) <= set(report.LOSS_WORDS)
    assert set(report.BEGUN_BEFORE) <= set(report.LOSS_WORDS)
    lines = report.loss_lines({"op_map_full": 3, "bad_arg": 0})
    assert lines == ["op_map_full=3: " + report.LOSS_WORDS["op_map_full"]]
    # what was under way at attach is not a loss
    assert report.loss_lines({"op_unknown": 3, "no_start": 2}) == []
    assert report.begun_lines({"op_unknown": 3}) == [
        "ops begun before tracing started (not timed): 3 (op_unknown)"]


def test_text_folds_stages_without_events():
    """A stage that saw nothing is one name on one line, not an empty
    histogram and a row of zeros; losses are printed in words."""
    import io
    from cephlat.render.options import TextOptions
    from cephlat.model.interval import Interval
    from cephlat.render.interval_text import print_interval
    zero = dict(count=0, mean_us=0, p50_us=0, p90_us=0, p99_us=0, max_us=0)
    some = dict(count=2, mean_us=5, p50_us=5, p90_us=6, p99_us=6, max_us=6)
    h = Hist()
    h.add_ns(5000)
    h.add_ns(6000)
    rec = {"stages": {"queue_wait": some, "replica_wait": zero,
                      "repop": zero},
           "interval_s": 1.0, "call_bias_us": 0.0, "unavailable": {},
           "lost": {"attr_truncated": 13, "op_unknown": 0}}
    # (no "ts": the report has no time line)
    out = io.StringIO()
    print_interval(out, TextOptions(), Interval(
        None, 1.0, rec, {"queue_wait": h, "replica_wait": Hist(),
                         "repop": Hist()}, {}, {}))
    text = out.getvalue()
    assert "stage = queue_wait" in text and "stage = repop" not in text
    rows = [l.split()[0] for l in text.splitlines()
            if l[:1].isalpha() and l.split()[1:2] and
            l.split()[1].isdigit()]
    assert rows == ["queue_wait"]
    assert "no events in this interval: replica_wait, repop" in text
    assert "lost: attr_truncated=13: ops that waited" in text
    assert "op_unknown" not in text


def test_held_without_a_limit_gives_the_served_rate():
    """Ops held by mClock with no client limit configured: the verdict
    says so and gives the rate ops were served at as a share of the
    capacity (a custom limit removed after its profile stays in force
    while the config says none: Reef does that)."""
    sched = {"queue": "mclock_scheduler", "mclock": True,
             "profile": "balanced", "capacity_iops": 315.0,
             "capacity_setting": "osd_mclock_max_capacity_iops_hdd",
             "classes": {"client": {"res": 0.5, "wgt": 1, "lim": 0}}}
    parts = attr(1, 1, 1)
    parts["held"] = {"mean_us": 99000, "p50_us": 99000, "p99_us": 105000,
                     "share": 0.99}
    for p in ("busy", "signal", "runq", "pickup"):
        parts[p]["share"] = 0.0025
    c, text = verdict.verdict({"queue_wait": qw(100000, 1570)}, kst(), parts,
                             WAKERS, THREADS, "tp_osd_tp", sched=sched,
                             secs=10.0)
    assert c == "held"
    text = " ".join(text.split())
    assert "no limit binds client ops (profile balanced)" in text
    assert "dequeued at 157 per second, 0.50 x the capacity" in text
    # without the interval's length: no rate
    _, text = verdict.verdict({"queue_wait": qw(100000, 1570)}, kst(), parts,
                             WAKERS, THREADS, "tp_osd_tp", sched=sched)
    assert "per second" not in text


def test_host_verdict_adds_the_slow_replicas_own_line():
    """Several OSDs traced together: the primary's verdict keeps its text
    and gains a line with the slow replica's own figures."""
    primary = {"cause": "replica", "slow_osd": "osd.2",
               "verdict": "replicas: osd.2 replied last: look at osd.2.\n"
                          "block requests: 3, mean 40 us, p99 90 us.",
               "stages": {"replica_wait": {"last_peer": "osd.2"}}}
    replica = {"cause": "busy", "verdict": "busy",
               "stages": {"queue_wait": {"p99_us": 1500.0},
                          "repop": {"count": 10, "p99_us": 4000.0}}}
    before = primary["verdict"]
    verdict.host_verdicts({"osd.0": primary, "osd.2": replica})
    assert primary["verdict"].startswith(before + "\n")
    assert primary["verdict"].splitlines()[-1] == (
        "osd.2's own queue wait p99 1.50 ms, its replica ops p99 4.00 ms "
        "(osd.2: workers saturated).")
    assert replica["verdict"] == "busy"


def _qclasses(client, recovery, held_us=0.0, client_us=2000.0):
    def s(n, us):
        d = qw(us, n).summary() if n else Hist().summary()
        d["held"] = (qw(held_us, n).summary() if n and held_us
                     else Hist().summary())
        return d
    return {"client": s(client, client_us),
            "background_recovery": s(recovery, 100.0),
            "background_best_effort": s(0, 0), "immediate": s(0, 0)}


MCLOCK = {"queue": "mclock_scheduler", "mclock": True,
          "profile": "high_recovery_ops", "capacity_iops": 315.0,
          "classes": {"client": {"res": 0.3, "wgt": 1, "lim": 0},
                      "background_recovery": {"res": 0.7, "wgt": 2,
                                              "lim": 0}}}
BG = ["recovery", "scrub", "snap_trim", "pg_delete"]


@pytest.mark.parametrize("recovery,items,cause", [
    (300, 300, "background"),       # 600 of 1600 served: 38 %
    (100, 100, "busy_or_blocked"),  # 200 of 1200: 17 %, a line of facts
])
def test_background_work_is_named_from_a_fifth(recovery, items, cause):
    stages = {"queue_wait": qw(2000, 1000 + recovery),
              "recovery": qw(5000, items)}
    c, text = verdict.verdict(stages, kst(), attr(300, 20, 50), WAKERS,
                             THREADS, "tp_osd_tp", sched=MCLOCK, secs=10.0,
                             qclasses=_qclasses(1000, recovery),
                             background=BG)
    text = " ".join(text.split())
    assert c == cause
    share = round(100 * (recovery + items) / (1000 + recovery + items))
    assert ("background work was %d %% of what the shard queues served "
            "(%d recovery messages (push, pull, backfill, scan), %d "
            "recovery items) while client ops waited 2.00 ms" % (
                share, recovery, items)) in text
    assert "workers spent %.2f ms per second" % (items * 5 / 10.0) in text
    # the profile's words (and what to set) only when it is a fifth
    assert ("the profile favours recovery. Set osd_mclock_profile "
            "high_client_ops" in text) == (cause == "background")
    if cause == "background":
        assert text.startswith("background work was")


def test_background_words_follow_the_profile_and_the_scheduler():
    stages = {"queue_wait": qw(2000, 1300), "recovery": qw(5000, 300)}
    client_first = dict(MCLOCK, profile="high_client_ops", classes={
        "client": {"res": 0.6, "wgt": 2, "lim": 0},
        "background_recovery": {"res": 0.4, "wgt": 1, "lim": 0}})
    _, text = verdict.verdict(stages, kst(), attr(300, 20, 50), WAKERS,
                              THREADS, "tp_osd_tp", sched=client_first,
                              qclasses=_qclasses(1000, 300), background=BG)
    assert "does not favour recovery" in " ".join(text.split())
    _, text = verdict.verdict(stages, kst(), attr(300, 20, 50), WAKERS,
                              THREADS, "tp_osd_tp",
                              sched={"queue": "wpq", "mclock": False},
                              qclasses=_qclasses(1000, 300), background=BG)
    assert "wpq queues by priority alone" in " ".join(text.split())
    # no client ops: nothing to say about their share
    c, text = verdict.verdict(stages, kst(), attr(300, 20, 50), WAKERS,
                              THREADS, "tp_osd_tp", sched=MCLOCK,
                              qclasses=_qclasses(0, 300), background=BG)
    assert c == "busy_or_blocked" and "background work" not in text
    # another cause keeps its words; the background lines follow
    c, text = verdict.verdict(stages, kst(), attr(20, 300, 50), WAKERS,
                              THREADS, "tp_osd_tp", sched=MCLOCK,
                              qclasses=_qclasses(1000, 300), background=BG)
    assert c == "signal" and "favours recovery" in text


def _shards(peers):
    """shard_read's by_peer from {name: (mean us, replies, times last)}."""
    return {n: {"count": c, "mean_us": m, "last": last, "last_pct": 0.0}
            for n, (m, c, last) in peers.items()}


@pytest.mark.parametrize("peers,slow", [
    # a PG's remote data shard is last behind the primary's own: healthy
    ({"osd.0": (190.0, 100, 0), "osd.1": (2400.0, 60, 60),
      "osd.2": (2500.0, 40, 40)}, None),
    # osd.2's link slowed: last wherever it serves, 3x the other's wait
    ({"osd.0": (190.0, 100, 0), "osd.1": (2400.0, 60, 25),
      "osd.2": (7400.0, 40, 40)}, "osd.2"),
    # slow, but not last in most of what it served
    ({"osd.0": (190.0, 100, 0), "osd.1": (2400.0, 60, 40),
      "osd.2": (7400.0, 40, 20)}, None),
    # one remote shard only: nothing to compare it with
    ({"osd.0": (190.0, 100, 0), "osd.2": (7400.0, 100, 100)}, None),
])
def test_an_erasure_coded_reads_slow_shard(peers, slow):
    """A read waits for its k shards, the primary's own (osd.0 here) among
    them and first: the remote shards are compared among themselves."""
    v = verdict.verdict({"queue_wait": qw(100), "shard_read": qw(
        3000, 100)}, kst(), attr(5, 5, 20), WAKERS, THREADS, "tp_osd_tp",
        read_peers=_shards(peers), me="osd.0")
    c, text = v
    first = text.splitlines()[0]
    assert first.startswith("erasure-coded reads waited 3.00 ms for their "
                            "shards"), text
    assert (c == "replica") == (slow is not None), (c, text)
    assert v.slow == slow
    if slow:
        assert first.endswith(": look at %s." % slow), first
    else:
        assert "look at" not in first, first


def test_host_verdict_names_an_erasure_coded_reads_slow_shard():
    """The slow shard named by a read verdict gets its own line too."""
    primary = {"cause": "replica", "slow_osd": "osd.2",
               "verdict": "erasure-coded reads waited 5.00 ms for their "
                          "shards (p99 9.00 ms); the slowest, osd.2, took "
                          "7.40 ms and was last in 100 % of the reads it "
                          "served: look at osd.2.",
               "stages": {"shard_read": {"last_peer": "osd.1"},
                          "replica_wait": {"last_peer": "osd.1"}}}
    shard = {"cause": "none", "verdict": "",
             "stages": {"queue_wait": {"p99_us": 800.0}}}
    verdict.host_verdicts({"osd.0": primary, "osd.2": shard})
    assert primary["verdict"].splitlines()[-1] == (
        "osd.2's own queue wait p99 0.80 ms.")


class _Vocab:
    max_roles = 8


def test_both_replays_key_the_peers_alike_and_by_peer_reads_them():
    """A capture's replica events, counted one at a time (Rules.count) and
    as arrays (count_arrays, HistSet): the same typed per-peer keys, and
    report.peers / by_peer read them back by OSD id."""
    import numpy as np
    from cephlat.model.events import HistSet, PeerKey, Rules, count_arrays
    rules = Rules(_Vocab(), {"op_class": ["read", "write"]})
    replies = [(1, 2000), (2, 3000), (1, 4000), (2, 9000)]
    dones = [(2, 3000), (2, 9000)]          # (last peer, replica wait)
    one = {}
    for peer, ns in replies:
        rules.count("replica_reply", {"peer": peer, "wait_ns": ns}, one)
    for last, ns in dones:
        rules.count("op_done", {"op_class": 1, "total_valid": 1,
                                "op_total_ns": ns + 500, "dequeued": 1,
                                "queue_wait_ns": 100, "replies": 2,
                                "replica_wait_ns": ns, "last_peer": last},
                    one)
    hs = HistSet()
    rep = np.array(replies, dtype=[("peer", "<u4"), ("wait_ns", "<u8")])
    done = np.array([(1, 1, ns + 500, 1, 100, 2, ns, last)
                     for last, ns in dones],
                    dtype=[("op_class", "u1"), ("total_valid", "u1"),
                           ("op_total_ns", "<u8"), ("dequeued", "u1"),
                           ("queue_wait_ns", "<u8"), ("replies", "u1"),
                           ("replica_wait_ns", "<u8"), ("last_peer", "<u4")])
    for i, (name, r) in enumerate((("replica_reply", rep),
                                   ("op_done", done))):
        for key, idx, ns in count_arrays(rules, name, r):
            hs.add(key, np.asarray(ns, np.uint64), (i, int(idx[0])))
    arrays = hs.hists()
    assert {k for k in one if isinstance(k, PeerKey)} == \
        {k for k in arrays if isinstance(k, PeerKey)} == {
            PeerKey.wait("replica_wait", 1), PeerKey.wait("replica_wait", 2),
            PeerKey.last("replica_wait", 2)}
    for hists in (one, arrays):
        per = report.peers(hists, "replica_wait")
        assert sorted(per) == [1, 2] and per[1][1] == 0 and per[2][1] == 2
        assert per[1][0].count == 2 and per[2][0].max_ns == 9000
        bp = report.by_peer(hists)
        assert list(bp) == ["osd.1", "osd.2"]
        assert bp["osd.2"]["last"] == 2 and bp["osd.2"]["last_pct"] == 100.0
        assert bp["osd.1"]["count"] == 2 and bp["osd.1"]["last"] == 0
        assert report.peers(hists, "shard_read") == {}


def test_an_erasure_coded_reads_events_replay_to_shard_read():
    """A shard's reply to a read (replica_reply, read 1) and the read's
    end (shard_read): shard_read's histogram and per-peer figures, in
    both replays alike; a write's replies stay replica_wait's."""
    import numpy as np
    from cephlat.model.events import HistSet, PeerKey, Rules, count_arrays
    rules = Rules(_Vocab(), {"op_class": ["read", "write"]})
    replies = [(0, 150, 1), (2, 2400, 1), (1, 900, 0)]   # peer, ns, read
    reads = [(2, 2400, 2)]                   # last peer, read ns, replies
    one = {}
    for peer, ns, read in replies:
        rules.count("replica_reply", {"peer": peer, "wait_ns": ns,
                                      "read": read}, one)
    for last, ns, n in reads:
        rules.count("shard_read", {"last_peer": last, "read_ns": ns,
                                   "replies": n}, one)
    hs = HistSet()
    rep = np.array(replies, dtype=[("peer", "<u4"), ("wait_ns", "<u8"),
                                   ("read", "u1")])
    done = np.array(reads, dtype=[("last_peer", "<u4"), ("read_ns", "<u8"),
                                  ("replies", "u1")])
    for i, (name, r) in enumerate((("replica_reply", rep),
                                   ("shard_read", done))):
        for key, idx, ns in count_arrays(rules, name, r):
            hs.add(key, np.asarray(ns, np.uint64), (i, int(idx[0])))
    arrays = hs.hists()
    for hists in (one, arrays):
        assert hists["shard_read"].count == 1
        assert hists["shard_read"].max_ns == 2400
        per = report.peers(hists, "shard_read")
        assert {p: (h.count, last) for p, (h, last) in per.items()} == {
            0: (1, 0), 2: (1, 1)}
        assert list(report.peers(hists, "replica_wait")) == [1]
    assert list(one) == list(arrays)        # the same keys, same order
    assert PeerKey.last("shard_read", 2) in one


def _row(where, share, waker=("Other::unlock",), osd=True, lock=None):
    return {"role": "worker", "kind": "lock", "where": list(where),
            "lock": lock, "woken_by": list(waker), "waker_is_osd": osd, "us": 900.0,
            "waits": 3, "share": share}


@pytest.mark.parametrize("cause, top, words", [
    ("lock", {"lock": _row(["PG::lock", "OSD::dequeue_op"], 0.8,
                           lock="the PG's lock")},
     "waiting for a lock (waits recorded with stacks) was most in "
     "PG::lock < OSD::dequeue_op (80 %), the PG's lock; woken by "
     "Other::unlock."),
    ("lock", {"lock": _row(["Shard::take"], 0.8)},
     "was most in Shard::take (80 %); woken by Other::unlock."),
    ("blocked", {"blocked": _row(["IOContext::aio_wait"], 0.3,
                                 ("irq",), False)},
     "asleep inside ops (waits recorded with stacks) was spread out, the "
     "most in IOContext::aio_wait (30 %); woken by irq (outside the OSD)."),
    ("busy", {"on_cpu": {"function": "crc32c", "samples": 90,
                         "share": 0.6, "kernel_share": 0.0}},
     "the workers' samples on a CPU were most in crc32c (60 %)."),
    ("runq", {"on_cpu": {"function": "memcpy", "samples": 20,
                         "share": 0.2, "kernel_share": 0.25}},
     "were spread out, the most in memcpy (20 %); 25 % of those in the "
     "kernel."),
])
def test_the_verdict_names_where_the_workers_time_went(cause, top, words):
    full = dict.fromkeys(("lock", "locks", "blocked", "on_cpu"))
    full.update(top)
    assert words in verdict.stack_line(cause, full)


@pytest.mark.parametrize("locks, words", [
    # two named locks worth naming: both, the largest first
    ({"the PG's lock": 0.5, "the shard's own locks": 0.45},
     "woken by Other::unlock. By lock: the PG's lock 50 %, the shard's "
     "own locks 45 %."),
    # one, or a second below LOCK_SHARE: the top place's name says it
    ({"the PG's lock": 0.9}, "woken by Other::unlock."),
    ({"the PG's lock": 0.9, "the shard's own locks": 0.05},
     "woken by Other::unlock."),
])
def test_the_verdict_names_each_lock_that_held_the_workers(locks, words):
    full = {"lock": _row(["PG::lock"], 0.5, lock="the PG's lock"),
            "locks": locks, "blocked": None, "on_cpu": None}
    assert verdict.stack_line("lock", full).endswith(words)


@pytest.mark.parametrize("cause, top", [
    # a cause of its own (the scheduler, storage, a replica): no line
    ("held", {"on_cpu": {"function": "f", "samples": 9, "share": 0.9,
                         "kernel_share": 0.0}}),
    ("replica", {"lock": _row(["PG::lock"], 0.9)}),
    # the cause's kind of time not recorded: no line from another kind
    ("lock", {"on_cpu": {"function": "f", "samples": 9, "share": 0.9,
                         "kernel_share": 0.0}}),
    ("busy", {"lock": _row(["PG::lock"], 0.9)}),
])
def test_no_stack_line_for_another_cause(cause, top):
    full = dict.fromkeys(("lock", "locks", "blocked", "on_cpu"))
    full.update(top)
    assert verdict.stack_line(cause, full) is None
