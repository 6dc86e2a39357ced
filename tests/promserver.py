"""A real Prometheus server for the exporter's tests: Debian's `prometheus`,
started on 127.0.0.1 with its own scrape config and data directory,
stopped (and its directory removed) at the end. Queries go through its
HTTP API."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

PROMETHEUS = "/usr/bin/prometheus"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the Accept header Prometheus sends with a scrape (2.x): OpenMetrics
# first, the classic text format after it
ACCEPT_PROMETHEUS = ("application/openmetrics-text;version=1.0.0,"
                     "application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def get(port, path="/metrics", gzip=False, timeout=10, accept=None):
    """(headers, body bytes) of a GET on 127.0.0.1:port; with `gzip`,
    asking for it as Prometheus does (the body as sent); `accept`: the
    Accept header (ACCEPT_PROMETHEUS: as Prometheus asks)."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    if gzip:
        req.add_header("Accept-Encoding", "gzip")
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.headers, r.read()


def fetch(port, timeout=10):
    """The text of an exporter's /metrics on 127.0.0.1."""
    return get(port, timeout=timeout)[1].decode()


def scrape(port, timeout=10):
    """{(sample name, labels as a sorted tuple): value} of an exporter's
    /metrics on 127.0.0.1."""
    return parse(fetch(port, timeout))


def parse(text):
    """{(sample name, labels as a sorted tuple): value} of a /metrics text
    (prometheus_client's own parser)."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


# Prometheus keeps the exemplars it scrapes only with this (2.26 and
# later; Debian bookworm's is 2.42)
EXEMPLAR_STORAGE = "--enable-feature=exemplar-storage"


def argv(cfg, data, port, exemplars=False):
    """Prometheus' command line: config file `cfg`, data directory
    `data`, listening on 127.0.0.1:`port`; `exemplars`: with exemplar
    storage."""
    return [PROMETHEUS, "--config.file=" + cfg,
            "--storage.tsdb.path=" + data,
            "--web.listen-address=127.0.0.1:%d" % port,
            "--log.level=warn"] + ([EXEMPLAR_STORAGE] if exemplars else [])


def exemplar_list(data):
    """/api/v1/query_exemplars' data -> [(series labels, [(exemplar
    labels, value, timestamp in seconds)])]."""
    return [(d["seriesLabels"],
             [(e["labels"], float(e["value"]), float(e["timestamp"]))
              for e in d["exemplars"]]) for d in data]


class Prometheus:
    def __init__(self, targets, scrape_s=1, self_scrape=False, nice=0,
                 exemplars=False):
        """Scrape `targets` (job osdstage) every `scrape_s` seconds, and
        with self_scrape Prometheus' own /metrics too (job prometheus: what
        a scrape takes on this machine when the exporter has no part);
        `nice`: run at that nice value (all its threads); `exemplars`:
        keep the exemplars it scrapes (exemplar storage; it asks for
        OpenMetrics, the format that has them, by default)."""
        self.dir = tempfile.mkdtemp(prefix="osdstage-prom-")
        self.port = free_port()
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: %ds\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: osdstage\n"
                    "    static_configs:\n      - targets: [%s]\n" % (
                        scrape_s, ", ".join("'%s'" % t for t in targets)))
            if self_scrape:
                f.write("  - job_name: prometheus\n    static_configs:\n"
                        "      - targets: ['127.0.0.1:%d']\n" % self.port)
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            argv(cfg, os.path.join(self.dir, "data"), self.port, exemplars),
            stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.nice(nice)) if nice else None)
        self.url = "http://127.0.0.1:%d" % self.port
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/-/ready",
                                            timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                raise AssertionError("prometheus did not start:\n" +
                                     self.logtext())
            time.sleep(0.3)

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-3000:]

    def api(self, path, **params):
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen("%s/api/v1/%s?%s" % (self.url, path, q),
                                    timeout=20) as r:
            out = json.load(r)
        assert out["status"] == "success", out
        return out["data"]

    def query(self, expr, at=None):
        """-> [(labels, float value)] of an instant query."""
        params = {"query": expr}
        if at is not None:
            params["time"] = "%.3f" % at
        data = self.api("query", **params)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def samples(self, expr, at=None):
        """-> [(labels, [(timestamp, float value)])]: the raw samples of a
        range-vector selector (`expr` ends in [<range>]) as scraped, with
        the instants Prometheus scraped them."""
        params = {"query": expr}
        if at is not None:
            params["time"] = "%.3f" % at
        data = self.api("query", **params)
        assert data["resultType"] == "matrix", data["resultType"]
        return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]])
                for r in data["result"]]

    def exemplars(self, expr, start, end=None):
        """-> [(series labels, [(exemplar labels, value, timestamp)])]
        of the exemplars of the series `expr` selects, from `start` to
        `end` (now), Unix seconds (/api/v1/query_exemplars; Prometheus
        started with exemplars=True)."""
        return exemplar_list(self.api(
            "query_exemplars", query=expr, start="%.3f" % start,
            end="%.3f" % (time.time() if end is None else end)))

    def targets_up(self):
        return [t for t in self.api("targets")["activeTargets"]
                if t["health"] == "up"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
