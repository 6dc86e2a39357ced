"""`make setup` is idempotent: on a set-up machine it installs and prints
nothing, and tracefs stays mounted."""
import os
import subprocess

from conftest import REPO, need


def test_setup_twice_does_nothing(bpf_ready):
    need(os.geteuid() == 0, "needs root")
    p = subprocess.run(["make", "-s", "-C", REPO, "setup"], capture_output=True,
                       text=True, timeout=1200)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(["make", "-s", "-C", REPO, "setup"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "" and p.stderr.strip() == "", (p.stdout,
                                                                p.stderr)
    assert os.path.isdir("/sys/kernel/tracing/events")


def test_setup_container_release_twice_does_nothing(bpf_ready):
    """With the release's root filesystem cached (make test's setup builds
    it), `make setup CEPH=reef` is silent too."""
    need(os.geteuid() == 0, "needs root")
    for _ in range(2):
        p = subprocess.run(["make", "-s", "-C", REPO, "setup", "CEPH=reef"],
                           capture_output=True, text=True, timeout=1200)
        assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "" and p.stderr.strip() == "", (p.stdout,
                                                                p.stderr)
