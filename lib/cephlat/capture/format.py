"""Capture files (osdstage -w): a CTF 1.8 trace directory.

  metadata          TSDL: every event and field below, the clock (CLOCK_
                    MONOTONIC ns with the offset to wall-clock time) and an
                    env block (host, kernel, Ceph release, pid, stages...)
  stream_cpuN       the BPF programs' events recorded on CPU N, written by
                    lib/native/recorder.c straight from the ring buffer
  stream_meta       what user space knows: threads (tid -> name, role) and,
                    at each report, the state read from the kernel maps
                    (per-thread times, shards, devices, counters)

Every event carries `cpu` and `interval` (event context): `interval` is the
report it was counted in, so -r can rebuild each report of the live run
exactly. man/man8/osdstage.8 (CAPTURE FILES) documents every event.
"""
import ctypes
import json
import os
import platform
import socket
import time

from . import clock, ctf
from ..engine import native
from ..errors import UserError
from ..model.vocab import THREAD_ROW

# The capture format: 0 had no version and no vocabulary in its metadata;
# 1 stores both (env "format", env "vocab": the enums of model/vocab.py);
# 2 holds several targets: every event carries `target` (its slot; info
# "targets" names them) and call-stage events the op their thread ran;
# 3 samples the wall clock against the timestamps at the start and the end
# (event "clock": capture/clock.py), for captures of several hosts.
FORMAT = 3
# a thread's row of the snapshot (model/vocab.py: THREAD_ROW, from struct
# thread_state's running totals)
THREAD_FIELDS = tuple(name for name, _ in THREAD_ROW)
# a clock sample's figures (capture/clock.py), as the "clock" event has them
CLOCK_FIELDS = ("offset_ns", "read_ns", "esterror_ns", "maxerror_ns")
# struct dev_stats, member by member (tests/unit/test_abi.py)
DEV_FIELDS = ("count", "sum_ns", "bytes", "max_ns")
_CTF_TYPE = {"u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64",
             "s8": "s8", "s32": "s32", "s64": "s64"}


def bpf_event_names(abi):
    """The BPF programs' events, in enum ev_id order: EV_OP_DONE is
    "op_done", laid out as struct ev_op_done."""
    return [n[3:].lower() for n, v in sorted(abi.enum("ev_id").items(),
                                             key=lambda kv: kv[1])
            if not n.startswith("EV__")]


def event_context(abi):
    """struct ev_hdr after the CTF event header (id, timestamp)."""
    return [(m["name"], _CTF_TYPE[m["kind"]])
            for m in abi.struct("ev_hdr").members[2:]]


def _bpf_field(m, abi, vocab, role_names):
    """A member of an ev_* struct as a CTF field (osdstage.h's rules for
    the typedef names: ev_addr_t, ev_role_t, ev_ENUM_t)."""
    t = m["type"] or ""
    if t == "ev_addr_t":
        return (m["name"], "x64")
    if m["kind"] == "array" and not t.startswith("char["):
        # an array of integers: addresses (ev_addr_t) or bytes (__u8)
        elem, n = t[:-1].split("[")
        return (m["name"], "%s[%s]" % ("x64" if elem == "ev_addr_t" else
                                       elem.lstrip("_"), n))
    if m["kind"] == "array" and t.startswith("char["):
        return (m["name"], "char%d" % m["size"])     # fixed-size text
    if t == "ev_role_t":
        return (m["name"], _CTF_TYPE[m["kind"]], role_names)
    if t.startswith("ev_") and t.endswith("_t"):
        enum = t[3:-2]
        labels = vocab.stage_labels() if enum == "stage_id" else \
            abi.labels(enum)
        return (m["name"], _CTF_TYPE[m["kind"]], labels)
    return (m["name"], _CTF_TYPE[m["kind"]])


def event_classes(abi, vocab, role_names):
    """The capture's event classes, in id order: first the BPF programs'
    events, each the struct of probes/osdstage.h field by field (the
    recorder copies their bytes unchanged), then those user space writes."""
    role = ("role", "u8", role_names)
    bpf_events = [(name, [_bpf_field(m, abi, vocab, role_names)
                          for m in abi.struct("ev_" + name).members[1:]])
                  for name in bpf_event_names(abi)]
    states = vocab.states
    user_events = [
        ("thread", [("tid", "u32"), role, ("comm", "string")]),
        ("snap_thread", [("tid", "u32"), role, ("state", "u8", states)] +
         [(f, "x64" if f == "cv" else "u64") for f in THREAD_FIELDS]),
        ("snap_shard", [("cv", "x64")] +
         [(f, "u64") for f in vocab.shard_fields]),
        ("snap_dev", [("dev", "string")] + [(f, "u64") for f in DEV_FIELDS]),
        ("snap_counter", [("name", "string"), ("value", "u64")]),
        ("report", [("wall_ts", "string"), ("interval_s", "string"),
                    ("in_flight", "s64"), ("extra", "string")]),
        ("end", [("events", "u64"), ("lost", "u64"), ("reordered", "u64"),
                 ("reason", "string")]),
        # capture/clock.sample(), at the start and before the end
        ("clock", [(f, "s64" if f == "offset_ns" else "u64")
                   for f in CLOCK_FIELDS] + [("synced", "u8")]),
        # the cluster's names of pools and RBD images, JSON
        # (ceph/clusternames.py), when the host could read them
        ("names", [("names", "string")]),
        # --stacks: a file the target maps (its user stacks are unwound
        # from the files' own tables, -r), as /proc/PID/maps has it, and
        # the file's GNU build id ("": none read)
        ("mapping", [("start", "x64"), ("end", "x64"), ("offset", "x64"),
                     ("build_id", "string"), ("path", "string")]),
    ]
    return [ctf.EventClass("osdstage:" + n, f)
            for n, f in bpf_events + user_events]


class Recorder:
    """lib/native/recorder.c through ctypes: drains the "events" ring
    buffer into stream_cpuN files, from a C thread of its own once
    started (Python touches no event)."""

    STATS = ("events", "bytes", "packets", "reordered", "malformed")

    def __init__(self, bpf_dir, ring_map, path, uuid, packet_size):
        lib = native.load(bpf_dir)
        self.lib, self.path = lib, path
        self.h = lib.rec_open(ring_map.fd, path.encode(), uuid, packet_size)
        if not self.h:
            raise UserError("cannot record to %s: %s" % (
                path, os.strerror(ctypes.get_errno())))

    def _check(self, rc):
        if rc < 0:
            raise UserError("writing the capture %s failed: %s" % (
                self.path, os.strerror(-rc)))
        return rc

    def start(self, interval_us):
        """Drain every interval_us from the recorder's thread."""
        self._check(self.lib.rec_start(self.h, interval_us))

    def consume(self):
        """Drain now. -> events written since the last call."""
        return self._check(self.lib.rec_consume(self.h))

    def flush(self):
        self._check(self.lib.rec_flush(self.h))

    def halt(self):
        """Stop the drain thread: what follows drains and flushes last."""
        self.lib.rec_halt(self.h)

    def stats(self):
        out = (ctypes.c_uint64 * len(self.STATS))()
        self.lib.rec_stats(self.h, out)
        passes = (ctypes.c_uint64 * 2)()
        self.lib.rec_passes(self.h, passes)
        return dict(zip(self.STATS + ("passes", "busy_passes"),
                        tuple(out) + tuple(passes)))

    def close(self):
        if self.h:
            self.lib.rec_close(self.h)
            self.h = None


class CaptureWriter:
    """A capture in progress: metadata and stream_meta from here, the BPF
    events by the Recorder."""

    PACKET = 65536
    FLUSH_S = 1.0          # partial packets reach the disk this often
    # the recorder's thread drains the ring this often, sooner while it
    # fills fast: 100 wake-ups a second when idle
    DRAIN_US = 10000

    def __init__(self, path, tracer, info, call_bias_ns):
        """path: made ready by prepare(); call_bias_ns: the probe cost
        the run's call stages have subtracted (its RunInfo's: 0 without
        call stages)."""
        self.path = path
        self.tracer = tracer
        self.classes = event_classes(tracer.abi, tracer.vocab,
                                     tracer.roles.names)
        start = clock.sample()
        env = {"tool": "osdstage", "format": FORMAT,
               "vocab": json.dumps(tracer.vocab.enums, sort_keys=True),
               "hostname": socket.gethostname(),
               "kernel": platform.release(), "machine": platform.machine(),
               "pid": tracer.pid, "exe": tracer.exe_path,
               "roles": ",".join(tracer.roles.names),
               "worker_role": tracer.roles.names[tracer.roles.worker],
               "kernel_stages": int(tracer.kernel),
               "call_bias_ns": call_bias_ns,
               # the kernel's text address this boot: -r names kernel
               # frames only on the same boot (KASLR moves them)
               "kernel_stext": "0x%x" % kernel_stext()
               if getattr(tracer, "stacks_min_us", None) or
               getattr(tracer, "oncpu_hz", None) else "",
               # --on-cpu: the sampling clock's rate (Hz; "": none)
               "oncpu_hz": getattr(tracer, "oncpu_hz", None) or "",
               "clock_id": clock.clock_id(),
               "fake_clock_skew_ns": clock.fake_skew_ns(),
               "info": json.dumps(info, sort_keys=True)}
        self.ctf = ctf.Writer(path, self.classes, env=env,
                              clock_offset_ns=start["offset_ns"],
                              packet_size=self.PACKET, force=True,
                              event_context=event_context(tracer.abi),
                              stream="stream_meta",
                              whole_packets=False)
        self.rec = Recorder(tracer.bpf_dir, tracer.obj.map("events"), path,
                            self.ctf.uuid.bytes, self.PACKET)
        self.rec.start(self.DRAIN_US)
        self._last_flush = time.monotonic()
        self.seen_threads = set()
        self.named = False          # names() was called
        self.mapped = {}            # slot -> the mappings written
        self.lookup = None          # its owner's names source, if any
        self._clock(start)

    def _clock(self, smp):
        self._w("clock", smp["mono_ns"], self.tracer.gen,
                *([smp[f] for f in CLOCK_FIELDS] + [int(smp["synced"])]))

    def _w(self, name, ts, gen, *vals, target=0):
        self.ctf.write("osdstage:" + name, ts, *vals,
                       ctx=(0, gen, target))

    def poll(self):
        """Check the recorder (a write error raises) and drain the ring;
        push partial packets to the files every FLUSH_S (call often)."""
        n = self.rec.consume()
        if time.monotonic() - self._last_flush >= self.FLUSH_S:
            self.flush()
        return n

    def flush(self):
        self.rec.flush()
        self.ctf.flush()
        self._last_flush = time.monotonic()

    def threads(self, names, ts, slot=0):
        """Name target `slot`'s threads: {tid: comm} (new ones only)."""
        roles = self.tracer.roles
        for tid in sorted(names):
            if tid not in self.seen_threads:
                self.seen_threads.add(tid)
                self._w("thread", ts, self.tracer.gen, tid,
                        roles.classify(names[tid]), names[tid], target=slot)

    def snapshot(self, snap, rec, slot=0):
        """What the report of interval snap.gen on target `slot` used
        besides the histograms (those are rebuilt from the events)."""
        ts, g = snap.mono_ns, snap.gen
        shard_fields = self.tracer.vocab.shard_fields

        def w(name, *vals):
            self._w(name, ts, g, *vals, target=slot)
        for tid, t in snap.threads.items():
            w("snap_thread", tid, t["role"], t["state"],
              *[t[k] for k in THREAD_FIELDS])
        for cv, sh in snap.shards.items():
            w("snap_shard", cv, *[sh[k] for k in shard_fields])
        for dev, d in snap.devs.items():
            w("snap_dev", dev, *[d[k] for k in DEV_FIELDS])
        for name, v in snap.counters.items():
            w("snap_counter", name, v)
        if rec is not None:
            extra = {k: rec[k] for k in ("overhead", "throttles")
                     if k in rec}
            w("report", repr(rec["ts"]), repr(rec["interval_s"]),
              -1 if rec["in_flight"] is None else rec["in_flight"],
              json.dumps(extra))
        self.ctf.flush()

    def mappings(self, maps, build_id, slot=0):
        """The files target `slot` maps (--stacks: what -r unwinds its
        stacks with): `maps` (stacks/unwind.py's Mappings), the new ones
        written; build_id(path): a file's build id, or None."""
        seen = self.mapped.setdefault(slot, set())
        ts = time.monotonic_ns()
        ids = {}
        for m in maps:
            key = (m.start, m.end, m.offset, m.path)
            if key in seen:
                continue
            seen.add(key)
            if m.path not in ids:
                ids[m.path] = build_id(m.path)
            self._w("mapping", ts, self.tracer.gen, m.start, m.end,
                    m.offset, ids[m.path] or "", m.path, target=slot)

    def names(self, names):
        """The cluster's names (a line of ceph/clusternames.py's
        look-up), each time they are read."""
        self._w("names", time.monotonic_ns(), self.tracer.gen,
                json.dumps(names, sort_keys=True))
        self.named = True

    def close(self, reason, lost):
        """Drain, write the end marker, close. -> recorder stats"""
        self.rec.halt()             # then no pass can follow the flush
        self.rec.consume()
        self.rec.flush()
        st = self.rec.stats()
        self._clock(clock.sample())
        self._w("end", time.monotonic_ns(), self.tracer.gen, st["events"],
                lost, st["reordered"], reason)
        self.ctf.close()
        self.rec.close()
        return st


def kernel_stext():
    """The kernel's _stext address (/proc/kallsyms: root reads it), 0
    when not readable."""
    try:
        with open("/proc/kallsyms") as f:
            for line in f:
                if line.endswith(" _stext\n"):
                    return int(line.split()[0], 16)
    except (OSError, ValueError):
        pass
    return 0


def thread_names(pid):
    out = {}
    task = "/proc/%d/task" % pid
    try:
        tids = os.listdir(task)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(os.path.join(task, tid, "comm"), "rb") as f:
                out[int(tid)] = f.read().rstrip(b"\n").decode("utf-8",
                                                             "replace")
        except OSError:
            pass
    return out


def prepare(path, force):
    """Make `path` a new, empty capture directory (mode 0700) before
    anything is attached, or fail with one line. -> True if it was
    created (the caller removes it if recording never starts)."""
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise UserError("%s exists and is not a capture directory" % path)
        if not force:
            raise UserError("%s exists; pass --force to overwrite it" % path)
        odd = [f for f in os.listdir(path)
               if f != "metadata" and not f.startswith("stream")]
        if odd:
            raise UserError("%s is not a capture (it holds %s); not "
                            "overwriting it" % (path, odd[0]))
        try:
            for f in os.listdir(path):
                os.unlink(os.path.join(path, f))
        except OSError as e:
            raise UserError("cannot write %s: %s" % (path, e.strerror))
        return False
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError("cannot write %s: no directory %s" % (path, parent))
    try:
        os.mkdir(path, 0o700)
    except OSError as e:
        raise UserError("cannot write %s: %s" % (path, e.strerror))
    return True
