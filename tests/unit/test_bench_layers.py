"""bench/'s modules import one another without a cycle, and none imports
run.py (the command line, on top of them all); exporter_soak.py imports
labkit.py and its report, soak_render.py, only; soak_render.py labkit.py. Read from the source (ast), so an import inside a
function counts too."""
import ast
import os

from conftest import REPO

BENCH = os.path.join(REPO, "bench")


def _bench_imports():
    """{module: the bench modules it imports, anywhere in it}"""
    mods = {f[:-len(".py")] for f in os.listdir(BENCH) if f.endswith(".py")}
    out = {}
    for m in mods:
        path = os.path.join(BENCH, m + ".py")
        got = set()
        for n in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(n, ast.Import):
                got |= {a.name.split(".")[0] for a in n.names}
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                got.add(n.module.split(".")[0])
        out[m] = got & mods - {m}
    return out


def test_no_cycle_and_nothing_imports_run():
    graph = _bench_imports()
    assert not [m for m, deps in graph.items() if "run" in deps]
    assert graph["exporter_soak"] == {"labkit", "soak_render"}
    assert graph["soak_render"] == {"labkit"}
    assert graph["labkit"] == set()
    done, path = set(), []

    def visit(m):
        assert m not in path, "import cycle: %s" % " -> ".join(path + [m])
        if m in done:
            return
        path.append(m)
        for d in sorted(graph[m]):
            visit(d)
        path.pop()
        done.add(m)
    for m in sorted(graph):
        visit(m)
