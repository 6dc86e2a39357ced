"""One command-line contract for every tool (osdstage, rbdrecord,
osdstage_exporter): a usage error exits with status 2 and one line on
stderr prefixed with the tool's name, never a traceback; a live run's
options are refused with -r; --help needs neither numpy nor pyelftools,
and a missing module is one line naming its Debian package; a bad
capture is named with what is wrong with it, in words."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import OSDSTAGE, PYTHON, REPO, assert_one_line_error

from cephlat.cli import exporter, osdstage, rbdrecord

FIXTURE = os.path.join(REPO, "tests", "fixtures", "lab-v0.ctf")
RBDRECORD = os.path.join(REPO, "tools", "rbdrecord.py")
EXPORTER = os.path.join(REPO, "tools", "osdstage_exporter.py")
TOOLS = {"osdstage": OSDSTAGE, "rbdrecord": RBDRECORD,
         "osdstage-exporter": EXPORTER}


def _usage(main, tool, argv, capsys, *fragments):
    """main(argv) is a usage error: 2, one line on stderr naming the
    tool, nothing on stdout."""
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    assert "Traceback" not in err and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(tool + ": "), lines[0]
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


F = FIXTURE
OSDSTAGE_USAGE = [
    ([], "name what to trace"),
    (["-p", "1", "--slowest", "3"], "--slowest reads a capture"),
    (["-p", "1", "--from", "2"], "--from reads a capture"),
    (["-p", "1", "--clock-offset", "a=1ms"], "--clock-offset reads a capture"),
    (["-p", "1", "--timeline-ms", "5"], "--timeline-ms reads a capture"),
    (["-r", F, "-w", "x"], "-w records and -r reads"),
    (["-r", F, "--host-netns", "h1"], "--host-netns picks live OSDs"),
    (["-p", "1", "--lean", "--max-overhead", "1"], "drop --max-overhead"),
    (["-p", "1", "--lean", "-S", "do_op"], "drop -S"),
    (["--osd", "0", "--list"], "--osd and --list name the target twice"),
    (["--list", "-w", "x"], "--list", "drop -w"),
    (["--list", "5"], "--list", "drop interval"),
    (["-p", "1,1"], "-p names a target twice"),
    (["--osd", "all", "--bpftrace-args"], "--bpftrace-args is for one"),
    (["-p", "1", "--bpftrace-args", "-w", "x"], "drop -w"),
    (["-p", "1", "--bpftrace-args", "--probes", "f"], "drop --probes"),
    (["--osd", "0", "--probes", "f"], "--probes needs -p PID"),
    (["-p", "1", "--ring-mb", "4"], "--ring-mb is for a capture", "-w"),
    (["-p", "1", "--force"], "--force is for a capture", "-w"),
    (["-p", "1", "-S", "nosuch"], "unknown stage nosuch", "queue_wait"),
    (["-p", "1", "--max-overhead", "200"], "--max-overhead", "'200'"),
    (["-p", "1", "--max-overhead", "0"], "--max-overhead", "'0'"),
    (["-p", "1", "--max-overhead", "-5"], "--max-overhead"),
    (["-p", "1", "--max-ops", "0"], "--max-ops", "must be > 0"),
    (["-r", F, "--thread-role", "nosuch"], "--thread-role nosuch",
     "tp_osd_tp"),
    (["-r", F, "--op-class", "nosuch"], "--op-class nosuch"),
    (["-r", F, "-S", "nosuch"], "unknown stage nosuch"),
    (["-r", F, "--osd", "7"], "--osd 7: the capture holds"),
    (["-r", F, "--from", "500"], "--from 500: the capture ends at 2.0 s"),
    (["-r", F, "--from", "23:59:59"], "--from 23:59:59: the capture ends "
                                      "at"),
    (["-r", F, "--to", "00:00:00"], "--to 00:00:00: the capture starts at"),
    (["-r", F, "--from", "1", "--to", "0.5"], "empty window"),
    (["-r", F, "--from", "soon"], "not a time"),
    (["-r", F, "--clock-offset", "nope"], "give FILE=DURATION"),
    (["-r", F, "--clock-offset", F + "=xx"], "is no duration"),
    (["-r", F, "--clock-offset", F + "=1ms"], "-r names one"),
    (["-r", F, F], "several captures"),
    (["-r", F, "1", "2"], "-r reads captures: '1' is not a file; interval "
                          "and count are for live tracing"),
    (["5", "-r", F], "interval and count are for live tracing"),
]


@pytest.mark.parametrize("argv,fragments",
                         [(a, f) for a, *f in OSDSTAGE_USAGE])
def test_osdstage_usage_errors(argv, fragments, capsys):
    _usage(osdstage.main, "osdstage", argv, capsys, *fragments)


@pytest.mark.parametrize("flag", [
    ["--lean"], ["--no-kernel"], ["--max-overhead", "1"], ["--ring-mb", "4"],
    ["--max-ops", "1024"], ["--op-timeout", "3"], ["--probes", "spec.json"],
    ["--bpftrace-args"], ["--strict"], ["--release", "16.2"], ["--force"],
])
def test_live_options_are_refused_with_read(flag, capsys):
    """Today's defaults do not count: only an option given is refused."""
    line = _usage(osdstage.main, "osdstage", ["-r", F] + flag, capsys,
                  "is for live tracing: not with -r")
    assert line.startswith("osdstage: %s is for" % flag[0])


def test_a_live_run_sets_the_defaults_after_the_check():
    args = osdstage.parse_args(["-p", "1"])
    assert args.max_ops is None and args.op_timeout is None
    osdstage._check_live(args)
    assert (args.max_ops, args.op_timeout) == (osdstage.DEFAULT_MAX_OPS,
                                               osdstage.DEFAULT_OP_TIMEOUT_S)
    args = osdstage.parse_args(["-r", F])
    osdstage._check_reading(args)
    assert args.timeline_ms == osdstage.DEFAULT_TIMELINE_MS


def test_reading_with_the_options_it_keeps():
    """-m, -T and -j keep their meaning with -r (-T stamps each report):
    none of them is refused."""
    import io
    for extra in (["-T", "-m"], ["-j"]):
        out = io.StringIO()
        assert osdstage.run(osdstage.parse_args(["-r", F] + extra), out,
                            io.StringIO()) == 0
        assert out.getvalue()


def test_a_kernel_stage_is_refused_in_a_live_run(capsys):
    """Always traced: said so with the build, an unknown user-space stage
    without it; either way a usage error naming it."""
    _usage(osdstage.main, "osdstage", ["-p", "1", "-S", "offcpu"], capsys,
           "-S", "offcpu")


def test_unknown_stage_without_the_build(monkeypatch, capsys):
    """The probe table's stages are known with no BPF objects built."""
    from cephlat import abi
    from cephlat.model import vocab
    monkeypatch.setenv("CEPHLAT_BPF_DIR", "/nonexistent")
    monkeypatch.setattr(abi, "_LOADED", {})
    monkeypatch.setattr(vocab, "_LIVE", {})
    line = _usage(osdstage.main, "osdstage", ["-p", "1", "-S", "nosuch"],
                  capsys, "unknown stage nosuch", "queue_wait",
                  "bluestore_read")
    assert "not built" not in line
    osdstage.check_live_stages(["queue_wait", "do_op"])


def test_several_files_to_read_are_not_taken_for_numbers(tmp_path):
    """-r a.ctf b.ctf client.trace reads them all (nargs="+"): the
    client's trace here has no OSD ops, which it says when read."""
    from test_rbdrecord_trace import write_trace
    trace = write_trace(str(tmp_path / "client.trace"))
    shard = os.path.join(REPO, "tests", "fixtures", "shardq-v0.ctf")
    a = osdstage.parse_args(["-r", F, shard, trace])
    assert a.read == [F, shard, trace] and a.interval is None
    p = subprocess.run([PYTHON, OSDSTAGE, "-r", F, trace],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "no OSD ops recorded" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


RBDRECORD_USAGE = [
    (["-o", "d"], "record what? give -p PID or -- COMMAND"),
    (["-o", "d", "-p", "1", "--", "true"], "record one of them"),
    (["--", "true"], "-o DIR is required to record"),
    (["--to-fio", "t"], "--to-fio needs -o DIR"),
    (["--summary", "t", "-o", "d"], "-o is not an option of --summary"),
    (["--summary", "t", "-p", "1"], "-p is not an option of --summary"),
    (["--summary", "t", "--image", "i"], "--image is not an option"),
    (["--to-fio", "t", "-o", "d", "--zones", "4"], "--zones is not an"),
    (["--to-fio", "t", "-o", "d", "-d", "3"], "-d is not an option"),
    (["-o", "d", "-p", "1", "--pool", "rbd"], "--pool is not an option of "
                                              "recording"),
    (["-o", "d", "-p", "1", "-j"], "-j is not an option of recording"),
    (["--ebpf", "--no-checks", "-o", "d", "-p", "1"], "--no-checks"),
    (["-p", "x"], "not a pid"),
    (["-o", "d", "-p", "1", "--otlp-sample", "5"],
     "--otlp-sample is for --otlp URL"),
    (["-o", "d", "-p", "1", "--otlp", "h:4318"], "--otlp h:4318", "http://"),
    (["--lttng", "-o", "d", "-p", "1", "--otlp", "http://h:4318"],
     "not with --lttng"),
    (["-o", "d", "-p", "1", "--otlp", "http://h:4318", "--otlp-sample", "0"],
     "--otlp-over"),
    (["--summary", "t", "--otlp-over", "9"], "--otlp-over is not an option"),
]


@pytest.mark.parametrize("argv,fragments",
                         [(a, f) for a, *f in RBDRECORD_USAGE])
def test_rbdrecord_usage_errors(argv, fragments, capsys):
    _usage(rbdrecord.main, "rbdrecord", argv, capsys, *fragments)


EXPORTER_USAGE = [
    (["--max-overhead", "200"], "--max-overhead", "'200'"),
    (["--max-overhead", "-1"], "--max-overhead"),
    (["--tiers", "lean", "--no-kernel"], "--tiers lean"),
    (["--tiers", "lean", "--behind"], "--tiers lean"),
    (["--behind", "--no-kernel"], "--behind splits the kernel's"),
    (["-S", "nosuch"], "unknown stage nosuch"),
    (["-S", "offcpu"], "offcpu"),
    (["--listen", "x:y"], "not ADDR:PORT"),
    (["--otlp", "127.0.0.1:4318"], "--otlp 127.0.0.1:4318", "http://"),
    (["--otlp", "ftp://h:4318"], "--otlp ftp://h:4318", "http://"),
    (["--otlp", "http://h:port"], "--otlp http://h:port"),
    (["--otlp-sample", "5"], "--otlp-sample is for --otlp URL"),
    (["--otlp-over", "100"], "--otlp-over is for --otlp URL"),
    (["--otlp", "http://h:4318", "--otlp-sample", "0"], "--otlp-over"),
    (["--otlp", "http://h:4318", "--otlp-rate", "-1"], "--otlp-rate"),
    (["--otlp", "http://h:4318", "--tiers", "lean"], "--tiers lean"),
    (["--escalate-factor", "1"], "--escalate-factor", "over 1"),
    (["--escalate-factor", "x"], "--escalate-factor", "not a number"),
    (["--escalate-over", "0"], "--escalate-over"),
    (["--escalate-quiet", "0"], "--escalate-quiet"),
    (["--escalate-quiet", "30", "--tiers", "lean"], "--escalate-quiet",
     "--tiers both"),
    (["--escalate-over", "900", "--tiers", "full"], "--escalate-over",
     "--tiers both"),
    (["--escalate-factor", "3", "--max-overhead", "0"],
     "--escalate-factor", "cost bound"),
    (["--by", "user"], "invalid choice: 'user'"),
    (["--by-top", "5"], "--by-top K goes with --by"),
    (["--by", "client", "--by-top", "0"], "--by-top", "'0'"),
    (["--by", "client", "--tiers", "lean"], "--tiers lean"),
    (["--by", "image", "--otlp", "http://h:4318"], "one of them"),
]


@pytest.mark.parametrize("argv,fragments",
                         [(a, f) for a, *f in EXPORTER_USAGE])
def test_exporter_usage_errors(argv, fragments, capsys):
    _usage(exporter.main, "osdstage-exporter", argv, capsys, *fragments)


def test_exporter_takes_a_zero_bound():
    a = exporter.build_parser().parse_args(["--max-overhead", "0"])
    assert a.max_overhead == 0


def test_the_exporters_settings_are_its_command_lines():
    """ExporterConfig's defaults are the command line's, and every option
    the loop reads goes into it."""
    from cephlat.exporter.config import ExporterConfig
    p = exporter.build_parser()
    assert exporter.exporter_config(p.parse_args([])) == ExporterConfig()
    c = exporter.exporter_config(p.parse_args([
        "--osd", "0,2", "--tiers", "full", "-S", "queue_wait",
        "--no-kernel", "--release", "18.2", "--max-ops", "128",
        "--host-netns", "h", "--max-overhead", "0.5", "--refresh", "2",
        "--op-timeout", "30", "--otlp", "http://j:4318", "--otlp-sample",
        "10", "--otlp-over", "2500", "--otlp-rate", "7",
        "--escalate-factor", "3", "--escalate-over", "90000",
        "--escalate-quiet", "20"]))
    assert c == ExporterConfig(
        osd=["0", "2"], tiers="full", stages=["queue_wait"], release="18.2",
        no_kernel=True, max_ops=128, host_netns="h", max_overhead=0.5,
        refresh=2.0, op_timeout=30.0, otlp="http://j:4318", otlp_sample=10,
        otlp_over=2500.0, otlp_rate=7, escalate_factor=3.0,
        escalate_over=90000.0, escalate_quiet=20.0)


def test_the_text_options_are_osdstages_command_lines():
    from cephlat.cli.args import text_options
    from cephlat.render.options import TextOptions
    p = osdstage.build_parser()
    assert text_options(p.parse_args(["-p", "1"])) == TextOptions()
    assert text_options(p.parse_args(
        ["-r", "x.ctf", "-m", "--brief", "--explain", "-j"])) == \
        TextOptions(milliseconds=True, brief=True, explain=True,
                    capture=True, json=True)


def test_usage_error_from_the_command_line():
    """Through the tool itself, as a user runs it."""
    p = subprocess.run([PYTHON, OSDSTAGE, "-r", F, "--bpftrace-args"],
                       capture_output=True, text=True)
    assert_one_line_error(p, "osdstage: --bpftrace-args is for live",
                          status=2)
    p = subprocess.run([PYTHON, RBDRECORD, "-o", "/nonexistent/x"],
                       capture_output=True, text=True)
    assert_one_line_error(p, "rbdrecord: record what?", status=2)


# A Python that lacks numpy, pyelftools, Capstone, prometheus_client and
# bt2: a finder that refuses them, then the tool's main(argv)
_BLOCKED = """
import sys
BLOCK = ("numpy", "elftools", "capstone", "prometheus_client", "bt2")
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError("No module named %r" % name, name=name)
sys.meta_path.insert(0, Refuse())
for m in list(sys.modules):
    if m.split(".")[0] in BLOCK:
        del sys.modules[m]
import importlib.util
spec = importlib.util.spec_from_file_location("tool", sys.argv[1])
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)
sys.exit(tool.main(sys.argv[2:]))
"""


def _without_modules(tool, *argv):
    return subprocess.run([PYTHON, "-c", _BLOCKED, TOOLS[tool]] + list(argv),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_help_needs_none_of_the_modules(tool):
    p = _without_modules(tool, "--help")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: ") and "examples:" in p.stdout
    assert p.stderr == ""
    assert all(len(line) <= 80 for line in p.stdout.splitlines())


@pytest.mark.parametrize("tool,argv,fragment", [
    ("osdstage", ["-p", "1", "--max-overhead", "200"], "--max-overhead"),
    ("osdstage", ["-r", F, "--lean"], "--lean is for live tracing"),
    ("rbdrecord", ["-o", "d"], "record what?"),
    ("osdstage-exporter", ["--max-overhead", "101"], "--max-overhead"),
])
def test_usage_errors_need_none_of_the_modules(tool, argv, fragment):
    assert_one_line_error(_without_modules(tool, *argv), tool + ": ",
                          fragment, status=2)


def test_a_missing_module_names_its_package(tmp_path):
    p = _without_modules("osdstage", "-r", F)
    assert_one_line_error(p, "osdstage: python3-numpy is not installed "
                          "(apt-get install python3-numpy)", status=1)
    p = _without_modules("rbdrecord", "--summary", str(tmp_path))
    assert_one_line_error(p, "rbdrecord: python3-", "is not installed "
                          "(apt-get install python3-", status=1)


def test_missing_package_names():
    from cephlat.errors import missing_package
    for module, package in (("numpy", "python3-numpy"),
                            ("elftools.elf.elffile", "python3-pyelftools"),
                            ("capstone", "python3-capstone"),
                            ("prometheus_client", "python3-prometheus-client"),
                            ("bt2", "python3-bt2")):
        assert missing_package(ImportError("x", name=module)) == package
    assert missing_package(ImportError("x", name="yaml")) is None


# ------------------------------------------------------------ bad captures

def _read(path, capsys):
    """osdstage -r path: 1 and one line naming it, in words."""
    assert osdstage.main(["-r", str(path)]) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and "Traceback" not in err, err
    assert str(path) in lines[0], lines[0]
    for python in ("index out of range", "Error", "errno", "(\"", "('"):
        assert python not in lines[0], lines[0]
    return lines[0]


def _cuts(meta):
    """Where to cut the fixture's metadata: inside its first line, inside
    each kind of block, right after a whole block, near the end."""
    text = meta.decode()
    cuts = {5, 13, len(text) - 3}
    for word in ("typealias", "trace {", "env {", "info = ", "clock {",
                 "stream {", "event {", "fields := struct"):
        at = text.index(word)
        cuts.update((at, at + 3, at + len(word) + 2))
    ends = [i + 3 for i in range(len(text)) if text.startswith("};\n", i)]
    cuts.update(ends[::3])
    return sorted(c for c in cuts if 0 < c < len(meta))


def test_a_capture_whose_metadata_is_cut_short(tmp_path, capsys):
    cap = tmp_path / "cut.ctf"
    shutil.copytree(FIXTURE, cap)
    with open(os.path.join(FIXTURE, "metadata"), "rb") as f:
        meta = f.read()
    said = set()
    for n in _cuts(meta):
        (cap / "metadata").write_bytes(meta[:n])
        line = _read(cap, capsys)
        assert "metadata" in line, (n, line)
        assert "cut short" in line, (n, line)
        said.add(line.split("metadata", 1)[1])
    assert len(said) > 5          # where it ends is said, not one line
    (cap / "metadata").write_bytes(b"")
    assert "metadata is empty" in _read(cap, capsys)


def test_a_directory_without_metadata_and_a_file(tmp_path, capsys):
    d = tmp_path / "nometa"
    d.mkdir()
    (d / "stream_cpu0").write_bytes(b"\0" * 64)
    assert "has no metadata file" in _read(d, capsys)
    f = tmp_path / "plain"
    f.write_text("not a capture\n")
    assert "is a file, not a CTF trace directory" in _read(f, capsys)
    (d / "metadata").write_bytes(bytes(range(256)))
    assert "its metadata is not text" in _read(d, capsys)
    (d / "metadata").write_text("/* something else */\n")
    assert "not CTF 1.8 metadata" in _read(d, capsys)


def test_stream_events_the_metadata_does_not_describe(tmp_path, capsys):
    """Metadata cut right after a block, as if whole, still names what
    is missing (the events it no longer describes)."""
    from cephlat.capture.ctf import Trace
    from cephlat.errors import UserError
    cap = tmp_path / "cut.ctf"
    shutil.copytree(FIXTURE, cap)
    text = (cap / "metadata").read_text()
    cut = text.index("event {", text.index('"osdstage:thread"') - 200)
    (cap / "metadata").write_text(text[:cut])
    line = _read(cap, capsys)
    assert "is cut short: it describes no thread events" in line
    tr = Trace(str(cap))
    with pytest.raises(UserError) as e:
        for _ in tr.records():
            pass
    assert "which %s does not describe" % (cap / "metadata") in \
        str(e.value)


def test_cli_modules_import_no_heavy_module():
    """Read from the source: the command lines' modules import numpy,
    pyelftools and the modules that need them only where they run."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import cephlat.cli.osdstage, cephlat.cli.rbdrecord, "
            "cephlat.cli.exporter\n"
            "heavy = [m for m in ('numpy', 'elftools', 'capstone', "
            "'prometheus_client', 'bt2') if m in sys.modules]\n"
            "print(heavy)" % os.path.join(REPO, "lib"))
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "[]", (p.stdout,
                                                           p.stderr)


if __name__ == "__main__":      # pragma: no cover
    sys.exit(pytest.main([__file__]))
    c = exporter.exporter_config(p.parse_args(["--by", "image",
                                               "--by-top", "5"]))
    assert (c.by, c.by_top) == ("image", 5)
