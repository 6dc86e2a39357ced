"""The lab's files are valid as written (Vagrant itself cannot run here)."""
import os
import shutil
import subprocess

from conftest import LAB, REPO, need


def test_vagrantfile_is_valid_ruby():
    need(shutil.which("ruby") is not None, "ruby not installed (make setup)")
    p = subprocess.run(["ruby", "-c", os.path.join(REPO, "vagrant",
                                                   "Vagrantfile")],
                       capture_output=True, text=True)
    assert p.returncode == 0 and "Syntax OK" in p.stdout, p.stderr


def test_vagrantfile_provisions_with_the_lab_script():
    text = open(os.path.join(REPO, "vagrant", "Vagrantfile")).read()
    assert "lab.sh" in text
    assert "vagrant-mon" in text and "vagrant-osd" in text


def test_lab_script_parses_and_has_usage():
    assert subprocess.run(["bash", "-n", LAB]).returncode == 0
    p = subprocess.run(["bash", LAB, "no-such-command"], capture_output=True,
                       text=True)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr and p.stderr.strip()


def test_ci_runs_make_test_only():
    text = open(os.path.join(REPO, ".ci", "run")).read()
    cmds = [l for l in text.splitlines() if l.strip() and
            not l.lstrip().startswith("#") and not l.startswith("set ") and
            not l.startswith("cd ")]
    assert cmds == ["exec make test"]


def test_readme_starts_with_demo_and_test():
    text = open(os.path.join(REPO, "README.md")).read()
    first_block = text.split("```")[1]
    cmds = [l.split("#")[0].strip() for l in first_block.splitlines()]
    assert [c for c in cmds if c and c != "sh"] == ["make demo", "make test"]
