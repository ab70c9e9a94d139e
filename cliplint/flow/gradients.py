"""The gradient model the rules share: what is a gradient list (from `tape.gradient`,
`tf.gradients`, `compute_gradients`, through names, unpacking, comprehensions and `zip`),
which loop or comprehension name is one of its elements, whether that element is guarded
against `None`, what a clip of a list binds (`clipping`), and whether a value reaches
`optimizer.apply_gradients(...)`.
"""
from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Tuple

import libcst as cst

from .carriers import PASS_THROUGH, elements, origins, trace
from .local import Binding, Dataflow
from .nodes import MAX_DEPTH, arg, is_none, target_names, tests_none, walk


@dataclass(frozen=True)
class GradList:
    """A list of gradients, as far as the dataflow can tell."""

    origin: cst.Call  # tape.gradient(...), tf.gradients(...), opt.compute_gradients(...)
    pairs: bool  # elements are (gradient, variable) pairs
    may_hold_none: bool  # an entry is None when a variable gets no gradient
    filtered: bool  # None entries were removed, so it is shorter than the variable list
    sources: Optional[cst.BaseExpression]  # the variables the gradient was taken for
    via: Tuple[str, ...] = ()  # the calls it came in through, outermost first, for messages


class Element(NamedTuple):
    """One element of a gradient list, as a value made of it is gathered (`element_taken`)."""

    grads: GradList
    name: cst.BaseExpression  # the loop or comprehension name that is the element (or `gv[0]` of a pair)
    binding: Binding  # that name's binding: the loop, comprehension or mapped lambda
    stands_for: cst.CSTNode  # what the loop gathers: the value itself, or the helper call returning it


class Gradients:
    """Gradient lists and their elements, over one module's dataflow."""

    def __init__(self, flow: Dataflow) -> None:
        self.flow = flow
        self.ctx = flow.ctx
        self._targets: Optional[List[cst.BaseExpression]] = None

    def is_tape(self, expr: cst.BaseExpression) -> bool:
        value = expr
        if isinstance(expr, cst.Name):
            binding = self.flow.binding_of(expr)
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
        if isinstance(expr, (cst.Name, cst.Attribute)):  # also `self.gvs`
            return self._gradient_name(expr, depth)
        if isinstance(expr, cst.Call):
            return self._gradient_call(expr, depth) or self._from_origins(expr, depth)
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Call) and self._index(expr) == 0 \
                and self.ctx.call_name(expr.value) == "tensorflow.clip_by_global_norm":
            return self.gradient_list(arg(expr.value, 0, "t_list"), depth + 1)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return self._gradient_comprehension(expr, depth)
        return self._from_origins(expr, depth)

    @staticmethod
    def _index(sub: cst.Subscript) -> Optional[int]:
        if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
            value = sub.slice[0].slice.value
            if isinstance(value, cst.Integer):
                return int(value.value)
        return None

    def differentiates(self, call: cst.Call) -> Optional[str]:
        """Which way `call` differentiates, if it does: 'tf.gradients', 'tape' (`tape.gradient`),
        'compute_gradients' or 'minimize' (an optimizer's)."""
        func = call.func
        if self.ctx.call_name(call) == "tensorflow.gradients":
            return "tf.gradients"
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        if method == "gradient" and self.is_tape(func.value):
            return "tape"
        return method if method in ("compute_gradients", "minimize") else None

    def targets(self) -> List[cst.BaseExpression]:
        """What the module differentiates: the target of `tape.gradient` and `tf.gradients`, the
        loss of an optimizer's `minimize` and `compute_gradients` (memoised)."""
        if self._targets is None:
            keywords = {"tf.gradients": "ys", "tape": "target", "compute_gradients": "loss", "minimize": "loss"}
            self._targets = [target for call in self.ctx.nodes(cst.Call)
                             if (way := self.differentiates(call)) is not None
                             and (target := arg(call, 0, keywords[way])) is not None]
        return self._targets

    def _gradient_call(self, call: cst.Call, depth: int) -> Optional[GradList]:
        func = call.func
        if isinstance(func, cst.Name) and func.value == "zip" and len(call.args) == 2 \
                and not any(a.star for a in call.args):  # list(zip(grads, variables)): the pairs
            grads = self.gradient_list(call.args[0].value, depth + 1)
            return dataclasses.replace(grads, pairs=True) if grads is not None and not grads.pairs else None
        way = self.differentiates(call)
        if way in ("tf.gradients", "tape"):
            zero = arg(call, 99, "unconnected_gradients")
            may_none = zero is None or "ZERO" not in self.ctx.text(zero).upper()
            sources = arg(call, 1, "sources" if way == "tape" else "xs")
            return GradList(call, False, may_none, False, sources)
        if way == "compute_gradients":
            return GradList(call, True, True, False, arg(call, 1, "var_list"))
        return None

    def _gradient_name(self, name: cst.BaseExpression, depth: int) -> Optional[GradList]:
        binding = self.flow.binding_of(name)
        if binding is not None and binding.kind == "assign" and binding.path == (0,) \
                and isinstance(binding.value, cst.Call) and self.flow.unpacked(binding) is None:
            value = binding.value
            if self.ctx.call_name(value) == "tensorflow.clip_by_global_norm":
                return self.gradient_list(arg(value, 0, "t_list"), depth + 1)
            transposed = _unzipped(value)  # grads, variables = zip(*grads_and_vars)
            if transposed is not None:
                inner = self.gradient_list(transposed, depth + 1)
                if inner is not None and inner.pairs:
                    return GradList(inner.origin, False, inner.may_hold_none, inner.filtered, inner.sources)
                return None
        if binding is not None and binding.kind == "iter" and not binding.path and binding.value is not None:
            return self._taken_whole(binding.value, depth)
        return self._from_origins(name, depth)

    def _taken_whole(self, iterable: cst.BaseExpression, depth: int) -> Optional[GradList]:
        """The gradient list a loop name is, when the loop runs over a list of gradient lists (one
        per tower or step: `for tower in tower_grads`), or over one variable's entries across
        them (`for grad_and_vars in zip(*tower_grads)`, the towers' average): entries of a
        gradient list, so each may be None as the list's may."""
        for element in elements(self.flow, _unzipped(iterable) or iterable):
            found = self.gradient_list(element, depth + 1)
            if found is not None:
                return found
        return None

    def _from_origins(self, expr: cst.BaseExpression, depth: int) -> Optional[GradList]:
        """A gradient list among where the value of `expr` comes from (`carriers`), to the depth
        every query has (`MAX_DEPTH` hops)."""
        for origin in origins(self.flow, expr):
            found = self.gradient_list(origin.expr, depth + 1)
            if found is not None:
                return dataclasses.replace(found, via=origin.via + found.via)
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
                at: Tuple[int, ...] = (1, 0) if grads is not None and grads.pairs else (1,)
                if grads is not None and at in by_path:  # `for i, (grad, var) in enumerate(gvs)`
                    return grads, [by_path[at]]
                return None
        grads = self.gradient_list(iterable, depth + 1)
        if grads is None:
            return None
        key = (0,) if grads.pairs else ()
        return (grads, [by_path[key]]) if key in by_path else None

    def clipping(self, assign: cst.Assign) -> Optional[Clipping]:
        """The clip of a gradient list that an assignment binds to a new name, the clip's transfer
        function on a list: `clipped, norm = tf.clip_by_global_norm(grads, c)`, `clipped =
        tf.clip_by_global_norm(grads, c)[0]`, `clipped = [tf.clip_by_norm(g, c) for g in grads]` (also
        over `zip(grads, variables)`)."""
        ctx = self.ctx
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        value = assign.value
        call: Optional[cst.Call]
        if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Call) \
                and ctx.call_name(value) == "tensorflow.clip_by_global_norm":
            names = dict((path, name.value) for name, path in target_names(target))
            clipped, source, call = names.get((0,)), arg(value, 0, "t_list"), value
        elif isinstance(target, cst.Name) and isinstance(value, cst.Subscript) and isinstance(value.value, cst.Call) \
                and ctx.call_name(value.value) == "tensorflow.clip_by_global_norm":
            clipped, source, call = target.value, arg(value.value, 0, "t_list"), value.value
        elif isinstance(target, cst.Name) and isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            call = next((n for n in walk(value.elt) if isinstance(n, cst.Call)
                         and self.flow.called_name(n) in ELEMENT_CLIPS), None)
            iterable = value.for_in.iter
            source = iterable.args[0].value if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) \
                and iterable.func.value == "zip" and iterable.args else iterable
            clipped = target.value if call is not None else None
        else:
            return None
        if not clipped or clipped == "_" or not isinstance(source, cst.Name) or source.value == clipped \
                or self.gradient_list(source) is None:
            return None
        return Clipping(clipped, source, call)

    def gradient_element(self, use: cst.BaseExpression) -> Optional[Tuple[GradList, Binding]]:
        """Is this name one element of a gradient list, bound by a loop or comprehension? Also
        `gv[0]`: the gradient of a `(grad, var)` pair bound to one name."""
        if isinstance(use, cst.Subscript):
            return self._pair_gradient(use) or self._keyed_gradient(use)
        if not isinstance(use, cst.Name):
            return None
        binding = self.flow.binding_of(use)
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

    def _pair_gradient(self, item: cst.Subscript) -> Optional[Tuple[GradList, Binding]]:
        pair = item.value
        if not isinstance(pair, cst.Name) or self._index(item) != 0:
            return None
        binding = self.flow.binding_of(pair)
        if binding is None or binding.kind != "iter" or binding.value is None or binding.path:
            return None
        grads = self.gradient_list(binding.value)
        return (grads, binding) if grads is not None and grads.pairs else None

    def _keyed_gradient(self, item: cst.Subscript) -> Optional[Tuple[GradList, Binding]]:
        """`grads[k]` with `k` bound by a loop: an entry of a gradient list indexed in turn (`for i
        in range(len(grads))`), or of a dict of gradients keyed like the variables (MAML's
        `dict(zip(weights.keys(), grads))` read as `grads[key] for key in weights.keys()`). The
        binding returned is the key's: its loop is what runs on every entry."""
        key = loop_key(item)
        binding = self.flow.binding_of(key) if key is not None else None
        if binding is None or binding.kind != "iter" or binding.value is None:
            return None
        grads = self.keyed_gradients(item.value)
        return (grads, binding) if grads is not None else None

    def keyed_gradients(self, container: cst.BaseExpression) -> Optional[GradList]:
        """The gradients a container indexed by key holds: a plain gradient list, or a dict made
        from one (`dict(zip(keys, grads))`, `{k: g for k, g in zip(keys, grads)}`)."""
        grads = self.gradient_list(container)
        if grads is not None:
            return None if grads.pairs else grads
        value = self.flow.value_of(container)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict" \
                and len(value.args) == 1 and not value.args[0].star:
            value = value.args[0].value  # dict(zip(keys, grads)): the (key, gradient) pairs
        elif isinstance(value, cst.DictComp) and value.for_in.inner_for_in is None \
                and isinstance(value.value, cst.Name):  # {k: g for k, g in zip(keys, grads)}
            element = self.element_of(value.for_in.iter, value.for_in.target)
            return element[0] if element is not None and element[1][0] == value.value.value else None
        else:
            return None
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "zip" \
                and len(value.args) == 2 and not any(a.star for a in value.args):
            grads = self.gradient_list(value.args[1].value)
            return grads if grads is not None and not grads.pairs else None
        return None

    def element_taken(self, use: cst.BaseExpression, result: cst.CSTNode) -> Optional[Element]:
        """The gradient element `use` is, where `result` (what is made of it) lands: `use` itself
        is one (`[tf.clip_by_norm(g, c) for g in grads]`), or it is the parameter of a helper
        returning `result` that a call passes an element (`[clip(g) for g in grads]` of `def
        clip(grad): return tf.clip_by_norm(grad, c)`), and that call stands for `result`."""
        found = self.gradient_element(use)
        if found is not None:
            return Element(found[0], use, found[1], result)
        binding = self.flow.binding_of(use)
        if binding is None or binding.kind != "param" or not isinstance(binding.owner, cst.FunctionDef) \
                or not any(trace(self.flow, r, lambda e: e if e is result else None) is not None
                           for r in self.flow.returned(binding.owner)):
            return None
        for call, passed in self.flow.passed(binding):
            if not isinstance(passed, (cst.Name, cst.Subscript)):
                continue
            found = self.gradient_element(passed)
            if found is not None:
                return Element(found[0], passed, found[1], call)
        return None

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
        if isinstance(binding.value, cst.Name) and self._entry_tested(use, binding.value.value):
            return True
        if isinstance(owner, cst.For):
            return tests_none(owner.body, use.value)
        if isinstance(owner, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):  # COMPREHENSION_TYPES
            comp_for: Optional[cst.CompFor] = owner.for_in
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


    def _entry_tested(self, use: cst.Name, iterable: str) -> bool:
        """Is `use` under an `if` that tests an entry of the list it iterates for None
        (`if grad_and_vars[0][0] is not None:` around `for g, _ in grad_and_vars`)?"""
        for anc in self.ctx.ancestors(use):
            if isinstance(anc, cst.If) and any(
                    isinstance(sub, cst.Comparison) and len(sub.comparisons) == 1
                    and any(_root(side) == iterable and isinstance(side, cst.Subscript)
                            for side in (sub.left, sub.comparisons[0].comparator))
                    and any(is_none(side) for side in (sub.left, sub.comparisons[0].comparator))
                    for sub in walk(anc.test)):
                return True
            if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
                return False
        return False


def loop_key(item: cst.Subscript) -> Optional[cst.Name]:
    """`k` in `c[k]`: a subscript by one plain name (a loop's key, when a loop binds it)."""
    if len(item.slice) != 1 or not isinstance(item.slice[0].slice, cst.Index):
        return None
    key = item.slice[0].slice.value
    return key if isinstance(key, cst.Name) else None


def _unzipped(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` in `zip(*x)`, else None."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "zip" \
            and len(expr.args) == 1 and expr.args[0].star == "*":
        return expr.args[0].value
    return None


def _root(expr: cst.BaseExpression) -> Optional[str]:
    """The name a chain of subscripts starts from: `pairs` in `pairs[0][0]`."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


APPLY_METHODS = ("apply_gradients", "apply")
CONCATS = frozenset({"tensorflow.concat", "keras.backend.concatenate", "keras.ops.concatenate"})
FLATTENS = frozenset({"tensorflow.reshape", "keras.backend.reshape", "keras.ops.reshape", "keras.backend.flatten",
                      "keras.ops.ravel"})
# The clips of one gradient at a time a comprehension over a gradient list applies.
ELEMENT_CLIPS = frozenset({"tensorflow.clip_by_norm", "tensorflow.clip_by_value", "tensorflow.clip_by_average_norm",
                           "keras.ops.clip"})
_COMBINERS = ("zip", *PASS_THROUGH)  # what pairs lists, and what copies one


class Clipping(NamedTuple):
    clipped: str  # the name the clipped list is bound to
    source: cst.Name  # the unclipped list, as the clip reads it
    call: Optional[cst.Call]  # the clip


def applied(flow: Dataflow, produced: cst.CSTNode) -> bool:
    """Does the value `produced` holds reach `optimizer.apply_gradients(...)` (or Keras 3's
    `apply`), or the one flat update vector a concatenation of every gradient flattened makes
    (`_flattens`: baselines' `flatgrad`, which an MPI Adam or a conjugate gradient applies)?
    `produced` is a comprehension or call that makes a list, or the name or attribute a loop
    appends to, stores into, or a clip is assigned to. Traced back from every apply's
    arguments through the carriers (`carriers.origins`) and what combines lists into pairs
    (`zip`, `list`, literals, comprehensions), so a carrier the engine follows for a source
    counts on the way to the sink too."""
    return any(_same_value(flow, expr, produced) for expr in _reaching_apply(flow))


_REACHING: "weakref.WeakKeyDictionary[Dataflow, List[cst.BaseExpression]]" = weakref.WeakKeyDictionary()


def _reaching_apply(flow: Dataflow) -> List[cst.BaseExpression]:
    """Every expression whose value an apply's argument holds (built once per module: every
    clip asks)."""
    if flow not in _REACHING:
        _REACHING[flow] = [e for call in flow.ctx.nodes(cst.Call) if _applies(call) or _flattens(flow, call)
                           for e in reached_by(flow, call)]
    return _REACHING[flow]


def _flattens(flow: Dataflow, call: cst.Call) -> bool:
    """`tf.concat([tf.reshape(g, [-1]) for g in grads], axis=0)`: one vector of every gradient
    flattened, the update itself."""
    values = arg(call, 0, "values")
    return flow.ctx.call_name(call) in CONCATS and isinstance(values, (cst.ListComp, cst.GeneratorExp)) \
        and isinstance(values.elt, cst.Call) and flow.ctx.call_name(values.elt) in FLATTENS


def reached_by(flow: Dataflow, call: cst.Call) -> List[cst.BaseExpression]:
    """The expressions whose value a call's arguments hold, to `MAX_DEPTH * 2` hops back
    through the carriers and what combines lists (`_parts`), breadth first, each once."""
    todo = [(argument.value, 0) for argument in call.args]
    seen: List[cst.BaseExpression] = []
    visited: set = set()
    while todo:
        expr, depth = todo.pop(0)
        if expr in visited or depth > MAX_DEPTH * 2:
            continue
        visited.add(expr)
        seen.append(expr)
        todo += [(part, depth + 1) for part in _parts(flow, expr)]
    return seen


def _applies(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in APPLY_METHODS


def _parts(flow: Dataflow, expr: cst.BaseExpression) -> List[cst.BaseExpression]:
    """What a value on the way to an apply is made of: the lists a combiner pairs, a
    comprehension's iterable, a literal's elements, and its origins."""
    parts: List[cst.BaseExpression] = []
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _COMBINERS:
        parts = [a.value for a in expr.args]
    elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        parts = [expr.for_in.iter]  # [(g, v) for g, v in zip(clipped, variables)]
    elif isinstance(expr, (cst.List, cst.Tuple)):
        parts = [e.value for e in expr.elements]
    return parts + [origin.expr for origin in origins(flow, expr)]


def _same_value(flow: Dataflow, expr: cst.BaseExpression, produced: cst.CSTNode) -> bool:
    """`expr` is `produced`, or reads the list it names after it was made (in the same scope:
    appends rebind nothing), or the same attribute."""
    if expr is produced:
        return True
    ctx = flow.ctx
    if isinstance(expr, cst.Name) and isinstance(produced, cst.Name):
        return expr.value == produced.value and ctx.pre[expr] > ctx.pre[produced] \
            and flow.scope_of(expr) is flow.scope_of(produced)
    return isinstance(expr, cst.Attribute) and isinstance(produced, cst.Attribute) \
        and ctx.text(expr) == ctx.text(produced)
