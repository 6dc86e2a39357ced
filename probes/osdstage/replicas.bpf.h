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
	key = (__u64)slot << TARGET_SHIFT | op;
	if (req_index_op(&st->req, key)) {
		count(slot, CNT_REQ_MAP_FULL);
		st->sub_ns = 0;
	}
	return 0;
}

/* ReplicatedBackend::do_repop_reply(OpRequestRef): a replica's commit
 * reply, itself an op that went through the queue (done with now). */
SEC("uprobe")
int rep_reply(struct pt_regs *ctx)
{
	__u64 rop, rkey, now = bpf_ktime_get_ns(), peer = 0, wait;
	struct req_slot *k;
	struct peer_stats *ps;
	struct ev_replica_reply *e;
	struct op_state *st;
	struct reqid r = {};
	__u32 gen;
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
	wait = now - st->sub_ns;
	st->replies++;
	st->last_ns = now;
	st->last_peer = peer;
	gen = cur_gen();
	ps = peer_stats_of(slot, peer, gen);
	if (ps)
		hist_add(&ps->wait, wait);
	e = EV_NEW(ev_replica_reply, EV_REPLICA_REPLY, now, gen, slot);
	if (e) {
		e->op = k->key & ((1ULL << TARGET_SHIFT) - 1);
		e->wait_ns = wait;
		e->peer = peer;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		EV_SEND(e);
	}
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

/* ReplicatedBackend::op_commit(InProgressOpRef const&): the primary's own
 * commit of a replicated write */
SEC("uprobe")
int rep_local_commit(struct pt_regs *ctx)
{
	__u64 op, key, now = bpf_ktime_get_ns();
	struct ev_local_commit *e;
	struct op_state *st;
	__u32 gen;
	int slot;

	st = op_in(ctx, inprog_op_off, &slot, &op, &key);
	if (!st || !st->sub_ns || now < st->sub_ns)
		return 0;
	st->local_ns = now;
	gen = cur_gen();
	record(slot, ST_LOCAL_COMMIT, now - st->sub_ns, gen);
	e = EV_NEW(ev_local_commit, EV_LOCAL_COMMIT, now, gen, slot);
	if (e) {
		e->op = op;
		e->commit_ns = now - st->sub_ns;
		e->tid = (__u32)bpf_get_current_pid_tgid();
		EV_SEND(e);
	}
	return 0;
}

/* ReplicatedBackend::repop_commit(RepModifyRef): on a replica, the
 * replica op committed; its reply goes out now. */
SEC("uprobe")
int repop_done(struct pt_regs *ctx)
{
	__u64 op, key, now = bpf_ktime_get_ns();
	struct ev_repop_done *e;
	struct op_state *st;
	__u32 gen;
	int slot;

	st = op_in(ctx, repmod_op_off, &slot, &op, &key);
	if (!st) {
		if (slot >= 0)
			count(slot, CNT_OP_UNKNOWN);
		return 0;
	}
	gen = cur_gen();
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
		read_object(op, repop_name_off, e->object);
		EV_SEND(e);
	}
	op_forget(key);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
