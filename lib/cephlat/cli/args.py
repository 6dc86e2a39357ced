"""Argument types and the one-line-error parser shared by the tools."""
import argparse

from ..errors import UserError


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
pid_arg = _number(int, "a pid", lambda v: v > 0, "not a pid: %r")


class Parser(argparse.ArgumentParser):
    """argparse with errors as one line (UserError, exit status 2)."""

    tool = None

    def error(self, message):
        raise UserError("%s: %s (see --help)" % (self.tool or self.prog,
                                                 message), status=2)
