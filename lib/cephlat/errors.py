"""Errors that end a tool with one line on stderr and a non-zero exit."""


class UserError(Exception):
    """Something the user can fix: printed as one line, exit status 1."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status
