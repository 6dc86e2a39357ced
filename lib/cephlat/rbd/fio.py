"""--to-fio: a trace as fio iologs (version 3: issue time, action, offset,
length, in issue order) and a job for fio's rbd engine, one job per
image."""
import os

from . import TOOL, outdir
from .reader import RbdTrace
from ..errors import UserError

FIO_ACTION = {"read": "read", "write": "write", "writesame": "write",
              "write_zeroes": "write", "discard": "trim", "flush": "sync"}


def to_fio(args, err):
    """args: to_fio (the trace), output, force, image, pool, client,
    no_timing. -> exit status"""
    if not args.output:
        raise UserError("--to-fio needs -o DIR for the job")
    tr = RbdTrace(args.to_fio)
    images = tr.by_image()
    if not images:
        raise UserError("%s has no completed requests" % args.to_fio)
    if args.image and len(images) > 1:
        raise UserError("--image: the trace has %d images" % len(images))
    outdir.prepare(args.output, args.force, kind="job")
    os.makedirs(args.output, mode=0o755)
    t0 = min(reqs[0].submit for reqs in images.values())
    job = ["# fio job replaying %s %s" % (os.path.abspath(args.to_fio),
                                         outdir.JOB_MARK),
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
        with open(os.path.join(args.output, log), "w") as f:
            f.write("\n".join(iolog(reqs, t0)) + "\n")
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


def iolog(reqs, t0):
    """One image's requests as the lines of a fio version 3 iolog."""
    lines = ["fio version 3 iolog", "0 rbd add", "0 rbd open"]
    for r in reqs:
        act = FIO_ACTION[r.op]
        ts = (r.submit - t0) // 1000
        if act == "sync":
            lines.append("%d rbd sync 0 0" % ts)
        else:
            lines.append("%d rbd %s %d %d" % (ts, act, r.off, r.len))
    lines.append("%d rbd close" % ((reqs[-1].done - t0) // 1000))
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
