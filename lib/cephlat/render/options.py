"""What the text reports show and how: the command line's choices,
made once by the tools' drivers (cli/args.py: text_options)."""
from dataclasses import dataclass


@dataclass(frozen=True)
class TextOptions:
    """milliseconds: times in ms (else us); brief: the verdict and the
    summary table only; explain: a line under each table saying what it
    shows; capture: the report is read from a capture (its losses in a
    capture's words); json: each report as JSON (render/interval_text.py:
    emit)."""
    milliseconds: bool = False
    brief: bool = False
    explain: bool = False
    capture: bool = False
    json: bool = False
