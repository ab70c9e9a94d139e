"""Jupyter notebooks: the code cells, in order, are linted as one program.

A name defined in one cell and used in another is followed, because the rules see one module.
IPython magics and shell escapes are neutralised line by line without shifting any other
position; markdown and raw cells are ignored; outputs are never looked at. Findings name the
cell (its 1-based place among all cells, as Jupyter and VS Code show it) and the line and
column inside it.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

from .files import decode_python
from .findings import Finding, bad_input, is_syntax_error
from .lint import lint_text

PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}
_SHELL_ASSIGNMENT = re.compile(r"^(\s*[\w.\[\], ]+=\s*)[!%].*$")
_FILE_NOQA = re.compile(r"(#\s*cliplint)(:\s*noqa)", re.IGNORECASE)
MAX_BROKEN_CELLS = 20


def neutralise(source: str) -> str:
    """IPython syntax -> Python with the same lines: `%magic`, `!cmd`, `obj?` become `pass`."""
    lines = source.split("\n")
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        name = first[2:].split()[0] if first[2:].split() else ""
        if name not in PYTHON_CELL_MAGICS:
            return "\n".join("" for _ in lines)  # %%bash, %%writefile, ...: not Python
        lines[0] = ""
    out = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith(("%", "!", "?")) or (stripped.endswith("?") and "#" not in stripped):
            out.append(f"{indent}pass")
        elif _SHELL_ASSIGNMENT.match(line):
            out.append(_SHELL_ASSIGNMENT.sub(lambda m: m.group(1) + "None", line))
        else:
            out.append(line)
    return "\n".join(out)


class Program:
    """The concatenated code cells, and the way back from a line of it to (cell, line)."""

    def __init__(self, cells: List[Tuple[int, str]]) -> None:
        self.cells = cells  # (cell number, neutralised source)
        self.text, self.starts = self._join()

    def _join(self) -> Tuple[str, List[int]]:
        parts, starts, line = [], [], 1
        for index, (_, source) in enumerate(self.cells):
            if index:  # a file-level noqa counts only in the first code cell
                source = _FILE_NOQA.sub(lambda m: m.group(1) + "-" + m.group(2)[1:], source)
            starts.append(line)
            body = source if source.endswith("\n") else source + "\n"
            parts.append(body)
            line += body.count("\n")
        return "".join(parts), starts

    def locate(self, line: int) -> Tuple[int, int]:
        """(index into cells, line inside that cell) for a line of the program."""
        index = max(i for i, start in enumerate(self.starts) if start <= line)
        return index, line - self.starts[index] + 1

    def to_cell(self, finding: Finding) -> Finding:
        index, line = self.locate(finding.line)
        end_index, end_line = self.locate(max(finding.end_line, finding.line))
        if end_index != index:
            end_line, end_column = line, finding.column
        else:
            end_column = finding.end_column
        return replace(finding, cell=self.cells[index][0], line=line, end_line=end_line, end_column=end_column)


def code_cells(path: str, data: bytes) -> Tuple[List[Tuple[int, str]], Optional[Finding]]:
    """(cell number, source) of every code cell, or a CL000 finding for a malformed notebook."""
    try:
        notebook = json.loads(data.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        line = getattr(err, "lineno", 1)
        return [], bad_input(path, f"not a notebook: invalid JSON ({getattr(err, 'msg', err)})", line)
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return [], bad_input(path, "not a notebook: no `cells` list (only nbformat 4 is supported)")
    found = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            return [], bad_input(path, f"cell {number}: the source is not text", cell=number)
        found.append((number, neutralise(source)))
    return found, None


def lint_notebook(path: str, data: bytes, rules: Sequence, display: str) -> Tuple[List[Finding], bool]:
    cells, failure = code_cells(display, data)
    if failure is not None:
        return [failure], False
    broken: List[Finding] = []
    for _ in range(MAX_BROKEN_CELLS):
        program = Program(cells)
        _, undecodable = decode_python(display, program.text.encode("utf-8"))
        if undecodable is not None:
            return [undecodable], False
        findings, crashed = lint_text(path, program.text, rules, display)
        syntax = next((f for f in findings if is_syntax_error(f)), None)
        if syntax is None:
            return broken + [program.to_cell(f) for f in findings], crashed
        # Report the broken cell, then lint the others without it.
        index, _ = program.locate(syntax.line)
        broken.append(program.to_cell(syntax))
        cells = cells[:index] + cells[index + 1:]
    return broken, False
