"""The op scheduler an OSD runs and its settings, read once from the OSD's
admin socket.

WPQ (`osd_op_queue = wpq`, Pacific's default) never holds a queued op.
mClock (`mclock_scheduler`, the default from 17.2) gives each op class a
reservation, a weight and a limit, as shares of the OSD's capacity
(`osd_mclock_max_capacity_iops_hdd|ssd`), and a shard worker then sleeps
with ops queued until the time the scheduler gives: a hold, by design.
The report names the scheduler, and a verdict of held ops names the limit,
the capacity and where the capacity came from.
"""
import os

from ..errors import UserError
from . import adminsock

# the classes as Ceph's settings name them, in report order
CLASSES = ("client", "background_recovery", "background_best_effort")
MCLOCK = "mclock_scheduler"


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _rotational(devices):
    """1 rotational, 0 not, None unknown: what BlueStore itself reads, the
    block device's queue/rotational in sysfs (one kernel: the host's)."""
    for d in devices:
        name = os.path.basename(str(d.get("device", "")))
        if not name:
            continue
        for path in ("/sys/class/block/%s/queue/rotational" % name,
                     "/sys/class/block/%s/../queue/rotational" % name):
            try:
                with open(path) as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                continue
    return None


def from_config(diff, queue, rotational):
    """The scheduler's description from the OSD's `config diff` ({name:
    {"default": .., "final": .., source: ..}}), its osd_op_queue and
    whether its device is rotational -> dict (see read)."""
    out = {"queue": queue, "mclock": queue == MCLOCK}
    if not out["mclock"]:
        return out

    def setting(name):
        d = diff.get(name) or {}
        return d.get("final", d.get("default"))

    def source(name):
        d = diff.get(name) or {}
        srcs = [k for k in d if k not in ("default", "final")]
        return srcs[-1] if srcs else "default"
    out["profile"] = setting("osd_mclock_profile")
    out["classes"] = {}
    for c in CLASSES:
        out["classes"][c] = {
            k: _num(setting("osd_mclock_scheduler_%s_%s" % (c, k)))
            for k in ("res", "wgt", "lim")}
    kind = {1: "hdd", 0: "ssd"}.get(rotational)
    out["device"] = kind
    if kind:
        name = "osd_mclock_max_capacity_iops_" + kind
        out["capacity_setting"] = name
        out["capacity_iops"] = _num(setting(name))
        out["capacity_source"] = source(name)
    return out


def read(pid, osd_id=None):
    """The scheduler of ceph-osd `pid` -> dict: queue ("wpq",
    "mclock_scheduler", ...), mclock (bool) and, for mClock: profile,
    classes {class: {res, wgt, lim}} (shares of the capacity; lim 0: no
    limit), device ("hdd"/"ssd"/None), capacity_setting, capacity_iops,
    capacity_source ("default": the default for the device class; "mon":
    the monitors' config, where the start-up benchmark stores its result
    as osd.N; "file", "override", ...). None when the OSD's admin socket
    does not answer (a process that is not an OSD)."""
    path = adminsock.find_osd_socket(pid, osd_id)
    if not path:
        return None
    try:
        queue = adminsock.command(path, "config get", var="osd_op_queue",
                                  timeout=5.0).get("osd_op_queue")
        if queue != MCLOCK:
            return from_config({}, queue, None)
        diff = adminsock.command(path, "config diff", timeout=5.0)
        devices = adminsock.command(path, "list_devices", timeout=5.0)
    except (UserError, ValueError, AttributeError):
        return None
    d = dict(diff.get("diff", {}))
    rotational = _rotational(devices if isinstance(devices, list) else [])
    kind = {1: "hdd", 0: "ssd"}.get(rotational)
    names = ["osd_mclock_profile"]
    if kind:
        names.append("osd_mclock_max_capacity_iops_%s" % kind)
    for name in names:
        if name in d:
            continue
        # at its default: `config diff` leaves it out
        try:
            d[name] = {"default": adminsock.command(
                path, "config get", var=name, timeout=5.0).get(name)}
        except (UserError, ValueError, AttributeError):
            pass
    return from_config(d, queue, rotational)
