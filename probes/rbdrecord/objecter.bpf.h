/* SPDX-License-Identifier: GPL-2.0 */
/* rbdrecord/objecter.bpf.h - the client's Objecter: each OSD op sent and
 * each reply. Part of rbdrecord.bpf.c, which includes it last: one
 * compilation unit, not a header of its own. */

/* ------------------------------------------------- the Objecter's OSD ops
 *
 * void Objecter::_send_op(Op *op) and
 * void Objecter::handle_osd_op_reply(MOSDOpReply *m), in libceph-common
 * (Pacific) or linked into librados / librbd. The offsets are Ceph's
 * struct layouts for the client library's release, checked against its
 * DWARF (lib/cephlat/ceph/objecter.py, tests/cluster/test_objecter.py);
 * objecter_on is 0 when the release has no checked offsets.
 */
const volatile __u32 objecter_on = 0;
const volatile __u32 obj_msgr_off = 0;	/* Objecter::messenger */
const volatile __u32 obj_inc_off = 0;	/* Objecter::client_inc */
const volatile __u32 msgr_name_off = 0;	/* Messenger::my_name (entity_name_t) */
const volatile __u32 op_flags_off = 0;	/* Op::target.flags */
const volatile __u32 op_oid_off = 0;	/* Op::target.target_oid.name */
const volatile __u32 op_pgid_off = 0;	/* Op::target.actual_pgid.pgid */
const volatile __u32 op_osd_off = 0;	/* Op::target.osd */
const volatile __u32 op_tid_off = 0;	/* Op::tid */
const volatile __u32 op_attempts_off = 0;	/* Op::attempts */
const volatile __u32 op_ops_off = 0;	/* Op::ops (osdc_opvec: a boost
					 * small_vector of OSDOp: its data
					 * pointer, then its size) */
const volatile __u32 osdop_size = 0;	/* sizeof(OSDOp) */
const volatile __u32 msg_tid_off = 0;	/* Message::header.tid */
const volatile __u32 msg_src_off = 0;	/* Message::header.src (type, num) */

/* the client's entity number (this->messenger->my_name._num) and
 * incarnation into r */
static __always_inline int client_of(void *objecter, struct rbd_osdop_rec *r)
{
	void *msgr = 0;

	if (bpf_probe_read_user(&msgr, sizeof(msgr), objecter + obj_msgr_off) ||
	    !msgr ||
	    bpf_probe_read_user(&r->client, sizeof(r->client),
				msgr + msgr_name_off + 8) ||
	    bpf_probe_read_user(&r->inc, sizeof(r->inc),
				objecter + obj_inc_off))
		return -1;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(osdop_send, void *objecter, void *op)
{
	struct rbd_osdop_rec *r;
	struct { char *p; __u64 len; } name = {};
	struct { __u64 pool; __u32 seed; } pg = {};
	struct { void *start; __u64 size; } vec = {};

	if (!objecter_on || !ours())
		return 0;
	r = rec_new(sizeof(*r), RBD_OSD_OP_SEND, bpf_ktime_get_ns());
	if (!r)
		return 0;
	r->oid[0] = 0;
	r->oid_len = 0;
	if (client_of(objecter, r) ||
	    bpf_probe_read_user(&r->tid, sizeof(r->tid), op + op_tid_off) ||
	    bpf_probe_read_user(&r->flags, sizeof(r->flags), op + op_flags_off) ||
	    bpf_probe_read_user(&r->osd, sizeof(r->osd), op + op_osd_off) ||
	    bpf_probe_read_user(&r->attempts, sizeof(r->attempts),
				op + op_attempts_off) ||
	    bpf_probe_read_user(&pg, sizeof(pg), op + op_pgid_off) ||
	    bpf_probe_read_user(&name, sizeof(name), op + op_oid_off)) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		count_lost(RBD_LOST_UNREAD);
		return 0;
	}
	r->pool = pg.pool;
	r->seed = pg.seed;
	r->oid_len = name.len;
	r->ext_off = r->ext_len = 0;
	r->nops = 0;
	r->first_op = 0;
	r->pad = 0;
	/* the first OSDOp starts with struct ceph_osd_op (include/rados.h,
	 * the wire format, packed): __le16 op, __le32 flags, then for reads
	 * and writes __le64 extent.offset, __le64 extent.length */
	if (!bpf_probe_read_user(&vec, sizeof(vec), op + op_ops_off) &&
	    vec.start && vec.size) {
		struct { __u16 op; __u32 flags; __u64 off, len; }
			__attribute__((packed)) sub = {};

		r->nops = vec.size;
		/* the first data sub-op of the first two (CEPH_OSD_OP_TYPE_DATA:
		 * read, write, ...; not the set-alloc-hint a write to a new
		 * object starts with), else the first */
		for (int i = 0; i < 2 && i < vec.size; i++) {
			int data;

			if (bpf_probe_read_user(&sub, sizeof(sub),
						vec.start + i * osdop_size))
				break;
			data = (sub.op & 0x0f00) == 0x0200 &&
				sub.op != RBD_OSD_OP_SETALLOCHINT;
			if (i == 0 || data) {
				r->first_op = sub.op;
				r->ext_off = sub.off;
				r->ext_len = sub.len;
			}
			if (data)
				break;
		}
	}
	/* std::string: its characters, NUL-terminated (SSO or not) */
	bpf_probe_read_user_str(r->oid, sizeof(r->oid), name.p);
	SEND(r);
	return 0;
}

static __always_inline int osdop_reply_rec(__u32 ev, void *objecter,
					   __u64 tid, __s32 osd)
{
	struct rbd_osdop_rec *r;

	r = rec_new(sizeof(*r), ev, bpf_ktime_get_ns());
	if (!r)
		return 0;
	__builtin_memset((char *)r + sizeof(r->h), 0, sizeof(*r) - sizeof(r->h));
	if (client_of(objecter, r)) {
		bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
		count_lost(RBD_LOST_UNREAD);
		return 0;
	}
	r->tid = tid;
	r->osd = osd;
	SEND(r);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(osdop_reply, void *objecter, void *m)
{
	struct call_args a = { .a1 = (__u64)objecter };
	struct { __u8 type; __u64 num; } __attribute__((packed)) src = {};

	if (!objecter_on || !ours())
		return 0;
	if (bpf_probe_read_user(&a.a2, sizeof(a.a2), m + msg_tid_off) ||
	    bpf_probe_read_user(&src, sizeof(src), m + msg_src_off)) {
		count_lost(RBD_LOST_UNREAD);
		return 0;
	}
	a.a3 = src.num;
	save(&a);
	return osdop_reply_rec(RBD_OSD_OP_REPLY, objecter, a.a2, (__s32)a.a3);
}

SEC("uretprobe")
int BPF_KRETPROBE(osdop_reply_ret)
{
	struct call_args a;

	if (!objecter_on || !ours() || !take(&a))
		return 0;
	return osdop_reply_rec(RBD_OSD_OP_DONE, (void *)a.a1, a.a2,
			       (__s32)a.a3);
}
