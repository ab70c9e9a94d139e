"""The reduced parse: a module with the definitions no rule can see blanked out, so libcst
parses less (line numbers unchanged). Decided from CPython's tree (`facts.Facts`).
"""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

from .facts import DEFINITIONS, Facts, Position, Sorted, end, first_line, last_line
from .trees import split_lines


def reduced(facts: Facts, text: str, words: Sequence[str]) -> Tuple[str, List[int]]:
    """`text` with the definitions no rule can see blanked out (line numbers unchanged), and
    the first line of each top-level statement kept.

    The units are the top-level statements, except that a class is split into its methods
    and the rest of it. Rules follow names into definitions and out of them to module
    bindings, attributes module-wide (methods are attributes too), and a class's
    constructor and `call` from its name; nothing else. So a definition is kept when it
    holds one of `words` (the running rules' tokens) or imports or declares
    `global`/`nonlocal`; reads a name bound by a kept unit that holds such a word or reads
    such a name (to a fixpoint; a method binds its attribute and its class's name; a method
    call as a statement, `parser.add_argument(...)`, binds its receiver); is
    named by a kept unit (a method: as an attribute; `self(x)` names `call`); stores an
    attribute a kept unit loads or loads one it stores; is a method a class runs without naming it (`__init__`, `call`,
    ...) of a kept class, or any method of a class whose rest holds such a word (Keras
    calls a `Callback`'s `on_epoch_end`); or is the class of a kept method. Every other
    statement is always kept.
    """
    body = facts.body
    if not any(isinstance(statement, DEFINITIONS) for statement in body):
        return text, facts.statement_lines
    lines = split_lines(text)
    at = facts.labels_at()
    units, heads = _units(body, lines)
    shapes = [_shape(facts, unit, lines, words, at) for unit in units]
    keep = _kept(units, shapes)
    if all(keep):
        return text, facts.statement_lines
    original = list(lines)
    for unit, kept in zip(units, keep):
        if not kept:
            for number in range(unit.first, unit.last + 1):
                line = lines[number - 1]
                if not line.lstrip().startswith("#"):  # comments stay: `# cliplint: noqa` may be one
                    lines[number - 1] = line[len(line.rstrip("\r\n")):]
    for index, unit in enumerate(units):
        if keep[index] and unit.members and unit.only_methods and not any(keep[m] for m in unit.members):
            first = units[unit.members[0]].first  # a class body may not be empty
            indent = original[first - 1][:len(original[first - 1]) - len(original[first - 1].lstrip())]
            lines[first - 1] = indent + "pass" + lines[first - 1]
    return "".join(lines), [line for line, head in zip(facts.statement_lines, heads) if keep[head]]

def _shape(facts: Facts, unit: "_Unit", lines: List[str], words: Sequence[str],
           at: Dict[str, Sorted]) -> "_Shape":
    def labels(kind: str) -> List[str]:
        return [label for low, high in unit.spans for label in at[kind].between(low, high)]

    segment = "".join(lines[number - 1] for number in unit.numbers())
    return _Shape(
        words=any(word in segment for word in words),
        scope_changes=bool(labels("scope")),
        reads={label for low, high in unit.spans for label in facts.names_at.between(low, high)},
        binds=unit.binds if unit.definition else set(labels("stored")) | set(labels("imports")) | unit.binds,
        loads=set(labels("loads")), stores=set(labels("stores")))


class _Unit(NamedTuple):
    """A part of the module `reduced` keeps or blanks whole: a top-level statement, a
    method, or the rest of a class (its header and every statement that is not a method)."""

    first: int  # its lines, decorators included
    last: int
    spans: List[Tuple[Position, Position]]  # where its names are (a class's rest: the lines between its methods)
    definition: bool
    binds: Set[str]  # a definition's name in the module (a method binds none)
    owner: Optional[int] = None  # a method: the unit of its class's rest
    method: str = ""  # a method's name: an attribute
    implicit: bool = False  # a method a class runs without naming it
    members: Tuple[int, ...] = ()  # a class's rest: the units of its methods
    only_methods: bool = False  # a class's rest: its body is methods only

    def numbers(self) -> Iterator[int]:
        """Its line numbers (a class's rest: not its methods' lines)."""
        for (low, _), (high, column) in self.spans:  # a span ends in its last line, or where the next begins
            yield from range(low, high + 1 if column else high)


# Methods that run without their name being written: the constructor, a layer's or model's call
# (`model(x)`), a Sonnet 1 module's `_build` (run by calling it), and the rest of the data model
# (`with`, `for`, `[]`, operators).
_IMPLICIT_METHODS = {"call", "build", "train_step", "test_step", "predict_step", "compute_loss", "_build"}


def _units(body: List[ast.stmt], lines: List[str]) -> Tuple[List[_Unit], List[int]]:
    """The units of a module's body, and for each top-level statement the index of its unit
    (a class's: its rest)."""
    units: List[_Unit] = []
    heads: List[int] = []
    for statement in body:
        heads.append(len(units))
        first, last = first_line(statement), last_line(statement)
        methods = [m for m in statement.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and _starts_its_line(m, lines)] if isinstance(statement, ast.ClassDef) else []
        if not isinstance(statement, ast.ClassDef) or not methods:
            binds = {getattr(statement, "name", "")} | _changed(statement)
            units.append(_Unit(first, last, [((first, 0), end(statement))],
                               isinstance(statement, DEFINITIONS), binds))
            continue
        head = len(units)
        bounds = [(first, 0)] + [edge for m in methods for edge in ((first_line(m), 0), (last_line(m) + 1, 0))]
        bounds.append((last + 1, 0))
        spans = [(low, high) for low, high in zip(bounds[::2], bounds[1::2]) if low < high]
        members = tuple(range(head + 1, head + 1 + len(methods)))
        units.append(_Unit(first, last, spans, True, {statement.name}, members=members,
                           only_methods=len(methods) == len(statement.body)))
        for method in methods:
            name = method.name
            units.append(_Unit(first_line(method), last_line(method),
                               [((first_line(method), 0), end(method))], True, set(), owner=head, method=name,
                               implicit=name in _IMPLICIT_METHODS or name.startswith("__")))
    return units, heads


def _changed(statement: ast.stmt) -> Set[str]:
    """The name a statement that is a method call changes in place (`parser` in
    `parser.add_argument("--head", default="softmax")`): what is read from it afterwards
    (`FLAGS = parser.parse_args()`) may carry what the call put in."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    func = call.func if isinstance(call, ast.Call) else None
    while isinstance(func, ast.Attribute):
        func = func.value
    return {func.id} if isinstance(func, ast.Name) and func is not getattr(call, "func", None) else set()


def _starts_its_line(method: ast.stmt, lines: List[str]) -> bool:
    """Nothing but indentation before the method (or its first decorator) on its first line, so
    blanking its lines leaves the rest of the class alone (`class A: def f(self): ...` is one line)."""
    first = first_line(method)
    start = min([method, *getattr(method, "decorator_list", [])], key=lambda n: n.lineno)
    return not lines[first - 1][:start.col_offset].strip()


def _kept(units: List[_Unit], shapes: List["_Shape"]) -> List[bool]:
    """Which units the rules may see (see `reduced`), to a fixpoint."""
    keep = [not unit.definition or shape.words or shape.scope_changes for unit, shape in zip(units, shapes)]
    changed = True
    while changed:
        changed = False
        tainted, tainted_methods = _tainted(units, shapes, keep)
        read_by_kept = set().union(*(shape.reads for shape, kept in zip(shapes, keep) if kept))
        loaded_by_kept = set().union(*(shape.loads for shape, kept in zip(shapes, keep) if kept))
        stored_by_kept = set().union(*(shape.stores for shape, kept in zip(shapes, keep) if kept))
        for index, (unit, shape) in enumerate(zip(units, shapes)):
            if keep[index]:
                continue
            flows_in = shape.reads & tainted or shape.loads & (tainted_methods | stored_by_kept)
            named = shape.binds & read_by_kept or unit.method in loaded_by_kept
            run_by_class = unit.owner is not None and keep[unit.owner] \
                and (unit.implicit or shapes[unit.owner].words)
            if flows_in or named or shape.stores & loaded_by_kept or run_by_class or any(keep[m] for m in unit.members):
                keep[index] = changed = True
    return keep


class _Shape(NamedTuple):
    """What one unit holds, binds, reads and stores (see `reduced`)."""

    words: bool  # one of the running rules' tokens
    scope_changes: bool  # import, global, nonlocal
    reads: Set[str]  # every name in it
    binds: Set[str]  # names it binds at module level (over-approximated)
    loads: Set[str]  # attribute names read
    stores: Set[str]  # attribute names assigned


def _tainted(units: List[_Unit], shapes: List[_Shape], keep: List[bool]) -> Tuple[Set[str], Set[str]]:
    """Names bound by kept units holding a token, or reading such a name (fixpoint), and the
    methods among them (attribute names); a method binds its class's name too."""
    tainted: Set[str] = set()
    methods: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for unit, shape, kept in zip(units, shapes, keep):
            binds = shape.binds if unit.owner is None else shapes[unit.owner].binds
            if kept and not (binds <= tainted and unit.method in methods | {""}) \
                    and (shape.words or shape.reads & tainted):
                tainted |= binds
                methods |= {unit.method} - {""}
                changed = True
    return tainted, methods
