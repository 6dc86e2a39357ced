"""Errors that end a tool with one line on stderr and a non-zero exit."""


class UserError(Exception):
    """Something the user can fix: printed as one line, exit status 1."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


class UsageError(UserError):
    """Something wrong with the command line itself (an option's value,
    options that do not go together): one line, exit status 2."""

    def __init__(self, message):
        super().__init__(message, status=2)


# the Debian package of each module the tools import only where they
# need it (so that --help and usage errors need none of them)
PACKAGES = {"numpy": "python3-numpy",
            "elftools": "python3-pyelftools",
            "capstone": "python3-capstone",
            "prometheus_client": "python3-prometheus-client",
            "bt2": "python3-bt2"}


def missing_package(e):
    """An ImportError -> the Debian package that provides the missing
    module, or None when it is none of PACKAGES'."""
    name = (getattr(e, "name", None) or "").split(".")[0]
    return PACKAGES.get(name)


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
    with the tool's name) and its status; a missing Python module one
    line naming its Debian package, 1; Ctrl-C 130; a closed pipe 0."""
    import sys
    try:
        return fn()
    except UserError as e:
        msg = str(e)
        if not msg.startswith(tool + ":"):
            msg = "%s: %s" % (tool, msg)
        sys.stderr.write(msg + "\n")
        return e.status
    except ImportError as e:
        package = missing_package(e)
        if package is None:
            raise
        sys.stderr.write("%s: %s is not installed (apt-get install %s)\n"
                         % (tool, package, package))
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0
