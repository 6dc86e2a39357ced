/* calib.c - functions for measuring what the probes cost on this machine
 * (lib/cephlat/engine/calibrate.py):
 *
 * - cephlat_calib_target: probed (a uprobe + uretprobe pair, the programs
 *   that time Ceph's calls): what the pair adds to a timed call, and what
 *   a hit costs the thread it fires in;
 * - cephlat_calib_plain: the same function, never probed: the calls' own
 *   cost, taken out of the probed one's.
 *
 * Built without optimisation so that, like Ceph's functions, they start
 * with `push %rbp`, which the kernel emulates instead of single-stepping:
 * the same probe path as the traced OSD functions. Built twice: without
 * CET (Pacific) and with it (-fcf-protection=full: endbr64 first, probed
 * right after it, as on Reef and Tentacle); the tracer picks the flavour
 * of the target.
 */
__attribute__((noinline)) long cephlat_calib_target(long x)
{
	return x + 1;
}

__attribute__((noinline)) long cephlat_calib_plain(long x)
{
	return x + 1;
}
