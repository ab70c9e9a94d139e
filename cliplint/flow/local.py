"""Small intra-function dataflow: where a local name's value came from.

A binding is visible from a point in source order (after its statement, or inside the loop
body for a loop target) until the next binding of the same name in the same scope. Loops
are not iterated and branches are not merged: the latest binding in source order wins,
which matches how training code is written and keeps every answer cheap. On top of the
bindings sit local aliases of imported names; calls between the module's functions are in
`calls.py`, constant folding and flag defaults in `constants.py`.
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Callable, Dict, List, Optional, Set, Tuple, cast

import libcst as cst

from ..names import MAPPERS, SHAPE_CHANGES, WHILE_LOOPS, canonical, dotted_name
from .bindings import Binding, Kind
from .calls import CallSummaries
from .constants import FlagDefaults
from .nodes import (
    COMPREHENSION_TYPES,
    MAX_DEPTH,
    SCOPE_TYPES,
    ModuleIndex,
    arg,
    first_numbered,
    grandparent,
    target_names,
)

# How many calls a value is followed through into a function's parameter. Two covers the shape
# real code has (a training step calls a loss helper that calls a small log helper); each level
# multiplies the call sites to look at, and deeper chains were not seen in the real-code set.
PARAMETER_DEPTH = 2
# Set while a file that imports its project's modules is linted (`project.link`): the index
# the dataflow reads instead of the file's own, holding the summaries of what it imports too.
LINK: ContextVar[Optional[Callable[[ModuleIndex], ModuleIndex]]] = ContextVar("cliplint_link", default=None)


class Dataflow(CallSummaries, FlagDefaults):
    """The bindings of one module, collected once, and what the rules ask of them."""

    def __init__(self, ctx: ModuleIndex) -> None:
        link = LINK.get()
        self.ctx = link(ctx) if link is not None else ctx
        self._linked = getattr(self.ctx, "imported", None)  # None unless linked with other modules
        self._bindings: Dict[Tuple[cst.CSTNode, str], List[Binding]] = {}
        self._scopes: Dict[cst.CSTNode, cst.CSTNode] = {}
        self._resolved: Dict[cst.CSTNode, Optional[Binding]] = {}
        self._reaching: Dict[cst.CSTNode, List[Binding]] = {}
        self._names: Optional[Dict[str, List[cst.Name]]] = None
        self._class_members: Dict[cst.ClassDef, Dict[str, List[Binding]]] = {}
        self._holders: Set[Tuple[cst.CSTNode, str]] = set()  # instances whose class is being found
        self.written_as: Dict[cst.CSTNode, cst.CSTNode] = {}  # `x op y` made for `x op= y` -> the statement
        self._collect()

    # --- bindings -------------------------------------------------------------------------

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost function, lambda, class or module around `node` (a function's name,
        decorators and return annotation belong to the enclosing scope). Climbs only as far as
        the first ancestor whose scope is already known: every rule asks, for most nodes."""
        scopes, parent_of = self._scopes, self.ctx.parent
        path: List[cst.CSTNode] = []
        found: Optional[cst.CSTNode] = None
        while found is None:
            parent = parent_of.get(node)
            if parent is None:
                found = self.ctx.module
            elif type(parent) in SCOPE_TYPES and (type(parent) is not cst.FunctionDef
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

    def _add(self, name: str, scope: cst.CSTNode, kind: Kind, value: Optional[cst.BaseExpression],
             path: Tuple[int, ...], owner: cst.CSTNode, visible_from: int) -> None:
        self._bindings.setdefault((scope, name), []).append(
            Binding(name, scope, kind, value, path, owner, visible_from))

    def _collect(self) -> None:
        ctx = self.ctx
        for node in ctx.nodes(cst.Assign):
            for target in node.targets:
                self._bind_target(target.target, "assign", node.value, node, ctx.post[node])
        for annotated in ctx.nodes(cst.AnnAssign):
            if annotated.value is not None:
                self._bind_target(annotated.target, "assign", annotated.value, annotated, ctx.post[annotated])
        for aug in ctx.nodes(cst.AugAssign):  # `x op= y` binds x to `x op y`
            if isinstance(aug.target, (cst.Name, cst.Attribute)):
                self._bind_target(aug.target, "assign", self._written_out(aug), aug, ctx.post[aug])
        for named in ctx.nodes(cst.NamedExpr):  # `(p := softmax(x))` binds p in the enclosing function
            self._bind_target(named.target, "assign", named.value, named, ctx.post[named])
        for loop in ctx.nodes(cst.For):
            self._bind_target(loop.target, "iter", loop.iter, loop, ctx.pre[loop.body])
        for with_ in ctx.nodes(cst.With):
            for item in with_.items:
                if item.asname is not None:
                    self._bind_target(item.asname.name, "with", item.item, with_, ctx.pre[with_.body])
        for function in ctx.nodes(cst.FunctionDef):
            outer = self.scope_of(function)
            self._add(function.name.value, outer, "def", None, (), function, ctx.pre[function])
            params = function.params
            stars = [star for star in (params.star_arg, params.star_kwarg) if isinstance(star, cst.Param)]
            for param in (*params.posonly_params, *params.params, *params.kwonly_params, *stars):
                self._add(param.name.value, function, "param", param.default, (), function, ctx.pre[function.body])
        for cls in ctx.nodes(cst.ClassDef):
            self._add(cls.name.value, self.scope_of(cls), "def", None, (), cls, ctx.pre[cls])
        for call in ctx.nodes(cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend") and call.args:
                self._add_element(func.value, call.args[0].value, call)
        for node in ctx.nodes(cst.Assign):  # `d[key] = value`, `self.ops[key] = value`: an element stored
            for target in node.targets:
                if isinstance(target.target, cst.Subscript):
                    self._add_element(target.target.value, node.value, node)

    def _written_out(self, aug: cst.AugAssign) -> cst.BinaryOperation:
        """`x op y` for `x op= y`, over the statement's own target and value, so that every model
        reads an update in place as the binary operation it is. The new node is numbered and
        parented as the statement (positions, scopes and `encloses` work on it); a finding on it
        is placed on the statement (`written_as`)."""
        operator = getattr(cst, type(aug.operator).__name__[:-len("Assign")])()
        value = cst.BinaryOperation(aug.target, operator, aug.value)
        ctx = self.ctx
        ctx.parent[value], ctx.pre[value], ctx.post[value] = aug, ctx.pre[aug], ctx.post[aug]
        self.written_as[value] = aug
        return value

    def _add_element(self, container: cst.BaseExpression, value: cst.BaseExpression, owner: cst.CSTNode) -> None:
        """An element added to the list or dict a name or `self` attribute holds (kind "append")."""
        if isinstance(container, cst.Name):
            self._add(container.value, self.scope_of(owner), "append", value, (), owner, self.ctx.post[owner])
        elif isinstance(container, cst.Attribute):
            self._add(self._dotted(container), self._attribute_scope(container), "append", value, (), owner,
                      self.ctx.post[owner])

    def _bind_target(self, target: cst.BaseExpression, kind: Kind, value: cst.BaseExpression, owner: cst.CSTNode,
                     visible_from: int, path: Tuple[int, ...] = ()) -> None:
        if isinstance(target, cst.Attribute):
            self._add(self._dotted(target), self._attribute_scope(target), kind, value, path, owner, visible_from)
            return
        if isinstance(target, (cst.Tuple, cst.List)):  # `self.probs, self.value = self._build()`
            for i, element in enumerate(target.elements):
                if isinstance(element, cst.Element) and isinstance(element.value, cst.Attribute):
                    self._bind_target(element.value, kind, value, owner, visible_from, path + (i,))
        scope = self.scope_of(owner)
        for name, name_path in target_names(target, path):
            self._add(name.value, scope, kind, value, name_path, owner, visible_from)

    def _dotted(self, attribute: cst.Attribute) -> str:
        """The key of an attribute's bindings: `self.probs` joined from its names (`names.dotted_name`;
        the source text for any other attribute). Bindings are looked up for every attribute a
        query meets: generating its code each time cost a quarter of a lint."""
        return dotted_name(attribute) or self.ctx.text(attribute)

    def _attribute_scope(self, attribute: cst.Attribute) -> cst.CSTNode:
        """Where `x.attr` bindings live: `self.attr` in a method belongs to the method's class
        (another class's `self.model` is another value); any other dotted name to the module."""
        method = self.method_of(attribute)
        if method is not None and isinstance(attribute.value, cst.Name) and method[0].params.params \
                and method[0].params.params[0].name.value == attribute.value.value:
            return method[1]
        return self.ctx.module

    def method_of(self, node: cst.CSTNode) -> Optional[Tuple[cst.FunctionDef, cst.ClassDef]]:
        """The method (and its class) whose body holds `node`, for methods defined in a class body."""
        scope = self.scope_of(node)
        while type(scope) is cst.Lambda:
            scope = self.scope_of(scope)
        if type(scope) is not cst.FunctionDef:
            return None
        outer = self.scope_of(scope)
        return (scope, outer) if type(outer) is cst.ClassDef else None

    def _comprehension_binding(self, use: cst.Name) -> Optional[Binding]:
        """A name bound by an enclosing comprehension, or by a lambda mapped over an iterable."""
        ctx = self.ctx
        for anc in ctx.ancestors(use):
            kind = type(anc)
            if kind in COMPREHENSION_TYPES:
                # every type in COMPREHENSION_TYPES is a BaseComp; type() is not seen by the checker
                comp_for: Optional[cst.CompFor] = cast(cst.BaseComp, anc).for_in
                while comp_for is not None:
                    if not ctx.encloses(comp_for.iter, use):
                        for name, path in target_names(comp_for.target):
                            if name.value == use.value:
                                return Binding(use.value, anc, "iter", comp_for.iter, path, anc, ctx.pre[anc])
                    comp_for = comp_for.inner_for_in
            elif type(anc) is cst.Lambda:  # not `kind`: the type checker narrows on this test
                names = [p.name.value for p in anc.params.params]
                if use.value in names:
                    return self._mapped_lambda(anc, use, names.index(use.value))
            elif kind is cst.FunctionDef or kind is cst.Module:
                return None
        return None

    def _mapped_lambda(self, lam: cst.Lambda, use: cst.Name, index: int) -> Binding:
        call = grandparent(self.ctx, lam)
        iterable = None
        if isinstance(call, cst.Call) and (isinstance(call.func, cst.Name) and call.func.value == "map"
                                           or self.ctx.call_name(call) in MAPPERS) and len(call.args) > index + 1:
            iterable = call.args[index + 1].value
        return Binding(use.value, lam, "iter" if iterable is not None else "param", iterable, (),
                       lam, self.ctx.pre[lam])

    def _attribute_bindings(self, use: cst.Attribute) -> List[Binding]:
        """Where `x.attr` is bound: `self.attr` in the class (else in its bases and subclasses of
        this module), `agent.attr` with `agent = Agent(...)` in Agent, `self.policy.attr` in the
        class of the instance `self.policy` holds (`self.policy = policy`, `Trainer(Policy())`),
        any other dotted name as written at module level."""
        scope, text = self._attribute_scope(use), self._dotted(use)
        found = self._bindings.get((scope, text), [])
        if found:
            return found
        held = isinstance(use.value, cst.Attribute)  # `self.policy.probs`: of the instance `self.policy` holds
        holder = (scope, text.rsplit(".", 1)[0])
        if holder in self._holders:  # `self.a = self.a.b`: the class of `self.a` is being found already
            return found
        self._holders.add(holder)
        try:
            cls = scope if isinstance(scope, cst.ClassDef) and not held else self.class_of(use.value)
        finally:
            self._holders.discard(holder)
        if cls is None:
            return found
        owners = [cls, *self.related_classes(cls)] if cls is not scope else self.related_classes(cls)
        attribute = use.attr.value
        return next((b for b in (self._members(owner).get(attribute, []) for owner in owners) if b), [])

    def _members(self, cls: cst.ClassDef) -> Dict[str, List[Binding]]:
        """attribute -> the `self.attribute` bindings in the methods of `cls`, then the class
        body's own assignments (`activation = "softmax"` under `class Config:`, the default an
        instance reads until it sets its own); built on first need."""
        if cls not in self._class_members:
            members: Dict[str, List[Binding]] = {}
            for (scope, text), bindings in self._bindings.items():
                if scope is cls and text.count(".") == 1:
                    members.setdefault(text.split(".")[1], []).extend(bindings)
            for (scope, text), bindings in self._bindings.items():
                if scope is cls and "." not in text:
                    members.setdefault(text, []).extend(b for b in bindings if b.kind == "assign")
            self._class_members[cls] = members
        return self._class_members[cls]

    def reaching(self, use: cst.CSTNode) -> List[Binding]:
        """Every binding that may reach `use` on some path: `binding_of`'s, and, for each `if` or
        `try` around it that does not also hold `use`, the latest binding of each other arm (or
        the one before the statement, for an arm that binds nothing: an `if` with no `else`).
        The join of the branches; loops are still not iterated."""
        first = self.binding_of(use)
        if first is None or not isinstance(use, cst.Name) or first.kind not in ("assign", "with"):
            return [first] if first is not None else []
        if use in self._reaching:
            return self._reaching[use]
        ctx, at = self.ctx, self.ctx.pre[use]
        same = [b for b in self._bindings.get((first.scope, first.name), []) if b.kind != "append"]
        found = [first]
        for statement in ctx.ancestors(first.owner):
            if statement is first.scope:
                break
            if not isinstance(statement, (cst.If, cst.Try)) or ctx.encloses(statement, use):
                continue
            for arm in _arms(statement):
                if any(ctx.encloses(part, first.owner) for part in arm):
                    continue
                inside = [b for b in same if any(ctx.encloses(part, b.owner) for part in arm)]
                before = [b for b in same if b.visible_from <= ctx.pre[statement]]
                latest = max(inside or before, key=lambda b: b.visible_from, default=None)
                if latest is not None and latest not in found and latest.visible_from <= at:
                    found.append(latest)
        self._reaching[use] = found
        return found

    def binding_of(self, use: cst.CSTNode) -> Optional[Binding]:
        """The binding a Name (or a dotted `self.x` attribute) refers to at its position."""
        if use in self._resolved:
            return self._resolved[use]
        found = self._resolved[use] = self._find_binding(use)
        return found

    def _find_binding(self, use: cst.CSTNode) -> Optional[Binding]:
        if isinstance(use, cst.Attribute):
            bound = [b for b in self._attribute_bindings(use) if b.kind != "append"]
            at, scope = self.ctx.pre[use], self.scope_of(use)
            local = [b for b in bound if b.visible_from <= at and self.scope_of(b.owner) is scope]
            return local[-1] if local else bound[-1] if bound else self.imported(use)
        if not isinstance(use, cst.Name):
            return None
        comprehension = self._comprehension_binding(use)
        if comprehension is not None:
            return comprehension
        at = self.ctx.pre[use]
        scope = self.scope_of(use)
        innermost = True
        while scope is not None:
            # a class's names are seen from its body only, not from its methods (Python's rule)
            found = [b for b in self._bindings.get((scope, use.value), []) if b.kind != "append"] \
                if innermost or not isinstance(scope, cst.ClassDef) else []
            if found:
                before = [b for b in found if b.visible_from <= at]
                if before:
                    return max(before, key=lambda b: b.visible_from)
                if not innermost:  # a closure sees the enclosing scope's final binding
                    return found[-1]
            if isinstance(scope, cst.Module):
                return self.imported(use)
            scope = self.scope_of(scope)
            innermost = False
        return None

    def imported(self, use: cst.CSTNode) -> Optional[Binding]:
        """The binding in another module of the project that a name (or `module.name`) imported
        from it refers to: its last top-level binding there (`project.link.Linked.imported`)."""
        imported = self._linked
        if imported is None or not isinstance(use, (cst.Name, cst.Attribute)):
            return None
        name = dotted_name(use)
        if name is None:
            return None
        module = self.scope_of(use)
        while not isinstance(module, cst.Module):
            module = self.scope_of(module)
        found = imported(module, name)
        if found is None:
            return None
        bound = [b for b in self._bindings.get(found, []) if b.kind != "append"]
        return bound[-1] if bound else None

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
        if isinstance(value, cst.Call) and self.ctx.call_name(value) in WHILE_LOOPS:
            value = self._loop_result(value)  # `_, _, ta = tf.while_loop(cond, body, vars)`: what body returns
        elif isinstance(value, cst.Call):
            called = self.callee(value)
            if not isinstance(called, (cst.FunctionDef, cst.Lambda)):
                return None
            returned = self.returned(called)
            value = returned[-1] if returned else None
        for index in path:
            if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
                value = self._mapped_literal(value)  # a, b = [tf.expand_dims(x, 1) for x in [a, b]]
            if not isinstance(value, (cst.Tuple, cst.List)) or index >= len(value.elements):
                return None
            value = value.elements[index].value
        return value

    def _mapped_literal(self, comp: cst.BaseSimpleComp) -> Optional[cst.BaseExpression]:
        """The literal list a comprehension maps element by element, when what it makes of each
        element is the element itself or a change of its shape or dtype (`[tf.expand_dims(x, 1)
        for x in [probs, values]]` unpacks to probs, values)."""
        loop = comp.for_in
        if loop.inner_for_in is not None or loop.ifs or not isinstance(loop.target, cst.Name) \
                or not isinstance(loop.iter, (cst.List, cst.Tuple)):
            return None
        element = comp.elt
        if isinstance(element, cst.Call) and self.ctx.call_name(element) in SHAPE_CHANGES and element.args:
            element = element.args[0].value
        return loop.iter if isinstance(element, cst.Name) and element.value == loop.target.value else None

    def _loop_result(self, loop: cst.Call) -> Optional[cst.BaseExpression]:
        """The tuple a `tf.while_loop`'s body returns: its results, element by element (the loop
        variables' last values)."""
        body = arg(loop, 1, "body")
        function = body if isinstance(body, cst.Lambda) else self.definition_of(body) if body is not None else None
        returned = self.returned(function) if isinstance(function, (cst.FunctionDef, cst.Lambda)) else []
        return returned[-1] if returned else None

    def alias_of(self, expr: cst.BaseExpression) -> Optional[str]:
        """Canonical name behind a local alias such as `softmax = tf.nn.softmax`."""
        if isinstance(expr, cst.Attribute):
            head = self.alias_of(expr.value) if isinstance(expr.value, (cst.Name, cst.Attribute)) else None
            return canonical(f"{head}.{expr.attr.value}") if head else None
        value = self.value_of(expr)
        if value is expr or not isinstance(value, (cst.Name, cst.Attribute)):
            return None
        return self.ctx.imports.qualify(value)

    def appended(self, name: str, scope: cst.CSTNode) -> List[Binding]:
        """The `name.append(x)` / `name.extend(x)` / `name[key] = x` bindings of a container in `scope`."""
        return [b for b in self._bindings.get((scope, name), []) if b.kind == "append"]

    def added_to(self, container: cst.BaseExpression) -> List[Binding]:
        """The elements added to the container a name or `self` attribute holds (`appended`)."""
        if isinstance(container, cst.Name):
            binding = self.binding_of(container)
            return self.appended(container.value, binding.scope if binding is not None else self.scope_of(container))
        if isinstance(container, cst.Attribute):
            return self.appended(self._dotted(container), self._attribute_scope(container))
        return []

    def names(self, name: str) -> List[cst.Name]:
        """Every Name node spelled `name`, in source order."""
        if self._names is None:
            self._names = {}
            for node in self.ctx.nodes(cst.Name):
                self._names.setdefault(node.value, []).append(node)
        return self._names.get(name, [])

    def uses_after(self, name: str, node: cst.CSTNode) -> List[cst.Name]:
        """Loads of `name` in the same scope after `node`. Only the names inside the scope's
        own range are looked at: a class of a hundred methods, each using `grads`, would make
        this quadratic otherwise."""
        scope = self.scope_of(node)
        pre, end = self.ctx.pre, self.ctx.post[node]
        limit = self.ctx.post.get(scope)
        same_name = self.names(name)
        found: List[cst.Name] = []
        for n in same_name[first_numbered(same_name, end + 1, pre):]:
            if limit is not None and pre[n] > limit:
                break
            if self.scope_of(n) is scope and not self._is_store(n):
                found.append(n)
        return found

    def _is_store(self, name: cst.Name) -> bool:
        parent = self.ctx.parent.get(name)
        return isinstance(parent, (cst.AssignTarget, cst.AsName)) or (
            isinstance(parent, (cst.For, cst.CompFor)) and parent.target is name)


def _arms(statement: cst.CSTNode) -> List[List[cst.CSTNode]]:
    """The paths through an `if` or `try`, each as the blocks it runs (empty: it binds nothing
    there, as an `if` with no `else`). A `try` block and its `else` are one path; each handler is
    another."""
    if isinstance(statement, cst.If):
        orelse = statement.orelse
        other: List[cst.CSTNode] = [] if orelse is None else [orelse.body if isinstance(orelse, cst.Else) else orelse]
        return [[statement.body], other]
    if isinstance(statement, cst.Try):
        success: List[cst.CSTNode] = [statement.body] + ([statement.orelse] if statement.orelse else [])
        handlers: List[List[cst.CSTNode]] = [[handler] for handler in statement.handlers]
        return [success, *handlers]
    return []

