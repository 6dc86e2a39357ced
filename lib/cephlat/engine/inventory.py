"""The ceph-osd processes of this host and what can be probed in each."""
from ..ceph import probetable
from ..ceph.target import Target, find_ceph_osds
from ..errors import UserError
from .elfsym import ElfSymbols
from .plan import choose_release, resolve


def osd_rows(release=None, netns=None):
    """Every ceph-osd on this host (containers included): id, pid,
    version, release, the probe table entry used, whether it is a CET
    build, which stages can be probed (with the reason for those that
    cannot), and the probes moved off an entry the kernel would
    single-step or left single-stepping (engine/probesite.py)."""
    rows = []
    for pid, osd_id in find_ceph_osds(netns):
        row = {"pid": pid, "osd": osd_id, "ceph_version": None,
               "release": None, "probe_table": None,
               "probe_table_exact": None, "cet": None, "stages": {}}
        t = None
        try:
            t = Target(pid)
            with ElfSymbols(t.exe_path) as elf:
                row["ceph_version"] = t.ceph_version(elf)
                choice = choose_release(elf, row["ceph_version"], release,
                                        "ceph-osd %d" % pid)
                plan = resolve(elf, choice.release, list(probetable.STAGES),
                               choice.release.settings()
                               if choice.exact is not False else {})
            row.update(release=choice.release.name,
                       probe_table=choice.release.key,
                       probe_table_exact=choice.exact, cet=plan.cet,
                       probes_moved=[
                           {"function": f, "entry": e, "offset": n,
                            "at": i} for f, e, n, i in plan.moved()],
                       probes_single_step=[
                           {"function": f, "at": i}
                           for f, i in plan.single_steps()])
            if choice.notice:
                row["notice"] = choice.notice
            for s in probetable.STAGES:
                row["stages"][s] = "ok" if s in plan.stages else \
                    plan.unavailable.get(s, "?")
        except UserError as e:
            row["error"] = str(e)
            if t is not None and row["ceph_version"] is None:
                # the binary could not be read: its admin socket may say
                row["ceph_version"] = t.ceph_version()
        rows.append(row)
    return rows
