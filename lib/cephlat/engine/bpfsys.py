"""The kernel's bpf(2) called directly, for what Debian bookworm's libbpf
1.1 does not offer (engine/bpf.py binds libbpf for the rest): the
uprobe_multi link (BPF_LINK_CREATE, which BPFObject.attach_uprobe_multi
makes) and the trial that says whether this kernel has it; and what the
kernel says of a loaded program (its fdinfo: run count and time while the
run statistics are on). And perf_event_open(2): the sampling clock a
perf_event program is attached to (--on-cpu)."""
import ctypes
import ctypes.util
import errno
import os
import platform

# bpf(2) and the parts of union bpf_attr used here (include/uapi/linux/
# bpf.h; checked against build/vmlinux.h of kernel 6.18)
_SYS_BPF = {"x86_64": 321, "aarch64": 280}
BPF_PROG_LOAD = 5
BPF_LINK_CREATE = 28
BPF_PROG_TYPE_KPROBE = 2
BPF_TRACE_UPROBE_MULTI = 48
BPF_F_UPROBE_MULTI_RETURN = 1


class ProgLoadAttr(ctypes.Structure):
    # union bpf_attr, BPF_PROG_LOAD (the leading fields)
    _fields_ = [("prog_type", ctypes.c_uint32),
                ("insn_cnt", ctypes.c_uint32),
                ("insns", ctypes.c_uint64),
                ("license", ctypes.c_uint64),
                ("log_level", ctypes.c_uint32),
                ("log_size", ctypes.c_uint32),
                ("log_buf", ctypes.c_uint64),
                ("kern_version", ctypes.c_uint32),
                ("prog_flags", ctypes.c_uint32),
                ("prog_name", ctypes.c_char * 16),
                ("prog_ifindex", ctypes.c_uint32),
                ("expected_attach_type", ctypes.c_uint32)]


class UprobeMultiLinkAttr(ctypes.Structure):
    # union bpf_attr, BPF_LINK_CREATE with link_create.uprobe_multi
    _fields_ = [("prog_fd", ctypes.c_uint32),
                ("target_fd", ctypes.c_uint32),
                ("attach_type", ctypes.c_uint32),
                ("flags", ctypes.c_uint32),
                ("path", ctypes.c_uint64),
                ("offsets", ctypes.c_uint64),
                ("ref_ctr_offsets", ctypes.c_uint64),
                ("cookies", ctypes.c_uint64),
                ("cnt", ctypes.c_uint32),
                ("um_flags", ctypes.c_uint32),
                ("pid", ctypes.c_uint32)]



# perf_event_open(2) and the leading part of struct perf_event_attr
# (PERF_ATTR_SIZE_VER0: the kernel reads the rest as zero)
_SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_ATTR_DISABLED = 1 << 0
PERF_ATTR_FREQ = 1 << 10
PERF_FLAG_FD_CLOEXEC = 1 << 3


class PerfEventAttr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32),
                ("size", ctypes.c_uint32),
                ("config", ctypes.c_uint64),
                ("sample_freq", ctypes.c_uint64),
                ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64),
                ("flags", ctypes.c_uint64),
                ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32),
                ("config1", ctypes.c_uint64)]


_libc = None
_perf = None
_multi_ok = None     # uprobe_multi_supported(), once per process


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.syscall.argtypes = [ctypes.c_long, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_uint]
    return _libc.syscall


def sys_bpf(cmd, attr):
    """bpf(2) -> (result, errno)."""
    syscall = _syscall()
    ctypes.set_errno(0)
    r = syscall(_SYS_BPF[platform.machine()], cmd, ctypes.byref(attr),
                ctypes.sizeof(attr))
    return r, (ctypes.get_errno() if r < 0 else 0)


def cpu_clock(cpu, hz):
    """A software CPU clock on `cpu`, sampling `hz` times a second (off
    until a program is attached) -> its fd; OSError."""
    global _perf
    if _perf is None:
        _perf = ctypes.CDLL(ctypes.util.find_library("c"),
                            use_errno=True).syscall
        _perf.restype = ctypes.c_long
        _perf.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_ulong]
    attr = PerfEventAttr(type=PERF_TYPE_SOFTWARE,
                         size=ctypes.sizeof(PerfEventAttr),
                         config=PERF_COUNT_SW_CPU_CLOCK, sample_freq=hz,
                         flags=PERF_ATTR_DISABLED | PERF_ATTR_FREQ)
    ctypes.set_errno(0)
    fd = _perf(_SYS_PERF_EVENT_OPEN[platform.machine()], ctypes.byref(attr),
               -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return fd


def online_cpus():
    """The online CPUs' numbers (/sys/devices/system/cpu/online)."""
    with open("/sys/devices/system/cpu/online") as f:
        text = f.read().strip()
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def uprobe_multi_supported():
    """Whether this kernel creates uprobe_multi links that filter by
    process (Linux >= 6.6 with CONFIG_UPROBES, 64-bit). Found once, before
    any object is loaded, with a trial like libbpf's own: a two-instruction
    program loaded for uprobe_multi, and links asked on a path that does
    not exist. A kernel with uprobe_multi looks the path up and answers
    ENOENT; one without refuses the attach type itself (EINVAL) or has no
    uprobes (EOPNOTSUPP). The first kernels with it (6.6 to 6.9, unless
    fixed by their distribution) filtered by thread, not process: a link
    for pid P fired in P's main thread only. Their fix also refuses a
    negative pid before the path lookup (EINVAL), which tells them apart;
    they get classic links. Nothing is attached.
    OSDSTAGE_UPROBE_MULTI=0 in the environment says no (classic uprobes,
    one link per function)."""
    global _multi_ok
    if _multi_ok is None:
        _multi_ok = os.environ.get("OSDSTAGE_UPROBE_MULTI", "1") != "0" \
            and platform.machine() in _SYS_BPF and _probe_uprobe_multi()
    return _multi_ok


def _probe_uprobe_multi():
    # r0 = 0; exit
    insns = (ctypes.c_uint64 * 2)(0xb7, 0x95)
    lic = ctypes.create_string_buffer(b"GPL")
    load = ProgLoadAttr(prog_type=BPF_PROG_TYPE_KPROBE, insn_cnt=2,
                         insns=ctypes.addressof(insns),
                         license=ctypes.addressof(lic),
                         prog_name=b"osdstage_probe",
                         expected_attach_type=BPF_TRACE_UPROBE_MULTI)
    fd, err = sys_bpf(BPF_PROG_LOAD, load)
    if fd < 0:
        return False
    path = ctypes.create_string_buffer(b"/nonexistent/osdstage-uprobe-multi")
    offs = (ctypes.c_uint64 * 1)(0)

    def trial(pid):
        attr = UprobeMultiLinkAttr(prog_fd=fd,
                                    attach_type=BPF_TRACE_UPROBE_MULTI,
                                    path=ctypes.addressof(path),
                                    offsets=ctypes.addressof(offs), cnt=1,
                                    pid=pid)
        link, err = sys_bpf(BPF_LINK_CREATE, attr)
        if link >= 0:             # cannot happen; keep no probe anyway
            os.close(link)
        return err

    try:
        return trial(0) == errno.ENOENT and \
            trial(0xffffffff) == errno.EINVAL
    finally:
        os.close(fd)


def prog_fdinfo(pid, fd):
    """What the kernel says of BPF program descriptor `fd` of process
    `pid` ("self": this one): {"type", "id", "run_cnt", "run_time_ns"}
    (the run figures move only while the run statistics are on), or None
    when `fd` is not a BPF program."""
    try:
        if os.readlink("/proc/%s/fd/%d" % (pid, fd)) != "anon_inode:bpf-prog":
            return None
        with open("/proc/%s/fdinfo/%d" % (pid, fd)) as f:
            info = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return None
    return {"type": int(info["prog_type"]), "id": int(info["prog_id"]),
            "run_cnt": int(info.get("run_cnt", 0)),
            "run_time_ns": int(info.get("run_time_ns", 0))}
