/* labwire - the wire between the multi-host lab's network namespaces.
 *
 * The lab's hosts (vagrant/lab.sh, LAB_HOSTS) are network namespaces on
 * one kernel. Real links delay packets; the kernel's netem qdisc would do
 * it, but kernels without it (such as a VM kernel with no sch_netem and no
 * modules) need another way. labwire is a router in one process: each
 * namespace gets a TUN device, `labnet0`, created here in that namespace;
 * an IPv4 packet read from one device is written to the device whose
 * address is its destination, `delay` (+ up to `jitter`) microseconds
 * later: the delay of the sending host's link, on its way out, as netem on
 * each host's egress would add it. Each link keeps its packets in order
 * (a packet never leaves before the one sent before it on the same link).
 *
 *   labwire PIDFILE CTLFILE NS=ADDR[,DELAY_US[,JITTER_US]] ...
 *
 * NS is a name under /run/netns, or "-" for this process's own namespace;
 * ADDR the device's IPv4 address (assigned by the caller, lab.sh, once
 * PIDFILE exists: the devices are up to the caller). SIGHUP rereads
 * CTLFILE: lines "NS DELAY_US JITTER_US" change a link's delay (lab.sh
 * net-delay). SIGUSR1 appends the counters to CTLFILE.out. SIGTERM ends
 * it; the devices go with it.
 *
 * Counters: packets forwarded per link, dropped (no such destination, a
 * full queue), and the lateness of the writes against their release times
 * (the largest, the sum): what the wire adds beyond the delay asked for,
 * its own wake-ups on a busy machine.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 16
#define SLOTS 4096			/* packets queued per link */
#define PKT_MAX 2048			/* the devices' MTU is 1500 */
#define DEV "labnet0"

struct pkt {
	uint64_t release_ns;
	int to;
	uint16_t len;
	unsigned char data[PKT_MAX];
};

struct link {
	const char *ns;
	uint32_t addr;			/* network order */
	int fd;
	uint64_t delay_ns, jitter_ns, last_release_ns;
	struct pkt *q;			/* ring: SLOTS packets */
	unsigned head, tail;
	uint64_t fwd, drop_full, drop_dest, late_max_ns, late_sum_ns;
};

static struct link links[MAX_LINKS];
static int nlinks;
static volatile sig_atomic_t reread, dump, stop;
static const char *ctlfile;

static void die(const char *what)
{
	fprintf(stderr, "labwire: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reread = 1;
	else if (sig == SIGUSR1)
		dump = 1;
	else
		stop = 1;
}

/* A TUN device named DEV in namespace ns ("-": ours). */
static int open_tun(const char *ns)
{
	struct ifreq ifr;
	char path[256];
	int self = -1, target, fd;

	if (strcmp(ns, "-")) {
		self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		snprintf(path, sizeof(path), "/run/netns/%s", ns);
		target = open(path, O_RDONLY | O_CLOEXEC);
		if (self < 0 || target < 0)
			die(path);
		if (setns(target, CLONE_NEWNET))
			die("setns");
		close(target);
	}
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		die("/dev/net/tun");
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	strncpy(ifr.ifr_name, DEV, IFNAMSIZ - 1);
	if (ioctl(fd, TUNSETIFF, &ifr))
		die("TUNSETIFF " DEV);
	if (self >= 0) {
		if (setns(self, CLONE_NEWNET))
			die("setns back");
		close(self);
	}
	return fd;
}

/* "NS=ADDR[,DELAY_US[,JITTER_US]]" */
static void parse_link(struct link *l, const char *spec)
{
	char *arg = strdup(spec), *eq, *c;	/* argv stays as given (ps) */
	struct in_addr a;

	if (!arg)
		die("strdup");
	eq = strchr(arg, '=');

	if (!eq) {
		fprintf(stderr, "labwire: '%s' is not NS=ADDR[,DELAY_US[,JITTER_US]]\n",
			arg);
		exit(2);
	}
	*eq = 0;
	l->ns = arg;
	c = strchr(eq + 1, ',');
	if (c)
		*c = 0;
	if (inet_pton(AF_INET, eq + 1, &a) != 1) {
		fprintf(stderr, "labwire: '%s' is not an IPv4 address\n", eq + 1);
		exit(2);
	}
	l->addr = a.s_addr;
	if (c) {
		char *j = strchr(c + 1, ',');

		l->delay_ns = strtoull(c + 1, NULL, 10) * 1000;
		if (j)
			l->jitter_ns = strtoull(j + 1, NULL, 10) * 1000;
	}
}

static void read_ctl(void)
{
	char ns[128];
	unsigned long long d, j;
	FILE *f = fopen(ctlfile, "r");
	int i;

	if (!f)
		return;
	while (fscanf(f, "%127s %llu %llu", ns, &d, &j) == 3)
		for (i = 0; i < nlinks; i++)
			if (!strcmp(links[i].ns, ns)) {
				links[i].delay_ns = d * 1000;
				links[i].jitter_ns = j * 1000;
			}
	fclose(f);
}

static void write_counters(void)
{
	char path[512];
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "%s.out", ctlfile);
	f = fopen(path, "w");
	if (!f)
		return;
	for (i = 0; i < nlinks; i++)
		fprintf(f, "%s delay_us=%llu jitter_us=%llu forwarded=%llu "
			"dropped_full=%llu dropped_dest=%llu late_max_us=%llu "
			"late_sum_us=%llu\n",
			links[i].ns,
			(unsigned long long)links[i].delay_ns / 1000,
			(unsigned long long)links[i].jitter_ns / 1000,
			(unsigned long long)links[i].fwd,
			(unsigned long long)links[i].drop_full,
			(unsigned long long)links[i].drop_dest,
			(unsigned long long)links[i].late_max_ns / 1000,
			(unsigned long long)links[i].late_sum_ns / 1000);
	fclose(f);
}

static int dest_of(const unsigned char *p, ssize_t n)
{
	uint32_t dst;
	int i;

	if (n < 20 || (p[0] >> 4) != 4)
		return -1;
	memcpy(&dst, p + 16, 4);
	for (i = 0; i < nlinks; i++)
		if (links[i].addr == dst)
			return i;
	return -1;
}

/* Read what link l has, queue each packet on l (its egress) for release. */
static void take(struct link *l)
{
	for (;;) {
		struct pkt *p;
		ssize_t n;
		uint64_t rel;

		if (l->tail - l->head == SLOTS) {
			unsigned char sink[PKT_MAX];

			if (read(l->fd, sink, sizeof(sink)) < 0)
				return;
			l->drop_full++;
			continue;
		}
		p = &l->q[l->tail % SLOTS];
		n = read(l->fd, p->data, PKT_MAX);
		if (n <= 0)
			return;
		p->to = dest_of(p->data, n);
		if (p->to < 0) {
			l->drop_dest++;
			continue;
		}
		p->len = n;
		rel = now_ns() + l->delay_ns;
		if (l->jitter_ns)
			rel += (uint64_t)random() % (l->jitter_ns + 1);
		if (rel < l->last_release_ns)	/* keep the link's order */
			rel = l->last_release_ns;
		p->release_ns = l->last_release_ns = rel;
		l->tail++;
	}
}

/* Write every packet due; -> the next release time (0: none queued). */
static uint64_t release_due(void)
{
	uint64_t next = 0, now = now_ns();
	int i;

	for (i = 0; i < nlinks; i++) {
		struct link *l = &links[i];

		while (l->head != l->tail) {
			struct pkt *p = &l->q[l->head % SLOTS];

			if (p->release_ns > now) {
				if (!next || p->release_ns < next)
					next = p->release_ns;
				break;
			}
			if (now - p->release_ns > l->late_max_ns)
				l->late_max_ns = now - p->release_ns;
			l->late_sum_ns += now - p->release_ns;
			/* a full device queue drops, as a wire would */
			if (write(links[p->to].fd, p->data, p->len) == p->len)
				l->fwd++;
			else
				l->drop_full++;
			l->head++;
		}
	}
	return next;
}

int main(int argc, char **argv)
{
	struct pollfd pfd[MAX_LINKS];
	struct sigaction sa;
	sigset_t none, blocked;
	FILE *pf;
	int i;

	if (argc < 4 || argc - 3 > MAX_LINKS) {
		fprintf(stderr, "usage: labwire PIDFILE CTLFILE "
			"NS=ADDR[,DELAY_US[,JITTER_US]] ... (2 to %d links)\n",
			MAX_LINKS);
		return 2;
	}
	ctlfile = argv[2];
	nlinks = argc - 3;
	/* wake-ups on time: the default timer slack is 50 us */
	prctl(PR_SET_TIMERSLACK, 1UL);
	for (i = 0; i < nlinks; i++) {
		parse_link(&links[i], argv[3 + i]);
		links[i].q = calloc(SLOTS, sizeof(struct pkt));
		if (!links[i].q)
			die("calloc");
		links[i].fd = open_tun(links[i].ns);
		pfd[i].fd = links[i].fd;
		pfd[i].events = POLLIN;
	}
	read_ctl();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* the signals arrive only inside ppoll (no wake-up lost between the
	 * flags' checks and the wait) */
	sigemptyset(&none);
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGHUP);
	sigaddset(&blocked, SIGUSR1);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGINT);
	sigprocmask(SIG_BLOCK, &blocked, NULL);
	pf = fopen(argv[1], "w");
	if (!pf)
		die(argv[1]);
	fprintf(pf, "%d\n", getpid());
	fclose(pf);
	while (!stop) {
		uint64_t next = release_due();
		struct timespec ts, *tsp = NULL;

		if (reread) {
			reread = 0;
			read_ctl();
		}
		if (dump) {
			dump = 0;
			write_counters();
		}
		if (next) {
			uint64_t now = now_ns(), d = next > now ? next - now : 0;

			ts.tv_sec = d / 1000000000ull;
			ts.tv_nsec = d % 1000000000ull;
			tsp = &ts;
		}
		if (ppoll(pfd, nlinks, tsp, &none) < 0 && errno != EINTR)
			die("ppoll");
		for (i = 0; i < nlinks; i++)
			if (pfd[i].revents & POLLIN)
				take(&links[i]);
	}
	write_counters();
	return 0;
}
