"""Errors that end a tool with one line on stderr and a non-zero exit."""


class UserError(Exception):
    """Something the user can fix: printed as one line, exit status 1."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def quiet_broken_pipe():
    """stdout's reader went away (| head): silence the flush at exit."""
    import os
    import sys
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def run_cli(tool, fn):
    """Run a tool's body: a UserError becomes one line on stderr (prefixed
    with the tool's name) and its status; Ctrl-C 130; a closed pipe 0."""
    import sys
    try:
        return fn()
    except UserError as e:
        msg = str(e)
        if not msg.startswith(tool + ":"):
            msg = "%s: %s" % (tool, msg)
        sys.stderr.write(msg + "\n")
        return e.status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0
