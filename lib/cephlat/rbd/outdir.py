"""Output directories: a new trace (-o DIR) or fio job (--to-fio -o DIR)."""
import os
import shutil

from ..errors import UserError

JOB_MARK = "(made by rbdrecord.py --to-fio)"      # job.fio's first line


def prepare(path, force, kind="trace"):
    """Make way for a new `kind` ("trace" or "job") directory at `path`,
    or fail with one line."""
    if os.path.exists(path):
        if not force:
            raise UserError("%s exists; pass --force to overwrite it" % path)
        if not os.path.isdir(path):
            raise UserError("%s exists and is not a directory" % path)
        shutil.rmtree(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError("cannot write %s: no directory %s" % (path, parent))
