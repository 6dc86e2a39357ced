"""Where the package finds the build's files: beside itself when installed
(`make install`, the .deb: PREFIX/lib/osdstage holds the package, the BPF
objects, their ABI files, the .so files and probes/*.bt), else in the
checkout's build/ and probes/; OSDSTAGE_BPF_DIR overrides."""
import os
import shutil
import subprocess
import sys

from conftest import REPO

SHOW = ("import sys; sys.path.insert(0, sys.argv[1]); "
        "from cephlat import abi; from cephlat.engine import btargs; "
        "print(abi.default_bpf_dir()); print(btargs.SCRIPT)")


def where(top, **env):
    e = {k: v for k, v in os.environ.items() if k != "OSDSTAGE_BPF_DIR"}
    e.update(env)
    p = subprocess.run([sys.executable, "-c", SHOW, top], capture_output=True,
                       text=True, env=e, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_the_checkout_uses_build_and_probes():
    assert where(os.path.join(REPO, "lib")) == [
        os.path.join(REPO, "build"),
        os.path.join(REPO, "probes", "osdstages.bt")]


def test_an_installed_copy_looks_beside_itself(tmp_path):
    top = tmp_path / "lib" / "osdstage"
    shutil.copytree(os.path.join(REPO, "lib", "cephlat"), top / "cephlat",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (top / "osdstage.abi.json").write_text("{}")
    (top / "probes").mkdir()
    (top / "probes" / "osdstages.bt").write_text("")
    assert where(str(top)) == [str(top), str(top / "probes" / "osdstages.bt")]
    assert where(str(top), OSDSTAGE_BPF_DIR="/elsewhere")[0] == "/elsewhere"
