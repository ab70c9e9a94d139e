"""Pass 1: a module's summary, what another module's analysis may follow into.

Read with CPython's `ast` (no libcst): the module's top-level functions and classes the engine
could follow (their text holds a rule's token, or they are short enough to be a carrier, or a
followed definition names them, within the module, to a fixpoint) and its module-level values
(literals, and assignments holding a token), as source text with docstrings dropped, each with
its first line in the file; the module's import statements (its TensorFlow/Keras aliases, and
the names it imports from the project: what it re-exports); its `__all__` and star imports. A
summary is JSON, keyed by the module's content hash; the text is parsed by libcst only when a
module that imports it is linted.
"""
from __future__ import annotations

import ast
import hashlib
import json
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from ..catalogue import TOKENS
from ..facts import import_aliases
from .resolve import import_map

# What makes a definition worth following: a rule's token, or a word the models start from.
FOLLOWED = tuple(sorted({token for listed in TOKENS.values() for token in listed}
                        | {"softmax", "sigmoid", "Softmax", "exp", "gradient", "clip", "from_logits",
                           "Sequential", "Model", "Dense", "Conv",  # a model whose last layer is linear (CL012)
                           "log("}))  # a helper applying a log is a log where it is called (CL004)
MAX_VALUE_LINES = 5  # a module-level value longer than this is not a constant anyone folds
# A definition this short is kept whatever it holds: it may carry what it is given (a layer whose
# `call` stacks its inputs, a helper returning its argument reshaped) between two modules' code.
MAX_CARRIER_LINES = 30
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def summarise(path: str, text: str, roots: Sequence[str]) -> dict:
    """The summary of the module at `path` whose source is `text` (empty when it cannot be
    parsed: its importers then see its names as opaque, as before)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _finished({"path": path, "code": "", "chunks": [], "defined": {}, "reads": {}, "uses": {},
                          "spans": {}, "imports": {}, "stars": [], "all": None, "public": [], "aliases": {}})
    lines = text.splitlines(keepends=True)
    entries, stars = import_map(tree.body, path, roots)
    units = _units(tree.body)
    kept = _followed(units, lines, set(entries))
    imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    chunks: List[Tuple[int, int]] = []  # (line in the summary's code, line in the file)
    code: List[str] = []
    spans: Dict[int, List[int]] = {}  # statement -> its first and last line in the summary's code
    for statement in imports + list({id(units[name]): units[name] for name in kept}.values()):
        first = _first_line(statement)
        chunks.append((len(code) + 1, first))
        code += _without_docstrings(statement, lines, first)
        spans[id(statement)] = [chunks[-1][0], len(code)]
    defined = {name: units[name].lineno for name in kept}
    uses = {name: sorted(_read_names(units[name]) & set(kept) - {name}) for name in kept}
    public = _public(tree.body, set(units) | set(entries))
    outside = set(entries) if not stars else None  # with a star import, any name may come from it
    reads = {name: sorted(c for c in chains(units[name]) if c.split(".")[0] not in units
                          and (outside is None or c.split(".")[0] in outside)) for name in kept}
    return _finished({
        "path": path, "code": "".join(code), "chunks": chunks, "defined": defined,
        "reads": {name: found for name, found in reads.items() if found},
        "uses": {name: found for name, found in uses.items() if found},
        "spans": {name: spans[id(units[name])] for name in kept},
        "imports": {name: list(entry) for name, entry in entries.items()}, "stars": stars,
        "all": _dunder_all(tree.body), "public": sorted(public),
        "aliases": _library_aliases(imports, _dunder_all(tree.body), set(entries))})


def _finished(summary: dict) -> dict:
    summary["hash"] = hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()
    return summary


def top_names(body: Sequence[ast.stmt]) -> FrozenSet[str]:
    """The names a module's top level defines or assigns (what its importers may use)."""
    return frozenset(_units(body))


def _units(body: Sequence[ast.stmt]) -> Dict[str, ast.stmt]:
    """name -> the top-level statement that binds it last: a definition, or an assignment of
    one line or a few."""
    units: Dict[str, ast.stmt] = {}
    for statement in body:
        if isinstance(statement, DEFINITIONS):
            units[statement.name] = statement
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if (statement.end_lineno or statement.lineno) - statement.lineno < MAX_VALUE_LINES:
                for target in targets:
                    if isinstance(target, ast.Name):
                        units[target.id] = statement
    return units


def _followed(units: Dict[str, ast.stmt], lines: List[str], imported: Set[str]) -> List[str]:
    """The units to summarise, in source order: those holding a token or a literal value or
    naming what the module imports from the project (a builder may forward another module's
    softmax), and the units they name (to a fixpoint)."""
    def segment(statement: ast.stmt) -> str:
        return "".join(lines[_first_line(statement) - 1:statement.end_lineno])

    read = {id(statement): _read_names(statement) for statement in units.values()}
    kept: Set[str] = {name for name, statement in units.items()
                      if any(token in segment(statement) for token in FOLLOWED) or _literal(statement)
                      or not imported.isdisjoint(read[id(statement)]) or _carrier(statement)}
    pending = list(kept)
    while pending:
        for name in read[id(units[pending.pop()])]:
            if name in units and name not in kept:
                kept.add(name)
                pending.append(name)
    order = {id(statement): index for index, statement in enumerate(units.values())}
    return sorted(kept, key=lambda name: (units[name].lineno, order[id(units[name])]))


def _carrier(statement: ast.stmt) -> bool:
    return isinstance(statement, DEFINITIONS) and (statement.end_lineno or statement.lineno) - statement.lineno \
        < MAX_CARRIER_LINES


def _literal(statement: ast.stmt) -> bool:
    if isinstance(statement, DEFINITIONS):
        return False
    try:
        ast.literal_eval(statement.value)  # type: ignore[attr-defined]
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False
    return True


def _read_names(statement: ast.stmt) -> Set[str]:
    found: Set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found


def chains(node: ast.AST) -> Set[str]:
    """Every name and dotted name (`models.build`, and its prefix `models`) read in `node`."""
    found: Set[str] = set()
    for sub in ast.walk(node):
        parts = []
        while isinstance(sub, ast.Attribute):
            parts.append(sub.attr)
            sub = sub.value
        if isinstance(sub, ast.Name):
            found.add(".".join([sub.id, *reversed(parts)]))
    return found


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", [])
    return min([statement.lineno, *(d.lineno for d in decorators)])


def _without_docstrings(statement: ast.stmt, lines: List[str], first: int) -> List[str]:
    """The statement's lines, each docstring replaced by `pass` (line numbers within it stay)."""
    own = list(lines[first - 1:statement.end_lineno])
    if own and not own[-1].endswith(("\n", "\r")):
        own[-1] += "\n"
    for node in ast.walk(statement):
        body = getattr(node, "body", None)
        if isinstance(node, DEFINITIONS) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            doc = body[0]
            start, end = doc.lineno - first, (doc.end_lineno or doc.lineno) - first
            line = own[start]
            if line[:doc.col_offset].strip():  # `def f(): "doc"` on one line: kept as it is
                continue
            own[start] = line[:doc.col_offset] + "pass\n"
            for number in range(start + 1, end + 1):
                own[number] = "\n"
    return own


def _dunder_all(body: Sequence[ast.stmt]) -> Optional[List[str]]:
    for statement in body:
        if isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                     for t in statement.targets):
            try:
                value = ast.literal_eval(statement.value)
            except (ValueError, TypeError, SyntaxError):
                return None
            return [v for v in value if isinstance(v, str)] if isinstance(value, (list, tuple)) else None
    return None


def _library_aliases(imports: Sequence[ast.stmt], listed: Optional[List[str]], project: Set[str]) -> Dict[str, str]:
    """local name -> dotted name, for what the module's top-level imports of libraries bind
    (`facts.import_aliases`) and a star import of the module binds in its importer too (`from
    utils import *` where utils has `import tensorflow as tf`): those in `__all__`, else those not
    starting with `_`."""
    aliases = {local: full for statement in imports if isinstance(statement, (ast.Import, ast.ImportFrom))
               for local, full in import_aliases(statement).items()}
    return {local: full for local, full in aliases.items() if local not in project
            and (local in listed if listed is not None else not local.startswith("_"))}


def _public(body: Sequence[ast.stmt], bound: Set[str]) -> Set[str]:
    """What `from m import *` binds: `__all__`, else every top-level name not starting with `_`."""
    listed = _dunder_all(body)
    return set(listed) if listed is not None else {name for name in bound if not name.startswith("_")}


def original_line(summary: dict, line: int) -> int:
    """The line in the module's file of a line of its summary's code."""
    chunks = summary["chunks"]
    found = [chunk for chunk in chunks if chunk[0] <= line]
    start, first = found[-1] if found else (1, 1)
    return first + line - start
