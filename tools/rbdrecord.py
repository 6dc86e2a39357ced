#!/usr/bin/python3
# rbdrecord - record librbd client I/O (eBPF uprobes, or LTTng) as a CTF
#             trace with librbd's tracepoint names; summarize it; turn it
#             into fio jobs that replay it.
#
# USAGE: rbdrecord.py [--lttng | --ebpf] -o DIR [--force]
#                     (-p PID | -- COMMAND [ARGS])
#                     [-d SECS] [--no-checks]
#                     [--otlp URL [--otlp-sample N] [--otlp-over US]]
#        rbdrecord.py --summary TRACE [-j] [--zones N]
#        rbdrecord.py --to-fio TRACE -o DIR [--image NAME] [--pool NAME]
#
# See man/man8/rbdrecord.8 and tools/rbdrecord_example.txt.
import os
import sys


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    lib = os.path.join(here, "..", "lib")
    if lib not in sys.path:
        sys.path.insert(0, lib)
    from cephlat.cli.rbdrecord import main as real_main
    return real_main(argv)


if __name__ == "__main__":
    sys.exit(main())
