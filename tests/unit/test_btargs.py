"""probes/osdstages.bt declares its positional arguments (each probe's
role, each field offset) and engine/btargs.py writes them from those
declarations: every argument the script uses is declared once, each role
is a function of every release's probe table (the comment names it), and
each offset a setting every release gives. Before, a hand-kept list in
btargs had to match the script and only the cluster tier noticed when it
did not."""
import re

import pytest

from cephlat.ceph import probetable
from cephlat.engine import btargs


def test_every_argument_is_declared_once_and_in_order():
    decls = btargs.declarations()
    # $1 the binary, $2 the banner word, then every argument once
    assert sorted(decls) == list(range(3, 3 + len(decls))), sorted(decls)
    text = open(btargs.SCRIPT).read()
    used = {int(n) for n in re.findall(r"\$(\d+)", text)}
    assert used == {1, 2} | set(decls), sorted(used)


def test_every_probe_keeps_to_the_traced_osd():
    """uprobes fire in every process running the binary: each probe's
    predicate starts with the pid test"""
    decls = btargs.declarations()
    pid = [n for n, d in decls.items() if d.kind == "pid"]
    assert len(pid) == 1, decls
    text = open(btargs.SCRIPT).read()
    probes = re.findall(r"^(?:uprobe|uretprobe):\$1:\$\d+\n(.*)$", text,
                        re.M)
    assert len(probes) == sum(d.kind in ("uprobe", "uretprobe")
                              for d in decls.values())
    for pred in probes:
        assert pred.startswith("/pid == $%d" % pid[0]), pred


def test_each_probe_has_an_entry_and_at_most_one_return():
    decls = btargs.declarations().values()
    entries = [d.name for d in decls if d.kind == "uprobe"]
    returns = [d.name for d in decls if d.kind == "uretprobe"]
    assert len(entries) == len(set(entries)), entries
    assert len(returns) == len(set(returns)), returns
    assert set(returns) <= set(entries)
    assert {"enqueue_op", "log_op_stats", "rep_submit", "rep_reply",
            "op_commit", "repop_commit"} <= set(entries)


@pytest.mark.parametrize("key", sorted(probetable.RELEASES))
def test_each_declaration_is_the_tables(key):
    release = probetable.RELEASES[key]
    settings = release.settings()
    for n, d in btargs.declarations().items():
        if d.kind == "pid":
            continue
        if d.kind == "offset":
            # all or none (none: bt_args writes zeros, the probes idle)
            assert d.name in settings or not release.verified, \
                (key, n, d.name)
        else:
            assert d.name in release.funcs, (key, n, d.name)
            # the comment names the function (16.2's names; a release
            # may rename a class, as 20.2's legacy EC backend did)
            if key == "16.2":
                assert release.funcs[d.name].qualified == d.qualified, \
                    (n, d.name, d.qualified)


def _script(tmp_path, text):
    p = tmp_path / "s.bt"
    p.write_text(text)
    return str(p)


def test_a_probe_without_a_role_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no role comment"):
        btargs.declarations(_script(tmp_path, "uprobe:$1:$3\n{}\n"))


def test_an_argument_declared_twice_is_refused(tmp_path):
    text = (" *   $3  reqid_off   x\n"
            "/* do_op = PrimaryLogPG::do_op(x) */\nuprobe:$1:$3\n{}\n")
    with pytest.raises(ValueError, match=r"\$3 declared twice"):
        btargs.declarations(_script(tmp_path, text))


class _Choice:
    version = "0.0"

    def __init__(self, release):
        self.release = release


def test_a_release_without_the_offsets_gets_zeros_and_a_warning(
        tmp_path, monkeypatch):
    rel = probetable.RELEASES["17.2"]        # functions only, no offsets
    assert "reqid_off" not in rel.settings()
    # no function to resolve: the offsets are checked on their own
    monkeypatch.setattr(btargs, "resolve",
                        lambda *a, **k: type("P", (), dict(
                            symbols={}, unavailable={}))())
    path = _script(tmp_path, " *   $3  reqid_off  x\n"
                             " *   $4  src_num_off  x\n"
                             " *   $5  pid  x\n")
    said = []
    args = btargs.bt_args("/bin/x", None, _Choice(rel), 7, path,
                          said.append)
    assert args[2:] == ["0", "0", "7"]
    assert len(said) == 1 and "no checked reqid_off for Ceph 17.2" in said[0]
    said.clear()
    args = btargs.bt_args("/bin/x", None, _Choice(probetable.RELEASES[
        "18.2"]), 7, path, said.append)
    assert args[2:] == ["272", "312", "7"] and not said


def test_the_replica_probes_do_nothing_without_reqid_off():
    """each probe reading an offset is guarded by reqid_off ($N != 0)"""
    decls = btargs.declarations()
    reqid = [n for n, d in decls.items() if d.name == "reqid_off"][0]
    offsets = {n for n, d in decls.items() if d.kind == "offset"}
    text = open(btargs.SCRIPT).read()
    for block in re.findall(r"^uprobe:\$1:\$\d+\n(?:/.*/\n)?\{.*?^\}",
                            text, re.M | re.S):
        used = {int(n) for n in re.findall(r"\$(\d+)", block)} & offsets
        head = block.split("{", 1)[0]
        if used:
            assert "$%d" % reqid in head or "if ($%d)" % reqid in block, \
                block
