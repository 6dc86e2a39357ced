/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage/calls.bpf.h - "call" stages: a function's entry to its return on one thread.
 * Part of osdstage.bpf.c, which includes the parts in order: one
 * compilation unit, not a header of its own. */

/* ------------------------------------------------------------------------
 * "call" stages */

/* The slot of a "call" probe's process: a target's, or 0 for our own
 * calibration calls; -1 = not ours. */
static __always_inline int call_slot(__u64 id)
{
	int slot = target_of(id >> 32);

	if (slot < 0 && (id >> 32) == calib_tgid)
		return 0;
	return slot;
}

/* A stage of background work run outside dequeue_op? */
static __always_inline int is_background(__u32 stage)
{
	return stage >= ST__BACKGROUND && stage < ST__PROBED;
}

SEC("uprobe")
int stage_entry(struct pt_regs *ctx)
{
	__u64 t0 = bpf_ktime_get_ns();	/* first thing: the run to the stamp */
	__u64 id = bpf_get_current_pid_tgid();
	__u32 stage = bpf_get_attach_cookie(ctx) & (MAX_STAGES - 1);
	struct task_starts *t;
	int slot = call_slot(id);

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_ENTRY);
	t = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		count(slot, CNT_START_MAP_FULL);
		return 0;
	}
	if (stage == ST_DEQUEUE_OP)	/* as in op_dequeue */
		t->ts[ST_DO_OP] = 0;
	/* a background item: a sleep inside it is work (its return clears
	 * that), as inside an op */
	if (is_background(stage))
		mark_in_op((__u32)id, 1);
	/* last thing: what follows the timestamp is probe cost, not the call;
	 * how long the program took to get here says how cold the CPU is,
	 * and with it that cost (struct ctl) */
	t->ts[stage] = bpf_ktime_get_ns();
	t->cost[stage] = t->ts[stage] - t0;
	if (stage == ST__CALIB)
		record(slot, ST__CALIB_ENTRY, t->cost[stage], cur_gen());
	return 0;
}

/* What the probes added to a call whose entry program ran `cost` ns to
 * its stamp (struct ctl). */
static __always_inline __u64 call_bias(__u32 cost)
{
	__u64 b = ctl.call_bias_ns, less;

	if (cost > ctl.call_cold_max_ns)
		cost = ctl.call_cold_max_ns;
	if (cost > ctl.call_cold_ns)
		return b + (((__u64)(cost - ctl.call_cold_ns) *
			     ctl.call_cold_x16) >> 4);
	if (cost >= ctl.call_warm_ns)
		return b;
	less = ((__u64)(ctl.call_warm_ns - cost) * ctl.call_warm_x16) >> 4;
	return b > ctl.call_bias_min_ns + less ? b - less :
						 ctl.call_bias_min_ns;
}

/* A call stage ended: its statistics and capture event. */
static __always_inline void end_call(__u32 slot, __u32 stage, __u64 now,
				     __u64 d, __u64 bias, __u64 op, __u32 tid,
				     __u32 gen)
{
	struct ev_stage *e;

	d = d > bias ? d - bias : 0;
	e = EV_NEW(ev_stage, EV_STAGE, now, gen, slot);
	if (e) {
		e->duration_ns = d;
		e->op = op;
		e->tid = tid;
		e->stage = stage;
		EV_SEND(e);
	}
	record(slot, stage, d, gen);
}

SEC("uretprobe")
int stage_return(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();	/* first thing, for the same reason */
	__u64 id = bpf_get_current_pid_tgid();
	__u32 stage = bpf_get_attach_cookie(ctx) & (MAX_STAGES - 1);
	struct task_starts *t;
	__u64 d, bias, op;
	__u32 gen;
	int slot = call_slot(id);

	if (slot < 0)
		return 0;
	count(slot, CNT_HIT_RETURN);
	if (is_background(stage))
		mark_in_op((__u32)id, 0);
	t = bpf_task_storage_get(&starts, bpf_get_current_task_btf(), 0, 0);
	if (!t || !t->ts[stage]) {
		/* dequeue_op's start is op_dequeue's when both are wanted
		 * (probetable: merged): an op event, attached after this
		 * return probe and detached before it, so a return without
		 * its start is a call of an op not followed, not a loss. A
		 * uretprobe never fires for a call entered before it was
		 * attached. */
		if (stage != ST_DEQUEUE_OP)
			count(slot, CNT_NO_START);
		return 0;
	}
	if (now < t->ts[stage]) {
		count(slot, CNT_NEGATIVE);
		t->ts[stage] = 0;
		return 0;
	}
	d = now - t->ts[stage];
	t->ts[stage] = 0;
	op = t->cur_op;
	bias = call_bias(t->cost[stage]);
	gen = cur_gen();
	if (stage == ST_DEQUEUE_OP) {	/* the worker is done with its op */
		mark_in_op((__u32)id, 0);
		t->cur_op = 0;
		/* do_op ran inside it and has no return probe of its own
		 * (probetable: ends_at) */
		if (t->ts[ST_DO_OP] && now > t->ts[ST_DO_OP])
			end_call(slot, ST_DO_OP, now, now - t->ts[ST_DO_OP],
				 call_bias(t->cost[ST_DO_OP]), op, (__u32)id,
				 gen);
		t->ts[ST_DO_OP] = 0;
	}
	if (stage == ST__CALIB)
		record(slot, stage, d, gen);
	else
		end_call(slot, stage, now, d, bias, op, (__u32)id, gen);
	return 0;
}
