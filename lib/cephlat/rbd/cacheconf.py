"""librbd's cache settings as the client was configured: what its
environment (CEPH_ARGS), its conf file ([global], [client],
[client.NAME]) and, where it has one, its admin socket (`config get`)
say. Recorded in the trace as "configured": advisory, for the process
only. The policy in effect per image is what the probes see librbd do
(the cache records): image and pool overrides (`rbd config image set`),
the monitors' config database and rados_conf_set calls of the
application reach librbd and none of these."""
import os
import shlex

from ..ceph import adminsock, librbd_cache
from ..errors import UserError


def _environ(pid):
    """The client's environment ({name: value}), or {}."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        k, eq, v = item.partition(b"=")
        if eq:
            out[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return out


def _norm(key):
    """`rbd cache policy`, `--rbd-cache-policy` -> rbd_cache_policy"""
    return key.strip().lstrip("-").replace(" ", "_").replace("-", "_")


def from_args(text):
    """CEPH_ARGS -> {setting: value} of librbd's cache settings
    (--name value and --name=value)."""
    out, words = {}, shlex.split(text or "")
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--"):
            k, eq, v = w.partition("=")
            k = _norm(k)
            if not eq and i + 1 < len(words) and \
                    not words[i + 1].startswith("--"):
                v, i = words[i + 1], i + 1
            if k in librbd_cache.SETTINGS:
                out[k] = v if (eq or v) else "true"
        i += 1
    return out


def from_conf(text, name="client.admin"):
    """A ceph.conf's text -> {setting: value} as a client `name` reads it:
    [global], then [client], then [client.NAME] (the later wins)."""
    sections, cur = {}, None
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        if line.startswith("[") and line.endswith("]"):
            cur = sections.setdefault(line[1:-1].strip(), {})
        elif "=" in line and cur is not None:
            k, _, v = line.partition("=")
            if _norm(k) in librbd_cache.SETTINGS:
                cur[_norm(k)] = v.strip()
    out = {}
    for s in ("global", "client", name):
        out.update(sections.get(s, {}))
    return out


def _conf_path(pid, env, args):
    """The conf file the client reads (-c/--conf in CEPH_ARGS, CEPH_CONF,
    else /etc/ceph/ceph.conf), under its root."""
    words = shlex.split(args or "")
    path = env.get("CEPH_CONF") or "/etc/ceph/ceph.conf"
    for i, w in enumerate(words):
        if w in ("-c", "--conf") and i + 1 < len(words):
            path = words[i + 1]
        elif w.startswith("--conf="):
            path = w.split("=", 1)[1]
    return os.path.join("/proc/%d/root" % pid, path.lstrip("/"))


def _client_name(args):
    """The client's name from CEPH_ARGS (-n/--name, -i/--id), else
    client.admin."""
    words, name = shlex.split(args or ""), "client.admin"
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else None
        if w in ("-n", "--name") and nxt:
            name = nxt
        elif w in ("-i", "--id") and nxt:
            name = "client." + nxt
        elif w.startswith("--name="):
            name = w.split("=", 1)[1]
        elif w.startswith("--id="):
            name = "client." + w.split("=", 1)[1]
    return name


def configured(pid):
    """{"rbd_cache_policy": {"value", "source"}, ...} for each setting
    something names (sources later in this order win: the conf file,
    CEPH_ARGS, the admin socket)."""
    env = _environ(pid)
    args = env.get("CEPH_ARGS", "")
    out, name = {}, _client_name(args)
    path = _conf_path(pid, env, args)
    try:
        with open(path) as f:
            for k, v in from_conf(f.read(), name).items():
                out[k] = {"value": v, "source": "conf file %s" % path}
    except OSError:
        pass
    for k, v in from_args(args).items():
        out[k] = {"value": v, "source": "CEPH_ARGS"}
    out.update(_from_socket(pid))
    return out


def _from_socket(pid):
    """The settings as the client's admin socket says (clients have none
    unless admin_socket is set for them)."""
    sock = adminsock.find_osd_socket(pid)
    if not sock:
        return {}
    out = {}
    for k in librbd_cache.SETTINGS:
        try:
            v = adminsock.command(sock, "config get", timeout=2.0, var=k)
        except (UserError, ValueError):
            return out
        if isinstance(v, dict) and k in v:
            out[k] = {"value": str(v[k]), "source": "admin socket %s" % sock}
    return out


def env_fields(conf):
    """configured() as trace env fields: cache_configured_<setting> =
    "value (source)" (the env holds strings and numbers only)."""
    return {"cache_configured_" + k: "%s (%s)" % (d["value"], d["source"])
            for k, d in conf.items()}


def from_env(env):
    """The trace env's configured settings -> {setting: "value (source)"}"""
    p = "cache_configured_"
    return {k[len(p):]: str(v) for k, v in env.items() if k.startswith(p)}
