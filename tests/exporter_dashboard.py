"""The Grafana dashboard's PromQL (deploy/grafana/osdstage.json), as the
tests need it: every query of every panel, with Grafana's variables
replaced so that Prometheus itself (or promtool) can run it.

    from exporter_dashboard import dashboard_queries
    for expr in dashboard_queries(DASHBOARD): prom.query(expr)

Also the small PromQL reader the unit test uses to check each query
against the metric contract (lib/cephlat/exporter/families.py): which
metric names a query selects, the label matchers of each selector, and
the labels its aggregations and vector matches name.
"""
import json
import re

# Grafana's variables -> concrete PromQL, as Grafana would send them with
# "All" selected ($osd, multi with allValue ".+", is only used in =~) and a
# concrete stage that every lab run measures.
SUBSTITUTIONS = {
    "__rate_interval": "1m",
    "__interval": "30s",
    "__interval_ms": "30000",
    "__range": "5m",
    "__range_s": "300",
    "__range_ms": "300000",
    "osd": ".+",
    "stage": "op_total",
}
# Grafana's $__ and ${...} / [[...]] forms
_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")


def load(path):
    with open(path) as f:
        return json.load(f)


def panels(dashboard):
    """Every panel, those nested in collapsed rows too (not the rows)."""
    out = []
    for p in dashboard.get("panels", []):
        if p.get("type") == "row":
            out.extend(p.get("panels", []))
        else:
            out.append(p)
    return out


def raw_queries(dashboard):
    """[(panel title, refId, expr)] of every target with an expr, as
    written in the dashboard (with Grafana's variables)."""
    return [(p.get("title", ""), t.get("refId", ""), t["expr"])
            for p in panels(dashboard) for t in p.get("targets", [])
            if t.get("expr")]


def substitute(expr, values=None):
    """`expr` with Grafana's variables replaced (SUBSTITUTIONS, updated by
    `values`); an unknown variable is a KeyError (so a new one is noticed)."""
    table = dict(SUBSTITUTIONS, **(values or {}))

    def one(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return table[name]
    return _VAR.sub(one, expr)


def dashboard_queries(path, values=None):
    """Every panel query's PromQL of the dashboard at `path`, with
    Grafana's variables substituted ($__rate_interval -> 1m, $osd -> .+,
    $stage -> op_total, ...; `values` overrides), in panel order."""
    return [substitute(e, values) for _, _, e in raw_queries(load(path))]


# --- a small PromQL reader (enough for the checks, not a parser) -----------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
# identifiers that are PromQL's own, not metric names
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "le", "inf", "nan",
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk",
    "bottomk", "quantile", "count_values", "group",
    "rate", "irate", "increase", "delta", "idelta", "deriv", "resets",
    "changes", "histogram_quantile", "abs", "absent", "ceil", "floor",
    "round", "scalar", "vector", "time", "timestamp", "clamp", "clamp_min",
    "clamp_max", "label_replace", "label_join", "sort", "sort_desc",
    "sum_over_time", "avg_over_time", "max_over_time", "min_over_time",
    "count_over_time", "last_over_time", "quantile_over_time",
    "predict_linear", "holt_winters", "exp", "ln", "log2", "log10", "sqrt",
}
_SELECTOR = re.compile(r"(?<![\w.])([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})?")
_MATCHER = re.compile(r'\s*([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*(S\d+)\s*,?')
_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def _mask_strings(expr):
    """expr with string literals replaced by S0, S1, ...; and the strings."""
    strings = []

    def keep(m):
        strings.append(m.group(0)[1:-1])
        return "S%d" % (len(strings) - 1)
    return _STRING.sub(keep, expr), strings


def selectors(expr):
    """[(metric, [(label, op, value)])] of every vector selector in expr
    (a selector without a metric name, {__name__=...}, is not supported:
    the dashboard names its metrics)."""
    masked, strings = _mask_strings(expr)
    # drop grouping clauses and range/offset durations first
    masked = _GROUPING.sub(" ", masked)
    masked = re.sub(r"\[[^\]]*\]", " ", masked)
    out = []
    for m in _SELECTOR.finditer(masked):
        name, body = m.group(1), m.group(2)
        if name.lower() in KEYWORDS or re.fullmatch(r"S\d+", name):
            continue
        rest = masked[m.end():].lstrip()
        if rest.startswith("(") and not body:
            continue                 # a function call
        matchers = []
        if body:
            inner = body[1:-1]
            pos = 0
            while pos < len(inner):
                mm = _MATCHER.match(inner, pos)
                if not mm:
                    if inner[pos:].strip():
                        raise ValueError("cannot read the matchers %r in %r"
                                         % (body, expr))
                    break
                matchers.append((mm.group(1), mm.group(2),
                                 strings[int(mm.group(3)[1:])]))
                pos = mm.end()
        out.append((name, matchers))
    return out


def grouping_labels(expr):
    """[(clause, [labels])] of every by/without/on/ignoring/group_left/
    group_right clause."""
    masked, _ = _mask_strings(expr)
    return [(m.group(1), [x.strip() for x in m.group(2).split(",")
                          if x.strip()])
            for m in _GROUPING.finditer(masked)]


def family_of(metric, by_name):
    """(family, suffix) that `metric` belongs to: a histogram's _bucket,
    _sum and _count, any other family by its own name; (None, None)."""
    if metric in by_name:
        return by_name[metric], ""
    for suffix in ("_bucket", "_sum", "_count"):
        if metric.endswith(suffix):
            f = by_name.get(metric[:-len(suffix)])
            if f is not None and f.type == "histogram":
                return f, suffix
    return None, None


def label_values_queries(dashboard):
    """[(variable name, metric, label)] of the query variables written as
    Grafana's label_values(METRIC, LABEL)."""
    out = []
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\(\s*([\w:]+)\s*,\s*(\w+)\s*\)\s*",
                         q or "")
        out.append((v["name"], m.group(1) if m else None,
                    m.group(2) if m else q))
    return out


def doc_queries(man_path, example_path):
    """The PromQL the docs show: the man page's EXAMPLES blocks (.nf/.fi,
    continuation lines joined) that are not shell commands, and the
    example file's "PromQL: " lines."""
    with open(man_path) as f:
        man = f.read()
    examples = man.split(".SH EXAMPLES", 1)[1].split("\n.SH ", 1)[0]
    out = []
    for block in re.findall(r"^\.nf\n(.*?)^\.fi$", examples, re.S | re.M):
        text = block.replace("\\-", "-")
        if re.match(r"\s*(osdstage[-_]exporter|curl)\b", text):
            continue
        out.append(" ".join(text.split()))
    with open(example_path) as f:
        out += [line.split("PromQL: ", 1)[1].strip() for line in f
                if line.startswith("PromQL: ")]
    return out
