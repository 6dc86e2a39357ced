"""How the exporter answers a scrape (exporter/collect.py Exported.page,
cli/exporter.py serve_http), over a real socket, without a tracer:

- the page is gzip-compressed when the scraper accepts it (Prometheus
  does) and plain otherwise, the same text either way;
- a scrape never waits for a render in progress: it gets the page before
  it at once, and the next scrape gets the new one;
- a path other than /metrics is a 404 that says where to look.
"""
import gzip
import threading
import time
import urllib.error

import pytest
from prometheus_client import CollectorRegistry

from cephlat.cli.exporter import serve_http
from cephlat.exporter import families as F
from cephlat.exporter.collect import Exported
from promserver import free_port, get, parse


class Gate:
    """A collector whose collect() waits while `hold` is set: a render
    that takes as long as the test wants."""

    def __init__(self):
        self.hold = threading.Event()
        self.entered = threading.Event()

    def collect(self):
        self.entered.set()
        while self.hold.is_set():
            time.sleep(0.01)
        return []


def _exported():
    ex = Exported(1.0)
    gate = Gate()
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ex)
    reg.register(gate)
    ex.registry = reg
    return ex, gate


def test_gzip_when_accepted_plain_otherwise():
    ex, _ = _exported()
    ex.set_host(2, {"ops": 0.25})
    ex.publish()
    port = free_port()
    httpd = serve_http(("127.0.0.1", port), ex)
    try:
        for n in (2, 3, 4):     # the first gzip scrape, then at render
            h, plain = get(port)
            assert h.get("Content-Encoding") is None
            hz, body = get(port, gzip=True)
            assert hz["Content-Encoding"] == "gzip"
            assert int(hz["Content-Length"]) == len(body) < len(plain)
            assert gzip.decompress(body) == plain
            m = parse(plain.decode())
            assert m[(F.TARGETS, ())] == n
            ex.set_host(n + 1, {"ops": 0.5})
            ex.publish()
        with pytest.raises(urllib.error.HTTPError) as e:
            get(port, "/other")
        assert e.value.code == 404
        assert b"/metrics" in e.value.read()
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_scrape_does_not_wait_for_a_render():
    ex, gate = _exported()
    ex.set_host(1, {})
    ex.publish()
    old, _ = ex.page()                  # a scraper: refreshes render now
    assert parse(old.decode())[(F.TARGETS, ())] == 1
    for n in (2, 3, 4):
        ex.set_host(n, {})
        gate.hold.set()
        gate.entered.clear()
        render = threading.Thread(target=ex.publish)
        render.start()
        assert gate.entered.wait(5)     # the render is in progress
        t0 = time.monotonic()
        page, _ = ex.page()
        gz, enc = ex.page(accept_gzip=True)
        took = time.monotonic() - t0
        assert page == old and gzip.decompress(gz) == old and enc == "gzip"
        assert took < 0.5, took
        gate.hold.clear()
        render.join(5)
        new, _ = ex.page()
        assert parse(new.decode())[(F.TARGETS, ())] == n
        old = new
