"""Real-cluster tier, multi-host lab (3 hosts, 1 ms links): rbdrecord
records each OSD op of a real fio rbd client (the end-to-end view's
client side).
Against the OSDs' own OpTracker: the same request ids, to the same OSD,
PG and object; every op sent once, replied by its OSD and completed; the
times it records carry the wire's delays (a read crosses two links, a
replicated write four)."""
import collections
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, fio_rbd_job, need

sys.path.insert(0, os.path.join(REPO, "lib"))

from cephlat.ceph import objecter                       # noqa: E402
from cephlat.ceph.adminsock import command              # noqa: E402

RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")
IOS = 600
DELAY_US = 1000          # the lab_hosts fixture's LAB_NET_DELAY


class _Ops(collections.defaultdict):
    """{reqid: ...} with the last librbd call's completion (last_call)."""
    last_call = 0


def osd_ops(trace):
    """{reqid: {"send": [event fields + ts], "reply": [...], "done": [...]}}
    and the librbd request count, read back with babeltrace2's bindings."""
    import bt2
    ops = _Ops(lambda: collections.defaultdict(list))
    requests = 0
    last_call = 0
    for msg in bt2.TraceCollectionMessageIterator(str(trace)):
        if type(msg) is not bt2._EventMessageConst:
            continue
        name = msg.event.name
        if name == "librbd:aio_complete_enter":
            requests += 1
            last_call = msg.default_clock_snapshot.ns_from_origin
        if not name.startswith("rbdrecord:osd_op_"):
            continue
        f = msg.event.payload_field
        rec = {k: (str(v) if isinstance(v, bt2._StringFieldConst) else
                   int(v)) for k, v in f.items()}
        rec["ts"] = msg.default_clock_snapshot.ns_from_origin
        ops[rec["reqid"]][name[len("rbdrecord:osd_op_"):]].append(rec)
    ops.last_call = last_call
    return ops, requests


def closing(ops):
    """The ops never replied to that librbd sent as it closed the image:
    after the last I/O call's completion, to the image's header (the ack
    of its own lock-release notify, say); the Objecter drops those still
    in flight when it shuts down, their replies unread. Any other op
    unreplied is a fault."""
    out = {}
    for reqid, r in ops.items():
        if r["reply"]:
            continue
        s = r["send"][0]
        assert s["ts"] > ops.last_call and \
            not s["object"].startswith("rbd_data."), (reqid, dict(r))
        out[reqid] = s
    return out


def historic(asok):
    """The client ops in the OSD's OpTracker history: {reqid: (pgid,
    object)} from each op's description, 'osd_op(client.4166.0:7 1.5
    1:a0..:::rbd_data.10ab.0000000000000003:head [write 0~4096] ...)'."""
    out = {}
    for op in command(asok, "dump_historic_ops", timeout=30)["ops"]:
        d = op["description"]
        if not d.startswith("osd_op("):
            continue
        m = re.match(r"osd_op\((\S+) (\S+) (\S*)", d)
        reqid, pgid, hobj = m.groups()
        # an op the OSD had not decoded yet is "(undecoded)": no object
        obj = hobj.split(":::", 1)[1].rsplit(":", 1)[0] if ":::" in hobj \
            else None
        out[reqid] = (pgid, obj)
    return out


def history_size(asok, n):
    p = subprocess.run(["ceph", "--admin-daemon", asok, "config", "set",
                        "osd_op_history_size", str(n)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def clear_history(asoks, size):
    """OpTracker keeps the *slowest* osd_op_history_size ops: emptied
    (size 0, then a dump, which prunes) and made room for a whole run."""
    for a in asoks:
        history_size(a, 0)
        command(a, "dump_historic_ops", timeout=30)
        history_size(a, size)


@pytest.fixture(scope="module")
def recorded(lab_hosts, tmp_path_factory):
    need(shutil.which("fio") is not None, "fio missing (make setup)")
    d = tmp_path_factory.mktemp("osdops")
    runs = []
    before = [command(a, "config get", var="osd_op_history_size")[
        "osd_op_history_size"] for a in lab_hosts["asoks"]]
    try:
        for i in range(3):      # a behaviour that can fail now and then
            clear_history(lab_hosts["asoks"], 20 * IOS)
            runs.append(_record(lab_hosts, d, i))
    finally:
        for a, n in zip(lab_hosts["asoks"], before):
            history_size(a, n)
    return runs


def _record(lab_hosts, d, i):
    """One fio run under rbdrecord, in the client's namespace; the OSDs'
    histories right after it."""
    (d / ("job%d.fio" % i)).write_text(fio_rbd_job(IOS, 8, 42 + i))
    out = d / ("trace%d" % i)
    # librbd's default I/O scheduler merges writes that touch each other
    # in an object into one op now and then: without it each call is one
    # op, which the counts below hold exactly
    conf = d / "client.conf"
    with open(lab_hosts["CEPH_CONF"]) as f:
        conf.write_text(f.read() + "\n[client]\nrbd_io_scheduler = none\n")
    p = subprocess.run(
        ["nsenter", "--net=/run/netns/" + lab_hosts["client_netns"],
         "--", sys.executable, RBDRECORD, "-o", str(out), "--force",
         "--", "fio", "--output-format=json",
         "--output=%s" % (d / ("fio%d.json" % i)),
         str(d / ("job%d.fio" % i))], capture_output=True, text=True,
        timeout=300, env=dict(os.environ, CEPH_CONF=str(conf)))
    assert p.returncode == 0, p.stderr
    assert "none lost" in p.stderr, p.stderr
    assert "not recorded" not in p.stderr, p.stderr
    assert re.search(r"fio used [0-9.]+ s of CPU", p.stderr), p.stderr
    hist = [historic(a) for a in lab_hosts["asoks"]]
    ops, requests = osd_ops(out)
    fio = json.load(open(d / ("fio%d.json" % i)))["jobs"][0]
    summary = subprocess.run([sys.executable, RBDRECORD, "--summary",
                              str(out), "-j"], capture_output=True,
                             text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    return ops, requests, hist, fio, json.loads(summary.stdout)


def test_every_op_is_the_osds_own(recorded):
    """The request ids the client sent to OSD k are exactly those OSD k's
    OpTracker holds for this client, with the same PG and object."""
    for ops, requests, hist, fio, summ in recorded:
        assert requests == IOS
        clients = {r["send"][0]["client"] for r in ops.values()}
        assert len(clients) == 1, clients
        prefix = "client.%d." % clients.pop()
        for osd, h in enumerate(hist):
            ours = {k: v for k, v in h.items() if k.startswith(prefix)}
            sent = {k: (r["send"][0]["pgid"], r["send"][0]["object"])
                    for k, r in ops.items() if r["send"][0]["osd"] == osd}
            assert set(ours) == set(sent), (osd, len(ours), len(sent))
            for k, (pgid, obj) in ours.items():
                assert pgid == sent[k][0], (k, ours[k], sent[k])
                assert obj in (None, sent[k][1]), (k, ours[k], sent[k])
            assert ours, osd


def test_each_op_sent_replied_and_completed_once(recorded):
    for ops, requests, hist, fio, summ in recorded:
        # at least one object op per librbd call (the image's header ops
        # at open and close besides)
        assert len(ops) >= IOS
        gone = closing(ops)
        for reqid, r in ops.items():
            if reqid in gone:
                assert [len(r["send"]), len(r["reply"]), len(r["done"])] == \
                    [1, 0, 0], (reqid, dict(r))
                continue
            assert [len(r["send"]), len(r["reply"]), len(r["done"])] == \
                [1, 1, 1], (reqid, dict(r))
            s, rep, done = r["send"][0], r["reply"][0], r["done"][0]
            assert s["attempts"] == 0, s
            # the reply comes from the OSD the op went to
            assert rep["osd"] == s["osd"], (s, rep)
            assert s["ts"] < rep["ts"] <= done["ts"], (s, rep, done)
            assert s["object"] and s["object_len"] == len(s["object"]), s
            assert s["flags"] & (objecter.FLAG_READ | objecter.FLAG_WRITE), s


def test_times_carry_the_wire(recorded):
    """Each 1-ms link crossed shows: a read's reply comes back no sooner
    than two link delays after its send (client -> primary -> client), a
    replicated write's no sooner than four (and the primary's replicas
    on the two other hosts). The medians stay within fio's own: the op is
    inside the call fio timed."""
    for ops, requests, hist, fio, summ in recorded:
        by = collections.defaultdict(list)
        for r in ops.values():
            s = r["send"][0]
            kind = "write" if s["flags"] & objecter.FLAG_WRITE else "read"
            if s["object"].startswith("rbd_data."):
                by[kind].append((r["reply"][0]["ts"] - s["ts"]) / 1000.0)
        assert by["read"] and by["write"], {k: len(v) for k, v in by.items()}
        assert min(by["read"]) >= 2 * DELAY_US, min(by["read"])
        assert min(by["write"]) >= 4 * DELAY_US, min(by["write"])
        for kind in ("read", "write"):
            med = sorted(by[kind])[len(by[kind]) // 2]
            fio_med = fio[kind]["clat_ns"]["percentile"]["50.000000"] / 1e3
            assert med <= fio_med * 1.05, (kind, med, fio_med)


def test_summary_counts_them_per_osd(recorded):
    """--summary's per-OSD table holds every op sent, by OSD and kind, and
    its median is the trace's."""
    for ops, requests, hist, fio, summ in recorded:
        want = collections.Counter()
        gone = closing(ops)
        unreplied = collections.Counter(str(s["osd"]) for s in gone.values())
        for reqid, r in ops.items():
            if reqid in gone:
                continue
            s = r["send"][0]
            want[(str(s["osd"]), "write" if s["flags"] & objecter.FLAG_WRITE
                  else "read")] += 1
        got = collections.Counter({(osd, k): v["ops"]
                                   for osd, per in summ["osds"].items()
                                   for k, v in per.items() if k != "unreplied"})
        assert got == want
        assert {osd: per["unreplied"] for osd, per in summ["osds"].items()
                if per["unreplied"]} == dict(unreplied)


def test_each_call_is_linked_to_its_ops(recorded):
    """Every data op is linked to the 4 KiB call whose range its object
    and extent hold (4-MiB objects: one op a call; a write to a new object
    starts with a set-alloc-hint, skipped); --summary says all were, and
    the object size. A read of an object never written has no op (the
    image's object map says it does not exist): on the first run of a
    fresh lab some reads do."""
    for ops, requests, hist, fio, summ in recorded:
        k = summ["osd_ops_linked"]
        assert k["object_size"] == 4 << 20, k
        assert k["linked"] == k["data_ops"], k
        writes = fio["write"]["total_ios"]
        assert writes <= k["data_ops"] <= IOS, (k, writes)
    # by the last run every object has been written
    assert recorded[-1][4]["osd_ops_linked"]["data_ops"] == IOS
