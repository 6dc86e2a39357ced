"""The messenger's throttles of an OSD, from its own perf counters.

Before an op reaches OSD::enqueue_op (where op_total starts), its message
passes the client messenger's throttles: `osd_client_messages` (at most
osd_client_message_cap messages in the OSD), `osd_client_bytes`
(osd_client_message_size_cap) and the dispatch throttle
(`msgr_dispatch_throttler-client`, ms_dispatch_throttle_bytes). A
connection whose next message does not fit stops reading and retries
(every 1 ms in the async messenger: each failed try is one
`get_or_fail_fail`), so a full throttle shows in the messenger stages
(throttle_wait: the head-of-line message) and, for the messages behind it
still unread in the socket, nowhere the OSD can see.

read() takes the counters of those throttles from one `perf dump`:
{name: {"setting" (of its cap), "max", "val", "get", "fails", "waits",
"wait_s"}}, cumulative.
"""
from . import adminsock
from ..errors import UserError

# perf dump sections (without "throttle-") -> the setting of their cap
THROTTLES = {
    "osd_client_messages": "osd_client_message_cap",
    "osd_client_bytes": "osd_client_message_size_cap",
    "msgr_dispatch_throttler-client": "ms_dispatch_throttle_bytes",
}


def from_dump(dump):
    """The messenger throttles' counters in a perf dump (dict)."""
    out = {}
    for name in THROTTLES:
        sec = dump.get("throttle-" + name)
        if not isinstance(sec, dict):
            continue
        wait = sec.get("wait") or {}
        out[name] = {"setting": THROTTLES[name],
                     "max": sec.get("max", 0), "val": sec.get("val", 0),
                     "get": sec.get("get", 0),
                     "fails": sec.get("get_or_fail_fail", 0),
                     "waits": wait.get("avgcount", 0),
                     "wait_s": wait.get("sum", 0.0)}
    return out


def read(pid, osd_id=None):
    """The counters now, or None when the admin socket does not answer
    (not an OSD, or it is going away)."""
    path = adminsock.find_osd_socket(pid, osd_id)
    if not path:
        return None
    try:
        return from_dump(adminsock.command(path, "perf dump", timeout=5.0))
    except (UserError, ValueError):
        return None
