// SPDX-License-Identifier: GPL-2.0
/* recorder.c - drain a BPF ring buffer: into CTF stream files (osdstage
 * captures), or raw into one buffer (rbdrecord; see the end).
 *
 * Built into build/libcephlat_rec.so and driven by lib/cephlat/capture.py
 * through ctypes. Python pays one call per poll, not one per event: each
 * record in the ring is already a complete CTF event (probes/osdstage.h,
 * struct ev_hdr + payload), so this only routes it to the stream of the
 * CPU it was recorded on and cuts the streams into packets.
 *
 * Packets (layout = the metadata written by lib/cephlat/ctf.py):
 *   header:  u32 magic, u8 uuid[16], u32 stream_id
 *   context: u64 timestamp_begin, timestamp_end, content_size (bits),
 *            packet_size (bits), events_discarded; u32 cpu_id
 * A packet is written with one write(2) when full or when flushed, so a
 * file cut short holds whole packets plus at most one partial one.
 *
 * CTF readers need each stream's timestamps in order. Records of one CPU
 * arrive almost in order (a program can be interrupted between reading
 * the clock and reserving its record); a record older than its stream's
 * last one is written with the last timestamp and counted ("reordered").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#define CTF_MAGIC	0xC1FC1FC1u
#define HDR_SIZE	24
#define CTX_SIZE	44
#define PKT_HEAD	(HDR_SIZE + CTX_SIZE)
#define EV_TS_OFF	4	/* struct ev_hdr: u32 id, u64 ts, u32 cpu, ... */
#define EV_CPU_OFF	12
#define EV_HDR_SIZE	20
#define MAX_CPUS	1024

struct stream {
	int fd;
	unsigned char *buf;	/* a packet being filled */
	size_t len;		/* bytes used, including the packet head */
	uint64_t first_ts, last_ts;
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
	s->buf = calloc(1, r->packet_size);
	if (!s->buf) {
		close(s->fd);
		return -ENOMEM;
	}
	s->len = PKT_HEAD;
	return 0;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* Write the stream's packet (whole if `whole`, else cut to its content). */
static int stream_flush(struct rec *r, unsigned cpu, int whole)
{
	struct stream *s = &r->streams[cpu];
	size_t size, off = 0;
	unsigned char *p = s->buf;

	if (!s->buf || !s->has_events)
		return 0;
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
	while (off < size) {
		ssize_t n = write(s->fd, p + off, size - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (!r->err)
				r->err = errno;
			return -errno;
		}
		off += n;
	}
	r->packets++;
	r->bytes += size;
	s->len = PKT_HEAD;
	s->has_events = 0;
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
	if (stream_open(r, cpu)) {
		if (!r->err)
			r->err = errno ? errno : EIO;
		return -r->err;
	}
	s = &r->streams[cpu];
	if (s->len + size > r->packet_size && stream_flush(r, cpu, 1))
		return -r->err;
	if (!s->has_events) {
		s->first_ts = ts;
		s->last_ts = ts;
		s->has_events = 1;
	}
	memcpy(s->buf + s->len, ev, size);
	if (ts < s->last_ts) {
		put64(s->buf + s->len + EV_TS_OFF, s->last_ts);
		r->reordered++;
	} else {
		s->last_ts = ts;
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
	r->rb = ring_buffer__new(map_fd, on_event, r, NULL);
	if (!r->rb) {
		int e = errno;

		free(r);
		errno = e;
		return NULL;
	}
	return r;
}

/* Consume what is in the ring now. Returns the number of events written,
 * or -errno when writing failed (rec_error() keeps it). */
int rec_consume(struct rec *r)
{
	int n = ring_buffer__consume(r->rb);

	if (r->err)
		return -r->err;
	return n;
}

/* Write every stream's partial packet (cut to its content). */
int rec_flush(struct rec *r)
{
	for (unsigned cpu = 0; cpu < MAX_CPUS; cpu++)
		if (r->streams[cpu].buf && stream_flush(r, cpu, 0))
			return -r->err;
	return 0;
}

/* events, bytes, packets, reordered, malformed */
void rec_stats(struct rec *r, uint64_t *out)
{
	out[0] = r->events;
	out[1] = r->bytes;
	out[2] = r->packets;
	out[3] = r->reordered;
	out[4] = r->malformed;
}

void rec_close(struct rec *r)
{
	if (!r)
		return;
	ring_buffer__free(r->rb);
	for (unsigned cpu = 0; cpu < MAX_CPUS; cpu++) {
		if (!r->streams[cpu].buf)
			continue;
		close(r->streams[cpu].fd);
		free(r->streams[cpu].buf);
	}
	free(r);
}

/* ------------------------------------------------------------------------
 * Raw mode: the records themselves, for a consumer that decodes them
 * (lib/cephlat/rbd/records.py). Each record is appended to one growing
 * buffer as u32 length + bytes, padded to 8; the caller takes the buffer
 * after each consume and resets it.
 */
struct raw {
	struct ring_buffer *rb;
	unsigned char *buf;
	size_t len, cap;
	int err;
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
	return q;
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
	ring_buffer__free(q->rb);
	free(q->buf);
	free(q);
}
