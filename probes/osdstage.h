/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage.h - structures shared by osdstage.bpf.c and lib/cephlat/ (ctypes).
 *
 * Keep in sync with lib/cephlat/layout.py; tests/unit/test_layout.py checks
 * the constants against this file.
 */
#ifndef OSDSTAGE_H
#define OSDSTAGE_H

#define MAX_STAGES	16

/* Stage ids (cookie of the "call" probes, index of the stats map). The
 * names are in lib/cephlat/probetable.py, in this order. */
enum stage_id {
	ST_QUEUE_WAIT = 0,	/* OSD::enqueue_op -> OSD::dequeue_op, same op */
	ST_DEQUEUE_OP,
	ST_DO_OP,
	ST_GET_OBJECT_CONTEXT,
	ST_BLUESTORE_READ,
	ST_BLUESTORE_SUBMIT,
	ST_OP_TOTAL,		/* OSD::enqueue_op -> PrimaryLogPG::log_op_stats */
	ST_QUEUE_WAIT_READ,	/* + op class: read, write, other */
	ST_QUEUE_WAIT_WRITE,
	ST_QUEUE_WAIT_OTHER,
	ST_OP_TOTAL_READ,
	ST_OP_TOTAL_WRITE,
	ST_OP_TOTAL_OTHER,
	ST_CALIB,		/* probe-cost calibration (our own process) */
	ST__COUNT,
};

enum op_class { OPC_READ = 0, OPC_WRITE, OPC_OTHER };

/* "op" probes: the cookie says which event and where the op key is.
 *   bits 0-7  event (enum op_event)
 *   bits 8-11 argument number holding the key (1-6)
 *   bit 12    the argument points at a smart pointer: dereference once */
enum op_event { OPEV_ENQUEUE = 1, OPEV_DEQUEUE = 2, OPEV_DONE = 3 };
#define OPCOOKIE(ev, arg, deref) ((ev) | ((arg) << 8) | ((deref) << 12))

/* Per-op state, keyed by the OpRequest address. */
struct op_state {
	__u64 enq_ns;		/* OSD::enqueue_op: queue_wait and op_total start */
	__u64 deq_ns;		/* first dequeue, 0 = still queued */
	__u64 qwait_ns;		/* queue_wait, kept for the class split */
	__u64 spare;
};

/* Latency histogram: log-linear over units of 1/16 us (62.5 ns).
 * Values below 8 units get one slot each; above, every power of two is
 * split into 8 equal sub-buckets (12.5 % wide), so power-of-two microsecond
 * boundaries fall on slot boundaries and a bcc-style log2 histogram in usecs
 * is an exact sum of slots.
 */
#define HIST_FRAC_BITS	4
#define HIST_SUB_BITS	3
#define HIST_SUB	(1 << HIST_SUB_BITS)
#define HIST_SLOTS	512

struct stage_stats {
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 slots[HIST_SLOTS];
};

/* Counters in the "counters" array map. */
enum counter_id {
	CNT_START_MAP_FULL = 0,	/* a start timestamp could not be stored */
	CNT_NO_START,		/* a return without a matching entry (attached mid-call) */
	CNT_NEGATIVE,		/* end before start (should not happen) */
	CNT_OP_MAP_FULL,	/* an enqueued op could not be tracked */
	CNT_OP_UNKNOWN,		/* dequeue/done of an op not seen enqueued */
	CNT_BAD_ARG,		/* the op key could not be read */
	CNT_OP_REPLACED,	/* enqueue of an address still tracked: the old op
				 * never completed (freed, address reused) */
	CNT__MAX = 8,
};

#endif /* OSDSTAGE_H */
