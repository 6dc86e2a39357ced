"""The Ceph probe table: stage -> function(s) per Ceph release.

One table, one place. Each stage is matched by demangled qualified name plus
a regular expression over the demangled parameter list, so overloads and
signature changes between releases are explicit.

Stage kinds:
  call - entry -> return of one function on the same thread (uprobe + uretprobe)
"""
import re
from collections import OrderedDict

# Stage names are a contract (JSON keys, report rows, tests): design.md §3.
STAGES = OrderedDict([
    ("dequeue_op", "OSD::dequeue_op entry -> return"),
    ("do_op", "PrimaryLogPG::do_op entry -> return"),
    ("get_object_context", "PrimaryLogPG::get_object_context entry -> return"),
    ("bluestore_read", "BlueStore::read entry -> return"),
    ("bluestore_submit", "BlueStore::queue_transactions entry -> return"),
])
STAGE_IDS = {name: i for i, name in enumerate(STAGES)}


class Probe:
    """Where a stage is in one release: function + parameter pattern."""

    def __init__(self, func, params, kind="call"):
        self.func = func
        self.params = re.compile(params)
        self.kind = kind

    def __repr__(self):
        return "Probe(%s(%s))" % (self.func, self.params.pattern)


_BUF = r"ceph::buffer::(v\d+_\d+_\d+::)?list"
_COLL = r"boost::intrusive_ptr<ObjectStore::CollectionImpl>&"

# Pacific 16.2 (checked on Debian's 16.2.15 binary).
_PACIFIC = {
    "dequeue_op": Probe("OSD::dequeue_op",
                        r"^boost::intrusive_ptr<PG>, boost::intrusive_ptr<OpRequest>,"
                        r" ThreadPool::TPHandle&$"),
    "do_op": Probe("PrimaryLogPG::do_op", r"^boost::intrusive_ptr<OpRequest>&$"),
    "get_object_context": Probe("PrimaryLogPG::get_object_context",
                                r"^hobject_t const&, bool, std::map<.*> const\*$"),
    "bluestore_read": Probe("BlueStore::read",
                            r"^" + _COLL + r", ghobject_t const&, unsigned long, "
                            r"unsigned long, " + _BUF + r"&, unsigned int$"),
    "bluestore_submit": Probe("BlueStore::queue_transactions",
                              r"^" + _COLL + r", std::vector<ceph::os::Transaction"
                              r".*>&, boost::intrusive_ptr<TrackedOp>, "
                              r"ThreadPool::TPHandle\*$"),
}

RELEASES = OrderedDict([
    ("16.2", ("pacific", _PACIFIC)),
])


def release_key(version):
    """'16.2.15' -> '16.2'."""
    if not version:
        return None
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def known_releases():
    return ", ".join("%s (%s)" % (k, v[0]) for k, v in RELEASES.items())


def table_for(version):
    """The probe table for a Ceph version string, or None."""
    key = release_key(version)
    if key in RELEASES:
        return RELEASES[key][1]
    return None
