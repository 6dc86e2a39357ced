"""The client library's Objecter, per release: the two functions the client
recorder probes (rbdrecord's OSD ops) and the struct offsets its programs
read (probes/rbdrecord.bpf.c's obj_* / op_* / msg_* globals).

Each OSD op a librados / librbd client sends goes through
Objecter::_send_op(Op*) (every attempt: a resend after a map change calls
it again) and its reply through Objecter::handle_osd_op_reply(MOSDOpReply*),
which runs the op's completion before it returns. The OSD names the op
client.<global id>.<client_inc>:<tid> (osd_reqid_t of the MOSDOp): the
entity number is the client messenger's my_name, the incarnation the
Objecter's client_inc, the tid the Op's.

Offsets: from the release's DWARF (Debian's librados2-dbg, which holds
libceph-common's debug info), checked by tests/cluster/test_objecter.py
with gdb (Pacific's on the host, Reef's and Tentacle's in their container
labs), and on a live client by tests/cluster/test_client_osdops.py (the
3-host lab) and test_client_releases.py (a client in each container lab):
request ids equal to those the OSD logs. A release without checked
offsets records no OSD ops (the librbd calls still are). Where the
recorder finds them in a client: lib/cephlat/rbd/ebpf.py (ObjecterSite).
"""
# role -> (qualified name, parameter pattern)
FUNCS = {
    "send": ("Objecter::_send_op", r"^Objecter::Op\*$"),
    "reply": ("Objecter::handle_osd_op_reply", r"^MOSDOpReply\*$"),
}

# where the Objecter is, in the order searched: libceph-common exports
# it; Pacific and Reef also link a hidden copy into librados and one into
# librbd, Tentacle does not (its librados2-dbg and librbd1-dbg list none)
LIBS = ("libceph-common", "librados", "librbd")

# Ceph 16.2.15 (Debian 12's librados2 / libceph-common2):
#   Objecter: messenger 24, client_inc 148 (std::atomic<int>)
#   Messenger: my_name 176 (entity_name_t: _type u8, _num s64 at +8)
#   Objecter::Op: target 40 (op_target_t: flags 0, target_oid 120,
#     actual_pgid 272 (spg_t: pg_t m_pool u64, m_seed u32), osd 400),
#     ops 464 (osdc_opvec: boost small_vector<OSDOp, 2>, 328 bytes: its
#     data pointer, then its size; OSDOp 152 bytes, ceph_osd_op first),
#     tid 1144, attempts 1152
#   Message: header 24 (ceph_msg_header: tid 8, src 36 (u8 type, le64 num))
_PACIFIC = {"obj_msgr_off": 24, "obj_inc_off": 148, "msgr_name_off": 176,
            "op_flags_off": 40, "op_oid_off": 160, "op_pgid_off": 312,
            "op_osd_off": 440, "op_tid_off": 1144, "op_attempts_off": 1152,
            "op_ops_off": 464, "osdop_size": 152,
            "msg_tid_off": 32, "msg_src_off": 60}

# Ceph 18.2.7 (Debian 13) and 20.2.4 (Debian sid): the same but for
# Messenger::my_name (64), and on 20.2 the Objecter's client_inc (164),
# Op::tid and attempts (1064, 1072: OSDOp shrank to 112 bytes, so did the
# ops vector's two inline OSDOps). Read from their librados2-dbg (which
# holds libceph-common's debug info) in the container labs
# (container.sh RELEASE client-debug; tests/cluster/test_objecter.py)
_REEF = dict(_PACIFIC, msgr_name_off=64)
_TENTACLE = dict(_REEF, obj_inc_off=164, op_tid_off=1064,
                 op_attempts_off=1072, osdop_size=112)

OFFSETS = {"16.2": _PACIFIC, "18.2": _REEF, "20.2": _TENTACLE}
# the libraries holding a copy, per release with offsets
COPIES = {"16.2": LIBS, "18.2": LIBS, "20.2": ("libceph-common",)}

# the DWARF expressions of each offset (tests/cluster/test_objecter.py)
DWARF = {
    "obj_msgr_off": "&((Objecter*)0)->messenger",
    "obj_inc_off": "&((Objecter*)0)->client_inc",
    "msgr_name_off": "&((Messenger*)0)->my_name",
    "msg_tid_off": "&((Message*)0)->header.tid",
    "msg_src_off": "&((Message*)0)->header.src",
    "osdop_size": "sizeof(OSDOp)",
}
# members of Objecter::Op (gdb cannot cast to the nested type: read from
# its `ptype /o`): offset name -> path of the member inside Op
OP_MEMBERS = {
    "op_flags_off": ("target", "flags"),
    "op_oid_off": ("target", "target_oid"),
    "op_pgid_off": ("target", "actual_pgid"),
    "op_osd_off": ("target", "osd"),
    "op_tid_off": ("tid",),
    "op_attempts_off": ("attempts",),
    "op_ops_off": ("ops",),
}

# CEPH_OSD_OP_* (include/rados.h, the wire protocol) of the sub-ops a
# block client sends, by Ceph's name (tests/cluster/test_objecter.py reads
# each from the DWARF); the events name them in lower case with dashes
OSD_OPS = {"CEPH_OSD_OP_READ": 0x1201, "CEPH_OSD_OP_STAT": 0x1202,
           "CEPH_OSD_OP_SPARSE_READ": 0x1205,
           "CEPH_OSD_OP_ASSERT_VER": 0x1208, "CEPH_OSD_OP_CMPEXT": 0x1220,
           "CEPH_OSD_OP_CALL": 0x1401, "CEPH_OSD_OP_WRITE": 0x2201,
           "CEPH_OSD_OP_WRITEFULL": 0x2202, "CEPH_OSD_OP_TRUNCATE": 0x2203,
           "CEPH_OSD_OP_ZERO": 0x2204, "CEPH_OSD_OP_DELETE": 0x2205,
           "CEPH_OSD_OP_APPEND": 0x2206, "CEPH_OSD_OP_CREATE": 0x220d,
           "CEPH_OSD_OP_SETALLOCHINT": 0x2223,
           "CEPH_OSD_OP_WRITESAME": 0x2226}
OSD_OP_LABELS = {v: k[len("CEPH_OSD_OP_"):].lower().replace("_", "-")
                 for k, v in OSD_OPS.items()}

# CEPH_OSD_FLAG_READ / _WRITE (include/rados.h)
FLAG_READ, FLAG_WRITE = 0x10, 0x20
