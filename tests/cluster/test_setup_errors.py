"""An install step that fails says which step and shows the tool's own
error lines (apt's, mmdebstrap's), not only make's "Error 100"."""
import os
import subprocess

from conftest import CONTAINER_LAB, REPO, need


def test_setup_shows_apt_error():
    need(os.geteuid() == 0, "needs root")
    p = subprocess.run(["make", "-s", "-C", REPO, "setup",
                        "PKGS=osdstage-no-such-package"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode != 0
    assert "step 'apt-get-install' failed" in p.stderr, p.stderr
    assert "E: Unable to locate package osdstage-no-such-package" in \
        p.stderr, p.stderr
    assert "/var/log/osdstage/apt-get-install.log" in p.stderr


def test_rootfs_build_shows_mmdebstrap_error(tmp_path):
    need(os.geteuid() == 0, "needs root")
    # a mirror that refuses connections (nothing listens on port 9)
    env = dict(os.environ, OSDSTAGE_ROOTFS_DIR=str(tmp_path),
               OSDSTAGE_MIRROR="http://127.0.0.1:9/debian",
               LAB_LOG_ROOT=str(tmp_path / "log"))
    p = subprocess.run(["bash", CONTAINER_LAB, "reef", "install"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode != 0
    assert "step 'rootfs-reef' failed" in p.stderr, p.stderr
    assert "mmdebstrap" in p.stderr
    assert "E: " in p.stderr, p.stderr             # mmdebstrap's own lines
    assert not list(tmp_path.glob("*.tar")), list(tmp_path.iterdir())
