"""Reading the programs' maps other than the stage statistics, for
StageTracer (engine/tracer.py), which inherits MapReads: the targets'
threads (entered at the start with their state, read with the time in
progress, pruned when they exit) and the per-CPU, per-half hash maps of
shards, devices and replica peers (probes/osdstage.h HALF_SHIFT), read as
{slot: {key: stats}} with the half of the interval just closed: shards'
and devices' totals so far (each half as it closed, summed), the peers'
of that interval alone (its half emptied once read: take_peers).

What it needs of its owner: abi, vocab, pids, roles, reader (the stats
reader: CPUs, histogram parsing), the maps threads, shards, devs, peers
and behind, and the dict _halves."""
import os
import struct
import time

from ..model import events
from ..model.hist import Hist
from ..model.threadstates import accrue
from ..model.vocab import THREAD_ROW
from .tasks import TaskNames


def _add(a, b):
    """Two readings of one key of a map summed: dicts of counts (fields
    named *max*: the larger), or (Hist, count) pairs; a may be None. A new
    value: neither is changed."""
    if isinstance(b, tuple):
        h = Hist(b[0].count, b[0].sum_ns, b[0].max_ns, list(b[0].slots))
        if a is None:
            return (h, b[1])
        h.merge(a[0])
        return (h, a[1] + b[1])
    if a is None:
        return dict(b)
    return {k: max(v, a.get(k, 0)) if "max" in k else v + a.get(k, 0)
            for k, v in b.items()}


class MapReads:
    def _seed_threads(self):
        """Enter the targets' existing threads with their current state, so
        that a thread asleep for the whole run is counted as asleep."""
        for slot, pid in enumerate(self.pids):
            self._seed_threads_of(slot, pid)

    def _seed_threads_of(self, slot, pid):
        now = time.monotonic_ns()
        task_dir = "/proc/%d/task" % pid
        try:
            tids = os.listdir(task_dir)
        except OSError:
            return
        for tid in tids:
            try:
                with open(os.path.join(task_dir, tid, "comm"), "rb") as f:
                    comm = f.read().rstrip(b"\n")
                with open(os.path.join(task_dir, tid, "stat")) as f:
                    st = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            state = self.vocab.states.index("run" if st == "R" else "sleep")
            c8 = (comm + b"\0" * 8)[:8]
            ts = self.abi.struct("thread_state")
            raw = bytearray(ts.pack(
                comm8=struct.unpack("<Q", c8)[0], since=now, born=now,
                role=self.roles.classify(comm.decode("utf-8", "replace")),
                state=state, ring_head=1, target=slot))
            ring0 = self.abi.struct("tring").pack(ts=now, state=state)
            at = ts.offset("ring")
            raw[at:at + len(ring0)] = ring0
            try:
                self.threads.update(struct.pack("<I", int(tid)), bytes(raw))
            except OSError:
                pass

    def read_threads(self):
        """{slot: {tid: dict}} of every target's threads, with in-progress
        time added: one pass over the map for all targets."""
        now = time.monotonic_ns()
        out = {}
        for key, t in self._entries(self.threads, "thread_state"):
            row = {"role": t["role"], "state": t["state"]}
            row.update((name, t[member]) for name, member in THREAD_ROW)
            accrue(row, self.vocab.states, t["state"], t["since"], now)
            if t["futex_start"] and now > t["futex_start"]:
                row["futex_ns"] += now - t["futex_start"]
            out.setdefault(t["target"], {})[
                struct.unpack("<I", key)[0]] = row
        return out

    def prune_threads(self):
        """Forget threads that have exited."""
        for key, t in self._entries(self.threads, "thread_state"):
            tid = struct.unpack("<I", key)[0]
            pid = self.pids[t["target"]] if t["target"] < len(self.pids) \
                else 0
            if not os.path.exists("/proc/%d/task/%d" % (pid, tid)):
                self.threads.delete(key)

    def _entries(self, m, struct_name, percpu=False):
        """(key bytes, value as a dict) of each entry of hash map m, whose
        values are struct `struct_name` of probes/osdstage.h. percpu: a
        per-CPU map, each CPU's copy summed (fields named *max*: the
        largest)."""
        st = self.abi.struct(struct_name)
        stride = (st.size + 7) // 8 * 8
        ncpu = self.reader.ncpu if percpu else 1
        for key, raw in m.items(stride * ncpu):
            out = None
            for cpu in range(ncpu):
                v = st.unpack(raw[cpu * stride:cpu * stride + st.size])
                if out is None:
                    out = v
                    continue
                for k, x in v.items():
                    out[k] = max(out[k], x) if "max" in k else out[k] + x
            yield key, out

    def _split(self, m, key_fmt, shift, half=None):
        """{slot: {address: value}} of a per-CPU hash map keyed
        half << HALF_SHIFT | slot << shift | address: one pass for all
        targets; half None: both halves summed, else that one's."""
        hshift = self.abi.const("HALF_SHIFT")
        mask = (1 << shift) - 1
        struct_name, fmt = key_fmt
        out = {}
        for key, v in self._entries(m, struct_name, percpu=True):
            k = struct.unpack(fmt, key)[0]
            if half is not None and k >> hshift != half:
                continue
            k &= (1 << hshift) - 1
            addrs = out.setdefault(k >> shift, {})
            addrs[k & mask] = _add(addrs.get(k & mask), v)
        return out

    def _closed(self, name, half, read):
        """The totals of map `name` up to the interval just closed, in
        half `half`: that half read now (it is complete and still), the
        other as it was when its own interval closed. -> {slot: {key:
        stats}}, the two halves summed"""
        halves = self._halves.setdefault(name, {})
        halves[half] = read(half)
        out = {}
        for h in halves.values():
            for slot, addrs in h.items():
                mine = out.setdefault(slot, {})
                for k, v in addrs.items():
                    mine[k] = _add(mine.get(k), v)
        return out

    def read_shards(self, half=None):
        """{slot: {shard: stats}}"""
        return self._split(self.shards, ("shard_stats", "<Q"),
                           self.abi.const("TARGET_SHIFT"), half)

    def read_devs(self, half=None):
        """{slot: {device name: stats}}"""
        return {slot: {self.vocab.dev_name(dev): d for dev, d in ds.items()}
                for slot, ds in self._split(self.devs, ("dev_stats", "<Q"),
                                            32, half).items()}

    def read_peers(self, half=None, keys=None):
        """{slot: {(read, peer osd id): (replies' wait Hist, times last)}}
        (probes/osdstage.h struct peer_stats; read: an erasure-coded
        read's shard, else a write's replica or shard); half None: both
        halves summed, else that one's. keys: a list the map keys read
        are appended to."""
        ps = self.abi.struct("peer_stats")
        stride = (ps.size + 7) // 8 * 8
        ncpu = self.reader.ncpu
        hshift = self.abi.const("HALF_SHIFT")
        rshift = self.abi.const("PEER_READ_SHIFT")
        out = {}
        for key in self.peers.keys():
            k = struct.unpack("<Q", key)[0]
            if half is not None and k >> hshift != half:
                continue
            raw = self.peers.lookup(key, stride * ncpu)
            if raw is None:
                continue
            if keys is not None:
                keys.append(key)
            last = sum(struct.unpack_from("<Q", raw, cpu * stride)[0]
                       for cpu in range(ncpu))
            k &= (1 << hshift) - 1
            read = k >> rshift & 1
            k &= (1 << rshift) - 1
            peers = out.setdefault(k >> 32, {})
            peer = (read, k & 0xffffffff)
            peers[peer] = _add(peers.get(peer), (self.reader.parse(
                raw, stride, ps.offset("wait")), last))
        return out

    def take_behind(self, half):
        """The closed interval's run-queue waits by whom the CPU ran
        instead -> {slot: {(role index, tgid): {"ns", "waits", "cgid",
        "pid", "comm"}}} (probes/osdstage.h struct behind_stats; tgid 0:
        the CPU's idle task, BEHIND_UNKNOWN: before the CPU's kept
        slices): the half the interval filled, read and then emptied, as
        take_peers does. Times and counts are the CPUs' copies summed; the
        task's names and cgroup are the copy with the most time's."""
        st = self.abi.struct("behind_stats")
        stride = (st.size + 7) // 8 * 8
        ncpu = self.reader.ncpu
        hshift = self.abi.const("HALF_SHIFT")
        rshift = self.abi.const("BEHIND_ROLE_SHIFT")
        at = st.offset("comm")
        unknown = self.abi.const("BEHIND_UNKNOWN")
        if getattr(self, "task_names", None) is None:
            self.task_names = TaskNames()
        out, keys = {}, []
        for key, raw in self.behind.items(stride * ncpu):
            k = struct.unpack("<Q", key)[0]
            if k >> hshift != half:
                continue
            keys.append(key)
            row, most = {"ns": 0, "waits": 0}, -1
            for cpu in range(ncpu):
                v = st.unpack(raw, cpu * stride)
                row["ns"] += v["ns"]
                row["waits"] += v["waits"]
                if v["ns"] > most and v["waits"]:
                    most = v["ns"]
                    row.update(cgid=v["cgid"], pid=v["pid"], comm=raw[
                        cpu * stride + at:cpu * stride + at + 16].split(
                            b"\0", 1)[0].decode("utf-8", "replace"))
            k &= (1 << hshift) - 1
            tgid = k & 0xffffffff
            if tgid and tgid != unknown and "pid" in row:
                row.update(self.task_names.describe(
                    tgid, row["pid"], row["cgid"], row["comm"]))
            mine = out.setdefault(k >> 32 & 0xff, {})
            mine[(k >> rshift & 0xff, tgid)] = row
        for key in keys:
            self.behind.delete(key)
        return out

    def take_peers(self, half):
        """The closed interval's per-peer figures -> {slot: {PeerKey:
        Hist}} (model/events.py's keys; a "last" Hist counts the times
        the peer replied last): the half of the peers map that interval
        filled, read and then emptied (its keys deleted), as the stage
        statistics' half is zeroed; the programs make the entries anew
        when that half comes round again."""
        keys = []
        per = self.read_peers(half, keys)
        for key in keys:
            self.peers.delete(key)
        out = {}
        for slot, peers in per.items():
            mine = out[slot] = {}
            for (read, peer), (h, last) in peers.items():
                stage = "shard_read" if read else "replica_wait"
                mine[events.PeerKey.wait(stage, peer)] = h
                if last:
                    mine[events.PeerKey.last(stage, peer)] = Hist(
                        last, 0, 0, [0] * len(h.slots))
        return out
