"""Structural facts about a module from CPython's `ast` (a tenth of libcst's parse time).

The prefilter's second stage: each rule says, from these facts, whether it *could* fire in the
module (`Rule.could_fire`). A module no enabled rule could fire in is never parsed with libcst.
The facts over-approximate (names bound anywhere, in any scope): a rule may be run for
nothing, but a finding is never skipped (tests compare every result with and without the gate).

One walk collects everything. Questions about a subtree ("which names does this value use?")
are answered from source positions: a node's names are the Names whose start lies inside its
span, found by bisection in one sorted list instead of walking the subtree again.
"""
from __future__ import annotations

import ast
import bisect
from functools import lru_cache
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterator,
    List,
    Optional,
    Set,
    Tuple,
    Union,
)

from .spellings import STAR_EXPORTS, STAR_QUALIFIED, canonical
from .trees import cpython_tree, nesting, walk

GRADIENT_CALLS = {"gradient", "gradients", "compute_gradients"}
Position = Tuple[int, int]
Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def callee(node: ast.Call) -> str:
    """The last part of the called name: `clip_by_norm` for `tf.clip_by_norm(...)`."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


# The nodes that have a place in the source (a module, an expression context have none).
Located = Union[ast.expr, ast.stmt, ast.arg, ast.keyword, ast.alias, ast.excepthandler, ast.pattern]


def _start(node: Located) -> Position:
    return node.lineno, node.col_offset


def end(node: Located) -> Position:
    """Where `node` ends (CPython's parser always sets it; a built node ends where it starts)."""
    return last_line(node), node.end_col_offset if node.end_col_offset is not None else node.col_offset


def last_line(node: Located) -> int:
    return node.end_lineno if node.end_lineno is not None else node.lineno


def first_argument(call: ast.Call, keyword: str) -> Optional[ast.expr]:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


# The dotted names one local may stand for, at most (an alias of an alias of ...: real code has a few).
MAX_ALIASES = 64

class Sorted:
    """(position, label) pairs, sorted once, queried by span."""

    def __init__(self, pairs: List[Tuple[Position, str]]) -> None:
        pairs.sort()
        self.positions = [p for p, _ in pairs]
        self.labels = [label for _, label in pairs]

    def within(self, node: Located, start: Optional[Position] = None) -> List[str]:
        """The labels inside `node`'s span (from `start` when given: decorators come first)."""
        return self.between(start or _start(node), end(node))

    def between(self, start: Position, end: Position) -> List[str]:
        low = bisect.bisect_left(self.positions, start)
        return self.labels[low:bisect.bisect_left(self.positions, end, low)]


def import_aliases(node: Union[ast.Import, ast.ImportFrom]) -> Dict[str, str]:
    """local name -> dotted name, for what one import statement binds (as `names.ImportTable`
    reads it; relative and star imports bind none)."""
    aliases: Dict[str, str] = {}
    for alias in node.names:
        if isinstance(node, ast.Import):
            local = alias.asname or alias.name.split(".")[0]
            aliases[local] = alias.name if alias.asname else local
        elif node.module and not node.level and alias.name != "*":
            aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


class Facts:
    def __init__(self, tree: ast.Module) -> None:
        self.words: Set[str] = set()  # every name, attribute and string constant
        self.stored_attributes: Set[str] = set()
        self.none_compare = False  # something is compared with None
        self.assigned: Dict[str, int] = {}  # name -> how many assignments bind it
        self.calls_by_name: Dict[str, List[ast.Call]] = {}  # callee (last part) -> its calls
        self.keyword_values: Dict[str, List[ast.expr]] = {}  # keyword (or dict key) -> every value given it
        self.argument_callees: Set[str] = set()  # callees whose call is passed straight to another call
        self.statement_callees: Set[str] = set()  # callees whose call is a statement of its own (result unused)
        self.assignments: List[Tuple[ast.expr, ast.expr]] = []  # (target, value), loops included
        self.single_assignments: List[Tuple[ast.expr, ast.expr]] = []  # `target = value` with one target
        self.iterables: List[ast.expr] = []  # what loops, comprehensions and map() iterate
        self.zipped_first: List[ast.expr] = []  # first list of every zip(a, b, ...)
        self.bindings: List[Tuple[str, ast.expr]] = []  # (name, value): assignments and parameter defaults
        self._names: List[Tuple[Position, str]] = []
        self._callees: List[Tuple[Position, str]] = []
        self._functions: List[Tuple[str, Function]] = []
        # for `reduced`: what each top-level statement binds, reads and changes
        self.body = tree.body
        self._stored: List[Tuple[Position, str]] = []  # names bound (assignment, loop, except, match, def)
        self._attribute_loads: List[Tuple[Position, str]] = []
        self._attribute_stores: List[Tuple[Position, str]] = []
        self._imports: List[Tuple[Position, str]] = []  # names imports bind
        self._scope_changes: List[Tuple[Position, str]] = []  # import, global, nonlocal
        # for `refers_to`: what imports bind (as `names.ImportTable` reads them), and every
        # outermost Name/Attribute chain (`tf.nn.softmax` in `tf.nn.softmax(x)[0]`)
        self._import_aliases: Dict[str, str] = {}
        self._star_modules: List[str] = []  # Keras modules star-imported (`ImportTable.star_qualify`)
        self._chains: Set[str] = set()
        self._inner: Set[int] = set()  # ids of the Names/Attributes inside a chain already seen
        self._qualified: Optional[Set[str]] = None
        visitors = {kind: see.__get__(self) for kind, see in _SEE.items()}
        self.nesting = nesting(tree, visitors)  # the nesting gate's measure, from the same walk
        self.callee_aliases = self._find_callee_aliases()
        self._add_aliased_calls()
        self.statement_lines = statement_lines(tree)
        self.names_at = Sorted(self._names)
        self.callees_at = Sorted(self._callees)
        self.calls = set(self.callees_at.labels)  # every callee name
        self._gradient_names: Optional[Set[str]] = None

    @staticmethod
    def of(text: str) -> Optional["Facts"]:
        tree = cpython_tree(text)
        return Facts(tree) if tree is not None else None  # else let the real parser report it

    # --- collection (one call per node of interest) ---------------------------------------

    def _see_name(self, node: ast.Name) -> None:
        self.words.add(node.id)
        if id(node) not in self._inner:
            self._chains.add(node.id)
        self._names.append((_start(node), node.id))
        if not isinstance(node.ctx, ast.Load):
            self._stored.append((_start(node), node.id))

    def _see_attribute(self, node: ast.Attribute) -> None:
        self.words.add(node.attr)
        if id(node) not in self._inner:  # the walk is pre-order: the outermost attribute comes first
            chain = _dotted(node)
            if chain is not None:
                self._chains.add(chain)
        self._inner.add(id(node.value))
        if isinstance(node.ctx, ast.Load):
            self._attribute_loads.append((_start(node), node.attr))
        else:
            self.stored_attributes.add(node.attr)
            self._attribute_stores.append((_start(node), node.attr))

    def _see_import(self, node) -> None:
        self._scope_changes.append((_start(node), "import"))
        self._import_aliases.update(import_aliases(node))
        for alias in node.names:
            self._imports.append((_start(node), (alias.asname or alias.name).split(".")[0]))
            if alias.name == "*" and node.module and not node.level:  # `from keras.layers import *` binds `K`
                for local, full in STAR_EXPORTS.get(node.module, {}).items():
                    self._import_aliases.setdefault(local, full)
                if canonical(node.module + ".x").startswith(STAR_QUALIFIED):
                    self._star_modules.append(node.module)

    def _see_scope_change(self, node) -> None:
        self._scope_changes.append((_start(node), type(node).__name__))

    def _see_bound_name(self, node) -> None:
        """Names bound by `except E as name`, `case name`, `case [*name]`, `class Name`."""
        if isinstance(node, ast.ClassDef):
            self._stored.append((_start(node), node.name))
        elif getattr(node, "name", None) or getattr(node, "rest", None):
            self._stored.append((_start(node), getattr(node, "name", None) or node.rest))

    def _see_constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and len(node.value) < 64:
            self.words.add(node.value)

    def _see_compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        self.none_compare |= any(isinstance(o, ast.Constant) and o.value is None for o in operands)

    def _see_loop(self, node) -> None:
        self.iterables.append(node.iter)
        self.assignments.append((node.target, node.iter))

    def _see_function(self, node) -> None:
        self._functions.append((node.name, node))
        self._stored.append((_start(node), node.name))
        arguments = node.args
        params = [*arguments.posonlyargs, *arguments.args]
        for param, default in zip(params[len(params) - len(arguments.defaults):], arguments.defaults):
            self.bindings.append((param.arg, default))
        for param, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
            if default is not None:
                self.bindings.append((param.arg, default))

    def _see_alias(self, node: ast.alias) -> None:
        self.words.add(node.name.rsplit(".", 1)[-1])

    def _see_dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                self.words.add(key.value)
                # a dict may be splatted into a call (`Adam(**options)`): its values count as keywords
                self.keyword_values.setdefault(key.value, []).append(value)

    def _see_call(self, node: ast.Call) -> None:
        name = callee(node)
        self._callees.append((_start(node), name))
        if isinstance(node.func, ast.Name) and node.func.id == "self":  # `self(x)` runs the class's `call`
            self._attribute_loads += [(_start(node), "call"), (_start(node), "__call__")]
        self.calls_by_name.setdefault(name, []).append(node)
        for keyword in node.keywords:
            if keyword.arg:
                self.words.add(keyword.arg)
                self.keyword_values.setdefault(keyword.arg, []).append(keyword.value)
        for argument in (*node.args, *(k.value for k in node.keywords)):
            if isinstance(argument, ast.Call):
                self.argument_callees.add(callee(argument))
        if name == "map":
            self.iterables.extend(node.args)
        elif name == "zip" and len(node.args) > 1:
            self.zipped_first.append(node.args[0])

    def _see_expression_statement(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Call):
            self.statement_callees.add(callee(node.value))

    def _see_assignment(self, node) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:
            return
        for target in targets:
            self.assignments.append((target, value))
            for name in target_names(target):
                self.assigned[name] = self.assigned.get(name, 0) + 1
                self.bindings.append((name, value))
        if len(targets) == 1:
            self.single_assignments.append((targets[0], value))

    def _find_callee_aliases(self) -> Dict[str, str]:
        """Local name -> the function's own last name, for `clip = tf.clip_by_norm` and
        `from tensorflow import clip_by_norm as clip` (the analysis follows both, so must the gate)."""
        aliases = {local: full.rsplit(".", 1)[-1] for local, full in self._import_aliases.items()}
        for target, value in self.single_assignments:
            if isinstance(target, ast.Name) and isinstance(value, (ast.Name, ast.Attribute)):
                aliases[target.id] = _last_part(value)
        return {local: own for local, own in aliases.items() if local != own}

    def callee(self, call: ast.Call) -> str:
        """The last part of what `call` calls, through the module's aliases (`callee` at the top
        of this module reads only how the call is written)."""
        return self._own_name(callee(call))

    def _own_name(self, name: str) -> str:
        for _ in range(4):  # an alias of an alias
            name = self.callee_aliases.get(name, name)
        return name

    def _add_aliased_calls(self) -> None:
        """Every fact keyed by a callee's name also under the name it is an alias of."""
        aliased = [name for name in self.calls_by_name if name in self.callee_aliases]
        for name in aliased:
            self.calls_by_name.setdefault(self._own_name(name), []).extend(self.calls_by_name[name])
        if aliased:
            self._callees.extend((at, self._own_name(name)) for at, name in list(self._callees)
                                 if name in self.callee_aliases)
            for names in (self.argument_callees, self.statement_callees):
                names.update(self._own_name(name) for name in list(names))

    # --- derived facts ----------------------------------------------------------------------

    @property
    def gradient_names(self) -> Set[str]:
        """Names that may hold gradients: bound from a gradient call, from a local function that
        contains one, or from any expression using such a name (to a fixpoint)."""
        if self._gradient_names is None:
            self._gradient_names = self._find_gradient_names()
        return self._gradient_names

    def _find_gradient_names(self) -> Set[str]:
        if not self.mentions_gradients():
            return set()
        producers = set(GRADIENT_CALLS)
        for target, value in self.single_assignments:  # `grad = tape.gradient`, then `grad(loss, ...)`
            if isinstance(value, (ast.Name, ast.Attribute)) and _last_part(value) in GRADIENT_CALLS:
                producers.update(target_names(target))
        for name, function in self._functions:
            if not GRADIENT_CALLS.isdisjoint(self.callees_at.within(function, (first_line(function), 0))):
                producers.add(name)
        flows = [(set(target_names(target)), set(self.names_at.within(value)),
                  not producers.isdisjoint(self.callees_at.within(value)))
                 for target, value in self.assignments]
        # a function's parameters carry what any call of it (by name or as a method) passes
        parameters: Dict[str, Set[str]] = {}
        for name, function in self._functions:
            arguments = function.args
            parameters.setdefault(name, set()).update(
                a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs))
        for name, params in parameters.items():
            for call in self.calls_by_name.get(name, ()):
                for passed in (*call.args, *(k.value for k in call.keywords)):
                    flows.append((params, set(self.names_at.within(passed)),
                                  not producers.isdisjoint(self.callees_at.within(passed))))
        names: Set[str] = set()
        changed = True
        while changed:
            changed = False
            for targets, used, calls_producer in flows:
                if not targets <= names and (calls_producer or not used.isdisjoint(names)):
                    names |= targets
                    changed = True
        return names

    def labels_at(self) -> Dict[str, "Sorted"]:
        """Where each kind of name is (for `reduction.reduced`): bound, imported, scope changes,
        attribute loads and stores."""
        return {name: Sorted(list(pairs)) for name, pairs in (
            ("stored", self._stored), ("imports", self._imports), ("scope", self._scope_changes),
            ("loads", self._attribute_loads), ("stores", self._attribute_stores))}

    def carries_gradients(self, node: ast.expr) -> bool:
        """Does `node` use a name that may hold gradients, or call a gradient function?"""
        return not self.gradient_names.isdisjoint(self.names_at.within(node)) \
            or not GRADIENT_CALLS.isdisjoint(self.callees_at.within(node))

    # --- questions the rules ask ------------------------------------------------------------

    def has(self, *words: str) -> bool:
        return any(word in self.words for word in words)

    def refers_to(self, names: FrozenSet[str]) -> bool:
        """Could some expression of the module stand for one of these canonical TF/Keras names
        (`ctx.qualify` resolves a name through the imports, then through local aliases)? True
        when a chain qualifies to one of them, to an attribute of one (`Adam.from_config`), or
        to a namespace holding one (`m = tf.linalg` makes `m.norm` one). Sound for any carrier:
        every alias starts from a chain written here."""
        namespaces = _with_namespaces(names)
        return any(name in namespaces or any(prefix in names for prefix in _prefixes(name))
                   for name in self.qualified())

    def add_aliases(self, aliases: Dict[str, str]) -> None:
        """Names bound to libraries elsewhere, for `refers_to`: what a star import of the
        project's modules binds (the module's own imports stand)."""
        for local, full in aliases.items():
            self._import_aliases.setdefault(local, full)
        self._qualified = None

    def qualified(self) -> Set[str]:
        """The canonical names of the module's chains whose head an import binds."""
        if self._qualified is None:
            self._qualified = set()
            heads = self._module_aliases()
            for chain in self._chains:
                head, _, rest = chain.partition(".")
                for full in heads.get(head, ()):
                    dotted = f"{full}.{rest}" if rest else full
                    # a namespace's own spelling: `tensorflow.compat.v1` stands for `tensorflow`
                    self._qualified.update((canonical(dotted), canonical(dotted + ".x")[:-2]))
                if head not in heads and head[:1].isupper():  # any star import may bind a class name
                    self._qualified.update(canonical(f"{module}.{chain}") for module in self._star_modules)
        return self._qualified

    def _module_aliases(self) -> Dict[str, Set[str]]:
        """Local name -> every dotted name it may stand for: what its imports bind, and what an
        assignment of an imported chain binds (`tf = tensorflow.compat.v1`; an alias of an alias
        too), as the engine's `alias_of` follows them."""
        heads = {local: {full} for local, full in self._import_aliases.items()}
        for _ in range(4):
            grown = False
            for name, value in self.bindings:
                chain = _dotted(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
                head, _, rest = (chain or "").partition(".")
                if head == name or len(heads.get(name, ())) >= MAX_ALIASES:
                    continue  # `self.step = self._step` aliases nothing new, and each round would lengthen it
                for full in list(heads.get(head, ())):
                    dotted = f"{full}.{rest}" if rest else full
                    if dotted not in heads.setdefault(name, set()):
                        heads[name].add(dotted)
                        grown = True
            if not grown:
                break
        return heads

    def iterates_gradients(self) -> bool:
        """Could a value that holds gradients be looped over (for, comprehension, map)? The module
        computes gradients and loops over something: the engine's carriers (returns, attributes,
        containers, instances) take a gradient list anywhere, so only that much is sound. It costs
        little: 8 of keras/src's 770 files compute gradients."""
        return self.mentions_gradients() and bool(self.iterables)

    def mentions_gradients(self) -> bool:
        """A gradient function is named (called, or bound to an alias first)."""
        return not self.words.isdisjoint(GRADIENT_CALLS)


def _last_part(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _dotted(node: ast.expr) -> Optional[str]:
    parts = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    parts.append(current.id)
    return ".".join(reversed(parts))


def _prefixes(dotted: str) -> Iterator[str]:
    """`a.b` and `a` for `a.b.c`."""
    end = dotted.rfind(".")
    while end > 0:
        yield dotted[:end]
        end = dotted.rfind(".", 0, end)


@lru_cache(maxsize=64)
def _with_namespaces(names: FrozenSet[str]) -> FrozenSet[str]:
    """`names` and every namespace on their way: `tensorflow`, `tensorflow.linalg`, ..."""
    found = set(names)
    for name in names:
        parts = name.split(".")
        found.update(".".join(parts[:end]) for end in range(1, len(parts)))
    return frozenset(found)


_SEE: Dict[type, Callable[[Facts, Any], None]] = {
    ast.Call: Facts._see_call,
    ast.Name: Facts._see_name,
    ast.Attribute: Facts._see_attribute,
    ast.Constant: Facts._see_constant,
    ast.Assign: Facts._see_assignment,
    ast.AnnAssign: Facts._see_assignment,
    ast.AugAssign: Facts._see_assignment,
    ast.Compare: Facts._see_compare,
    ast.Expr: Facts._see_expression_statement,
    ast.For: Facts._see_loop,
    ast.AsyncFor: Facts._see_loop,
    ast.comprehension: Facts._see_loop,
    ast.FunctionDef: Facts._see_function,
    ast.AsyncFunctionDef: Facts._see_function,
    ast.alias: Facts._see_alias,
    ast.Dict: Facts._see_dict,
    ast.Import: Facts._see_import,
    ast.ImportFrom: Facts._see_import,
    ast.Global: Facts._see_scope_change,
    ast.Nonlocal: Facts._see_scope_change,
    ast.ClassDef: Facts._see_bound_name,
    ast.ExceptHandler: Facts._see_bound_name,
    **{kind: Facts._see_bound_name
       for kind in (getattr(ast, name, None) for name in ("MatchAs", "MatchStar", "MatchMapping"))
       if kind},
}


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
def first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None)
    return min(statement.lineno, *(d.lineno for d in decorators)) if decorators else statement.lineno


def statement_lines(tree: ast.Module) -> List[int]:
    """The first line of each top-level statement of CPython's ast, decorators included."""
    return [first_line(statement) for statement in tree.body]


def target_names(target: ast.AST) -> List[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    return [n.id for n in walk(target) if isinstance(n, ast.Name)]
