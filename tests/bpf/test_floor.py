"""BPF tier: bench/floor.py, the floor of a uprobe hit, runs here and its
probes land where it says: every kind measured once, the kernel's int3 at
the kind's offset, the 5-byte nop rewritten into a call where the kernel
has the uprobe syscall (the first bytes read back from the target's own
code at the end of its run, probes still in)."""
import os
import sys

from conftest import REPO, need

sys.path.insert(0, os.path.join(REPO, "bench"))
import floor                                     # noqa: E402


def kernel_has(symbol):
    with open("/proc/kallsyms") as f:
        return any(line.split()[2] == symbol for line in f)


def test_every_kind_measured_and_nop5_rewritten():
    need(os.geteuid() == 0, "needs root")
    res = floor.measure(rounds=1, calls=20000)
    assert set(res["kinds"]) == set(floor.KINDS)
    for kind, r in res["kinds"].items():
        assert r["base_ns_per_call"] > 0, (kind, r)
        code = bytes.fromhex(r["first_bytes_after"])
        at = floor.KINDS[kind][1]
        if kind != "nop5" or not r["optimized"]:
            assert code[at] == 0xcc, (kind, r)      # int3, where it says
    assert res["kinds"]["nop5"]["optimized"] == kernel_has(
        "__x64_sys_uprobe"), res["kinds"]["nop5"]
    lines = floor.render(res, {"pacific": 0.85})
    assert any(line.startswith("| nop5 |") for line in lines)
    assert any("pacific" in line and "| 850 |" in line for line in lines)
