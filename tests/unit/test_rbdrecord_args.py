"""rbdrecord's command line: help with examples, one-line usage errors,
importable without side effects, what each mode is handed; the fio
conversion's concurrency; a recording's target."""
import importlib.util
import os
import subprocess
import sys
import time

import pytest

from conftest import PYTHON, REPO, assert_one_line_error

RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")


def test_help_has_examples():
    p = subprocess.run([PYTHON, RBDRECORD, "--help"], capture_output=True,
                       text=True)
    assert p.returncode == 0
    assert "examples:" in p.stdout and "--to-fio trace -o replay" in p.stdout
    assert "3 (--lttng)" in p.stdout
    assert all(len(line) <= 80 for line in p.stdout.splitlines())


def test_usage_errors_are_one_line():
    p = subprocess.run([PYTHON, RBDRECORD, "-p", "x"], capture_output=True,
                       text=True)
    assert_one_line_error(p, "rbdrecord: ", "not a pid", status=2)
    p = subprocess.run([PYTHON, RBDRECORD, "--summary", "a", "--to-fio",
                        "b"], capture_output=True, text=True)
    assert_one_line_error(p, "not allowed with argument", status=2)
    p = subprocess.run([PYTHON, RBDRECORD, "--to-fio", "/nonexistent"],
                       capture_output=True, text=True)
    assert_one_line_error(p, "needs -o DIR", status=2)


def test_tool_imports_without_side_effects():
    before = list(sys.path)
    spec = importlib.util.spec_from_file_location("rbdrecord_tool", RBDRECORD)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert sys.path == before and callable(mod.main)


def test_most_in_flight():
    from cephlat.rbd.fio import _max_in_flight
    from cephlat.rbd.reader import Request
    def req(a, b):
        r = Request("read", 1, 0, 4096, 1, a)
        r.done = b
        return r
    # 0-10, 5-15, 6-7, then 20-30: at most three at once
    assert _max_in_flight([req(0, 10), req(5, 15), req(6, 7),
                           req(20, 30)]) == 3
    # back to back: one ends when the next starts
    assert _max_in_flight([req(0, 10), req(10, 20)]) == 1


def test_command_runs_only_when_the_probes_are_in(tmp_path):
    """-- COMMAND waits for go(); cancelled (the recording could not
    start) it never runs."""
    from cephlat.rbd.record import Child
    ran = tmp_path / "ran"
    c = Child(["touch", str(ran)])
    c.cancel()
    assert c.poll() == 127 and not ran.exists()
    c = Child(["touch", str(ran)])
    c.go()
    os.waitpid(c.pid, 0)
    assert ran.exists()


def test_modes_get_values_not_the_namespace(tmp_path, monkeypatch):
    """cli/rbdrecord.py hands rbd/ a RecordTarget or a FioJob and plain
    values, with the command line's defaults."""
    from cephlat.cli import rbdrecord
    from cephlat.rbd import fio, lttng, record
    calls = []
    monkeypatch.setattr(record, "record_ebpf",
                        lambda *a: calls.append(("ebpf",) + a) or 0)
    monkeypatch.setattr(lttng, "record_lttng",
                        lambda *a: calls.append(("lttng",) + a) or 0)
    monkeypatch.setattr(fio, "to_fio",
                        lambda *a: calls.append(("fio",) + a) or 0)
    out = str(tmp_path / "t")

    def run(argv):
        assert rbdrecord.main(argv) == 0
        return calls.pop()[1:-1]          # without err

    assert run(["--ebpf", "-o", out, "-p", "42", "-d", "3"]) == (
        record.RecordTarget(pid=42), out, 3.0)
    assert run(["--lttng", "--no-checks", "-o", out, "--", "fio", "j"]) == (
        record.RecordTarget(command=("fio", "j")), out, None, True)
    assert run(["--to-fio", "tr", "-o", out, "--no-timing"]) == (
        fio.FioJob(trace="tr", output=out, client="admin",
                   no_timing=True),)


def _gone_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_lttng_runs_for_the_command_or_while_the_process_lives():
    """At most the duration for a command; not at all for a process that
    has exited."""
    from cephlat.rbd.lttng import _run_for
    from cephlat.rbd.record import RecordTarget
    t0 = time.monotonic()
    _run_for(RecordTarget(command=("sleep", "10")), 0.2)
    _run_for(RecordTarget(pid=_gone_pid()), None)
    assert time.monotonic() - t0 < 5


def test_a_target_process_that_is_gone():
    from cephlat.errors import UserError
    from cephlat.rbd.record import RecordTarget, _client
    pid = _gone_pid()
    with pytest.raises(UserError, match="^no such process: %d$" % pid):
        _client(RecordTarget(pid=pid))
