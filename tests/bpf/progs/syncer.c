/* syncer - calls syncfs(2) on a busy file system: ground truth for the
 * syncfs kernel stage.
 *
 * USAGE: syncer DIR N MB
 * After one line on stdin: N times, write MB MiB to a file in DIR (so there
 * is dirty data) and call syncfs(2) on it, timing each call. Prints
 * {"calls": N, "mean_us": ...} and exits.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000UL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	char path[4096], line[16], *buf;
	unsigned long total = 0;
	int n, mb, fd;

	if (argc != 4) {
		fprintf(stderr, "usage: syncer DIR N MB\n");
		return 2;
	}
	n = atoi(argv[2]);
	mb = atoi(argv[3]);
	snprintf(path, sizeof(path), "%s/syncer.dat", argv[1]);
	fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	buf = malloc(1 << 20);
	memset(buf, 'x', 1 << 20);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int i = 0; i < n; i++) {
		unsigned long t0;

		for (int j = 0; j < mb; j++)
			if (write(fd, buf, 1 << 20) != 1 << 20) {
				perror("write");
				return 1;
			}
		t0 = now_ns();
		if (syncfs(fd)) {
			perror("syncfs");
			return 1;
		}
		total += now_ns() - t0;
	}
	close(fd);
	unlink(path);
	printf("{\"calls\": %d, \"mean_us\": %.3f}\n", n, total / 1000.0 / n);
	return 0;
}
