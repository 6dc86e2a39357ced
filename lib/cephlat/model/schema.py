"""The JSON reports' format: its version and JSON Schema
(report-schema.json, beside this file), and the one way a report becomes
a JSON line: "type" first, then "schema", the format's version."""
import functools
import json
import os

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "report-schema.json")


@functools.lru_cache(maxsize=None)
def schema():
    """The JSON Schema (a dict), read once; its $defs/version is the
    constant the "schema" keys hold."""
    with open(PATH) as f:
        doc = json.load(f)
    doc["$defs"]["version"] = {"const": doc["version"]}
    return doc


def version():
    """The format's version: every JSON line's "schema"."""
    return schema()["version"]


def json_line(obj):
    """Report `obj` (a dict with "type") as one line of JSON, stamped with
    the format's version (any "schema" it had is replaced)."""
    out = {"type": obj["type"], "schema": version()}
    out.update((k, v) for k, v in obj.items() if k not in out)
    return json.dumps(out) + "\n"
