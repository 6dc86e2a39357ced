"""The Ceph probe table: stage -> function(s) per Ceph release.

One table, one place. A release lists the OSD functions the stages use,
each matched by demangled qualified name plus a regular expression over the
demangled parameter list (so overloads and signature changes between
releases are explicit), and for op-keyed functions where the OpRequest*
is among the arguments.

Stage kinds:
  call - entry -> return of one function on the same thread
         (uprobe + uretprobe, keyed by thread)
  op   - between events of the same op, keyed by its OpRequest address
         (enqueue -> dequeue, enqueue -> completion): each event is a BPF
         program (op_enqueue, op_dequeue, op_done, ...) on a function

Some stages read Ceph's structures (a request id, a replica's OSD id, the
op held by a replicated write's records): the offsets are per release
(Release.offsets, .rodata globals of probes/osdstage.bpf.c) and a stage
whose offsets a release lacks is unavailable there (Stage.needs).
"""
import re
from collections import OrderedDict

# --- stages (names are a contract: docs/stages.md) ---------------------------
# The probed stages: how each is measured. Their ids and report order are
# enum stage_id of probes/osdstage.h (model/vocab.py reads them from the
# build; tests/unit/test_probetable.py checks that both name the same
# stages).
class Stage:
    def __init__(self, name, kind, doc, func=None, events=(), needs=(),
                 default=True, ends_at=None, also=(), extra=()):
        self.name, self.kind, self.doc = name, kind, doc
        self.func = func              # call: the function role
        # call: more functions whose calls are the same stage (overloads),
        # each probed where the binary has it; func alone decides whether
        # the stage is available
        self.also = tuple(also)
        self.events = events          # op: [(function role, BPF program)]
        # op: more events, each taken where the binary has its function
        # and the release the offsets it reads (the stage stands without
        # them): [(function role, BPF program, needs)]
        self.extra = tuple(extra)
        self.needs = needs            # per-release offsets it reads
        self.default = default        # traced without -S
        # call: ended by this (enclosing) call stage's return on the same
        # thread instead of a return probe of its own (one probe hit less
        # per op; the call structure guarantees the order)
        self.ends_at = ends_at

    def roles(self):
        return [self.func] if self.kind == "call" else [r for r, _ in self.events]


_OP_LIFE = [("enqueue_op", "op_enqueue"), ("dequeue_op", "op_dequeue")]

# Before the OSD's clock starts (op_total starts at enqueue_op): the op's
# message's own wall-clock stamps (Message::recv_stamp, throttle_stamp,
# recv_complete_stamp, OpTracker's header_read, throttled, all_read), read
# by op_enqueue: no probe hit of their own. What no stamp shows (docs/
# stages.md): the time a throttled connection's bytes wait in the socket.
_MSG = [("enqueue_op", "op_enqueue")]
_MSG_NEEDS = ("msg_off", "msg_stamps_off")
MESSENGER_STAGES = ("throttle_wait", "recv", "dispatch")

# Erasure-coded writes (ECBackend): the primary's submit_transaction is a
# replicated write's (the op's wait on its shards starts there: a partial
# stripe's reads, then the sub-writes); the sub-writes' transaction id
# links each shard's reply to the op (ECSubWrite and ECSubWriteReply
# carry it), the primary's own shard's reply is its local commit; on a
# shard the sub-write is a replica op.
_EC_NEEDS = ("ecsw_tid_off", "ecsw_reqid_off", "ecrep_tid_off")
_EC_PRIMARY = (("ec_submit", "rep_submit", _EC_NEEDS),
               ("ec_sub_write", "ec_sub_write", _EC_NEEDS),
               ("ec_reply", "ec_reply", _EC_NEEDS))
_EC_SHARD = (("ec_sub_write", "ec_sub_write", _EC_NEEDS),
             ("ec_committed", "ec_committed", _EC_NEEDS))
# Erasure-coded reads of client ops: do_read_op sends the sub-reads (the
# ReadOp holds the read's transaction and the client op),
# handle_sub_read_reply takes each shard's (the reply names the
# transaction), complete_read_op ends the read once all are in.
_EC_READ_NEEDS = ("ecro_tid_off", "ecro_op_off", "ecrr_tid_off")
_EC_READ = (("ec_read_start", "ec_read_start", _EC_READ_NEEDS),
            ("ec_read_reply", "ec_read_reply", _EC_READ_NEEDS),
            ("ec_read_done", "ec_read_done", _EC_READ_NEEDS))
# 20.2 has two EC backends behind its ECSwitch: the legacy one (every
# pool's, unless it allows the optimized one: allow_ec_optimizations) and
# the optimized one, whose functions are the same calls in other classes:
# each role's twin ("<role>_opt") takes the same program where the binary
# has it.
EC_OPT = "_opt"


def _twins(events):
    return events + tuple((role + EC_OPT, prog, needs)
                          for role, prog, needs in events)


_EC_PRIMARY, _EC_SHARD, _EC_READ = (_twins(e) for e in (
    _EC_PRIMARY, _EC_SHARD, _EC_READ))

STAGES = OrderedDict((s.name, s) for s in [
    Stage("throttle_wait", "op", "the op's message: header read -> the "
          "messenger's throttles passed (its recv_stamp -> throttle_stamp)",
          events=_MSG, needs=_MSG_NEEDS),
    Stage("recv", "op", "the op's message: throttles passed -> read in full "
          "(throttle_stamp -> recv_complete_stamp)",
          events=_MSG, needs=_MSG_NEEDS),
    Stage("dispatch", "op", "the op's message read in full -> dispatched -> "
          "OSD::enqueue_op (recv_complete_stamp -> enqueue)",
          events=_MSG, needs=_MSG_NEEDS),
    Stage("queue_wait", "op", "OSD::enqueue_op -> OSD::dequeue_op (same op)",
          events=[("enqueue_op", "op_enqueue"), ("dequeue_op", "op_dequeue")]),
    Stage("dequeue_op", "call", "OSD::dequeue_op entry -> return",
          func="dequeue_op"),
    # do_op runs inside dequeue_op (through PG::do_request) and dequeue_op
    # does next to nothing after it: its return ends do_op too
    Stage("do_op", "call", "PrimaryLogPG::do_op entry -> OSD::dequeue_op "
          "return (the enclosing call)", func="do_op", default=False,
          ends_at="dequeue_op"),
    Stage("get_object_context", "call",
          "PrimaryLogPG::get_object_context entry -> return",
          func="get_object_context", default=False),
    Stage("bluestore_read", "call", "BlueStore::read entry -> return",
          func="bluestore_read"),
    Stage("bluestore_submit", "call",
          "BlueStore::queue_transactions entry -> return",
          func="bluestore_submit"),
    Stage("op_total", "op",
          "OSD::enqueue_op -> PrimaryLogPG::log_op_stats (same op)",
          events=_OP_LIFE + [("log_op_stats", "op_done")]),
    Stage("execute", "op", "OSD::dequeue_op -> PrimaryLogPG::log_op_stats "
          "(same op: its execution, to completion)",
          events=_OP_LIFE + [("log_op_stats", "op_done")]),
    Stage("op_latency", "op", "the op's message header read -> "
          "PrimaryLogPG::log_op_stats: the op's latency as the OSD sees it "
          "(Ceph's op_r_latency / op_w_latency)",
          events=_OP_LIFE + [("log_op_stats", "op_done")], needs=_MSG_NEEDS),
    Stage("replica_wait", "op",
          "primary: ReplicatedBackend::submit_transaction (sub-ops sent) -> "
          "the last replica's reply (do_repop_reply, matched by request "
          "id); an erasure-coded write: ECBackend::submit_transaction -> "
          "the last shard's (handle_sub_write_reply, matched by the "
          "sub-writes' transaction)",
          events=_OP_LIFE + [("log_op_stats", "op_done"),
                             ("rep_submit", "rep_submit"),
                             ("rep_reply", "rep_reply")],
          needs=("reqid_off", "src_num_off"), extra=_EC_PRIMARY),
    Stage("local_commit", "op",
          "primary: sub-ops sent -> ReplicatedBackend::op_commit (its own "
          "commit of the write); erasure-coded: its own shard's reply",
          events=_OP_LIFE + [("rep_submit", "rep_submit"),
                             ("op_commit", "rep_local_commit")],
          needs=("reqid_off", "inprog_op_off"), extra=_EC_PRIMARY),
    Stage("repop", "op",
          "replica: OSD::enqueue_op of the replica op -> "
          "ReplicatedBackend::repop_commit (commit reply sent); an "
          "erasure-coded write's shard: of the sub-write -> "
          "ECBackend::sub_write_committed",
          events=_OP_LIFE + [("repop_commit", "repop_done")],
          needs=("repmod_op_off",), extra=_EC_SHARD),
    Stage("shard_read", "op",
          "primary: an erasure-coded client read's sub-reads sent "
          "(ECBackend::do_read_op) -> the last shard's reply "
          "(handle_sub_read_reply, matched by the read's transaction; "
          "complete_read_op ends it); a write's read-modify-write reads "
          "are in replica_wait",
          events=_OP_LIFE, extra=_EC_READ),
    # Background work a shard worker runs from its queue without
    # dequeue_op: one probe pair per item, none per client op (recovery
    # pushes, pulls, backfills and scans are messages: they go through
    # dequeue_op, and op_enqueue gives them their scheduler class). A
    # worker inside one sleeps at work, not idle (BPF: in_op). The header
    # marks them (ST__BACKGROUND): model/vocab.py's `background`.
    Stage("recovery", "call", "a PG's recovery item: OSD::do_recovery entry "
          "-> return (starts its pushes and pulls)", func="do_recovery"),
    Stage("scrub", "call", "a scrub event: PG::forward_scrub_event entry "
          "-> return (both overloads: the scrub machine's events, and "
          "those carrying a token)",
          func="scrub_event", also=("scrub_event_token",)),
    Stage("snap_trim", "call", "a snapshot trim item: "
          "PrimaryLogPG::snap_trimmer entry -> return", func="snap_trimmer"),
    Stage("pg_delete", "call", "a deleted PG's removal step: "
          "OSD::dequeue_delete entry -> return", func="dequeue_delete"),
])

# The lean tier (--lean): one probe hit per op, on PrimaryLogPG::log_op_stats
# alone (BPF program op_lean), for a view left on all the time. Its stages
# are the full tier's of the same names, read from the stamps Ceph keeps in
# the op (its message's header read, throttles passed, read in full and
# dispatched; OpTracker's queued_for_pg; OpRequest::dequeued_time) and the
# probe's own time; where a full-tier boundary is a probe this tier lacks,
# Ceph's stamp next to it takes its place: the enqueue is OpTracker's
# queued_for_pg (marked inside OSD::enqueue_op; where the release's
# events_off is unknown, or the tracker is off, the message's dispatch
# stamp, taken just before OSD::enqueue_op is called), the dequeue Ceph's
# dequeue stamp (the first thing OSD::dequeue_op does). docs/stages.md
# says what each tier sees.
LEAN_EVENT = ("log_op_stats", "op_lean")
LEAN_NEEDS = ("msg_off", "msg_stamps_off", "deq_time_off")
LEAN_STAGES = ("throttle_wait", "recv", "dispatch", "queue_wait", "execute",
               "op_total", "op_latency")

# The lean tier's stages: the probe table's entries for resolve() (one
# program, every stage from it)
LEAN = OrderedDict((n, Stage(n, "op", STAGES[n].doc + " (lean tier: Ceph's "
                             "stamps at its probes' places)",
                             events=[LEAN_EVENT], needs=LEAN_NEEDS))
                   for n in LEAN_STAGES)

# Traced without -S: every stage but those few people need (each probe hit
# costs the OSD about a microsecond: docs/ceph.md). -S all: every stage.
DEFAULT_STAGES = [n for n, s in STAGES.items() if s.default]


def wanted_stages(names):
    """The stages to trace for -S NAMES (None: the default set; "all":
    every stage), with what they need: a stage ended by another's return
    brings that stage."""
    if names is None:
        names = DEFAULT_STAGES
    elif names == "all":
        names = list(STAGES)
    out = list(names)
    for n in names:
        st = STAGES.get(n)
        if st is not None and st.ends_at and st.ends_at not in out:
            out.append(st.ends_at)
    return [n for n in STAGES if n in out] + [n for n in out
                                              if n not in STAGES]


class Func:
    """One function in one release. `op_arg` = (argument number counting
    `this` as 1, dereference once?) for functions that carry the op;
    `regs`: how many argument registers its program reads itself."""

    def __init__(self, qualified, params, op_arg=None, regs=0):
        self.qualified = qualified
        self.params = re.compile(params)
        self.op_arg = op_arg
        # the program reads argument registers 1..regs itself: its probe
        # moves only before anything writes them (engine/probesite.py)
        self.regs = regs

    def __repr__(self):
        return "Func(%s(%s))" % (self.qualified, self.params.pattern)


class Release:
    def __init__(self, key, name, funcs, rmw=None, offsets=None,
                 verified=False):
        self.key, self.name, self.funcs = key, name, funcs
        self.rmw = rmw                # (offset of rmw_flags in OpRequest, read bit, write bit)
        # more per-release settings: {.rodata global of osdstage.bpf.c:
        # value}, e.g. a field offset a BPF program reads
        self.offsets = dict(offsets or {})
        self.verified = verified      # checked against a real binary here

    def settings(self):
        """Every .rodata setting this release gives the BPF programs."""
        out = {}
        if self.rmw:
            out.update(zip(("rmw_flags_off", "rmw_read_bit",
                            "rmw_write_bit"), self.rmw))
        out.update(self.offsets)
        return out


_BUF = r"ceph::buffer::(v\d+_\d+_\d+::)?list"
_COLL = r"boost::intrusive_ptr<ObjectStore::CollectionImpl>&"
_OPREF = r"boost::intrusive_ptr<OpRequest>"
_TPH = r"ThreadPool::TPHandle"


def _ec_funcs(backend="ECBackend", reads="ECBackend",
              read_op="ECBackend::ReadOp", listener=False,
              recovery_msgs=True, done_ref="&", suffix=""):
    """An erasure-coded backend's functions, as of Pacific: `backend` has
    the sub-writes and the replies, `reads` the read pipeline (its
    `read_op`); 20.2's backends' handle_sub_write take an ECListener& too
    (`listener`), and their read reply and completion no
    RecoveryMessages* (`recovery_msgs`); the optimized one's
    complete_read_op takes its ReadOp by rvalue (`done_ref` "&&"). The
    roles are named with `suffix` (EC_OPT: the optimized backend's).
    x86-64: pg_shard_t (8 bytes) in a register, the references as
    pointers."""
    rm = r"RecoveryMessages\*" if recovery_msgs else ""
    funcs = {
        "ec_submit": Func(backend + "::submit_transaction",
                          r"^hobject_t const&, object_stat_sum_t const&, "
                          r".*" + _OPREF + r"$"),
        "ec_sub_write": Func(backend + "::handle_sub_write",
                             r"^pg_shard_t, " + _OPREF + r", ECSubWrite&, "
                             r"ZTracer::Trace const&" +
                             (r", ECListener&" if listener else "") + "$",
                             regs=4),
        "ec_reply": Func(backend + "::handle_sub_write_reply",
                         r"^pg_shard_t, ECSubWriteReply const&, "
                         r"ZTracer::Trace const&$", regs=3),
        "ec_committed": Func(backend + "::sub_write_committed",
                             r"^unsigned long, eversion_t, eversion_t, "
                             r"ZTracer::Trace const&$", regs=2),
        "ec_read_start": Func(reads + "::do_read_op", r"^" + read_op + "&$",
                              regs=2),
        "ec_read_reply": Func(backend + "::handle_sub_read_reply",
                              r"^pg_shard_t, ECSubReadReply&, " +
                              (rm + ", " if rm else "") +
                              r"ZTracer::Trace const&$", regs=3),
        "ec_read_done": Func(reads + "::complete_read_op",
                             r"^" + read_op + done_ref +
                             (", " + rm if rm else "") + "$", regs=2),
    }
    return {role + suffix: f for role, f in funcs.items()}


def _funcs(**over):
    """The functions as of Pacific, with per-release overrides."""
    f = {
        # x86-64: `this` is argument 1. enqueue_op's spg_t (24 bytes,
        # trivially copyable) goes on the stack, so the OpRequestRef&& is
        # argument 2; dequeue_op's by-value intrusive_ptrs are passed by
        # invisible reference (pointer to the smart pointer: dereference).
        "enqueue_op": Func("OSD::enqueue_op",
                           r"^spg_t, " + _OPREF + r"&&, unsigned int$",
                           op_arg=(2, True)),
        "dequeue_op": Func("OSD::dequeue_op",
                           r"^boost::intrusive_ptr<PG>, " + _OPREF + ", " +
                           _TPH + r"&$", op_arg=(3, True)),
        "do_op": Func("PrimaryLogPG::do_op", r"^" + _OPREF + r"&$"),
        "get_object_context": Func("PrimaryLogPG::get_object_context",
                                   r"^hobject_t const&, bool, std::map<.*> "
                                   r"const\*$"),
        "log_op_stats": Func("PrimaryLogPG::log_op_stats",
                             r"^OpRequest const&, unsigned long, unsigned long$",
                             op_arg=(2, False)),
        "bluestore_read": Func("BlueStore::read",
                               r"^" + _COLL + r", ghobject_t const&, unsigned "
                               r"long, unsigned long, " + _BUF +
                               r"&, unsigned int$"),
        "bluestore_submit": Func("BlueStore::queue_transactions",
                                 r"^" + _COLL + r", std::vector<ceph::os::"
                                 r"Transaction.*>&, boost::intrusive_ptr<"
                                 r"TrackedOp>, " + _TPH + r"\*$"),
        # replicated writes. submit_transaction runs on the worker that
        # executes the client op: the op is the thread's (no argument).
        "rep_submit": Func("ReplicatedBackend::submit_transaction",
                           r"^hobject_t const&, object_stat_sum_t const&, "
                           r".*" + _OPREF + r"$"),
        "rep_reply": Func("ReplicatedBackend::do_repop_reply",
                          r"^" + _OPREF + r"$", op_arg=(2, True)),
        # the record's address: InProgressOpRef const& and RepModifyRef by
        # value (an invisible reference) both point at the smart pointer
        "op_commit": Func("ReplicatedBackend::op_commit",
                          r"^boost::intrusive_ptr<ReplicatedBackend::"
                          r"InProgressOp> const&$", op_arg=(2, True)),
        "repop_commit": Func("ReplicatedBackend::repop_commit",
                             r"^std::shared_ptr<ReplicatedBackend::"
                             r"RepModify>$", op_arg=(2, True)),
        # background items (PGRecovery, PGScrub*, PGSnapTrim, PGDelete
        # run these); 18.2 added do_recovery's int priority
        "do_recovery": Func("OSD::do_recovery",
                            r"^PG\*, unsigned int, unsigned long, "
                            r"(int, )?" + _TPH + r"&$"),
        "scrub_event": Func("PG::forward_scrub_event",
                            r"^void \(ScrubPgIF::\*\)\(unsigned int\), "
                            r"unsigned int, std::basic_string_view"),
        # the overload for the events that carry an act token (the scrub
        # machine's replies: digest updates, replica reservations, ...)
        "scrub_event_token": Func("PG::forward_scrub_event",
                                  r"^void \(ScrubPgIF::\*\)\(unsigned int, "
                                  r"unsigned int\), unsigned int, unsigned "
                                  r"int, std::basic_string_view"),
        "snap_trimmer": Func("PrimaryLogPG::snap_trimmer",
                             r"^unsigned int$"),
        "dequeue_delete": Func("OSD::dequeue_delete",
                               r"^OSDShard\*, PG\*, unsigned int, " + _TPH +
                               r"&$"),
    }
    f.update(_ec_funcs())
    f.update(over)
    return f


# rmw: OpRequest::op_info.rmw_flags (uint64_t; read as its low 32 bits) and
# CEPH_OSD_RMW_FLAG_READ / _WRITE. The flags are filled in by do_op, so the
# op class is read at completion (log_op_stats). The offset is op_info's in
# OpRequest (rmw_flags is OpInfo's first member): PrimaryLogPG::log_op_stats
# computes &op.op_info (`lea DISP(%reg)`) before calling OpInfo::may_read /
# may_write, which test bits 0x2 / 0x4 (tests/cluster/test_offsets.py reads
# both from the machine code of each lab's binary; 16.2 also against DWARF,
# tests/cluster/test_dwarf.py). Without a checked offset the class split is
# off for that release.
# verified: the whole entry ran against a live OSD of that release here
# (tests/cluster/test_accuracy.py on the host lab, test_releases.py on the
# container labs: stage and class counts against Ceph's counters).
# Offsets of the replicated-write records, from DWARF (ceph-osd-dbg):
# OpRequest::reqid and req_src_inst.name._num (the sender: a replica's
# OSD id on its reply), ReplicatedBackend::InProgressOp::op and
# RepModify::op. enqueue_op's spg_t is on the stack (see above).
# tests/cluster/test_replicas.py checks them on a live 3-OSD lab (and
# test_replicas_containers.py on Reef's and Tentacle's): request ids match
# OpTracker's, every reply finds its op and names its replica, repop
# counts match Ceph's subop_w.
_PACIFIC_OFFSETS = {"reqid_off": 232, "src_num_off": 272,
                    "inprog_op_off": 88, "repmod_op_off": 0,
                    "enq_pg_on_stack": 1,
                    # for captures: the op's object name, through its
                    # message (OpRequest::request; MOSDOp::hobj and
                    # MOSDRepOp::poid's oid.name, decoded by then)
                    "msg_off": 224, "op_name_off": 336,
                    "repop_name_off": 424,
                    # Message::recv_stamp, then dispatch_stamp,
                    # throttle_stamp, recv_complete_stamp (struct
                    # msg_stamps of probes/osdstage.h)
                    "msg_stamps_off": 200,
                    # Message::header.type, then .priority (__le16 each;
                    # header is Message's first member, after
                    # RefCountedObject's 24 bytes): the op's scheduler class
                    "msg_type_off": 40,
                    # OpRequest::dequeued_time (utime_t), the lean tier's
                    # dequeue: log_op_stats reads it for Ceph's
                    # op_process_latency (tests/cluster/machinecode.py)
                    "deq_time_off": 336,
                    # TrackedOp::events (OpTracker's, a std::vector of
                    # struct opt_event): the lean tier's enqueue, its
                    # queued_for_pg (tests/cluster/test_dwarf.py)
                    "events_off": 64}
# ECSubWrite's tid and reqid (after its pg_shard_t from) and
# ECSubWriteReply's tid: tests/cluster/test_dwarf.py; a live EC pool:
# tests/cluster/test_ec.py (a live EC pool: the 16.2 host lab). The same
# on 18.2.7 and 20.2.4 (their ceph-osd-dbg: ECSubWrite, ECSubWriteReply,
# ECSubReadReply; ECBackend::ReadOp, and 20.2's ECCommon::ReadOp and
# ECLegacy::ECCommonL::ReadOp)
_EC_OFFSETS = {"ecsw_tid_off": 8, "ecsw_reqid_off": 16, "ecrep_tid_off": 8,
               # ECBackend::ReadOp's tid and op, ECSubReadReply's tid
               "ecro_tid_off": 8, "ecro_op_off": 16, "ecrr_tid_off": 8}
# OpRequest grew with TrackedOp (192 -> 232 -> 240 bytes); the records did
# not move (ceph-osd-dbg 18.2.7+ds-1+deb13u1, 20.2.4+ds-2)
# (TrackedOp::events not read there yet: the lean tier's enqueue is the
# message's dispatch stamp)
_REEF_OFFSETS = dict(_PACIFIC_OFFSETS, reqid_off=272, src_num_off=312,
                     msg_off=264, deq_time_off=376, events_off=0)
_TENTACLE_OFFSETS = dict(_PACIFIC_OFFSETS, reqid_off=280, src_num_off=320,
                         msg_off=272, deq_time_off=384, events_off=0)

RELEASES = OrderedDict((r.key, r) for r in [
    # Octopus: signatures read from the 15.2.17 source.
    Release("15.2", "octopus", _funcs()),
    # Pacific: Debian 12's 16.2.15, the host lab.
    Release("16.2", "pacific", _funcs(), rmw=(192, 0x2, 0x4),
            offsets=dict(_PACIFIC_OFFSETS, **_EC_OFFSETS), verified=True),
    # Quincy, Squid: the declarations read in the sources. get_object_
    # context's attribute map uses std::less<> from Quincy on; the
    # parameter pattern accepts both.
    Release("17.2", "quincy", _funcs()),
    # Reef: Debian 13's 18.2.7 (CET build), the reef container lab.
    Release("18.2", "reef", _funcs(), rmw=(232, 0x2, 0x4),
            offsets=dict(_REEF_OFFSETS, **_EC_OFFSETS), verified=True),
    Release("19.2", "squid", _funcs()),
    # Tentacle: Debian sid's 20.2.4 (CET build), the tentacle container lab.
    # Its erasure-coded pools run ECSwitch's legacy backend unless the
    # pool allows the new one (allow_ec_optimizations): the legacy one's
    # functions (handle_sub_write gained an ECListener&, handle_sub_read_
    # reply lost its RecoveryMessages*; the read pipeline is a class of
    # its own), and the optimized one's (ECBackend, ECCommon's pipeline).
    Release("20.2", "tentacle", _funcs(**dict(_ec_funcs(
        "ECLegacy::ECBackendL", "ECLegacy::ECCommonL::ReadPipeline",
        "ECLegacy::ECCommonL::ReadOp", listener=True, recovery_msgs=False),
        **_ec_funcs("ECBackend", "ECCommon::ReadPipeline",
                    "ECCommon::ReadOp", listener=True, recovery_msgs=False,
                    done_ref="&&", suffix=EC_OPT))),
            rmw=(240, 0x2, 0x4),
            offsets=dict(_TENTACLE_OFFSETS, **_EC_OFFSETS), verified=True),
])


def _vkey(key):
    return tuple(int(x) for x in key.split("."))


def release_key(version):
    """'16.2.15' -> '16.2'."""
    if not version:
        return None
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def known_releases():
    return ", ".join("%s (%s)" % (k, r.name) for k, r in RELEASES.items())


def release_for(version):
    """The Release for a Ceph version string, or None."""
    return RELEASES.get(release_key(version))


def newer_than_table(version):
    """A version after the table's newest release?"""
    key = release_key(version)
    try:
        return _vkey(key) > _vkey(next(reversed(RELEASES)))
    except (TypeError, ValueError, AttributeError):
        return False


def newest_first():
    return sorted(RELEASES.values(), key=lambda r: _vkey(r.key),
                  reverse=True)
