"""Argument types and the one-line-error parser shared by the tools, and
the renderers' options made from a parsed command line."""
import argparse
import os
import sys

from ..errors import UsageError, UserError
from ..render.options import TextOptions


def _number(convert, what, ok, why):
    def parse(s):
        try:
            v = convert(s)
        except ValueError:
            raise argparse.ArgumentTypeError("not %s: %r" % (what, s))
        if not ok(v):
            raise argparse.ArgumentTypeError(why % s)
        return v
    return parse


positive_float = _number(float, "a number", lambda v: v > 0, "must be > 0: %r")
positive_int = _number(int, "an integer", lambda v: v > 0, "must be > 0: %r")
zero_or_more = _number(int, "an integer", lambda v: v >= 0,
                      "must be >= 0: %r")
pid_arg = _number(int, "a pid", lambda v: v > 0, "not a pid: %r")
# a share of the machine's CPU time, in per cent
percent = _number(float, "a number", lambda v: 0 < v <= 100,
                  "a share of the CPU time, more than 0 and at most 100: %r")
percent_or_zero = _number(float, "a number", lambda v: 0 <= v <= 100,
                          "a share of the CPU time, 0 to 100: %r")


def run_as(prog):
    """The name the tool was run by, for its usage line and examples: the
    installed command's (osdstage, rbdrecord, osdstage-exporter) when
    that is how it was started, else the checkout's `prog`
    (tools/osdstage.py)."""
    stem = prog[:-3] if prog.endswith(".py") else prog
    name = os.path.basename(sys.argv[0] or "")
    return name if name in (stem, stem.replace("_", "-")) else prog


class Parser(argparse.ArgumentParser):
    """argparse with errors as one line (UsageError, exit status 2); its
    usage line and examples name the tool as it was run (run_as)."""

    tool = None

    def __init__(self, *args, **kwargs):
        prog = kwargs.get("prog")
        if prog:
            kwargs["prog"] = run_as(prog)
            if kwargs.get("epilog"):
                kwargs["epilog"] = kwargs["epilog"].replace(
                    prog, kwargs["prog"])
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError("%s: %s (see --help)" % (self.tool or self.prog,
                                                  message))


# osdstage's options that ask for a window report of a capture (-r):
# dest -> the option as the user writes it (cli/osdstage.py refuses them
# in a live run; cli/views.py reads a window when one is given)
OFFLINE_ONLY = {"t_from": "--from", "t_to": "--to",
                "thread_role": "--thread-role", "op_class": "--op-class",
                "slowest": "--slowest", "html": "--html",
                "perfetto": "--perfetto", "op_reqid": "--op", "by": "--by",
                "folded": "--folded"}
# --by's keys (model/breakdown.py: KINDS; here so that --help and a usage
# error need no numpy)
BY_KEYS = ("client", "pool", "pg", "image")


def text_options(args):
    """osdstage's -m, --brief, --explain and -j as the text reports'
    TextOptions; -r: a capture's report."""
    return TextOptions(milliseconds=args.milliseconds, brief=args.brief,
                       explain=args.explain, capture=bool(args.read),
                       json=args.json)
