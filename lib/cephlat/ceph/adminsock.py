"""Ceph's admin socket, spoken directly (no `ceph` CLI start-up cost).

The protocol: send a JSON command followed by a NUL byte, receive a 4-byte
big-endian length and that many bytes of JSON. Used to read the OSD's own
perf counters at the edges of a traced window.
"""
import json
import os
import socket
import struct

from ..errors import UserError


def command(path, prefix, timeout=10.0, **kw):
    req = dict(kw, prefix=prefix)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(json.dumps(req).encode() + b"\0")
        hdr = _recv(s, 4)
        (n,) = struct.unpack(">I", hdr)
        body = _recv(s, n)
    except OSError as e:
        raise UserError("admin socket %s: %s" % (path, e.strerror or e))
    finally:
        s.close()
    return json.loads(body.decode("utf-8", "replace"))


def _recv(s, n):
    """Exactly n bytes (into one buffer: an OpTracker dump is tens of MB,
    and joining chunks one by one copied it over and over)."""
    buf = memoryview(bytearray(n))
    got = 0
    while got < n:
        k = s.recv_into(buf[got:])
        if not k:
            raise OSError("connection closed")
        got += k
    return buf.obj


def perf_dump(path):
    return command(path, "perf dump")


def find_osd_socket(pid, osd_id=None, run_dirs=("/var/run/ceph", "/run/ceph")):
    """The admin socket a ceph-osd process listens on: the unix sockets it
    has open, looked up in /proc/net/unix by inode."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    try:
        for fd in os.listdir(fd_dir):
            try:
                link = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return None
    try:
        with open("/proc/%d/net/unix" % pid) as f:
            next(f)
            for line in f:
                parts = line.split()
                if len(parts) >= 8 and parts[6] in inodes and \
                        parts[7].endswith(".asok"):
                    path = parts[7]
                    root = "/proc/%d/root" % pid
                    full = os.path.join(root, path.lstrip("/"))
                    return full if os.path.exists(full) else path
    except OSError:
        pass
    if osd_id is not None:
        for d in run_dirs:
            p = os.path.join(d, "ceph-osd.%s.asok" % osd_id)
            if os.path.exists(p):
                return p
    return None


def counter(dump, section, name):
    """A counter's value; for {avgcount, sum} latency counters, the pair."""
    v = dump.get(section, {}).get(name)
    if isinstance(v, dict):
        return v.get("avgcount", 0), v.get("sum", 0.0)
    return v
