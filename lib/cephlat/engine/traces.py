"""The ops the BPF programs chose to send as OTLP traces (probes/
osdstage.h, struct op_trace; the "traces" ring buffer): read and decoded
with the layout the build wrote (build/osdstage.abi.json), never a copy.
The front ends that send traces turn them into spans (livetraces.py)."""
import re
import struct

from .native import RawRing

# how often the library's thread takes the chosen ops off the ring: the
# ring holds about a second of them at the fastest OSDs here, and Python
# may come back later than that under load
DRAIN_US = 20000

_ARRAY = re.compile(r"^__(u|s)(8|16|32|64)\[(\d+)\]$")
_FMT = {("u", "8"): "B", ("u", "16"): "H", ("u", "32"): "I",
        ("u", "64"): "Q", ("s", "8"): "b", ("s", "16"): "h",
        ("s", "32"): "i", ("s", "64"): "q"}


def decoder(abi):
    """-> decode(raw bytes) -> {member: value} of a struct op_trace:
    its scalars, its arrays of integers as lists, its char arrays as
    str (up to the first NUL)."""
    st = abi.struct("op_trace")
    arrays, strings = [], []
    for m in st.members:
        if m["kind"] != "array":
            continue
        t = m.get("type") or ""
        a = _ARRAY.match(t)
        if a:
            arrays.append((m["name"], m["offset"], "<%s%s" % (
                a.group(3), _FMT[a.group(1), a.group(2)])))
        elif t.startswith("char["):
            strings.append((m["name"], m["offset"], m["size"]))

    def decode(raw):
        d = st.unpack(raw)
        for name, off, fmt in arrays:
            d[name] = list(struct.unpack_from(fmt, raw, off))
        for name, off, size in strings:
            d[name] = raw[off:off + size].split(b"\0", 1)[0].decode(
                "utf-8", "replace")
        return d
    return decode


class TraceRing:
    """The traces ring of a loaded tracer: take() -> the chosen ops since
    the last take, decoded."""

    def __init__(self, ring_map, abi, bpf_dir):
        self.size = abi.struct("op_trace").size
        self.decode = decoder(abi)
        self.ring = RawRing(bpf_dir, ring_map, DRAIN_US)

    def take(self):
        return [self.decode(raw) for raw in self.ring.take()
                if len(raw) >= self.size]

    def close(self):
        self.ring.close()
