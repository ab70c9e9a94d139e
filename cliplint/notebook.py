"""Jupyter notebooks: the code cells, in order, are linted as one program.

A name defined in one cell and used in another is followed, because the rules see one module.
Each cell is first read the way IPython runs it (`ipython_input`: magics, shell escapes, help,
automagic, a cell indented as a whole), keeping every line and mapping columns back. A cell
that is still not Python (IPython raises SyntaxError on it too) is reported once, as a CL000
warning, and left out; the others are linted. Markdown and raw cells are ignored; outputs are
never looked at. Findings name the cell (its 1-based place among all cells, as Jupyter and VS
Code show it) and the line and column inside it.
"""
from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import replace
from functools import lru_cache
from typing import Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple

from .files import decode_python
from .findings import Finding, bad_input, is_syntax_error
from .ipython_input import Cell, transform
from .lint import lint_text
from .suppress import ALL, file_noqa, noqa_lines, suppressed

_FILE_NOQA = re.compile(r"(#\s*cliplint)(:\s*noqa)", re.IGNORECASE)
MAX_BROKEN_CELLS = 20
SALVAGED_LINES = 2  # lines blanked to read the rest of a cell that is not Python: more, and it is skipped
_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)  # IPython runs `await` in a cell


class Program:
    """The concatenated code cells, and the way back from a line of it to (cell, line)."""

    def __init__(self, cells: List[Tuple[int, Cell]]) -> None:
        self.cells = cells  # (cell number, the cell as Python)
        self.text, self.starts = self._join()

    def _join(self) -> Tuple[str, List[int]]:
        parts, starts, line = [], [], 1
        for index, (_, cell) in enumerate(self.cells):
            source = "\n".join(cell.lines)
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
        """The finding at its line and column in the original cell (columns the common
        indentation took away are added back)."""
        index, line = self.locate(finding.line)
        end_index, end_line = self.locate(max(finding.end_line, finding.line))
        number, cell = self.cells[index]
        column = finding.column + _shift(cell, line)
        if end_index != index:
            end_line, end_column = line, column
        else:
            end_column = finding.end_column + _shift(cell, end_line)
        return replace(finding, cell=number, line=line, column=column, end_line=end_line, end_column=end_column)


def _shift(cell: Cell, line: int) -> int:
    return cell.shifts[line - 1] if 0 < line <= len(cell.shifts) else 0


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
        found.append((number, source))
    return found, None


def lint_notebook(path: str, data: bytes, rules: Sequence, display: str, lint: Callable = lint_text
                  ) -> Tuple[List[Finding], bool]:
    """`lint`: `lint_text`, or an editor buffer's incremental `Document.lint`."""
    sources, failure = code_cells(display, data)
    if failure is not None:
        return [failure], False
    cells, broken = python_cells(display, sources)
    for _ in range(MAX_BROKEN_CELLS):
        program = Program(cells)
        _, undecodable = decode_python(display, program.text.encode("utf-8"))
        if undecodable is not None:
            return [undecodable], False
        findings, crashed = lint(path, program.text, rules, display)
        syntax = next((f for f in findings if is_syntax_error(f)), None)
        if syntax is None:
            return stored_regions(data, broken + [program.to_cell(f) for f in findings]), crashed
        # Report the broken cell, then lint the others without it.
        index, _ = program.locate(syntax.line)
        broken.append(program.to_cell(syntax))
        cells = cells[:index] + cells[index + 1:]
    return stored_regions(data, broken), False


def python_cells(display: str, sources: List[Tuple[int, str]]) -> Tuple[List[Tuple[int, Cell]], List[Finding]]:
    """Every code cell as IPython runs it, and a CL000 warning for each one that is not Python."""
    cells: List[Tuple[int, Cell]] = []
    skipped: List[Tuple[str, Finding]] = []  # each with its cell's source
    defined: FrozenSet[str] = frozenset()  # module-level names of the cells so far: they shadow automagics
    for number, source in sources:
        cell, error, names = read_cell(source, defined)
        if error is not None:
            salvaged = salvage(cell, error)
            skipped.append((source, not_python(display, number, cell, error, salvaged[2] if salvaged else [])))
            if salvaged is None:
                continue
            cell, names, _ = salvaged
        defined |= names
        cells.append((number, cell))
    first = sources[0][1] if sources else ""
    return cells, [f for source, f in skipped if not _silenced(f, first, source)]


@lru_cache(maxsize=4096)
def read_cell(source: str, defined: FrozenSet[str]) -> Tuple[Cell, Optional[SyntaxError], FrozenSet[str]]:
    """One code cell as IPython runs it after cells that define `defined`: the Python, why it
    is not Python (None when it is), and the names it binds. Memoised: the language server
    reads every cell of a notebook again on each keystroke in one of them (the result is only
    read, never changed)."""
    cell = transform(source, defined)
    tree, error = _parse(cell)
    if error is not None:  # IPython 7-8 dedented differently: a cell either version runs is Python
        legacy = transform(source, defined, legacy_indent=True)
        tree = _parse(legacy)[0] if legacy.shifts != cell.shifts else None
        cell = legacy if tree is not None else cell
    if tree is None:
        return cell, error, frozenset()
    return cell, None, frozenset(bound_names(tree.body))


def _parse(cell: Cell) -> Tuple[Optional[ast.Module], Optional[SyntaxError]]:
    """CPython's tree of the cell, or why it has none. Compiled under a name that is no file:
    given a path, CPython reads the error's line back from the disk to place it."""
    try:
        with warnings.catch_warnings():  # invalid escapes and the like: not ours to report
            warnings.simplefilter("ignore")
            flags = ast.PyCF_ONLY_AST | _TOP_LEVEL_AWAIT
            return compile("\n".join(cell.lines), "<cell>", "exec", flags, dont_inherit=True), None
    except SyntaxError as err:
        return None, err
    except (ValueError, RecursionError, MemoryError) as err:  # NUL bytes, absurd nesting
        return None, SyntaxError(str(err) or type(err).__name__)


def salvage(cell: Cell, err: SyntaxError) -> Optional[Tuple[Cell, FrozenSet[str], List[int]]]:
    """The cell with the line CPython stops at blanked, when the rest is Python (at most
    `SALVAGED_LINES` lines, each where the next error is): an exercise's `z = ` or a stray
    character leaves the rest of the cell to lint (the names it binds, the mistakes it makes).
    Blanked, not removed, so every other line keeps its number; a fix never edits a blanked line
    (the line differs from the source), so nothing of it is written."""
    lines, blanked = list(cell.lines), []
    error: Optional[SyntaxError] = err
    for _ in range(SALVAGED_LINES):
        line = (error.lineno or 0) if error is not None else 0
        if not 1 <= line <= len(lines) or not lines[line - 1].strip():
            return None
        lines[line - 1] = ""
        blanked.append(line)
        if not any(rest.strip() for rest in lines):
            return None  # nothing left to read
        tree, error = _parse(Cell(lines, cell.shifts))
        if tree is not None:
            return Cell(lines, cell.shifts), frozenset(bound_names(tree.body)), blanked
    return None


def not_python(display: str, number: int, cell: Cell, err: SyntaxError, blanked: Sequence[int] = ()) -> Finding:
    """The warning for a cell that is not Python: skipped, or only its `blanked` lines."""
    line = min(max(err.lineno or 1, 1), len(cell.lines))
    column = max(err.offset or 1, 1) + _shift(cell, line)
    which = f"line {blanked[0]}" if len(blanked) == 1 else "lines " + ", ".join(map(str, blanked))
    skipped = f"{which} skipped, the rest linted" if blanked else "skipped"
    message = f"cell {number} is not Python: {skipped} (running it raises SyntaxError too: {err.msg or err})"
    return replace(bad_input(display, message, line, column, cell=number), severity="warning")


def _silenced(finding: Finding, first_cell: str, source: str) -> bool:
    """`# noqa: CL000` on the reported line, or `# cliplint: noqa[: CL000]` in the first code cell."""
    present, codes = file_noqa(first_cell)
    if present and (codes is ALL or finding.code in codes):
        return True
    return suppressed(finding.code, range(finding.line, finding.line + 1), noqa_lines(source))


def bound_names(body: List[ast.stmt]) -> Set[str]:
    """Names a module-level statement list binds: assignment, loop and `with` targets,
    imports, definitions, also inside `if`/`for`/`while`/`try`/`with` blocks; not inside
    functions and classes (their names stay local)."""
    names: Set[str] = set()
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
            continue
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*"}
        names |= _stored_names(statement)
        for block in ("body", "orelse", "finalbody"):
            names |= bound_names(getattr(statement, block, []))
        for handler in getattr(statement, "handlers", ()):
            names |= bound_names(handler.body)
    return names


def _stored_names(statement: ast.stmt) -> Set[str]:
    """The plain names a simple statement or a block's header stores to."""
    targets: List[ast.AST] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)) and getattr(statement, "value", None) is not None:
        targets = [statement.target]
    elif isinstance(statement, (ast.For, ast.AsyncFor)):
        targets = [statement.target]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in statement.items if item.optional_vars is not None]
    return {node.id for target in targets for node in ast.walk(target)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


# --- writing fixed cells back ------------------------------------------------------------------
# A fixed notebook keeps every byte of its JSON except the `source` values of the cells that
# changed: key order, indentation, escapes and outputs stay as the notebook's editor wrote them.

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_SCALAR = re.compile(r"-?[0-9][0-9eE.+-]*|true|false|null")


def _end(pattern: "re.Pattern[str]", text: str, at: int) -> int:
    """Where `pattern`'s match at `at` ends: the text is JSON that parsed, so it matches there."""
    found = pattern.match(text, at)
    if found is None:
        raise ValueError(f"not the JSON expected at offset {at}")
    return found.end()


def _skip_value(text: str, at: int) -> int:
    """The offset just after the JSON value that starts at `at` (whitespace already skipped)."""
    depth, index = 0, at
    while True:
        index = _end(_WHITESPACE, text, index)
        char = text[index]
        if char == '"':
            index = _end(_JSON_STRING, text, index)
        elif char in "[{":
            depth, index = depth + 1, index + 1
            continue
        elif char in "]}":
            depth, index = depth - 1, index + 1
        elif char in ",:":
            index += 1
            continue
        else:
            index = _end(_JSON_SCALAR, text, index)
        if depth == 0:
            return index


def _members(text: str, at: int) -> Iterator[Tuple[str, int, int]]:
    """(key, value start, value end) of the JSON object starting at `at`."""
    index = _end(_WHITESPACE, text, at + 1)
    while text[index] != "}":
        key_end = _end(_JSON_STRING, text, index)
        key = json.loads(text[index:key_end])
        start = _end(_WHITESPACE, text, _end(_WHITESPACE, text, key_end) + 1)
        end = _skip_value(text, start)
        yield key, start, end
        index = _end(_WHITESPACE, text, end)
        if text[index] == ",":
            index = _end(_WHITESPACE, text, index + 1)


def _elements(text: str, at: int) -> Iterator[Tuple[int, int]]:
    """(start, end) of each element of the JSON array starting at `at`."""
    index = _end(_WHITESPACE, text, at + 1)
    while text[index] != "]":
        end = _skip_value(text, index)
        yield index, end
        index = _end(_WHITESPACE, text, end)
        if text[index] == ",":
            index = _end(_WHITESPACE, text, index + 1)


def source_spans(text: str) -> Dict[int, Tuple[int, int]]:
    """Cell number (1-based, as in findings) -> where its `source` value sits in the JSON text."""
    spans: Dict[int, Tuple[int, int]] = {}
    top = _end(_WHITESPACE, text, 0)
    cells = next(((s, e) for key, s, e in _members(text, top) if key == "cells"), None)
    if cells is None:
        return spans
    for number, (start, _) in enumerate(_elements(text, cells[0]), 1):
        if text[start] == "{":
            spans.update({number: (s, e) for key, s, e in _members(text, start) if key == "source"})
    return spans


# --- where a cell's line lies in the .ipynb ------------------------------------------------------
# A pull request, GitHub's annotations and SARIF viewers show the notebook's JSON, so a finding at
# (cell, line, column) is also placed on the JSON line and column holding that code.

_ESCAPE_LENGTHS = {"u": 6}  # a \u escape and its four hex digits; every other escape is two characters


def _decoded_positions(raw: str, start: int) -> Iterator[Tuple[str, int]]:
    """(decoded character, its offset in the JSON text) for the JSON string literal body `raw`,
    which begins at offset `start`. A surrogate pair is one character, at its first escape."""
    index = 0
    while index < len(raw):
        if raw[index] != "\\":
            yield raw[index], start + index
            index += 1
            continue
        length = _ESCAPE_LENGTHS.get(raw[index + 1], 2)
        if length == 6 and 0xD800 <= int(raw[index + 2:index + 6], 16) < 0xDC00 and raw[index + 6:index + 8] == "\\u":
            length = 12
        yield json.loads('"' + raw[index:index + length] + '"'), start + index
        index += length


def _cell_offsets(text: str, span: Tuple[int, int]) -> Dict[Tuple[int, int], int]:
    """(line, column) of each character of a cell's source (1-based, as findings count them,
    with the position after each line's last character too) -> its offset in the JSON text."""
    offsets: Dict[Tuple[int, int], int] = {}
    line, column = 1, 1
    for literal in _JSON_STRING.finditer(text, span[0], span[1]):
        for char, offset in _decoded_positions(literal.group()[1:-1], literal.start() + 1):
            offsets[(line, column)] = offset
            line, column = (line + 1, 1) if char == "\n" else (line, column + len(char))
        offsets.setdefault((line, column), literal.end() - 1)
    return offsets


def stored_regions(data: bytes, findings: List[Finding]) -> List[Finding]:
    """The findings of a notebook, each placed also on the .ipynb's own lines (`file_region`)."""
    if not any(f.cell is not None for f in findings):
        return findings
    text = data.decode("utf-8-sig")
    spans = source_spans(text)
    offsets = {number: _cell_offsets(text, span) for number, span in spans.items()
               if any(f.cell == number for f in findings)}
    return [_placed(text, offsets.get(f.cell or 0, {}), f) for f in findings]


def _placed(text: str, offsets: Dict[Tuple[int, int], int], finding: Finding) -> Finding:
    start = offsets.get((finding.line, finding.column))
    if start is None:
        return finding
    end = offsets.get((finding.end_line, finding.end_column), start)
    return replace(finding, file_region=(*_line_and_column(text, start), *_line_and_column(text, end)))


def _line_and_column(text: str, offset: int) -> Tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def encode_source(old: str, source: str, ascii_only: bool) -> str:
    """`source` as a JSON value laid out like `old` (a string, or a list of lines with the
    same indentation), escaped as the notebook was (`ascii_only`: non-ASCII as \\u escapes)."""
    if not old.startswith("["):
        return json.dumps(source, ensure_ascii=ascii_only)
    lines = re.findall(r"[^\n]*\n|[^\n]+$", source)
    if not lines:
        return "[]"
    opening = old[1:len(old) - len(old[1:].lstrip())] or "\n"  # the whitespace after `[`
    closing = old[len(old[:-1].rstrip()):-1] if old != "[]" else "\n"  # the whitespace before `]`
    items = ("," + opening).join(json.dumps(line, ensure_ascii=ascii_only) for line in lines)
    return "[" + opening + items + closing + "]"


def replace_sources(text: str, sources: Dict[int, str]) -> str:
    """The notebook's JSON text with the given cells' sources replaced and nothing else changed."""
    spans = source_spans(text)
    ascii_only = text.isascii() and "\\u" in text
    for number in sorted(sources, key=lambda n: spans[n][0], reverse=True):
        start, end = spans[number]
        text = text[:start] + encode_source(text[start:end], sources[number], ascii_only) + text[end:]
    return text


def cell_sources(data: bytes) -> Dict[int, str]:
    """The original (not neutralised) source of every code cell."""
    notebook = json.loads(data.decode("utf-8-sig"))
    found = {}
    for number, cell in enumerate(notebook.get("cells", []), 1):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            found[number] = "".join(source) if isinstance(source, list) else source
    return found
