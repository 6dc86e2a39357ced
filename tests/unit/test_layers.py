"""The layers of docs/architecture.md hold: a package imports only the
packages its row of the table names (read from the doc itself). Read
from the source (ast), not from a run, so a lazy import inside a
function counts too, and an absolute `cephlat.` import as much as a
relative one. The few imports that still run
back up are listed with why; a new one fails here, and mending one fails
here too until it leaves the list (the list only shrinks)."""
import ast
import os
import re

from conftest import REPO

LIB = os.path.join(REPO, "lib", "cephlat")

DOC = os.path.join(REPO, "docs", "architecture.md")


def _table():
    """docs/architecture.md's table of layers -> {package: the packages
    it may import (None: everything)}: a row's package is the first of
    its second column's `names` that is a package or module of
    lib/cephlat; its third column, `names`, "nothing" or "everything"."""
    may = {}
    rows = [line for line in open(DOC) if line.startswith("| ") and
            line.count("|") == 4]
    for line in rows:
        _, where, imports, _ = (c.strip() for c in line.split("|")[1:])
        for name in re.findall(r"`([^`]+)`", where):
            m = re.match(r"^(?:lib/cephlat/)?(\w+)(?:/|\.py)$", name)
            if m and (os.path.isdir(os.path.join(LIB, m.group(1))) or
                      os.path.exists(os.path.join(LIB, m.group(1) +
                                                  ".py"))):
                may[m.group(1)] = None if imports == "everything" else \
                    set(re.findall(r"`([\w.]+)`", imports))
                break
    may["__init__"] = set()
    return may


MAY = _table()

# (module, what it imports): the imports that still run back up (none
# now: a new one must say here why it cannot be mended)
KNOWN = set()


def _imports(path, rel):
    """-> the lib/cephlat modules `path` imports, as 'pkg.mod'"""
    here = rel.split("/")[:-1]
    out = set()
    for n in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(n, ast.Import):
            # import cephlat.x.y
            out.update(".".join(a.name.split(".")[1:]) for a in n.names
                       if a.name.startswith("cephlat."))
            continue
        if not isinstance(n, ast.ImportFrom):
            continue
        if n.level:
            base = here[:len(here) - (n.level - 1)]
            mod = base + (n.module.split(".") if n.module else [])
        elif n.module and (n.module + ".").startswith("cephlat."):
            mod = n.module.split(".")[1:]    # from cephlat.x import y
        else:
            continue
        for a in n.names:
            # `from ..engine import native` imports a module
            sub = mod + [a.name]
            if os.path.exists(os.path.join(LIB, *sub) + ".py"):
                out.add(".".join(sub))
            else:
                out.add(".".join(mod))
    return out


def _package(rel):
    return rel.split("/")[0] if "/" in rel else rel[:-len(".py")]


def _back_imports():
    found = set()
    for dp, _, files in os.walk(LIB):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dp, f)
            rel = os.path.relpath(path, LIB).replace(os.sep, "/")
            pkg = _package(rel)
            assert pkg in MAY, "%s: a package the layers do not name" % rel
            if MAY[pkg] is None:
                continue
            for mod in _imports(path, rel):
                top = mod.split(".")[0]
                if top in (pkg, "") or top in MAY[pkg] or mod in MAY[pkg]:
                    continue
                found.add((rel, mod))
    return found


def test_no_import_runs_back_up():
    found = _back_imports()
    assert found - KNOWN == set(), "imports against the layers: %s" % \
        sorted(found - KNOWN)
    assert KNOWN - found == set(), "mended: take these off KNOWN: %s" % \
        sorted(KNOWN - found)


def test_the_table_is_the_docs_and_names_every_package():
    assert set(MAY) >= {"errors", "clocks", "abi", "ceph", "model",
                        "engine", "capture", "render", "send", "exporter",
                        "rbd", "cli", "__init__"}, sorted(MAY)
    # live ops are rendered as `osdstage -r --otlp` renders them and
    # posted with the same code, by the exporter and a live osdstage alike
    assert {"render", "send"} <= MAY["livetraces"]
    assert "livetraces" in MAY["exporter"]
    assert MAY["send"] == {"errors"}
    assert MAY["cli"] is None and MAY["errors"] == set()
    assert MAY["abi"] == {"errors"} and MAY["model"] == {"abi"}


def test_absolute_imports_are_seen(tmp_path):
    lib = tmp_path / "render"
    lib.mkdir()
    f = lib / "x.py"
    f.write_text("import cephlat.engine.tracer\n"
                 "from cephlat.capture import ctf\n"
                 "def g():\n    from ..model import hist\n")
    got = _imports(str(f), "render/x.py")
    assert {"engine.tracer", "model.hist"} <= got
    assert any(m.startswith("capture") for m in got), got


# parameters named "args" below cli/ that hold no command line: (module,
# function) -> what it is
NOT_A_COMMAND_LINE = {
    ("rbd/cacheconf.py", "_conf_path"): "the client's CEPH_ARGS string",
    ("rbd/cacheconf.py", "_client_name"): "the client's CEPH_ARGS string",
    ("render/perfetto.py", "slice"): "a trace event's args object",
}


def _below_cli():
    for d, _, files in os.walk(LIB):
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(d, f), LIB)
            if f.endswith(".py") and not rel.startswith("cli" + os.sep):
                yield rel


def test_nothing_below_the_command_lines_reads_argparse_arguments():
    """The command lines (cli/) turn their options into values and small
    option objects (render/options.py, exporter/config.py, rbd's
    RecordTarget and FioJob, the engine's Want): no module below them
    imports argparse or takes a parameter named args."""
    found = []
    for rel in _below_cli():
        with open(os.path.join(LIB, rel)) as f:
            tree = ast.parse(f.read(), rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(
                    a.name == "argparse" for a in node.names) or \
                    isinstance(node, ast.ImportFrom) and \
                    node.module == "argparse":
                found.append((rel, "imports argparse"))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [p.arg for p in a.posonlyargs + a.args +
                         a.kwonlyargs]
                if "args" in names and \
                        (rel, node.name) not in NOT_A_COMMAND_LINE:
                    found.append((rel, node.name))
    assert found == []
    # and the exemptions still exist (a stale one hides nothing)
    seen = set()
    for rel, fn in NOT_A_COMMAND_LINE:
        with open(os.path.join(LIB, rel)) as f:
            tree = ast.parse(f.read(), rel)
        seen |= {(rel, n.name) for n in ast.walk(tree)
                 if isinstance(n, ast.FunctionDef) and "args" in
                 [p.arg for p in n.args.args + n.args.kwonlyargs]}
    assert seen == set(NOT_A_COMMAND_LINE)
