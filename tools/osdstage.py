#!/usr/bin/python3
# osdstage - per-stage latency of ops inside a running ceph-osd (eBPF).
#
# USAGE: osdstage.py -p PID [-m] [-T] [-j] [-S STAGES] [interval [count]]
#
# Attaches uprobes to the OSD's functions (probe table per Ceph release),
# aggregates latency histograms in the kernel and prints them bcc-style.
# See man/man8/osdstage.8 and tools/osdstage_example.txt.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "lib"))

from cephlat.osdstage import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
