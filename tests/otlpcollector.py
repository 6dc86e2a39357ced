"""A local OTLP/HTTP receiver for the tests of the tools' --otlp (the
unit and BPF tiers; the cluster tier sends to a real Jaeger): it keeps
every request POSTed to it, answers `status` on /v1/traces (404
elsewhere), and, while `stall` is set, holds its answers (a collector
that takes no more)."""
import http.server
import json
import threading
import time

TRACES = "/v1/traces"


class Collector:
    """requests: (path, content type, size, the JSON body) of each POST;
    url: its base (http://127.0.0.1:PORT); traces_url: its /v1/traces."""

    def __init__(self, status=200):
        self.status, self.requests = status, []
        self.stall = threading.Event()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(n)
                while outer.stall.is_set():
                    time.sleep(0.01)
                outer.requests.append((self.path,
                                       self.headers.get("Content-Type"), n,
                                       json.loads(raw) if raw else None))
                self.send_response(outer.status if self.path == TRACES
                                   else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a):
                pass
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.traces_url = self.url + TRACES
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    @property
    def bodies(self):
        """The JSON bodies posted to /v1/traces."""
        return [b for p, _, _, b in self.requests if p == TRACES]

    @property
    def types(self):
        """(path, content type) of each request."""
        return [(p, t) for p, t, _, _ in self.requests]

    def spans(self):
        """(resource span, span) of every span received."""
        return [(rs, s) for b in self.bodies for rs in b["resourceSpans"]
                for ss in rs["scopeSpans"] for s in ss["spans"]]

    def close(self):
        self.stall.clear()
        self.srv.shutdown()
        self.srv.server_close()


def wait_until(cond, s=5.0):
    """Whether cond() came true within s seconds (polled every 10 ms)."""
    end = time.monotonic() + s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False
