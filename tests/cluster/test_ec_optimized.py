"""Tentacle's optimized erasure-coded backend (20.2: a pool that allows
it, `ceph osd pool set POOL allow_ec_optimizations true`, runs ECSwitch's
new ECBackend instead of ECLegacy::ECBackendL): on the 3-OSD Tentacle
container lab's k=2 m=1 pool, its writes wait on every shard and its
reads on the shards holding the extent, as Ceph's op_w and op_r count
them -- the same checks as the legacy backend's (test_ec_containers.py),
through the probe table's "_opt" roles. bpftrace shows which backend
served the writes: the optimized one's handle_sub_write only."""
import re
import subprocess
import threading

import pytest

from test_ec import K, _traced, check_reads
from test_ec_containers import POOL, _bench, _up, check_writes

from conftest import lab_run

SUB_WRITE = {"legacy": "ECLegacy::ECBackendL::handle_sub_write(",
             "optimized": "ECBackend::handle_sub_write("}


@pytest.fixture(scope="module")
def ec_opt(lab3_tentacle):
    """The EC pool with the optimized backend allowed (a pool cannot go
    back: the lab's replicated image and a new pool afterwards), objects
    in it."""
    lab = lab3_tentacle
    _up(lab, POOL)
    try:
        p = lab_run(lab, "ceph", "osd", "pool", "set", "rbd-ec",
                    "allow_ec_optimizations", "true")
        assert p.returncode == 0, p.stderr
        _bench(lab, "4", "write", "-b", "4096", "-t", "8", "--no-cleanup")
        yield lab
    finally:
        _up(lab)


def _mangled(binary):
    """{backend: mangled name of its handle_sub_write} from the binary's
    dynamic symbols (both are exported)."""
    out = {}
    nm = subprocess.run(["nm", "-D", "--defined-only", binary],
                        capture_output=True, text=True, check=True).stdout
    dem = subprocess.run(["c++filt"], input=nm, capture_output=True,
                         text=True, check=True).stdout
    for raw, pretty in zip(nm.splitlines(), dem.splitlines()):
        for backend, head in SUB_WRITE.items():
            if pretty.split(None, 2)[-1].startswith(head):
                out[backend] = raw.split()[-1]
    assert sorted(out) == sorted(SUB_WRITE), out
    return out


def _sub_write_hits(lab, run):
    """run() under bpftrace counting each backend's handle_sub_write in
    every OSD. -> {backend: hits}"""
    binary = "/proc/%d/root/usr/bin/ceph-osd" % lab["pid"]
    names = _mangled(binary)
    prog = " ".join("uprobe:%s:%s { @%s = count(); }" % (binary, sym, b)
                    for b, sym in names.items())
    bt = subprocess.Popen(["bpftrace", "-e", prog], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(bt.stdout))
    reader.start()
    try:
        for _ in range(600):
            if any("Attaching" in x for x in lines):
                break
            assert bt.poll() is None, lines
            threading.Event().wait(0.1)
        run()
    finally:
        bt.send_signal(2)
        bt.wait(timeout=60)
        reader.join(timeout=60)
    hits = {b: 0 for b in SUB_WRITE}
    for x in lines:
        m = re.match(r"@(\w+): (\d+)", x)
        if m:
            hits[m.group(1)] = int(m.group(2))
    return hits


def test_the_optimized_backend_serves_the_writes(ec_opt):
    hits = _sub_write_hits(ec_opt, lambda: _bench(
        ec_opt, "2", "write", "-b", "4096", "-t", "8", "--no-cleanup"))
    assert hits["optimized"] > 100 and hits["legacy"] == 0, hits


@pytest.mark.parametrize("run", range(3))
def test_each_write_waits_on_every_shard(ec_opt, run):
    check_writes(*_traced(ec_opt, lambda: _bench(ec_opt, "3", "write", "-b",
                                                 "4096", "-t", "8",
                                                 "--no-cleanup")))


@pytest.mark.parametrize("run", range(3))
def test_each_read_waits_on_its_shards(ec_opt, run):
    """Reads of the pool's 4 KiB objects: from the shard holding the
    extent (at most K)."""
    rec, dumps = _traced(ec_opt, lambda: _bench(ec_opt, "3", "rand", "-t",
                                                "8"))
    assert check_reads(rec, dumps, (1, K))
