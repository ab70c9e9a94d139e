"""Constant folding: the literal value an expression is known to hold, through names, module
constants, parameter defaults and command-line flag defaults (`args.clipnorm`, `FLAGS.clipnorm`).
"""
from __future__ import annotations

import enum
from typing import Callable, Dict, Final, Optional, Tuple, Union

import libcst as cst

from .bindings import LocalFlow
from .nodes import MAX_DEPTH, arg, walk


class _Unknown(enum.Enum):
    """A one-member enum, not a bare object: `x is not UNKNOWN` then narrows `x`'s type."""

    UNKNOWN = "UNKNOWN"

    def __repr__(self) -> str:
        return "UNKNOWN"

    __str__ = __repr__


UNKNOWN: Final = _Unknown.UNKNOWN
Number = Union[int, float, _Unknown]  # a known int or float, else UNKNOWN

# Calls that return a fixed number: Keras' fuzz factor, unless a run calls `set_epsilon`
# (measured: 1e-07 in Keras 3 and tf-keras).
CONSTANT_CALLS: Final = {"keras.backend.epsilon": 1e-7, "keras.config.epsilon": 1e-7}


class FlagDefaults(LocalFlow):
    """A mixin of `local.Dataflow`: the module's argparse and absl flag definitions."""

    _flags: Optional[Dict[str, Optional[cst.BaseExpression]]] = None  # built on first need

    def flag_defaults(self) -> Dict[str, Optional[cst.BaseExpression]]:
        """Command-line flags defined in this module, by destination, with their default:
        `parser.add_argument("--clip-norm", default=1.0)` -> clip_norm, absl
        `flags.DEFINE_float("clipnorm", 1.0, ...)` -> clipnorm. A flag without a default, or
        defined twice, maps to None (unknown). `args.clipnorm` / `FLAGS.clipnorm` are then the
        default on a run that does not pass the flag."""
        if self._flags is None:
            self._flags = {}
            for call in self.ctx.nodes(cst.Call):
                found = self._flag(call)
                if found is not None:
                    dest, default = found
                    self._flags[dest] = default if dest not in self._flags else None
        return self._flags

    def _flag(self, call: cst.Call) -> Optional[Tuple[str, Optional[cst.BaseExpression]]]:
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        if func.attr.value == "add_argument":
            dest = arg(call, 99, "dest")
            names = [a.value for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
            spelled = [n.evaluated_value for n in names]
            longs = [v for v in spelled if isinstance(v, str) and v.startswith("--")]  # not b"--x"
            name = constant(self, dest) if dest is not None else longs[0][2:].replace("-", "_") if longs else None
            return (name, arg(call, 99, "default")) if isinstance(name, str) else None
        if func.attr.value.startswith("DEFINE_") and (self.ctx.qualify(func) or "").startswith("absl.flags."):
            name = constant(self, arg(call, 0, "name"))
            return (name, arg(call, 1, "default")) if isinstance(name, str) else None
        return None


def constant(flow: LocalFlow, expr: Optional[cst.BaseExpression], depth: int = 0) -> object:
    """The literal value an expression is known to hold, else UNKNOWN.

    Follows names to literal assignments, module constants and parameter defaults (the
    default path: `def build(clip=1.0)` makes `clip` 1.0).
    """
    if expr is None or depth > MAX_DEPTH:
        return UNKNOWN
    if isinstance(expr, (cst.Integer, cst.Float)):
        return expr.evaluated_value
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = constant(flow, expr.expression, depth + 1)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(expr.operator, cst.Minus) else inner
        return UNKNOWN
    if isinstance(expr, cst.BinaryOperation):
        return _arithmetic(flow, expr, depth)
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    if isinstance(expr, cst.Dict):
        return _dict_constant(flow, expr, depth)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        return _dict_call_constant(flow, expr, depth)
    if isinstance(expr, cst.Call) and not expr.args:
        return CONSTANT_CALLS.get(flow.ctx.call_name(expr) or "", UNKNOWN)
    if isinstance(expr, cst.Name):
        if expr.value in ("None", "True", "False"):
            return {"None": None, "True": True, "False": False}[expr.value]
        binding = flow.binding_of(expr)
        if binding is not None and binding.kind in ("assign", "param"):
            if binding.kind == "param" and binding.value is None:
                return UNKNOWN
            return constant(flow, _unpacked_literal(binding.value, binding.path), depth + 1)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value != "self":
        default = flow.flag_defaults().get(expr.attr.value)  # args.clipnorm, FLAGS.clipnorm
        return constant(flow, default, depth + 1) if default is not None else UNKNOWN
    return UNKNOWN


def _unpacked_literal(value: Optional[cst.BaseExpression], path: Tuple[int, ...]) -> Optional[cst.BaseExpression]:
    """The element of a literal tuple or list an unpacking binds (`BOX, HEAD = "box", "head"`:
    HEAD is "head"), else None."""
    for index in path:
        if not isinstance(value, (cst.Tuple, cst.List)) or index >= len(value.elements) \
                or any(isinstance(e, cst.StarredElement) for e in value.elements):
            return None
        value = value.elements[index].value
    return value


def says_small(expr: cst.BaseExpression) -> bool:
    """A name or attribute that says it holds a small constant (`eps`, `self.epsilon`,
    `SMALL_NUMBER`, `cfg.tiny`), whatever module it comes from (`from utils import *`): an
    epsilon when its value cannot be read."""
    word = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
    return any(part.startswith("eps") or part in ("tiny", "small") for part in word.lower().split("_"))


def _dict_constant(flow: LocalFlow, expr: cst.Dict, depth: int) -> object:
    found = {}
    for element in expr.elements:
        if not isinstance(element, cst.DictElement):
            return UNKNOWN
        key, value = constant(flow, element.key, depth + 1), constant(flow, element.value, depth + 1)
        if not isinstance(key, str) or value is UNKNOWN:
            return UNKNOWN
        found[key] = value
    return found


def _dict_call_constant(flow: LocalFlow, expr: cst.Call, depth: int) -> object:
    """`dict(clipnorm=1.0, clipvalue=0.5)`: keyword arguments only, each a literal."""
    found = {}
    for argument in expr.args:
        value = constant(flow, argument.value, depth + 1)
        if argument.keyword is None or argument.star or value is UNKNOWN:
            return UNKNOWN
        found[argument.keyword.value] = value
    return found


def _arithmetic(flow: LocalFlow, expr: cst.BinaryOperation, depth: int) -> object:
    left = constant(flow, expr.left, depth + 1)
    right = constant(flow, expr.right, depth + 1)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
    if not numbers:
        return UNKNOWN
    ops = {cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b,
           cst.Multiply: lambda a, b: a * b, cst.Divide: lambda a, b: a / b if b else UNKNOWN}
    op = ops.get(type(expr.operator))
    return op(left, right) if op else UNKNOWN


_COMPARISONS = {cst.GreaterThan: lambda a, b: a > b, cst.GreaterThanEqual: lambda a, b: a >= b,
                cst.LessThan: lambda a, b: a < b, cst.LessThanEqual: lambda a, b: a <= b,
                cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b}


def ruled_out(flow: LocalFlow, node: cst.CSTNode, holder: cst.BaseExpression, value: object) -> bool:
    """Does a branch around `node` run only when `holder` (a name or attribute) is not `value`?
    `if clip > 0: tf.clip_by_norm(g, clip)` with clip's default -1: the default never gets there."""
    text = flow.ctx.text(holder)
    child: cst.CSTNode = node
    for ancestor in flow.ctx.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.IfExp)) and child is not ancestor.test:
            taken = _holds(flow, ancestor.test, text, value)
            in_body = flow.ctx.encloses(ancestor.body, node)
            if taken is not None and taken != in_body:
                return True
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            return False
        child = ancestor
    return False


def dead(flow: LocalFlow, node: cst.CSTNode) -> bool:
    """Is `node` in a branch that never runs, its test folding to a constant (`CLASSIFICATION =
    True` at the top of a script, then `if CLASSIFICATION: ... else: <node>`)?"""
    def fixed(test: cst.BaseExpression) -> object:
        """The test's value when it is made of names assigned constants alone: not a parameter
        (a call may pass another value) nor a flag (`args.x`: the command line may)."""
        names = [n for n in walk(test) if isinstance(n, cst.Name)]
        bindings = [flow.binding_of(n) for n in names]
        if any(isinstance(n, cst.Attribute) for n in walk(test)) \
                or any(b is None or b.kind != "assign" for b in bindings):
            return UNKNOWN
        return constant(flow, test)
    return switched_off(flow, node, None, fixed)


def switched_off(flow: LocalFlow, node: cst.CSTNode, within: Optional[cst.CSTNode],
                 fold: Callable[[cst.BaseExpression], object]) -> bool:
    """Is `node` in the branch of an `if` or `a if c else b` (up to `within`, else its function)
    that the test `fold` gives a constant for (`not` read through) does not take?"""
    for ancestor in flow.ctx.ancestors(node):
        if ancestor is within or (within is None and isinstance(ancestor, (cst.FunctionDef, cst.Module))):
            return False
        if isinstance(ancestor, (cst.If, cst.IfExp)) and not flow.ctx.encloses(ancestor.test, node):
            test, negated = ancestor.test, False
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test, negated = test.expression, True
            value = fold(test)
            if value is not UNKNOWN and (bool(value) != negated) != flow.ctx.encloses(ancestor.body, node):
                return True
    return False


def _holds(flow: LocalFlow, test: cst.BaseExpression, text: str, value: object) -> Optional[bool]:
    """The test's truth when the expression spelled `text` is `value` (None when it depends on more)."""
    if isinstance(test, cst.BooleanOperation):
        left, right = _holds(flow, test.left, text, value), _holds(flow, test.right, text, value)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else True if left is right is True else None
        return True if True in (left, right) else False if left is right is False else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _holds(flow, test.expression, text, value)
        return None if inner is None else not inner
    if isinstance(test, (cst.Name, cst.Attribute)) and flow.ctx.text(test) == text:
        return bool(value)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and flow.ctx.text(test.left) == text:
        target = test.comparisons[0]
        compare = _COMPARISONS.get(type(target.operator))
        bound = constant(flow, target.comparator)
        if compare is not None and isinstance(bound, (int, float)) and isinstance(value, (int, float)):
            return bool(compare(value, bound))
    return None


# Calls that make a tensor or array of the numbers they are given.
LITERAL_TENSORS: Final = frozenset({"tensorflow.constant", "tensorflow.convert_to_tensor", "numpy.array",
                                    "numpy.asarray"})


def literal_numbers(flow: LocalFlow, expr: Optional[cst.BaseExpression]) -> bool:
    """Does `expr` hold numbers written in the file (`tf.constant([[1., 2., 3.]])`, `np.array(...)`
    of a literal, through names)? Nothing computes them, so no gradient flows to them."""
    value = flow.value_of(expr) if expr is not None else None
    if isinstance(value, cst.Call) and flow.ctx.call_name(value) in LITERAL_TENSORS:
        value = arg(value, 0, "value")
    return isinstance(value, (cst.List, cst.Tuple)) and _numbers(flow, value, 0)


def _numbers(flow: LocalFlow, value: cst.BaseExpression, depth: int) -> bool:
    """A (nested) list or tuple literal of known numbers."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return depth < MAX_DEPTH and bool(value.elements) and all(
            isinstance(e, cst.Element) and _numbers(flow, e.value, depth + 1) for e in value.elements)
    folded = constant(flow, value)
    return isinstance(folded, (int, float)) and not isinstance(folded, bool)

