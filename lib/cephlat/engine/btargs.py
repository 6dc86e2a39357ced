"""The positional arguments of probes/osdstages.bt for one ceph-osd: the
bpftrace script names no function and no offset itself, so that it
attaches to every release the probe table knows, in a container or not.

  $1   the binary, as bpftrace can open it (/proc/PID/root/...)
  $2   what it is, for the banner ("ceph-18.2.7,table-18.2": one word)
  $N   the rest, as the script declares them (declarations()):
       - a probe line `uprobe:$1:$N` or `uretprobe:$1:$N` under a comment
         "/* ROLE = Class::function(...)": the address of the probe
         table's function ROLE;
       - a header line " *   $N  NAME_off ...": the release's setting NAME_off
         (a field offset, the same .rodata setting osdstage.bpf.c gets);
       - a header line " *   $N  pid ...": the OSD's process id (uprobes
         are set on the file: each probe keeps to the traced OSD).

The script is the one list: adding a probe or an offset to it is enough,
and tests/unit/test_btargs.py holds every declaration to the table. All
addresses are function start addresses: Debian's bpftrace (0.17, built
without its probe-offset support) refuses a probe anywhere else, so on a
CET build it cannot skip endbr64 as osdstage.py does, and every hit pays
the kernel's single-step of it (docs/ceph.md, CET).
"""
import os
import re

from ..ceph import probetable
from ..errors import UserError
from .plan import resolve

# the directory holding the package: the checkout's lib/ (the script in
# ../probes/), or an installed copy's PREFIX/lib/osdstage (in probes/)
_TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(_TOP, "probes", "osdstages.bt")
if not os.path.exists(SCRIPT):
    SCRIPT = os.path.join(os.path.dirname(_TOP), "probes", "osdstages.bt")

_ROLE = re.compile(r"^/\* (\w+) = ([\w:]+)\(")
_PROBE = re.compile(r"^(uprobe|uretprobe):\$1:\$(\d+)$")
_VALUE = re.compile(r"^ \*\s+\$(\d+)\s+(\w+_off|pid)\s")


class Declared:
    """One positional argument of the script: kind "uprobe", "uretprobe"
    (name: a probe-table role; qualified: the function its comment names),
    "offset" (name: a release setting) or "pid"."""

    def __init__(self, kind, name, qualified=None):
        self.kind, self.name, self.qualified = kind, name, qualified

    def __repr__(self):
        return "Declared(%s %s)" % (self.kind, self.name)


def declarations(path=SCRIPT):
    """{argument number: Declared} of the script's arguments from $3 on.
    A probe takes the role of the last role comment before it (a return
    probe follows its entry's block)."""
    out, role = {}, None
    with open(path) as f:
        for line in f:
            m = _VALUE.match(line)
            if m:
                n, name = int(m.group(1)), m.group(2)
                decl = Declared("pid" if name == "pid" else "offset", name)
            else:
                m = _ROLE.match(line)
                if m:
                    role = m.groups()
                    continue
                m = _PROBE.match(line.strip())
                if not m:
                    continue
                if role is None:
                    raise ValueError("%s: probe $%s has no role comment"
                                     % (path, m.group(2)))
                n = int(m.group(2))
                decl = Declared(m.group(1), role[0], role[1])
            if n in out:
                raise ValueError("%s: $%d declared twice" % (path, n))
            out[n] = decl
    return out


def bt_args(binary, elf, choice, pid, path=SCRIPT, warn=None):
    """[str] for `bpftrace probes/osdstages.bt ARGS...`. A release whose
    table lacks one of the offsets gets 0 for all of them, which the
    script's replica probes take as "do nothing" (reqid_off is never 0);
    warn(text) says so."""
    decls = declarations(path)
    roles = sorted({d.name for d in decls.values()
                    if d.kind in ("uprobe", "uretprobe")})
    plan = resolve(elf, choice.release, list(probetable.STAGES))
    missing = [r for r in roles if r not in plan.symbols]
    if missing:
        why = plan.unavailable.get(missing[0]) or next(
            iter(plan.unavailable.values()), "not found")
        raise UserError("cannot write osdstages.bt's arguments: %s: %s" %
                        (missing[0], why))
    settings = choice.release.settings()
    lacking = [d.name for d in decls.values()
               if d.kind == "offset" and d.name not in settings]
    if lacking and warn:
        warn("the probe table has no checked %s for Ceph %s: "
             "osdstages.bt's replica stages stay empty" %
             (lacking[0], choice.release.key))
    args = [binary, "ceph-%s,table-%s" % (choice.version,
                                         choice.release.key)]
    for n in sorted(decls):
        d = decls[n]
        if d.kind == "offset":
            args.append(str(0 if lacking else settings[d.name]))
        elif d.kind == "pid":
            args.append(str(pid))
        else:
            args.append("0x%x" % plan.symbols[d.name].addr)
    return args


def binary_of(pid):
    """The target's executable as a path bpftrace can open from here."""
    exe = os.readlink("/proc/%d/exe" % pid).replace(" (deleted)", "")
    return "/proc/%d/root%s" % (pid, exe)
