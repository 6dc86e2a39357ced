/* cpuhog - take CPU time away from everything else, in bursts.
 *
 * USAGE: cpuhog SECS BUSY_MS IDLE_MS [fifo]
 * One thread per CPU, pinned, each spinning BUSY_MS then sleeping IDLE_MS,
 * for SECS seconds. With "fifo" the threads run SCHED_FIFO (priority 1), so
 * a woken normal thread on that CPU waits for the burst to end: plain CPU
 * hogs at normal priority barely delay a kernel's wake-ups (EEVDF favours
 * tasks that slept), a higher-priority busy process does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double secs, busy_ms, idle_ms;
static int fifo;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void *hog(void *arg)
{
	long cpu = (long)arg;
	cpu_set_t set;
	double end = now() + secs;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (fifo) {
		struct sched_param p = { .sched_priority = 1 };

		if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p))
			perror("SCHED_FIFO");
	}
	while (now() < end) {
		double stop = now() + busy_ms / 1000;

		while (now() < stop)
			;
		usleep(idle_ms * 1000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t t[256];

	if (argc < 4) {
		fprintf(stderr, "usage: cpuhog SECS BUSY_MS IDLE_MS [fifo]\n");
		return 2;
	}
	secs = atof(argv[1]);
	busy_ms = atof(argv[2]);
	idle_ms = atof(argv[3]);
	fifo = argc > 4 && !strcmp(argv[4], "fifo");
	for (long i = 0; i < n && i < 256; i++)
		pthread_create(&t[i], NULL, hog, (void *)i);
	for (long i = 0; i < n && i < 256; i++)
		pthread_join(t[i], NULL);
	return 0;
}
