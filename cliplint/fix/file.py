"""Autofix of one file's bytes: a Python file, or a notebook's code cells as one program with
each edit taken back to the cell it is in; and every fix of a file placed for the machine
outputs."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from ..files import decode_python, encode_python
from ..notebook import Program, cell_sources, python_cells, replace_sources
from ..rules import selected
from .text import MAX_ROUNDS, Accept, Edit, Outcome, choose, fix_text, line_column, offered


@dataclass
class FileFix:
    """The result of fixing one file: its bytes before and after, what was applied."""

    display: str
    before: bytes
    after: bytes
    applied: List[Edit]
    refused: List[Edit]
    notes: List[Tuple[Edit, str]]
    diff: str

    @property
    def changed(self) -> bool:
        return self.after != self.before


def fix_python(path: str, display: str, data: bytes, rules: Sequence, unsafe: bool,
               accept: Optional[Accept] = None) -> Optional[FileFix]:
    text, failure = decode_python(display, data)
    if text is None or failure is not None:
        return None
    outcome = fix_text(path, text, rules, unsafe, accept)
    after = encode_python(outcome.text, data) if outcome.applied else data
    diff = _diff(text, outcome.text, display, display)
    return FileFix(display, data, after, outcome.applied, outcome.refused, outcome.notes, diff)


def _diff(before: str, after: str, old_name: str, new_name: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 old_name, new_name)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


class _Cells:
    """A notebook's code cells as one program (as IPython reads them), and the way from an edit
    of that program back to an edit of one cell's original source (a line IPython rewrites, a
    magic or a shell escape, is never edited)."""

    def __init__(self, display: str, sources: Dict[int, str]) -> None:
        self.sources = dict(sources)
        cells, _ = python_cells(display, sorted(sources.items()))
        self.program = Program(cells)
        self.numbers = [number for number, _ in cells]
        self.neutralised = {number: "\n".join(cell.lines) for number, cell in cells}
        self.starts: List[int] = []
        offset = 0
        for number in self.numbers:
            self.starts.append(offset)
            body = self.neutralised[number]
            offset += len(body) + (0 if body.endswith("\n") else 1)

    def locate(self, edit: Edit) -> Optional[Tuple[int, int, int]]:
        """(cell number, start, end) of the edit in that cell's original source, or None."""
        if not self.starts:
            return None
        index = max(i for i, start in enumerate(self.starts) if start <= edit.start)
        number, base = self.numbers[index], self.starts[index]
        neutral, original = self.neutralised[number], self.sources[number]
        start, end = edit.start - base, edit.end - base
        if end > len(neutral):
            return None
        first, last = neutral.count("\n", 0, start), neutral.count("\n", 0, end)
        neutral_lines, original_lines = neutral.split("\n"), original.split("\n")
        if neutral_lines[first:last + 1] != original_lines[first:last + 1]:
            return None
        shift = sum(len(line) + 1 for line in original_lines[:first]) - \
            sum(len(line) + 1 for line in neutral_lines[:first])
        return number, start + shift, end + shift


def fix_notebook(path: str, display: str, data: bytes, rules: Sequence, unsafe: bool,
                 accept: Optional[Accept] = None) -> Optional[FileFix]:
    try:
        raw = data.decode("utf-8")
        sources = cell_sources(data)
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        return None
    original = dict(sources)
    outcome = Outcome(raw)
    for _ in range(MAX_ROUNDS):
        cells = _Cells(display, sources)
        edits = offered(path, cells.program.text, rules)
        if not edits:
            break
        chosen = choose(edits, unsafe, accept, outcome, lambda edit: cells.locate(edit) is not None)
        if not chosen:
            break
        # placed before any cell changes
        placed = [(edit, where) for edit in chosen for where in [cells.locate(edit)] if where is not None]
        for edit, (number, start, end) in sorted(placed, key=lambda pair: pair[0].start, reverse=True):
            sources[number] = sources[number][:start] + edit.replacement + sources[number][end:]
        outcome.applied.extend(replace(edit, cell=number, line=cells.program.locate(edit.line)[1])
                               for edit, (number, _, _) in placed)
    changed = {n: s for n, s in sources.items() if s != original[n]}
    after = replace_sources(raw, changed).encode("utf-8") if changed else data
    diff = "".join(_diff(original[n], changed[n], f"{display}:cell {n}", f"{display}:cell {n}")
                   for n in sorted(changed))
    return FileFix(display, data, after, outcome.applied, outcome.refused, outcome.notes, diff)


# (cell or None, line, column or 0 in a notebook, code) -> (new text, (line, column), (end line, end column))
Placed = Dict[Tuple[Optional[int], int, int, str], Tuple[str, Tuple[int, int], Tuple[int, int]]]


def placed_fixes(path: str, data: bytes, codes) -> Placed:
    """Every fix the rules `codes` offer in a file, placed as 1-based ranges of its text (of
    the cell's source in a notebook, where a line IPython rewrites is never edited). A
    notebook's key has no column: its findings' columns count indentation the program strips."""
    rules = selected(codes)
    if path.lower().endswith(".ipynb"):
        try:
            cells = _Cells(path, cell_sources(data))
        except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
            return {}
        placed: Placed = {}
        for edit in offered(path, cells.program.text, rules) or []:
            where = cells.locate(edit)
            if where is not None:
                number, start, end = where
                source, line = cells.sources[number], cells.program.locate(edit.line)[1]
                placed[(number, line, 0, edit.code)] = (edit.replacement, line_column(source, start),
                                                        line_column(source, end))
        return placed
    text, failure = decode_python(path, data)
    if text is None or failure is not None:
        return {}
    return {(None, e.line, e.column, e.code): (e.replacement, line_column(text, e.start), line_column(text, e.end))
            for e in offered(path, text, rules) or []}
