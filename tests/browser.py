"""Headless Chromium for the HTML report tests (Debian's chromium): run it
with a throw-away profile, read the page's console from its log, count
what the DOM holds after the page's script ran."""
import subprocess
import tempfile
from html.parser import HTMLParser


# No network here and no session bus: nothing in the background that could
# wait for either (a dump can otherwise take over 20 s).
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu",
         "--disable-dev-shm-usage", "--no-first-run",
         "--no-default-browser-check", "--disable-background-networking",
         "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions",
         "--enable-logging=stderr", "--v=0"]
ENV = {"DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
       "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent"}


def chromium(args, timeout=60, tries=2):
    """Run headless Chromium with a throw-away profile (once more if it
    hangs)."""
    import os
    for attempt in range(tries):
        with tempfile.TemporaryDirectory(prefix="osdstage-chromium-") as prof:
            try:
                return subprocess.run(
                    ["chromium"] + FLAGS + ["--user-data-dir=" + prof] + args,
                    capture_output=True, text=True, timeout=timeout,
                    env=dict(os.environ, **ENV))
            except subprocess.TimeoutExpired:
                if attempt == tries - 1:
                    raise


def console_lines(stderr):
    """Chromium logs the page's console as `...:CONSOLE:N] "msg", source`."""
    return [l for l in stderr.splitlines() if ":CONSOLE" in l]


class _Dom(HTMLParser):
    """Counts class tokens, collects ids, attributes of <html> and the text
    of #verdict."""

    def __init__(self):
        super().__init__()
        self.classes, self.ids, self.root = {}, set(), {}
        self.in_verdict, self.depth, self.verdict = False, 0, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        for c in (a.get("class") or "").split():
            self.classes[c] = self.classes.get(c, 0) + 1
        if a.get("id"):
            self.ids.add(a["id"])
        if a.get("id") == "verdict":
            self.in_verdict = True
        if self.in_verdict:
            self.depth += 1

    def handle_endtag(self, tag):
        if self.in_verdict:
            self.depth -= 1
            self.in_verdict = self.depth > 0

    def handle_data(self, data):
        if self.in_verdict:
            self.verdict.append(data)


def dom(text):
    d = _Dom()
    d.feed(text)
    return d


def rendered(path):
    """The DOM of HTML page `path` after its script ran in headless
    Chromium, asserting the page loaded, logged nothing and said its
    script was ready without errors."""
    c = chromium(["--dump-dom", "file://%s" % path])
    assert c.returncode == 0, c.stderr[-2000:]
    assert console_lines(c.stderr) == []
    d = dom(c.stdout)
    assert d.root.get("data-js-ready") == "1" and \
        "data-js-errors" not in d.root, d.root
    return d
