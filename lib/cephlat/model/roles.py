"""Thread roles: a target's threads named by the prefix of their name
(tp_osd_tp, msgr-worker-, ...); role 0 is "other"."""


class Roles:
    """Thread roles by name prefix: [(prefix, role name)]; role 0 = other.
    The BPF side classifies a thread when it first sees it (and when its
    name changes) with the same first-match rule."""

    def __init__(self, prefixes, worker=1, max_roles=None):
        if max_roles is not None and len(prefixes) > max_roles - 1:
            raise ValueError("at most %d roles" % (max_roles - 1))
        self.prefixes = list(prefixes)
        self.names = ["other"] + [name for _, name in prefixes]
        self.worker = worker

    def classify(self, comm):
        for i, (prefix, _) in enumerate(self.prefixes):
            if comm.startswith(prefix):
                return i + 1
        return 0

    def fill(self, ro):
        if len(self.prefixes) > len(ro.roles):
            raise ValueError("at most %d roles" % len(ro.roles))
        room = type(ro.roles[0]).prefix.size - 1     # NUL-terminated
        for i, (prefix, _) in enumerate(self.prefixes):
            b = prefix.encode()[:room]
            ro.roles[i].prefix = b
            ro.roles[i].len = len(b)
            ro.roles[i].role = i + 1
        ro.worker_role = self.worker


CEPH_ROLES = Roles([("tp_osd_tp", "tp_osd_tp"), ("msgr-worker-", "msgr-worker"),
                    ("ms_dispatch", "ms_dispatch"),
                    ("bstore_kv_sync", "bstore_kv_sync"),
                    ("bstore_aio", "bstore_aio"), ("rocksdb:", "rocksdb")])

