"""The suite itself: pytest imports test modules by their basename (the
tiers' directories are not packages), so two test files of one name in
different tiers stop the whole collection of `make test` before any test
runs."""
import collections
import os

from conftest import REPO


def test_every_test_module_has_a_name_of_its_own():
    seen = collections.defaultdict(list)
    for d, _, files in os.walk(os.path.join(REPO, "tests")):
        for f in files:
            if f.endswith(".py") and (f.startswith("test_") or
                                      f == "conftest.py"):
                seen[f].append(os.path.relpath(os.path.join(d, f), REPO))
    twice = {f: paths for f, paths in seen.items()
             if len(paths) > 1 and f != "conftest.py"}
    assert twice == {}
