"""The layers of docs/architecture.md hold: a package imports only the
packages below it. Read from the source (ast), not from a run, so a
lazy import inside a function counts too. The few imports that still run
back up are listed with why; a new one fails here, and mending one fails
here too until it leaves the list (the list only shrinks)."""
import ast
import os

from conftest import REPO

LIB = os.path.join(REPO, "lib", "cephlat")

# package -> the packages it may import (docs/architecture.md's table;
# rbd: rbdrecord's recorder, beside the capture layer)
MAY = {
    "errors": set(),
    "clocks": {"errors"},
    "abi": {"errors"},
    "ceph": {"errors"},
    "model": {"abi", "errors"},
    "engine": {"abi", "ceph", "model", "errors", "clocks"},
    "capture": {"abi", "model", "errors", "engine.native", "clocks"},
    "render": {"model", "errors"},
    "exporter": {"abi", "ceph", "engine", "model", "errors"},
    "rbd": {"abi", "ceph", "capture", "engine", "model", "errors",
            "clocks"},
    "cli": None,                      # everything
    "__init__": set(),
}

# (module, what it imports): the imports that still run back up (none
# now: a new one must say here why it cannot be mended)
KNOWN = set()


def _imports(path, rel):
    """-> the lib/cephlat modules `path` imports, as 'pkg.mod'"""
    here = rel.split("/")[:-1]
    out = set()
    for n in ast.walk(ast.parse(open(path).read(), path)):
        if not isinstance(n, ast.ImportFrom) or not n.level:
            continue
        base = here[:len(here) - (n.level - 1)]
        mod = base + (n.module.split(".") if n.module else [])
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
