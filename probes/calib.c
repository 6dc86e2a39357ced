/* calib.c - a function for measuring what a uprobe + uretprobe pair adds
 * to a timed call on this machine (lib/cephlat/engine/tracer.py _calibrate()).
 *
 * Built without optimisation so that, like Ceph's functions, it starts
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
