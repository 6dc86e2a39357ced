"""The positional arguments of probes/osdstages.bt for one ceph-osd: the
bpftrace script names no function itself, so that it attaches to every
release the probe table knows, in a container or not.

  $1       the binary, as bpftrace can open it (/proc/PID/root/...)
  $2       what it is, for the banner ("ceph-18.2.7,table-18.2": one word)
  $3-$9    entry points: enqueue_op, dequeue_op, do_op, get_object_context,
           bluestore_read, bluestore_submit, log_op_stats
  $10-$14  the same functions for the return probes of dequeue_op, do_op,
           get_object_context, bluestore_read, bluestore_submit
ENTRIES and RETURNS are that order; the comment above each of the
script's probes names its role, and tests/unit/test_btargs.py holds the
two together. All are function start addresses: Debian's bpftrace (0.17,
built without its probe-offset support) refuses a probe anywhere else, so
on a CET build it cannot skip endbr64 as osdstage.py does, and every hit
pays the kernel's single-step of it (docs/ceph.md, CET).
"""
import os

from ..ceph import probetable
from .plan import resolve

ENTRIES = ["enqueue_op", "dequeue_op", "do_op", "get_object_context",
           "bluestore_read", "bluestore_submit", "log_op_stats"]
RETURNS = ["dequeue_op", "do_op", "get_object_context", "bluestore_read",
           "bluestore_submit"]


def bt_args(binary, elf, choice):
    """[str] for `bpftrace probes/osdstages.bt ARGS...`"""
    plan = resolve(elf, choice.release, list(probetable.STAGES))
    missing = [r for r in ENTRIES if r not in plan.symbols]
    if missing:
        from ..errors import UserError
        raise UserError("cannot write osdstages.bt's arguments: %s" %
                        next(iter(plan.unavailable.values())))
    syms = plan.symbols
    return ([binary, "ceph-%s,table-%s" % (choice.version,
                                         choice.release.key)]
            + ["0x%x" % syms[r].addr for r in ENTRIES]
            + ["0x%x" % syms[r].addr for r in RETURNS])


def binary_of(pid):
    """The target's executable as a path bpftrace can open from here."""
    exe = os.readlink("/proc/%d/exe" % pid).replace(" (deleted)", "")
    return "/proc/%d/root%s" % (pid, exe)
