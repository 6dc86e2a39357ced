/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/replicas.bpf.h - replicated writes: sub-ops, replies, commits, replica ops.
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

/* ------------------------------------------------------------------------
 * replicated writes: on the primary, sub-ops sent -> each replica's reply
 * and its own commit; on a replica, the replica op's life */

/* The current thread's op (it dequeued it last) and its state. */
static __always_inline struct op_state *current_op(__u32 slot, __u64 *op)
{
	struct task_starts *ts;
	__u64 key;

	ts = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0, 0);
	if (!ts || !ts->cur_op)
		return 0;
	*op = ts->cur_op;
	key = (__u64)slot << TARGET_SHIFT | *op;
	return op_state_of(key);
}

/* ReplicatedBackend::submit_transaction, on the worker executing the
 * client op: the sub-ops go out now; index the op by its request id,
 * which the replicas' replies carry. */
SEC("uprobe")
int rep_submit(struct pt_regs *ctx)
{
	int slot = target_of(bpf_get_current_pid_tgid() >> 32);
	struct op_state *st;
	__u64 op, key;

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_ENTRY);
	st = current_op(slot, &op);
	if (!st)
		return 0;
	if (read_reqid(op, &st->req, slot)) {
		count(slot, CNT_BAD_ARG);
		return 0;
	}
	st->sub_ns = bpf_ktime_get_ns();
	st->local_ns = st->last_ns = 0;
	st->replies = st->last_peer = 0;
	st->sub_tid = 0;
	st->sent_us = 0;
	key = (__u64)slot << TARGET_SHIFT | op;
	if (req_index_op(&st->req, key)) {
		count(slot, CNT_REQ_MAP_FULL);
		st->sub_ns = 0;
	}
	return 0;
}

/* A replica's (or an erasure-coded write's shard's) commit reply to the
 * op of key `key` and state `st` on its primary, from OSD `peer`. */
static __always_inline void replica_replied(int slot, __u64 key,
					    struct op_state *st, __u64 peer,
					    __u64 now)
{
	struct peer_stats *ps;
	struct ev_replica_reply *e;
	__u64 wait = now - st->sub_ns;
	__u32 gen, i = st->replies;

	/* its trace's: the first replies, each with its time */
	if (TRACE_ON && i < TRACE_PEERS) {
		st->rep_peer[i & (TRACE_PEERS - 1)] = peer;
		st->rep_us[i & (TRACE_PEERS - 1)] = wait / 1000;
	}
	st->replies++;
	st->last_ns = now;
	st->last_peer = peer;
	gen = cur_gen();
	ps = peer_stats_of(slot, peer, gen, 0);
	if (ps)
		hist_add(&ps->wait, wait);
	e = EV_NEW(ev_replica_reply, EV_REPLICA_REPLY, now, gen, slot);
	if (e) {
		e->op = key & ((1ULL << TARGET_SHIFT) - 1);
		e->wait_ns = wait;
		e->peer = peer;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		e->read = 0;
		e->sent_us = st->sent_us;
		EV_SEND(e);
	}
}

/* ReplicatedBackend::do_repop_reply(OpRequestRef): a replica's commit
 * reply, itself an op that went through the queue (done with now). */
SEC("uprobe")
int rep_reply(struct pt_regs *ctx)
{
	__u64 rop, rkey, now = bpf_ktime_get_ns(), peer = 0;
	struct req_slot *k;
	struct op_state *st;
	struct reqid r = {};
	int slot = op_hit(ctx, &rop, &rkey);

	if (slot < 0)
		return 0;
	op_forget(rkey);
	if (read_reqid(rop, &r, slot) || !src_num_off ||
	    bpf_probe_read_user(&peer, sizeof(peer),
				(void *)(rop + src_num_off))) {
		count(slot, CNT_BAD_ARG);
		return 0;
	}
	k = req_find(&r);
	st = k ? op_state_of(k->key) : 0;
	if (!k || !st || !st->sub_ns || now < st->sub_ns) {
		count(slot, CNT_REPLY_UNKNOWN);
		return 0;
	}
	replica_replied(slot, k->key, st, peer, now);
	return 0;
}

/* The op a record of Ceph's holds at offset `off` (the record from the
 * probe's argument, through the cookie) and its state. The program is
 * attached only where the probe table knows the offset (it may be 0). */
static __always_inline struct op_state *op_in(struct pt_regs *ctx, __u32 off,
					      int *slot, __u64 *op,
					      __u64 *key)
{
	__u64 rec;

	*slot = op_hit(ctx, &rec, key);
	if (*slot < 0)
		return 0;
	if (bpf_probe_read_user(op, sizeof(*op), (void *)(rec + off)) || !*op) {
		count(*slot, CNT_BAD_ARG);
		return 0;
	}
	*key = (__u64)*slot << TARGET_SHIFT | *op;
	return op_state_of(*key);
}

/* The primary's own commit of the write `op` (state `st`). */
static __always_inline void local_committed(int slot, __u64 op,
					    struct op_state *st, __u64 now)
{
	struct ev_local_commit *e;
	__u32 gen = cur_gen();

	st->local_ns = now;
	record(slot, ST_LOCAL_COMMIT, now - st->sub_ns, gen);
	e = EV_NEW(ev_local_commit, EV_LOCAL_COMMIT, now, gen, slot);
	if (e) {
		e->op = op;
		e->commit_ns = now - st->sub_ns;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		EV_SEND(e);
	}
}

/* ReplicatedBackend::op_commit(InProgressOpRef const&): the primary's own
 * commit of a replicated write */
SEC("uprobe")
int rep_local_commit(struct pt_regs *ctx)
{
	__u64 op, key, now = bpf_ktime_get_ns();
	struct op_state *st;
	int slot;

	st = op_in(ctx, inprog_op_off, &slot, &op, &key);
	if (!st || !st->sub_ns || now < st->sub_ns)
		return 0;
	local_committed(slot, op, st, now);
	return 0;
}

/* On a replica (or an erasure-coded write's shard): the replica op `op`
 * (key `key`, state `st`) committed, its reply goes out now; its message
 * names its object at name_off (0: not read). Done with it. */
static __always_inline void repop_ended(int slot, __u64 op, __u64 key,
					struct op_state *st, __u64 now,
					__u32 name_off)
{
	struct ev_repop_done *e;
	__u32 gen = cur_gen();

	if (now >= st->enq_ns)
		record(slot, ST_REPOP, now - st->enq_ns, gen);
	if (st->deq_ns)
		record(slot, ST_REPOP__QUEUE_WAIT, st->qwait_ns, gen);
	e = EV_NEW(ev_repop_done, EV_REPOP_DONE, now, gen, slot);
	if (e) {
		e->op = op;
		e->repop_ns = now >= st->enq_ns ? now - st->enq_ns : 0;
		e->queue_wait_ns = st->deq_ns ? st->qwait_ns : 0;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		e->dequeued = st->deq_ns != 0;
		read_object(op, name_off, e->object);
		EV_SEND(e);
	}
	trace_op(slot, op, st, now, gen, TR_REPLICA, OPC_OTHER, name_off, 0, 0);
	op_forget(key);
}

/* ReplicatedBackend::repop_commit(RepModifyRef): on a replica, the
 * replica op committed; its reply goes out now. */
SEC("uprobe")
int repop_done(struct pt_regs *ctx)
{
	__u64 op, key, now = bpf_ktime_get_ns();
	struct op_state *st;
	int slot;

	st = op_in(ctx, repmod_op_off, &slot, &op, &key);
	if (!st) {
		if (slot >= 0)
			count(slot, CNT_OP_UNKNOWN);
		return 0;
	}
	repop_ended(slot, op, key, st, now, repop_name_off);
	return 0;
}

/* ------------------------------------------------------------------------
 * erasure-coded writes: the primary's ECBackend::submit_transaction is
 * rep_submit (the op's wait on its shards starts there: a partial
 * stripe's reads first, then the sub-writes); each shard's commit reply
 * is a replica's, the primary's own shard's its local commit; on a shard
 * the sub-write op is a replica op (repop). */

/* The traced process's slot, with the transaction id at `addr` in `tk`
 * (an ectids or ecreads key; backend 0, as on a primary): -1 when the
 * process is not a target or the id could not be read (counted). */
static __always_inline int ec_key(__u64 addr, struct ec_tid_key *tk)
{
	int slot = target_of(bpf_get_current_pid_tgid() >> 32);

	if (slot < 0)
		return -1;
	count(slot, CNT_HIT_ENTRY);
	if (bpf_probe_read_user(&tk->tid, sizeof(tk->tid), (void *)addr)) {
		count(slot, CNT_BAD_ARG);
		return -1;
	}
	tk->slot = slot;
	return slot;
}

/* Capture event: op `op`'s request id is `r` (its message carried none) */
static __always_inline void op_reqid_event(int slot, __u64 op,
					   struct reqid *r)
{
	struct ev_op_reqid *e;

	e = EV_NEW(ev_op_reqid, EV_OP_REQID, bpf_ktime_get_ns(), cur_gen(),
		   slot);
	if (e) {
		e->op = op;
		e->req_num = r->num;
		e->req_tid = r->tid;
		e->req_inc = r->inc;
		e->req_type = r->type;
		EV_SEND(e);
	}
}

/* ECBackend::handle_sub_write(pg_shard_t from, OpRequestRef msg,
 * ECSubWrite &op, ...): a sub-write applied, on every shard the write
 * goes to. On the primary (its op indexed by request id) the first
 * transaction of the op is the one waited for; on a shard, remember
 * which op the transaction is. */
SEC("uprobe")
int ec_sub_write(struct pt_regs *ctx)
{
	__u64 w = PT_REGS_PARM4(ctx), ref = PT_REGS_PARM3(ctx), op = 0, now;
	struct ec_tid_key tk = {};
	struct ec_tid_val tv = {};
	struct reqid r = {};
	struct req_slot *k;
	struct op_state *st;
	int slot = ec_key(w + ecsw_tid_off, &tk);

	if (slot < 0)
		return 0;
	if (read_reqid_at(w + ecsw_reqid_off, &r, slot)) {
		count(slot, CNT_BAD_ARG);
		return 0;
	}
	k = req_find(&r);
	if (k) {
		/* the primary: from is its own shard */
		st = op_state_of(k->key);
		if (!st || !st->sub_ns || st->sub_tid)
			return 0;
		st->sub_tid = tk.tid;
		/* its own shard's sub-write is applied right after the
		 * others' are sent (try_reads_to_commit): they went out now */
		now = bpf_ktime_get_ns();
		if (now > st->sub_ns)
			st->sent_us = (now - st->sub_ns) / 1000;
		tv.key = k->key;
		tv.self = (__u32)PT_REGS_PARM2(ctx);
	} else {
		if (bpf_probe_read_user(&op, sizeof(op), (void *)ref)) {
			count(slot, CNT_BAD_ARG);
			return 0;
		}
		if (!op)
			return 0;	/* the primary's own roll-forward */
		tk.backend = PT_REGS_PARM1(ctx);
		tv.key = (__u64)slot << TARGET_SHIFT | op;
		/* the sub-write op, seen enqueued; never a primary's client
		 * op that could not be indexed (its sub_ns is set) */
		st = op_state_of(tv.key);
		if (!st || st->sub_ns) {
			count(slot, CNT_OP_UNKNOWN);
			return 0;
		}
		op_reqid_event(slot, op, &r);
		/* its trace's request id (its OpRequest has none) */
		if (TRACE_ON)
			st->req = r;
	}
	bpf_map_update_elem(&ectids, &tk, &tv, BPF_ANY);
	return 0;
}

/* ECBackend::handle_sub_write_reply(pg_shard_t from, ECSubWriteReply
 * const &op, ...), on the primary: shard `from` committed (a remote
 * shard's reply message ends in dequeue_op: ends_in_dequeue). */
SEC("uprobe")
int ec_reply(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns(), peer = (__u32)PT_REGS_PARM2(ctx);
	struct ec_tid_key tk = {};
	struct ec_tid_val *tv;
	struct op_state *st;
	int slot = ec_key(PT_REGS_PARM3(ctx) + ecrep_tid_off, &tk);

	if (slot < 0)
		return 0;
	tv = bpf_map_lookup_elem(&ectids, &tk);
	if (!tv)
		return 0;	/* a transaction not waited for */
	st = op_state_of(tv->key);
	if (!st || !st->sub_ns || now < st->sub_ns) {
		count(slot, CNT_REPLY_UNKNOWN);
		return 0;
	}
	if (peer == tv->self)
		local_committed(slot, tv->key & ((1ULL << TARGET_SHIFT) - 1),
				st, now);
	else
		replica_replied(slot, tv->key, st, peer, now);
	return 0;
}

/* ECBackend::sub_write_committed(ceph_tid_t tid, ...): a shard's commit
 * of transaction tid, its reply goes out now (on the primary, its own:
 * the reply comes next, ec_reply). */
SEC("uprobe")
int ec_committed(struct pt_regs *ctx)
{
	int slot = target_of(bpf_get_current_pid_tgid() >> 32);
	__u64 now = bpf_ktime_get_ns(), op;
	struct ec_tid_key tk = {};
	struct ec_tid_val *tv;
	struct op_state *st;

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_ENTRY);
	tk.tid = PT_REGS_PARM2(ctx);
	tk.backend = PT_REGS_PARM1(ctx);
	tk.slot = slot;
	tv = bpf_map_lookup_elem(&ectids, &tk);
	if (!tv)
		return 0;	/* the primary's own shard */
	st = op_state_of(tv->key);
	op = tv->key & ((1ULL << TARGET_SHIFT) - 1);
	if (st)
		repop_ended(slot, op, tv->key, st, now, 0);
	else
		count(slot, CNT_OP_UNKNOWN);
	bpf_map_delete_elem(&ectids, &tk);
	return 0;
}

/* ------------------------------------------------------------------------
 * erasure-coded reads of client ops on their primary: the sub-reads go
 * out (ECBackend::do_read_op), each shard replies (handle_sub_read_reply,
 * the read's transaction in the reply), the read completes once all
 * have (complete_read_op): shard_read = sent -> the last reply, and per
 * shard's OSD its replies' waits and how often it was last. */

/* ECBackend::do_read_op(ReadOp &op) */
SEC("uprobe")
int ec_read_start(struct pt_regs *ctx)
{
	__u64 rop = PT_REGS_PARM2(ctx), op = 0, key;
	struct ec_tid_key tk = {};
	struct ec_read v = {};
	struct op_state *st;
	__u32 flags = 0;
	int slot = ec_key(rop + ecro_tid_off, &tk);

	if (slot < 0)
		return 0;
	if (bpf_probe_read_user(&op, sizeof(op), (void *)(rop + ecro_op_off))) {
		count(slot, CNT_BAD_ARG);
		return 0;
	}
	/* a client read's ReadOp may not hold its op (Pacific's never
	 * does): then the op the worker is executing; never recovery's
	 * (its item runs outside dequeue_op) nor a reply's (a shard's
	 * reply can restart reads) */
	if (op) {
		key = (__u64)slot << TARGET_SHIFT | op;
		st = op_state_of(key);
	} else {
		st = current_op(slot, &op);
		key = (__u64)slot << TARGET_SHIFT | op;
	}
	if (!st || (st->msg_type && st->msg_type != CEPH_MSG_OSD_OP))
		return 0;
	/* a write's read-modify-write: its shard wait is replica_wait's */
	if (rmw_flags_off && !bpf_probe_read_user(&flags, sizeof(flags),
						  (void *)(op + rmw_flags_off)) &&
	    (flags & rmw_write_bit))
		return 0;
	v.key = key;
	v.sent_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&ecreads, &tk, &v, BPF_ANY);
	return 0;
}

/* ECBackend::handle_sub_read_reply(pg_shard_t from, ECSubReadReply &op,
 * ...) */
SEC("uprobe")
int ec_read_reply(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns(), peer = (__u32)PT_REGS_PARM2(ctx);
	struct ec_tid_key tk = {};
	struct ev_replica_reply *e;
	struct peer_stats *ps;
	struct ec_read *v;
	__u32 gen;
	int slot = ec_key(PT_REGS_PARM3(ctx) + ecrr_tid_off, &tk);

	if (slot < 0)
		return 0;
	v = bpf_map_lookup_elem(&ecreads, &tk);
	if (!v || now < v->sent_ns)
		return 0;	/* not a client read's */
	gen = cur_gen();
	ps = peer_stats_of(slot, peer, gen, 1);
	if (ps)
		hist_add(&ps->wait, now - v->sent_ns);
	v->replies++;
	v->last_ns = now;
	v->last_peer = peer;
	e = EV_NEW(ev_replica_reply, EV_REPLICA_REPLY, now, gen, slot);
	if (e) {
		e->op = v->key & ((1ULL << TARGET_SHIFT) - 1);
		e->wait_ns = now - v->sent_ns;
		e->peer = peer;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		e->read = 1;
		e->sent_us = 0;
		EV_SEND(e);
	}
	return 0;
}

/* ECBackend::complete_read_op(ReadOp &op, RecoveryMessages *) */
SEC("uprobe")
int ec_read_done(struct pt_regs *ctx)
{
	struct ec_tid_key tk = {};
	struct ev_shard_read *e;
	struct peer_stats *ps;
	struct ec_read *v;
	__u32 gen;
	int slot = ec_key(PT_REGS_PARM2(ctx) + ecro_tid_off, &tk);

	if (slot < 0)
		return 0;
	v = bpf_map_lookup_elem(&ecreads, &tk);
	if (!v)
		return 0;
	if (v->replies) {
		gen = cur_gen();
		record(slot, ST_SHARD_READ, v->last_ns - v->sent_ns, gen);
		ps = peer_stats_of(slot, v->last_peer, gen, 1);
		if (ps)
			ps->last++;
		e = EV_NEW(ev_shard_read, EV_SHARD_READ, bpf_ktime_get_ns(),
			   gen, slot);
		if (e) {
			e->op = v->key & ((1ULL << TARGET_SHIFT) - 1);
			e->read_ns = v->last_ns - v->sent_ns;
			e->last_peer = v->last_peer;
			e->tid = (__u32)bpf_get_current_pid_tgid();
			e->replies = v->replies > 255 ? 255 : v->replies;
			EV_SEND(e);
		}
	}
	bpf_map_delete_elem(&ecreads, &tk);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
