"""A window's completed client ops broken down by who or what they were
for (osdstage -r --by): by client (the request id's entity,
client.4123), pool (its name where the capture recorded the cluster's
names, else "pool 3"), PG (3.1a; an erasure-coded shard's ops under its
PG) or RBD image (its name where the capture recorded the cluster's
names, else the image id of the object's name, rbd_data.<id>.<n>, when
the capture carries object names). Per key: ops, their share, op_total's and queue_wait's
p50 and p99 (from histograms, as every stage of the report: Hist), and
its share of the ops' queue wait; the top K by total op time, the rest
summed in one "other" row, and whether one key dominates (holds at
least half of both the ops and the queue wait).

The model reads no file: the ops come as columns (capture/doneops.py
reads them)."""
from dataclasses import dataclass

import numpy as np

from .hist import Hist

KINDS = ("client", "pool", "pg", "image")
# a client that is the capturing tool's own look-up of the cluster's names
SELF = " (osdstage's name look-up)"
DEFAULT_TOP = 10
UNKNOWN = "unknown"
# a dominant key holds at least this share of both the ops and the
# queue wait
DOMINANT = 0.5


def merge_names(names, got):
    """Fold one line of the look-up of the cluster's names
    (ceph/clusternames.py's: pools, images and clients, all of them or
    the clients new since the last line) into `names`, what keys_of
    reads: "pools", "images", "clients", "fsid" and "selves" (every
    look-up's own client). The latest of each name: a pool or image
    renamed since keeps its last name, one gone keeps the one it had.
    -> names"""
    for k in ("pools", "images", "clients"):
        names.setdefault(k, {}).update(got.get(k, {}))
    if got.get("fsid"):
        names["fsid"] = got["fsid"]
    selves = names.setdefault("selves", [])
    if got.get("self") and got["self"] not in selves:
        selves.append(got["self"])
    return names


# the live records of ops at their end (struct op_trace of
# probes/osdstage.h, decoded: engine/traces.py): a primary's client op
PRIMARY = 0                 # enum trace_role
CLIENT = 8                  # CEPH_ENTITY_TYPE_CLIENT


def trace_columns(evs):
    """The columns keys_of and build read, of decoded op_trace records
    (a live run's and the exporter's ops, as capture/doneops.py reads a
    capture's): client, pool (-1: unknown), pg, object, total_ns,
    qwait_ns (valid where dequeued), dequeued, bytes_in, bytes_out."""
    pg_known = [bool(e["pg_pool"] or e["pg_seed"]) for e in evs]
    enq = np.array([e["enq_ns"] for e in evs], np.int64)
    deq = np.array([bool(e["dequeued"]) for e in evs], bool)
    return {
        "client": np.array(
            ["client.%d" % e["req_num"] if e["req_type"] == CLIENT else None
             for e in evs], object),
        "pool": np.array([e["pg_pool"] if k else -1
                          for e, k in zip(evs, pg_known)], np.int64),
        "pg": np.array(["%d.%x" % (e["pg_pool"], e["pg_seed"]) if k
                        else None for e, k in zip(evs, pg_known)], object),
        "object": np.array([e["object"] or None for e in evs], object),
        "total_ns": np.array([e["done_ns"] for e in evs], np.int64) - enq,
        "qwait_ns": np.where(deq, np.array([e["deq_ns"] for e in evs],
                                           np.int64) - enq, 0),
        "dequeued": deq,
        "bytes_in": np.array([e["bytes_in"] for e in evs], np.int64),
        "bytes_out": np.array([e["bytes_out"] for e in evs], np.int64)}


class TracedOps:
    """The client ops a live tracer's full tier hands over at their end
    (decoded op_trace records), keyed by `kind` with the cluster's names
    as `lookup` (ceph/clusternames.py's NamesLookup, or None) finds
    them: what a live --by (cli/liveby.py) and the exporter's --by
    (exporter/bykey.py) both read."""

    def __init__(self, kind, lookup=None, cephx=True):
        self.kind, self.lookup, self.cephx = kind, lookup, cephx
        self.names = {}

    def take(self, records, slots):
        """Records `records` (the tracer's take_traces()) of client ops
        completed as their primary on target slots below `slots`, the
        names found since merged first -> {slot: [record]}"""
        if self.lookup is not None:
            for got in self.lookup.take("by"):
                merge_names(self.names, got)
        per = {}
        for e in records:
            if e["role"] == PRIMARY and e["target"] < slots:
                per.setdefault(e["target"], []).append(e)
        return per

    def keys(self, cols):
        """keys_of the columns (trace_columns') by this kind."""
        return keys_of(self.kind, cols, self.names, self.cephx)

    def stop(self):
        if self.lookup is not None:
            self.lookup.stop()


def image_of(obj):
    """An RBD data object's image id (rbd_data.<id>.<n> -> <id>; with a
    separate data pool, rbd_data.<pool>.<id>.<n> -> <pool>.<id>), else
    None."""
    if not obj or not obj.startswith("rbd_data."):
        return None
    head, _, n = obj[len("rbd_data."):].rpartition(".")
    return head if head and n else None


def image_name(image, images):
    """An image key (image_of) by the cluster's names {image id: name}:
    its name, else the id (with a data pool's id before it, the image's
    id is the part after it)."""
    if image is None:
        return None
    return images.get(image) or images.get(image.rpartition(".")[2]) \
        or image


def keys_of(kind, cols, names=None, cephx=True):
    """The key of each op of columns `cols` (capture/doneops.py: read)
    for breakdown `kind` -> object array (None: not known); names: the
    cluster's names the capture recorded (capture/reader.py's
    cluster_names): pools and images by name where it has them, clients
    with their cephx name (unless not `cephx`: keys that never change
    while the names come in, the exporter's labels). KeyError
    when the columns lack what the kind needs (image: object names)."""
    names = names or {}
    if kind == "client":
        # the capturing tool's own look-ups of the names, said as such;
        # the others with the cephx name they authenticated as
        selves = set(names.get("selves", ()))
        cephx = names.get("clients", {}) if cephx else {}
        if not (selves or cephx):
            return cols["client"]
        return _each_once(np.array([c or "" for c in cols["client"]],
                                   object),
                          lambda c: None if not c else c + SELF
                          if c in selves else "%s (%s)" % (c, cephx[c])
                          if c in cephx else c)
    if kind == "pg":
        return cols["pg"]
    if kind == "pool":
        pools = names.get("pools", {})
        return _each_once(np.asarray(cols["pool"]),
                          lambda p: (pools.get(str(p)) or "pool %d" % p)
                          if p >= 0 else None)
    if kind == "image":
        images = names.get("images", {})
        return _each_once(np.array([o or "" for o in cols["object"]],
                                   object),
                          lambda o: image_name(image_of(o), images))
    raise ValueError("no breakdown by %r" % kind)


def _each_once(values, fmt):
    """fmt(v) of each of `values` (an array), made once per distinct
    value -> object array."""
    if not len(values):
        return np.zeros(0, object)
    u, inv = np.unique(values, return_inverse=True)
    names = np.array([fmt(v) for v in u.tolist()] + [None], object)[:-1]
    return names[inv.reshape(-1)]


def _pcts(ns):
    p50, p99 = Hist.from_ns(ns).percentiles_us((0.50, 0.99))
    return round(p50, 3), round(p99, 3)


def _pct(part, whole):
    return round(100.0 * part / whole, 1) if whole else None


@dataclass
class Breakdown:
    """key: client, pool, pg or image; rows: the top keys' figures;
    other: the rest's, summed (None: no rest); dominant: the key holding
    at least half of both the ops and the queue wait, or None; ops,
    queue_wait_ns: the window's totals; top: K. A row's bytes_in and
    bytes_out are the bytes its ops wrote and read as Ceph counts them
    (op_in_bytes, op_out_bytes), None where they are not known (a
    capture older than the figures)."""
    key: str
    rows: list
    other: dict
    dominant: object
    ops: int
    queue_wait_ns: int
    top: int

    @property
    def record(self):
        """The JSON object ("by": model/report-schema.json)."""
        return {"key": self.key, "top": self.top, "ops": self.ops,
                "queue_wait_total_us": round(self.queue_wait_ns / 1000, 3),
                "rows": self.rows, "other": self.other,
                "dominant": self.dominant}


def _row(key, total, qw, n_all, qw_all, nbytes, keys=None):
    qsum = int(qw.sum())
    r = {"key": key, "ops": int(len(total)),
         "ops_pct": _pct(len(total), n_all),
         "op_time_s": round(int(total.sum()) / 1e9, 6)}
    r["op_total_p50_us"], r["op_total_p99_us"] = _pcts(total)
    r["queue_wait_p50_us"], r["queue_wait_p99_us"] = _pcts(qw)
    r["queue_wait_pct"] = _pct(qsum, qw_all)
    for name, b in zip(("bytes_in", "bytes_out"), nbytes):
        r[name] = int(b.sum()) if len(b) and (b >= 0).all() else None
    if keys is not None:
        r["keys"] = keys
    return r


def build(kind, keys, total_ns, qwait_ns, dequeued, top=DEFAULT_TOP,
          bytes_in=None, bytes_out=None):
    """The breakdown of ops with `keys` (None: not known, counted
    under "unknown"), their op_total and queue wait (ns; the queue wait
    valid where `dequeued`) and the bytes they wrote and read (-1 or
    None: not known) -> Breakdown."""
    keys = np.array([UNKNOWN if k is None else k for k in keys], object)
    total = np.asarray(total_ns, np.int64)
    deq = np.asarray(dequeued, bool)
    qw = np.where(deq, np.asarray(qwait_ns, np.int64), 0)
    nb = [np.full(len(keys), -1, np.int64) if b is None else
          np.asarray(b, np.int64) for b in (bytes_in, bytes_out)]
    n, qw_all = len(keys), int(qw.sum())
    if not n:
        return Breakdown(kind, [], None, None, 0, 0, top)
    u, inv = np.unique(keys.astype(str), return_inverse=True)
    inv = inv.reshape(-1)
    count = np.bincount(inv, minlength=len(u))
    time = np.bincount(inv, weights=total, minlength=len(u))
    qsum = np.bincount(inv, weights=qw, minlength=len(u))
    # by total op time, then by name
    order = sorted(range(len(u)), key=lambda i: (-time[i], u[i]))
    rows = []
    for i in order[:top]:
        m = inv == i
        rows.append(_row(str(u[i]), total[m], qw[m & deq], n, qw_all,
                         [b[m] for b in nb]))
    other = None
    if len(order) > top:
        m = np.isin(inv, order[top:])
        other = _row("other", total[m], qw[m & deq], n, qw_all,
                     [b[m] for b in nb], keys=len(order) - top)
    dominant = None
    for i in order:
        if u[i] != UNKNOWN and qw_all and \
                count[i] >= DOMINANT * n and qsum[i] >= DOMINANT * qw_all:
            dominant = {"key": str(u[i]), "ops_pct": _pct(count[i], n),
                        "queue_wait_pct": _pct(qsum[i], qw_all)}
            break
    return Breakdown(kind, rows, other, dominant, n, qw_all, top)
