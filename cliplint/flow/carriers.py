"""The carriers: every way a module moves a value from where it is made to where it is used
without changing what it is. One place, queried by every model (probabilities, gradient lists),
so a carrier handled here works for every source and every sink.

`origins(flow, expr)` goes one hop back: the expressions whose value `expr` holds, each with the
call it came in through (for messages). A model asks for the origins of what it cannot classify
and classifies those, to a bounded depth. The hops:

    a name or attribute      its assignment (also unpacking, walrus, `self.x` in any method of
                             the class, its bases and subclasses, `agent.x` of `agent = Agent()`)
    a parameter              what each call of its function (or lambda) passes, or its default
    a call of the module's   what the function, lambda or method returns (not from a branch the
    own code                 call switches off), through `functools.partial` too
    a subscript              the element a literal list, tuple or dict holds at a constant index
    `a if c else b`          both branches
    `list(x)`, `tuple(x)`    x

`iterated(binding)` says which iterable a loop name takes its elements from (through `zip` and
`enumerate`): an element of probabilities is probabilities, an element of a gradient list is not.
`collected(flow, value, owner)` is the way back: the list a loop or comprehension gathers each
value into.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import libcst as cst

from .constants import UNKNOWN, constant
from .local import Binding, Dataflow
from .nodes import grandparent

PASS_THROUGH = ("list", "tuple")


class Origin(NamedTuple):
    expr: cst.BaseExpression
    via: Tuple[str, ...]  # the call it came in through, if any


def origins(flow: Dataflow, expr: cst.BaseExpression) -> List[Origin]:
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return _bound(flow, expr)
    if isinstance(expr, cst.Call):
        return _returned(flow, expr)
    if isinstance(expr, cst.Subscript):
        element = element_at(flow, expr)
        return [Origin(element, ())] if element is not None else []
    if isinstance(expr, cst.IfExp):
        return [Origin(expr.body, ()), Origin(expr.orelse, ())]
    if isinstance(expr, cst.NamedExpr):
        return [Origin(expr.value, ())]
    return []


def _bound(flow: Dataflow, expr: cst.BaseExpression) -> List[Origin]:
    binding = flow.binding_of(expr)
    if binding is None:
        return []
    if binding.kind == "assign" and binding.value is not None:
        value = flow.unpacked(binding) if binding.path else binding.value
        return [Origin(value, ())] if value is not None else []
    if binding.kind == "param" and isinstance(binding.owner, (cst.FunctionDef, cst.Lambda)):
        passed = []
        for call in flow.call_sites(binding.owner):
            argument = flow.argument_for(call, binding.owner, binding.name)
            if argument is not None:
                passed.append(Origin(argument, (flow.describe_call(call),)))
        return passed
    return []


def _returned(flow: Dataflow, call: cst.Call) -> List[Origin]:
    func = call.func
    if isinstance(func, cst.Name) and func.value in PASS_THROUGH and len(call.args) == 1 and not call.args[0].star:
        return [Origin(call.args[0].value, ())]
    function = flow.callee(call)
    if not isinstance(function, (cst.FunctionDef, cst.Lambda)):
        return []
    via = (flow.describe_call(call),)
    return [Origin(value, via) for value in flow.returned(function)
            if not (isinstance(function, cst.FunctionDef) and flow.not_taken(value, function, call))]


def iterated(binding: Binding) -> Optional[cst.BaseExpression]:
    """The iterable whose elements a loop or comprehension name takes: `for p in probs` (probs),
    `for g, v in zip(grads, variables)` (grads for g), `for i, p in enumerate(probs)` (probs)."""
    if binding.kind != "iter" or binding.value is None:
        return None
    if not binding.path:
        return binding.value
    value = binding.value
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and len(binding.path) == 1):
        return None
    index = binding.path[0]
    if value.func.value == "zip" and index < len(value.args) and not any(a.star for a in value.args):
        return value.args[index].value
    if value.func.value == "enumerate" and index == 1 and value.args:
        return value.args[0].value
    return None


def collected(flow: Dataflow, value: cst.CSTNode, owner: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The node holding the list `owner` gathers each `value` into: a comprehension is its own
    list, a mapped lambda's is the `map(...)` call; in a `for` loop (or any other block) it is
    the list the value (or a name holding it, alone or as the first of a `(grad, var)` pair) is
    appended to, or stored back into (`gvs[i] = (clipped, var)`); None when nothing gathers it."""
    ctx = flow.ctx
    if isinstance(owner, cst.Lambda):
        return grandparent(ctx, owner)
    if isinstance(owner, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
        return owner
    holding: set = {value}
    for anc in ctx.ancestors(value):
        if anc is owner:
            break
        if isinstance(anc, cst.Assign):
            holding |= {t.target.value for t in anc.targets if isinstance(t.target, cst.Name)}
            stored = [t.target for t in anc.targets if isinstance(t.target, cst.Subscript)]
            if stored and _holds(anc.value, holding):
                return stored[0].value
    body = owner.body if isinstance(owner, cst.For) else owner
    for call in ctx.nodes(cst.Call):
        func = call.func
        if ctx.encloses(body, call) and isinstance(func, cst.Attribute) and func.attr.value == "append" \
                and call.args and _holds(call.args[0].value, holding):
            return func.value
    return None


def _holds(value: cst.BaseExpression, holding: set) -> bool:
    """Is `value` the gathered value, a name holding it, or a pair whose first element is?"""
    if isinstance(value, cst.Tuple) and value.elements:
        value = value.elements[0].value
    return value in holding or getattr(value, "value", None) in holding


def element_at(flow: Dataflow, subscript: cst.Subscript) -> Optional[cst.BaseExpression]:
    """`heads[0]`, `outputs["probs"]`: what a literal list, tuple or dict holds at a constant
    index or key (None when the container or the index is not known)."""
    container = flow.value_of(subscript.value)
    index = subscript.slice[0].slice if len(subscript.slice) == 1 else None
    key = constant(flow, index.value) if isinstance(index, cst.Index) else UNKNOWN
    if key is UNKNOWN:
        return None
    if isinstance(container, cst.Dict):
        chosen = [e.value for e in container.elements if isinstance(e, cst.DictElement)
                  and constant(flow, e.key) == key]
        return chosen[-1] if chosen else None
    if isinstance(container, (cst.List, cst.Tuple)) and isinstance(key, int) and not isinstance(key, bool) \
            and -len(container.elements) <= key < len(container.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in container.elements):
        return container.elements[key].value
    return None
