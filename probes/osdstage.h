/* SPDX-License-Identifier: GPL-2.0 */
/* osdstage.h - structures shared by osdstage.bpf.c and lib/cephlat/ (ctypes).
 *
 * Keep in sync with lib/cephlat/layout.py; tests/unit/test_layout.py checks
 * the constants against this file.
 */
#ifndef OSDSTAGE_H
#define OSDSTAGE_H

#define MAX_STAGES	16	/* stage ids 0..MAX_STAGES-1, set by the probe table */

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
	CNT__MAX = 8,
};

#endif /* OSDSTAGE_H */
