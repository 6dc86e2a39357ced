"""What tracing costs an OSD per op in each mode, as the benchmark
measured it: the figure a report's header quotes next to the mode.

`make bench` measures these (its toggle part, bench/toggle.py: the
tracer attached and detached every 2 s under one steady fio run of 4 KiB
random reads, 30 pairs of windows; the ceph-osd's added CPU time per read,
mean +- standard error) and BENCHMARKS.md shows them ("Attached and
detached every few seconds"). They are copied here by hand after a run:
the code never reads the docs. Update them, MEASURED_ON and MEASURED_AT
together when a new run changes them."""

# where and when the figures below were measured (Pacific's toggle part)
MEASURED_ON = "2-core VM, kernel 6.18, Ceph 16.2.15"
MEASURED_AT = "2026-12-06"

# mode -> (added OSD CPU per 4 KiB read in us: mean, standard error)
PER_OP_US = {
    "default": (10.93, 0.95),      # user-space and kernel stages
    "userspace": (7.24, 0.93),    # --no-kernel
    "lean": (0.45, 1.03),          # --lean
}

# the modes as a report's header names them (a program traced from a
# probe spec, --probes, has no bench figure)
MODE_WORDS = {
    "default": "default (user-space and kernel stages)",
    "userspace": "user-space stages only",
    "lean": "lean (one probe hit per op)",
    "probes": "a program's queue, from a probe spec",
}


def per_op(mode):
    """-> the words for mode's measured cost per op, or None (no figure)."""
    if mode not in PER_OP_US:
        return None
    mean, err = PER_OP_US[mode]
    # (a no-break space: render/text.py's wrap keeps "4 KiB" together)
    return "%.2f +- %.2f us of OSD CPU per 4\u00a0KiB read (make bench, " \
        "%s: %s)" % (mean, err, MEASURED_AT, MEASURED_ON)
