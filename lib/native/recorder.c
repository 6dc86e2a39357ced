// SPDX-License-Identifier: GPL-2.0
/* recorder.c - drain a BPF ring buffer: into CTF stream files (osdstage
 * captures), or raw into one buffer (rbdrecord; see the end).
 *
 * Built into build/libcephlat_rec.so and driven by lib/cephlat/capture/
 * format.py through ctypes. Python is involved in no event: each record in
 * the ring is already a complete CTF event (probes/osdstage.h, struct
 * ev_hdr + payload), so this only routes it to the stream of the CPU it
 * was recorded on and cuts the streams into packets.
 *
 * The ring is drained by a thread of its own (rec_start): the BPF programs
 * submit without wake-ups, so it polls, every `interval_us` or sooner when
 * the ring fills fast (before a quarter of it fills at the rate the last
 * pass saw). Python's
 * loop (reports, map reads: tens of ms and more) then never delays the
 * draining; a lock orders it with the calls from Python (rec_consume,
 * rec_flush, rec_stats). Without rec_start, Python drains (rec_consume).
 *
 * Packets (layout = the metadata written by lib/cephlat/ctf.py):
 *   header:  u32 magic, u8 uuid[16], u32 stream_id
 *   context: u64 timestamp_begin, timestamp_end, content_size (bits),
 *            packet_size (bits), events_discarded; u32 cpu_id
 * Full packets are written BATCH at a time (one write(2) of up to BATCH
 * packets) and all at each flush, so a file cut short holds whole packets
 * plus at most one partial one.
 *
 * CTF readers need each stream's timestamps in order, across packets too
 * (babeltrace2's muxer stops at the first message older than one it has
 * delivered). Records of one CPU arrive almost in order (a program can be
 * interrupted between reading the clock and reserving its record); a
 * record older than its stream's last one -- in this packet or an earlier
 * one -- is written with that last timestamp and counted ("reordered"), so
 * every packet's bounds contain its events and follow the packet before.
 *
 * The event header's layout is struct ev_hdr of probes/osdstage.h, the one
 * contract; its offsets are taken from the header here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <stddef.h>
#include <linux/types.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "osdstage.h"

#define CTF_MAGIC	0xC1FC1FC1u
#define HDR_SIZE	24
#define CTX_SIZE	44
#define PKT_HEAD	(HDR_SIZE + CTX_SIZE)
#define EV_TS_OFF	offsetof(struct ev_hdr, ts)
#define EV_CPU_OFF	offsetof(struct ev_hdr, cpu)
#define EV_HDR_SIZE	sizeof(struct ev_hdr)
#define MAX_CPUS	1024
#define BATCH		8	/* full packets per write(2) */

struct stream {
	int fd;
	unsigned char *buf;	/* BATCH packets: done ones, then the open one */
	unsigned char *pkt;	/* the packet being filled (in buf) */
	size_t len;		/* its bytes used, including the packet head */
	uint64_t first_ts;	/* the open packet's first event */
	uint64_t last_ts;	/* the stream's last event (any packet) */
	int has_events;
};

struct rec {
	struct ring_buffer *rb;
	char dir[4096];
	unsigned char uuid[16];
	size_t packet_size;
	struct stream streams[MAX_CPUS];
	uint64_t events, bytes, packets, reordered, malformed;
	int err;		/* first write error (errno), sticky */
	/* the drain thread */
	pthread_mutex_t lock;	/* the ring, streams and counters */
	pthread_t thread;
	int running, stop;
	unsigned interval_us;
	size_t ring_size, pass_bytes;	/* record bytes taken in a pass */
	uint64_t passes, busy_passes, reported;
};

static int stream_open(struct rec *r, unsigned cpu)
{
	struct stream *s = &r->streams[cpu];
	char path[4200];

	if (s->buf)
		return 0;
	snprintf(path, sizeof(path), "%s/stream_cpu%u", r->dir, cpu);
	s->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (s->fd < 0)
		return -errno;
	s->buf = calloc(BATCH, r->packet_size);
	if (!s->buf) {
		close(s->fd);
		return -ENOMEM;
	}
	s->pkt = s->buf;
	s->len = PKT_HEAD;
	return 0;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static int write_all(struct rec *r, int fd, const unsigned char *p,
		     size_t size)
{
	size_t off = 0;

	while (off < size) {
		ssize_t n = write(fd, p + off, size - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (!r->err)
				r->err = errno;
			return -errno;
		}
		off += n;
	}
	r->bytes += size;
	return 0;
}

/* Close the stream's open packet (padded to packet_size if `whole`, else
 * cut to its content); write the batch when it is full or `out`. */
static int stream_flush(struct rec *r, unsigned cpu, int whole, int out)
{
	struct stream *s = &r->streams[cpu];
	unsigned char *p = s->pkt;
	size_t size;

	if (!s->buf)
		return 0;
	if (s->has_events) {
		size = whole ? r->packet_size : (s->len + 7) / 8 * 8;
		memset(p + s->len, 0, size - s->len);
		put32(p, CTF_MAGIC);
		memcpy(p + 4, r->uuid, 16);
		put32(p + 20, 0);
		put64(p + HDR_SIZE, s->first_ts);
		put64(p + HDR_SIZE + 8, s->last_ts);
		put64(p + HDR_SIZE + 16, (uint64_t)s->len * 8);
		put64(p + HDR_SIZE + 24, (uint64_t)size * 8);
		put64(p + HDR_SIZE + 32, 0);
		put32(p + HDR_SIZE + 40, cpu);
		r->packets++;
		s->pkt += size;
		s->len = PKT_HEAD;
		s->has_events = 0;
	}
	if (s->pkt > s->buf &&
	    (out || s->pkt + r->packet_size > s->buf + BATCH * r->packet_size)) {
		size = s->pkt - s->buf;
		s->pkt = s->buf;
		if (write_all(r, s->fd, s->buf, size))
			return -r->err;
	}
	return 0;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct rec *r = ctx;
	unsigned char *ev = data;
	struct stream *s;
	uint32_t cpu;
	uint64_t ts;

	if (r->err)
		return -r->err;		/* stop consuming: the caller reports */
	if (size < EV_HDR_SIZE || size > r->packet_size - PKT_HEAD) {
		r->malformed++;
		return 0;
	}
	memcpy(&cpu, ev + EV_CPU_OFF, 4);
	memcpy(&ts, ev + EV_TS_OFF, 8);
	if (cpu >= MAX_CPUS) {
		r->malformed++;
		return 0;
	}
	if (!r->streams[cpu].buf && stream_open(r, cpu)) {
		if (!r->err)
			r->err = errno ? errno : EIO;
		return -r->err;
	}
	s = &r->streams[cpu];
	r->pass_bytes += size + 8;	/* + the ring's record header */
	if (s->len + size > r->packet_size && stream_flush(r, cpu, 1, 0))
		return -r->err;
	memcpy(s->pkt + s->len, ev, size);
	if (ts < s->last_ts) {
		ts = s->last_ts;
		put64(s->pkt + s->len + EV_TS_OFF, ts);
		r->reordered++;
	}
	s->last_ts = ts;
	if (!s->has_events) {
		s->first_ts = ts;
		s->has_events = 1;
	}
	s->len += size;
	r->events++;
	return 0;
}

/* A recorder writing the ring buffer map `map_fd` into directory `dir`
 * (which must exist) in packets of `packet_size` bytes. NULL on error
 * (errno set). */
struct rec *rec_open(int map_fd, const char *dir, const unsigned char *uuid,
		     unsigned packet_size)
{
	struct bpf_map_info info = {};
	__u32 info_len = sizeof(info);
	struct rec *r;

	if (packet_size < PKT_HEAD + 256 || packet_size % 8 ||
	    strlen(dir) >= sizeof(r->dir)) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	strcpy(r->dir, dir);
	memcpy(r->uuid, uuid, 16);
	r->packet_size = packet_size;
	pthread_mutex_init(&r->lock, NULL);
	/* unknown (0): passes at the interval only */
	r->ring_size = bpf_obj_get_info_by_fd(map_fd, &info, &info_len) ?
		       0 : info.max_entries;
	r->rb = ring_buffer__new(map_fd, on_event, r, NULL);
	if (!r->rb) {
		int e = errno;

		pthread_mutex_destroy(&r->lock);
		free(r);
		errno = e;
		return NULL;
	}
	return r;
}

/* One pass over the ring, under the lock. -> record bytes taken, or -1
 * after a write error */
static long drain(struct rec *r)
{
	long got;

	pthread_mutex_lock(&r->lock);
	r->pass_bytes = 0;
	if (!r->err)
		ring_buffer__consume(r->rb);
	r->passes++;
	got = r->err ? -1 : (long)r->pass_bytes;
	pthread_mutex_unlock(&r->lock);
	return got;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

/* Pass every interval_us, sooner while the ring fills fast: the next pass
 * comes before a quarter of the ring fills at the rate the last one saw
 * (at once below 20 us: a "busy" pass). */
static void *drain_thread(void *arg)
{
	struct rec *r = arg;
	uint64_t last = now_ns(), interval = r->interval_us * 1000ull;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		long got = drain(r);
		uint64_t t = now_ns(), wait = interval;
		struct timespec ts;

		if (got < 0)
			break;		/* rec_consume reports it */
		if (r->ring_size && got > 0) {
			double q = (double)(t - last) * (r->ring_size / 4) / got;

			if (q < wait)
				wait = q;
		}
		last = t;
		if (wait < 20000) {
			pthread_mutex_lock(&r->lock);
			r->busy_passes++;
			pthread_mutex_unlock(&r->lock);
			continue;
		}
		ts.tv_sec = wait / 1000000000ull;
		ts.tv_nsec = wait % 1000000000ull;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Start a drain thread named `name` running fn(arg), every signal blocked
 * in it: signals stay with the caller's threads (Python's handlers). 0 or
 * -errno. */
static int start_thread(pthread_t *thread, void *(*fn)(void *), void *arg,
			const char *name)
{
	sigset_t all, old;
	int e;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e)
		return -e;
	pthread_setname_np(*thread, name);
	return 0;
}

/* Drain the ring from a thread of this library ("osdstage-rec") every
 * interval_us microseconds until rec_close. 0 or -errno. */
int rec_start(struct rec *r, unsigned interval_us)
{
	int e;

	if (r->running)
		return 0;
	r->interval_us = interval_us ? interval_us : 1;
	r->stop = 0;
	e = start_thread(&r->thread, drain_thread, r, "osdstage-rec");
	if (e)
		return e;
	r->running = 1;
	return 0;
}

static void rec_stop(struct rec *r)
{
	if (!r->running)
		return;
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	pthread_join(r->thread, NULL);
	r->running = 0;
}

/* Stop the drain thread (the last drain and flush come after it, so
 * nothing it could still take is left unwritten). */
void rec_halt(struct rec *r)
{
	rec_stop(r);
}

/* Consume what is in the ring now. Returns the number of events written
 * since the previous call (by the drain thread too), or -errno when
 * writing failed (sticky). */
int rec_consume(struct rec *r)
{
	int n;

	drain(r);
	pthread_mutex_lock(&r->lock);
	n = r->err ? -r->err : (int)(r->events - r->reported);
	r->reported = r->events;
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* Write every stream's pending packets and its partial one (cut to its
 * content). */
int rec_flush(struct rec *r)
{
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	for (unsigned cpu = 0; cpu < MAX_CPUS; cpu++)
		if (r->streams[cpu].buf && stream_flush(r, cpu, 0, 1)) {
			rc = -r->err;
			break;
		}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* events, bytes, packets, reordered, malformed */
void rec_stats(struct rec *r, uint64_t *out)
{
	pthread_mutex_lock(&r->lock);
	out[0] = r->events;
	out[1] = r->bytes;
	out[2] = r->packets;
	out[3] = r->reordered;
	out[4] = r->malformed;
	pthread_mutex_unlock(&r->lock);
}

/* passes over the ring, those made at once after another (busy) */
void rec_passes(struct rec *r, uint64_t *out)
{
	pthread_mutex_lock(&r->lock);
	out[0] = r->passes;
	out[1] = r->busy_passes;
	pthread_mutex_unlock(&r->lock);
}

/* Stop the drain thread and free everything (rec_consume and rec_flush
 * first, to keep what the ring still holds). */
void rec_close(struct rec *r)
{
	if (!r)
		return;
	rec_stop(r);
	ring_buffer__free(r->rb);
	for (unsigned cpu = 0; cpu < MAX_CPUS; cpu++) {
		if (!r->streams[cpu].buf)
			continue;
		close(r->streams[cpu].fd);
		free(r->streams[cpu].buf);
	}
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* ------------------------------------------------------------------------
 * Raw mode: the records themselves, for a consumer that decodes them
 * (lib/cephlat/rbd/records.py, lib/cephlat/engine/traces.py). Each record
 * is appended to one growing buffer as u32 length + bytes, padded to 8;
 * the caller takes the buffer after each consume and resets it. With
 * raw_start, a thread of its own drains the ring every interval_us into
 * that buffer, so that a consumer slower to come back than the ring is to
 * fill (Python under load) loses nothing; it then takes the buffer with
 * raw_take.
 */
struct raw {
	struct ring_buffer *rb;
	unsigned char *buf;
	size_t len, cap;
	int err;
	pthread_mutex_t lock;	/* with the thread: the ring and buffer */
	pthread_t thread;
	int running, stop;
	unsigned interval_us;
};

static int raw_event(void *ctx, void *data, size_t size)
{
	struct raw *q = ctx;
	size_t need = q->len + 8 + (size + 7) / 8 * 8;
	uint32_t n = size;

	if (need > q->cap) {
		size_t cap = q->cap ? q->cap : 1 << 20;
		unsigned char *b;

		while (cap < need)
			cap *= 2;
		b = realloc(q->buf, cap);
		if (!b) {
			q->err = ENOMEM;
			return -ENOMEM;
		}
		q->buf = b;
		q->cap = cap;
	}
	memcpy(q->buf + q->len, &n, 4);
	memset(q->buf + q->len + 4, 0, 4);
	memcpy(q->buf + q->len + 8, data, size);
	q->len = need;
	return 0;
}

struct raw *raw_open(int map_fd)
{
	struct raw *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->rb = ring_buffer__new(map_fd, raw_event, q, NULL);
	if (!q->rb) {
		int e = errno;

		free(q);
		errno = e;
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	return q;
}

static void *raw_thread(void *arg)
{
	struct raw *q = arg;
	struct timespec ts = {q->interval_us / 1000000,
			      (q->interval_us % 1000000) * 1000L};

	while (!__atomic_load_n(&q->stop, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&q->lock);
		if (!q->err)
			ring_buffer__consume(q->rb);
		pthread_mutex_unlock(&q->lock);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Drain the ring from a thread of this library ("osdstage-raw") every
 * interval_us until raw_close; take what it gathered with raw_take. 0 or
 * -errno. */
int raw_start(struct raw *q, unsigned interval_us)
{
	int e;

	if (q->running)
		return 0;
	q->interval_us = interval_us ? interval_us : 1;
	q->stop = 0;
	e = start_thread(&q->thread, raw_thread, q, "osdstage-raw");
	if (e)
		return e;
	q->running = 1;
	return 0;
}

/* Drain the ring, then hand over everything gathered: *out points to a
 * buffer of the returned length (records as above) that the caller frees
 * with raw_free; 0 bytes: *out is NULL. -errno when a buffer could not
 * grow (sticky). */
long raw_take(struct raw *q, unsigned char **out)
{
	long n;

	pthread_mutex_lock(&q->lock);
	if (!q->err)
		ring_buffer__consume(q->rb);
	if (q->err) {
		n = -q->err;
		*out = NULL;
	} else {
		n = (long)q->len;
		*out = n ? q->buf : NULL;
		if (n) {
			q->buf = NULL;
			q->len = q->cap = 0;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return n;
}

void raw_free(unsigned char *buf)
{
	free(buf);
}

/* Consume what the ring holds; -> bytes buffered (raw_data), or -errno. */
long raw_consume(struct raw *q)
{
	ring_buffer__consume(q->rb);
	return q->err ? -q->err : (long)q->len;
}

const unsigned char *raw_data(struct raw *q)
{
	return q->buf;
}

void raw_reset(struct raw *q)
{
	q->len = 0;
}

void raw_close(struct raw *q)
{
	if (!q)
		return;
	if (q->running) {
		__atomic_store_n(&q->stop, 1, __ATOMIC_RELEASE);
		pthread_join(q->thread, NULL);
		q->running = 0;
	}
	pthread_mutex_destroy(&q->lock);
	ring_buffer__free(q->rb);
	free(q->buf);
	free(q);
}
