"""The reports' JSON Schema (lib/cephlat/model/report-schema.json): a
valid schema, printed by --json-schema, that accepts the reports the tools
print (every osdstage -j run through run_tool is checked: conftest's
check_reports) and rejects what breaks the format."""
import copy
import json
import os

import jsonschema
import pytest

from cephlat.model.schema import json_line, schema, version

from conftest import OSDSTAGE, REPO, report_errors, run_tool

FIX = os.path.join(REPO, "tests", "fixtures")


def _fixture_reports(name):
    with open(os.path.join(FIX, "expected", name)) as f:
        return [json.loads(l) for l in f]


def test_the_schema_is_a_valid_json_schema_with_an_integer_version():
    jsonschema.Draft202012Validator.check_schema(schema())
    assert isinstance(version(), int) and version() >= 1
    # every type the tools print has its definition
    for kind in ("interval", "window", "host", "op", "end_to_end", "list",
                 "rbd_summary"):
        assert kind in schema()["$defs"]
        assert {"$ref": "#/$defs/" + kind} in schema()["oneOf"]


def test_json_schema_option_prints_it():
    p = run_tool([OSDSTAGE, "--json-schema"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == schema()


def test_a_json_line_starts_with_its_type_and_the_version():
    line = json_line({"osds": [], "type": "list", "schema": 0})
    assert line.endswith("\n") and line.count("\n") == 1
    obj = json.loads(line)
    assert list(obj) == ["type", "schema", "osds"]
    assert obj["schema"] == version()


@pytest.mark.parametrize("name", ["lab.replay.jsonl", "lab.slowest.jsonl",
                                  "shardq.replay.jsonl", "lab.write.jsonl"])
def test_the_fixtures_reports_are_valid(name):
    for rec in _fixture_reports(name):
        assert report_errors(rec) == []


def test_an_op_story_is_valid():
    with open(os.path.join(FIX, "story-3hosts.json")) as f:
        story = json.load(f)
    assert report_errors(story) == []


def _broken():
    """(what, report with it broken) for one interval and one window."""
    rec = _fixture_reports("lab.replay.jsonl")[0]
    win = _fixture_reports("lab.slowest.jsonl")[0]
    cases = []

    def case(what, base, fn):
        r = copy.deepcopy(base)
        fn(r)
        cases.append((what, r))
    case("an undeclared key", rec, lambda r: r.update(surprise=1))
    case("another version", rec, lambda r: r.update(schema=version() + 1))
    case("a stage without its p99", rec,
         lambda r: next(iter(r["stages"].values())).pop("p99_us"))
    case("a count that is not an integer", rec,
         lambda r: next(iter(r["stages"].values())).update(count=1.5))
    case("a window's key in an interval", rec,
         lambda r: r.update(window={"from_s": 0, "to_s": 1}))
    case("a missing required key", rec, lambda r: r.pop("lost"))
    case("an op row's undeclared key", win,
         lambda r: r["slowest"][0].update(surprise=1))
    case("an unknown type", rec, lambda r: r.update(type="intervals"))
    return cases


@pytest.mark.parametrize("what,rec", _broken(),
                         ids=[w for w, _ in _broken()])
def test_a_broken_report_is_refused(what, rec):
    assert report_errors(rec), what
