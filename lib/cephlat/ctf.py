"""A small writer of CTF 1.8 traces (the Common Trace Format of LTTng),
readable by babeltrace2 and Trace Compass.

A trace is a directory: `metadata` (the TSDL text describing every event
and field) and one binary stream file per stream. Events are buffered and
written in whole packets (default 64 KiB), each with its own header and
context, so a file cut short (kill -9, full disk) is readable up to its
last complete packet. Files are created mode 0600.

Groundwork for capture files (osdstage -w) and librbd traces (rbdrecord);
the field types are the ones those need.
"""
import os
import socket
import struct
import uuid as uuidlib

from .errors import UserError

MAGIC = 0xC1FC1FC1

# field type -> (TSDL type name, struct format or None for strings)
TYPES = {
    "u8": ("uint8_t", "<B"), "u16": ("uint16_t", "<H"),
    "u32": ("uint32_t", "<I"), "u64": ("uint64_t", "<Q"),
    "s32": ("int32_t", "<i"), "s64": ("int64_t", "<q"),
    "string": ("string", None),
}

_TYPEDEFS = """typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 16; align = 8; signed = false; } := uint16_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
typealias integer { size = 32; align = 8; signed = true; } := int32_t;
typealias integer { size = 64; align = 8; signed = true; } := int64_t;
"""

# packet header: magic, uuid, stream id; packet context: begin/end
# timestamps, content and packet size in bits, discarded events, cpu
_HDR = struct.Struct("<I16sI")
_CTX = struct.Struct("<QQQQQI")
_EVH = struct.Struct("<IQ")          # event id, timestamp


class EventClass:
    def __init__(self, name, fields):
        for fname, ftype in fields:
            if ftype not in TYPES:
                raise ValueError("unknown field type %s" % ftype)
        self.name, self.fields = name, list(fields)
        self.id = None
        fmt = "<"
        self._fixed = all(TYPES[t][1] for _, t in fields)
        if self._fixed:
            fmt += "".join(TYPES[t][1][1] for _, t in fields)
            self._struct = struct.Struct(fmt)

    def encode(self, values):
        if self._fixed:
            return self._struct.pack(*values)
        out = bytearray()
        for (fname, ftype), v in zip(self.fields, values):
            fmt = TYPES[ftype][1]
            if fmt is None:
                b = v.encode("utf-8", "replace") if isinstance(v, str) else v
                out += b.replace(b"\0", b"?") + b"\0"
            else:
                out += struct.pack(fmt, v)
        return bytes(out)

    def tsdl(self, stream_id=0):
        body = "\n".join("\t\t%s %s;" % (TYPES[t][0], n) for n, t in self.fields)
        return ('event {\n\tname = "%s";\n\tid = %d;\n\tstream_id = %d;\n'
                '\tfields := struct {\n%s\n\t};\n};\n' % (
                    self.name, self.id, stream_id, body))


def _tsdl_str(v):
    return '"%s"' % str(v).replace("\\", "\\\\").replace('"', '\\"')


class Writer:
    """Write events of `classes` to a new trace directory `path`.

    env: {name: str|int} stored in the metadata's env block.
    clock_offset_ns: wall-clock time at monotonic 0, so that readers can
    show wall-clock times (the timestamps are CLOCK_MONOTONIC ns)."""

    def __init__(self, path, classes, env=None, clock_offset_ns=0,
                 packet_size=65536, force=False, cpu_id=0):
        self.path = path
        if os.path.exists(path) and not force:
            raise UserError("%s exists; pass --force to overwrite it" % path)
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as e:
            raise UserError("cannot create %s: %s" % (path, e.strerror))
        self.classes = {}
        for i, c in enumerate(classes):
            c.id = i
            self.classes[c.name] = c
        self.uuid = uuidlib.uuid4()
        self.packet_size = packet_size
        self.cpu_id = cpu_id
        self.discarded = 0
        self.events = 0
        self._buf = bytearray()
        self._first_ts = None
        self._last_ts = 0
        self._write_metadata(env or {}, clock_offset_ns)
        self._stream = self._open(os.path.join(path, "stream_0"))

    def _open(self, p):
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as e:
            raise UserError("cannot write %s: %s" % (p, e.strerror))
        return os.fdopen(fd, "wb")

    def _write_metadata(self, env, offset_ns):
        env = dict({"domain": "cephlat", "tracer_name": "cephlat",
                    "hostname": socket.gethostname()}, **env)
        envs = "\n".join("\t%s = %s;" % (k, v if isinstance(v, int)
                                         else _tsdl_str(v))
                         for k, v in env.items())
        text = "/* CTF 1.8 */\n\n" + _TYPEDEFS + """
trace {
	major = 1;
	minor = 8;
	uuid = "%s";
	byte_order = le;
	packet.header := struct {
		uint32_t magic;
		uint8_t  uuid[16];
		uint32_t stream_id;
	};
};

env {
%s
};

clock {
	name = "monotonic";
	uuid = "%s";
	description = "CLOCK_MONOTONIC";
	freq = 1000000000;
	precision = 1;
	offset_s = %d;
	offset = %d;
	absolute = FALSE;
};

typealias integer {
	size = 64; align = 8; signed = false;
	map = clock.monotonic.value;
} := uint64_clock_monotonic_t;

stream {
	id = 0;
	packet.context := struct {
		uint64_clock_monotonic_t timestamp_begin;
		uint64_clock_monotonic_t timestamp_end;
		uint64_t content_size;
		uint64_t packet_size;
		uint64_t events_discarded;
		uint32_t cpu_id;
	};
	event.header := struct {
		uint32_t id;
		uint64_clock_monotonic_t timestamp;
	};
};

""" % (self.uuid, envs, uuidlib.uuid4(), offset_ns // 10**9,
       offset_ns % 10**9)
        text += "\n".join(c.tsdl() for c in self.classes.values())
        with self._open(os.path.join(self.path, "metadata")) as f:
            f.write(text.encode())

    def write(self, name, ts_ns, *values):
        """Append one event (fields in the class's order)."""
        c = self.classes[name]
        payload = _EVH.pack(c.id, ts_ns) + c.encode(values)
        room = self.packet_size - _HDR.size - _CTX.size
        if len(payload) > room:
            raise ValueError("event larger than a packet")
        if len(self._buf) + len(payload) > room:
            self.flush()
        if self._first_ts is None:
            self._first_ts = ts_ns
        self._last_ts = ts_ns
        self._buf += payload
        self.events += 1

    def flush(self):
        """Write the buffered events as one complete packet."""
        if not self._buf:
            return
        content = _HDR.size + _CTX.size + len(self._buf)
        pkt = _HDR.pack(MAGIC, self.uuid.bytes, 0) + _CTX.pack(
            self._first_ts, self._last_ts, content * 8,
            self.packet_size * 8, self.discarded, self.cpu_id)
        pkt += self._buf
        pkt += b"\0" * (self.packet_size - len(pkt))
        self._stream.write(pkt)
        self._stream.flush()
        self._buf = bytearray()
        self._first_ts = None

    def close(self):
        self.flush()
        self._stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------
# reading back what Writer wrote (the offline side needs no babeltrace2)

_EVENT_RE = None


def _parse_metadata(text):
    import re
    global _EVENT_RE
    if not text.startswith("/* CTF 1.8 */"):
        raise ValueError("not a CTF 1.8 metadata file")
    if _EVENT_RE is None:
        _EVENT_RE = re.compile(
            r'event \{\s*name = "([^"]+)";\s*id = (\d+);\s*stream_id = \d+;\s*'
            r'fields := struct \{(.*?)\};\s*\};', re.S)
    by_type = {v[0]: k for k, v in TYPES.items()}
    classes = {}
    for name, eid, body in _EVENT_RE.findall(text):
        fields = []
        for line in body.strip().splitlines():
            tname, fname = line.strip().rstrip(";").split()
            fields.append((fname, by_type[tname]))
        c = EventClass(name, fields)
        c.id = int(eid)
        classes[c.id] = c
    env = dict(re.findall(r'^\t(\w+) = "?(.*?)"?;$',
                          text.split("env {", 1)[1].split("};", 1)[0], re.M))
    m = re.search(r"offset_s = (\d+);\s*offset = (\d+);", text)
    offset = int(m.group(1)) * 10**9 + int(m.group(2)) if m else 0
    return classes, env, offset


class Trace:
    """A trace written by Writer, read back packet by packet.

    .events() yields (name, ts_ns, {field: value}); after it, .truncated
    says whether the stream ended inside a packet (read up to the last
    complete one)."""

    def __init__(self, path):
        self.path = path
        try:
            with open(os.path.join(path, "metadata"), "rb") as f:
                text = f.read().decode("utf-8")
            self.classes, self.env, self.clock_offset_ns = \
                _parse_metadata(text)
        except (OSError, UnicodeDecodeError, ValueError, KeyError,
                IndexError) as e:
            raise UserError("%s is not a cephlat CTF trace (%s)" % (
                path, getattr(e, "strerror", None) or e))
        self.truncated = False
        self.packets = 0

    def events(self):
        stream = os.path.join(self.path, "stream_0")
        try:
            data = open(stream, "rb").read()
        except OSError as e:
            raise UserError("cannot read %s: %s" % (stream, e.strerror))
        pos = 0
        while pos < len(data):
            if len(data) - pos < _HDR.size + _CTX.size:
                self.truncated = True
                return
            magic, _uuid, _sid = _HDR.unpack_from(data, pos)
            if magic != MAGIC:
                raise UserError("%s: corrupt packet at byte %d (bad magic)"
                                % (stream, pos))
            _b, _e, content_bits, size_bits, _d, _cpu = _CTX.unpack_from(
                data, pos + _HDR.size)
            size, content = size_bits // 8, content_bits // 8
            if size <= 0 or content > size or size % 8:
                raise UserError("%s: corrupt packet at byte %d (bad size)"
                                % (stream, pos))
            if pos + size > len(data):
                self.truncated = True
                return
            p = pos + _HDR.size + _CTX.size
            end = pos + content
            while p < end:
                eid, ts = _EVH.unpack_from(data, p)
                p += _EVH.size
                c = self.classes.get(eid)
                if c is None:
                    raise UserError("%s: corrupt event at byte %d" % (stream, p))
                vals = {}
                for fname, ftype in c.fields:
                    fmt = TYPES[ftype][1]
                    if fmt is None:
                        z = data.index(b"\0", p, end)
                        vals[fname] = data[p:z].decode("utf-8", "replace")
                        p = z + 1
                    else:
                        (vals[fname],) = struct.unpack_from(fmt, data, p)
                        p += struct.calcsize(fmt)
                yield c.name, ts, vals
            self.packets += 1
            pos += size
