/* target.c - the functions the probe-floor bench (bench/floor.py)
 * probes, and the loop that calls them: each function's first bytes are
 * written out here, so that the probe lands on a known instruction
 * whatever the compiler would have made.
 *
 *   f_push  push %rbp first: the kernel emulates it (no single-step); the
 *           prologue of Ceph's Pacific build.
 *   f_cet   endbr64 then push %rbp, probed at +4 (after the endbr64), as
 *           the tracer probes Reef's and Tentacle's CET builds.
 *   f_xol   lea first: copied out of line and single-stepped (a second
 *           trap).
 *   f_jcc   a conditional jump first (after a test): probed on the jump,
 *           which the kernel emulates; where the tracer moves an op
 *           event's probe when the function's entry would single-step.
 *   f_nop5  a 5-byte nop first: kernels with the uprobe syscall (6.18 on
 *           x86_64) rewrite it into a call to a trampoline after its first
 *           hit, so later hits take a syscall instead of a trap.
 *
 * Usage: target FUNCTION CALLS [GAP_US]
 * Prints "<thread cpu ns per call> <first 5 bytes of FUNCTION in hex>" on
 * stdout, the bytes read after the loop (a rewritten nop5 shows e8: call).
 * GAP_US: sleep that long before each call (the thread leaves the CPU, as
 * an OSD's workers do between ops; the sleep's own CPU time is in every
 * call, probed or not).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__asm__(
	".text\n"
	".globl f_push\n.type f_push,@function\nf_push:\n"
	"	push %rbp\n	mov %rsp,%rbp\n	lea 1(%rdi),%rax\n"
	"	pop %rbp\n	ret\n.size f_push,.-f_push\n"
	".globl f_cet\n.type f_cet,@function\nf_cet:\n"
	"	endbr64\n	push %rbp\n	mov %rsp,%rbp\n	lea 1(%rdi),%rax\n"
	"	pop %rbp\n	ret\n.size f_cet,.-f_cet\n"
	".globl f_xol\n.type f_xol,@function\nf_xol:\n"
	"	lea 1(%rdi),%rax\n	ret\n.size f_xol,.-f_xol\n"
	".globl f_jcc\n.type f_jcc,@function\nf_jcc:\n"
	"	test %rdi,%rdi\n	js 1f\n	lea 1(%rdi),%rax\n	ret\n"
	"1:	xor %eax,%eax\n	ret\n.size f_jcc,.-f_jcc\n"
	".globl f_nop5\n.type f_nop5,@function\nf_nop5:\n"
	"	.byte 0x0f,0x1f,0x44,0x00,0x00\n	lea 1(%rdi),%rax\n"
	"	ret\n.size f_nop5,.-f_nop5\n");

long f_push(long), f_cet(long), f_xol(long), f_jcc(long), f_nop5(long);

static const struct {
	const char *name;
	long (*fn)(long);
} fns[] = {
	{"f_push", f_push}, {"f_cet", f_cet}, {"f_xol", f_xol},
	{"f_jcc", f_jcc}, {"f_nop5", f_nop5},
};

static long long cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long (*volatile fn)(long) = 0;
	const unsigned char *code;
	long calls, i, x = 0;
	long long t0, t1;
	size_t k;

	long gap_us = argc > 3 ? atol(argv[3]) : 0;
	struct timespec gap = {gap_us / 1000000, gap_us % 1000000 * 1000};

	if (argc < 3 || argc > 4 || (calls = atol(argv[2])) <= 0 ||
	    gap_us < 0) {
		fprintf(stderr, "usage: target FUNCTION CALLS [GAP_US]\n");
		return 2;
	}
	for (k = 0; k < sizeof(fns) / sizeof(fns[0]); k++)
		if (!strcmp(argv[1], fns[k].name))
			fn = fns[k].fn;
	if (!fn) {
		fprintf(stderr, "target: no function %s\n", argv[1]);
		return 2;
	}
	t0 = cpu_ns();
	for (i = 0; i < calls; i++) {
		if (gap_us)
			nanosleep(&gap, 0);
		x = fn(x);
	}
	t1 = cpu_ns();
	code = (const unsigned char *)fn;
	printf("%.2f %02x%02x%02x%02x%02x\n", (double)(t1 - t0) / calls,
	       code[0], code[1], code[2], code[3], code[4]);
	return x == calls ? 0 : 1;
}
