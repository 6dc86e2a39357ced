/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage.h - the contract between osdstage.bpf.c and lib/cephlat/.
 *
 * This header is the one source: `make` compiles it into the object and
 * probes/abigen.py writes what the object says (enums, struct layouts,
 * .rodata/.bss globals, program names) to build/osdstage.abi.json, which
 * lib/cephlat/abi.py reads. Python keeps no copy of any value here.
 * Naming rules that Python relies on:
 *  - enum stage_id: ST_X names stage "x"; "__" becomes "." (ST_ATTR__BUSY
 *    is "attr.busy"); ST_X__ROLE spans MAX_ROLES ids, "x.0" ... "x.7";
 *    ST__* are markers, not stages;
 *  - enum counter_id: CNT_X names counter "x"; those before CNT__RESULTS
 *    count what was lost, those after it are results;
 *  - other enums: labels are the enumerators without their prefix, in
 *    lower case (WK_ENQUEUER is "enqueuer");
 *  - event fields of typedef type ev_NAME_t hold values of enum NAME
 *    (CTF enum labels in captures); ev_addr_t is an address (hex),
 *    ev_role_t a thread role (labels: the run's role names).
 */
#ifndef OSDSTAGE_H
#define OSDSTAGE_H

enum osdstage_limits {
	MAX_STAGES = 128,	/* a power of two: ids are masked with it */
	MAX_ROLES = 8,		/* thread roles; 0 = other */
	ROLE_PREFIX_LEN = 16,
	TRING = 32,		/* state transitions remembered per thread */
	HIST_SLOTS = 512,	/* latency histogram (below): slots, */
	HIST_FRAC_BITS = 4,	/* units of 1/16 us, */
	HIST_SUB_BITS = 3,	/* 8 sub-buckets per power of two */
	DEV_MINOR_BITS = 20,	/* a device is major << 20 | minor */
	MAX_TARGETS = 16,	/* processes traced at once (one per OSD) */
	TARGET_SHIFT = 56,	/* op and shard keys: target slot << 56 | address */
	OBJ_NAME_LEN = 64,	/* object names in capture events (cut) */
	OPS_WAYS = 4,		/* op table: slots an op may take (below) */
	LEAN_SPAN_MAX = 256,	/* op_lean's one read of the op's fields */
	OPT_EVENTS_MAX = 12,	/* OpTracker events op_lean looks through for
				 * queued_for_pg (the fifth or sixth) */
	/* shard, device and peer keys: the report interval's half, gen & 1,
	 * in the top bit. Like the stage statistics (two halves), the maps
	 * that feed a report are written in the half of the interval their
	 * op or event counted in, so that user space reads the half that
	 * closed, complete and still, and every figure of one report covers
	 * the same ops. Counters: CNT__MAX per (slot, half). */
	HALF_SHIFT = 63,
	/* peers map keys: an erasure-coded read's shard (1) or a write's
	 * replica or shard (0), at this bit (struct peer_stats) */
	PEER_READ_SHIFT = 48,
	/* a shard worker's long history of state changes (struct wring):
	 * entries (a power of two) and rings (a power of two), each
	 * thread's in one of WRING_WAYS rings from a hash of its tid */
	WRING = 512,
	WRING_BITS = 9,
	WRINGS = 256,
	WRING_WAYS = 4,
	/* a wait's stacks (osdstage -w --stacks; struct stack_copy): kernel
	 * frames, and bytes of the user stack copied from its pointer up, in
	 * chunks (a chunk past the stack's end fails: the copy stops there);
	 * threads whose last sleep's stacks are kept at once */
	KSTACK_DEPTH = 32,
	USTACK_BYTES = 8192,
	USTACK_CHUNK = 1024,
	STACK_THREADS = 1024,
	/* a thread's pending uretprobe returns kept with its stack (the
	 * probes' own: a probed function's return address on the stack is
	 * the kernel's trampoline until it returns) */
	URET_DEPTH = 8,
	/* ops sent as OTLP traces (struct op_trace): a replicated write's
	 * first replies kept for its trace on its primary */
	TRACE_PEERS = 4,
	/* who ran on a CPU while a target's thread waited for it: the last
	 * CPU_SLICES tasks each CPU ran (struct cpu_ring, a power of two),
	 * and the behind map's keys: half << HALF_SHIFT | thread role <<
	 * BEHIND_ROLE_SHIFT | target slot << 32 | the task's process (tgid;
	 * 0: the CPU's idle task, BEHIND_UNKNOWN: before the ring's oldest
	 * slice) */
	CPU_SLICES = 128,
	BEHIND_ROLE_SHIFT = 40,
	BEHIND_UNKNOWN = 0xffffffff,
};

/* Stage ids: the cookie of "call" probes and the index of the stats map. */
enum stage_id {
	/* the probed stages, in report order; the probe table
	 * (lib/cephlat/ceph/probetable.py) says how each is probed */
	/* before the OSD's clock starts: the op's message's own stamps
	 * (struct msg_stamps), read in op_enqueue */
	ST_THROTTLE_WAIT = 0,	/* header read -> the messenger's throttles
				 * passed */
	ST_RECV,		/* throttles passed -> message read in full */
	ST_DISPATCH,		/* read in full -> dispatched -> OSD::enqueue_op */
	ST_QUEUE_WAIT,		/* OSD::enqueue_op -> OSD::dequeue_op, same op */
	ST_DEQUEUE_OP,
	ST_DO_OP,
	ST_GET_OBJECT_CONTEXT,
	ST_BLUESTORE_READ,
	ST_BLUESTORE_SUBMIT,
	ST_OP_TOTAL,		/* OSD::enqueue_op -> PrimaryLogPG::log_op_stats */
	ST_EXECUTE,		/* OSD::dequeue_op -> PrimaryLogPG::log_op_stats
				 * (same op: its execution, to completion) */
	ST_OP_LATENCY,		/* the op's message header read ->
				 * PrimaryLogPG::log_op_stats: the op's
				 * latency as the OSD sees it (Ceph's
				 * op_r_latency / op_w_latency) */
	ST_REPLICA_WAIT,	/* primary: sub-ops sent -> last replica's reply */
	ST_LOCAL_COMMIT,	/* primary: sub-ops sent -> its own commit */
	ST_REPOP,		/* replica: repop enqueued -> commit reply sent */
	ST_SHARD_READ,		/* primary: an erasure-coded read's sub-reads
				 * sent -> the last shard's reply */
	/* background work a shard worker runs outside dequeue_op, one item
	 * entry -> return (probe hits per item, none per client op), from
	 * ST__BACKGROUND to ST__PROBED: */
	ST__BACKGROUND,
	ST_RECOVERY = ST__BACKGROUND, /* a PG's recovery item
				 * (OSD::do_recovery) */
	ST_SCRUB,		/* a scrub event (PG::forward_scrub_event) */
	ST_SNAP_TRIM,		/* PrimaryLogPG::snap_trimmer */
	ST_PG_DELETE,		/* a deleted PG's removal step
				 * (OSD::dequeue_delete) */
	ST__PROBED,		/* end of the probed stages */
	/* per op class (enum op_class order). ST_OP_TOTAL and ST_OP_LATENCY
	 * are recorded per class only: their totals are the sums of these,
	 * added up in user space; the lean tier (op_lean) records
	 * ST_QUEUE_WAIT per class only too (and no scheduler class: its ops
	 * are all client ops) */
	ST_QUEUE_WAIT__READ = ST__PROBED,
	ST_QUEUE_WAIT__WRITE,
	ST_QUEUE_WAIT__OTHER,
	ST_OP_TOTAL__READ,
	ST_OP_TOTAL__WRITE,
	ST_OP_TOTAL__OTHER,
	ST_OP_LATENCY__READ,
	ST_OP_LATENCY__WRITE,
	ST_OP_LATENCY__OTHER,
	ST__CALIB,		/* probe-cost calibration (our own process) */
	ST__CALIB_ENTRY,	/* ... its entry program's runs (struct ctl) */
	/* queue_wait split by what the dequeuing worker was doing */
	ST_ATTR__HELD,		/* asleep in the scheduler's timed wait: mClock
				 * held the queued ops until a time it gave */
	ST_ATTR__BUSY,		/* on CPU: running other work */
	ST_ATTR__LOCK,		/* asleep waiting for a lock (a mutex: a PG's,
				 * held by another worker's op, or one inside
				 * other work) */
	ST_ATTR__BLOCKED,	/* asleep otherwise inside other work: I/O, a
				 * completion it waits for */
	ST_ATTR__SIGNAL,	/* asleep with the op queued */
	ST_ATTR__RUNQ,		/* runnable, waiting for a CPU */
	ST_ATTR__PICKUP,	/* on CPU after its wake-up -> dequeue */
	ST_REPOP__QUEUE_WAIT,	/* the queue wait of replica ops */
	/* per scheduler class (enum queue_class order) of the ops dequeued
	 * through dequeue_op: their queue wait, and of it the part held */
	ST_QUEUE_WAIT__CLIENT,
	ST_QUEUE_WAIT__BACKGROUND_RECOVERY,
	ST_QUEUE_WAIT__BACKGROUND_BEST_EFFORT,
	ST_QUEUE_WAIT__IMMEDIATE,
	ST_HELD__CLIENT,
	ST_HELD__BACKGROUND_RECOVERY,
	ST_HELD__BACKGROUND_BEST_EFFORT,
	ST_HELD__IMMEDIATE,
	/* kernel stages, in report order */
	ST__KERNEL,
	ST_SYNCFS = ST__KERNEL,	/* syncfs(2) entry -> exit */
	ST_BLOCK_RQ,		/* block request issue -> complete */
	ST__FIXED,
	/* per thread role r (0..MAX_ROLES-1), right after the fixed ones
	 * (user space reads ids up to ST__COUNT): */
	ST_FUTEX_WAIT__ROLE = ST__FIXED, /* asleep in a futex wait: switched
				 * out inside futex(2) -> woken */
	ST_OFFCPU__ROLE = ST_FUTEX_WAIT__ROLE + MAX_ROLES, /* switched out while
				 * not runnable */
	ST_WAKEUP_DELAY__ROLE = ST_OFFCPU__ROLE + MAX_ROLES, /* sched_waking ->
				 * back on CPU */
	ST__COUNT = ST_WAKEUP_DELAY__ROLE + MAX_ROLES,
};
_Static_assert((int)ST__COUNT <= (int)MAX_STAGES, "stage ids beyond MAX_STAGES");

/* Latency histogram: log-linear over units of 1/16 us (62.5 ns).
 * Values below 8 units get one slot each; above, every power of two is
 * split into 8 equal sub-buckets (12.5 % wide), so power-of-two microsecond
 * boundaries fall on slot boundaries and a bcc-style log2 histogram in usecs
 * is an exact sum of slots.
 */
#define HIST_SUB	(1 << HIST_SUB_BITS)

struct stage_stats {
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 slots[HIST_SLOTS];
};

/* Counters in the "counters" array map: CNT__MAX per target slot and
 * interval half (see HALF_SHIFT; slot 0 also holds what no target can be
 * named for). */
enum counter_id {
	/* what was lost or could not be measured */
	CNT_START_MAP_FULL = 0,	/* no task storage for a thread */
	CNT_NO_START,		/* a return without its entry: a re-entered function */
	CNT_NEGATIVE,		/* end before start (should not happen) */
	CNT_OP_MAP_FULL,	/* an enqueued op could not be tracked */
	CNT_OP_UNKNOWN,		/* dequeue/done of an op not seen enqueued */
	CNT_BAD_ARG,		/* the op key could not be read */
	CNT_OP_REPLACED,	/* enqueue of an address still tracked: the old op
				 * never completed (freed, address reused) */
	CNT_THREAD_MAP_FULL,	/* a target thread could not be tracked */
	CNT_ATTR_TRUNCATED,	/* the op waited longer than the worker's
				 * state history: the older part counts as busy */
	CNT_RQ_MAP_FULL,	/* a block request could not be tracked */
	CNT_EVENTS_LOST,	/* capture events the ring buffer had no room for */
	CNT_REPLY_UNKNOWN,	/* a replica's reply to an op not seen sending */
	CNT_REQ_MAP_FULL,	/* a replicated op could not be indexed */
	CNT_MSG_UNSTAMPED,	/* an enqueued op's message stamps were missing
				 * or out of order: no messenger stages */
	CNT_BEHIND_MAP_FULL,	/* a run-queue wait's part not told behind
				 * whom: the behind map was full */
	CNT_ENQ_FROM_DISPATCH,	/* the lean tier: an op without OpTracker's
				 * queued_for_pg stamp (the tracker off, or
				 * its event list moved while read), its
				 * enqueue from its message's dispatch stamp */
	CNT_STACK_MAP_FULL,	/* a sleep's stacks not kept: the wait_stacks
				 * map was full (--stacks) */
	CNT__RESULTS,		/* results from here on */
	CNT_WAKE_ENQUEUER = CNT__RESULTS, /* the dequeuing worker slept with
				 * the op queued and was woken by the
				 * enqueuing thread, */
	CNT_WAKE_OTHER,		/* by another thread, */
	CNT_WAKE_TIMEOUT,	/* or by its timed wait expiring (missed wake-up) */
	CNT_TIMEOUTS_WITH_WORK,	/* a worker's timed wait expired and it then took
				 * queued work (counted once per expired wait) */
	/* ops chosen at their end to be sent as OTLP traces (--otlp of
	 * the exporter and of a live osdstage; struct op_trace): in the
	 * 1-in-N sample by request id, */
	CNT_TRACE_SAMPLE,
	CNT_TRACE_SLOW,		/* or (not sampled) at least the threshold long; */
	CNT_TRACE_OVER_RATE,	/* of those, dropped over the rate cap, */
	CNT_TRACE_RING_FULL,	/* or because the traces ring had no room */
	CNT_WAKE_UNSEEN,	/* a target thread left a CPU it was not seen
				 * to get: no program ran for its switch-in
				 * (nor, if asleep, its wake-up); their times
				 * rebuilt (sched.bpf.h unseen_switch_in) */
	CNT_HIT_ENTRY,		/* uprobe hits (stage entries, op events) */
	CNT_HIT_RETURN,		/* uretprobe hits */
	CNT_HIT_SCHED,		/* scheduler tracepoint runs that found a
				 * target's thread (the others return at the
				 * target filter) */
	CNT_HIT_SYSCALL,	/* syncfs tracepoint runs of the target (futex
				 * waits come from the scheduler programs) */
	CNT__MAX = 30,
	/* markers: the counters from CNT__UPROBE_HITS count uprobe hits,
	 * those from CNT__TP_HITS on tracepoint runs (the cost model's two
	 * prices: engine/duty.py, the exporter, the bench) */
	CNT__UPROBE_HITS = CNT_HIT_ENTRY,
	CNT__TP_HITS = CNT_HIT_SCHED,
};

enum op_class { OPC_READ = 0, OPC_WRITE, OPC_OTHER };

/* The class an OSD's op scheduler gives an op dequeued through
 * dequeue_op, from its message's type and priority (Ceph's
 * OpSchedulerItem rules; labels are Ceph's op_scheduler_class names): a
 * client's op; a recovery message (push, pull, backfill, scan) at
 * recovery priority, or below it; everything else (replica ops,
 * peering-priority messages). WPQ queues the same items by priority
 * alone: the class still says what the item is. */
enum queue_class { QC_CLIENT = 0, QC_BACKGROUND_RECOVERY,
		   QC_BACKGROUND_BEST_EFFORT, QC_IMMEDIATE };

/* Op probes (programs op_enqueue, op_dequeue, op_done, rep_submit,
 * rep_reply, rep_local_commit, repop_done): the cookie says where the op
 * key is: the argument number (1-6), plus OPARG_DEREF when the argument
 * points at a smart pointer holding it. OPARG_STARTS_DEQUEUE (op_dequeue
 * only): the program also starts the dequeue_op call stage, whose entry
 * it shares (one probe hit instead of two). (rep_local_commit and repop_done
 * get Ceph's in-progress / replica-op record that way, and read the op
 * from it at a per-release offset.) */
enum op_arg { OPARG_NUM_MASK = 0xf, OPARG_DEREF = 0x10,
	      OPARG_STARTS_DEQUEUE = 0x20 };

/* A request id (Ceph's osd_reqid_t): client entity type and number,
 * tid, incarnation; names one client op on every OSD it touches. */
struct reqid {
	__u64 num;
	__u64 tid;
	__s32 inc;
	__u8 type;		/* 8 = client, 4 = osd (CEPH_ENTITY_TYPE_*) */
	__u8 slot;		/* as a map key: the target slot */
	__u16 pad;
};

/* Per-op state, keyed by target slot << TARGET_SHIFT | the op's address
 * (the OpRequest for Ceph). */
/* Ceph's Message stamps (utime_t: wall-clock seconds and nanoseconds),
 * in this order from the per-release offset msg_stamps_off (the probe
 * table; tests/cluster/test_dwarf.py checks the order): OpTracker's
 * header_read, dispatched, throttled and all_read. */
struct utime {
	__u32 sec;
	__u32 nsec;
};

struct msg_stamps {
	struct utime recv;		/* header read */
	struct utime dispatch;		/* handed to the OSD */
	struct utime throttle;		/* the throttles passed */
	struct utime recv_complete;	/* read in full */
};

/* One of OpTracker's events of an op (TrackedOp::Event, an element of
 * TrackedOp::events, a std::vector from the per-release offset
 * events_off): its wall-clock stamp and its name, a std::string (data
 * pointer, length, then the inline buffer a name under 16 bytes is kept
 * in). tests/cluster/test_dwarf.py checks the layout. */
struct opt_event {
	struct utime stamp;
	__u64 name_ptr;
	__u64 name_len;
	char name_buf[16];
};

_Static_assert(sizeof(struct opt_event) == 40, "TrackedOp::Event is 40 bytes");

/* op_lean's copy of an op's first OpTracker events (per CPU), and where
 * queued_for_pg was in the last op's list (every client op's list begins
 * with the same events: it is tried first, alone) */
struct opt_scratch {
	struct opt_event ev[OPT_EVENTS_MAX];
	__u32 hint;
	__u32 pad;
};

struct op_state {
	__u64 enq_ns;		/* enqueue: queue_wait and op_total start */
	__u64 deq_ns;		/* first dequeue, 0 = still queued */
	__u64 qwait_ns;		/* queue_wait, kept for the class split */
	__u32 enq_tid;		/* the enqueuing thread */
	__u32 replies;		/* replicas' commit replies seen */
	/* a replicated write on its primary: */
	__u64 sub_ns;		/* sub-ops sent (0: not replicated) */
	__u64 local_ns;		/* own commit */
	__u64 last_ns;		/* latest replica reply */
	__u32 last_peer;	/* its OSD */
	__u32 qclass;		/* enum queue_class, from its message */
	struct reqid req;	/* its request id (sub_ns != 0) */
	__u64 sub_tid;		/* an erasure-coded write: its sub-writes'
				 * transaction (0: none sent yet; a later one,
				 * the roll-forward after the commit, is not
				 * waited for) */
	__u32 msg_type;		/* its message's type (0: unread) */
	__u32 sent_us;		/* an erasure-coded write: its sub-writes went
				 * out this long after sub_ns (the wait for an
				 * RMW's reads and for the writes ahead of it
				 * in its PG); 0: with sub_ns */
	__u64 msg_ns;		/* its message's time before the enqueue
				 * (header read -> enqueue; 0: unstamped):
				 * op_latency = this + op_total */
	/* for its OTLP trace, kept only while traces are sent (struct
	 * op_trace; else never written): */
	__u64 pg_pool;		/* the PG it was queued for (the enqueue */
	__u32 pg_seed;		/*   function's argument) */
	__u32 pad;
	__u32 rep_peer[TRACE_PEERS]; /* a replicated write on its primary: its
				 * first replies' OSDs, */
	__u32 rep_us[TRACE_PEERS]; /* each reply's time after sub_ns, us */
};

/* A slot of the op table ("ops" array map, user space maps it): the op's
 * key (target slot << TARGET_SHIFT | address; 0 = free) and its state.
 * An op lives in one of OPS_WAYS slots from a hash of its key: no hash
 * map insert or delete on the probe path (those cost ~1 us here); a free
 * slot is taken with a compare-and-swap of its key (helpers.bpf.h
 * slot_take: probes run on every CPU at once). */
struct op_slot {
	__u64 key;
	struct op_state st;
};

/* A slot of the request-id index ("reqidx" array map, user space maps
 * it): a replicated write in flight on its primary, found by the request
 * id its replicas' replies carry; key 0 = free. Like the op table, each
 * request id has OPS_WAYS slots from a hash of it. */
struct req_slot {
	struct reqid req;
	__u64 key;		/* the op's key in the op table */
};

/* Replicas' replies per peer, key = half << HALF_SHIFT | read <<
 * PEER_READ_SHIFT | target slot << 32 | peer OSD id; read: an
 * erasure-coded read's sub-reads (ST_SHARD_READ), else a write's
 * sub-ops (ST_REPLICA_WAIT) */
struct peer_stats {
	__u64 last;		/* ops for which this peer replied last */
	struct stage_stats wait; /* sub-ops sent -> its reply */
};

/* Thread states for the attribution. */
enum tstate_kind { TS_RUN = 0, TS_SLEEP = 1, TS_RUNQ = 2, TS_DEAD = 3 };

/* What a sleep is, for the attribution: work (inside an op: I/O, a
 * completion), idle (waiting for the queue), a scheduler hold (idle in the
 * queue's timed wait on an mClock OSD: the scheduler gave the time), or a
 * lock (a mutex wait, inside an op or for a PG's lock before one). */
enum sleep_kind { SK_WORK = 0, SK_IDLE = 1, SK_HELD = 2, SK_LOCK = 3 };

struct tring {
	__u64 ts;		/* when the thread entered `state` */
	__u64 cum_isleep;	/* cumulative idle-sleep, held, run-queue, */
	__u64 cum_held;		/*   all-sleep and lock-wait ns at ts */
	__u64 cum_runq;
	__u64 cum_sleep;
	__u64 cum_lock;
	__u32 state;
	__u32 sleep;		/* enum sleep_kind, when state is TS_SLEEP */
};

/* A shard worker's ring of state changes ("wrings" array map), claimed at
 * its first dequeue: long enough for queue waits of mClock holds, when the
 * shard's workers all wake at each of the scheduler's times (~3 entries a
 * worker per op ahead in the queue). Thread states keep a short ring of
 * their own (TRING) from before. */
struct wring {
	__u64 tid;		/* owner; 0 = free (64 bits: compare-and-swap) */
	__u32 head;		/* entries written (the next is head % WRING) */
	__u32 pad;
	struct tring e[WRING];
};

/* Per-thread state of the target's threads ("threads" hash, key = tid). */
struct thread_state {
	__u64 comm8;		/* first 8 bytes of comm when role was set */
	__u32 role;
	__u32 state;		/* enum tstate_kind */
	__u64 since;		/* when `state` began */
	__u64 early_wake;	/* woken while on a CPU going to sleep, before
				 * its switch-out's program ran: when (0:
				 * none; sched.bpf.h woken_early), */
	__u32 early_waker;	/* by whom (0: not a thread of the target) */
	__u32 _pad_early;
	__u64 cum_sleep;	/* ns asleep (off CPU, not runnable) */
	__u64 cum_runq;		/* ns runnable but not running */
	__u64 cum_isleep;	/* ns asleep while idle (not inside an op),
				 * not in a scheduler hold */
	__u64 cum_held;		/* ns asleep in scheduler holds */
	__u64 cum_lock;		/* ns asleep waiting for a lock (SK_LOCK) */
	__u64 cum_futex;	/* ns inside futex waits */
	__u64 wake_ts;		/* last wake-up (sched_waking) */
	__u64 oncpu_after_wake;	/* first switch-in after the last wake-up */
	__u64 futex_start;	/* asleep in a futex wait since (0: not) */
	__u64 futex_deadline;	/* that wait's timeout, CLOCK_MONOTONIC ns
				 * (0: none or unknown) */
	__u64 cv_uaddr;		/* last condition-variable futex (& ~7): shard */
	__u64 futex_uaddr;	/* the futex word of its wait (& ~7) */
	__u64 syncfs_start;
	__u32 waker_tid;	/* who woke it last (0 = not a target thread) */
	__u32 cv_timedout;	/* last condition-variable wait timed out */
	__u32 wakeups;
	__u32 ring_head;	/* next slot in ring */
	__u64 born;		/* first seen */
	__u64 died;		/* switched out for the last time, 0 = alive */
	__u64 queue_cv;		/* the cv it sleeps on when idle: its shard */
	__u64 idle_cv;		/* the cv of its last idle or held wait */
	__u32 idle_waker;	/* ... and who woke it from that wait */
	__u32 in_op;		/* between dequeue and the dequeue function's
				 * return: a sleep now is work, not idleness */
	__u32 target;		/* the target slot of its process */
	__u32 sleep;		/* enum sleep_kind of the sleep it is in */
	__u32 wring;		/* its struct wring's index + 1 (0: none) */
	__u32 lock_wait;	/* in a futex wait for a lock of its own (not
				 * a condition variable, nor the re-lock of
				 * its mutex that follows one) */
	__u32 prev_cv;		/* its last futex wait was on a cv */
	__u64 held_end;		/* when its last scheduler hold ended */
	__u64 he_isleep;	/* cum_isleep, cum_runq, cum_sleep and cum_lock */
	__u64 he_runq;		/*   then: an op queued before it splits from */
	__u64 he_sleep;		/*   there on */
	__u64 he_lock;
	__u64 exec_seen;	/* its CPU time (se.sum_exec_runtime) and */
	__u64 delay_seen;	/* run-queue wait (sched_info.run_delay) when
				 * last seen leaving a CPU (0: not yet) */
	struct tring ring[TRING];
};

/* Per-shard attribution, key = half << HALF_SHIFT | target slot <<
 * TARGET_SHIFT | condition variable address (& ~7). */
struct shard_stats {
	__u64 ops;
	__u64 qwait_ns;
	__u64 held_ns;
	__u64 busy_ns;
	__u64 lock_ns;
	__u64 blocked_ns;
	__u64 signal_ns;
	__u64 runq_ns;
	__u64 pickup_ns;
	__u64 wake_enqueuer;
	__u64 wake_other;
	__u64 wake_timeout;
	__u64 qwait_max_ns;
	__u64 timeouts_with_work;
};

/* A task's turn on a CPU, from its switch-in (start) to the next one's
 * (the next slice's start; the newest's: the ring's since). */
struct cpu_slice {
	__u64 start;
	__u64 cgid;		/* its cgroup (v2: the unified hierarchy's id) */
	__u32 tgid;
	__u32 pid;
	char comm[16];		/* the thread's name */
};

struct cpu_ring {
	__u64 since;		/* the running task's switch-in */
	__u32 head;		/* next slot */
	__u32 pad;
	struct cpu_slice s[CPU_SLICES];
};

/* The time target threads of one role waited for a CPU behind one
 * process's tasks (key: CPU_SLICES' comment). */
struct behind_stats {
	__u64 ns;		/* the waits' overlap with its slices */
	__u64 waits;		/* the waits it ran in */
	__u64 cgid;		/* its cgroup (the last slice's) */
	__u32 pid;		/* a thread of it that ran (the last slice's) */
	__u32 pad;
	char comm[16];		/* that thread's name */
};

/* Block requests per device, key = half << HALF_SHIFT | target slot << 32 |
 * device (the target that issued them). */
struct dev_stats {
	__u64 count;
	__u64 sum_ns;
	__u64 bytes;
	__u64 max_ns;
};

/* The whole .bss (written by the loader at once, read by every program):
 * call_bias_ns: what a uprobe + uretprobe pair adds to an entry -> return
 *   time here, measured after load, on a warm CPU; subtracted from "call"
 *   stages;
 * call_*: the pair costs more on a cold CPU (a thread that ran nothing
 *   probed for milliseconds: up to 6 us here against 0.9), and so does
 *   the entry program's own run from its start to its stamp, in step.
 *   call_bias_ns is the pair at entry run call_warm_ns (the calibration's
 *   warm calls); a call whose entry program ran c ns has taken out:
 *   c > call_cold_ns (beyond a warm call's spread): call_bias_ns +
 *     (min(c, call_cold_max_ns) - call_cold_ns) * call_cold_x16 / 16 (the
 *     slope towards the cold calls; no more than a call of the entry run
 *     call_cold_max_ns would have: twice the cold calls');
 *   c < call_warm_ns (the warm calls ran semi-cold): call_bias_ns -
 *     (call_warm_ns - c) * call_warm_x16 / 16 (the slope towards calls
 *     made back to back), no less than call_bias_min_ns (theirs);
 *   else call_bias_ns.
 *   All measured after load with call_bias_ns (call_*_x16 0: no cold
 *   correction; lib/cephlat/engine/calibrate.py);
 * gen: the report interval: statistics go to one half of the stats map
 *   by its parity, capture events carry it;
 * targets: the traced processes (tgids), packed from slot 0; a slot
 *   keeps its number for the whole run: statistics, counters, op and
 *   shard keys and capture events are per slot. Written before attaching
 *   and when a target is added; 0 ends the list;
 * mclock: the targets whose scheduler is mClock (osd_op_queue). */
struct ctl {
	__u64 call_bias_ns;
	__u32 call_cold_ns;
	__u32 call_cold_x16;
	__u32 call_cold_max_ns;
	__u32 call_warm_ns;
	__u32 call_warm_x16;
	__u32 call_bias_min_ns;
	__s64 real_off_ns;	/* CLOCK_REALTIME - CLOCK_MONOTONIC (Ceph's
				 * stamps are wall clock), at the last write */
	__s64 tai_off_ns;	/* CLOCK_TAI - CLOCK_REALTIME (whole seconds:
				 * it moves only at a leap second) */
	__u32 gen;
	__u32 mclock;		/* bit per target slot: its OSD schedules ops
				 * with mClock (a timed wait on its queue is a
				 * scheduler hold, not a missed wake-up) */
	__u32 behind;		/* 1: every CPU notes the tasks it runs
				 * (struct cpu_ring) and the targets' run-queue
				 * waits are split by them (the behind map) */
	__u32 targets[MAX_TARGETS];
};

struct role_prefix {
	char prefix[ROLE_PREFIX_LEN];
	__u32 len;		/* 0 = unused */
	__u32 role;
};

/* ------------------------------------------------------------------------
 * Ops sent as OTLP traces (--otlp of osdstage-exporter and of a live
 * osdstage): chosen at the op's end, in the full tier, by the rule of
 * lib/cephlat/model/sample.py (the request id's h = tid *
 * 0x9E3779B97F4A7C15 + num, mod 2^64, kept when (h >> 32) % trace_every
 * == 0: the same ops on every OSD of every host) or because the op took
 * trace_over_ns or more on this OSD, under a rate cap; each chosen op is
 * one struct op_trace in the "traces" ring buffer, which the front end
 * drains (lib/cephlat/livetraces.py). Nothing else of an op reaches user
 * space. Not a capture event: no header, not in enum ev_id. */
enum trace_why { TW_SAMPLE = 0, TW_SLOW };
enum trace_role { TR_PRIMARY = 0, TR_REPLICA };

struct op_trace {
	__u64 op;		/* the OpRequest's address */
	__u64 req_num;		/* its request id: client.num.inc:tid */
	__u64 req_tid;
	__s32 req_inc;
	__u32 src;		/* a replica op: the OSD that sent it (its
				 * primary); 0 on a primary */
	/* CLOCK_MONOTONIC ns */
	__u64 enq_ns;		/* enqueued (OSD::enqueue_op) */
	__u64 deq_ns;		/* first dequeue (0: not seen) */
	__u64 done_ns;		/* completed (a primary's op_done) or its
				 * reply sent (a replica's repop) */
	__u64 msg_ns;		/* its message's header read -> enqueue (0:
				 * unstamped) */
	__u64 sub_ns;		/* a write's sub-ops sent (0: none seen) */
	__u64 local_ns;		/* the primary's own commit (0: not seen) */
	__u64 bytes_in;		/* a primary's: the bytes it wrote and read
				 * (struct ev_op_done's); 0 on a replica */
	__u64 bytes_out;
	__u64 pg_pool;		/* its PG (pool 0, seed 0: unknown) */
	__u32 pg_seed;
	__u32 replies;		/* replicas' replies seen */
	__u32 rep_peer[TRACE_PEERS]; /* the first replies' OSDs */
	__u32 rep_us[TRACE_PEERS]; /*   and their times after sub_ns, us */
	__u32 last_peer;	/* the reply that came last */
	__u32 sent_us;		/* an erasure-coded write: its sub-writes went
				 * out this long after sub_ns */
	__u8 target;		/* the target slot (ctl.targets) */
	__u8 role;		/* enum trace_role */
	__u8 why;		/* enum trace_why */
	__u8 op_class;		/* enum op_class (a primary's) */
	__u8 queue_class;	/* enum queue_class */
	__u8 req_type;		/* 8: client */
	__u8 dequeued;		/* deq_ns is valid */
	__u8 pad2;
	char object[OBJ_NAME_LEN]; /* its object's name, cut ("": unknown) */
};

/* ------------------------------------------------------------------------
 * Capture events (osdstage -w): one per measurement, in the "events" ring
 * buffer. Each record is laid out exactly as a CTF event of the capture's
 * metadata (lib/cephlat/capture/format.py names every field from this
 * header through the build): the header,
 * then the payload, byte-packed. The recorder (lib/native/recorder.c)
 * copies records unchanged into the stream file of `cpu`.
 * `interval` is the report interval the measurement was counted in (the
 * ctl.gen it read), so a capture splits into the live run's reports
 * exactly. */
enum ev_id {
	EV_STAGE = 0,		/* a "call" stage: entry -> return */
	EV_OP_ENQUEUE,
	EV_OP_DEQUEUE,		/* with the queue-wait attribution */
	EV_OP_DONE,
	EV_SWITCH_OUT,		/* a target thread left the CPU */
	EV_WAKING,		/* a sleeping target thread was woken */
	EV_SWITCH_IN,		/* a target thread got the CPU */
	EV_FUTEX_WAIT,
	EV_SYNCFS,
	EV_BLOCK_RQ,
	EV_REPLICA_REPLY,
	EV_LOCAL_COMMIT,
	EV_REPOP_DONE,
	EV_OP_REQID,		/* an op's request id, learned after its enqueue */
	EV_SHARD_READ,		/* an erasure-coded read's shards all replied */
	EV_WAIT_STACK,		/* a target thread's long wait, its stacks */
	EV_CPU_SAMPLE,		/* a target thread on a CPU, sampled */
	EV__BPF,		/* ids from here on are written by user space */
};

enum wake_kind { WK_NONE = 0, WK_ENQUEUER, WK_OTHER, WK_TIMEOUT };

#define EV_PACKED __attribute__((packed))

/* Event field types (naming rules at the top of this file) */
typedef __u64 ev_addr_t;
typedef __u8 ev_role_t;
typedef __u32 ev_stage_id_t;
typedef __u8 ev_wake_kind_t;
typedef __u8 ev_op_class_t;
typedef __u8 ev_queue_class_t;
typedef __u8 ev_tstate_kind_t;
typedef __u8 ev_sleep_kind_t;

struct ev_hdr {
	__u32 id;
	__u64 ts;		/* CLOCK_MONOTONIC ns */
	__u32 cpu;
	__u32 interval;
	__u8 target;		/* the target slot (ctl.targets) */
} EV_PACKED;

struct ev_stage {
	struct ev_hdr h;
	__u64 duration_ns;	/* probe cost subtracted */
	ev_addr_t op;		/* the op the thread was executing (it
				 * dequeued it last), 0 = none */
	__u32 tid;
	ev_stage_id_t stage;
} EV_PACKED;

struct ev_op_enqueue {
	struct ev_hdr h;
	ev_addr_t op;
	__u64 req_num;		/* request id (read when recording): */
	__u64 req_tid;		/*   entity type.num, incarnation, tid */
	__s32 req_inc;
	__u32 tid;
	__u64 pg_pool;		/* the PG the op was queued for */
	__u32 pg_seed;
	__s8 pg_shard;
	__u8 req_type;		/* 8 client, 4 osd, 0 unknown */
	__u8 stamped;		/* the messenger stages below are valid; */
				/*   they follow each other in this order */
	__u64 throttle_wait_ns;
	__u64 recv_ns;
	__u64 dispatch_ns;
	__u16 msg_type;		/* its message's type and priority (0: */
	__u16 msg_priority;	/*   not read) */
	ev_queue_class_t queue_class;
} EV_PACKED;

struct ev_op_dequeue {
	struct ev_hdr h;
	ev_addr_t op;
	__u64 queue_wait_ns;
	__u64 held_ns;
	__u64 busy_ns;
	__u64 lock_ns;
	__u64 blocked_ns;
	__u64 signal_ns;
	__u64 runq_ns;
	__u64 pickup_ns;
	ev_addr_t shard;		/* the worker's queue condition variable */
	__u32 tid;		/* the worker */
	__u32 enq_tid;
	__u32 waker_tid;	/* who woke the worker last (0: not the target) */
	__u8 attributed;	/* 0: the worker was unknown, no split */
	ev_wake_kind_t wake;
	__u8 timeout_with_work;
	__u8 truncated;
	ev_queue_class_t queue_class;
} EV_PACKED;

struct ev_op_done {
	struct ev_hdr h;
	ev_addr_t op;
	__u64 op_total_ns;
	__u64 queue_wait_ns;
	__u64 replica_wait_ns;	/* sub-ops sent -> last reply (replies > 0) */
	__u64 local_commit_ns;	/* sub-ops sent -> own commit (0: none) */
	__u64 msg_ns;		/* its message's header read -> enqueue (0:
				 * unstamped): op_latency = this + op_total;
				 * execute = op_total - queue_wait */
	__u64 bytes_in;		/* the bytes it wrote and read, as Ceph
				 * counts them (log_op_stats' inb and outb:
				 * op_in_bytes, op_out_bytes) */
	__u64 bytes_out;
	__u32 last_peer;	/* the replica that replied last */
	__u32 tid;
	ev_op_class_t op_class;
	__u8 dequeued;		/* queue_wait_ns is valid */
	__u8 total_valid;
	__u8 replies;		/* replicas' replies (a replicated write) */
	char object[OBJ_NAME_LEN]; /* its object's name, cut ("": unknown) */
} EV_PACKED;

/* a replica's commit reply to a replicated write (on its primary), or
 * an erasure-coded write's shard's; or (read 1) a shard's reply to an
 * erasure-coded read's sub-read */
struct ev_replica_reply {
	struct ev_hdr h;
	ev_addr_t op;		/* the client op */
	__u64 wait_ns;		/* sub-ops sent -> this reply */
	__u32 peer;		/* the replica's OSD id */
	__u32 tid;
	__u8 read;		/* a read's shard (shard_read), else a write's */
	__u32 sent_us;		/* an erasure-coded write's sub-writes went out
				 * this long after its wait began (op_state's
				 * sent_us): the reply's own way is wait_ns
				 * less this */
} EV_PACKED;

/* the primary's own commit of a replicated write */
struct ev_local_commit {
	struct ev_hdr h;
	ev_addr_t op;
	__u64 commit_ns;	/* sub-ops sent -> own commit */
	__u32 tid;
} EV_PACKED;

/* a replica op committed and its reply sent (on the replica) */
struct ev_repop_done {
	struct ev_hdr h;
	ev_addr_t op;
	__u64 repop_ns;		/* enqueued -> reply sent */
	__u64 queue_wait_ns;
	__u32 tid;
	__u8 dequeued;
	char object[OBJ_NAME_LEN]; /* its object's name, cut ("": unknown) */
} EV_PACKED;

/* the request id of an op whose message does not carry one where the
 * enqueue reads it: an erasure-coded write's sub-write on its shard
 * (ECSubWrite holds it), told when the shard applies it */
struct ev_op_reqid {
	struct ev_hdr h;
	ev_addr_t op;
	__u64 req_num;		/* as in ev_op_enqueue */
	__u64 req_tid;
	__s32 req_inc;
	__u8 req_type;
} EV_PACKED;

/* an erasure-coded client read's sub-reads all answered (on its primary):
 * shard_read */
struct ev_shard_read {
	struct ev_hdr h;
	ev_addr_t op;		/* the client op */
	__u64 read_ns;		/* sub-reads sent -> the last reply */
	__u32 last_peer;	/* the shard's OSD that replied last */
	__u32 tid;
	__u8 replies;
} EV_PACKED;

struct ev_switch_out {
	struct ev_hdr h;
	__u32 tid;
	ev_tstate_kind_t state; /* sleep, runq (preempted), dead */
	ev_role_t role;
	ev_sleep_kind_t sleep;	/* a sleep's kind: work, idle, held (a
				 * scheduler hold), lock; work for the
				 * others */
} EV_PACKED;

struct ev_waking {
	struct ev_hdr h;
	__u64 offcpu_ns;
	__u32 tid;
	__u32 waker_tid;	/* 0: not a thread of the target */
	ev_role_t role;
	ev_sleep_kind_t sleep;	/* the kind of the sleep it ends, as the
				 * attribution counts it: a mutex wait right
				 * after a cv wait, released by another shard
				 * worker, is a lock wait (the switch-out
				 * called it idle) */
} EV_PACKED;

struct ev_switch_in {
	struct ev_hdr h;
	__u64 wakeup_ns;	/* waking -> on CPU; valid if woken */
	__u32 tid;
	ev_role_t role;
	__u8 woken;		/* first time on CPU since a wake-up */
} EV_PACKED;

struct ev_futex_wait {
	struct ev_hdr h;
	ev_addr_t uaddr;
	__u64 duration_ns;
	__s32 ret;
	__u32 tid;
	ev_role_t role;
	__u8 is_cv;		/* a condition-variable wait (FUTEX_WAIT_BITSET) */
} EV_PACKED;

struct ev_syncfs {
	struct ev_hdr h;
	__u64 duration_ns;
	__u32 tid;
} EV_PACKED;

struct ev_block_rq {
	struct ev_hdr h;
	__u64 duration_ns;	/* issue -> complete */
	__u32 dev;		/* major << DEV_MINOR_BITS | minor */
	__u32 bytes;
} EV_PACKED;

/* A thread's stacks at one moment (--stacks): its user registers and the
 * top of its user stack, copied as it is (the user stack is unwound
 * offline, from the binaries' own unwind tables: Ceph's builds keep no
 * frame pointers: lib/cephlat/stacks/), and its kernel stack's return
 * addresses (the kernel's own unwinder). The layout of struct
 * ev_wait_stack's two halves, field for field. */
struct stack_copy {
	__u64 ip;		/* user registers at its last kernel entry */
	__u64 sp;
	__u64 bp;
	__u32 kframes;		/* kernel frames in kstack */
	__u32 ubytes;		/* user stack bytes copied, from sp up */
	__u32 urets;		/* pending uretprobe returns: */
	__u32 pad;
	__u64 uret_slot[URET_DEPTH]; /* where each return address is on the
				 * stack (it holds the trampoline's), */
	__u64 uret_addr[URET_DEPTH]; /* and the address it stands for */
	__u64 kstack[KSTACK_DEPTH];
	__u8 ustack[USTACK_BYTES];
};

/* a target thread's stacks as it went to sleep (map wait_stacks, by
 * tid), sent with the waker's if the wait lasts stack_min_ns */
struct wait_stack {
	__u64 since;		/* the sleep's start (struct thread_state) */
	struct stack_copy s;
};

/* a target thread's wait of at least stack_min_ns (--stacks), at its
 * wake-up: where it slept (its stacks as it went to sleep) and who woke
 * it (the waker's stacks as it woke it: its kernel stack always, its
 * user stack when it is a thread of the target) */
struct ev_wait_stack {
	struct ev_hdr h;
	__u64 offcpu_ns;	/* asleep -> woken */
	__u32 tid;
	__u32 waker_tid;	/* 0: not a thread of the target */
	ev_role_t role;
	ev_sleep_kind_t sleep;	/* as ev_waking's */
	__u8 unseen;		/* 1: no program ran for its wake-up (rebuilt
				 * at its next switch-out: sched.bpf.h
				 * unseen_switch_in): no waker known, the
				 * waker's half empty. (Also keeps the halves
				 * 8-byte aligned in the ring.) */
	/* the sleeper: struct stack_copy */
	ev_addr_t ip;
	ev_addr_t sp;
	ev_addr_t bp;
	__u32 kframes;
	__u32 ubytes;
	__u32 urets;
	__u32 pad2;
	ev_addr_t uret_slot[URET_DEPTH];
	ev_addr_t uret_addr[URET_DEPTH];
	ev_addr_t kstack[KSTACK_DEPTH];
	__u8 ustack[USTACK_BYTES];
	/* the waker: struct stack_copy */
	ev_addr_t waker_ip;
	ev_addr_t waker_sp;
	ev_addr_t waker_bp;
	__u32 waker_kframes;
	__u32 waker_ubytes;
	__u32 waker_urets;
	__u32 waker_pad;
	ev_addr_t waker_uret_slot[URET_DEPTH];
	ev_addr_t waker_uret_addr[URET_DEPTH];
	ev_addr_t waker_kstack[KSTACK_DEPTH];
	__u8 waker_ustack[USTACK_BYTES];
} EV_PACKED;

/* a target thread found on a CPU by the sampling clock (osdstage -w
 * --on-cpu HZ: a perf event per CPU): its stacks there (struct
 * stack_copy) */
struct ev_cpu_sample {
	struct ev_hdr h;
	__u32 tid;
	ev_role_t role;
	__u8 in_op;		/* running an op (between the dequeue and the
				 * dequeue function's return) */
	__u8 pad[13];		/* the stack 8-byte aligned in the ring */
	/* struct stack_copy */
	ev_addr_t ip;
	ev_addr_t sp;
	ev_addr_t bp;
	__u32 kframes;
	__u32 ubytes;
	__u32 urets;
	__u32 pad3;
	ev_addr_t uret_slot[URET_DEPTH];
	ev_addr_t uret_addr[URET_DEPTH];
	ev_addr_t kstack[KSTACK_DEPTH];
	__u8 ustack[USTACK_BYTES];
} EV_PACKED;

#endif /* OSDSTAGE_H */
