"""The argument positions and OpRequest offsets osdstage relies on, checked
against the real ceph-osd's DWARF (Debian's ceph-osd-dbg) with gdb."""
import os
import re
import shutil
import subprocess

import pytest

from cephlat.ceph import probetable
from cephlat.engine.elfsym import ElfSymbols

from conftest import gdb_offsets, need

OSD = "/usr/bin/ceph-osd"
ARG_REGS = ["rdi", "rsi", "rdx", "rcx", "r8", "r9"]
# x86-64 DWARF register numbers used in DW_OP_bregN
BREG = {5: "rdi", 4: "rsi", 1: "rdx", 2: "rcx", 8: "r8", 9: "r9"}


def _build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True,
                         text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def gdb_out():
    need(os.path.exists(OSD), "ceph-osd not installed (make setup)")
    need(shutil.which("gdb") is not None, "gdb not installed (make setup)")
    bid = _build_id(OSD)
    dbg = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    need(os.path.exists(dbg), "no debug info for ceph-osd (apt-get install "
         "ceph-osd-dbg)")
    rel = probetable.RELEASES["16.2"]
    addrs = {}
    with ElfSymbols(OSD) as elf:
        for role, f in rel.funcs.items():
            if f.op_arg:
                addrs[role] = elf.find(f.qualified, f.params)[0].addr
    cmds = ["ptype /o OpRequest", "print (int)CEPH_OSD_RMW_FLAG_READ",
            "print (int)CEPH_OSD_RMW_FLAG_WRITE"]
    for role, a in addrs.items():
        cmds += ["echo @@%s\\n" % role, "info scope *0x%x" % a]
    return gdb_offsets(OSD, OFFSETS, *cmds)[0]


# the probe table's per-release offsets (and what the BPF side assumes of
# osd_reqid_t and std::string), as DWARF expressions
OFFSETS = {
    "reqid_off": "&((OpRequest*)0)->reqid",
    "src_num_off": "&((OpRequest*)0)->req_src_inst.name._num",
    "inprog_op_off": "&((ReplicatedBackend::InProgressOp*)0)->op",
    "repmod_op_off": "&((ReplicatedBackend::RepModify*)0)->op",
    "msg_off": "&((OpRequest*)0)->request",
    "deq_time_off": "&((OpRequest*)0)->dequeued_time",
    "msg_stamps_off": "&((Message*)0)->recv_stamp",
    "msg.dispatch_stamp": "&((Message*)0)->dispatch_stamp",
    "msg.throttle_stamp": "&((Message*)0)->throttle_stamp",
    "msg.recv_complete_stamp": "&((Message*)0)->recv_complete_stamp",
    "msg_type_off": "&((Message*)0)->header.type",
    "msg.priority": "&((Message*)0)->header.priority",
    "utime.tv_nsec": "&((utime_t*)0)->tv.tv_nsec",
    "op_name_off": "&((MOSDOp*)0)->hobj.oid.name",
    "repop_name_off": "&((MOSDRepOp*)0)->poid.oid.name",
    "reqid._num": "&((osd_reqid_t*)0)->name._num",
    "reqid.tid": "&((osd_reqid_t*)0)->tid",
    "reqid.inc": "&((osd_reqid_t*)0)->inc",
    "string.len": "&((std::string*)0)->_M_string_length",
    "string.buf": "&((std::string*)0)->_M_local_buf",
    # OpTracker's events (struct opt_event of probes/osdstage.h)
    "events_off": "&((OpRequest*)0)->events",
    "opt_event.str": "&((TrackedOp::Event*)0)->str",
    "opt_event.size": "sizeof(TrackedOp::Event)",
    # erasure-coded writes: the sub-write's transaction and request id,
    # the shard's reply's transaction
    "ecsw_tid_off": "&((ECSubWrite*)0)->tid",
    "ecsw_reqid_off": "&((ECSubWrite*)0)->reqid",
    "ecrep_tid_off": "&((ECSubWriteReply*)0)->tid",
    # erasure-coded reads: the read's transaction and client op, the
    # shard's reply's transaction
    "ecro_tid_off": "&((ECBackend::ReadOp*)0)->tid",
    "ecro_op_off": "&((ECBackend::ReadOp*)0)->op",
    "ecrr_tid_off": "&((ECSubReadReply*)0)->tid",
}


def _entry_location(scope_text, symbol):
    """Location of `symbol` at the function's first address."""
    m = re.search(r"Symbol %s is (.*?)(?=\nSymbol |\Z)" % symbol, scope_text,
                  re.S)
    assert m, "no symbol %s in:\n%s" % (symbol, scope_text[:2000])
    body = m.group(1)
    if body.startswith("a variable in $"):
        return ("reg", body.split("$")[1].split(",")[0].split()[0])
    first = re.search(r"Range 0x[0-9a-f]+-0x[0-9a-f]+: (.*?)(?=\n  (Range|Base)|\Z)",
                      body, re.S).group(1)
    r = re.match(r"a variable in \$(\w+)", first)
    if r:
        return ("reg", r.group(1))
    b = re.search(r"DW_OP_breg(\d+) 0 \[\$(\w+)\]", first)
    if b:
        return ("at", b.group(2))       # object lives at the address in reg
    raise AssertionError("unexpected location for %s: %s" % (symbol, first))


def test_rmw_flags_offset_and_bits(gdb_out):
    off, rd, wr = probetable.RELEASES["16.2"].rmw
    m = re.search(r"/\*\s+(\d+)\s+\|\s+(\d+) \*/\s+uint64_t rmw_flags;", gdb_out)
    assert m, gdb_out[:3000]
    assert int(m.group(1)) == off
    assert int(m.group(2)) == 8          # read as its low 32 bits (LE)
    assert "$1 = %d" % rd in gdb_out and "$2 = %d" % wr in gdb_out


def test_replica_offsets(gdb_out):
    """reqid, the sender's OSD id, the ops held by Ceph's in-progress and
    replica-op records, the message and object names: as in the table."""
    got = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"@@off (\S+)\n\$\d+ = (\d+)", gdb_out)}
    assert set(got) == set(OFFSETS), gdb_out[-3000:]
    table = probetable.RELEASES["16.2"].offsets
    for name in OFFSETS:
        if name in table:
            assert got[name] == table[name], name
    # read_reqid() and read_object() of probes/osdstage/ops.bpf.h
    assert (got["reqid._num"], got["reqid.tid"], got["reqid.inc"],
            got["string.len"]) == (8, 16, 24, 8)
    # queued_stamp() reads OpTracker's events as struct opt_event: the
    # stamp, then the name (data pointer, length, inline buffer)
    assert (got["opt_event.str"], got["opt_event.size"],
            got["string.buf"]) == (8, 40, 16)
    # struct msg_stamps of probes/osdstage.h: recv, dispatch, throttle,
    # recv_complete, each {u32 sec; u32 nsec}
    base = got["msg_stamps_off"]
    assert [got["msg.dispatch_stamp"] - base, got["msg.throttle_stamp"] -
            base, got["msg.recv_complete_stamp"] - base,
            got["utime.tv_nsec"]] == [8, 16, 24, 4]
    # op_enqueue reads the header's type and priority as two __u16
    assert got["msg.priority"] - got["msg_type_off"] == 2


# the parameter that holds what the cookie points the program at: the op,
# or Ceph's record of it (rep_submit takes the thread's op: no argument)
PARAM = {"op_commit": "op", "repop_commit": "rm"}


def test_op_argument_positions(gdb_out):
    rel = probetable.RELEASES["16.2"]
    sections = dict(re.findall(r"@@(\w+)\n(.*?)(?=@@|\Z)", gdb_out, re.S))
    checked = 0
    for role, f in rel.funcs.items():
        if not f.op_arg:
            continue
        arg, deref = f.op_arg
        kind, reg = _entry_location(sections[role], PARAM.get(role, "op"))
        assert reg == ARG_REGS[arg - 1], (role, kind, reg)
        if kind == "at":
            # a by-value smart pointer passed by invisible reference: the
            # register points at the intrusive_ptr, whose first word is the
            # OpRequest*
            assert deref, role
        else:
            # a reference parameter: to the smart pointer (deref) or to the
            # OpRequest itself (no deref)
            params = f.params.pattern
            assert deref == ("intrusive_ptr<" in params), role
        checked += 1
    assert checked == 6
