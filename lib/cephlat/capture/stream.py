"""A capture's BPF events read in bulk, a bounded chunk at a time.

The BPF programs' events are fixed-size records (struct ev_hdr + the
payload of probes/osdstage.h, as the capture's own metadata lays them out:
the recorder copies their bytes unchanged), so they are decoded with numpy,
many packets at once, into one structured array per event class. What is
read is bounded: a round loads a few MB of packets of every stream file,
and only the packets a time window overlaps (their begin/end timestamps in
the packet context say which) are decoded at all.

Events of the several stream files come out merged in time order, ties in
the order of the files then of the events in a file: the order the
record-by-record reader (ctf.Trace.records, heapq.merge) gives.
"""
import os
import struct

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import ctf
from ..errors import UserError

# CTF field type -> numpy scalar type (little endian, byte-packed)
_NP = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "u64": "<u8", "x64": "<u8",
       "s8": "<i1", "s32": "<i4", "s64": "<i8"}
# packets decoded per round, all streams together (what bounds the
# reader's memory; spans of 4 rounds are walked at once);
# OSDSTAGE_READ_CHUNK_KB changes it (tests read with small rounds)
_ROUND_BYTES = int(os.environ.get("OSDSTAGE_READ_CHUNK_KB", 4096)) << 10
_INF = (1 << 64) - 1
# stop marks after a span's bytes: more than a record's step (an id byte
# gives at most 255 + the largest record)
_TAIL = 1 << 16


def class_dtype(context, c):
    """The numpy record of event class `c`: header (_id, _ts), the event
    context (_ctx0..), then the class's fields, byte-packed as the
    capture's metadata declares them; None if a field has no fixed size
    (those events are user space's, in stream_meta)."""
    fields = [("_id", "<u4"), ("_ts", "<u8")]
    for i, (_, t, _) in enumerate(context.fields):
        if t not in _NP:
            return None
        fields.append(("_ctx%d" % i, _NP[t]))
    for name, t, _ in c.fields:
        arr = ctf.array_of(t)
        if t in _NP:
            fields.append((name, _NP[t]))
        elif arr is not None and arr[0] in _NP:
            fields.append((name, _NP[arr[0]], (arr[1],)))
        elif t.startswith("char"):
            fields.append((name, "S%d" % int(t[4:])))
        else:
            return None
    return np.dtype(fields)


class Packets:
    """The complete packets of one stream file: offset, size, content end
    and begin/end timestamps (read from their headers only)."""

    def __init__(self, path):
        self.path = path
        self.truncated = False
        offs, sizes, ends, begins, lasts = [], [], [], [], []
        try:
            f = open(path, "rb")
        except OSError as e:
            raise UserError("cannot read %s: %s" % (path, e.strerror))
        with f:
            total = os.fstat(f.fileno()).st_size
            pos = 0
            head = ctf.PACKET_HEAD
            while pos < total:
                if total - pos < head:
                    self.truncated = True
                    break
                f.seek(pos)
                h = f.read(head)
                magic = struct.unpack_from("<I", h)[0]
                if magic != ctf.MAGIC:
                    raise UserError("%s: corrupt packet at byte %d (bad "
                                    "magic)" % (path, pos))
                b, e, cbits, sbits, _d, _cpu = ctf._CTX.unpack_from(
                    h, ctf._HDR.size)
                size, content = sbits // 8, cbits // 8
                if size <= 0 or content > size or size % 8 or \
                        content < head:
                    raise UserError("%s: corrupt packet at byte %d (bad "
                                    "size)" % (path, pos))
                if pos + size > total:
                    self.truncated = True
                    break
                if content > head:
                    offs.append(pos)
                    sizes.append(size)
                    ends.append(pos + content)
                    begins.append(b)
                    lasts.append(e)
                pos += size
        self.off = np.array(offs, dtype=np.int64)
        self.size = np.array(sizes, dtype=np.int64)
        self.end = np.array(ends, dtype=np.int64)
        self.begin_ts = np.array(begins, dtype=np.uint64)
        self.end_ts = np.array(lasts, dtype=np.uint64)

    def __len__(self):
        return len(self.off)


class Chunk:
    """Events of one round, merged in time order: per class id, the
    structured records and their order keys; .order() gives the merged
    order of any set of classes."""

    def __init__(self, recs, keys):
        self.recs, self.keys = recs, keys     # cid -> array

    def order(self, cids):
        """-> (the classes of `cids` with events here, the merged order:
        indices into their arrays concatenated in that order)"""
        cids = [c for c in cids if c in self.recs and len(self.recs[c])]
        if not cids:
            return cids, np.zeros(0, dtype=np.int64)
        if len(cids) == 1:
            r = self.recs[cids[0]]
            return cids, np.lexsort((self.keys[cids[0]], r["_ts"]))
        ts = np.concatenate([self.recs[c]["_ts"] for c in cids])
        key = np.concatenate([self.keys[c] for c in cids])
        return cids, np.lexsort((key, ts))

    def merged(self, cids):
        """-> (class id per event, index in its class's array) for the
        events of classes `cids`, in merged order."""
        cids, o = self.order(cids)
        if not cids:
            return o, o
        cls = np.concatenate([np.full(len(self.recs[c]), c, dtype=np.int64)
                              for c in cids])
        idx = np.concatenate([np.arange(len(self.recs[c]), dtype=np.int64)
                              for c in cids])
        return cls[o], idx[o]


class Streams:
    """The fixed-size events of a capture's stream files (those the BPF
    programs wrote), read in rounds."""

    def __init__(self, trace, files):
        self.trace = trace
        self.files = files
        self.packets = [Packets(os.path.join(trace.path, f)) for f in files]
        self.dtypes = {}
        self.sizes = np.full(256, -1, dtype=np.int64)
        for cid, c in trace.classes.items():
            dt = class_dtype(trace.context, c)
            if dt is not None and 0 <= cid < 256:
                self.dtypes[cid] = dt
                self.sizes[cid] = dt.itemsize
        # the walk's step from a record's first byte (its id): its size;
        # 0 (stand still) for an id of no known class, and for the
        # stopper, an id no class has, marking where a packet ends
        self.walk_steps = np.maximum(self.sizes, 0)
        self.stopper = int(np.nonzero(self.sizes <= 0)[0][0])
        self._spans = {}
        self._raw = {}          # stream -> its span buffer
        self.span_bytes = 4 * _ROUND_BYTES

    def span(self):
        """(first, last) timestamp of the events, or (None, None)."""
        firsts = [int(p.begin_ts[0]) for p in self.packets if len(p)]
        lasts = [int(p.end_ts[-1]) for p in self.packets if len(p)]
        return (min(firsts), max(lasts)) if firsts else (None, None)

    # ------------------------------------------------------------ decode
    def _span(self, si, lo, hi, budget=None):
        """Packets lo..hi-1 of stream si walked: (first packet, end
        packet, byte offset, bytes, event offsets sorted, their ids),
        from a span of packets walked at once (the walk costs one step
        per event of a packet, so the more packets a step covers the
        better) and kept while rounds take their packets from it."""
        sp = self._spans.get(si)
        if sp is not None and sp[0] <= lo and hi <= sp[1]:
            return sp
        p = self.packets[si]
        if budget is None:
            budget = max(self.span_bytes // max(len(self.packets), 1),
                         1 << 18)
        j, n = lo, 0
        while j < len(p) and (j < hi or n < budget):
            n += int(p.size[j])
            j += 1
        start = int(p.off[lo])
        buf = self._read(si, start, int(p.off[j - 1] + p.size[j - 1]))
        offs = self._walk(p.path, buf, start, p.off[lo:j] - start +
                          ctf.PACKET_HEAD, p.end[lo:j] - start)
        # every record whole inside its packet, with a known id (a u32)
        ids = sliding_window_view(buf, 4)[offs].view("<u4").reshape(-1)
        if len(ids) and int(ids.max()) > 255:
            at = int(offs[np.nonzero(ids > 255)[0][0]])
            raise UserError("%s: corrupt event at byte %d" % (p.path,
                                                              at + start))
        ids = ids.astype(np.int64)
        sp = self._spans[si] = (lo, j, start, buf, offs, ids)
        return sp

    def _read(self, si, start, stop):
        """Bytes start..stop-1 of stream si's file, then a tail of stop
        marks (_TAIL bytes: a walk that runs past the last packet stays
        inside the buffer) -> a uint8 array. The stream's buffer of its
        last span is reused if large enough (fresh memory costs a page
        fault a page; nothing points into it once its span is done,
        records are copied out of it)."""
        path = self.packets[si].path
        raw = self._raw.get(si)
        if raw is None or len(raw) < stop - start + _TAIL:
            raw = self._raw[si] = bytearray(stop - start + _TAIL)
        try:
            with open(path, "rb") as f:
                f.seek(start)
                got = f.readinto(memoryview(raw)[:stop - start])
        except OSError as e:
            raise UserError("cannot read %s: %s" % (path, e.strerror))
        if got != stop - start:
            raise UserError("%s: corrupt packet at byte %d (bad size)" % (
                path, start + got))
        buf = np.frombuffer(raw, dtype=np.uint8, count=stop - start + _TAIL)
        buf[stop - start:] = self.stopper
        return buf

    def _walk(self, path, buf, start, pos, ends):
        """Every packet's chain of records walked at once, one event a
        step, from its first record (pos) to its content end (ends),
        offsets into buf (read from byte `start` of `path`) -> the
        records' offsets, packet by packet in file order."""
        # a stop mark at each packet's content end (its padding or the
        # next header, which are read from Packets, never from here)
        # and in the tail: a walk that reaches it stays there, as does
        # one on an unknown id (caught below)
        buf[ends] = self.stopper
        steps = self.walk_steps
        # walk every packet's chain of records at once, one event a step;
        # done when every walk stands still
        cur = pos
        found = []
        while True:
            for _ in range(16):
                found.append(cur)
                cur = cur + steps[buf[cur]]
            if not steps[buf[cur]].any():
                break
        # row per packet, its walk's positions in order: those before the
        # packet's end are its records, in file order
        walk = np.stack(found, axis=1)
        inside = walk < ends[:, None]
        offs = walk[inside]
        bad = cur != ends
        if np.any(bad):
            # a walk that stopped on an unknown id, or one whose last
            # record runs past its packet's content end
            k = int(np.nonzero(bad)[0][0])
            row = walk[k][inside[k]]
            at = int(cur[k]) if cur[k] < ends[k] or not len(row) \
                else int(row[-1])
            raise UserError("%s: corrupt event at byte %d" % (path,
                                                              at + start))
        return offs

    def _decode(self, si, lo, hi, want):
        """Packets lo..hi-1 of stream si -> {cid: (records, keys)} for the
        classes in `want` (None: every one)."""
        p = self.packets[si]
        _, _, start, buf, offs, ids = self._span(si, lo, hi)
        i0, i1 = np.searchsorted(offs, [int(p.off[lo]) - start,
                                        int(p.end[hi - 1]) - start])
        offs, ids = offs[i0:i1], ids[i0:i1]
        out = {}
        base = (si << 48) + start
        for cid in np.nonzero(np.bincount(ids, minlength=1))[0].tolist():
            if want is not None and cid not in want:
                continue
            o = offs[ids == cid]
            dt = self.dtypes[cid]
            rows = sliding_window_view(buf, dt.itemsize)[o]
            out[cid] = (rows.view(dt).reshape(-1), o + base)
        return out

    def scan(self, want):
        """The events of classes `want` (ids), a span of one stream at a
        time: (class id, records, keys), in no order across spans (for
        what needs every event but not their order: a stream's spans
        take the whole span budget, and nothing is merged)."""
        want = set(want)
        for si, p in enumerate(self.packets):
            self._spans = {}
            lo = 0
            while lo < len(p):
                hi = self._span(si, lo, lo + 1, self.span_bytes)[1]
                for cid, (r, k) in self._decode(si, lo, hi, want).items():
                    yield cid, r, k
                lo = hi
        self._spans, self._raw = {}, {}

    # ------------------------------------------------------------- rounds
    def chunks(self, want=None, t0=None, t1=None):
        """Chunks of the events of classes `want` (ids; None: all) with
        t0 <= ts <= t1 (None: unbounded), in time order."""
        lo_ts = 0 if t0 is None else max(0, int(t0))
        hi_ts = _INF if t1 is None else int(t1)
        if hi_ts < lo_ts:
            return
        want = None if want is None else set(want)
        cursor, stop = [], []
        for p in self.packets:
            # the packets the window overlaps: ending at or after t0,
            # beginning at or before t1
            a = int(np.searchsorted(p.end_ts, np.uint64(lo_ts), "left"))
            b = int(np.searchsorted(p.begin_ts, np.uint64(hi_ts), "right"))
            cursor.append(a)
            stop.append(max(a, b))
        pend = {}                       # cid -> [(recs, keys)]
        per_stream = max(_ROUND_BYTES // max(len(self.packets), 1), 1 << 16)
        self._spans = {}
        while True:
            h = self._round_end(cursor, stop, per_stream)
            for si in range(len(self.packets)):
                got = self._load(si, cursor, stop, h, want)
                for cid, (r, k) in got.items():
                    pend.setdefault(cid, []).append((r, k))
            recs, keys, pend = _take_round(pend, lo_ts, min(h, hi_ts), h)
            if recs:
                yield Chunk(recs, keys)
            if h == _INF:
                self._spans, self._raw = {}, {}
                return

    def _round_end(self, cursor, stop, per_stream):
        """The end of a round: every packet not loaded yet begins after
        it, so the events up to it are all known (about per_stream bytes
        a stream; _INF: the last round)."""
        h = _INF
        for si, p in enumerate(self.packets):
            if cursor[si] >= stop[si]:
                continue
            j = cursor[si]
            n = 0
            while j < stop[si] and n < per_stream:
                n += int(p.size[j])
                j += 1
            if j < stop[si]:
                h = min(h, int(p.end_ts[j - 1]))
        return h

    def _load(self, si, cursor, stop, h, want):
        """Stream si's packets from cursor[si] that begin at or before h,
        decoded ({cid: (records, keys)}); cursor[si] moves past them."""
        p, a = self.packets[si], cursor[si]
        if a >= stop[si]:
            return {}
        b = a + int(np.searchsorted(p.begin_ts[a:stop[si]], np.uint64(h),
                                    "right"))
        if b == a:
            return {}
        cursor[si] = b
        return self._decode(si, a, b, want)


def _take_round(pend, lo_ts, top, h):
    """The round's events (lo_ts <= ts <= top) of the parts pending per
    class ({cid: [(records, keys)]}) -> (records, keys, what is left:
    the parts' events after h, for the next rounds)."""
    recs, keys, rest = {}, {}, {}
    lo64, top = np.uint64(lo_ts), np.uint64(top)
    for cid, parts in pend.items():
        # each part's events of this round, and those after it, copied
        # once: straight into the round's arrays
        now, left = [], []
        for r, k in parts:
            ts = r["_ts"]
            m = (ts >= lo64) & (ts <= top) if lo_ts else ts <= top
            later = ts > np.uint64(h)
            now.append(None if m.all() else m)
            if later.any():
                left.append((r[later], k[later]))
        n = sum(len(r) if m is None else int(np.count_nonzero(m))
                for (r, _), m in zip(parts, now))
        if n:
            if len(parts) == 1 and now[0] is None:
                recs[cid], keys[cid] = parts[0]
            else:
                recs[cid], keys[cid] = _gather(parts, now, n)
        if left:
            rest[cid] = left
    return recs, keys, rest


def _gather(parts, masks, n):
    """The n events the masks select (None: all) of the parts, copied
    into one records array and one keys array."""
    r = np.empty(n, parts[0][0].dtype)
    k = np.empty(n, parts[0][1].dtype)
    at = 0
    for (pr, pk), m in zip(parts, masks):
        if m is None:
            r[at:at + len(pr)], k[at:at + len(pr)] = pr, pk
            at += len(pr)
        else:
            c = int(np.count_nonzero(m))
            np.compress(m, pr, out=r[at:at + c])
            np.compress(m, pk, out=k[at:at + c])
            at += c
    return r, k


def texts(col):
    """A char-array column as str values (up to the first NUL)."""
    return [b.split(b"\0", 1)[0].decode("utf-8", "replace")
            for b in col.tolist()]


def dicts(recs, names):
    """Records -> [{field: value}] for fields `names` (Python values)."""
    cols = []
    for n in names:
        col = recs[n]
        cols.append(texts(col) if col.dtype.kind == "S" else col.tolist())
    return [dict(zip(names, row)) for row in zip(*cols)]
