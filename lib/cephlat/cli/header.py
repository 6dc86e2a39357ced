"""The head of a text report (render/text.py's print_header): what was
traced, in which mode, and from where (live, or a capture's span or
window), from what the live session knows or what a capture's metadata
recorded. A field neither knows is left out, never guessed."""
import os
import socket

from ..ceph.probetable import RELEASES


def mode_of(args):
    """The live run's mode (model/costs.py's names)."""
    if args.probes:
        return "probes"
    if args.lean:
        return "lean"
    return "userspace" if args.no_kernel else "default"


def _every(args):
    """How often the live run reports, in words."""
    if not args.interval:
        return "one report, at Ctrl-C"
    every = "a report every %g s" % args.interval
    if args.count is None:
        return every + " until Ctrl-C"
    return every + (", %d in all" % args.count if args.count > 1 else
                    ", one only")


def live(args, targets, choice, target_name):
    """A live run's header: this host, the targets, the release the probe
    table was chosen for, the mode, the reporting and the capture being
    written."""
    host = socket.gethostname()
    if args.host_netns:
        host += " (network namespace %s)" % args.host_netns
    return {"host": host,
            "targets": [(target_name(t) if not args.probes else None, t.pid)
                        for t in targets],
            "ceph_version": choice.version,
            "release": choice.release.name if choice.release else None,
            "mode": mode_of(args),
            "bound_pct": args.max_overhead,
            "reports_words": _every(args),
            "writing": args.write,
            "otlp": _otlp(args)}


def _otlp(args):
    """--otlp: what is sent where, in words (None without it)."""
    if not getattr(args, "otlp", None):
        return None
    from ..send.otlp import endpoint
    from .otlpargs import trace_words
    return "%s, to %s" % (trace_words(args), endpoint(args.otlp))


def _capture_mode(cap):
    """A capture's mode from its metadata: a probe spec's program (no
    Ceph version, a release name the probe table does not know), the
    user-space stages only (no kernel stages), else the default. (The
    lean tier records nothing.)"""
    info = cap.info
    ceph = {r.name for r in RELEASES.values()}
    if not info.get("ceph_version") and info.get("release") not in ceph:
        return "probes"
    return "default" if cap.kernel else "userspace"


def capture(cap, path, caps=None, reports=None, window=None,
            filters=None):
    """A capture's header: what its metadata says of the host, the
    targets (caps: the ones shown, default cap) and the release, its
    file, and its span and reports (replay) or the window read."""
    caps = caps or [cap]
    info = cap.info
    out = {"host": cap.env.get("hostname"),
           "targets": [(c.name, c.pid) for c in caps],
           "ceph_version": info.get("ceph_version"),
           "release": info.get("release"),
           "mode": _capture_mode(cap),
           "capture": os.path.basename(os.path.normpath(path))}
    if window is not None:
        out["window"] = (window["from"], window["to"])
        out["filters"] = filters or []
    else:
        out["span"] = (cap.wall(cap.first_ns), cap.wall(cap.last_ns))
        out["reports"] = reports or 0
    return out


def filter_words(args):
    """-r's filters in words, for the header."""
    out = []
    if args.op_class:
        out.append("%s ops" % args.op_class)
    if args.thread_role:
        out.append("%s threads' kernel stages" % args.thread_role)
    return out
