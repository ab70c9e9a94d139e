"""Output formats. Each formatter turns the sorted findings of a run into text."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from ..findings import Finding
from . import machine, text

Formatter = Callable[[List[Finding], "RunInfo"], str]


class RunInfo:
    """What a formatter may need besides the findings."""

    def __init__(self, files: int, color: bool = False, quiet: bool = False, verified: bool = False,
                 fixes: Optional[List[str]] = None) -> None:
        self.files = files
        self.color = color
        self.quiet = quiet
        self.verified = verified
        self.fixes = fixes or []  # a `--fix` run's lines, shown by the text report before its summary


FORMATS: Dict[str, Formatter] = {
    "text": text.render,
    "json": machine.json_array,
    "json-lines": machine.json_lines,
}


def _ci(name: str) -> Formatter:
    """The CI formats import xml/hashlib: load them only when asked for."""

    def render(findings, info):
        from . import ci

        return getattr(ci, name)(findings, info)

    return render


FORMATS.update({name: _ci(name) for name in ("sarif", "github", "junit", "gitlab")})

