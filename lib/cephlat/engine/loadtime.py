"""What the tracer settles before it loads probes/osdstage.bpf.o: the
.rodata image of the per-release settings (rodata_type, apply_settings;
the lean tier's one read of the op, lean_span), the capture ring's size,
and which kernel programs to attach (all but syncfs's syscall
tracepoints when every target is a BlueStore OSD, which never calls
syncfs: those would slow every syscall of the host)."""
import os

from ..errors import UserError

# the traces ring (osdstage.h, struct op_trace): room for this many
# seconds of traces at the rate cap (the exporter drains it every 0.2 s
# and at each refresh), at least TRACE_RING_MIN bytes; without a cap
TRACE_RING_S = 4
TRACE_RING_MIN = 64 * 1024
TRACE_RING_MAX = 4 * 1024 * 1024


def ring_bytes(mb):
    """The capture ring buffer's size for `mb` MB: a power of two number
    of pages."""
    n = max(1, int(mb * 1024 * 1024) // 4096)
    return 4096 * (1 << (n - 1).bit_length())


def kernel_programs(abi):
    """The programs on kernel tracepoints (the rest are uprobes)."""
    return abi.programs_in("tp_btf", "tracepoint")


def sampling_programs(abi):
    """The programs on perf events (--on-cpu's sampling clock)."""
    return abi.programs_in("perf_event")


def syscall_programs(abi):
    """The kernel programs on syscall tracepoints (syncfs's). While one is
    attached, every syscall of every task on the host takes the kernel's
    tracing slow path (40-70 ns a syscall); futex waits come from
    the scheduler programs instead."""
    return [p for p in kernel_programs(abi)
            if abi.programs[p].startswith("tracepoint/syscalls/")]


def bluestore(pid):
    """Whether process `pid` is a BlueStore OSD (which never calls syncfs):
    the data directory of the fsid file it holds open says so (its "type"
    file, read through the process's root: containers too)."""
    fds = "/proc/%d/fd" % pid
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for fd in names:
        try:
            path = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        if not path.startswith("/") or os.path.basename(path) != "fsid":
            continue
        try:
            with open("/proc/%d/root%s/type" % (pid, os.path.dirname(path))) \
                    as f:
                return f.read().strip() == "bluestore"
        except OSError:
            return False
    return False


def attached_kernel_programs(abi, pids):
    """The kernel programs to attach for targets `pids`: all, less the
    syscall tracepoints' when every target is a BlueStore OSD."""
    progs = kernel_programs(abi)
    if pids and all(bluestore(p) for p in pids):
        skip = set(syscall_programs(abi))
        progs = [p for p in progs if p not in skip]
    return progs


def lean_span(settings, most):
    """(first byte, bytes) of the one read op_lean makes of the op's
    fields (its message pointer, Ceph's dequeue stamp, the rmw flags),
    or (0, 0) when one of them is unknown or they lie `most` bytes or
    more apart (then three reads)."""
    fields = [(settings.get(k, 0), n) for k, n in (
        ("msg_off", 8), ("deq_time_off", 8), ("rmw_flags_off", 4))]
    if not all(off for off, _ in fields):
        return 0, 0
    lo = min(off for off, _ in fields)
    span = max(off + n for off, n in fields) - lo
    return (lo, span) if span < most else (0, 0)


def rodata_type(abi):
    """The const volatile globals of probes/osdstage.bpf.c as a ctypes
    structure, every field at its .rodata offset."""
    return abi.ctypes_globals(".rodata", {
        "role_prefix": abi.struct("role_prefix").ctype()})


def apply_settings(ro, settings):
    """Per-release settings (probe table) into the .rodata image: each
    names a const volatile global of probes/osdstage.bpf.c."""
    names = {n for n, _ in ro._fields_}
    for name, value in settings.items():
        if name not in names or name.startswith("_pad"):
            raise UserError("the probe table sets %s, which %s does not "
                             "have" % (name, "probes/osdstage.bpf.c"))
        setattr(ro, name, value)


def trace_settings(choice):
    """A model/sample.py TraceChoice -> the .rodata settings of the
    traces (probes/osdstage.bpf.c: trace_every, trace_over_ns and the
    rate cap's trace_gap_ns, trace_burst_ns: a second's worth of traces
    may come at once)."""
    gap = int(1e9 / choice.rate) if choice.rate else 0
    return {"trace_every": int(choice.every or 0),
            "trace_over_ns": int(round(choice.over_us * 1000))
            if choice.over_us is not None else 0,
            "trace_gap_ns": gap,
            "trace_burst_ns": gap * max(int(choice.rate) - 1, 0)}


def trace_ring_bytes(choice, record_size):
    """The traces ring's size: a power of two of pages holding
    TRACE_RING_S seconds of records at the cap (TRACE_RING_MAX
    without one)."""
    if not choice.rate:
        return TRACE_RING_MAX
    want = TRACE_RING_S * choice.rate * (record_size + 8)
    n = TRACE_RING_MIN
    while n < want and n < TRACE_RING_MAX:
        n *= 2
    return n
