"""A Python 2 file read as Python 3: its statements that only Python 2 has are rewritten.

TensorFlow 1 code is often Python 2: `print x` and `except E, e:` make the whole file a syntax
error for Python 3, and so for libcst. `readable` rewrites exactly those statements so the rest
of the file can be linted: a print statement becomes `pass` (it computes nothing a rule reads),
or, when it goes on over more lines (a backslash, an open bracket), an assignment of what it
prints to `_printed`, which keeps the continuation lines valid,
`except E, e:` becomes `except E as e:` (the same meaning). Every other line, and every line's
number, is kept. A file whose errors are anything else stays unparsable (CL000 alone).
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

# `print x`, `print >>f, x`, `print` alone; not `print(x)` nor `print (x)`, which Python 3 reads.
PRINT = re.compile(r"^(?P<indent>[ \t]*)print(?:[ \t]*$|[ \t]+(?!\()|(?=[\"'`]|>>))")
EXCEPT = re.compile(r"^(?P<head>[ \t]*except[ \t]+[\w.() \t,]+?)[ \t]*,[ \t]*(?P<name>\w+)[ \t]*:")
STRING = re.compile(r"'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"")  # one-line string literals
MAX_PASSES = 50  # statements rewritten one error at a time, past those found up front


def readable(text: str) -> Optional[Tuple[str, List[int]]]:
    """`text` with its Python 2 statements rewritten, and their lines; None when something else
    is wrong with it (or nothing is)."""
    lines = text.splitlines(keepends=True)
    rewritten = [number for number, line in enumerate(lines, 1) if _rewrite(lines, number)]
    for _ in range(MAX_PASSES):
        error = _error("".join(lines))
        if error is None:
            return ("".join(lines), sorted(set(rewritten))) if rewritten else None
        if not (1 <= error <= len(lines)) or not _rewrite(lines, error):
            return None
        rewritten.append(error)
    return None


def _rewrite(lines: List[str], number: int) -> bool:
    line = lines[number - 1]
    ending = line[len(line.rstrip("\r\n")):]
    printed = PRINT.match(line)
    if printed and _one_line(line):
        lines[number - 1] = printed.group("indent") + "pass" + ending
        return True
    if printed and not line[printed.end():].lstrip().startswith(">>"):  # continued on the next lines
        lines[number - 1] = printed.group("indent") + "_printed = " + line[printed.end():].lstrip(" \t")
        return True
    caught = EXCEPT.match(line)
    if caught:
        lines[number - 1] = f"{caught.group('head')} as {caught.group('name')}:{line[caught.end():]}"
        return True
    return False


def _one_line(line: str) -> bool:
    """Does the statement end on its line (no backslash, no bracket left open)?"""
    code = STRING.sub("''", line).split("#", 1)[0].rstrip()  # a `#` in a string starts no comment
    return not code.endswith("\\") and sum(code.count(o) - code.count(c) for o, c in ("()", "[]", "{}")) <= 0


def _error(text: str) -> Optional[int]:
    """The line CPython's parser stops at, or None when `text` is Python 3."""
    try:
        compile(text, "<cliplint>", "exec", dont_inherit=True, flags=0x400)  # ast.PyCF_ONLY_AST
    except SyntaxError as err:
        return err.lineno or 0
    except (ValueError, RecursionError, MemoryError):
        return 0
    return None
