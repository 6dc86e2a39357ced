"""Headless Chromium for the HTML report tests (Debian's chromium): run it
with a throw-away profile, read the page's console from its log, count
what the DOM holds after the page's script ran."""
import subprocess
import tempfile
from html.parser import HTMLParser


def chromium(args, timeout=20):
    """Run headless Chromium with a throw-away profile."""
    with tempfile.TemporaryDirectory(prefix="cephlat-chromium-") as prof:
        return subprocess.run(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage",
             "--no-first-run", "--user-data-dir=" + prof,
             "--enable-logging=stderr", "--v=0"] + args,
            capture_output=True, text=True, timeout=timeout)


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
