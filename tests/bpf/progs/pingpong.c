/* pingpong - a thread woken the moment it goes to sleep: ground truth
 * for wake-ups that race their sleeper's switch-out (the kernel fires
 * sched_waking as soon as the sleeper's state says it sleeps, sched_switch
 * after it has left its CPU).
 *
 * USAGE: pingpong SLEEPS
 * After one line on stdin, thread "ping" asks for a turn and sleeps in a
 * futex wait until it gets it, round after round until it has slept
 * SLEEPS times (or for 20 s); thread "pong" spins on the request and
 * grants it at once with a futex wake, so ping is woken before it
 * sleeps, while it leaves its CPU, or after (each on a CPU of its own:
 * the first two, if there are two). Prints {"ping": tid,
 * "pong": tid, "rounds": its rounds, "sleeps": ping's voluntary switches
 * during them (RUSAGE_THREAD: each a sleep, every one ended by pong's
 * wake)} and exits.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint32_t turn, asked, done;
static long pong_tid;

static void on_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % sysconf(_SC_NPROCESSORS_ONLN), &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static long nvcsw(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw;
}

static void *pong(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "pong");
	on_cpu(1);
	__atomic_store_n(&pong_tid, syscall(SYS_gettid), __ATOMIC_RELEASE);
	for (;;) {
		while (!__atomic_load_n(&asked, __ATOMIC_ACQUIRE))
			if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
				return NULL;
		__atomic_store_n(&asked, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&turn, 1, __ATOMIC_RELEASE);
		syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	char line[16];
	pthread_t t;
	long want, n, v0, sleeps = 0;
	time_t end;

	if (argc != 2 || (want = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: pingpong SLEEPS\n");
		return 2;
	}
	pthread_setname_np(pthread_self(), "ping");
	on_cpu(0);
	if (!fgets(line, sizeof(line), stdin) ||
	    pthread_create(&t, NULL, pong, NULL))
		return 1;
	while (!__atomic_load_n(&pong_tid, __ATOMIC_ACQUIRE))
		;
	end = time(NULL) + 20;
	v0 = nvcsw();
	for (n = 0; sleeps < want && (n & 1023 || time(NULL) < end); n++) {
		__atomic_store_n(&turn, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&asked, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&turn, __ATOMIC_ACQUIRE))
			syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, 0, NULL,
				NULL, 0);
		sleeps = nvcsw() - v0;
	}
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	printf("{\"ping\": %ld, \"pong\": %ld, \"rounds\": %ld, "
	       "\"sleeps\": %ld}\n", (long)syscall(SYS_gettid), pong_tid,
	       n, sleeps);
	return 0;
}
