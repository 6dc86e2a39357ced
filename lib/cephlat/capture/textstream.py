"""The events of a trace whose records carry NUL-terminated strings
(rbdrecord's: librbd's tracepoints name the image, its OSD-op events the
request id and object) read in bulk with numpy, a span of packets at a
time.

A record's size depends on its strings, so its end is known only once
its strings are read: walking a packet record by record is what the
record-by-record reader (ctf.Trace.records) does, a few microseconds an
event in Python. Here every record of a span is found at once: a record
begins with its class id (a u32 of a known class) and its timestamp
(within its packet's begin and end, from the packet context); every
position that looks like that is a candidate, each candidate's end is
worked out from its class's layout (fixed runs of fields, and strings up
to their NUL) and the candidates must tile each packet's content exactly,
the first at the content's start, each one's end the next one's start,
the last one's end the content's end. Every true record is a candidate;
a false one (bytes inside a record that happen to look like a header)
breaks the tiling, and that packet is walked from its first record
along the true ends (a few hundred steps; rare). A packet the walk
cannot tile is corrupt (one clear line).
"""
import os

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import ctf
from .stream import _NP, Packets
from ..errors import UserError

# bytes of packets read and decoded at once, a stream file at a time
SPAN_BYTES = int(os.environ.get("OSDSTAGE_READ_CHUNK_KB", 4096)) << 10
_HEAD = ctf._EVH.size           # event header: id (u32), timestamp (u64)


class Layout:
    """Where a class's fields lie in its records: runs of fixed-size
    fields (their offsets in the run, numpy types) and strings, the event
    context's fields first (named _ctx0, _ctx1, ...)."""

    def __init__(self, context, c):
        self.steps = []         # ("fixed", size, [(name, off, type)]) or
        run = []                # ("string", name)
        size = 0
        fields = [("_ctx%d" % i, t) for i, (_, t, _) in
                  enumerate(context.fields)] + [(n, t) for n, t, _ in
                                                c.fields]
        for name, t in fields:
            if t == "string":
                if run:
                    self.steps.append(("fixed", size, run))
                    run, size = [], 0
                self.steps.append(("string", name))
                continue
            dt = _NP.get(t) or "S%d" % int(t[4:])
            run.append((name, size, dt))
            size += np.dtype(dt).itemsize
        if run:
            self.steps.append(("fixed", size, run))

    def walk(self, buf, nul, starts, want=None):
        """Records at `starts` -> (their ends, {field: values}) (the
        fields in `want`, None: none): fixed fields as numpy arrays,
        strings as (start, length) pairs of positions in buf. nul: the
        positions of buf's NULs."""
        pos = starts + _HEAD
        out = {}
        for step in self.steps:
            if step[0] == "fixed":
                _, size, run = step
                for name, off, dt in run:
                    if want is not None and name in want:
                        w = np.dtype(dt).itemsize
                        out[name] = sliding_window_view(buf, w)[
                            pos + off].view(dt).reshape(-1)
                pos = pos + size
            else:
                end = _nul_after(buf, nul, pos)
                if want is not None and step[1] in want:
                    out[step[1]] = (pos, end - pos)
                pos = end + 1
        return pos, out


def _nul_after(buf, nul, pos):
    """The first NUL at or after each of `pos` (sorted NUL positions
    `nul`): looked for in the 32 bytes there (most strings are shorter),
    else searched for."""
    if not len(pos):
        return pos
    hit = sliding_window_view(buf, 32)[pos] == 0
    k = hit.argmax(axis=1)
    end = pos + k
    far = ~hit[np.arange(len(pos)), k]
    if far.any():
        end[far] = nul[np.searchsorted(nul, pos[far])]
    return end


def strings(buf, where):
    """(starts, lengths) of strings in buf -> a numpy bytes array (S<n>:
    the longest)."""
    starts, lens = where
    if not len(starts):
        return np.zeros(0, "S1")
    w = max(int(lens.max()), 1)
    idx = starts[:, None] + np.arange(w)
    m = np.arange(w) < lens[:, None]
    mat = np.where(m, buf[np.minimum(idx, len(buf) - 1)], 0).astype(np.uint8)
    return np.ascontiguousarray(mat).view("S%d" % w).reshape(-1)


class TextStreams:
    """The records of a trace's stream files (ctf.Trace), by class."""

    def __init__(self, trace):
        self.trace = trace
        self.layouts = {cid: Layout(trace.context, c)
                        for cid, c in trace.classes.items()}
        self.ids = {c.name: cid for cid, c in trace.classes.items()}
        self.known = np.zeros(256, bool)
        for cid in self.layouts:
            if 0 <= cid < 256:
                self.known[cid] = True
        self.truncated = False

    def spans(self, want):
        """want: {class name: fields} -> per span of packets of each
        stream file: (buf, {class name: (timestamps, {field: values})}),
        the records of each class in file order, "_at" their place in the
        trace (stream file number << 48 | byte offset) (strings as (start,
        length) in buf: strings() makes them bytes)."""
        want = {self.ids[n]: set(f) for n, f in want.items()
                if n in self.ids}
        for si, f in enumerate(self.trace.streams):
            p = Packets(os.path.join(self.trace.path, f))
            self.truncated |= p.truncated
            lo = 0
            while lo < len(p):
                hi, n = lo, 0
                while hi < len(p) and (hi == lo or n < SPAN_BYTES):
                    n += int(p.size[hi])
                    hi += 1
                yield self._span(p, lo, hi, want, si)
                lo = hi

    def _span(self, p, lo, hi, want, si):
        start = int(p.off[lo])
        stop = int(p.off[hi - 1] + p.size[hi - 1])
        try:
            with open(p.path, "rb") as fh:
                fh.seek(start)
                raw = fh.read(stop - start)
        except OSError as e:
            raise UserError("cannot read %s: %s" % (p.path, e.strerror))
        if len(raw) != stop - start:
            raise UserError("%s: corrupt packet at byte %d (bad size)" % (
                p.path, start + len(raw)))
        # a tail of zeros: a string or a run read past the end stays in
        buf = np.frombuffer(raw + bytes(1 << 16), dtype=np.uint8)
        heads = p.off[lo:hi] - start + ctf.PACKET_HEAD
        ends = p.end[lo:hi] - start
        nul = np.flatnonzero(buf == 0)     # (the tail has some)
        starts = self._records(buf, nul, heads, ends, p.begin_ts[lo:hi],
                               p.end_ts[lo:hi], p.path, start)
        ids = buf[starts].astype(np.int64)
        ts = sliding_window_view(buf, 8)[starts + 4].view("<u8").reshape(-1)
        out = {}
        for cid, fields in want.items():
            m = ids == cid
            if not m.any():
                continue
            s = starts[m]
            f = self.layouts[cid].walk(buf, nul, s, fields)[1]
            f["_at"] = (si << 48) + start + s
            out[self.trace.classes[cid].name] = (ts[m], f)
        return buf, out

    def _records(self, buf, nul, heads, ends, begin_ts, end_ts, path,
                 base):
        """Every record's start in the span's packets (sorted)."""
        n = len(buf) - (1 << 16)
        # the bytes every timestamp of the span shares (the high ones),
        # each where a header's timestamp would have it; then its id
        lo, hi = int(begin_ts.min()), int(end_ts.max())
        ok = None
        for j in range(7, -1, -1):
            if (lo >> 8 * j) & 0xff != (hi >> 8 * j) & 0xff:
                break
            m = buf[4 + j:n + 4 + j] == (lo >> 8 * j) & 0xff
            ok = m if ok is None else ok & m
        cand = np.flatnonzero(ok) if ok is not None else np.arange(n)
        cand = cand[self.known[buf[cand]] & (buf[cand + 1] == 0) &
                    (buf[cand + 2] == 0) & (buf[cand + 3] == 0)]
        # inside a packet's content, its timestamp within the packet's
        k = np.searchsorted(heads, cand, "right") - 1
        inside = (k >= 0) & (cand < ends[np.maximum(k, 0)])
        cand, k = cand[inside], k[inside]
        ts = sliding_window_view(buf, 8)[cand + 4].view("<u8").reshape(-1)
        good = (ts >= begin_ts[k]) & (ts <= end_ts[k])
        cand, k = cand[good], k[good]
        # each candidate's end, by its class's layout
        stop = np.empty(len(cand), np.int64)
        ids = buf[cand]
        for cid in np.unique(ids).tolist():
            m = ids == cid
            stop[m] = self.layouts[cid].walk(buf, nul, cand[m])[0]
        # the tiling: each packet's first record at its head, each end
        # the next start (within the packet) or the packet's end
        nxt = np.empty(len(cand), np.int64)
        nxt[:-1] = cand[1:]
        last = np.ones(len(cand), bool)
        last[:-1] = k[1:] != k[:-1]
        nxt[last] = ends[k[last]]
        bad = stop != nxt
        first = np.ones(len(cand), bool)
        first[1:] = k[1:] != k[:-1]
        head_ok = np.zeros(len(heads), bool)
        head_ok[k[first]] = cand[first] == heads[k[first]]
        if not bad.any() and head_ok.all():
            return cand
        # packets to walk along their true records' ends
        redo = set(k[bad].tolist()) | set(np.flatnonzero(~head_ok).tolist())
        keep = ~np.isin(k, list(redo))
        out = [cand[keep]]
        at = {int(c): int(e) for c, e in zip(cand[~keep], stop[~keep])}
        for j in sorted(redo):
            pos, chain = int(heads[j]), []
            while pos < ends[j]:
                if pos not in at:
                    # not a candidate (its timestamp outside its packet's
                    # begin and end): a record all the same if its class
                    # is known
                    cid = int(buf[pos]) if not buf[pos + 1:pos + 4].any() \
                        else -1
                    if cid not in self.layouts:
                        raise UserError("%s: corrupt event at byte %d" % (
                            path, base + pos))
                    at[pos] = int(self.layouts[cid].walk(
                        buf, nul, np.array([pos]))[0][0])
                chain.append(pos)
                pos = at[pos]
            if pos != ends[j]:
                raise UserError("%s: corrupt event at byte %d" % (
                    path, base + chain[-1]))
            out.append(np.array(chain, np.int64))
        return np.sort(np.concatenate(out))
