"""rbdrecord: record librbd client I/O for replay, and turn it into fio
jobs. The command-line logic behind tools/rbdrecord.py.

Modes:
  eBPF (default)  uprobes on librbd's C API in the client (-p PID, or
                  -- COMMAND which it starts): lib/cephlat/rbdtrace.py
  --lttng         Ceph's documented LTTng recipe, run for the user, with
                  checks of what it needs first
  --to-fio TRACE  fio iolog (version 3, with timestamps) + a job file for
                  fio's rbd engine, one job per image
  --summary TRACE per image: ops, bytes, sizes, hot zones, read/write mix
Traces of either mode are read with babeltrace2's Python bindings (bt2).
"""
import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from ..errors import UserError, run_cli
from .osdstage import positive_float
from ..ceph.target import require_root

TOOL = "rbdrecord"
EXIT_NO_TRACEPOINTS = 3

EXAMPLES = """examples:
  rbdrecord.py -o trace -- fio job.fio   # record fio's librbd I/O
  rbdrecord.py -o trace -p 4321 -d 60    # a running client, for 60 s
  babeltrace2 trace | head               # librbd:aio_write_enter ...
  rbdrecord.py --summary trace           # what the client did
  rbdrecord.py --to-fio trace -o replay  # replay/job.fio + iologs
  fio replay/job.fio                     # replay it (same pool and image)
  rbdrecord.py --to-fio trace -o replay --image img2  # onto another image
  rbdrecord.py --lttng -o lt -- rbd bench --io-type write img1  # LTTng
exit status: 0 ok, 1 error, 2 usage, 3 (--lttng) librbd here has no LTTng
tracepoints or the client does not enable them
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UserError("%s: %s (see --help)" % (TOOL, message), status=2)


def build_parser():
    p = _Parser(prog="rbdrecord.py",
                description="Record librbd client I/O (eBPF uprobes, or "
                            "LTTng) as a CTF trace\nwith librbd's tracepoint "
                            "names, summarize it, convert it to fio jobs.",
                epilog=EXAMPLES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    m = p.add_mutually_exclusive_group()
    m.add_argument("--lttng", action="store_true",
                   help="record with LTTng (librbd's own tracepoints; the "
                        "default when they are usable here)")
    m.add_argument("--ebpf", action="store_true",
                   help="record with eBPF uprobes (the default when librbd "
                        "has no usable tracepoints, as on Debian)")
    m.add_argument("--to-fio", metavar="TRACE",
                   help="convert TRACE to fio iologs and a job file in -o DIR")
    m.add_argument("--summary", metavar="TRACE",
                   help="per image: ops, bytes, sizes, hot zones, mix")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="trace directory to write (with --to-fio: the job "
                        "directory)")
    p.add_argument("--force", action="store_true",
                   help="overwrite an existing output directory")
    p.add_argument("-p", "--pid", type=int,
                   help="record this running librbd client")
    p.add_argument("-d", "--duration", type=positive_float, metavar="SECS",
                   help="stop after SECS (default: when COMMAND exits, or "
                        "Ctrl-C)")
    p.add_argument("--no-checks", action="store_true",
                   help="--lttng: record even when the checks fail (e.g. "
                        "tracepoints from a preloaded librbd_tp.so)")
    p.add_argument("--image", metavar="NAME",
                   help="--to-fio: replay onto this image (one image traces)")
    p.add_argument("--pool", metavar="NAME",
                   help="--to-fio: pool (default: the recorded one, else rbd)")
    p.add_argument("--client", default="admin", metavar="NAME",
                   help="--to-fio: cephx client name (default admin)")
    p.add_argument("--no-timing", action="store_true",
                   help="--to-fio: replay as fast as possible "
                        "(replay_no_stall)")
    p.add_argument("--zones", type=int, default=10, metavar="N",
                   help="--summary: offset zones of the heat-map (default 10)")
    p.add_argument("-j", "--json", action="store_true",
                   help="--summary as JSON")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="-- COMMAND [ARGS]: start it and record it")
    return p


def main(argv=None):
    def body():
        args = build_parser().parse_args(argv)
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        return run(args)
    return run_cli(TOOL, body)


def run(args, out=sys.stdout, err=sys.stderr):
    if args.summary:
        return summary(args, out)
    if args.to_fio:
        return to_fio(args, err)
    if not args.output:
        raise UserError("-o DIR is required to record")
    if bool(args.pid) == bool(args.command):
        raise UserError("record what? give -p PID or -- COMMAND")
    prepare_dir(args.output, args.force)
    if not args.lttng and not args.ebpf:
        # LTTng when librbd's tracepoints are usable, else eBPF
        args.lttng = not lttng_checks(args)
    if args.lttng:
        return record_lttng(args, err)
    return record_ebpf(args, err)


def prepare_dir(path, force):
    if os.path.exists(path):
        if not force:
            raise UserError("%s exists; pass --force to overwrite it" % path)
        if not os.path.isdir(path):
            raise UserError("%s exists and is not a directory" % path)
        shutil.rmtree(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError("cannot write %s: no directory %s" % (path, parent))


# --------------------------------------------------------------------------
# eBPF mode

class _Child:
    """COMMAND, started stopped (it waits on a pipe before exec) so the
    probes are in place before it loads librbd."""

    def __init__(self, argv):
        r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:                                # child
            try:
                os.close(w)
                os.read(r, 1)
                os.execvp(argv[0], argv)
            except OSError as e:
                os.write(2, ("%s: cannot run %s: %s\n" % (
                    TOOL, argv[0], e.strerror)).encode())
            os._exit(127)
        os.close(r)
        self.go_fd = w
        self.status = None

    def go(self):
        os.write(self.go_fd, b"x")
        os.close(self.go_fd)

    def poll(self):
        """Its exit status once it has exited, else None."""
        if self.status is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
        return self.status

    def kill(self):
        if self.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            os.waitpid(self.pid, 0)


def record_ebpf(args, err):
    from ..rbd.trace import EbpfRecorder, find_libraries
    from ..engine.tracer import default_bpf_dir
    from ..ceph.target import require_btf
    require_root(TOOL)
    require_btf()
    child = None
    if args.pid:
        if not os.path.exists("/proc/%d" % args.pid):
            raise UserError("no such process: %d" % args.pid)
        libs = find_libraries(args.pid)
        if "librbd" not in libs:
            raise UserError("process %d has no librbd loaded (is it a librbd "
                            "client? an rbd-nbd/qemu/fio process)" % args.pid)
        pid = args.pid
        with open("/proc/%d/comm" % pid) as f:
            comm = f.read().strip()
    else:
        libs = find_libraries()
        if "librbd" not in libs:
            raise UserError("librbd is not installed here (package librbd1)")
        child = _Child(args.command)
        pid, comm = child.pid, os.path.basename(args.command[0])
    rec = EbpfRecorder(pid, args.output, libs, default_bpf_dir(), comm)
    stopping = []
    old = {s: signal.signal(s, lambda n, f: stopping.append(n))
           for s in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        try:
            rec.start()
        except BaseException:
            if child:
                child.kill()
                child.go()
            raise
        err.write("Recording librbd I/O of %s %d (eBPF) to %s... %s\n" % (
            comm, pid, args.output, "Hit Ctrl-C to end." if not child
            else "until it exits."))
        err.flush()
        if child:
            child.go()
        deadline = time.monotonic() + args.duration if args.duration \
            else None
        while not stopping:
            rec.poll()
            if child:
                code = child.poll()
                if code is not None:
                    status = code
                    break
            elif not os.path.exists("/proc/%d" % pid):
                break
            if deadline and time.monotonic() >= deadline:
                break
            time.sleep(rec.POLL_S)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if child and child.poll() is None and stopping:
            child.kill()
    counts, lost, reordered = rec.stop()
    report_counts(err, args.output, counts, lost[0], reordered)
    if status:
        err.write("%s: %s exited with status %d\n" % (TOOL, comm, status))
    return 0


def report_counts(err, path, counts, lost, reordered=0):
    total = sum(counts.values())
    err.write("%s: wrote %s: %d events%s%s\n" % (
        TOOL, path, total, ", none lost" if not lost else
        "; %d LOST (ring buffer full)" % lost,
        "; %d reordered" % reordered if reordered else ""))
    for name, n in sorted(counts.items()):
        if name.endswith("_enter") or name.startswith("rbdrecord:"):
            err.write("  %-36s %d\n" % (name, n))


# --------------------------------------------------------------------------
# LTTng mode

def lttng_checks(args):
    """What the LTTng recipe needs and this host lacks: [(problem, fix)]."""
    probs = []
    if not shutil.which("lttng"):
        probs.append(("lttng is not installed", "apt-get install "
                      "lttng-tools"))
    from ..rbd.trace import find_libraries
    libs = find_libraries(args.pid) if args.pid else find_libraries()
    librbd = libs.get("librbd")
    tp = None
    if librbd:
        d = os.path.dirname(librbd)
        for name in ("librbd_tp.so", "librbd_tp.so.1"):
            if os.path.exists(os.path.join(d, name)):
                tp = os.path.join(d, name)
    if not librbd:
        probs.append(("librbd is not installed", "apt-get install librbd1"))
    elif tp is None:
        probs.append(("librbd on this host has no LTTng tracepoints (no "
                      "librbd_tp.so next to %s: built without LTTng, as "
                      "Debian's is)" % librbd,
                      "install Ceph's upstream packages, or record with "
                      "eBPF (rbdrecord.py without --lttng)"))
    conf = os.environ.get("CEPH_CONF", "/etc/ceph/ceph.conf")
    if tp and not _conf_true(conf, "rbd_tracing"):
        probs.append(("rbd_tracing is not enabled for the client (%s)" % conf,
                      "add 'rbd tracing = true' to its [client] section"))
    return probs


def _conf_true(path, key):
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition("=")
                if k.strip().replace(" ", "_") == key:
                    return v.strip().lower() in ("true", "1", "yes")
    except OSError:
        pass
    return False


def _lttng(*argv, check=True):
    p = subprocess.run(["lttng"] + list(argv), capture_output=True,
                       text=True)
    if check and p.returncode:
        raise UserError("lttng %s failed: %s" % (
            " ".join(argv), (p.stderr or p.stdout).strip().splitlines()[-1]
            if (p.stderr or p.stdout).strip() else "exit %d" % p.returncode))
    return p


def record_lttng(args, err):
    require_root(TOOL)
    probs = lttng_checks(args)
    if probs and not shutil.which("lttng"):
        raise UserError("%s; fix: %s" % probs[0])
    session = "rbdrecord-%d" % os.getpid()
    started_sessiond = None
    if subprocess.run(["pgrep", "-x", "lttng-sessiond"],
                      capture_output=True).returncode:
        started_sessiond = subprocess.run(
            ["lttng-sessiond", "--daemonize"], capture_output=True, text=True)
        if started_sessiond.returncode:
            raise UserError("cannot start lttng-sessiond: %s" %
                            started_sessiond.stderr.strip())
    created = False
    try:
        _lttng("create", session, "--output=" + os.path.abspath(args.output))
        created = True
        _lttng("enable-event", "--userspace", "librbd:*", "-s", session)
        _lttng("add-context", "--userspace", "-t", "pthread_id", "-t", "vpid",
               "-t", "procname", "-s", session)
        err.write("LTTng session %s: event rule librbd:*, contexts "
                  "pthread_id, vpid, procname\n" % session)
        if probs and not args.no_checks:
            for what, fix in probs:
                err.write("%s: %s; fix: %s\n" % (TOOL, what, fix))
            err.write("%s: nothing would be recorded: session %s destroyed\n"
                      % (TOOL, session))
            return EXIT_NO_TRACEPOINTS
        _lttng("start", session)
        _run_for(args)
        _lttng("stop", session)
    finally:
        if created:
            _lttng("destroy", session, check=False)
        if started_sessiond is not None:
            _stop_sessiond()
        if os.path.isdir(args.output) and not os.listdir(args.output):
            os.rmdir(args.output)       # nothing was recorded
    counts = None
    if os.path.isdir(args.output):
        try:
            counts = trace_counts(args.output)
        except RuntimeError:          # bt2: no trace in the directory
            pass
    if not counts:
        err.write("%s: LTTng recorded nothing (no librbd client with "
                  "tracepoints ran)\n" % TOOL)
        return 0
    report_counts(err, args.output, counts, 0)
    return 0


def _stop_sessiond(timeout=10):
    """Stop the lttng-sessiond we started (and its consumer daemons)."""
    subprocess.run(["pkill", "-x", "lttng-sessiond"], capture_output=True)
    end = time.monotonic() + timeout
    while time.monotonic() < end and subprocess.run(
            ["pgrep", "-x", "lttng-sessiond"], capture_output=True
    ).returncode == 0:
        time.sleep(0.1)


def _run_for(args):
    """Until COMMAND exits (or -d), or while process -p lives (or -d)."""
    if args.command:
        p = subprocess.Popen(args.command)
        try:
            p.wait(args.duration)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            p.terminate()
            p.wait()
    else:
        end = time.monotonic() + (args.duration or 1e12)
        try:
            while time.monotonic() < end and os.path.exists(
                    "/proc/%d" % args.pid):
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass


# --------------------------------------------------------------------------
# reading traces (either mode) with bt2

class Request:
    __slots__ = ("op", "image", "off", "len", "tid", "submit", "done",
                 "rval")

    def __init__(self, op, image, off, length, tid, submit):
        self.op, self.image, self.off, self.len = op, image, off, length
        self.tid, self.submit = tid, submit
        self.done = self.rval = None


# event name -> (op, offset field, length field)
REQUESTS = {
    "librbd:aio_read_enter": ("read", "offset", "length"),
    "librbd:aio_read2_enter": ("read", "offset", "length"),
    "librbd:aio_write_enter": ("write", "off", "len"),
    "librbd:aio_write2_enter": ("write", "off", "len"),
    "librbd:aio_discard_enter": ("discard", "off", "len"),
    "librbd:aio_flush_enter": ("flush", None, None),
    "librbd:aio_writesame_enter": ("writesame", "off", "len"),
    "rbdrecord:aio_write_zeroes_enter": ("write_zeroes", "off", "len"),
}


class RbdTrace:
    """Images and requests of a librbd trace (eBPF or LTTng)."""

    def __init__(self, path):
        bt2 = _bt2()
        check_ctf(path)
        self.path = path
        self.images = {}        # imagectx -> {"name", "snap", "pool", "ro"}
        self.requests = []
        self.unmatched = 0
        pending = {}
        try:
            it = bt2.TraceCollectionMessageIterator(path)
            for msg in it:
                if type(msg) is not bt2._EventMessageConst:
                    continue
                self._event(msg, pending)
        except Exception as e:          # bt2 raises its own error types
            if isinstance(e, UserError):
                raise
            first = str(e).strip().splitlines()
            raise UserError("cannot read %s as a CTF trace: %s" % (
                path, first[0] if first else type(e).__name__))
        self.incomplete = len(pending)
        if not self.requests and not self.images:
            raise UserError("%s holds no librbd events" % path)

    def _event(self, msg, pending):
        ev = msg.event
        name = ev.name
        ts = msg.default_clock_snapshot.ns_from_origin
        f = ev.payload_field
        if name == "librbd:open_image_enter":
            self.images.setdefault(int(f["imagectx"]), {}).update(
                name=str(f["name"]), snap=str(f["snap_name"]),
                ro=int(f["read_only"]))
        elif name == "rbdrecord:image_pool":
            self.images.setdefault(int(f["imagectx"]), {})["pool"] = \
                str(f["pool"])
        elif name in REQUESTS:
            op, fo, fl = REQUESTS[name]
            ictx = int(f["imagectx"])
            img = self.images.setdefault(ictx, {})
            img.setdefault("name", str(f["name"]))
            ctx = ev.common_context_field
            tid = int(ctx["pthread_id"]) if ctx is not None and \
                "pthread_id" in ctx else 0
            r = Request(op, ictx, int(f[fo]) if fo else 0,
                        int(f[fl]) if fl else 0, tid, ts)
            pending[int(f["completion"])] = r
        elif name == "librbd:aio_complete_enter":
            r = pending.pop(int(f["completion"]), None)
            if r is None:
                self.unmatched += 1
                return
            r.done, r.rval = ts, int(f["rval"])
            self.requests.append(r)

    def by_image(self):
        out = collections.OrderedDict()
        for r in sorted(self.requests, key=lambda r: r.submit):
            out.setdefault(r.image, []).append(r)
        return out

    def image_name(self, ictx):
        return self.images.get(ictx, {}).get("name") or "image-%x" % ictx


def _bt2():
    """babeltrace2's Python bindings (Debian's python3-bt2)."""
    try:
        import bt2
    except ImportError:
        raise UserError("python3-bt2 is missing (make setup)")
    return bt2


METADATA_MAGIC = b"\x57\x1d\xd1\x75"    # packetized metadata (LTTng)


def check_ctf(path):
    """Fail with one line unless `path` holds CTF traces: babeltrace2's
    Python bindings abort the process on some foreign files."""
    if not os.path.isdir(path):
        raise UserError("cannot read %s: not a trace directory" % path)
    found = False
    for root, _, files in os.walk(path):
        if "metadata" not in files:
            continue
        try:
            with open(os.path.join(root, "metadata"), "rb") as f:
                head = f.read(16)
        except OSError as e:
            raise UserError("cannot read %s: %s" % (path, e.strerror))
        if not (head.startswith(b"/* CTF 1.8") or
                head.startswith(METADATA_MAGIC)):
            raise UserError("cannot read %s: %s is not CTF metadata" % (
                path, os.path.join(root, "metadata")))
        found = True
    if not found:
        raise UserError("cannot read %s: no CTF trace in it" % path)


def trace_counts(path):
    """Events per name, as babeltrace2 sees them."""
    bt2 = _bt2()
    counts = collections.Counter()
    for msg in bt2.TraceCollectionMessageIterator(path):
        if type(msg) is bt2._EventMessageConst:
            counts[msg.event.name] += 1
    return counts


# --------------------------------------------------------------------------
# summary

def _pow2_bucket(n):
    b = 512
    while b < n:
        b *= 2
    return b


def image_summary(reqs, zones):
    ops, nbytes, sizes = collections.Counter(), collections.Counter(), \
        collections.Counter()
    lat = collections.defaultdict(list)
    end = max((r.off + r.len for r in reqs), default=0)
    zsize = max(1, -(-end // zones)) if end else 1
    heat = [{"reads": 0, "writes": 0, "bytes": 0} for _ in range(zones)]
    for r in reqs:
        ops[r.op] += 1
        nbytes[r.op] += r.len
        lat[r.op].append(r.done - r.submit)
        if r.len:
            sizes[_pow2_bucket(r.len)] += 1
            z = min(zones - 1, r.off // zsize)
            heat[z]["reads" if r.op == "read" else "writes"] += 1
            heat[z]["bytes"] += r.len
    reads = ops["read"]
    writes = sum(v for k, v in ops.items() if k != "read" and k != "flush")
    return {
        "ops": dict(ops), "bytes": dict(nbytes),
        "sizes": {str(k): v for k, v in sorted(sizes.items())},
        "zone_bytes": zsize,
        "zones": [dict(h, start=i * zsize) for i, h in enumerate(heat)],
        "read_pct": round(100.0 * reads / max(1, reads + writes), 1),
        "read_bytes_pct": round(100.0 * nbytes["read"] / max(
            1, sum(v for k, v in nbytes.items())), 1),
        "latency_us_mean": {k: round(sum(v) / len(v) / 1000, 1)
                            for k, v in lat.items()},
        "span_s": round((reqs[-1].done - reqs[0].submit) / 1e9, 3)
        if reqs else 0.0,
    }


def summary(args, out):
    tr = RbdTrace(args.summary)
    res = {"trace": args.summary, "images": {}, "incomplete": tr.incomplete,
           "unmatched_completions": tr.unmatched}
    for ictx, reqs in tr.by_image().items():
        img = tr.images.get(ictx, {})
        s = image_summary(reqs, args.zones)
        s["pool"] = img.get("pool")
        res["images"][tr.image_name(ictx)] = s
    if args.json:
        out.write(json.dumps(res) + "\n")
        return 0
    for name, s in res["images"].items():
        out.write("image %s%s: %d ops in %.1f s, reads %.0f %% of ops, "
                  "%.0f %% of bytes\n" % (
                      name, " (pool %s)" % s["pool"] if s["pool"] else "",
                      sum(s["ops"].values()), s["span_s"], s["read_pct"],
                      s["read_bytes_pct"]))
        out.write("  %-13s %9s %14s %12s\n" % ("OP", "COUNT", "BYTES",
                                              "MEAN_LAT_US"))
        for op, n in sorted(s["ops"].items()):
            out.write("  %-13s %9d %14d %12.1f\n" % (
                op, n, s["bytes"].get(op, 0), s["latency_us_mean"][op]))
        out.write("  sizes: %s\n" % ", ".join(
            "<=%s: %d" % (_human(int(k)), v) for k, v in s["sizes"].items()))
        out.write("  zones of %s (reads / writes, bytes):\n" %
                  _human(s["zone_bytes"]))
        top = max((z["bytes"] for z in s["zones"]), default=0) or 1
        for z in s["zones"]:
            out.write("  %10s %7d / %-7d %s\n" % (
                _human(z["start"]), z["reads"], z["writes"],
                "#" * round(40 * z["bytes"] / top)))
    if tr.incomplete or tr.unmatched:
        out.write("(%d requests never completed, %d completions without "
                  "their request)\n" % (tr.incomplete, tr.unmatched))
    return 0


def _human(n):
    for unit in ("", "K", "M", "G", "T"):
        if n < 1024 or unit == "T":
            return "%d%s" % (n, unit) if n == int(n) else "%.1f%s" % (n, unit)
        n /= 1024.0


# --------------------------------------------------------------------------
# fio

FIO_ACTION = {"read": "read", "write": "write", "writesame": "write",
              "write_zeroes": "write", "discard": "trim", "flush": "sync"}


def to_fio(args, err):
    if not args.output:
        raise UserError("--to-fio needs -o DIR for the job")
    tr = RbdTrace(args.to_fio)
    images = tr.by_image()
    if not images:
        raise UserError("%s has no completed requests" % args.to_fio)
    if args.image and len(images) > 1:
        raise UserError("--image: the trace has %d images" % len(images))
    prepare_dir(args.output, args.force)
    os.makedirs(args.output, mode=0o755)
    t0 = min(reqs[0].submit for reqs in images.values())
    job = ["# fio job replaying %s (made by rbdrecord.py --to-fio)" %
           os.path.abspath(args.to_fio),
           "# one job per image; iologs (version 3) keep order, offsets, "
           "sizes and timing",
           "[global]", "ioengine=rbd", "clientname=%s" % args.client,
           "thread"]
    if args.no_timing:
        job.append("replay_no_stall=1")
    used = set()
    for ictx, reqs in images.items():
        img = tr.images.get(ictx, {})
        name = args.image or tr.image_name(ictx)
        pool = args.pool or img.get("pool") or "rbd"
        label = _label(name, used)
        log = label + ".iolog"
        depth = _max_in_flight(reqs)
        lines = ["fio version 3 iolog", "0 rbd add", "0 rbd open"]
        for r in reqs:
            act = FIO_ACTION[r.op]
            ts = (r.submit - t0) // 1000
            if act == "sync":
                lines.append("%d rbd sync 0 0" % ts)
            else:
                lines.append("%d rbd %s %d %d" % (ts, act, r.off, r.len))
        lines.append("%d rbd close" % ((reqs[-1].done - t0) // 1000))
        with open(os.path.join(args.output, log), "w") as f:
            f.write("\n".join(lines) + "\n")
        job += ["", "[%s]" % label, "pool=%s" % pool, "rbdname=%s" % name,
                "read_iolog=%s" % os.path.join(os.path.abspath(args.output),
                                               log),
                "iodepth=%d" % depth]
        err.write("%s: %s: %d requests, iodepth %d (most in flight), "
                  "pool %s\n" % (TOOL, log, len(reqs), depth, pool))
    with open(os.path.join(args.output, "job.fio"), "w") as f:
        f.write("\n".join(job) + "\n")
    err.write("%s: run it with: fio %s\n" % (
        TOOL, os.path.join(args.output, "job.fio")))
    return 0


def _label(name, used):
    base = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    label, i = base, 1
    while label in used:
        i += 1
        label = "%s-%d" % (base, i)
    used.add(label)
    return label


def _max_in_flight(reqs):
    edges = sorted([(r.submit, 1) for r in reqs] + [(r.done, -1)
                                                   for r in reqs],
                   key=lambda e: (e[0], e[1]))
    cur = best = 0
    for _, d in edges:
        cur += d
        best = max(best, cur)
    return max(1, best)
