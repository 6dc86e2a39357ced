"""Output directories: a new trace (-o DIR) or fio job (--to-fio -o DIR).

--force replaces only what rbdrecord wrote there before, or an empty
directory; anything else is refused with one line and left as it is:
  - an eBPF-mode trace: only `metadata` and `stream*` files, the metadata
    a CTF trace whose env says tool = "rbdrecord" (events.open_trace);
  - an LTTng-mode trace: what `lttng create rbdrecord-PID --output=DIR`
    writes (ust/.../metadata, channel*, index/*.idx), every metadata's
    env naming the session rbdrecord-PID (lttng.record_lttng);
  - a --to-fio job: job.fio (its first line ends with JOB_MARK) and
    *.iolog files.
"""
import os
import shutil

from . import events
from ..capture import ctf
from ..errors import UserError

JOB_MARK = "(made by rbdrecord.py --to-fio)"      # job.fio's first line
LTTNG_MARK = b'\ttrace_name = "rbdrecord-'        # lttng's metadata env


def prepare(path, force, kind="trace"):
    """Make way for a new `kind` ("trace" or "job") directory at `path`,
    or fail with one line."""
    if os.path.exists(path):
        if not force:
            raise UserError("%s exists; pass --force to overwrite it" % path)
        if not os.path.isdir(path):
            raise UserError("%s exists and is not a directory" % path)
        try:
            why = ("it is a symbolic link" if os.path.islink(path) else
                   (not_a_trace if kind == "trace" else not_a_job)(path))
        except OSError as e:
            raise UserError("cannot read %s: %s" % (path, e.strerror))
        if why:
            raise UserError("%s is not %s rbdrecord wrote (%s); not "
                            "overwriting it" % (path, "a trace" if kind ==
                                                "trace" else "a fio job",
                                                why))
        try:
            shutil.rmtree(path)
        except OSError as e:
            raise UserError("cannot remove %s: %s" % (path, e.strerror))
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError("cannot write %s: no directory %s" % (path, parent))


def _stranger(root, names, ok):
    """The first of `names` (in directory `root`) that is not a regular
    file ok(name) accepts, as a path; None if all are."""
    for n in sorted(names):
        p = os.path.join(root, n)
        if not ok(n) or os.path.islink(p) or not os.path.isfile(p):
            return p
    return None


def not_a_trace(path):
    """None if `path` is empty or a trace rbdrecord wrote, else why not."""
    names = os.listdir(path)
    if not names:
        return None
    if names == ["ust"]:
        return _not_lttng(path)
    odd = _stranger(path, names, lambda n: n == "metadata" or
                    n.startswith("stream"))
    if odd:
        return "it holds %s" % os.path.basename(odd)
    try:
        env = ctf.Trace(path).env
    except UserError:
        return "its metadata is not a CTF trace's"
    if env.get("tool") != events.TOOL_ENV["tool"]:
        return "its metadata says %s wrote it" % (
            env.get("tool") or env.get("tracer_name") or "another tool")
    return None


def _not_lttng(path):
    """None if `path` holds an LTTng trace of rbdrecord's session."""
    metadata = 0
    for root, _, files in os.walk(path):
        if os.path.basename(root) == "index":
            odd = _stranger(root, files, lambda n: n.endswith(".idx"))
        else:
            odd = _stranger(root, files, lambda n: n == "metadata" or
                            n.startswith("channel"))
        if odd:
            return "it holds %s" % os.path.relpath(odd, path)
        if "metadata" in files and os.path.basename(root) != "index":
            meta = os.path.join(root, "metadata")
            with open(meta, "rb") as f:
                if LTTNG_MARK not in f.read(1 << 16):
                    return "%s is another LTTng session's" % \
                        os.path.relpath(meta, path)
            metadata += 1
    return None if metadata else "it holds no LTTng metadata"


def not_a_job(path):
    """None if `path` is empty or a fio job rbdrecord wrote, else why
    not."""
    names = os.listdir(path)
    if not names:
        return None
    odd = _stranger(path, names, lambda n: n == "job.fio" or
                    n.endswith(".iolog"))
    if odd:
        return "it holds %s" % os.path.basename(odd)
    try:
        with open(os.path.join(path, "job.fio")) as f:
            head = f.readline()
    except (OSError, UnicodeDecodeError):
        head = ""
    if JOB_MARK not in head:
        return "its job.fio is another's"
    return None
