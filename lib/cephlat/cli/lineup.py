"""Several files read as one (cli/merged.py) line up on the first
capture's clock: --clock-offset FILE=DURATION parsed against -r's files,
and each file's clock checked (the same kernel's, another host's kept
synchronized, or neither: a warning)."""
import os

from ..clocks import duration_ns
from ..engine import TOOL
from ..errors import UsageError, UserError


def clock_offsets(args, paths, clients):
    """--clock-offset FILE=DUR... -> {path: ns} of the files named, each
    one of -r's."""
    out = {}
    for spec in args.clock_offset or ():
        name, eq, dur = spec.rpartition("=")
        if not eq or not name:
            raise UsageError("--clock-offset %s: give FILE=DURATION (e.g. "
                            "h2.ctf=+3ms)" % spec)
        hits = [p for p in list(paths) + list(clients)
                 if os.path.realpath(p) == os.path.realpath(name)]
        if not hits:
            raise UsageError("--clock-offset %s: %s is none of -r's files "
                             "(%s)" % (spec, name, ", ".join(
                                 list(paths) + list(clients))))
        try:
            out[hits[0]] = duration_ns(dur, "--clock-offset " + spec)
        except UserError as e:
            raise UsageError(str(e)) from None
    if out and len(paths) + len(clients) < 2:
        raise UsageError("--clock-offset lines several files up: -r names "
                         "one")
    return out


def clock_check(err, caps, traces, shifts):
    """Which clock each file's times are of, against the first capture's:
    files of one kernel share its monotonic clock and line up exactly;
    another host's line up as well as the wall clocks agree. A warning
    names the files of other clocks that were not kept synchronized and
    whose offset --clock-offset does not give. -> [{file, clock, synced,
    error_us, offset_given_us}] for the JSON views."""
    items = [(c.trace.path, c.clock()) for c in caps] + \
        [(t.path, t.clock()) for t in traces]
    ref = items[0][1]["id"] if items[0][1] else None
    out, doubt = [], []
    for i, (path, ck) in enumerate(items):
        same = i == 0 or ck is not None and ref is not None and \
            ck["id"] == ref
        given = shifts.get(path)
        err_ns = ck["error_ns"] if ck else None
        out.append({"file": path,
                    "clock": "the first capture's" if same else
                    "unknown" if ck is None else "another",
                    "synced": bool(ck and ck["synced"]),
                    "error_us": None if same or err_ns is None else
                    round(err_ns / 1000.0, 1),
                    "offset_given_us": None if given is None else
                    round(given / 1000.0, 1)})
        if not same and given is None and err_ns is None:
            doubt.append(path)
    if doubt:
        err.write("%s: warning: %s: %s not kept synchronized by a time "
                  "daemon (adjtimex): %s up with the others only as well "
                  "as the clocks happen to agree (a network segment that "
                  "comes out negative is printed as ?); give a known "
                  "offset with --clock-offset FILE=DURATION\n" % (
                      TOOL, ", ".join(doubt),
                      "another host's clock," if len(doubt) == 1 else
                      "other hosts' clocks,",
                      "its times line" if len(doubt) == 1 else
                      "their times line"))
    return out
