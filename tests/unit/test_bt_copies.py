"""The bpftrace scripts cannot read the header: where one repeats what
the BPF side defines (a device number's minor bits, the futex operations
that are waits, the offsets of a request id), it is held to the source
here, so that a change on one side fails until the other follows."""
import os
import re

import pytest

from conftest import BUILD, REPO, need
from cephlat import abi

PROBES = os.path.join(REPO, "probes")


def _read(name):
    with open(os.path.join(PROBES, name)) as f:
        return f.read()


def _defines(text):
    return {m.group(1): int(m.group(2), 0) for m in re.finditer(
        r"^#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)", text, re.M)}


@pytest.fixture(scope="module")
def limits():
    need(os.path.exists(os.path.join(BUILD, "osdstage.abi.json")),
         "BPF objects not built (run: make)")
    return dict(abi.load("osdstage", BUILD).enums["osdstage_limits"])


def test_blockrq_splits_a_device_number_as_the_header_does(limits):
    bits = limits["DEV_MINOR_BITS"]
    bt = _read("blockrq.bt")
    shifts = re.findall(r"args->dev\s*>>\s*(\d+)", bt)
    masks = re.findall(r"args->dev\s*&\s*(0x[0-9a-fA-F]+)", bt)
    assert shifts and masks
    assert {int(s) for s in shifts} == {bits}
    assert {int(m, 16) for m in masks} == {(1 << bits) - 1}


def test_futexwait_counts_the_waits_the_probes_count():
    h = _read("osdstage/sched.bpf.h")
    d = _defines(h)
    body = re.search(r"futex_is_wait\(__u64 op\)\s*\{(.*?)\n\}", h,
                     re.S).group(1)
    waits = {d[n] for n in re.findall(r"op == (FUTEX_\w+)", body)}
    bt = _read("futexwait.bt")
    assert {int(k) for k in re.findall(r"\$op == (\d+)", bt)} == waits
    assert {int(m, 16) for m in re.findall(
        r"args->op & (0x[0-9a-fA-F]+)", bt)} == {d["FUTEX_CMD_MASK"]}


_SIZES = {"__u8": 1, "__s8": 1, "__u16": 2, "__s16": 2, "__u32": 4,
          "__s32": 4, "__u64": 8, "__s64": 8}


def _layout(members):
    """'__u8 type; __u8 pad[7]; __u64 num' -> {name: offset} (natural
    alignment, as the C compiler lays them out)."""
    out, at = {}, 0
    for m in members.split(";"):
        m = m.strip()
        if not m:
            continue
        typ, name = m.split()
        size = _SIZES[typ]
        n = 1
        arr = re.match(r"(\w+)\[(\d+)\]", name)
        if arr:
            name, n = arr.group(1), int(arr.group(2))
        at = (at + size - 1) // size * size
        out[name] = at
        at += size * n
    return out


def test_osdstages_reads_a_request_id_where_the_probes_do():
    src = _read("osdstage/ops.bpf.h")
    raw = re.search(r"struct \{ (__u8 type;[^}]*)\} raw;", src).group(1)
    off = _layout(raw)
    bt = _read("osdstages.bt")
    num = re.findall(r"\$num = \*\(int64 \*\)\(\$\w+ \+ \$19 \+ (\d+)\)", bt)
    rid = re.findall(r"\$rid = \*\(uint64 \*\)\(\$\w+ \+ \$19 \+ (\d+)\)",
                     bt)
    assert num and rid
    assert {int(x) for x in num} == {off["num"]}
    assert {int(x) for x in rid} == {off["tid"]}
