"""The records of probes/rbdrecord.bpf.c, decoded into trace events.

What the records are comes from the build, never from a copy: the record
kinds (enum rbd_ev), the ops (enum rbd_op) and every struct's layout, as
build/rbdrecord.abi.json has them (make writes it from the object's
DWARF; probes/rbdrecord.h is the one source). The struct.Struct formats
are built once, when a Decoder is made.
"""
import struct

from . import events
from ..ceph import objecter
from ..model.sample import reqid_name

_SCALARS = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q",
            "s8": "b", "s16": "h", "s32": "i", "s64": "q"}
# lib/native/recorder.c's raw drain: u32 size, 4 bytes, the record, padded
# to 8 bytes
_SIZE = struct.Struct("<I")


def _flatten(abi, name, prefix=""):
    """struct `name` as [(value name or None, struct format, size)]:
    scalars, char arrays (bytes), nested structs' members as
    "member.inner"; anything else (and gaps) as padding, named None."""
    s = abi.struct(name)
    items, pos = [], 0
    for m in s.members:
        if m["offset"] > pos:
            items.append((None, "%dx" % (m["offset"] - pos),
                          m["offset"] - pos))
        if m["kind"] in _SCALARS:
            items.append((prefix + m["name"], _SCALARS[m["kind"]],
                          m["size"]))
        elif m["kind"] == "struct":
            items += _flatten(abi, m["type"].split(None, 1)[-1],
                              prefix + m["name"] + ".")
        elif m["kind"] == "array" and m["type"].startswith("char["):
            items.append((prefix + m["name"], "%ds" % m["size"], m["size"]))
        else:
            items.append((None, "%dx" % m["size"], m["size"]))
        pos = m["offset"] + m["size"]
    if s.size > pos:
        items.append((None, "%dx" % (s.size - pos), s.size - pos))
    return items


class Layout:
    """One struct of probes/rbdrecord.h, flattened: its values by name
    ("h.ts", "img.name", "op")."""

    def __init__(self, abi, name):
        self.name = name
        self._items = _flatten(abi, name)
        self.names = [n for n, _, _ in self._items if n]
        self.strings = {n for n, f, _ in self._items if n and f[-1] == "s"}
        self.size = sum(size for _, _, size in self._items)
        if self.size != abi.struct(name).size:
            raise ValueError("%s: %d bytes decoded of %d" % (
                name, self.size, abi.struct(name).size))

    def _struct(self, names):
        return struct.Struct("<" + "".join(
            f if n in names else "%dx" % size for n, f, size in self._items))

    def reader(self, *names):
        """(data, offset) -> the tuple of the values `names` (in the
        struct's order): one struct.Struct that skips the rest."""
        if list(names) != [n for n in self.names if n in names]:
            raise ValueError("%s: not members in order: %s" % (
                self.name, names))
        return self._struct(names).unpack_from

    def pack(self, **values):
        """The record's bytes (the given values, zeros elsewhere)."""
        unknown = set(values) - set(self.names)
        if unknown:
            raise KeyError("%s has no %s" % (self.name, unknown.pop()))
        return self._struct(self.names).pack(*[
            values.get(n, b"" if n in self.strings else 0)
            for n in self.names])


def ops(abi):
    """The labels of enum rbd_op, by value: ["read", "read2", ...]."""
    return abi.labels("rbd_op")[:abi.enum("rbd_op")["RBD_OP__COUNT"]]


def _cstr(b):
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


class Decoder:
    """Raw records -> (ts, class name, context, values) in trace order."""

    def __init__(self, pid, abi):
        self.pid = pid
        self.images = {}        # imagectx -> (name, snap, read_only)
        self.pending = {}       # tid -> op of its aio call in progress
        self.ops = ops(abi)
        hdr, opn, close, aio, done, osdop, cache = (
            Layout(abi, n) for n in (
                "rbd_hdr", "rbd_open_rec", "rbd_close_rec", "rbd_aio_rec",
                "rbd_complete_rec", "rbd_osdop_rec", "rbd_cache_rec"))
        self.states = abi.labels("rbd_cache_state")
        self._cache_v = cache.reader(
            "completion", "aio_comp", "imagectx", "cache", "object_no", "off",
            "len", "tid", "in_flight", "max_dirty", "init_max_dirty", "r",
            "op_flags", "state")
        self._hdr = hdr.reader("ev", "tid", "ts", "pthread_id")
        self._open_v = opn.reader("enter_ts", "imagectx", "retval",
                                  "img.name", "img.snap", "img.pool",
                                  "img.read_only")
        self._close_v = close.reader("imagectx", "retval")
        self._aio_v = aio.reader("imagectx", "off", "len", "data_len", "buf",
                                 "completion", "op_flags", "op")
        self._aio_ret = aio.reader("retval")
        self._done_v = done.reader("completion", "rval")
        self._osdop_v = osdop.reader("client", "tid", "pool", "seed", "osd",
                                     "inc", "flags", "attempts", "oid_len",
                                     "ext_off", "ext_len", "nops",
                                     "first_op", "oid")
        ev = abi.enum("rbd_ev")
        self._by_ev = {
            ev["RBD_OPEN_IMAGE"]: self._open,
            ev["RBD_CLOSE_IMAGE_ENTER"]: self._close_enter,
            ev["RBD_CLOSE_IMAGE_EXIT"]: self._close_exit,
            ev["RBD_AIO_ENTER"]: self._aio,
            ev["RBD_AIO_EXIT"]: self._aio_exit,
            ev["RBD_AIO_COMPLETE"]: self._complete,
            ev["RBD_OSD_OP_SEND"]: self._osdop_send,
            ev["RBD_OSD_OP_REPLY"]: self._osdop("rbdrecord:osd_op_reply"),
            ev["RBD_OSD_OP_DONE"]: self._osdop("rbdrecord:osd_op_done"),
            ev["RBD_AIO_RELEASE"]: self._release,
            ev["RBD_FLUSH_ENTER"]: self._flush_enter,
            ev["RBD_FLUSH_EXIT"]: self._flush_exit,
            ev["RBD_CACHE_WRITE"]: self._cache_write,
            ev["RBD_CACHE_DONE"]: self._cache_done,
        }

    def image(self, ictx):
        return self.images.get(ictx) or ("image-%x" % ictx, "", 0)

    def decode(self, data):
        out = []
        pos, n = 0, len(data)
        hdr, by_ev, pid = self._hdr, self._by_ev, self.pid
        while pos + 8 <= n:
            (size,) = _SIZE.unpack_from(data, pos)
            rec = pos + 8
            pos = rec + (size + 7) // 8 * 8
            ev, tid, ts, pth = hdr(data, rec)
            handle = by_ev.get(ev)
            if handle:
                handle(out, data, rec, ts, (pth, tid, pid))
        return out

    def _open(self, out, data, rec, ts, ctx):
        enter_ts, ictx, ret, name, snap, pool, ro = self._open_v(data, rec)
        name, snap, pool = _cstr(name), _cstr(snap), _cstr(pool)
        if ret == 0:
            self.images[ictx] = (name, snap, ro)
        out.append((enter_ts, "librbd:open_image_enter", ctx,
                    (ictx, name, "", snap, ro)))
        out.append((ts, "librbd:open_image_exit", ctx, (ret,)))
        if ret == 0:
            out.append((ts, "rbdrecord:image_pool", ctx, (ictx, pool)))

    def _close_enter(self, out, data, rec, ts, ctx):
        ictx, _ = self._close_v(data, rec)
        out.append((ts, "librbd:close_image_enter", ctx,
                    (ictx, self.image(ictx)[0], "")))

    def _close_exit(self, out, data, rec, ts, ctx):
        _, ret = self._close_v(data, rec)
        out.append((ts, "librbd:close_image_exit", ctx, (ret,)))

    def _aio(self, out, data, rec, ts, ctx):
        ictx, off, length, data_len, buf, comp, flags, op = \
            self._aio_v(data, rec)
        op = self.ops[op] if op < len(self.ops) else "read"
        self.pending[ctx[1]] = op
        name, snap, ro = self.image(ictx)
        img = (ictx, name, snap, ro)
        if op in ("read", "read2"):
            vals = img + (off, length, comp) + ((flags,) if op == "read2"
                                                else ())
        elif op in ("write", "write2"):
            vals = img + (off, length, buf, int(buf == 0), length, comp) + \
                ((flags,) if op == "write2" else ())
        elif op == "discard":
            vals = img + (off, length, comp)
        elif op == "flush":
            vals = img + (comp,)
        elif op == "writesame":
            vals = img + (off, length, data_len, buf, int(buf == 0),
                          data_len, comp, flags)
        else:
            vals = img + (off, length, comp, flags)
        out.append((ts, events.ENTER[op], ctx, vals))

    def _aio_exit(self, out, data, rec, ts, ctx):
        op = self.pending.pop(ctx[1], "read")
        out.append((ts, events.EXIT[op], ctx, self._aio_ret(data, rec)))

    def _complete(self, out, data, rec, ts, ctx):
        comp, rval = self._done_v(data, rec)
        out.append((ts, "librbd:aio_complete_enter", ctx, (comp, rval)))
        out.append((ts, "librbd:aio_complete_exit", ctx, ()))

    def _release(self, out, data, rec, ts, ctx):
        comp, _ = self._done_v(data, rec)
        out.append((ts, "rbdrecord:aio_release", ctx, (comp,)))

    def _flush_enter(self, out, data, rec, ts, ctx):
        ictx, _ = self._close_v(data, rec)
        name, snap, ro = self.image(ictx)
        out.append((ts, "librbd:flush_enter", ctx, (ictx, name, snap, ro)))

    def _flush_exit(self, out, data, rec, ts, ctx):
        _, ret = self._close_v(data, rec)
        out.append((ts, "librbd:flush_exit", ctx, (ret,)))

    def _cache_write(self, out, data, rec, ts, ctx):
        comp, aio, ictx, cache, no, off, ln, tid, inf, mx, imx, _, flags, \
            st = self._cache_v(data, rec)
        name = self.states[st] if st < len(self.states) else "0x%x" % st
        out.append((ts, "rbdrecord:cache_write", ctx, (
            comp, aio, ictx, cache, no, off, ln, tid, inf, mx, imx, flags,
            st, name)))

    def _cache_done(self, out, data, rec, ts, ctx):
        _, _, _, cache, no, off, ln, tid, inf, _, _, r, _, _ = \
            self._cache_v(data, rec)
        out.append((ts, "rbdrecord:cache_write_done", ctx, (
            cache, r, tid, no, off, ln, inf)))

    def _osdop_send(self, out, data, rec, ts, ctx):
        client, tid, pool, seed, osd, inc, flags, attempts, olen, eoff, \
            elen, nops, first, oid = self._osdop_v(data, rec)
        out.append((ts, "rbdrecord:osd_op_send", ctx, (
            reqid(client, inc, tid), client, inc, tid, osd, pool, seed,
            "%d.%x" % (pool, seed), _cstr(oid), olen, flags, attempts, nops,
            first, objecter.OSD_OP_LABELS.get(first, "0x%x" % first) if nops
            else "", eoff, elen)))

    def _osdop(self, name):
        def handle(out, data, rec, ts, ctx):
            client, tid, _, _, osd, inc = self._osdop_v(data, rec)[:6]
            out.append((ts, name, ctx, (reqid(client, inc, tid), client,
                                        inc, tid, osd)))
        return handle


def reqid(client, inc, tid):
    """The OSD's name of a client op: client.4161.0:11457."""
    return reqid_name(client, inc, tid)
