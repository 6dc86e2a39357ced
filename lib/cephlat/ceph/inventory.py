"""The ceph-osd processes of this host and what can be probed in each."""
from ..engine.elfsym import ElfSymbols
from ..engine.plan import resolve
from ..errors import UserError
from . import probetable
from .target import Target, find_ceph_osds


def osd_rows(release=None):
    """Every ceph-osd on this host: id, pid, version, release and which
    stages can be probed (with the reason for those that cannot)."""
    rows = []
    for pid, osd_id in find_ceph_osds():
        row = {"pid": pid, "osd": osd_id, "ceph_version": None,
               "release": None, "stages": {}}
        try:
            t = Target(pid)
            version = release or t.ceph_version()
            row["ceph_version"] = version
            rel = probetable.release_for(version)
            if rel is None:
                row["error"] = "no probe table for Ceph %s" % version
            else:
                row["release"] = rel.name
                with ElfSymbols(t.exe_path) as elf:
                    plan = resolve(elf, rel, list(probetable.STAGES))
                for s in probetable.STAGES:
                    row["stages"][s] = "ok" if s in plan.stages else \
                        plan.unavailable.get(s, "?")
        except UserError as e:
            row["error"] = str(e)
        rows.append(row)
    return rows
