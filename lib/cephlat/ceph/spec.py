"""Probe specs: trace any producer/consumer program, not only ceph-osd.

A spec is a small JSON file naming the function that queues an item, the
one that takes it off the queue (and optionally the one that completes
it), which argument holds the item's key, and the worker threads' name:

  {
    "name": "shardq",
    "enqueue": {"function": "sim::enqueue", "key_arg": 2},
    "dequeue": {"function": "sim::dequeue", "key_arg": 1},
    "done":    {"function": "sim::finish", "key_arg": 1},
    "workers": "shardq-w",
    "roles":   {"shardq-hog": "hog"},
    "scheduler": "mclock",
    "reqid_offset": 56
  }

Without "enqueue" and "dequeue" only the kernel stages of the process are
traced (its threads named by "workers" and "roles"). `-S
queue_wait,dequeue_op` times the dequeue function too (its return probed):
a worker's sleep inside it is then work on an item, not idleness.

function: the demangled qualified name; "params" (optional) a regular
expression the demangled parameter list must match. key_arg counts
arguments from 1 (`this` is 1 for a member function); "deref": true when
the argument points at a smart pointer holding the key. workers: the
thread-name prefix of the queue's workers; roles: more prefixes to name;
scheduler (optional): "wpq" (the default: a worker never waits with items
queued on purpose) or "mclock" (a worker's idle timed wait on a condition
variable is the scheduler holding queued items until a time it gave).
reqid_offset (optional): the item holds a Ceph request id (osd_reqid_t:
entity type and number, tid, incarnation) this many bytes from where its
key points: its ops then have request ids (captures, --otlp's choice).
Ceph's built-in table (probetable.py) is the same thing for ceph-osd.
"""
import json

from ..errors import UserError
from .probetable import Func, Release

_ROLE_OF = {"enqueue": "enqueue_op", "dequeue": "dequeue_op",
            "done": "log_op_stats"}


SCHEDULERS = {"wpq": "wpq", "mclock": "mclock_scheduler"}


class Spec:
    """A probe spec read: its name, its functions (as a Release), the
    thread roles it names ([(name prefix, role)], the workers' first:
    the engine bounds them by the build's MAX_ROLES and makes them
    model/roles.py's Roles) and its scheduler."""

    def __init__(self, name, release, role_prefixes, scheduler="wpq"):
        self.name, self.release = name, release
        self.role_prefixes = role_prefixes
        # as ceph/scheduler.py describes an OSD's (without settings)
        self.scheduler = {"queue": SCHEDULERS[scheduler],
                          "mclock": scheduler == "mclock"}

    def stages(self):
        if "enqueue_op" not in self.release.funcs:
            return []
        out = ["queue_wait"]
        if "log_op_stats" in self.release.funcs:
            out.append("op_total")
        return out


def _func(path, what, d):
    if not isinstance(d, dict) or not isinstance(d.get("function"), str):
        raise UserError("%s: \"%s\" needs a \"function\" name" % (path, what))
    arg = d.get("key_arg")
    if not isinstance(arg, int) or not 1 <= arg <= 5:
        raise UserError("%s: \"%s\".key_arg must be an argument number 1-5"
                        % (path, what))
    params = d.get("params", ".*")
    try:
        return Func(d["function"], params, op_arg=(arg, bool(d.get("deref"))))
    except Exception as e:       # re.error
        raise UserError("%s: \"%s\".params is not a regular expression: %s"
                        % (path, what, e))


def parse(text, path="<spec>"):
    try:
        d = json.loads(text)
    except ValueError as e:
        raise UserError("%s is not a JSON probe spec: %s" % (path, e))
    if not isinstance(d, dict):
        raise UserError("%s: a probe spec is a JSON object" % path)
    if "workers" not in d:
        raise UserError("%s: missing \"workers\"" % path)
    if ("enqueue" in d) != ("dequeue" in d):
        raise UserError("%s: \"enqueue\" and \"dequeue\" go together" % path)
    funcs = {}
    for key, role in _ROLE_OF.items():
        if key in d:
            funcs[role] = _func(path, key, d[key])
    if not isinstance(d["workers"], str) or not d["workers"]:
        raise UserError("%s: \"workers\" is a thread-name prefix" % path)
    extra = d.get("roles", {})
    if not isinstance(extra, dict) or not all(
            isinstance(v, str) for v in list(extra) + list(extra.values())):
        raise UserError("%s: \"roles\" maps thread-name prefixes to role "
                        "names" % path)
    roles = [(d["workers"], "worker")] + sorted(extra.items())
    name = str(d.get("name", "spec"))
    sched = d.get("scheduler", "wpq")
    if sched not in SCHEDULERS:
        raise UserError("%s: \"scheduler\" is \"wpq\" or \"mclock\", not "
                        "%s" % (path, json.dumps(sched)))
    off = d.get("reqid_offset")
    if off is not None and (not isinstance(off, int) or
                            isinstance(off, bool) or not 0 < off < 4096):
        raise UserError("%s: \"reqid_offset\" is the request id's offset "
                        "in the item, 1 to 4095 bytes" % path)
    return Spec(name, Release("spec", name, funcs,
                              offsets={"reqid_off": off} if off else None),
                roles, sched)


def load(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise UserError("cannot read probe spec %s: %s" % (path, e.strerror))
    return parse(text, path)
