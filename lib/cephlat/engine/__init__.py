"""The engine: attaching the BPF programs to the targets and reading
what they count. The names below are here, not in session.py and
tracer.py, so that the command lines can show them without importing
the engine's modules (numpy, pyelftools)."""

TOOL = "osdstage"               # the engine's messages speak as osdstage
DEFAULT_MAX_OPS = 65536         # slots of the table of ops in flight
DEFAULT_OP_TIMEOUT_S = 120.0    # an op idle this long is forgotten
