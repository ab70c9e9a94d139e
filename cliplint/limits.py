"""What the CST parser can take safely: the limits a text must stay within to be parsed by
libcst in this process (`assess`), found from CPython's tree or, without one, from the tokens.
No libcst here: the gate runs before the parser is imported."""
from __future__ import annotations

import re
from typing import Optional, Tuple

from .findings import Finding, bad_input
from .trees import cpython_tree, nesting, split_lines

_BRACKETS = re.compile(r"[()\[\]{}]")
MAX_NESTING = 100  # brackets; CPython itself stops at 200
MAX_DEPTH = 1000  # libcst nodes nested in one another: see `facts.nesting`
# libcst's native parser recurses without a limit, and its time grows with the square of the
# nesting. bench/fuzz_parser.py measures where it dies (main thread, 8 MB stack, libcst 1.9):
# 3,400 nested lambdas, 4,000-8,000 `and`s, 8,000-16,000 `elif`s (SIGSEGV); unary operators,
# sums, attribute and subscript chains take 3-15 s at 4,000 levels. MAX_DEPTH stays 3x below
# the first crash, and below 2 s at its worst (subscript chains). The rules' recursion (libcst's
# code generation: about three frames a level) fits in RECURSION_LIMIT at that depth.
RECURSION_LIMIT = 12 * MAX_DEPTH
MAX_NODES = 500_000  # CPython's nodes (~3 a line of code); libcst: 0.4 GB and 5-20 s for a list of 100,000 numbers
RISKY_DEPTH, RISKY_NODES = MAX_DEPTH // 4, MAX_NODES // 4  # real code: 20 levels deep (TensorFlow's own)
MAX_UNPARSED_LINE = 100_000  # characters of a line, in a file CPython cannot parse
# Without CPython's tree (a syntax error, or deeper than CPython goes): every operator or
# keyword of one logical line may nest, and so may each `elif` of the file.
_LEXICAL = re.compile(r"""(?P<skip>[rRbBuUfF]{0,2}(?:'{3}(?:[^'\\]|\\.|'(?!''))*'{3}|"{3}(?:[^"\\]|\\.|"(?!""))*"{3}"""
                      r"""|'[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")|\#[^\n]*|\\\r?\n)"""
                      r"|(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<end>\n)|(?P<elif>\belif\b)"
                      r"|(?P<nests>[-+*/%&|^~.@<>=:]|\b(?:not|lambda|await|if|else|and|or|in|is|for|yield)\b)")


def lexical_nesting(text: str) -> Tuple[int, int]:
    """An upper bound of `nesting` from the tokens alone, and the line where it is reached."""
    deepest, at, count, elifs, depth, line = 0, 1, 0, 0, 0, 1
    for match in _LEXICAL.finditer(text):
        kind = match.lastgroup
        if kind == "end":
            line += 1
            if depth == 0:
                count = 0
            continue
        if kind == "skip":
            line += match.group().count("\n")
            continue
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif kind == "elif":
            elifs += 1
        count += 1
        if max(count, elifs) > deepest:
            deepest, at = max(count, elifs), line
    return deepest, at


def assess(text: str, measured: Optional[Tuple[int, int, int]] = None) -> Tuple[Optional[Finding], bool]:
    """Input the CST parser cannot take safely, with where and why (None when it is fine), and
    whether it is risky all the same: within the limits, but nearer them than any code a person
    writes (the caller then parses it in a child process). `measured`: the `nesting` of
    CPython's tree of `text` when the caller has it (`Facts.nesting`; else it is parsed here)."""
    brackets, line = _brackets(text)
    if brackets > MAX_NESTING:
        return bad_input("", f"brackets nested more than {MAX_NESTING} levels deep; not parsed", line), True
    parsed = measured is not None
    if measured is None:
        tree = cpython_tree(text)
        parsed = tree is not None
        measured = nesting(tree) if tree is not None else (*lexical_nesting(text), 0)
    levels, line, nodes = measured
    if levels > MAX_DEPTH:
        return bad_input("", f"nested too deeply to parse: {levels:,} levels at line {line}, "
                             f"limit {MAX_DEPTH:,}", line), True
    if nodes > MAX_NODES:
        return bad_input("", f"too large to parse: {nodes:,} syntax nodes, limit {MAX_NODES:,} (generated code?)"), True
    longest = max(split_lines(text) or [""], key=len) if not parsed else ""
    if len(longest) > MAX_UNPARSED_LINE:  # libcst's error for a 10 MB line of commas: 20 s, 3 GB
        line = text.count("\n", 0, text.index(longest)) + 1
        return bad_input("", f"CPython cannot parse the file and line {line} is {len(longest):,} characters "
                             f"long (limit {MAX_UNPARSED_LINE:,}); not parsed", line), True
    return None, levels > RISKY_DEPTH or nodes > RISKY_NODES or brackets > RISKY_DEPTH // 10


def _brackets(text: str) -> Tuple[int, int]:
    """How deep brackets nest in `text` (counted up to MAX_NESTING + 1), and the line where."""
    depth = deepest = at = 0
    for match in _BRACKETS.finditer(text):
        depth += 1 if match.group() in "([{" else -1
        if depth > deepest:
            deepest, at = depth, match.start()
            if deepest > MAX_NESTING:
                break
    return deepest, text.count("\n", 0, at) + 1
