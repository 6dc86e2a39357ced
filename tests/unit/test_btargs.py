"""probes/osdstages.bt and engine/btargs.py agree on the script's
positional arguments: each probe of the script ($3 on) is the function of
the probe-table role its comment names ("/* role = Class::function(...)"),
in the order btargs writes them (entries, then the return probes). Before,
only the cluster tier (bpftrace on a lab) noticed a mismatch."""
import os
import re

from cephlat.ceph import probetable
from cephlat.engine import btargs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "probes", "osdstages.bt")

ROLE = re.compile(r"^/\* (\w+) = ([\w:]+)\(")
PROBE = re.compile(r"^(uprobe|uretprobe):\$1:\$(\d+)$")


def script_args():
    """{argument number: (probe kind, role, qualified name)} of the
    script's probes; a probe takes the role of the last role comment
    before it (a return probe follows its entry's block)."""
    out, role = {}, None
    with open(SCRIPT) as f:
        for line in f:
            m = ROLE.match(line)
            if m:
                role = m.groups()
                continue
            m = PROBE.match(line.strip())
            if m:
                assert role is not None, line
                n = int(m.group(2))
                assert n not in out, "$%d probed twice" % n
                out[n] = (m.group(1), role[0], role[1])
    return out


def test_the_script_probes_what_btargs_writes():
    args = script_args()
    # $1 the binary, $2 the banner word, then every argument used once
    assert sorted(args) == list(range(3, 3 + len(args))), sorted(args)
    kinds = [args[n][0] for n in sorted(args)]
    roles = [args[n][1] for n in sorted(args)]
    # entries first, then returns: the order bt_args writes them
    assert kinds == ["uprobe"] * len(btargs.ENTRIES) + \
        ["uretprobe"] * len(btargs.RETURNS), kinds
    assert roles == btargs.ENTRIES + btargs.RETURNS, roles


def test_each_comment_names_the_roles_function():
    funcs = probetable.RELEASES["16.2"].funcs
    for kind, role, qualified in script_args().values():
        assert role in funcs, role
        assert funcs[role].qualified == qualified, (role, qualified)


def test_the_script_uses_only_its_arguments():
    text = open(SCRIPT).read()
    used = {int(n) for n in re.findall(r"\$(\d+)", text)}
    assert used == {1, 2} | set(script_args()), sorted(used)
