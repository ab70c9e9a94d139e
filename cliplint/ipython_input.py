"""A notebook cell read the way IPython runs it, as Python with the same lines.

IPython turns a cell into Python before compiling it (`IPython.core.inputtransformer2`, and
`InteractiveShell.transform_cell` for automagic); this module follows the same rules, as of
IPython 9.18 with ipykernel 7.4, without importing IPython:

1. Leading blank lines are dropped and the cell's common indentation is removed
   (`textwrap.dedent`), so a cell indented as a whole runs. IPython 7 and 8 removed the
   first line's indentation from the lines that start with it instead (`legacy_indent`):
   the two differ only on cells one of them rejects.
2. A cell whose first line is `%%name` is a cell magic: its body goes to the magic as text.
   The bodies of `%%time`, `%%timeit`, `%%capture`, `%%prun` and `%%debug` are themselves
   cells run as Python; any other cell magic (`%%bash`, `%%writefile`, ...) is not Python.
3. Special syntax is recognised at the start of a logical line only (never inside brackets,
   a string, or after a backslash continuation), one line at a time, top down:
   `obj?` / `obj??` at the end of a logical line (help), a line starting with one of
   `! !! % ? ?? , ; /` (shell, magic, help, autocall escapes; their backslash-continued
   lines belong to them), and `x = !cmd` / `x = %magic` (the first `=` outside brackets).
4. A cell that is then one line, a magic's bare name and its arguments (`ls -l`, `pwd`,
   `pip install x`), runs as that magic unless a Python name shadows it (IPython's
   automagic; only for one-line cells, as in IPython).

Unlike IPython, which replaces special lines with `get_ipython()` calls, this keeps every line
where it was: a special line becomes `pass` at its indentation (its continuation lines empty),
an assigned magic becomes `get_ipython()`, and `%time stmt` / `%timeit -n 3 stmt` keep the
statement in its columns. The only column change is the removed common indentation, which
`Cell.shifts` records so positions map back to the original cell.

Not followed: pasted `>>>` / `In [1]:` prompt stripping (no code cell in 258 real notebooks
measured had one), and PEP 701 f-strings that reuse their own quotes inside `{}` (scanned as
strings that end early: only the choice of logical-line starts after them could differ).
"""
from __future__ import annotations

import builtins
import keyword
import re
import textwrap
from dataclasses import dataclass
from typing import Container, List, Optional, Tuple

# `%lsmagic` (line magics) in a Jupyter kernel: IPython 9.18 + ipykernel 7.4 on Linux.
LINE_MAGICS = frozenset("""
    alias alias_magic autoawait autocall automagic autosave bookmark cat cd clear code_wrap colors conda config
    connect_info cp debug dhist dirs doctest_mode ed edit env gui hist history killbgscripts ldir less lf lk ll
    load load_ext loadpy logoff logon logstart logstate logstop ls lsmagic lx macro magic mamba man matplotlib
    micromamba mkdir more mv notebook page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip popd pprint precision
    prun psearch psource pushd pwd pycat pylab qtconsole quickref recall rehashx reload_ext rep rerun reset
    reset_selective rm rmdir run save sc set_env subshell sx system tb time timeit unalias unload_ext uv who
    who_ls whos xdel xmode""".split())
# Magics whose argument is a Python statement they run, with their getopt option letters
# (a letter followed by `:` takes a value), as IPython parses them.
STATEMENT_MAGICS = {"time": "", "timeit": "n:r:tcp:qo", "prun": "D:l:rs:T:q", "debug": "b:"}
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
ESCAPES = frozenset("!?%,;/")
OPERATORS_NOT_ESCAPES = ("%=", "!=", "/=", "//")  # one operator token, not an escape
_HELP_END = re.compile(r"(%{0,2}(?!\d)[\w*]+(\.(?!\d)[\w*]+|\[-?[0-9]+\])*)(\?\??)$")
_CELL_MAGIC_HELP = re.compile(r"%%\w+\?")
_USER_INPUT = re.compile(r"^(\s*)([\w.*]*)(.*)$")  # IPython's split_user_input, after static transforms
_BRACKETS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
_OPERATOR_BEFORE_EQUALS = set("=<>!+-*/%&|^@:")
_SHADOWING = frozenset(dir(builtins)) | frozenset(keyword.kwlist)


@dataclass
class Cell:
    lines: List[str]  # Python, one line per line of the cell
    shifts: List[int]  # columns removed from the start of each line (the common indentation)


@dataclass
class _Logical:
    """What IPython's tokens show of one logical line."""

    end: int  # its last physical line
    last: Optional[Tuple[int, int]]  # the last token's last character (None: a comment, or nothing)
    after_assign: Optional[Tuple[int, int]]  # the first token after the first `=` outside brackets
    tokens: int  # significant characters seen, to tell `??` from `x?`


def transform(source: str, shadowed: Container[str] = (), legacy_indent: bool = False) -> Cell:
    """The cell as Python with the same lines; `shadowed`: names defined by earlier cells."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines, shifts = (_first_line_dedent if legacy_indent else _dedent)(lines)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return Cell(lines, shifts)
    if lines[first].startswith("%%") and not _CELL_MAGIC_HELP.match(lines[first]):
        return _cell_magic(lines, shifts, first, shadowed, legacy_indent)
    special = _static(lines, first)
    if not special and _one_line(lines, first):
        lines[first] = _automagic(lines[first], shadowed)
    return Cell(lines, shifts)


def _dedent(lines: List[str]) -> Tuple[List[str], List[int]]:
    """textwrap.dedent (IPython 9), line by line: whitespace-only lines become empty."""
    dedented = textwrap.dedent("\n".join(lines)).split("\n")
    return dedented, [len(old) - len(new) for old, new in zip(lines, dedented)]


def _first_line_dedent(lines: List[str]) -> Tuple[List[str], List[int]]:
    """IPython 7-8: the first non-blank line's indentation, from every line that starts with it."""
    first = next((line for line in lines if line.strip()), "")
    indent = first[:len(first) - len(first.lstrip(" \t"))]
    shifts = [len(indent) if line.startswith(indent) else 0 for line in lines]
    return [line[shift:] for line, shift in zip(lines, shifts)], shifts


def _cell_magic(lines: List[str], shifts: List[int], first: int, shadowed: Container[str],
                legacy_indent: bool) -> Cell:
    name = lines[first][2:].rstrip().partition(" ")[0]
    blank = [""] * (first + 1)
    if name not in PYTHON_CELL_MAGICS:
        return Cell([""] * len(lines), [0] * len(lines))  # %%bash, %%writefile, ...: another language
    body = transform("\n".join(lines[first + 1:]), shadowed, legacy_indent)
    body_shifts = [outer + inner for outer, inner in zip(shifts[first + 1:], body.shifts)]
    return Cell(blank + body.lines, [0] * len(blank) + body_shifts)


def _one_line(lines: List[str], first: int) -> bool:
    """IPython's automagic needs a cell of one line (a final newline adds none)."""
    rest = lines[first + 1:]
    return not rest or rest == [""]


def _static(lines: List[str], index: int) -> bool:
    """Rewrite IPython's special syntax in place, top down; True if there was any."""
    found = False
    while index < len(lines):
        logical = _scan(lines, index)
        end = _help(lines, index, logical)
        end = _escape(lines, index) if end is None else end
        end = _assigned_magic(lines, logical) if end is None else end
        found = found or end is not None
        index = (logical.end if end is None else end) + 1
    return found


def _help(lines: List[str], start: int, logical: _Logical) -> Optional[int]:
    """`obj?` / `obj??` ending a logical line: IPython shows help instead of running it."""
    if logical.last is None or logical.tokens < 2:
        return None
    q_line, q_column = logical.last
    if lines[q_line][q_column] != "?":
        return None
    content = "\n".join(lines[start:q_line + 1]).lstrip(" \t")
    if not _HELP_END.search(content + "\n"):
        return None  # IPython leaves it alone: a syntax error when compiled
    return _replace(lines, start, q_line, "pass")


def _escape(lines: List[str], start: int) -> Optional[int]:
    """`!cmd`, `%magic args`, `?obj`, `,f a`, `;f a`, `/f a` starting a logical line."""
    stripped = lines[start].lstrip(" \t\f")
    if not stripped or stripped[0] not in ESCAPES or stripped.startswith(OPERATORS_NOT_ESCAPES):
        return None
    if stripped[0] == "/" and stripped[1:2] in ("", " "):
        return None  # IPython: '/' must be followed by a callable name
    end = _continued(lines, start)
    kept = None
    if stripped[0] == "%" and not stripped.startswith("%%") and end == start:
        name, space, _ = stripped[1:].partition(" ")
        kept = _statement(stripped, name, 1 + len(name) + len(space))
    return _replace(lines, start, end, kept or "pass")


def _assigned_magic(lines: List[str], logical: _Logical) -> Optional[int]:
    """`x = %magic args` and `x = !cmd`: the first `=` outside brackets, then `%name` or `!`."""
    if logical.after_assign is None:
        return None
    row, column = logical.after_assign
    line = lines[row]
    system = line[column] == "!" and not line.startswith("!=", column)
    magic = re.match(r"%[ \t\f]*[^\W\d]", line[column:]) is not None
    if not (system or magic):
        return None
    end = _continued(lines, row)
    value = "get_ipython()"
    if magic and end == row:
        name, _, expression = line[column + 1:].partition(" ")
        if name == "time" and _compiles(expression.strip(), "eval"):
            value = " " * (len(name) + 2) + expression  # `x = %time f()` binds what f() returns
    lines[row] = line[:column] + value
    for index in range(row + 1, end + 1):
        lines[index] = ""
    return end


def _replace(lines: List[str], start: int, end: int, text: str) -> int:
    """`text` at the start line's indentation; the other lines of the construct empty."""
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip(" \t\f"))]
    lines[start] = indent + text
    for index in range(start + 1, end + 1):
        lines[index] = ""
    return end


def _continued(lines: List[str], start: int) -> int:
    """The last physical line of a line continued with backslashes (IPython's rule: any line
    ending in a backslash, whatever it is inside)."""
    end = start
    while end < len(lines) - 1 and lines[end].endswith("\\"):
        end += 1
    return end


def _statement(text: str, name: str, arguments_at: int) -> Optional[str]:
    """`%time f(x)` -> the same width with the statement kept (`pass;     f(x)`), for the
    magics that run their argument as Python; None when it is not one or not valid Python."""
    if name not in STATEMENT_MAGICS:
        return None
    statement = _skip_options(text[arguments_at:], STATEMENT_MAGICS[name])
    width = len(text) - len(statement)
    if not statement.strip() or width < len("pass;"):
        return None
    candidate = "pass;".ljust(width) + statement  # a compound statement cannot follow `;`: then None
    return candidate if _compiles(candidate, "exec") else None


def _skip_options(arguments: str, spec: str) -> str:
    """What is left after the leading `-x [value]` options, as IPython's parse_options reads them."""
    rest = arguments.lstrip()
    while rest.startswith("-") and len(rest) > 1 and rest[1] in spec.replace(":", ""):
        letter = rest[1]
        word, _, rest = rest.partition(" ")
        if spec[spec.index(letter) + 1:].startswith(":") and len(word) == 2:
            _, _, rest = rest.lstrip().partition(" ")  # the value is the next word
        rest = rest.lstrip()
    return rest


def _compiles(text: str, mode: str) -> bool:
    try:
        compile(text, "<cell>", mode, 0x400 | 0x2000, dont_inherit=True)  # PyCF_ONLY_AST, top-level await
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
        return False
    return True


def _automagic(line: str, shadowed: Container[str]) -> str:
    """A one-line cell `ls -l` runs as `%ls -l` unless a Python name shadows `ls`."""
    match = _USER_INPUT.match(line)
    if match is None:
        return line
    _, name, rest = match.groups()
    rest = rest.lstrip()
    if rest[:1] in ("=", ","):
        return line  # `ls = 3`, `ls, pwd = ...` are Python (IPython's assignment check)
    if name not in LINE_MAGICS or name in shadowed or name in _SHADOWING:
        return line
    kept = _statement(line, name, match.end(2))
    return kept or "pass"


def _scan(lines: List[str], start: int) -> _Logical:
    """Follow Python's tokens from the start of a logical line to its end."""
    depth, quote = 0, ""
    last: Optional[Tuple[int, int]] = None
    assign_seen, after_assign, tokens = False, None, 0
    row = start
    while row < len(lines):
        line, column, continued = lines[row], 0, False
        while column < len(line):
            char = line[column]
            if quote:
                if char == "\\":
                    column += 2
                    continue
                if line.startswith(quote, column):
                    column += len(quote)
                    quote, last = "", (row, column - 1)
                    continue
                column += 1
                continue
            if char in " \t\f":
                column += 1
                continue
            if char == "#":
                last = None  # a comment is the last token, so far
                break
            if char == "\\" and column == len(line) - 1:
                continued = True
                break
            tokens += 1
            if assign_seen and after_assign is None:
                after_assign = (row, column)
            if char in "'\"":
                quote = char * 3 if line.startswith(char * 3, column) else char
                column += len(quote)
                last = (row, column - 1)
                continue
            if char in _BRACKETS:
                depth = max(0, depth + _BRACKETS[char])
            elif char == "=" and depth == 0 and not assign_seen:
                assign_seen = _lone_equals(line, column)
            last = (row, column)
            column += 1
        if len(quote) == 1 and not line.endswith("\\"):
            quote = ""  # an unterminated string ends with its line (tokenize's error token)
        if not (quote or depth or continued):
            break
        row += 1
    return _Logical(min(row, len(lines) - 1), last, after_assign, tokens)


def _lone_equals(line: str, column: int) -> bool:
    """An `=` that is the assignment token, not part of `==`, `<=`, `+=`, `:=`, ..."""
    before = line[column - 1] if column else ""
    after = line[column + 1] if column + 1 < len(line) else ""
    return before not in _OPERATOR_BEFORE_EQUALS and after != "="

