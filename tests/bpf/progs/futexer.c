/* futexer - futex waits of known outcome: ground truth for the futex_wait
 * kernel stage (taken from the scheduler: a wait is a sleep inside
 * futex(2); its timeout from the deadline it was given).
 *
 * USAGE: futexer N
 * After one line on stdin, its main thread makes, N times each:
 *  - a FUTEX_WAIT on a word that has changed (EAGAIN: never asleep);
 *  - a FUTEX_WAIT with a relative 2 ms timeout (ETIMEDOUT);
 *  - a FUTEX_WAIT_BITSET on the "cv" word with an absolute CLOCK_MONOTONIC
 *    deadline 2 ms away (ETIMEDOUT);
 *  - a FUTEX_WAIT_BITSET on the "cv" word, 1 s deadline, that thread
 *    "waker" wakes after 3 ms (returns 0).
 * Prints {"tid": ..., "cv": ..., "eagain": ..., "timedout": ...,
 * "woken": ..., "other": ..., "preempted": ..., "preempted_cv": ...} (the
 * return values seen; the timed-out waits during which the thread was
 * preempted (its involuntary switches, RUSAGE_THREAD), all and those on
 * "cv": one preempted between arming its sleep and sleeping finds its
 * deadline passed when it runs again and never sleeps) and exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile uint32_t word, cv[2] __attribute__((aligned(8)));
static volatile int armed, quit;

static long futex(volatile uint32_t *a, int op, uint32_t v,
		  const struct timespec *t, uint32_t bits)
{
	return syscall(SYS_futex, a, op, v, t, NULL, bits);
}

static long nivcsw(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nivcsw;
}

static void *waker(void *arg)
{
	struct timespec d = {0, 3000000};

	(void)arg;
	pthread_setname_np(pthread_self(), "waker");
	while (!quit) {
		if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE)) {
			nanosleep(&(struct timespec){0, 200000}, NULL);
			continue;
		}
		nanosleep(&d, NULL);	/* the main thread is asleep by now */
		__atomic_store_n(&armed, 0, __ATOMIC_RELEASE);
		__atomic_add_fetch(&cv[0], 1, __ATOMIC_RELEASE);
		futex(&cv[0], FUTEX_WAKE_PRIVATE, 1, NULL, 0);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10, eagain = 0, timedout = 0,
	    woken = 0, other = 0, preempted = 0, preempted_cv = 0;
	struct timespec rel = {0, 2000000}, abs;
	char line[16];
	pthread_t th;
	long r, sw;

	pthread_create(&th, NULL, waker, NULL);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int i = 0; i < n; i++) {
		r = futex(&word, FUTEX_WAIT_PRIVATE, word + 1, NULL, 0);
		if (r < 0 && errno == EAGAIN) eagain++; else other++;
		sw = nivcsw();
		r = futex(&word, FUTEX_WAIT_PRIVATE, word, &rel, 0);
		if (r < 0 && errno == ETIMEDOUT) timedout++; else other++;
		preempted += nivcsw() != sw;
		/* counted from before the deadline is read: a preemption
		 * between reading the clock and sleeping eats the 2 ms too */
		sw = nivcsw();
		clock_gettime(CLOCK_MONOTONIC, &abs);
		abs.tv_nsec += 2000000;
		if (abs.tv_nsec >= 1000000000) {
			abs.tv_sec++;
			abs.tv_nsec -= 1000000000;
		}
		r = futex(&cv[0], FUTEX_WAIT_BITSET_PRIVATE, cv[0], &abs,
			  FUTEX_BITSET_MATCH_ANY);
		if (r < 0 && errno == ETIMEDOUT) timedout++; else other++;
		if (nivcsw() != sw) {
			preempted++;
			preempted_cv++;
		}
		clock_gettime(CLOCK_MONOTONIC, &abs);
		abs.tv_sec++;
		{
			uint32_t v = cv[0];

			__atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
			r = futex(&cv[0], FUTEX_WAIT_BITSET_PRIVATE, v, &abs,
				  FUTEX_BITSET_MATCH_ANY);
		}
		if (r == 0) woken++; else other++;
		while (__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
			nanosleep(&(struct timespec){0, 100000}, NULL);
	}
	quit = 1;
	pthread_join(th, NULL);
	printf("{\"tid\": %ld, \"cv\": %lu, \"eagain\": %d, \"timedout\": %d, "
	       "\"woken\": %d, \"other\": %d, \"preempted\": %d, "
	       "\"preempted_cv\": %d}\n", (long)gettid(),
	       (unsigned long)(uintptr_t)&cv[0], eagain, timedout, woken,
	       other, preempted, preempted_cv);
	fflush(stdout);
	return 0;
}
