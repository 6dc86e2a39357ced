"""--to-fio: a trace as fio iologs (version 3: issue time, action, offset,
length, in issue order) and a job for fio's rbd engine.

fio 3.33 (Debian bookworm) with its rbd engine and librbd 16.2 has crashed
replaying such an iolog at iodepth 8 (glibc "corrupted double-linked
list", SIGSEGV in malloc under rados_shutdown: its heap was corrupted
earlier), never at iodepth 1; the same iologs replay cleanly on files with
libaio, io_uring, psync, posixaio and null. So every replay job runs at
iodepth 1: a recorded thread's requests are dealt into
lanes, each lane holding requests that never overlapped in time (as many
lanes as that thread had requests in flight at most), one fio job per
lane. All iologs share one clock, so the lanes together issue every
request at its recorded time, with the recorded concurrency."""
import collections
import heapq
import os
from dataclasses import dataclass

from . import TOOL, outdir
from .reader import RbdTrace
from ..errors import UsageError, UserError

# each lane is a librbd client of its own: onto an image with
# exclusive-lock their writes pass the lock back and forth (a lab's replay
# of 3000 requests in 8 lanes: 11.5 s onto such an image, 1.3 s without)
LOCK_NOTE = ("%s: the %d lanes each open the image: replay onto an image "
             "without exclusive-lock, or they pass its lock back and forth "
             "and fall behind the recorded times (rbd create --image-feature "
             "layering, or rbd feature disable %s/%s fast-diff object-map "
             "exclusive-lock)\n")
FIO_ACTION = {"read": "read", "write": "write", "writesame": "write",
              "write_zeroes": "write", "discard": "trim", "flush": "sync"}


@dataclass(frozen=True)
class FioJob:
    """The trace directory `trace` as a fio job: its iologs and job.fio
    go to the directory `output` (one rbdrecord wrote is replaced only
    with `force`); fio runs as cephx client `client`, onto `image` in
    `pool` (None: the recorded image; the recorded pool, else rbd), as
    fast as it can with `no_timing` (replay_no_stall)."""
    trace: str
    output: str
    client: str
    force: bool = False
    image: str = None
    pool: str = None
    no_timing: bool = False


def to_fio(job, err):
    """Write `job` (a FioJob). -> exit status"""
    if not job.output:
        raise UsageError("--to-fio needs -o DIR for the job")
    tr = RbdTrace(job.trace)
    images = tr.by_image()
    if not images:
        raise UserError("%s has no completed requests" % job.trace)
    if job.image and len(images) > 1:
        raise UsageError("--image replays one image's requests: the trace "
                         "has %d images" % len(images))
    outdir.prepare(job.output, job.force, kind="job")
    os.makedirs(job.output, mode=0o755)
    t0 = min(reqs[0].submit for reqs in images.values())
    text = ["# fio job replaying %s %s" % (os.path.abspath(job.trace),
                                          outdir.JOB_MARK),
            "# one job per lane (requests of one recorded thread that never "
            "overlapped),",
            "# iodepth 1 each (fio 3.33's rbd engine crashes replaying at "
            "iodepth > 1);",
            "# iologs (version 3, one clock) keep order, offsets, sizes, "
            "timing;",
            "# each lane is a client of its own: replay onto an image "
            "without exclusive-lock",
            "[global]", "ioengine=rbd", "clientname=%s" % job.client,
            "thread"]
    if job.no_timing:
        text.append("replay_no_stall=1")
    used = set()
    for ictx, reqs in images.items():
        img = tr.images.get(ictx, {})
        name = job.image or tr.image_name(ictx)
        pool = job.pool or img.get("pool") or "rbd"
        base = _label(name, used)
        threads = collections.OrderedDict()
        for r in reqs:
            threads.setdefault(r.tid, []).append(r)
        nlanes = 0
        for ti, treqs in enumerate(threads.values()):
            for li, lane in enumerate(lanes(treqs)):
                label = _label("%s.t%d.%d" % (base, ti, li), used)
                log = label + ".iolog"
                with open(os.path.join(job.output, log), "w") as f:
                    f.write("\n".join(iolog(lane, t0)) + "\n")
                text += ["", "[%s]" % label, "pool=%s" % pool,
                         "rbdname=%s" % name,
                         "read_iolog=%s" % os.path.join(
                             os.path.abspath(job.output), log),
                         "iodepth=1"]
                nlanes += 1
        err.write("%s: %s: %d requests, %d thread%s, %d lane%s (most in "
                  "flight %d), pool %s\n" % (
                      TOOL, name, len(reqs), len(threads),
                      "" if len(threads) == 1 else "s", nlanes,
                      "" if nlanes == 1 else "s", _max_in_flight(reqs),
                      pool))
        if nlanes > 1:
            err.write(LOCK_NOTE % (TOOL, nlanes, pool, name))
    with open(os.path.join(job.output, "job.fio"), "w") as f:
        f.write("\n".join(text) + "\n")
    err.write("%s: run it with: fio %s\n" % (
        TOOL, os.path.join(job.output, "job.fio")))
    return 0


def lanes(reqs):
    """Requests (in issue order) dealt into the fewest lanes whose
    requests never overlap: each goes to the lane that has been free the
    longest (one whose last request completed before it was issued), else
    to a new lane. As many lanes as requests were in flight at most."""
    free, out = [], []            # heap of (done, lane index)
    for r in reqs:
        if free and free[0][0] <= r.submit:
            _, i = heapq.heappop(free)
        else:
            i = len(out)
            out.append([])
        out[i].append(r)
        heapq.heappush(free, (r.done, i))
    return out


def iolog(reqs, t0):
    """Requests as the lines of a fio version 3 iolog, times in us from
    t0, plus 1: fio 3.33 does not wait before a timed line that follows a
    time of 0, and every lane must keep its clock from its first line."""
    lines = ["fio version 3 iolog", "1 rbd add", "1 rbd open"]
    for r in reqs:
        act = FIO_ACTION[r.op]
        ts = (r.submit - t0) // 1000 + 1
        if act == "sync":
            lines.append("%d rbd sync 0 0" % ts)
        else:
            lines.append("%d rbd %s %d %d" % (ts, act, r.off, r.len))
    lines.append("%d rbd close" % ((reqs[-1].done - t0) // 1000 + 1))
    return lines


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
