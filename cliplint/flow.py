"""Small intra-function dataflow: where a local name's value came from.

A binding is visible from a point in source order (after its statement, or inside the loop
body for a loop target) until the next binding of the same name in the same scope. Loops
are not iterated and branches are not merged: the latest binding in source order wins,
which matches how training code is written and keeps every answer cheap.

On top of that sit the facts several rules share: what is a gradient list (from
`tape.gradient`, `tf.gradients`, `compute_gradients`, through names, unpacking,
comprehensions and `zip`), which loop or comprehension name is one of its elements, and
whether that element is guarded against `None`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

# Compared with type(), not isinstance: libcst's nodes are ABCs, and these tests run per name.
_SCOPE_TYPES = frozenset((cst.Module, cst.FunctionDef, cst.Lambda, cst.ClassDef))
_COMPREHENSION_TYPES = frozenset((cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp))
MAX_DEPTH = 8


@dataclass(frozen=True)
class Binding:
    name: str
    scope: cst.CSTNode
    kind: str  # assign | iter | with | param | def | append
    value: Optional[cst.BaseExpression]  # right-hand side, iterable, default, appended item
    path: Tuple[int, ...]  # position inside an unpacking target: `a, (b, c) = ...` -> c is (1, 1)
    owner: cst.CSTNode  # the statement, loop, comprehension or function that binds
    visible_from: int  # source-order index from which uses see it


@dataclass(frozen=True)
class GradList:
    """A list of gradients, as far as the dataflow can tell."""

    origin: cst.Call  # tape.gradient(...), tf.gradients(...), opt.compute_gradients(...)
    pairs: bool  # elements are (gradient, variable) pairs
    may_hold_none: bool  # an entry is None when a variable gets no gradient
    filtered: bool  # None entries were removed, so it is shorter than the variable list
    sources: Optional[cst.BaseExpression]  # the variables the gradient was taken for


# Tokens and whitespace: never what a rule looks for, and most of the nodes of a tree.
_SKIPPED = (cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.TrailingWhitespace,
            cst.EmptyLine, cst.Comment, cst.Comma, cst.Dot, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket,
            cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Colon, cst.AssignEqual,
            cst.Semicolon)
_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _child_fields(kind: type) -> Tuple[str, ...]:
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _CHILD_FIELDS[kind] = tuple(
            f.name for f in dataclasses.fields(kind)
            if not f.name.startswith(("whitespace", "lpar", "rpar", "comma", "semicolon", "leading_lines",
                                      "lines_after", "header", "footer", "trailing_whitespace", "lbracket",
                                      "rbracket", "lbrace", "rbrace", "colon", "equal", "dot", "star",
                                      "default_newline", "default_indent", "encoding", "has_trailing_newline",
                                      "indent", "first_line", "newline", "quote", "prefix", "operator")))
    return fields


_KEEP: Dict[type, bool] = {}


def _kept(kind: type) -> bool:
    """Is a value of this type a node to index? (cached: isinstance on libcst's ABCs is slow)"""
    keep = _KEEP.get(kind)
    if keep is None:
        mro = kind.__mro__  # not issubclass: its first call per class walks libcst's ABC registry
        keep = _KEEP[kind] = cst.CSTNode in mro and not any(skipped in mro for skipped in _SKIPPED)
    return keep


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The child nodes a rule can care about, in field order (cheaper than `node.children`,
    which regenerates the node; whitespace, brackets and commas are left out)."""
    found = []
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            found.extend(v for v in value if _kept(type(v)))
        elif _kept(kind):
            found.append(value)
    return found


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def target_names(target: cst.CSTNode, path: Tuple[int, ...] = ()) -> Iterator[Tuple[cst.Name, Tuple[int, ...]]]:
    """Names bound by an assignment or loop target, with their unpacking path."""
    if isinstance(target, cst.Name):
        yield target, path
    elif isinstance(target, (cst.Tuple, cst.List)):
        for i, element in enumerate(target.elements):
            if isinstance(element, cst.Element):
                yield from target_names(element.value, path + (i,))
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value, path)


def is_none(node: Optional[cst.CSTNode]) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def tests_none(node: cst.CSTNode, name: str) -> bool:
    """Does `node` compare `name` with None anywhere (`g is not None`, `g is None`, `g != None`)?"""
    for sub in walk(node):
        if isinstance(sub, cst.Comparison) and len(sub.comparisons) == 1:
            left, right = sub.left, sub.comparisons[0].comparator
            pair = {getattr(left, "value", None), getattr(right, "value", None)}
            if name in pair and (is_none(left) or is_none(right)):
                return True
    return False


def arg(call: cst.Call, index: int, keyword: Optional[str] = None) -> Optional[cst.BaseExpression]:
    """The argument at position `index` or with keyword `keyword`."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if keyword is not None:
        for a in call.args:
            if a.keyword is not None and a.keyword.value == keyword:
                return a.value
    return positional[index].value if index < len(positional) else None


class Flow:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self._bindings: Dict[Tuple[cst.CSTNode, str], List[Binding]] = {}
        self._scopes: Dict[cst.CSTNode, cst.CSTNode] = {}
        self._resolved: Dict[cst.CSTNode, Optional[Binding]] = {}
        self._names: Optional[Dict[str, List[cst.Name]]] = None
        self._collect()

    # --- bindings -------------------------------------------------------------------------

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost function, lambda, class or module around `node` (a function's name,
        decorators and return annotation belong to the enclosing scope). Climbs only as far as
        the first ancestor whose scope is already known: every rule asks, for most nodes."""
        scopes, parent_of = self._scopes, self.ctx.parent
        path, found = [], None
        while found is None:
            parent = parent_of.get(node)
            if parent is None:
                found = self.ctx.module
            elif type(parent) in _SCOPE_TYPES and (type(parent) is not cst.FunctionDef
                                                   or node is parent.body or node is parent.params):
                found = parent
            else:
                path.append(node)
                node = parent
                found = scopes.get(node)
                if found is not None:
                    break
                continue
            path.append(node)
        for visited in path:
            scopes[visited] = found
        return found

    def _add(self, name: str, scope, kind, value, path, owner, visible_from) -> None:
        self._bindings.setdefault((scope, name), []).append(
            Binding(name, scope, kind, value, path, owner, visible_from))

    def _collect(self) -> None:
        ctx = self.ctx
        for node in ctx.nodes(cst.Assign):
            for target in node.targets:
                self._bind_target(target.target, "assign", node.value, node, ctx.post[node])
        for node in ctx.nodes(cst.AnnAssign):
            if node.value is not None:
                self._bind_target(node.target, "assign", node.value, node, ctx.post[node])
        for node in ctx.nodes(cst.For):
            self._bind_target(node.target, "iter", node.iter, node, ctx.pre[node.body])
        for node in ctx.nodes(cst.With):
            for item in node.items:
                if item.asname is not None:
                    self._bind_target(item.asname.name, "with", item.item, node, ctx.pre[node.body])
        for node in ctx.nodes(cst.FunctionDef):
            outer = self.scope_of(node)
            self._add(node.name.value, outer, "def", None, (), node, ctx.pre[node])
            params = node.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                self._add(param.name.value, node, "param", param.default, (), node, ctx.pre[node.body])
        for node in ctx.nodes(cst.ClassDef):
            self._add(node.name.value, self.scope_of(node), "def", None, (), node, ctx.pre[node])
        for node in ctx.nodes(cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend") \
                    and isinstance(func.value, cst.Name) and node.args:
                self._add(func.value.value, self.scope_of(node), "append", node.args[0].value, (),
                          node, ctx.post[node])

    def _bind_target(self, target, kind, value, owner, visible_from) -> None:
        if isinstance(target, cst.Attribute):
            dotted = self.ctx.text(target)
            self._add(dotted, self.ctx.module, kind, value, (), owner, visible_from)
            return
        scope = self.scope_of(owner)
        for name, path in target_names(target):
            self._add(name.value, scope, kind, value, path, owner, visible_from)

    def _comprehension_binding(self, use: cst.Name) -> Optional[Binding]:
        """A name bound by an enclosing comprehension, or by a lambda mapped over an iterable."""
        ctx = self.ctx
        for anc in ctx.ancestors(use):
            kind = type(anc)
            if kind in _COMPREHENSION_TYPES:
                comp_for = anc.for_in
                while comp_for is not None:
                    if not ctx.encloses(comp_for.iter, use):
                        for name, path in target_names(comp_for.target):
                            if name.value == use.value:
                                return Binding(use.value, anc, "iter", comp_for.iter, path, anc, ctx.pre[anc])
                    comp_for = comp_for.inner_for_in
            elif kind is cst.Lambda:
                names = [p.name.value for p in anc.params.params]
                if use.value in names:
                    return self._mapped_lambda(anc, use, names.index(use.value))
            elif kind is cst.FunctionDef or kind is cst.Module:
                return None
        return None

    def _mapped_lambda(self, lam: cst.Lambda, use: cst.Name, index: int) -> Binding:
        call = self.ctx.parent.get(self.ctx.parent.get(lam))
        iterable = None
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "map" \
                and len(call.args) > index + 1:
            iterable = call.args[index + 1].value
        return Binding(use.value, lam, "iter" if iterable is not None else "param", iterable, (),
                       lam, self.ctx.pre[lam])

    def binding_of(self, use: cst.CSTNode) -> Optional[Binding]:
        """The binding a Name (or a dotted `self.x` attribute) refers to at its position."""
        if use in self._resolved:
            return self._resolved[use]
        found = self._resolved[use] = self._find_binding(use)
        return found

    def _find_binding(self, use: cst.CSTNode) -> Optional[Binding]:
        if isinstance(use, cst.Attribute):
            found = self._bindings.get((self.ctx.module, self.ctx.text(use)), [])
            bound = [b for b in found if b.kind != "append"]
            return bound[-1] if bound else None
        if not isinstance(use, cst.Name):
            return None
        local = self._comprehension_binding(use)
        if local is not None:
            return local
        at = self.ctx.pre[use]
        scope = self.scope_of(use)
        innermost = True
        while scope is not None:
            found = [b for b in self._bindings.get((scope, use.value), []) if b.kind != "append"]
            if found:
                before = [b for b in found if b.visible_from <= at]
                if before:
                    return max(before, key=lambda b: b.visible_from)
                if not innermost:  # a closure sees the enclosing scope's final binding
                    return found[-1]
            if isinstance(scope, cst.Module):
                return None
            scope = self.scope_of(scope)
            innermost = False
        return None

    def value_of(self, expr: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression:
        """Follow `x = <expr>` assignments (and `a, b = <tuple>` unpacking) back to the expression
        that made the value."""
        while isinstance(expr, (cst.Name, cst.Attribute)) and depth < MAX_DEPTH:
            binding = self.binding_of(expr)
            if binding is None or binding.kind != "assign" or binding.value is None:
                break
            value = self.unpacked(binding) if binding.path else binding.value
            if value is None:
                break
            expr = value
            depth += 1
        return expr

    def unpacked(self, binding: Binding) -> Optional[cst.BaseExpression]:
        """The element an unpacking target gets: from a tuple literal (`a, b = x, y`) or from the
        tuple a function of this module returns (`probs, value = step(state)`)."""
        value, path = binding.value, binding.path
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
            called = self.binding_of(value.func)
            if called is None or called.kind != "def" or not isinstance(called.owner, cst.FunctionDef):
                return None
            returns = [r for r in self.ctx.nodes(cst.Return) if r.value is not None
                       and self.ctx.encloses(called.owner, r) and self.scope_of(r) is called.owner]
            value = returns[-1].value if returns else None
        for index in path:
            if not isinstance(value, (cst.Tuple, cst.List)) or index >= len(value.elements):
                return None
            value = value.elements[index].value
        return value

    def alias_of(self, expr: cst.BaseExpression) -> Optional[str]:
        """Canonical name behind a local alias such as `softmax = tf.nn.softmax`."""
        if isinstance(expr, cst.Attribute):
            head = self.alias_of(expr.value) if isinstance(expr.value, (cst.Name, cst.Attribute)) else None
            return f"{head}.{expr.attr.value}" if head else None
        value = self.value_of(expr)
        if value is expr or not isinstance(value, (cst.Name, cst.Attribute)):
            return None
        return self.ctx.imports.qualify(value)

    def names(self, name: str) -> List[cst.Name]:
        """Every Name node spelled `name`, in source order."""
        if self._names is None:
            self._names = {}
            for node in self.ctx.nodes(cst.Name):
                self._names.setdefault(node.value, []).append(node)
        return self._names.get(name, [])

    def uses_after(self, name: str, node: cst.CSTNode) -> List[cst.Name]:
        """Loads of `name` in the same scope after `node`."""
        scope = self.scope_of(node)
        end = self.ctx.post[node]
        return [n for n in self.names(name)
                if self.ctx.pre[n] > end and self.scope_of(n) is scope and not self._is_store(n)]

    def _is_store(self, name: cst.Name) -> bool:
        parent = self.ctx.parent.get(name)
        return isinstance(parent, (cst.AssignTarget, cst.AsName)) or (
            isinstance(parent, (cst.For, cst.CompFor)) and parent.target is name)

    # --- gradient lists -------------------------------------------------------------------

    def is_tape(self, expr: cst.BaseExpression) -> bool:
        value = expr
        if isinstance(expr, cst.Name):
            binding = self.binding_of(expr)
            if binding is not None and binding.kind in ("with", "assign") and binding.value is not None:
                value = binding.value
            elif "tape" in expr.value.lower():
                return True
        if isinstance(value, cst.Call):
            return self.ctx.call_name(value) == "tensorflow.GradientTape"
        return isinstance(value, (cst.Name, cst.Attribute)) and "tape" in self.ctx.text(value).lower()

    def gradient_list(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> Optional[GradList]:
        if expr is None or depth > MAX_DEPTH:
            return None
        if isinstance(expr, cst.Name):
            return self._gradient_name(expr, depth)
        if isinstance(expr, cst.Call):
            return self._gradient_call(expr, depth)
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Call) and self._index(expr) == 0 \
                and self.ctx.call_name(expr.value) == "tensorflow.clip_by_global_norm":
            return self.gradient_list(arg(expr.value, 0, "t_list"), depth + 1)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return self._gradient_comprehension(expr, depth)
        return None

    @staticmethod
    def _index(sub: cst.Subscript) -> Optional[int]:
        if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
            value = sub.slice[0].slice.value
            if isinstance(value, cst.Integer):
                return int(value.value)
        return None

    def _gradient_call(self, call: cst.Call, depth: int) -> Optional[GradList]:
        func = call.func
        name = self.ctx.call_name(call)
        if name == "tensorflow.gradients" or (
                isinstance(func, cst.Attribute) and func.attr.value == "gradient" and self.is_tape(func.value)):
            zero = arg(call, 99, "unconnected_gradients")
            may_none = zero is None or "ZERO" not in self.ctx.text(zero).upper()
            sources = arg(call, 1, "sources" if name != "tensorflow.gradients" else "xs")
            return GradList(call, False, may_none, False, sources)
        if isinstance(func, cst.Attribute) and func.attr.value == "compute_gradients":
            return GradList(call, True, True, False, arg(call, 1, "var_list"))
        if isinstance(func, cst.Name) and func.value in ("list", "tuple") and call.args:
            return self.gradient_list(call.args[0].value, depth + 1)
        return None

    def _gradient_name(self, name: cst.Name, depth: int) -> Optional[GradList]:
        binding = self.binding_of(name)
        if binding is None or binding.kind != "assign":
            return None
        if not binding.path:
            return self.gradient_list(binding.value, depth + 1)
        element = self.unpacked(binding)
        if element is not None:
            return self.gradient_list(element, depth + 1)
        value = binding.value
        if binding.path == (0,) and isinstance(value, cst.Call):
            if self.ctx.call_name(value) == "tensorflow.clip_by_global_norm":
                return self.gradient_list(arg(value, 0, "t_list"), depth + 1)
            # grads, variables = zip(*grads_and_vars)
            if isinstance(value.func, cst.Name) and value.func.value == "zip" and len(value.args) == 1 \
                    and value.args[0].star == "*":
                inner = self.gradient_list(value.args[0].value, depth + 1)
                if inner is not None and inner.pairs:
                    return GradList(inner.origin, False, inner.may_hold_none, inner.filtered, inner.sources)
        return None

    def _gradient_comprehension(self, comp, depth: int) -> Optional[GradList]:
        comp_for = comp.for_in
        if comp_for.inner_for_in is not None:
            return None
        element = self.element_of(comp_for.iter, comp_for.target, depth + 1)
        if element is None:
            return None
        source, names = element
        grad_name = names[0]
        filtered = any(tests_none(cond.test, grad_name) for cond in comp_for.ifs)
        elt = comp.elt
        guarded = filtered or (isinstance(elt, cst.IfExp) and tests_none(elt.test, grad_name))
        pairs = isinstance(elt, cst.Tuple) and len(elt.elements) == 2
        if pairs:
            elt = elt.elements[0].value
        if not any(isinstance(n, cst.Name) and n.value == grad_name for n in walk(elt)):
            return None  # e.g. `[v for g, v in zip(grads, vars)]`: the variables, not gradients
        return GradList(source.origin, pairs, source.may_hold_none and not guarded,
                        source.filtered or filtered, source.sources)

    def element_of(self, iterable, target, depth: int = 0) -> Optional[Tuple[GradList, List[str]]]:
        """When a loop over `iterable` binds gradient elements to `target`: (list, [grad name])."""
        names = list(target_names(target))
        if not names:
            return None
        by_path = {path: name.value for name, path in names}
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name):
            func = iterable.func.value
            if func == "zip":
                for i, zipped in enumerate(iterable.args):
                    grads = self.gradient_list(zipped.value, depth + 1)
                    if grads is not None and not grads.pairs and (i,) in by_path:
                        return grads, [by_path[(i,)]]
                return None
            if func == "enumerate" and iterable.args:
                grads = self.gradient_list(iterable.args[0].value, depth + 1)
                if grads is not None and (1,) in by_path:
                    return grads, [by_path[(1,)]]
                return None
        grads = self.gradient_list(iterable, depth + 1)
        if grads is None:
            return None
        key = (0,) if grads.pairs else ()
        return (grads, [by_path[key]]) if key in by_path else None

    def gradient_element(self, use: cst.Name) -> Optional[Tuple[GradList, Binding]]:
        """Is this name one element of a gradient list, bound by a loop or comprehension?"""
        binding = self.binding_of(use)
        if binding is None or binding.kind != "iter" or binding.value is None:
            return None
        owner = binding.owner
        target = owner.target if isinstance(owner, cst.For) else self._comp_target(owner, use)
        if target is None:  # lambda mapped over a list: its parameter is the element
            grads = self.gradient_list(binding.value)
            return (grads, binding) if grads is not None and not grads.pairs else None
        element = self.element_of(binding.value, target)
        if element is None or element[1][0] != use.value:
            return None
        return element[0], binding

    def _comp_target(self, owner: cst.CSTNode, use: cst.Name) -> Optional[cst.CSTNode]:
        comp_for = getattr(owner, "for_in", None)
        while comp_for is not None:
            if any(name.value == use.value for name, _ in target_names(comp_for.target)):
                return comp_for.target
            comp_for = comp_for.inner_for_in
        return None

    def none_guarded(self, use: cst.Name, binding: Binding) -> bool:
        """Is the use of a gradient element protected by an `is (not) None` test?"""
        owner = binding.owner
        if isinstance(owner, cst.For):
            return tests_none(owner.body, use.value)
        if type(owner) in _COMPREHENSION_TYPES:
            comp_for = owner.for_in
            while comp_for is not None:
                if any(tests_none(cond.test, use.value) for cond in comp_for.ifs):
                    return True
                comp_for = comp_for.inner_for_in
        for anc in self.ctx.ancestors(use):
            if anc is owner:
                break
            if isinstance(anc, cst.IfExp) and tests_none(anc.test, use.value):
                return True
        return False

    # --- probabilities --------------------------------------------------------------------

    def probability(self, expr) -> Optional["Source"]:
        """(softmax | sigmoid | 1-sigmoid, producing node, padded) when `expr` holds probabilities."""
        return Probabilities(self.ctx).probability(expr, frozenset())

    def model_output(self, model) -> Optional["Source"]:
        """The same, for what a model built in this module outputs (Sequential, functional, subclass)."""
        return Probabilities(self.ctx).model_output(model)

    # --- constants and snippets -----------------------------------------------------------

    def constant(self, expr: Optional[cst.BaseExpression], depth: int = 0):
        """The literal value an expression is known to hold, else UNKNOWN.

        Follows names to literal assignments, module constants and parameter defaults (the
        default path: `def build(clip=1.0)` makes `clip` 1.0).
        """
        if expr is None or depth > MAX_DEPTH:
            return UNKNOWN
        if isinstance(expr, (cst.Integer, cst.Float)):
            return expr.evaluated_value
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
            inner = self.constant(expr.expression, depth + 1)
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner if isinstance(expr.operator, cst.Minus) else inner
            return UNKNOWN
        if isinstance(expr, cst.BinaryOperation):
            return self._arithmetic(expr, depth)
        if isinstance(expr, cst.SimpleString):
            return expr.evaluated_value
        if isinstance(expr, cst.Dict):
            return self._dict_constant(expr, depth)
        if isinstance(expr, cst.Name):
            if expr.value in ("None", "True", "False"):
                return {"None": None, "True": True, "False": False}[expr.value]
            binding = self.binding_of(expr)
            if binding is not None and not binding.path and binding.kind in ("assign", "param"):
                if binding.kind == "param" and binding.value is None:
                    return UNKNOWN
                return self.constant(binding.value, depth + 1)
        return UNKNOWN

    def _dict_constant(self, expr: cst.Dict, depth: int):
        found = {}
        for element in expr.elements:
            if not isinstance(element, cst.DictElement):
                return UNKNOWN
            key, value = self.constant(element.key, depth + 1), self.constant(element.value, depth + 1)
            if not isinstance(key, str) or value is UNKNOWN:
                return UNKNOWN
            found[key] = value
        return found

    def _arithmetic(self, expr: cst.BinaryOperation, depth: int):
        left = self.constant(expr.left, depth + 1)
        right = self.constant(expr.right, depth + 1)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
        if not numbers:
            return UNKNOWN
        ops = {cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b,
               cst.Multiply: lambda a, b: a * b, cst.Divide: lambda a, b: a / b if b else UNKNOWN}
        op = ops.get(type(expr.operator))
        return op(left, right) if op else UNKNOWN

    def snippet(self, node: cst.CSTNode, extra: Tuple[cst.CSTNode, ...] = ()) -> dict:
        """What the verifier needs to re-execute `node`: its source text, the imported names it
        uses (canonical), and the literal values of the local names it uses."""
        imports: Dict[str, str] = {}
        constants: Dict[str, object] = {}
        for part in (node, *extra):
            for sub in walk(part):
                if not isinstance(sub, cst.Name) or sub.value in imports or sub.value in constants:
                    continue
                qualified = self.ctx.imports.qualify(sub)
                if qualified is not None:
                    imports[sub.value] = qualified
                    continue
                value = self.constant(sub)
                if value is not UNKNOWN and isinstance(value, (int, float, str, bool, type(None), dict)):
                    constants[sub.value] = value
        return {"code": self.ctx.text(node), "imports": imports, "constants": constants}


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


APPLY_METHODS = ("apply_gradients", "apply")
_PASS_THROUGH = ("zip", "list", "tuple")


def reaches_apply(flow: Flow, node: cst.CSTNode, depth: int = 0) -> bool:
    """Does the value `node` produces end up in `optimizer.apply_gradients(...)` in this scope?"""
    ctx = flow.ctx
    while depth <= MAX_DEPTH:
        parent = ctx.parent.get(node)
        if isinstance(parent, (cst.Arg, cst.Element)):
            node = ctx.parent.get(parent)
            if isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in APPLY_METHODS:
                    return True
                if not (isinstance(func, cst.Name) and func.value in _PASS_THROUGH):
                    return False
            continue
        if isinstance(parent, cst.Assign) and parent.value is node:
            return any(reaches_apply(flow, use, depth + 1)
                       for target in parent.targets for name, path in target_names(target.target) if not path
                       for use in flow.uses_after(name.value, parent))
        return False
    return False


SOFTMAX = {"tensorflow.nn.softmax", "keras.activations.softmax", "keras.ops.softmax", "keras.backend.softmax"}
SIGMOID = {"tensorflow.math.sigmoid", "keras.activations.sigmoid", "keras.ops.sigmoid", "keras.backend.sigmoid"}
# Functions that keep "this is (a piece of) a probability" true of their first argument.
KEEPS_PROBABILITY = {
    "tensorflow.clip_by_value", "keras.backend.clip", "keras.ops.clip", "tensorflow.maximum",
    "tensorflow.math.maximum", "keras.ops.maximum", "keras.backend.maximum", "tensorflow.gather",
    "tensorflow.gather_nd", "tensorflow.squeeze", "tensorflow.reshape", "tensorflow.reduce_sum",
    "tensorflow.math.reduce_sum", "keras.ops.sum", "keras.backend.sum", "tensorflow.reduce_max",
    "tensorflow.math.reduce_max", "tensorflow.experimental.numpy.take_along_axis", "keras.ops.take_along_axis",
}
SEQUENTIAL = {"keras.Sequential", "keras.models.Sequential"}
FUNCTIONAL = {"keras.Model", "keras.models.Model"}
Source = Tuple[str, cst.CSTNode, bool]  # (softmax | sigmoid | 1-sigmoid, producing node, padded)


def activation_of(ctx, layer: cst.Call) -> Optional[str]:
    """'softmax'/'sigmoid' when a layer constructor call applies that activation to its output."""
    name = ctx.call_name(layer) or ""
    if name in ("keras.layers.Softmax",):
        return "softmax"
    if name == "keras.layers.Activation":
        value = arg(layer, 0, "activation")
    elif name.startswith(("keras.layers.", "tensorflow.layers.")):
        value = arg(layer, 99, "activation")
    else:
        return None
    if value is None:
        return None
    constant = ctx.flow.constant(value)
    if isinstance(constant, str):
        return constant if constant in ("softmax", "sigmoid") else None
    qualified = ctx.qualify(value)
    return "softmax" if qualified in SOFTMAX else "sigmoid" if qualified in SIGMOID else None




class Probabilities:
    """Where softmax/sigmoid outputs come from: the calls, layers with a softmax activation,
    and functions, models and `call` methods of the module that return one."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    def model_output(self, model) -> Optional[Source]:
        return self._returned(cst.Call(func=model), frozenset(), False)

    def probability(self, expr, seen: Set, padded: bool = False) -> Optional[Source]:
        ctx = self.ctx
        if expr is None or len(seen) > MAX_DEPTH or expr in seen:
            return None
        seen = seen | {expr}
        if isinstance(expr, (cst.Name, cst.Attribute)):
            value = ctx.flow.value_of(expr)
            return None if value is expr else self.probability(value, seen, padded)
        if isinstance(expr, cst.Subscript):
            return self.probability(expr.value, seen, padded)
        if isinstance(expr, cst.BinaryOperation):
            return self._arithmetic(expr, seen, padded)
        if isinstance(expr, cst.Call):
            return self._call(expr, seen, padded)
        return None

    def _arithmetic(self, expr: cst.BinaryOperation, seen, padded) -> Optional[Source]:
        ctx = self.ctx
        left, right = expr.left, expr.right
        left_const = ctx.flow.constant(left) is not UNKNOWN
        right_const = ctx.flow.constant(right) is not UNKNOWN
        if isinstance(expr.operator, cst.Add):
            if right_const or self._small_name(right):
                return self.probability(left, seen, True)
            if left_const or self._small_name(left):
                return self.probability(right, seen, True)
        if isinstance(expr.operator, cst.Subtract) and left_const and ctx.flow.constant(left) == 1:
            inner = self.probability(right, seen, padded)
            return ("1-sigmoid", inner[1], inner[2]) if inner and inner[0] == "sigmoid" else None
        if isinstance(expr.operator, cst.Multiply):  # p * one_hot(a): picks out one probability
            return self.probability(left, seen, padded) or self.probability(right, seen, padded)
        return None

    @staticmethod
    def _small_name(expr) -> bool:
        return isinstance(expr, cst.Name) and expr.value.lower() in ("eps", "epsilon", "_eps", "tiny")

    def _call(self, call: cst.Call, seen, padded) -> Optional[Source]:
        ctx = self.ctx
        name = ctx.call_name(call)
        if name in SOFTMAX:
            return "softmax", call, padded
        if name in SIGMOID:
            return "sigmoid", call, padded
        if name in KEEPS_PROBABILITY:
            clipped = padded or name.endswith(("clip_by_value", "clip", "maximum"))
            return self.probability(arg(call, 0, "x"), seen, clipped)
        if name in ("tensorflow.layers.dense",):
            kind = activation_of(ctx, call)
            return (kind, call, padded) if kind else None
        if isinstance(call.func, cst.Call):  # Dense(10, activation="softmax")(h), Softmax()(h)
            kind = activation_of(ctx, call.func)
            if kind:
                return kind, call, padded
        return self._returned(call, seen, padded)

    def _returned(self, call: cst.Call, seen, padded) -> Optional[Source]:
        """A call of a function, model or layer defined in this module that returns probabilities."""
        ctx = self.ctx
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "predict":
            func = func.value
        callee = ctx.flow.value_of(func)
        if isinstance(callee, cst.Call):  # actor = Actor(); actor(x)  /  model = Sequential([...]); model(x)
            name = ctx.call_name(callee)
            if name in SEQUENTIAL:
                return self._last_layer(callee, padded)
            if name in FUNCTIONAL:
                return self.probability(arg(callee, 1, "outputs"), seen, padded)
            callee = callee.func
        if not isinstance(callee, cst.Name):
            return None
        binding = ctx.flow.binding_of(callee)
        if binding is None or binding.kind != "def":
            return None
        definition = binding.owner
        if isinstance(definition, cst.ClassDef):
            methods = [m for m in definition.body.body if isinstance(m, cst.FunctionDef)
                       and m.name.value in ("call", "__call__")]
            if not methods:
                return None
            definition = methods[0]
        for ret in ctx.nodes(cst.Return):
            if ret.value is not None and ctx.encloses(definition, ret) and ctx.flow.scope_of(ret) is definition:
                found = self.probability(ret.value, seen, padded)
                if found:
                    return found
        return None

    def _last_layer(self, sequential: cst.Call, padded) -> Optional[Source]:
        ctx = self.ctx
        layers = arg(sequential, 0, "layers")
        if isinstance(layers, (cst.List, cst.Tuple)) and layers.elements:
            last = layers.elements[-1].value
            if isinstance(last, cst.Call):
                kind = activation_of(ctx, last)
                if kind:
                    return kind, last, padded
        return None


def probe_roles(flow: Flow, iterable: Optional[cst.BaseExpression]) -> dict:
    """Which expressions of a loop's iterable the verifier must bind to stand-in gradients and
    variables: `grads` in `for g in grads`, both in `zip(grads, model.trainable_variables)`."""
    roles = {"gradients": None, "variables": None, "pairs": False}
    if iterable is None:
        return roles
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("zip", "enumerate"):
        for zipped in iterable.args:
            grads = flow.gradient_list(zipped.value)
            if grads is not None and roles["gradients"] is None:
                roles.update(gradients=flow.ctx.text(zipped.value), pairs=grads.pairs)
            elif iterable.func.value == "zip":
                roles["variables"] = flow.ctx.text(zipped.value)
        return roles
    grads = flow.gradient_list(iterable)
    return {**roles, "gradients": flow.ctx.text(iterable), "pairs": bool(grads and grads.pairs)}


def loop_node(flow: Flow, owner: cst.CSTNode) -> cst.CSTNode:
    """The code to replay for a loop binding: the comprehension or `for`, or the `map(...)` call
    around a mapped lambda."""
    if isinstance(owner, cst.Lambda):
        call = flow.ctx.parent.get(flow.ctx.parent.get(owner))
        return call if isinstance(call, cst.Call) else owner
    return owner


def appended_lists(owner: cst.CSTNode) -> List[str]:
    """Names of the lists a `for` loop appends to: the probe starts them empty."""
    if not isinstance(owner, cst.For):
        return []
    return sorted({sub.func.value.value for sub in walk(owner.body) if isinstance(sub, cst.Call)
                   and isinstance(sub.func, cst.Attribute) and sub.func.attr.value in ("append", "extend")
                   and isinstance(sub.func.value, cst.Name)})


def origin_name(flow: Flow, grads: GradList) -> Optional[str]:
    """The name `tape.gradient(...)` was assigned to (`grads` in `grads = tape.gradient(...)`)."""
    parent = flow.ctx.parent.get(grads.origin)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    return None
