"""Whom a target's threads waited behind for a CPU, per thread role: the
run-queue waits of an interval split by the process that ran on the CPU
meanwhile (probes/osdstage/sched.bpf.h behind_wait; read by
engine/mapread.py take_behind, named by engine/tasks.py), as the report's
"behind" rows: the TOP processes by time and the rest summed.

A process is the OSD itself (its other threads), the CPU's idle task (the
CPU was waking from idle), one not known (the wait began before the
oldest turn the CPU kept), or any other process, named with its cgroup
and the systemd unit or container that holds it."""

TOP = 5
# what a row is, beside an ordinary process
ITSELF, IDLE, UNKNOWN, PROCESS = "itself", "idle", "unknown", "process"


def _kind(tgid, own, unknown):
    if tgid == unknown:
        return UNKNOWN
    if tgid == 0:
        return IDLE
    return ITSELF if tgid == own else PROCESS


def behind_rows(behind, role_names, own_tgid, unknown, top=TOP):
    """{role name: {"wait_us", "by": [row], "other_us"}} of a snapshot's
    `behind` ({(role index, tgid): stats}); each row {"kind", "tgid",
    "pid", "process", "thread", "cgroup", "unit", "us", "share", "turns"}
    (share: of the role's wait), the TOP longest, largest first."""
    per = {}
    for (role, tgid), st in behind.items():
        if role < len(role_names):
            per.setdefault(role_names[role], []).append((tgid, st))
    out = {}
    for name, rows in per.items():
        total = sum(st["ns"] for _, st in rows)
        if not total:
            continue
        rows.sort(key=lambda r: -r[1]["ns"])
        by = []
        for tgid, st in rows[:top]:
            kind = _kind(tgid, own_tgid, unknown)
            by.append({
                "kind": kind,
                "tgid": tgid if kind in (PROCESS, ITSELF) else None,
                "pid": st.get("pid") if kind in (PROCESS, ITSELF) else None,
                "process": st.get("process"), "thread": st.get("thread"),
                "cgroup": st.get("cgroup"), "unit": st.get("unit"),
                "us": round(st["ns"] / 1000, 1),
                "share": round(st["ns"] / total, 4),
                "turns": st["waits"]})
        rest = sum(st["ns"] for _, st in rows[top:])
        out[name] = {"wait_us": round(total / 1000, 1), "by": by,
                     "other_us": round(rest / 1000, 1)}
    return out


def share_words(share):
    """A row's share as the report and the verdict write it."""
    return "%.0f %%" % (100 * share)


def who_words(row):
    """A row as the text report names it: "fio (pid 4211, user.slice)"."""
    if row["kind"] == IDLE:
        return "the idle CPU waking"
    if row["kind"] == UNKNOWN:
        return "not known (before the CPU's kept turns)"
    name = row["process"] or "?"
    if row["kind"] == ITSELF:
        return "its own threads (last: %s)" % (row["thread"] or "?")
    where = row["unit"] or row["cgroup"]
    return "%s (pid %d%s)" % (name, row["tgid"],
                              ", " + where if where and where != "/" else "")
