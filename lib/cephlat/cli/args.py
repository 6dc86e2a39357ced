"""Argument types and the one-line-error parser shared by the tools."""
import argparse

from ..errors import UserError


def positive_float(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number: %r" % s)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0: %r" % s)
    return v


def positive_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % s)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0: %r" % s)
    return v


def pid_arg(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("not a pid: %r" % s)
    if v <= 0:
        raise argparse.ArgumentTypeError("not a pid: %r" % s)
    return v


class Parser(argparse.ArgumentParser):
    """argparse with errors as one line (UserError, exit status 2)."""

    tool = None

    def error(self, message):
        raise UserError("%s: %s (see --help)" % (self.tool or self.prog,
                                                 message), status=2)
