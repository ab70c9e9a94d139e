"""Edits the server offers, as 1-based code-point positions: "Disable CLxxx for this line" and
the text between two versions of a document (how a fix becomes one small edit).

In Python the `# noqa` comment is placed as `cliplint --add-noqa` places it (`fix.add_noqa_text`:
merged into the line's `# noqa: ...`, moved past a string that spans the line end or a
backslash continuation). YAML and TOML take a `#` comment on the key's line; JSON has no
comments and gets no such edit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..files import common_ends
from ..findings import Finding
from ..fix import add_noqa_text
from ..fix.text import line_column
from ..suppress import NOQA
from .documents import NOTEBOOK, PYTHON
from .protocol import lines_of


@dataclass(frozen=True)
class Change:
    """Replace the text from (line, column) to (end_line, end_column), 1-based code points."""

    line: int
    column: int
    end_line: int
    end_column: int
    text: str


def change_between(before: str, after: str) -> Optional[Change]:
    """The one replacement turning `before` into `after` (the differing middle), None if equal."""
    if before == after:
        return None
    start, tail = common_ends(before, after)
    return Change(*line_column(before, start), *line_column(before, len(before) - tail),
                  after[start:len(after) - tail])


def noqa_change(text: str, finding: Finding, kind: str, path: str) -> Optional[Change]:
    """The edit silencing `finding` (None where no comment can hold it)."""
    if kind in (PYTHON, NOTEBOOK):  # a notebook's finding is edited in its cell: Python
        after, added = add_noqa_text(text, [finding])
        return change_between(text, after) if added else None
    if path.lower().endswith(".json"):
        return None
    lines = lines_of(text)
    index = min(max(finding.line - 1, 0), len(lines) - 1)
    content = lines[index]
    existing = NOQA.search(content)
    if existing is not None and existing.group("codes"):
        return Change(index + 1, existing.end() + 1, index + 1, existing.end() + 1, f", {finding.code}")
    if existing is not None:
        return None  # a noqa comment without codes silences every code already
    kept = len(content.rstrip())
    return Change(index + 1, kept + 1, index + 1, len(content) + 1, f"  # noqa: {finding.code}")
