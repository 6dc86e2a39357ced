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


def _ready(states, osds=1):
    """lab.sh's cluster_not_ready_reason on a status with these PG states
    ({state: count}), `ceph` answered by a shell function. -> (ready,
    reason)"""
    import json
    status = {"osdmap": {"num_osds": osds, "num_up_osds": osds,
                         "num_in_osds": osds},
              "pgmap": {"num_pgs": sum(states.values()),
                        "pgs_by_state": [{"state_name": k, "count": v}
                                         for k, v in states.items()]}}
    script = ("source %s\ncephc() { printf '%%s' \"$STATUS\"; }\n"
              "cluster_not_ready_reason %d" % (LAB, osds))
    p = subprocess.run(["bash", "-c", script], capture_output=True,
                       text=True, env=dict(os.environ,
                                           STATUS=json.dumps(status)))
    return p.returncode == 0, p.stdout.strip()


def test_ready_means_clean_pgs_not_stale_ones():
    """A clean PG trimming snapshots or scrubbing is ready; a stale one
    (its OSD has not reported it since a restart) or a degraded one is
    not."""
    assert _ready({"active+clean": 16}) == (True, "")
    assert _ready({"active+clean": 15, "active+clean+snaptrim": 1})[0]
    assert _ready({"active+clean": 15,
                   "active+clean+scrubbing+deep": 1})[0]
    for bad in ("stale+active+clean", "active+undersized+degraded",
                "peering"):
        ok, why = _ready({"active+clean": 15, bad: 1})
        assert not ok and "15/16 active+clean" in why and bad in why, why
