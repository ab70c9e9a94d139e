"""Autofix: the fixes rules offer, as text edits, applied in rounds; `--add-noqa`.

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
import difflib
import io
import re
import tokenize
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import libcst as cst

from .analysis import Context, parse, reports_of
from .discovery import Target, discover, unique
from .files import FileTooLarge, common_ends, decode_python, encode_python, read_regular, write_bytes_atomically
from .findings import SAFE, Finding, Fix, Report, bad_input
from .lint import prefilter
from .notebook import Program, cell_sources, python_cells, replace_sources
from .probes import Probe, Snippet, payload
from .rules import ALL_RULES
from .suppress import NOQA, noqa_comments, noqa_lines

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
        return (*_point(text, self.start), *_point(text, self.end))


def _point(text: str, offset: int) -> Tuple[int, int]:
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


def _edit(ctx: Context, finding: Finding, report: Report) -> Optional[Edit]:
    """The fix as one text edit of the source, or None when its result would not parse."""
    fix = report.fix
    try:
        fixed = ctx.module.visit(_Replace(dict(fix.changes))).code
    except Exception:  # a replacement libcst cannot generate: the fix is not offered
        return None
    source = ctx.source
    if fixed == source or not compiles(fixed):
        return None
    start, tail = common_ends(source, fixed)
    return Edit(start, len(source) - tail, fixed[start:len(fixed) - tail], finding.code, fix.title, fix.safety,
                finding.line, finding.column, finding.probe, _fixed_probe(ctx, report.probe, fix))


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


def _rules_by_code(codes) -> list:
    return [ALL_RULES[c] for c in sorted(codes) if c in ALL_RULES]


def fixes_for(path: str, text: str, findings: Optional[Sequence[Finding]] = None,
              rules: Optional[Sequence] = None) -> List[Edit]:
    """The fixes offered for a Python source text, one edit each (offsets into `text`), for an
    editor's quick fixes: all of them, or those of `findings` (matched by line, column, code).
    Empty when the text does not parse."""
    if rules is None:
        rules = _rules_by_code({f.code for f in findings} if findings is not None else _all_codes())
    edits = offered(path, text, rules) or []
    if findings is None:
        return edits
    wanted = {(f.line, f.column, f.code) for f in findings}
    return [e for e in edits if (e.line, e.column, e.code) in wanted]


def _all_codes():
    return ALL_RULES.keys()


def offered(path: str, text: str, rules: Sequence) -> Optional[List[Edit]]:
    """Every fix the rules offer for `text`, as edits sorted by position; None when the text
    does not parse (neither by the CST parser nor by CPython)."""
    if not compiles(text):
        return None
    module, failure = parse(path, text)
    if failure is not None:
        return None
    ctx = Context(path, text, module)
    located, _ = reports_of(ctx, rules)
    edits = [_edit(ctx, finding, report) for finding, report in located if report.fix is not None]
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


def _choose(edits: Sequence[Edit], unsafe: bool, accept: Optional[Accept], outcome: Outcome,
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
        chosen = _choose(edits, unsafe, accept, outcome, lambda edit: True)
        if not chosen:
            break
        fixed = apply_edits(outcome.text, chosen)
        if not compiles(fixed):  # each edit parses alone; together they did not: one at a time
            chosen = chosen[:1]
            fixed = apply_edits(outcome.text, chosen)
        outcome.text = fixed
        outcome.applied.extend(chosen)
    return outcome


# --- files ----------------------------------------------------------------------------------

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
    if failure is not None:
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
        chosen = _choose(edits, unsafe, accept, outcome, lambda edit: cells.locate(edit) is not None)
        if not chosen:
            break
        placed = [(edit, cells.locate(edit)) for edit in chosen]  # before any cell changes
        for edit, (number, start, end) in sorted(placed, key=lambda pair: pair[0].start, reverse=True):
            sources[number] = sources[number][:start] + edit.replacement + sources[number][end:]
        outcome.applied.extend(replace(edit, cell=number, line=cells.program.locate(edit.line)[1])
                               for edit, (number, _, _) in placed)
    changed = {n: s for n, s in sources.items() if s != original[n]}
    after = replace_sources(raw, changed).encode("utf-8") if changed else data
    diff = "".join(_diff(original[n], changed[n], f"{display}:cell {n}", f"{display}:cell {n}")
                   for n in sorted(changed))
    return FileFix(display, data, after, outcome.applied, outcome.refused, outcome.notes, diff)


# --- the edits of each fix, for the machine outputs ---------------------------------------------

# (cell or None, line, column or 0 in a notebook, code) -> (new text, (line, column), (end line, end column))
Placed = Dict[Tuple[Optional[int], int, int, str], Tuple[str, Tuple[int, int], Tuple[int, int]]]


def placed_fixes(path: str, data: bytes, codes) -> Placed:
    """Every fix the rules `codes` offer in a file, placed as 1-based ranges of its text (of
    the cell's source in a notebook, where a line IPython rewrites is never edited). A
    notebook's key has no column: its findings' columns count indentation the program strips."""
    rules = _rules_by_code(codes)
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
                placed[(number, line, 0, edit.code)] = (edit.replacement, _point(source, start), _point(source, end))
        return placed
    text, failure = decode_python(path, data)
    if failure is not None:
        return {}
    return {(None, e.line, e.column, e.code): (e.replacement, _point(text, e.start), _point(text, e.end))
            for e in offered(path, text, rules) or []}


# --- --add-noqa -----------------------------------------------------------------------------

def add_noqa_text(text: str, findings: Sequence[Finding]) -> Tuple[str, int]:
    """`# noqa: CODES` on the line of each finding, merged into a `# noqa` comment already there;
    a line that ends inside a string moves the comment to where the string ends."""
    wanted: Dict[int, set] = {}
    ends = _string_ends(text)
    for finding in findings:
        line = finding.line
        while line in ends:
            line = ends[line]
        wanted.setdefault(line, set()).add(finding.code)
    return _with_noqa(text, wanted, noqa_comments(text))


def add_noqa_config(text: str, findings: Sequence[Finding]) -> Tuple[str, int]:
    """The same for a YAML or TOML training config, where `#` starts a comment on any line
    (a finding is on the line of a key, never inside a multi-line string)."""
    wanted: Dict[int, set] = {}
    for finding in findings:
        wanted.setdefault(finding.line, set()).add(finding.code)
    return _with_noqa(text, wanted, noqa_lines(text))


def _with_noqa(text: str, wanted: Dict[int, set], existing: Dict[int, Optional[set]]) -> Tuple[str, int]:
    """`text` with `# noqa: CODES` on each line of `wanted`, merged into the comment there."""
    lines = text.splitlines(keepends=True)
    added = 0
    for number, codes in wanted.items():
        if not 1 <= number <= len(lines):
            continue
        body = lines[number - 1]
        ending = body[len(body.rstrip("\r\n")):]
        body = body[:len(body) - len(ending)]
        if number in existing and existing[number] is None:
            continue  # a noqa comment without codes already suppresses everything
        merged = sorted(codes | (existing.get(number) or set()))
        if number in existing:
            body = NOQA.sub("# noqa: " + ", ".join(merged), body, count=1)
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(merged)
        lines[number - 1] = body + ending
        added += len(codes - (existing.get(number) or set()))
    return "".join(lines), added


def _string_ends(text: str) -> Dict[int, int]:
    """Line -> the line a token spanning its end (a triple-quoted string) ends on."""
    ends: Dict[int, int] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.end[0] > token.start[0] and token.type != tokenize.NL and token.type != tokenize.NEWLINE:
                for line in range(token.start[0], token.end[0]):
                    ends[line] = token.end[0]
    except (tokenize.TokenError, SyntaxError):
        pass
    for number, line in enumerate(text.splitlines(), 1):  # a comment cannot follow a backslash continuation
        if line.endswith("\\") and number not in ends:
            ends[number] = number + 1
    return ends


# --- a run over paths -------------------------------------------------------------------------

FIXABLE_SUFFIXES = (".py", ".pyi", ".ipynb")


def fix_paths(paths: Sequence[str], config, unsafe: Optional[bool] = None, write: bool = True,
              everywhere: bool = False, accept: Optional[Accept] = None) -> Tuple[List[FileFix], List[Finding]]:
    """Fix every Python file and notebook under `paths` whose settings ask for fixing (`--fix`
    or `fix = true`; all of them when `everywhere`, as for `--diff`). Returns what was done per
    file that had something to fix, and CL000 findings for files that could not be read.
    `unsafe`: the `--unsafe-fixes` flag when given, else each file's `unsafe-fixes` setting."""
    results, unreadable = [], []
    for target in unique(discover(paths, config)):
        if target.kind != "file" or not target.path.lower().endswith(FIXABLE_SUFFIXES):
            continue
        if not (everywhere or target.settings.fix):
            continue
        data, failure = _read(target)
        if failure is not None:
            unreadable.append(failure)
            continue
        result = fix_data(target, data, unsafe, accept)
        if result is not None and (result.applied or result.refused or result.notes):
            results.append(result)
            if write and result.changed:
                write_bytes_atomically(target.path, result.after)
    return results, unreadable


def fix_data(target: Target, data: bytes, unsafe: Optional[bool] = None,
             accept: Optional[Accept] = None) -> Optional[FileFix]:
    rules = _rules_by_code(target.settings.enabled_codes(target.path))
    if not prefilter(data, rules):
        return None
    use_unsafe = unsafe if unsafe is not None else target.settings.unsafe_fixes
    fixer = fix_notebook if target.path.lower().endswith(".ipynb") else fix_python
    return fixer(target.path, target.display, data, rules, use_unsafe, accept)


def _read(target: Target) -> Tuple[Optional[bytes], Optional[Finding]]:
    try:
        return read_regular(target.path, target.settings.max_file_size), None
    except FileTooLarge:
        return None, None
    except OSError as err:
        return None, bad_input(target.display, f"cannot read: {err.strerror or err}")


NOQA_SUFFIXES = (".py", ".pyi", ".ipynb", ".yaml", ".yml", ".toml")  # the kinds that have comments


def add_noqa_paths(findings: Sequence[Finding], targets: Dict[str, Target]) -> Tuple[int, List[Finding]]:
    """`--add-noqa` for the findings of a run: the number of codes added, and the findings no
    comment can suppress (a JSON config, a `.keras` archive, CL000, a file that changed)."""
    by_path: Dict[str, List[Finding]] = {}
    left: List[Finding] = []
    for finding in findings:
        if finding.code != "CL000" and finding.path in targets and finding.path.lower().endswith(NOQA_SUFFIXES):
            by_path.setdefault(finding.path, []).append(finding)
        else:
            left.append(finding)
    added = 0
    for display, found in sorted(by_path.items()):
        target = targets[display]
        data, failure = _read(target)
        after, count = _noqa_bytes(target.path, data, found) if data is not None else (data, 0)
        if count and after != data:
            write_bytes_atomically(target.path, after)
            added += count
        elif not count:
            left.extend(found)
    return added, sorted(left, key=Finding.sort_key)


def _noqa_bytes(path: str, data: bytes, findings: Sequence[Finding]) -> Tuple[bytes, int]:
    if path.lower().endswith(".ipynb"):
        raw, sources = data.decode("utf-8"), cell_sources(data)
        changed, added = {}, 0
        for number in sorted({f.cell for f in findings if f.cell in sources}):
            text, count = add_noqa_text(sources[number], [f for f in findings if f.cell == number])
            if count:
                changed[number], added = text, added + count
        return (replace_sources(raw, changed).encode("utf-8") if changed else data), added
    if path.lower().endswith((".yaml", ".yml", ".toml")):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data, 0
        fixed, added = add_noqa_config(text, findings)
        return (fixed.encode("utf-8") if added else data), added
    text, failure = decode_python(path, data)
    if failure is not None:
        return data, 0
    fixed, added = add_noqa_text(text, findings)
    return (encode_python(fixed, data) if added else data), added


def where(display: str, edit: Edit) -> str:
    """`path:line:col`, or `path:cell N:line:col` in a notebook, as findings are shown."""
    cell = f"cell {edit.cell}:" if edit.cell is not None else ""
    return f"{display}:{cell}{edit.line}:{edit.column}"


class FixVerifier:
    """`--fix --verify`: each fix's probe runs on the original snippet and on the fixed one,
    through the verifier's own checks and worker. A fix whose fixed snippet still reproduces
    the problem is not applied."""

    def __init__(self, timeout: float) -> None:
        from .verify import Session  # TensorFlow's worker: only when verifying

        self.session = Session(timeout)

    def __call__(self, edit: Edit) -> Tuple[bool, Optional[str]]:
        if edit.fixed_probe is None:
            return True, f"fixed, not verified: no probe for {edit.code}"
        before = self._verdict(edit, edit.probe)
        after = self._verdict(edit, edit.fixed_probe)
        if after["verdict"] == "confirmed":
            return False, f"fix not applied: the fixed code still reproduces the problem: {after['evidence']}"
        if after["verdict"] == "not-reproduced":
            shown = f" (before the fix: {before['evidence']})" if before["verdict"] == "confirmed" else ""
            return True, f"fixed and verified: {after['evidence']}{shown}"
        return True, f"fixed, not verified ({after['verdict']}): {after['evidence']}"

    def _verdict(self, edit: Edit, probe: dict) -> dict:
        finding = Finding("", edit.line, edit.column, edit.line, edit.column, edit.code, "", "", "", probe=probe)
        return self.session.verify(finding)

    def close(self) -> None:
        self.session.close()
