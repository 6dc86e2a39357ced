#!/usr/bin/python3
# osdstage - where ops spend their time inside a running ceph-osd (eBPF).
#
# USAGE: osdstage.py (-p PID | --osd ID | --list) [-m] [-T] [-j] [-S STAGES]
#                    [-w CAPTURE [--force]]
#                    [--no-kernel] [--max-overhead PCT] [--probes FILE]
#                    [--otlp URL [--otlp-sample N] [--otlp-over US]
#                     [--otlp-rate N]] [interval [count]]
#        osdstage.py -r CAPTURE [-j] [--from T] [--to T] [--slowest N]
#                    [--thread-role ROLE] [--op-class CLASS] [--html FILE]
#                    [--perfetto FILE] [--otlp URL [--otlp-max N] ...]
#
# Attaches uprobes to the OSD's functions (probe table per Ceph release) and
# scheduler/futex/block/syncfs tracepoints, aggregates in the kernel, and
# prints per-stage histograms, the OSD's threads per role, each op's queue
# wait split by what its worker was doing, and a verdict.
# See man/man8/osdstage.8 and tools/osdstage_example.txt.
import os
import sys


def main(argv=None):
    """Run osdstage; returns the exit status."""
    lib = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "lib")
    if lib not in sys.path:
        sys.path.insert(0, lib)
    from cephlat.cli import osdstage
    return osdstage.main(argv)


if __name__ == "__main__":
    sys.exit(main())
