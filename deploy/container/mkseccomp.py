#!/usr/bin/python3
"""mkseccomp.py - the exporter's seccomp profile: the container engine's
default profile, with bpf(2) allowed to a holder of CAP_BPF and
perf_event_open(2) to a holder of CAP_PERFMON.

USAGE: mkseccomp.py [DEFAULT_PROFILE] > seccomp.json
       (default /usr/share/containers/seccomp.json, containers-common's)

The default profile allows both system calls only with CAP_SYS_ADMIN
(the capabilities that replace it for BPF, Linux 5.8+, came later), so
without a profile like this one the exporter needs CAP_SYS_ADMIN or no
seccomp filter at all. Everything else of the default profile is kept
as it is. deploy/container/seccomp.json is this script's output on
Debian bookworm's containers-common 0.50.1; tests/unit/
test_exporter_deploy.py checks it.
"""
import json
import sys

DEFAULT = "/usr/share/containers/seccomp.json"
MOVED = (("bpf", "CAP_BPF"), ("perf_event_open", "CAP_PERFMON"))


def _gate(name, cap):
    """The pair of rules of the default profile's form: allowed with the
    capability, EPERM without it."""
    return [
        {"names": [name], "action": "SCMP_ACT_ALLOW", "args": [],
         "comment": "osdstage-exporter: %s with %s" % (name, cap),
         "includes": {"caps": [cap]}, "excludes": {}},
        {"names": [name], "action": "SCMP_ACT_ERRNO", "args": [],
         "comment": "osdstage-exporter: %s with %s" % (name, cap),
         "includes": {}, "excludes": {"caps": [cap]},
         "errnoRet": 1, "errno": "EPERM"},
    ]


def transform(profile):
    """`profile` (a parsed default profile) with bpf and perf_event_open
    taken out of every rule and gated on CAP_BPF / CAP_PERFMON instead."""
    moved = {n for n, _ in MOVED}
    out = dict(profile)
    rules = []
    for rule in profile["syscalls"]:
        names = [n for n in rule["names"] if n not in moved]
        if len(names) != len(rule["names"]) and not names:
            continue
        rules.append(dict(rule, names=names))
    for name, cap in MOVED:
        rules.extend(_gate(name, cap))
    out["syscalls"] = rules
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    path = argv[0] if argv else DEFAULT
    try:
        with open(path) as f:
            profile = json.load(f)
    except (OSError, ValueError) as e:
        sys.stderr.write("mkseccomp.py: cannot read %s: %s\n" % (path, e))
        return 1
    json.dump(transform(profile), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
