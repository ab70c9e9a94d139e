"""Autofix of one text: the fixes rules offer, as text edits, applied in rounds.

A rule's report may carry a `Fix` (libcst replacements of nodes of the tree it checked). Here
each fix becomes one text edit: the module is generated with that fix alone, and the edit is
what differs from the source. Edits that do not overlap are applied together; the text is
linted again and the next round applies what is still offered, until nothing applies. The
whole source is parsed (never the reduced parse the linter uses), so every edit is an edit of
the real file. A file that does not parse is never touched, and an edit whose result does
not parse is never applied.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import libcst as cst

from ..analysis import Context, parse, reports_of
from ..files import common_ends
from ..findings import SAFE, Finding, Fix
from ..probes import Probe, Snippet, payload
from ..rules import ALL_RULES, selected

MAX_ROUNDS = 6


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


@dataclass(frozen=True)
class Edit:
    """Replace `text[start:end]` by `replacement`: the fix of the finding at `line`:`column`."""

    start: int
    end: int
    replacement: str
    code: str
    title: str
    safety: str
    line: int
    column: int
    probe: Optional[dict] = field(default=None, compare=False)
    fixed_probe: Optional[dict] = field(default=None, compare=False)  # the probe run on the fixed code
    cell: Optional[int] = None  # in a notebook: the cell, and `line` is the line inside it

    def overlaps(self, other: "Edit") -> bool:
        """Touching edits count as overlapping: each was computed against the text between them."""
        return self.start <= other.end and other.start <= self.end

    def span(self, text: str) -> Tuple[int, int, int, int]:
        """1-based (line, column, end line, end column) of the replaced text in `text`."""
        return (*line_column(text, self.start), *line_column(text, self.end))


def line_column(text: str, offset: int) -> Tuple[int, int]:
    """1-based (line, column) of `offset` in `text`, lines ending at "\\n" (an editor's)."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


class _Replace(cst.CSTTransformer):
    def __init__(self, changes: Dict[cst.CSTNode, Optional[cst.CSTNode]]) -> None:
        super().__init__()
        self.changes = changes

    def on_leave(self, original, updated):
        if original in self.changes:
            replacement = self.changes[original]
            return cst.RemovalSentinel.REMOVE if replacement is None else replacement
        return updated


def compiles(text: str) -> bool:
    try:
        compile(text, "<fixed>", "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _edit(ctx: Context, finding: Finding, fix: Fix, probe: Optional[Probe]) -> Optional[Edit]:
    """The fix as one text edit of the source, or None when its result would not parse."""
    try:
        fixed = ctx.module.visit(_Replace(dict(fix.changes))).code
    except Exception:  # a replacement libcst cannot generate: the fix is not offered
        return None
    source = ctx.source
    if fixed == source or not compiles(fixed):
        return None
    start, tail = common_ends(source, fixed)
    return Edit(start, len(source) - tail, fixed[start:len(fixed) - tail], finding.code, fix.title, fix.safety,
                finding.line, finding.column, finding.probe, _fixed_probe(ctx, probe, fix))


def _fixed_probe(ctx: Context, probe: Optional[Probe], fix: Fix) -> Optional[dict]:
    """The finding's probe with each snippet's code as the fix leaves it: what `--verify` runs
    to show that the fix removes the problem."""
    if probe is None:
        return None
    changes = dict(fix.changes)
    fixed = replace(probe, **{f.name: _fixed_snippets(ctx, getattr(probe, f.name), changes) for f in fields(probe)})
    return {**payload(fixed), "fixed": True}


def _fixed_snippets(ctx: Context, value, changes: Dict[cst.CSTNode, Optional[cst.CSTNode]]):
    """Each snippet regenerated from its node with the fix's replacements applied (the node,
    not the text: a name the fix renames at one place occurs at others too)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_fixed_snippets(ctx, item, changes) for item in value)
    if not isinstance(value, Snippet) or value.node is None:
        return value
    node = value.node
    if any(changes.get(above, node) is None for above in ctx.ancestors(node)):
        return replace(value, code="")  # the fix removes the statement the snippet is part of
    fixed = node.visit(_Replace(changes))
    code = "" if isinstance(fixed, cst.RemovalSentinel) else ctx.module.code_for_node(fixed)
    if code == value.code:
        return value
    imports = dict(value.imports)
    for name in set(_IDENTIFIER.findall(code)) - set(imports):
        qualified = ctx.imports.qualify(cst.Name(name))
        if qualified is not None:
            imports[name] = qualified
    return replace(value, code=code, imports=imports)


def fixes_for(path: str, text: str, findings: Optional[Sequence[Finding]] = None,
              rules: Optional[Sequence] = None) -> List[Edit]:
    """The fixes offered for a Python source text, one edit each (offsets into `text`), for an
    editor's quick fixes: all of them, or those of `findings` (matched by line, column, code).
    Empty when the text does not parse."""
    if rules is None:
        rules = selected({f.code for f in findings} if findings is not None else ALL_RULES)
    edits = offered(path, text, rules) or []
    if findings is None:
        return edits
    wanted = {(f.line, f.column, f.code) for f in findings}
    return [e for e in edits if (e.line, e.column, e.code) in wanted]


def offered(path: str, text: str, rules: Sequence) -> Optional[List[Edit]]:
    """Every fix the rules offer for `text`, as edits sorted by position; None when the text
    does not parse (neither by the CST parser nor by CPython)."""
    if not compiles(text):
        return None
    module = parse(path, text)
    if isinstance(module, Finding):
        return None
    ctx = Context(path, text, module)
    located, _ = reports_of(ctx, rules)
    edits = [_edit(ctx, finding, report.fix, report.probe if isinstance(report.probe, Probe) else None)
             for finding, report in located if report.fix is not None]
    return sorted((e for e in edits if e is not None), key=lambda e: (e.start, e.end))


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[:edit.start] + edit.replacement + text[edit.end:]
    return text


# Asked before an edit is applied: (apply it?, a note to report, e.g. the verifier's evidence).
Accept = Callable[[Edit], Tuple[bool, Optional[str]]]


@dataclass
class Outcome:
    """What fixing one text did."""

    text: str
    applied: List[Edit] = field(default_factory=list)
    refused: List[Edit] = field(default_factory=list)  # the verifier showed the fixed code still fails
    notes: List[Tuple[Edit, str]] = field(default_factory=list)


def choose(edits: Sequence[Edit], unsafe: bool, accept: Optional[Accept], outcome: Outcome,
            place: Callable[[Edit], bool]) -> List[Edit]:
    chosen: List[Edit] = []
    for edit in edits:
        if (edit.safety != SAFE and not unsafe) or any(edit.overlaps(c) for c in chosen) or not place(edit):
            continue
        if any(_same(edit, r) for r in outcome.refused):
            continue
        if accept is not None:
            ok, note = accept(edit)
            if note:
                outcome.notes.append((edit, note))
            if not ok:
                outcome.refused.append(edit)
                continue
        chosen.append(edit)
    return chosen


def _same(a: Edit, b: Edit) -> bool:
    return (a.code, a.title, a.replacement) == (b.code, b.title, b.replacement)


def fix_text(path: str, text: str, rules: Sequence, unsafe: bool = False,
             accept: Optional[Accept] = None) -> Outcome:
    """Apply the fixes in rounds until none applies (or MAX_ROUNDS)."""
    outcome = Outcome(text)
    for _ in range(MAX_ROUNDS):
        edits = offered(path, outcome.text, rules)
        if not edits:
            break
        chosen = choose(edits, unsafe, accept, outcome, lambda edit: True)
        if not chosen:
            break
        fixed = apply_edits(outcome.text, chosen)
        if not compiles(fixed):  # each edit parses alone; together they did not: one at a time
            chosen = chosen[:1]
            fixed = apply_edits(outcome.text, chosen)
        outcome.text = fixed
        outcome.applied.extend(chosen)
    return outcome
