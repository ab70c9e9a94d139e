"""The "Disable CLxxx for this line" edit: `# noqa: CLxxx` at the end of the line, or the code
merged into the `# noqa: ...` already there.

In Python the comment goes on the finding's first line where a comment can stand: not a line
that ends inside a triple-quoted string or with a backslash continuation. Any line of the
statement silences the finding (see `suppress`), so the next such line is as good. YAML and
TOML take a `#` comment on the key's line; JSON has no comments and gets no such edit.
"""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Dict, Optional

from .documents import CONFIG, NOTEBOOK, PYTHON
from .protocol import lines_of

_CODED_NOQA = re.compile(r"#\s*noqa:\s?[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*", re.IGNORECASE)


@dataclass(frozen=True)
class LineEdit:
    """Replace columns [start, end) of a line (0-based, code points) with `text`."""

    line: int
    start: int
    end: int
    text: str


def noqa_edit(text: str, line: int, code: str, kind: str, path: str) -> Optional[LineEdit]:
    """The edit silencing `code` for a finding that starts on `line` (1-based)."""
    if kind == CONFIG and path.lower().endswith(".json"):
        return None
    python = kind in (PYTHON, NOTEBOOK)  # a notebook's edit goes into a cell: Python
    lines = lines_of(text)
    comments: Dict[int, tokenize.TokenInfo] = {}
    if python:
        line, comments = _commentable(text, line)
    index = min(max(line - 1, 0), len(lines) - 1)
    content = lines[index]
    comment = comments.get(index + 1)
    offset = comment.start[1] if comment is not None else 0
    existing = _CODED_NOQA.search(comment.string if comment is not None else content)
    if existing is not None and (not python or comment is not None):
        end = offset + existing.end()
        return LineEdit(index, end, end, f", {code}")
    kept = len(content.rstrip())
    return LineEdit(index, kept, len(content), f"  # noqa: {code}")


def _commentable(text: str, line: int):
    """(the first line from `line` on where a comment can end the line, comment tokens by line)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return line, {}  # broken code: the finding's own line
    comments = {tok.start[0]: tok for tok in tokens if tok.type == tokenize.COMMENT}
    ends = {tok.start[0] for tok in tokens if tok.type in (tokenize.NEWLINE, tokenize.NL)}
    candidates = [number for number in ends | set(comments) if number >= line]
    return (min(candidates) if candidates else line), comments
