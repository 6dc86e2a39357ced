/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/maps.bpf.h - the maps and the per-thread and per-op state they hold.
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

/* Entry timestamps of "call" stages, one slot per stage, in the thread's
 * own task storage: no hash lookup on the probe path, and freed by the
 * kernel when the thread exits (nothing can leak). */
struct task_starts {
	__u64 ts[MAX_STAGES];
	__u32 cost[MAX_STAGES];	/* its entry program's run to ts (ns); 0:
				 * unknown, a warm call's bias */
	__u64 cur_op;		/* the op it dequeued last (raw address), until
				 * the dequeue function returns */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_starts);
} starts SEC(".maps");

/* Ops between enqueue and completion: a table of op_slot (osdstage.h), a
 * power of two sized by the loader (ops_mask), which user space maps to
 * count and age out ops that never complete. An op whose OPS_WAYS slots
 * are all taken is not tracked (counted: op_map_full). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct op_slot);
} ops SEC(".maps");

/* The target's threads; user space reads it for per-role time shares and
 * deletes threads that have exited. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2048);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads SEC(".maps");

/* shard workers' long rings of state changes (struct wring) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WRINGS);
	__type(key, __u32);
	__type(value, struct wring);
} wrings SEC(".maps");

/* an all-zero thread_state to insert new threads from (too big for the BPF
 * stack, too big to memset); never written */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct thread_state);
} tzero SEC(".maps");

/* per CPU: each CPU adds to its own copy, no atomics (user space sums) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct shard_stats);
} shards SEC(".maps");

/* Block requests in flight that a target issued: the request's address,
 * its issue time (1: inserted, not issued yet) and the issuing target's
 * slot, in one of RQ_WAYS slots of a table from a hash of the address (no
 * hash-map insert or delete per request). A request still here when its
 * slots are needed again is overwritten (its completion is not seen). */
#define RQ_SLOTS 4096
#define RQ_WAYS 4
struct rq_start {
	__u64 rq;		/* 0 = free */
	__u64 ts;
	__u32 slot;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RQ_SLOTS);
	__type(key, __u32);
	__type(value, struct rq_start);
} rqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 256);
	__type(key, __u64);
	__type(value, struct dev_stats);
} devs SEC(".maps");

/* per CPU: op_lean's copy of an op's OpTracker events */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct opt_scratch);
} opt_scratch SEC(".maps");

/* per CPU: the tasks it ran last (sched.bpf.h ring_push) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_ring);
} cpu_rings SEC(".maps");

/* per target, thread role, process that ran and interval half: the time
 * the role's threads waited for a CPU behind it (osdstage.h CPU_SLICES);
 * user space reads a half once its interval closed and deletes its
 * entries (engine/mapread.py take_behind), as it does the peers' */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 2048);
	__type(key, __u64);
	__type(value, struct behind_stats);
} behind SEC(".maps");

/* replicated writes in flight on their primary: request id -> op key
 * (osdstage.h struct req_slot) */
#define REQ_SLOTS 16384
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, REQ_SLOTS);
	__type(key, __u32);
	__type(value, struct req_slot);
} reqidx SEC(".maps");

/* Erasure-coded writes (BPF only): a sub-write transaction's id -> the
 * op it serves. On the primary: {its target slot, 0, transaction} -> the
 * client op and the primary's own OSD id (its own shard's reply is its
 * local commit). On a shard: {slot, ECBackend*, transaction} -> the
 * sub-write op. LRU: an entry whose end was not seen goes by itself. */
struct ec_tid_key {
	__u64 tid;
	__u64 backend;		/* 0 on the primary */
	__u32 slot;
	__u32 pad;
};

struct ec_tid_val {
	__u64 key;		/* the op's key in the op table */
	__u32 self;		/* primary: its OSD id */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct ec_tid_key);
	__type(value, struct ec_tid_val);
} ectids SEC(".maps");

/* Erasure-coded reads of client ops in flight on their primary (BPF
 * only): {slot, 0, the read's transaction} -> the op, when its sub-reads
 * went out, the latest reply and its shard's OSD. */
struct ec_read {
	__u64 key;
	__u64 sent_ns;
	__u64 last_ns;
	__u32 last_peer;
	__u32 replies;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ec_tid_key);
	__type(value, struct ec_read);
} ecreads SEC(".maps");

/* per target, peer OSD and interval half (osdstage.h HALF_SHIFT): its
 * replies' waits and how often it was last, over one interval: user space
 * reads a half once its interval closed and deletes its entries
 * (engine/mapread.py take_peers), as it zeroes the stage statistics' */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct peer_stats);
} peers SEC(".maps");

/* an all-zero peer_stats to insert new peers from (never written) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct peer_stats);
} pzero SEC(".maps");

/* Peer `peer` of target `slot` in the half of interval `gen`, of reads
 * (read 1) or writes (inserted when new); NULL when the map is full. */
static __always_inline struct peer_stats *peer_stats_of(__u32 slot,
							__u32 peer,
							__u32 gen,
							__u64 read)
{
	__u64 key = (__u64)slot << 32 | peer | (__u64)(gen & 1) << HALF_SHIFT |
		    read << PEER_READ_SHIFT;
	struct peer_stats *ps = bpf_map_lookup_elem(&peers, &key), *z;
	__u32 zero = 0;

	if (ps)
		return ps;
	z = bpf_map_lookup_elem(&pzero, &zero);
	if (z)
		bpf_map_update_elem(&peers, &key, z, BPF_NOEXIST);
	return bpf_map_lookup_elem(&peers, &key);
}

/* per target slot, two halves of MAX_STAGES entries by report-interval
 * parity: key (slot * 2 + parity) * MAX_STAGES + stage; sized by the
 * loader for its targets */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * MAX_STAGES);
	__type(key, __u32);
	__type(value, struct stage_stats);
} stats SEC(".maps");

/* --stacks: each target thread's stacks as it last went to sleep into a
 * wait worth one (struct wait_stack, by tid); sized by the loader
 * (STACK_THREADS, one entry without --stacks); stack_zero: the value a
 * new entry starts from (too large for the BPF stack) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wait_stack);
} wait_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wait_stack);
} stack_zero SEC(".maps");

/* capture events; sized by the loader (a page when not recording) */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

/* ops chosen to be sent as OTLP traces (struct op_trace), drained by the
 * front end every turn of its loop (the exporter's, a live osdstage's);
 * its own ring, not the capture's "events": it exists whether or not a
 * capture is recorded, holds one kind of record for one reader (the
 * capture's recorder copies every record it finds into the capture), and
 * an op chosen while a capture runs is in both.
 * Sized by the loader (a page when no traces are sent). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} traces SEC(".maps");

/* the traces' rate cap (GCRA: the theoretical arrival time of the next
 * trace, CLOCK_MONOTONIC ns), one for every target */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} trace_tat SEC(".maps");

/* CNT__MAX counters per target slot and interval half ((slot * 2 + half)
 * * CNT__MAX + id); sized by the loader. Never cleared: user space reads
 * both halves summed for totals, a closed half for an interval. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");
