"""The carriers: every way a module moves a value from where it is made to where it is used
without changing what it is. One place, queried by every model (probabilities, gradient lists),
so a carrier handled here works for every source and every sink.

`origins(flow, expr)` goes one hop back: the expressions whose value `expr` holds, each with the
call it came in through (for messages). A model asks for the origins of what it cannot classify
and classifies those, to a bounded depth. The hops:

    a name or attribute      its assignment (also unpacking, walrus, `self.x` in any method of
                             the class, its bases and subclasses, `agent.x` of `agent = Agent()`);
                             for a name, the assignment of every branch that reaches it
    a parameter              what each call of its function (or lambda) passes, or its default
    a call of the module's   what the function, lambda or method returns (not from a branch the
    own code                 call switches off), through `functools.partial` too; what a
                             functional Keras model was built to output (`mu, var = decoder(z)`)
    a subscript              the element a literal list, tuple or dict holds at a constant index
    `a if c else b`          both branches
    `list(x)`, `tuple(x)`    x

`iterated(binding)` says which iterable a loop name takes its elements from (through `zip` and
`enumerate`): an element of probabilities is probabilities, an element of a gradient list is not.
`collected(flow, value, owner)` is the way back: the list a loop or comprehension gathers each
value into.

`held(flow, expr)` goes out of a container: what the element `expr` reads may be (any element of
a list filled by `append`, of a dict, of a comprehension; what a `TensorArray` was written;
the structure `map_structure` hands on unchanged). `trace(flow, expr, classify)` walks both
hops from `expr` until `classify` recognises a value: the one walk a model needs when what it
looks for travels unchanged (an `exp`, a difference, a sum). `same_value(flow, a, b)`: do two
expressions hold one value (the same text, or the same place they come from)?
"""
from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Set, Tuple, TypeVar

import libcst as cst

from ..names import FUNCTIONAL, MAPPERS
from .constants import UNKNOWN, constant, dead
from .local import Binding, Dataflow
from .nodes import MAX_DEPTH, arg, grandparent

Found = TypeVar("Found")

PASS_THROUGH = ("list", "tuple")
LITERALS = (cst.Dict, cst.List, cst.Tuple)


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
        found = []
        for reaching in flow.reaching(expr):  # every branch's assignment: the join of the paths
            if reaching.kind != "assign" or reaching.value is None or dead(flow, reaching.owner):
                continue  # not a folded-off branch
            if not reaching.path:
                found.append(Origin(reaching.value, ()))
                continue
            value = flow.unpacked(reaching)
            found += [Origin(value, ())] if value is not None else _unpacked(flow, reaching.value, reaching.path)
        return found
    if binding.kind == "param":
        return [Origin(argument, (flow.describe_call(call),)) for call, argument in flow.passed(binding)]
    return []


def _unpacked(flow: Dataflow, value: cst.BaseExpression, path: Tuple[int, ...], depth: int = 0) -> List[Origin]:
    """The element at `path` of what `value` holds, through its origins (`fns, args = policy` of
    a parameter given a tuple, or of an attribute or a call returning one): the tuple's element
    where a tuple or list literal is reached."""
    if depth > MAX_DEPTH:
        return []
    if isinstance(value, (cst.Tuple, cst.List)):
        index, rest = path[0], path[1:]
        if index >= len(value.elements) or isinstance(value.elements[index], cst.StarredElement):
            return []
        element = value.elements[index].value
        return [Origin(element, ())] if not rest else _unpacked(flow, element, rest, depth + 1)
    return [Origin(found.expr, origin.via + found.via) for origin in origins(flow, value)
            for found in _unpacked(flow, origin.expr, path, depth + 1)]


def _returned(flow: Dataflow, call: cst.Call) -> List[Origin]:
    func = call.func
    if isinstance(func, cst.Name) and func.value in PASS_THROUGH and len(call.args) == 1 and not call.args[0].star:
        return [Origin(call.args[0].value, ())]
    via = (flow.describe_call(call),)
    model = _functional_model(flow, func)
    if model is not None:  # a functional model's outputs
        outputs = arg(model, 1, "outputs")
        return [Origin(outputs, via)] if outputs is not None else []
    return [Origin(value, via) for called in flow.dispatched(call) for value in flow.returned(called)
            if not (isinstance(called, cst.FunctionDef) and flow.not_taken(value, called, call))]


def _functional_model(flow: Dataflow, func: cst.BaseExpression) -> Optional[cst.Call]:
    """The `Model(inputs, outputs)` call `func` holds: directly, or what the builder that made it
    returns (`self.disc = self.build_disc()`, whose one return is a functional model)."""
    model: Optional[cst.BaseExpression] = flow.value_of(func) if isinstance(func, (cst.Name, cst.Attribute)) else func
    for _ in range(MAX_DEPTH):
        if not isinstance(model, cst.Call):
            return None
        if flow.ctx.call_name(model) in FUNCTIONAL:
            return model
        returned = [flow.value_of(value) for called in flow.dispatched(model) for value in flow.returned(called)]
        model = returned[0] if len(returned) == 1 else None
    return None


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
    key = _key(flow, subscript)
    if key is UNKNOWN:
        return None
    # the literal the container comes from, through every carrier (`out = head(x)`; `out["probs"]`)
    container = trace(flow, subscript.value, lambda value: value if isinstance(value, LITERALS) else None)
    if isinstance(container, cst.Dict):
        chosen = [e.value for e in container.elements if isinstance(e, cst.DictElement)
                  and constant(flow, e.key) == key]
        return chosen[-1] if chosen else None
    if isinstance(container, (cst.List, cst.Tuple)) and isinstance(key, int) and not isinstance(key, bool) \
            and -len(container.elements) <= key < len(container.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in container.elements):
        return container.elements[key].value
    return None


def keyword(flow: Dataflow, call: cst.Call, name: str, depth: int = 0) -> Optional[cst.BaseExpression]:
    """What `call` passes as the keyword `name`: written (`activation="softmax"`), or through a
    `**` argument: a dict it holds (`**cfg`, `cfg = {"activation": ...}`, through every carrier),
    or the `**kwargs` of the function the call is in, at each call of that function that passes
    the keyword (`build(10, activation="softmax")` calling `Dense(n, **kwargs)`)."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    for a in call.args:
        if a.star != "**" or depth > MAX_DEPTH:
            continue
        splatted = splatted_dict(flow, a.value)
        if name in splatted:
            return splatted[name]
        found = _through_kwargs(flow, a.value, name, depth)
        if found is not None:
            return found
    return None


def splatted_dict(flow: Dataflow, expr: Optional[cst.BaseExpression]) -> dict:
    """key -> value node of the dict literal or `dict(...)` call `expr` holds (through every
    carrier); empty when it holds neither."""
    def literal(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        if isinstance(value, cst.Dict) or (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
                                           and value.func.value == "dict"):
            return value
        return None
    found = trace(flow, expr, literal)
    if isinstance(found, cst.Dict):
        keyed = {}
        for element in found.elements:
            key = element.key.evaluated_value if isinstance(element, cst.DictElement) \
                and isinstance(element.key, cst.SimpleString) else None
            if isinstance(key, str):  # not b"clipnorm": a keyword is never bytes
                keyed[key] = element.value
        return keyed
    if isinstance(found, cst.Call):  # `dict(clipnorm=1.0)`
        return {a.keyword.value: a.value for a in found.args if a.keyword is not None}
    return {}


def _through_kwargs(flow: Dataflow, expr: cst.BaseExpression, name: str, depth: int) -> Optional[cst.BaseExpression]:
    """The keyword `name` given to the function whose `**kwargs` parameter `expr` is, at its calls."""
    binding = flow.binding_of(expr) if isinstance(expr, cst.Name) else None
    function = binding.owner if binding is not None and binding.kind == "param" else None
    if not isinstance(function, cst.FunctionDef) or binding is None:
        return None
    star = function.params.star_kwarg
    if star is None or star.name.value != binding.name:
        return None
    for site in flow.sites(function):  # the call a query entered from, if any: its `**kwargs`
        found = keyword(flow, site, name, depth + 1)
        if found is not None:
            return found
    return None


TENSOR_ARRAY_READS = ("stack", "concat", "gather", "read")
TRACE_LIMIT = MAX_DEPTH * 8  # expressions visited by one `trace`: call sites fan out


def held(flow: Dataflow, expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    """What the element `expr` reads may hold, when `element_at` cannot say which one: the values
    stored at its constant key (`ops["p"] = ...`), else any element."""
    if isinstance(expr, cst.Subscript) and element_at(flow, expr) is None:
        key = _key(flow, expr)
        stores = [b for b in flow.added_to(expr.value) if b.value is not None and isinstance(b.owner, cst.Assign)]
        if key is UNKNOWN or not stores:
            return elements(flow, expr.value)
        return [b.value for b in stores if b.value is not None and _stored_key(flow, b.owner) == key]
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method = expr.func.attr.value
        if method in TENSOR_ARRAY_READS:  # `ta.stack()`: what `ta` was written
            return [expr.func.value]
        if method == "write":  # `ta = ta.write(t, value)`
            written = arg(expr, 1, "value")
            return [written] if written is not None else []
    if isinstance(expr, cst.Call) and flow.ctx.call_name(expr) in MAPPERS and _identity(arg(expr, 0, "fn")):
        structure = arg(expr, 1, "elems") or arg(expr, 1, "structure")
        return [structure] if structure is not None else []
    return []


def elements(flow: Dataflow, container: cst.BaseExpression, depth: int = 0) -> List[cst.BaseExpression]:
    """Every value a container holds: a literal's elements, a dict's values, a comprehension's
    element, and whatever was appended or stored into one a name or `self` attribute holds; for
    a container known none of these ways, those of where it comes from (`origins`: the lists a
    helper's parameter is given at its calls, what a function returns)."""
    value = flow.value_of(container)
    found: List[cst.BaseExpression] = []
    if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
        found += [e.value for e in value.elements]
    elif isinstance(value, cst.Dict):
        found += [e.value for e in value.elements if isinstance(e, cst.DictElement)]
    elif isinstance(value, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
        found.append(value.elt)
    found += [b.value for b in flow.added_to(container) if b.value is not None]
    if not found and depth < MAX_DEPTH:
        for origin in origins(flow, container):
            found += elements(flow, origin.expr, depth + 1)
    return found


def _key(flow: Dataflow, subscript: cst.Subscript) -> object:
    """The constant index or key a subscript reads, else UNKNOWN."""
    index = subscript.slice[0].slice if len(subscript.slice) == 1 else None
    return constant(flow, index.value) if isinstance(index, cst.Index) else UNKNOWN


def _stored_key(flow: Dataflow, store: cst.CSTNode) -> object:
    """The constant key an element store (`d[key] = value`) writes, else UNKNOWN."""
    targets = [t.target for t in store.targets if isinstance(t.target, cst.Subscript)] \
        if isinstance(store, cst.Assign) else []
    return _key(flow, targets[0]) if targets else UNKNOWN


def _identity(function: Optional[cst.BaseExpression]) -> bool:
    """`lambda t: t`."""
    return isinstance(function, cst.Lambda) and len(function.params.params) == 1 \
        and isinstance(function.body, cst.Name) and function.body.value == function.params.params[0].name.value


def trace(flow: Dataflow, expr: Optional[cst.BaseExpression],
          classify: Callable[[cst.BaseExpression], Optional[Found]],
          through: Callable[[cst.BaseExpression], List[cst.BaseExpression]] = lambda e: []) -> Optional[Found]:
    """The first value `classify` recognises in `expr` or where its value comes from: back
    through every carrier (`origins`), out of containers (`held`), and through the hops a model
    adds (`through`: transforms that keep what it looks for, such as a reshape of a sum).
    Breadth first, so the nearest answer wins; bounded, so cycles and recursion end."""
    found = traced(flow, expr, classify, through)
    return found[0] if found is not None else None


def traced(flow: Dataflow, expr: Optional[cst.BaseExpression],
           classify: Callable[[cst.BaseExpression], Optional[Found]],
           through: Callable[[cst.BaseExpression], List[cst.BaseExpression]] = lambda e: []
           ) -> Optional[Tuple[Found, Tuple[str, ...]]]:
    """`trace`, with the calls the value came in through (outermost first), for messages."""
    todo: List[Tuple[cst.BaseExpression, Tuple[str, ...]]] = [(expr, ())] if expr is not None else []
    seen: Set[cst.BaseExpression] = set()
    while todo and len(seen) < TRACE_LIMIT:
        current, via = todo.pop(0)
        if current in seen:
            continue
        seen.add(current)
        found = classify(current)
        if found is not None:
            return found, via
        todo += [(o.expr, via + o.via) for o in _before(flow, current, through)]
    return None


def _before(flow: Dataflow, expr: cst.BaseExpression,
            through: Callable[[cst.BaseExpression], List[cst.BaseExpression]] = lambda e: []) -> List[Origin]:
    """One hop back through every carrier: `origins`, the elements a container may give (`held`),
    then a model's own hops."""
    return origins(flow, expr) + [Origin(e, ()) for e in (*held(flow, expr), *through(expr))]


def _starts(flow: Dataflow, expr: cst.BaseExpression,
            stops: Callable[[cst.BaseExpression], bool]) -> Tuple[List[cst.BaseExpression], bool]:
    """Where the carriers lead `expr` back to and stop (nothing comes before, or `stops` says so),
    breadth first; and False when the walk reached TRACE_LIMIT before it was done."""
    found: List[cst.BaseExpression] = []
    todo: List[cst.BaseExpression] = [expr]
    seen: Set[cst.BaseExpression] = set()
    while todo:
        current = todo.pop(0)
        if current in seen:
            continue
        seen.add(current)
        if len(seen) > TRACE_LIMIT:
            return found, False
        before = [] if stops(current) else _before(flow, current)
        if before:
            todo += [o.expr for o in before]
        else:
            found.append(current)
    return found, True


def sources(flow: Dataflow, expr: cst.BaseExpression) -> Set[object]:
    """Where the value of `expr` starts: the expressions and unassigned bindings (a parameter
    no call passes, a loop variable) that carriers lead back to and no further."""
    starts: Set[object] = set()
    for start in _starts(flow, expr, lambda e: False)[0]:
        binding = flow.binding_of(start) if isinstance(start, (cst.Name, cst.Attribute)) else None
        starts.add((binding.owner, binding.name) if binding is not None else start)
    return starts


def same_value(flow: Dataflow, one: cst.BaseExpression, other: cst.BaseExpression) -> bool:
    """Do `one` and `other` hold the same value: written alike in one place, or both coming from
    the same start (`logits` in a helper and the `logits` its caller passed)?"""
    if flow.ctx.text(one) == flow.ctx.text(other) and (
            flow.scope_of(one) is flow.scope_of(other) or not _bound_here(flow, one) or not _bound_here(flow, other)):
        return True  # written alike, in one scope or naming what no binding of this module says
    return not sources(flow, one).isdisjoint(sources(flow, other))


def _passed(flow: Dataflow, expr: cst.BaseExpression) -> bool:
    """A parameter that calls of its function pass values into (`origins` has them)."""
    binding = flow.binding_of(expr) if isinstance(expr, cst.Name) else None
    return binding is not None and binding.kind == "param" and bool(_bound(flow, expr))


def _bound_here(flow: Dataflow, expr: cst.BaseExpression) -> bool:
    return not isinstance(expr, cst.Name) or flow.binding_of(expr) is not None


def carried_constant(flow: Dataflow, expr: cst.BaseExpression) -> object:
    """The literal `expr` holds when every way its value comes (every carrier, every element a
    container may give) starts at the same literal; UNKNOWN when one start does not fold or two
    differ. A parameter is what its calls pass (its default where a call passes nothing); its
    default alone only when no call of its function is known."""
    starts, complete = _starts(flow, expr, lambda e: constant(flow, e) is not UNKNOWN and not _passed(flow, e))
    found = [constant(flow, start) for start in starts]
    first = found[0] if found and complete else UNKNOWN
    return first if all(type(v) is type(first) and v == first for v in found) else UNKNOWN
