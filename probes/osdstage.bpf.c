// SPDX-License-Identifier: GPL-2.0
/* osdstage.bpf.c - where an op's time goes inside a ceph-osd (or any
 * producer/consumer program described by a probe spec).
 *
 *  - "call" stages: function entry -> return on one thread (uprobe +
 *    uretprobe; the stage id is the BPF cookie);
 *  - "op" stages: enqueue -> dequeue -> completion of one op, keyed by its
 *    address (op_enqueue, op_dequeue, op_done; the cookie says which
 *    argument holds it);
 *  - kernel stages of the target's threads from tracepoints: sleep (offcpu),
 *    wake-up -> on CPU, futex waits, syncfs, block requests;
 *  - queue-wait attribution: when a worker dequeues an op, the op's wait is
 *    split by the worker's state since the enqueue (busy / asleep / waiting
 *    for a CPU / picking up), with who woke it.
 * Everything is aggregated here. With record_events set (osdstage -w),
 * each measurement is also sent as one event to the "events" ring buffer
 * (no wake-ups; the recorder polls), tagged with the report interval.
 *
 * This file holds the settings the loader writes before load; the
 * programs and their state are in probes/osdstage/, one file per
 * subsystem, included at the end in order (one compilation unit, so the
 * object and its ABI are what one file would make).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "osdstage.h"


/* Set by the loader before load (lib/cephlat/engine/tracer.py) */
const volatile __u32 rmw_flags_off = 0;	/* OpRequest -> rmw flags; 0 = unknown */
const volatile __u32 rmw_read_bit = 0;
const volatile __u32 rmw_write_bit = 0;
const volatile __u32 calib_tgid = 0;	/* the loader itself, calibrating */
const volatile __u32 worker_role = 1;	/* role of the queue's workers */
const volatile __u32 track_in_op = 0;	/* the dequeue function's return is
					 * probed: sleeps inside it are work */
const volatile struct role_prefix roles[MAX_ROLES] = {};
const volatile __u32 record_events = 0;	/* send capture events */
const volatile __u64 stack_min_ns = 0;	/* --stacks: the waits of target
					 * threads this long or longer are
					 * sent with their stacks (0: none) */
/* per Ceph release (probe table). reqid_off 0: unknown (captures carry
 * no request ids); the stages that need the others are only attached
 * where the probe table has them. */
const volatile __u32 reqid_off = 0;	/* OpRequest -> reqid (osd_reqid_t) */
const volatile __u32 src_num_off = 0;	/* OpRequest -> req_src_inst.name._num */
const volatile __u32 repmod_op_off = 0;	/* ReplicatedBackend::RepModify -> op */
const volatile __u32 inprog_op_off = 0;	/* ReplicatedBackend::InProgressOp -> op */
/* erasure-coded pools' records (their programs are attached only where
 * the probe table has these) */
const volatile __u32 ecsw_tid_off = 0;	/* ECSubWrite -> tid */
const volatile __u32 ecsw_reqid_off = 0; /* ECSubWrite -> reqid (osd_reqid_t) */
const volatile __u32 ecrep_tid_off = 0;	/* ECSubWriteReply -> tid */
const volatile __u32 ecro_tid_off = 0;	/* ECBackend::ReadOp -> tid */
const volatile __u32 ecro_op_off = 0;	/* ECBackend::ReadOp -> op (OpRequestRef) */
const volatile __u32 ecrr_tid_off = 0;	/* ECSubReadReply -> tid */
const volatile __u32 enq_pg_on_stack = 0; /* the enqueue function's spg_t is
					 * its first stack argument */
const volatile __u32 msg_off = 0;	/* OpRequest -> request (Message*) */
const volatile __u32 msg_stamps_off = 0; /* Message -> its stamps (struct
					 * msg_stamps); 0: the messenger
					 * stages are not traced */
const volatile __u32 deq_time_off = 0;	/* OpRequest -> dequeued_time (utime_t:
					 * Ceph's dequeue stamp; the lean
					 * tier's op_lean) */
const volatile __u32 events_off = 0;	/* OpRequest -> TrackedOp::events
					 * (OpTracker's, struct opt_event):
					 * the lean tier's enqueue; 0: the
					 * dispatch stamp instead */
/* the lean tier's op fields (msg_off, deq_time_off, rmw_flags_off) in
 * one read when they lie within LEAN_SPAN_MAX bytes: from lean_lo,
 * lean_span bytes (0: three reads); set by the loader */
const volatile __u32 lean_lo = 0;
const volatile __u32 lean_span = 0;
const volatile __u32 msg_type_off = 0;	/* Message -> header.type, then
					 * header.priority (__le16 each); 0:
					 * no scheduler class (all client) */
const volatile __u32 op_name_off = 0;	/* MOSDOp -> hobj.oid.name */
const volatile __u32 repop_name_off = 0; /* MOSDRepOp -> poid.oid.name */

const volatile __u32 ops_mask = 65535;	/* the op table's size - 1 */

/* Ops sent as OTLP traces (osdstage.h, struct op_trace; --otlp of the
 * exporter and of a live osdstage): 1 in trace_every by request id (0:
 * no sample), and those that took trace_over_ns or more (0: no
 * threshold); at most one every trace_gap_ns on average, trace_burst_ns
 * ahead at most (0: no cap). trace_every and trace_over_ns both 0: no
 * traces, and the verifier drops every instruction of theirs. */
const volatile __u32 trace_every = 0;
const volatile __u64 trace_over_ns = 0;
const volatile __u64 trace_gap_ns = 0;
const volatile __u64 trace_burst_ns = 0;

/* Written by the loader (osdstage.h explains it) */
struct ctl ctl = {};

/* The parts, by subsystem (probes/osdstage/): each uses what the ones
 * before it define. */
#include "osdstage/maps.bpf.h"
#include "osdstage/helpers.bpf.h"
#include "osdstage/calls.bpf.h"
#include "osdstage/threads.bpf.h"
#include "osdstage/sched.bpf.h"
#include "osdstage/io.bpf.h"
#include "osdstage/attribution.bpf.h"
#include "osdstage/ops.bpf.h"
#include "osdstage/replicas.bpf.h"
