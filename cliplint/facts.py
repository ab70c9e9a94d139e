"""Structural facts about a module from CPython's `ast` (a tenth of libcst's parse time).

The prefilter's second stage: each rule says, from these facts, whether it *could* fire in the
module (`Rule.could_fire`). A module no enabled rule could fire in is never parsed with libcst.
The facts over-approximate (names bound anywhere, in any scope): a rule may be run for
nothing, but a finding is never skipped (tests compare every result with and without the gate).
"""
from __future__ import annotations

import ast
from typing import Dict, Optional, Set

CLIP_OPTIONS = {"clipnorm", "clipvalue", "global_clipnorm"}
GRADIENT_CALLS = {"gradient", "gradients", "compute_gradients"}


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


class Facts:
    def __init__(self, tree: ast.AST) -> None:
        self.calls: Set[str] = set()
        self.words: Set[str] = set()  # every name, attribute and string constant
        self.stored_attributes: Set[str] = set()
        self.keywords: Set[str] = set()
        self.multi_clip_call = False
        self.none_compare = False
        self.nonpositive: Set[str] = set()  # names bound to a numeric literal <= 0 (or arithmetic)
        self.numeric: Set[str] = set()  # names bound to a numeric literal or arithmetic
        self.assigned: Dict[str, int] = {}
        self.methods: Set[str] = set()
        self._assignments = []
        self._iterables = []
        self._functions: Dict[str, ast.AST] = {}
        self._clip_args = []
        self._value_bounds = []
        self._clip_assigns = []
        self.clip_passed_on = False
        self.compiled_optimizers: Set[str] = set()
        self._bindings = []  # (name, value) for the numeric fixpoint
        for node in ast.walk(tree):
            self._see(node)
        self._resolve_numbers()
        self.gradient_names = self._gradient_names()

    @staticmethod
    def of(text: str) -> Optional["Facts"]:
        try:
            return Facts(ast.parse(text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None  # let the real parser report it

    # --- collection -------------------------------------------------------------------------

    def _see(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            self._see_call(node)
        elif isinstance(node, ast.Name):
            self.words.add(node.id)
        elif isinstance(node, ast.Attribute):
            self.words.add(node.attr)
            if isinstance(node.ctx, ast.Store):
                self.stored_attributes.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 64:
            self.words.add(node.value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self._see_assignment(node)
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            self.none_compare |= any(isinstance(o, ast.Constant) and o.value is None for o in operands)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            self._iterables.append(node.iter)
            self._assignments.append((node.target, node.iter))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._functions[node.name] = node
            self.methods.add(node.name)
            self._see_defaults(node.args)
        elif isinstance(node, ast.alias):
            self.words.add(node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.Dict):
            self.words.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))

    def _see_call(self, node: ast.Call) -> None:
        name = _callee(node)
        self.calls.add(name)
        keywords = {k.arg for k in node.keywords if k.arg}
        self.keywords |= keywords
        self.words |= keywords
        self.multi_clip_call |= len(keywords & CLIP_OPTIONS) > 1
        if name == "compile":
            optimizer = next((k.value for k in node.keywords if k.arg == "optimizer"), node.args[0] if node.args else None)
            if isinstance(optimizer, ast.Name):
                self.compiled_optimizers.add(optimizer.id)
        if name in ("map", "zip", "enumerate", "list", "tuple"):
            self._iterables.extend(node.args)
        for keyword in node.keywords:
            if keyword.arg in CLIP_OPTIONS or keyword.arg == "clip_norm":
                self._clip_args.append(keyword.value)
        if name in ("clip_by_norm", "clip_by_global_norm"):
            self._clip_args.extend(node.args[1:2])
        if name == "clip_by_value":
            bounds = {k.arg: k.value for k in node.keywords}
            low = node.args[1] if len(node.args) > 1 else bounds.get("clip_value_min")
            high = node.args[2] if len(node.args) > 2 else bounds.get("clip_value_max")
            self._value_bounds.append((low, high))
        self.clip_passed_on |= any(isinstance(a, ast.Call) and _callee(a) == "clip_by_global_norm"
                                   for a in [*node.args, *(k.value for k in node.keywords)])

    def _see_assignment(self, node) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:
            return
        for target in targets:
            self._assignments.append((target, value))
            for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                self.assigned[name] = self.assigned.get(name, 0) + 1
                self._bind_number(name, value)
        self._clip_assigns.append((targets, value))

    def _see_defaults(self, arguments: ast.arguments) -> None:
        params = [*arguments.posonlyargs, *arguments.args]
        for param, default in zip(params[len(params) - len(arguments.defaults):], arguments.defaults):
            self._bind_number(param.arg, default)
        for param, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
            if default is not None:
                self._bind_number(param.arg, default)

    def _bind_number(self, name: str, value: ast.AST) -> None:
        self._bindings.append((name, value))

    def _resolve_numbers(self) -> None:
        """Names that may hold a number (through other names), and those that may hold one <= 0."""
        changed = True
        while changed:
            changed = False
            for name, value in self._bindings:
                if name not in self.numeric and _maybe_numeric(value, self.numeric):
                    self.numeric.add(name)
                    changed = True
                if name not in self.nonpositive and _maybe_nonpositive(value, self.nonpositive):
                    self.nonpositive.add(name)
                    changed = True

    def _gradient_names(self) -> Set[str]:
        """Names that may hold gradients: bound from a gradient call, from a local function that
        takes one, or from any expression using such a name (to a fixpoint)."""
        producers = {name for name, function in self._functions.items()
                     if any(isinstance(n, ast.Call) and _callee(n) in GRADIENT_CALLS for n in ast.walk(function))}
        names: Set[str] = set()
        changed = True
        while changed:
            changed = False
            for target, value in self._assignments:
                if self._carries_gradients(value, names, producers):
                    for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                        if name not in names:
                            names.add(name)
                            changed = True
        return names

    @staticmethod
    def _carries_gradients(value: ast.AST, names: Set[str], producers: Set[str]) -> bool:
        for node in ast.walk(value):
            if isinstance(node, ast.Name) and node.id in names:
                return True
            if isinstance(node, ast.Call) and (_callee(node) in GRADIENT_CALLS or _callee(node) in producers):
                return True
        return False

    # --- questions the rules ask ------------------------------------------------------------

    def has(self, *words: str) -> bool:
        return any(word in self.words for word in words)

    def rebinds_compiled_optimizer(self) -> bool:
        return any(self.assigned.get(name, 0) > 1 for name in self.compiled_optimizers)

    def iterates_gradients(self) -> bool:
        """Is a value that may hold gradients iterated (loop, comprehension, map, zip)?"""
        return any(self._carries_gradients(iterable, self.gradient_names, set()) or any(
            isinstance(n, ast.Call) and _callee(n) in GRADIENT_CALLS for n in ast.walk(iterable))
            for iterable in self._iterables)

    def invalid_threshold(self) -> bool:
        """A clip threshold that may be a constant <= 0, or clip_by_value bounds that may both be constants."""
        return any(_maybe_nonpositive(arg, self.nonpositive) for arg in self._clip_args) or any(
            low is not None and high is not None and _maybe_numeric(low, self.numeric)
            and _maybe_numeric(high, self.numeric) for low, high in self._value_bounds)

    def clip_pair_kept_whole(self) -> bool:
        """`x = tf.clip_by_global_norm(...)` to one name, or the call passed straight on."""
        for targets, value in self._clip_assigns:
            if isinstance(value, ast.Call) and _callee(value) == "clip_by_global_norm" \
                    and any(isinstance(t, ast.Name) for t in targets):
                return True
        return self.clip_passed_on

    def clip_renamed(self) -> bool:
        """Clipped gradients bound to a new name (not the list that was clipped)."""
        for targets, value in self._clip_assigns:
            clip = next((n for n in ast.walk(value) if isinstance(n, ast.Call)
                         and _callee(n) in ("clip_by_global_norm", "clip_by_norm")), None)
            if clip is None:
                continue
            sources = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} - {"_"}
            if bound - sources:
                return True
        return False


def _numeric(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) or _numeric(node.right)
    return False


def _maybe_numeric(node: ast.AST, names: Set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.UnaryOp):
        return _maybe_numeric(node.operand, names)
    if isinstance(node, ast.BinOp):
        return _maybe_numeric(node.left, names) or _maybe_numeric(node.right, names)
    return _numeric(node)


def _maybe_nonpositive(node: ast.AST, names: Set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool) and node.value <= 0
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub) or _maybe_nonpositive(node.operand, names)
    if isinstance(node, ast.BinOp):
        return True
    return isinstance(node, ast.Name) and node.id in names
