#!/usr/bin/python3
# osdstage_exporter - every OSD of this host, per stage, in Prometheus.
#
# USAGE: osdstage_exporter.py [--listen ADDR:PORT] [--max-overhead PCT]
#                             [--refresh SECS] [--osd ID,...|all]
#                             [-S STAGES] [--no-kernel]
#
# Traces every ceph-osd of the host (as osdstage.py --osd all: one set of
# BPF programs), follows OSDs that restart, appear or disappear, and serves
# per-stage latency histograms, queue-wait attribution, thread times and
# its own cost on /metrics (prometheus_client), cost-bounded by default.
# See man/man8/osdstage_exporter.8, tools/osdstage_exporter_example.txt
# and deploy/README.md.
import os
import sys


def main(argv=None):
    """Run the exporter; returns the exit status."""
    lib = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "lib")
    if lib not in sys.path:
        sys.path.insert(0, lib)
    from cephlat.cli import exporter
    return exporter.main(argv)


if __name__ == "__main__":
    sys.exit(main())
