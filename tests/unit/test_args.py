"""Argument parsing of osdstage.py (no root needed)."""
import subprocess

import pytest

from cephlat.cli import osdstage
from cephlat.errors import UserError

from conftest import OSDSTAGE, PYTHON, assert_one_line_error


def test_interval_and_count():
    a = osdstage.parse_args(["-p", "42", "5", "3"])
    assert (a.pid, a.interval, a.count) == ([42], 5.0, 3)
    assert a.json is False and a.milliseconds is False


@pytest.mark.parametrize("argv,pid,osd", [
    (["-p", "12,34"], [12, 34], None),
    (["--osd", "all"], None, "all"),
    (["--osd", "0,2"], None, ["0", "2"]),
    (["--osd", "1"], None, ["1"]),
    (["-r", "cap", "--osd", "2"], None, ["2"]),
])
def test_several_targets(argv, pid, osd):
    a = osdstage.parse_args(argv)
    assert (a.pid, a.osd) == (pid, osd)


@pytest.mark.parametrize("argv,fragment", [
    ([], "name what to trace: -p PID, --osd ID|all, --list or -r CAPTURE"),
    (["-p", "1", "--osd", "0"], "--osd and -p name the target twice"),
    (["--list", "--osd", "0"], "--osd and --list name the target twice"),
])
def test_target_conflicts(argv, fragment):
    with pytest.raises(UserError) as e:
        osdstage.run(osdstage.parse_args(argv))
    assert fragment in str(e.value) and e.value.status == 2


def test_defaults_one_report_at_ctrl_c():
    a = osdstage.parse_args(["-p", "42"])
    assert a.interval is None and a.count is None and a.stages is None


def test_flags():
    a = osdstage.parse_args(["-p", "7", "-m", "-T", "-j", "-S",
                             "do_op,bluestore_read", "0.5"])
    assert a.milliseconds and a.timestamp and a.json
    assert a.stages == ["do_op", "bluestore_read"] and a.interval == 0.5


@pytest.mark.parametrize("argv,fragment", [
    (["-p", "1", "--list"], "not allowed with argument"),
    (["-p", "abc"], "not a pid"),
    (["-p", "1,x"], "not a pid"),
    (["--osd", "x"], "not an OSD id: 'x'"),
    (["--osd", "0,all"], "not an OSD id: 'all'"),
    (["-p", "-3"], "not a pid"),
    (["-p", "1", "0"], "must be > 0"),
    (["-p", "1", "1", "x"], "not an integer"),
    (["-p", "1", "-S", ","], "no stage named"),
])
def test_bad_arguments_raise_usererror(argv, fragment):
    with pytest.raises(UserError) as e:
        osdstage.parse_args(argv)
    assert fragment in str(e.value) and e.value.status == 2


def test_bad_argument_cli_one_line():
    p = subprocess.run([PYTHON, OSDSTAGE, "-p", "1", "-S", "nope"],
                       capture_output=True, text=True)
    assert_one_line_error(p, "osdstage: ", "unknown stage nope", status=2)


def test_help_has_examples():
    p = subprocess.run([PYTHON, OSDSTAGE, "--help"], capture_output=True,
                       text=True)
    assert p.returncode == 0
    assert "examples:" in p.stdout and "osdstage.py -p 1234 -m 10 1" in p.stdout
    assert all(len(l) <= 80 for l in p.stdout.splitlines())


def test_tool_imports_without_side_effects():
    """tools/osdstage.py: importing it runs nothing and changes no path."""
    import importlib.util
    import sys
    from conftest import OSDSTAGE
    before = list(sys.path)
    spec = importlib.util.spec_from_file_location("osdstage_tool", OSDSTAGE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert sys.path == before
    assert callable(mod.main)
    assert mod.main(["-p", "1", "-S", "nope"]) == 2


@pytest.mark.parametrize("argv,fragment", [
    (["-p", "1", "--slowest", "3"], "--slowest reads a capture: use it with "
                                    "-r CAPTURE"),
    (["-p", "1", "--from", "2"], "--from reads a capture"),
    (["-r", "x", "-w", "y"], "use one of them"),
    (["-p", "1", "-S", "offcpu"], "kernel stages are always traced"),
    (["-p", "1", "--lean", "-S", "do_op"], "--lean traces a fixed set of "
                                           "stages from one probe, with "
                                           "nothing to record: drop -S"),
    (["-p", "1", "--lean", "-w", "x"], "nothing to record: drop -w"),
    (["-p", "1", "--lean", "--max-overhead", "1"], "drop --max-overhead"),
    (["-p", "1", "--lean", "--probes", "f"], "drop --probes"),
    (["-p", "1", "--lean", "--behind"], "--behind splits the kernel's "
                                        "run-queue waits: not with --lean"),
    (["-p", "1", "--no-kernel", "--behind"], "not with --no-kernel"),
    (["-r", "x", "--behind"], "--behind is for live tracing"),
])
def test_capture_options_in_the_wrong_mode(argv, fragment, capsys):
    from cephlat.cli.osdstage import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1


def test_time_arguments():
    a = osdstage.parse_args(["-r", "c", "--from", "2.5", "--to", "09:30:01.25"])
    assert a.t_from == ("rel", 2.5)
    assert a.t_to == ("wall", 9 * 3600 + 30 * 60 + 1.25)
    for bad in ("12:xx:00", "-1", "soon"):
        with pytest.raises(UserError):
            osdstage.parse_args(["-r", "c", "--from", bad])


def test_want_takes_the_options_of_its_fields_only():
    """engine/session.Want: what osdstage.py and the exporter ask to
    trace, through one set-up (no stand-in argparse namespaces), made
    from osdstage.py's options by cli/live.py's want_of."""
    import argparse
    from cephlat.cli.live import want_of
    from cephlat.engine.session import Want
    w = want_of(argparse.Namespace(pid=[1, 2], osd=None, json=True,
                                   stages=["queue_wait"],
                                   release="18.2", strict=True,
                                   no_kernel=False, max_ops=1024,
                                   probes=None, ring_mb=None))
    assert (w.pid, w.stages, w.release, w.strict, w.max_ops) == \
        ([1, 2], ["queue_wait"], "18.2", True, 1024)
    assert w.ring_mb is None and w.ring_mb_per_target == 0
    assert not hasattr(w, "json")
    with pytest.raises(TypeError):
        Want(pids=[1])
