"""LTTng mode: Ceph's documented recipe (a session with the event rule
librbd:* and the contexts pthread_id, vpid, procname), run for the user,
with checks of what it needs first."""
import os
import shutil
import subprocess
import time

from . import TOOL
from .reader import trace_counts
from .record import find_libraries, report_counts
from ..ceph.target import require_root
from ..errors import UserError

EXIT_NO_TRACEPOINTS = 3


def lttng_checks(pid=None):
    """What the LTTng recipe needs and this host lacks, for process `pid`
    (None: a client started here): [(problem, fix)]."""
    probs = []
    if not shutil.which("lttng"):
        probs.append(("lttng is not installed", "apt-get install "
                      "lttng-tools"))
    libs = find_libraries(pid) if pid else find_libraries()
    librbd = libs.get("librbd")
    tp = None
    if librbd:
        d = os.path.dirname(librbd)
        for name in ("librbd_tp.so", "librbd_tp.so.1"):
            if os.path.exists(os.path.join(d, name)):
                tp = os.path.join(d, name)
    if not librbd:
        probs.append(("librbd is not installed", "apt-get install librbd1"))
    elif tp is None:
        probs.append(("librbd on this host has no LTTng tracepoints (no "
                      "librbd_tp.so next to %s: built without LTTng, as "
                      "Debian's is)" % librbd,
                      "install Ceph's upstream packages, or record with "
                      "eBPF (rbdrecord.py without --lttng)"))
    conf = os.environ.get("CEPH_CONF", "/etc/ceph/ceph.conf")
    if tp and not _conf_true(conf, "rbd_tracing"):
        probs.append(("rbd_tracing is not enabled for the client (%s)" % conf,
                      "add 'rbd tracing = true' to its [client] section"))
    return probs


def _conf_true(path, key):
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition("=")
                if k.strip().replace(" ", "_") == key:
                    return v.strip().lower() in ("true", "1", "yes")
    except OSError:
        pass
    return False


def _lttng(*argv, check=True):
    p = subprocess.run(["lttng"] + list(argv), capture_output=True,
                       text=True)
    if check and p.returncode:
        raise UserError("lttng %s failed: %s" % (
            " ".join(argv), (p.stderr or p.stdout).strip().splitlines()[-1]
            if (p.stderr or p.stdout).strip() else "exit %d" % p.returncode))
    return p


def record_lttng(target, output, duration, no_checks, err):
    """Record `target` (a RecordTarget) with LTTng to the trace directory
    `output` until it ends or `duration` seconds pass (None: no limit).
    What lttng_checks finds is said and nothing recorded (exit status
    EXIT_NO_TRACEPOINTS) unless `no_checks`. -> exit status"""
    require_root(TOOL)
    probs = lttng_checks(target.pid)
    if probs and not shutil.which("lttng"):
        raise UserError("%s; fix: %s" % probs[0])
    session = "rbdrecord-%d" % os.getpid()     # outdir.LTTNG_MARK
    started_sessiond = _start_sessiond()
    created = False
    try:
        _lttng("create", session, "--output=" + os.path.abspath(output))
        created = True
        _lttng("enable-event", "--userspace", "librbd:*", "-s", session)
        _lttng("add-context", "--userspace", "-t", "pthread_id", "-t", "vpid",
               "-t", "procname", "-s", session)
        err.write("LTTng session %s: event rule librbd:*, contexts "
                  "pthread_id, vpid, procname\n" % session)
        if probs and not no_checks:
            for what, fix in probs:
                err.write("%s: %s; fix: %s\n" % (TOOL, what, fix))
            err.write("%s: nothing would be recorded: session %s destroyed\n"
                      % (TOOL, session))
            return EXIT_NO_TRACEPOINTS
        _lttng("start", session)
        _run_for(target, duration)
        _lttng("stop", session)
    finally:
        if created:
            _lttng("destroy", session, check=False)
        if started_sessiond:
            _stop_sessiond()
        if os.path.isdir(output) and not os.listdir(output):
            os.rmdir(output)            # nothing was recorded
    return _report(output, err)


def _report(path, err):
    counts = None
    if os.path.isdir(path):
        try:
            counts = trace_counts(path)
        except RuntimeError:          # bt2: no trace in the directory
            pass
    if not counts:
        err.write("%s: LTTng recorded nothing (no librbd client with "
                  "tracepoints ran)\n" % TOOL)
        return 0
    report_counts(err, path, counts, 0)
    return 0


def _start_sessiond():
    """Start lttng-sessiond unless one runs. -> whether we started it"""
    if not subprocess.run(["pgrep", "-x", "lttng-sessiond"],
                          capture_output=True).returncode:
        return False
    p = subprocess.run(["lttng-sessiond", "--daemonize"],
                       capture_output=True, text=True)
    if p.returncode:
        raise UserError("cannot start lttng-sessiond: %s" % p.stderr.strip())
    return True


def _stop_sessiond(timeout=10):
    """Stop the lttng-sessiond we started (and its consumer daemons)."""
    subprocess.run(["pkill", "-x", "lttng-sessiond"], capture_output=True)
    end = time.monotonic() + timeout
    while time.monotonic() < end and subprocess.run(
            ["pgrep", "-x", "lttng-sessiond"], capture_output=True
    ).returncode == 0:
        time.sleep(0.1)


def _run_for(target, duration):
    """Until the target's command exits, or while its process lives; at
    most `duration` seconds (None: no limit)."""
    if target.command:
        p = subprocess.Popen(target.command)
        try:
            p.wait(duration)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            p.terminate()
            p.wait()
    else:
        end = time.monotonic() + (duration or 1e12)
        try:
            while time.monotonic() < end and os.path.exists(
                    "/proc/%d" % target.pid):
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
