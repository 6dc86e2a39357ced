"""OTLP/HTTP (JSON) delivery to a collector (Jaeger, Tempo, an
OpenTelemetry collector), for every tool that sends traces: the
collector's endpoint from its URL (endpoint), one request (post: the
reason it failed, never an exception), and a bounded queue drained by a
thread of its own (Sender: the exporter's, whose tracer must never wait
for a collector).

What is sent is rendered elsewhere (render/otlp.py); nothing here knows
of Ceph."""
import collections
import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from ..errors import UserError

TIMEOUT_S = 10


def endpoint(url, option="--otlp"):
    """A collector's URL -> its OTLP/HTTP traces endpoint; a URL that is
    not one is a UserError of one line."""
    try:
        u = urllib.parse.urlsplit(url)
        ok = u.scheme in ("http", "https") and u.hostname and \
            (u.port or True)
    except ValueError:          # a port that is not a number
        ok = False
    if not ok:
        raise UserError("%s %s: an http:// or https:// URL of an OTLP "
                        "collector (such as http://127.0.0.1:4318)"
                        % (option, url))
    return url if url.rstrip("/").endswith("/v1/traces") else \
        url.rstrip("/") + "/v1/traces"


def post(url, body, timeout=TIMEOUT_S):
    """POST one OTLP/HTTP JSON request -> None, or why it failed."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type":
                                          "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return None if 200 <= r.status < 300 else "HTTP %d" % r.status
    except urllib.error.HTTPError as e:
        return "HTTP %d %s" % (e.code, e.reason)
    except (urllib.error.URLError, OSError, http.client.HTTPException,
            ValueError) as e:
        return str(getattr(e, "reason", e))


class Sender:
    """Requests' parts (resourceSpans) handed to a collector by a thread
    of its own, through a queue of at most `max_spans` spans.

    offer() never waits: what does not fit is dropped and counted
    ("queue_full"). The thread takes up to `batch_spans` spans at a
    time into one request (post(), `timeout` seconds at most); what the
    collector refused or never took is dropped and counted
    ("collector"), never retried, and the thread then waits before the
    next request, doubling up to BACKOFF_MAX_S while the collector
    fails (the queue meanwhile fills and drops). Counts per key (the
    caller's: a daemon's name): spans sent, spans dropped by reason,
    and the same of the parts (counts(), parts()); `error` the last
    failure's reason (None once a request went through). Once stop()
    returns, every part offered is counted sent or dropped."""

    BACKOFF_S, BACKOFF_MAX_S = 0.5, 30.0
    REASONS = ("queue_full", "collector")

    def __init__(self, url, max_spans=20000, batch_spans=1000,
                 timeout=5.0, poster=None):
        self.url, self.max_spans = url, max_spans
        self.batch_spans, self.timeout = batch_spans, timeout
        self.poster = poster or post
        self._cond = threading.Condition()
        self._queue = collections.deque()   # (key, resourceSpans, spans)
        self._queued = 0
        self._stopping = False
        self.sent, self.dropped = {}, {}    # key / (key, reason) -> spans
        self.parts_sent, self.parts_dropped = {}, {}    # the same, parts
        self._posting = None                # the batch being posted
        self.requests = 0                   # requests the collector took
        self.error = None
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name="otlp",
                                        daemon=True)
        self._thread.start()
        return self

    def offer(self, key, resource_spans, spans):
        """Queue one part (a list of resourceSpans holding `spans` spans)
        for the collector, or drop it (counted) when the queue is full:
        -> whether it was queued. Never waits for the collector."""
        with self._cond:
            if self._queued + spans > self.max_spans or self._stopping:
                self._drop(key, "queue_full", spans)
                return False
            self._queue.append((key, resource_spans, spans))
            self._queued += spans
            self._cond.notify()
            return True

    def queued(self):
        with self._cond:
            return self._queued

    def counts(self):
        """({key: spans sent}, {(key, reason): spans dropped}), copies."""
        with self._cond:
            return dict(self.sent), dict(self.dropped)

    def parts(self):
        """counts() of the parts offered: ({key: parts sent}, {(key,
        reason): parts dropped}), copies."""
        with self._cond:
            return dict(self.parts_sent), dict(self.parts_dropped)

    def _drop(self, key, reason, spans):
        """Count one part of `spans` spans dropped (the lock held)."""
        k = (key, reason)
        self.dropped[k] = self.dropped.get(k, 0) + spans
        self.parts_dropped[k] = self.parts_dropped.get(k, 0) + 1

    def _take(self):
        """The next batch (waiting for one), or None when stopping."""
        with self._cond:
            while not self._queue and not self._stopping:
                self._cond.wait()
            if not self._queue:
                return None
            batch, n = [], 0
            while self._queue and (not batch or n + self._queue[0][2] <=
                                   self.batch_spans):
                item = self._queue.popleft()
                batch.append(item)
                n += item[2]
            self._queued -= n
            self._posting = batch
            return batch

    def _run(self):
        backoff = 0.0
        while True:
            batch = self._take()
            if batch is None:
                return
            body = {"resourceSpans": [rs for _, part, _ in batch
                                      for rs in part]}
            why = self.poster(self.url, body, self.timeout)
            with self._cond:
                if self._posting is not batch:
                    return          # given up by stop(): counted there
                self._posting = None
                for key, _, n in batch:
                    if why is None:
                        self.sent[key] = self.sent.get(key, 0) + n
                        self.parts_sent[key] = \
                            self.parts_sent.get(key, 0) + 1
                    else:
                        self._drop(key, "collector", n)
                if why is None:
                    self.requests += 1
                self.error = why
                if why is None:
                    backoff = 0.0
                    continue
                backoff = min(max(backoff * 2, self.BACKOFF_S),
                              self.BACKOFF_MAX_S)
                # wait, unless stopping (then the rest is dropped)
                end = time.monotonic() + backoff
                while not self._stopping:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)

    def stop(self, wait_s=2.0):
        """Stop taking parts; the thread sends what is queued for up to
        `wait_s`, then gives up (a daemon thread: never holds the
        process); what is left is counted as dropped: queued
        (queue_full), or being posted (collector: not taken in time)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(wait_s)
        with self._cond:
            if self._posting:
                for key, _, n in self._posting:
                    self._drop(key, "collector", n)
                self.error = self.error or "no answer within %g s of the " \
                    "end" % wait_s
            self._posting = None
            for key, _, n in self._queue:
                self._drop(key, "queue_full", n)
            self._queue.clear()
            self._queued = 0
