"""Which probe table entry a ceph-osd gets: its version is read from the
binary (never by running it), an exact entry is used as it is, a newer
release takes the newest entry whose every function resolves (with a
notice), an unknown older one is refused with the known releases."""
import os
import shutil

import pytest

from cephlat.ceph import probetable
from cephlat.engine.elfsym import ElfSymbols
from cephlat.engine.plan import choose_release
from cephlat.errors import UserError

from conftest import need

OSD = "/usr/bin/ceph-osd"


@pytest.fixture(scope="module")
def pacific():
    need(os.path.exists(OSD), "ceph-osd not installed (make setup)")
    with ElfSymbols(OSD) as elf:
        yield elf


def test_version_is_read_from_the_binary(pacific):
    assert pacific.version_string().startswith("16.2.")


def test_exact_entry(pacific):
    c = choose_release(pacific, pacific.version_string())
    assert (c.release.key, c.exact, c.notice) == ("16.2", True, None)
    c = choose_release(pacific, None, forced="16.2")
    assert (c.release.key, c.exact) == ("16.2", True)


def test_newer_release_takes_the_newest_entry_that_resolves(pacific):
    c = choose_release(pacific, "99.1.0")
    newest = probetable.newest_first()[0]
    assert (c.release.key, c.exact) == (newest.key, False)
    assert "Ceph 99.1.0 is newer than the probe table" in c.notice
    assert "using the %s (%s) entry" % (newest.key, newest.name) in c.notice


def test_older_unknown_release_is_refused(pacific):
    with pytest.raises(UserError) as e:
        choose_release(pacific, "14.2.22")
    assert "Ceph 14.2.22 has no probe table; known releases: 15.2 " \
        "(octopus), 16.2 (pacific)" in str(e.value)
    with pytest.raises(UserError) as e:
        choose_release(pacific, None, what="ceph-osd 42")
    assert "cannot tell the Ceph release of ceph-osd 42" in str(e.value)
    assert "--release X.Y" in str(e.value)


def test_a_made_up_newer_binary(pacific, tmp_path):
    """The same binary with its embedded version changed: detected as the
    newer release, served by the newest entry that resolves."""
    copy = tmp_path / "ceph-osd"
    shutil.copyfile(OSD, copy)
    data = bytearray(copy.read_bytes())
    old = pacific.version_string().encode()
    at = data.find(old + b"\0ceph version \0")
    assert at > 0
    new = b"99.1.0".rjust(len(old), b"_")
    data[at:at + len(old)] = new
    copy.write_bytes(bytes(data))
    with ElfSymbols(str(copy)) as elf:
        assert elf.version_string() == "99.1.0"
        c = choose_release(elf, elf.version_string())
    assert not c.exact and c.release is probetable.newest_first()[0]
