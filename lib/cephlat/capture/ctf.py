"""A small writer of CTF 1.8 traces (the Common Trace Format of LTTng),
readable by babeltrace2 and Trace Compass.

A trace is a directory: `metadata` (the TSDL text describing every event
and field) and one binary stream file per stream. Events are buffered and
written in whole packets (default 64 KiB), each with its own header and
context, so a file cut short (kill -9, full disk) is readable up to its
last complete packet. Files are created mode 0600.

Used for capture files (osdstage -w, lib/cephlat/capture.py) and librbd
traces (rbdrecord). Several stream files may share the one stream class
(like LTTng's per-CPU files): the capture's recorder (lib/native/
recorder.c) writes one per CPU in the same packet layout.
"""
import heapq
import os
import socket
import stat
import struct
import uuid as uuidlib

from ..errors import UserError

MAGIC = 0xC1FC1FC1

# field type -> (TSDL type name, struct format or None for strings)
TYPES = {
    "u8": ("uint8_t", "<B"), "u16": ("uint16_t", "<H"),
    "u32": ("uint32_t", "<I"), "u64": ("uint64_t", "<Q"),
    "x64": ("xuint64_t", "<Q"),          # shown in hex (addresses)
    "s8": ("int8_t", "<b"), "s32": ("int32_t", "<i"),
    "s64": ("int64_t", "<q"),
    "string": ("string", None),
    # a fixed-size, NUL-padded UTF-8 text (a char array of the BPF side)
    "char64": ("utf8_t", "<64s"),
}

_TYPEDEFS = """typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 16; align = 8; signed = false; } := uint16_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
typealias integer { size = 64; align = 8; signed = false; base = 16; } := xuint64_t;
typealias integer { size = 8; align = 8; signed = true; } := int8_t;
typealias integer { size = 32; align = 8; signed = true; } := int32_t;
typealias integer { size = 64; align = 8; signed = true; } := int64_t;
typealias integer { size = 8; align = 8; signed = false; encoding = UTF8; } := utf8_t;
"""

# packet header: magic, uuid, stream id; packet context: begin/end
# timestamps, content and packet size in bits, discarded events, cpu
_HDR = struct.Struct("<I16sI")
_CTX = struct.Struct("<QQQQQI")
_EVH = struct.Struct("<IQ")          # event id, timestamp
PACKET_HEAD = _HDR.size + _CTX.size


def array_of(ftype):
    """A fixed-size array's type "T[N]" (T an integer type of TYPES) ->
    (T, N); else None. u8 arrays are bytes (a copy of memory), the others
    N integers."""
    if not ftype.endswith("]") or "[" not in ftype:
        return None
    elem, _, n = ftype[:-1].partition("[")
    if elem not in TYPES or not TYPES[elem][1] or elem.startswith("char") \
            or not n.isdigit() or int(n) < 1:
        return None
    return elem, int(n)


def _fmt(ftype):
    """The struct format of a field of fixed size (None: a string)."""
    arr = array_of(ftype)
    if arr is None:
        return TYPES[ftype][1]
    elem, n = arr
    return "<%ds" % n if elem == "u8" else "<%d%s" % (n, TYPES[elem][1][1:])


def _norm_field(f):
    """(name, type) or (name, type, [labels]) -> (name, type, labels|None);
    labels (by value; None for a value without one) make an integer field
    a CTF enum (babeltrace2 prints them)."""
    name, ftype = f[0], f[1]
    labels = list(f[2]) if len(f) > 2 and f[2] is not None else None
    if array_of(ftype) is not None and not labels:
        return name, ftype, None
    if ftype not in TYPES or (labels and TYPES[ftype][1] is None):
        raise ValueError("bad field type %s" % ftype)
    return name, ftype, labels


def _text_len(ftype):
    return int(ftype[4:]) if ftype.startswith("char") else 0


def _tsdl_field(name, ftype, labels):
    arr = array_of(ftype)
    if arr is not None:
        return "%s %s[%d];" % (TYPES[arr[0]][0], name, arr[1])
    if _text_len(ftype):
        return "%s %s[%d];" % (TYPES[ftype][0], name, _text_len(ftype))
    if not labels:
        return "%s %s;" % (TYPES[ftype][0], name)
    items = ", ".join('"%s" = %d' % (lab, i) for i, lab in enumerate(labels)
                      if lab is not None)
    return "enum : %s { %s } %s;" % (TYPES[ftype][0], items, name)


class EventClass:
    def __init__(self, name, fields):
        self.name = name
        self.fields = [_norm_field(f) for f in fields]
        self.names = tuple(f[0] for f in self.fields)
        self.id = None
        self._fixed = all(_fmt(t) for _, t, _ in self.fields)
        # integer arrays: their values regrouped into one tuple each
        self._arrays = [(i, array_of(t)[1]) for i, (_, t, _) in
                        enumerate(self.fields) if array_of(t) is not None
                        and array_of(t)[0] != "u8"]
        # fields of fixed-size text: decoded up to their first NUL
        self._texts = [i for i, (_, t, _) in enumerate(self.fields)
                       if _text_len(t)]
        if self._fixed:
            self._struct = struct.Struct(
                "<" + "".join(_fmt(t)[1:] for _, t, _ in self.fields))
        else:
            # runs of fixed-size fields packed by one Struct each, and the
            # strings between them: [(first, last + 1, Struct or None)]
            self._plan, i, n = [], 0, len(self.fields)
            while i < n:
                j = i
                while j < n and _fmt(self.fields[j][1]):
                    j += 1
                if j > i:
                    self._plan.append((i, j, struct.Struct("<" + "".join(
                        _fmt(t)[1:] for _, t, _ in self.fields[i:j]))))
                    i = j
                else:
                    self._plan.append((i, i + 1, None))
                    i += 1

    def _flat(self, values):
        """Values with each integer array's spread out (struct's)."""
        out = list(values)
        for i, _ in reversed(self._arrays):
            out[i:i + 1] = list(values[i])
        return out

    def _grouped(self, vals):
        """struct's values with each integer array's back in a tuple."""
        out, k = [], 0
        arrays = dict(self._arrays)
        for i in range(len(self.fields)):
            n = arrays.get(i)
            if n is None:
                out.append(vals[k])
                k += 1
            else:
                out.append(tuple(vals[k:k + n]))
                k += n
        return out

    def encode(self, values):
        if self._arrays:
            if not self._fixed:
                raise ValueError("integer arrays with strings: %s" %
                                 self.name)
            values = self._flat(values)
        if self._fixed and not self._texts:
            return self._struct.pack(*values)
        if self._fixed:
            return self._struct.pack(*[
                v.encode("utf-8") if isinstance(v, str) else v
                for v in values])
        out = []
        for i, j, st in self._plan:
            if st is None:
                v = values[i]
                b = v.encode("utf-8", "replace") if isinstance(v, str) else v
                out.append(b.replace(b"\0", b"?") if b"\0" in b else b)
                out.append(b"\0")
            else:
                out.append(st.pack(*[
                    v.encode("utf-8") if isinstance(v, str) else v
                    for v in values[i:j]]) if self._texts else
                    st.pack(*values[i:j]))
        return b"".join(out)

    def decode(self, data, p, end):
        """-> (values tuple, position after the event)"""
        if self._fixed:
            vals = self._struct.unpack_from(data, p)
            if self._arrays:
                vals = tuple(self._grouped(vals))
            if self._texts:
                vals = list(vals)
                for i in self._texts:
                    vals[i] = vals[i].split(b"\0", 1)[0].decode(
                        "utf-8", "replace")
                vals = tuple(vals)
            return vals, p + self._struct.size
        vals = []
        for _, ftype, _ in self.fields:
            fmt = _fmt(ftype)
            if fmt is None:
                z = data.index(b"\0", p, end)
                vals.append(data[p:z].decode("utf-8", "replace"))
                p = z + 1
            else:
                v = struct.unpack_from(fmt, data, p)[0]
                if isinstance(v, bytes):          # fixed-size text
                    v = v.split(b"\0", 1)[0].decode("utf-8", "replace")
                vals.append(v)
                p += struct.calcsize(fmt)
        return tuple(vals), p

    def tsdl(self, stream_id=0):
        body = "\n".join("\t\t" + _tsdl_field(*f) for f in self.fields)
        return ('event {\n\tname = "%s";\n\tid = %d;\n\tstream_id = %d;\n'
                '\tfields := struct {\n%s\n\t};\n};\n' % (
                    self.name, self.id, stream_id, body))


def _tsdl_str(v):
    return '"%s"' % str(v).replace("\\", "\\\\").replace('"', '\\"')


class Writer:
    """Write events of `classes` to a new trace directory `path`.

    env: {name: str|int} stored in the metadata's env block.
    clock_offset_ns: wall-clock time at monotonic 0, so that readers can
    show wall-clock times (the timestamps are CLOCK_MONOTONIC ns).
    event_context: fields every event carries after its header (e.g. cpu
    and report interval), given to write() as `ctx`.
    stream: the file name of this writer's stream (others may add more
    files of the same layout to the directory).
    whole_packets: pad every packet to packet_size (else a flushed packet
    is cut to its content)."""

    def __init__(self, path, classes, env=None, clock_offset_ns=0,
                 packet_size=65536, force=False, cpu_id=0,
                 event_context=(), stream="stream_0", whole_packets=True):
        self.path = path
        if os.path.exists(path) and not force:
            raise UserError("%s exists; pass --force to overwrite it" % path)
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as e:
            raise UserError("cannot write %s: %s" % (path, e.strerror))
        self.classes = {}
        for i, c in enumerate(classes):
            c.id = i
            self.classes[c.name] = c
        self.uuid = uuidlib.uuid4()
        self.context = EventClass("context", event_context)
        self.packet_size = packet_size
        self.whole_packets = whole_packets
        self.cpu_id = cpu_id
        self.discarded = 0
        self.events = 0
        self._buf = bytearray()
        self._first_ts = None
        self._last_ts = 0
        self._write_metadata(env or {}, clock_offset_ns)
        self._stream = self._open(os.path.join(path, stream))

    def _open(self, p):
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as e:
            raise UserError("cannot write %s: %s" % (p, e.strerror))
        return os.fdopen(fd, "wb")

    def _write_metadata(self, env, offset_ns):
        # domain and tracer_name name the tool for babeltrace2 and the like;
        # no reader here checks them (Trace knows a capture by its "tool"),
        # so traces whose metadata says "cephlat" there read the same
        env = dict({"domain": "osdstage", "tracer_name": "osdstage",
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
	};%s
};

""" % (self.uuid, envs, uuidlib.uuid4(), offset_ns // 10**9,
       offset_ns % 10**9, self._context_tsdl())
        text += "\n".join(c.tsdl() for c in self.classes.values())
        with self._open(os.path.join(self.path, "metadata")) as f:
            f.write(text.encode())

    def _context_tsdl(self):
        if not self.context.fields:
            return ""
        return "\n\tevent.context := struct {\n%s\n\t};" % "\n".join(
            "\t\t" + _tsdl_field(*f) for f in self.context.fields)

    def write(self, name, ts_ns, *values, ctx=()):
        """Append one event (fields in the class's order; `ctx` the event
        context's values)."""
        c = self.classes[name]
        payload = _EVH.pack(c.id, ts_ns) + self.context.encode(ctx) + \
            c.encode(values)
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
        content = PACKET_HEAD + len(self._buf)
        size = self.packet_size if self.whole_packets else \
            (content + 7) // 8 * 8
        pkt = _HDR.pack(MAGIC, self.uuid.bytes, 0) + _CTX.pack(
            self._first_ts, self._last_ts, content * 8, size * 8,
            self.discarded, self.cpu_id)
        pkt += self._buf
        pkt += b"\0" * (size - len(pkt))
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
_FIELD_RE = None


def _parse_fields(body):
    """A struct's fields -> [(name, type, labels)]; ValueError, in words,
    on a field this cannot read."""
    import re
    global _FIELD_RE
    if _FIELD_RE is None:
        _FIELD_RE = re.compile(
            r'^(?:enum : (\w+) \{(.*)\}|(\w+)) (\w+)(?:\[(\d+)\])?;$')
    by_type = {v[0]: k for k, v in TYPES.items()}
    fields = []
    for line in body.strip().splitlines():
        m = _FIELD_RE.match(line.strip())
        if not m:
            raise ValueError("a field it cannot read: %r" % line.strip())
        base, items, plain, fname, length = m.groups()
        if length and plain in by_type and plain != TYPES["char64"][0]:
            fields.append((fname, "%s[%s]" % (by_type[plain], length), None))
            continue
        if length:                        # fixed-size text
            fields.append((fname, "char" + length, None))
            continue
        if (base or plain) not in by_type:
            raise ValueError("field %s is of a type it does not describe "
                             "(%s)" % (fname, base or plain))
        labels = None
        if base:
            try:
                pairs = [x.rsplit("=", 1) for x in items.split(",")]
                by_value = {int(v): lab.strip().strip('"')
                            for lab, v in pairs}
                labels = [by_value.get(i) for i in range(max(by_value) + 1)]
            except ValueError:
                raise ValueError("the labels of field %s cannot be read"
                                 % fname) from None
        fields.append((fname, by_type[base or plain], labels))
    return fields


# the blocks every trace's metadata has (Writer writes them first)
_BLOCKS = ("trace", "env", "clock", "stream")
_HEAD = "/* CTF 1.8 */"


def _statement(text):
    """A TSDL statement's kind: its first word, comments left out ("last"
    when the text ends inside that word)."""
    import re
    rest = re.sub(r"/\*.*?\*/", " ", text, flags=re.S).lstrip()
    words = rest.split()
    if not words or words[0] == rest:
        return "last"
    return words[0]


def metadata_problem(text):
    """What is wrong with a trace's metadata text, in words, or None.
    TSDL is a list of statements, each ending in ';' outside braces,
    strings and comments: text that ends inside one was cut short, and
    so was metadata without one of the blocks every trace's has."""
    if not text.strip():
        return "is empty"
    if not text.startswith(_HEAD):
        if _HEAD.startswith(text):
            return "is cut short at byte %d, inside its first line" % \
                len(text.encode())
        return "is not CTF 1.8 metadata"
    depth, i, n, start, kinds = 0, 0, len(text), 0, []
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                break
            i = j + 2
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                break
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return "has a '}' that closes nothing, at byte %d" % len(
                    text[:i].encode())
        elif c == ";" and depth == 0:
            kinds.append(_statement(text[start:i]))
            start = i + 1
        i += 1
    if i < n or depth or text[start:].strip():
        return "is cut short at byte %d, inside its %s block" % (
            len(text.encode()), _statement(text[start:]))
    missing = [k for k in _BLOCKS if k not in kinds]
    if missing:
        return "is cut short: it has no %s block" % missing[0]
    return None


def _parse_metadata(text):
    """-> (classes by id, the event context, env, clock offset ns);
    ValueError, in words, on metadata it cannot read."""
    import re
    global _EVENT_RE
    why = metadata_problem(text)
    if why:
        raise ValueError(why)
    if _EVENT_RE is None:
        _EVENT_RE = re.compile(
            r'event \{\s*name = "([^"]+)";\s*id = (\d+);\s*stream_id = \d+;\s*'
            r'fields := struct \{(.*?)\};\s*\};', re.S)
    classes = {}
    for name, eid, body in _EVENT_RE.findall(text):
        try:
            c = EventClass(name, _parse_fields(body))
        except ValueError as e:
            raise ValueError("has an event class, %s, with %s" % (name, e))
        c.id = int(eid)
        classes[c.id] = c
    m = re.search(r"event\.context := struct \{(.*?)\};", text, re.S)
    try:
        context = EventClass("context", _parse_fields(m.group(1))
                             if m else [])
    except ValueError as e:
        raise ValueError("has an event context with %s" % e)
    env = {k: re.sub(r"\\(.)", r"\1", v) for k, v in re.findall(
        r'^\t(\w+) = "?(.*?)"?;$',
        text.split("env {", 1)[1].split("};", 1)[0], re.M)}
    m = re.search(r"offset_s = (\d+);\s*offset = (\d+);", text)
    offset = int(m.group(1)) * 10**9 + int(m.group(2)) if m else 0
    return classes, context, env, offset


class Trace:
    """A trace written by Writer (and the recorder), read back packet by
    packet, every stream file of the directory merged in time order.

    .events() yields (name, ts_ns, {field: value}) (the event context's
    fields included); .records() yields (class, ts_ns, context tuple,
    values tuple), cheaper. After either, .truncated says whether a stream
    ended inside a packet (read up to its last complete one)."""

    def __init__(self, path):
        self.path = path
        try:
            st = os.stat(path)
        except OSError as e:
            raise UserError("cannot read %s: %s" % (path, e.strerror))
        if not stat.S_ISDIR(st.st_mode):
            raise UserError("%s is not a capture: it is %s, not a CTF trace "
                            "directory" % (path, "a file" if stat.S_ISREG(
                                st.st_mode) else "no directory"))
        meta = os.path.join(path, "metadata")
        try:
            with open(meta, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raise UserError("%s is not an osdstage CTF trace: it has no "
                            "metadata file" % path) from None
        except OSError as e:
            raise UserError("cannot read %s: %s" % (meta, e.strerror))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError("%s is not an osdstage CTF trace: its metadata "
                            "is not text" % path) from None
        try:
            self.classes, self.context, self.env, self.clock_offset_ns = \
                _parse_metadata(text)
        except ValueError as e:
            if str(e) == "is not CTF 1.8 metadata":
                raise UserError("%s is not an osdstage CTF trace: its "
                                "metadata is not CTF 1.8 metadata" % path)
            raise UserError("%s %s" % (meta, e)) from None
        self.streams = sorted(f for f in os.listdir(path)
                              if f.startswith("stream"))
        self.truncated = False
        self.truncated_streams = []
        self.packets = 0

    def records(self):
        its = [self._stream_records(f) for f in self.streams]
        if len(its) == 1:
            return its[0]
        return heapq.merge(*its, key=lambda r: r[1])

    def events(self):
        names = self.context.names
        for c, ts, ctx, vals in self.records():
            d = dict(zip(names, ctx))
            d.update(zip(c.names, vals))
            yield c.name, ts, d

    def check_order(self, limit=20):
        """What a CTF reader that merges streams by time (babeltrace2's
        muxer) would stop at, read record by record: in each stream file,
        an event older than the one before it (in any packet), an event
        outside its packet's begin/end, a packet that begins before the
        previous one ended. -> (events read, up to `limit` faults as
        lines; [] when in order)"""
        faults, n = [], 0
        for f in self.streams:
            for _ in self._stream_records(f, faults):
                n += 1
        return n, faults[:limit]

    def _stream_records(self, fname, faults=None):
        """faults: a list to append order faults to (check_order)."""
        stream = os.path.join(self.path, fname)
        last = 0                        # the stream's last timestamp
        try:
            with open(stream, "rb") as f:
                data = f.read()
        except OSError as e:
            raise UserError("cannot read %s: %s" % (stream, e.strerror))
        ctx_dec, classes = self.context.decode, self.classes
        evh = _EVH.unpack_from
        pos = 0
        while pos < len(data):
            if len(data) - pos < PACKET_HEAD:
                self._cut(fname)
                return
            magic, _uuid, _sid = _HDR.unpack_from(data, pos)
            if magic != MAGIC:
                raise UserError("%s: corrupt packet at byte %d (bad magic)"
                                % (stream, pos))
            begin, end_ts, content_bits, size_bits, _d, _cpu = \
                _CTX.unpack_from(data, pos + _HDR.size)
            size, content = size_bits // 8, content_bits // 8
            if size <= 0 or content > size or size % 8 or \
                    content < PACKET_HEAD:
                raise UserError("%s: corrupt packet at byte %d (bad size)"
                                % (stream, pos))
            if pos + size > len(data):
                self._cut(fname)
                return
            p = pos + PACKET_HEAD
            end = pos + content
            if faults is not None and content > PACKET_HEAD:
                if begin < last:
                    faults.append("%s: packet at byte %d begins %d ns "
                                  "before the last event" % (
                                      fname, pos, last - begin))
                last = max(last, begin)
            try:
                while p < end:
                    eid, ts = evh(data, p)
                    c = classes.get(eid)
                    if c is None:
                        raise UserError(
                            "%s: the event at byte %d is of class %d, "
                            "which %s does not describe (cut short, or "
                            "another trace's)" % (
                                stream, p, eid,
                                os.path.join(self.path, "metadata")))
                    if faults is not None:
                        if ts < last or not begin <= ts <= end_ts:
                            faults.append(
                                "%s: event at byte %d (ts %d) %s" % (
                                    fname, p, ts,
                                    "older than the one before" if ts < last
                                    else "outside its packet"))
                        last = max(last, ts)
                    ctx, p = ctx_dec(data, p + 12, end)
                    vals, p = c.decode(data, p, end)
                    yield c, ts, ctx, vals
            except (ValueError, struct.error):
                raise UserError("%s: corrupt event at byte %d" % (stream, p))
            if p != end:
                raise UserError("%s: corrupt event at byte %d" % (stream, p))
            self.packets += 1
            pos += size

    def _cut(self, fname):
        self.truncated = True
        self.truncated_streams.append(fname)


def trace_tool(path):
    """What made the trace at `path` (its metadata's env "tool":
    "osdstage", "rbdrecord"), or None; one clear line when it is no
    trace of ours."""
    return Trace(path).env.get("tool")
