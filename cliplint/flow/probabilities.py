"""Where probabilities come from: softmax/sigmoid calls, layers with a softmax or sigmoid
activation, and functions, models and `call` methods of the module that return one.
"""
from __future__ import annotations

from typing import Optional, Set, Tuple

import libcst as cst

from ..names import FUNCTIONAL, KEEPS_PROBABILITY, SEQUENTIAL, SIGMOID, SOFTMAX
from .local import UNKNOWN, Dataflow, constant
from .nodes import MAX_DEPTH, arg

Source = Tuple[str, cst.CSTNode, bool]  # (softmax | sigmoid | 1-sigmoid, producing node, padded)


def activation_of(flow: Dataflow, layer: cst.Call) -> Optional[str]:
    """'softmax'/'sigmoid' when a layer constructor call applies that activation to its output."""
    ctx = flow.ctx
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
    literal = constant(flow, value)
    if isinstance(literal, str):
        return literal if literal in ("softmax", "sigmoid") else None
    qualified = ctx.qualify(value)
    return "softmax" if qualified in SOFTMAX else "sigmoid" if qualified in SIGMOID else None


class Probabilities:
    """Where softmax/sigmoid outputs come from: the calls, layers with a softmax activation,
    and functions, models and `call` methods of the module that return one."""

    def __init__(self, flow: Dataflow) -> None:
        self.flow = flow
        self.ctx = flow.ctx

    def model_output(self, model) -> Optional[Source]:
        return self._returned(cst.Call(func=model), frozenset(), False)

    def probability(self, expr, seen: Set, padded: bool = False) -> Optional[Source]:
        if expr is None or len(seen) > MAX_DEPTH or expr in seen:
            return None
        seen = seen | {expr}
        if isinstance(expr, (cst.Name, cst.Attribute)):
            value = self.flow.value_of(expr)
            return None if value is expr else self.probability(value, seen, padded)
        if isinstance(expr, cst.Subscript):
            return self.probability(expr.value, seen, padded)
        if isinstance(expr, cst.BinaryOperation):
            return self._arithmetic(expr, seen, padded)
        if isinstance(expr, cst.Call):
            return self._call(expr, seen, padded)
        return None

    def _arithmetic(self, expr: cst.BinaryOperation, seen, padded) -> Optional[Source]:
        left, right = expr.left, expr.right
        left_const = constant(self.flow, left) is not UNKNOWN
        right_const = constant(self.flow, right) is not UNKNOWN
        if isinstance(expr.operator, cst.Add):
            if right_const or self._small_name(right):
                return self.probability(left, seen, True)
            if left_const or self._small_name(left):
                return self.probability(right, seen, True)
        if isinstance(expr.operator, cst.Subtract) and left_const and constant(self.flow, left) == 1:
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
            kind = activation_of(self.flow, call)
            return (kind, call, padded) if kind else None
        if isinstance(call.func, cst.Call):  # Dense(10, activation="softmax")(h), Softmax()(h)
            kind = activation_of(self.flow, call.func)
            if kind:
                return kind, call, padded
        return self._returned(call, seen, padded)

    def _returned(self, call: cst.Call, seen, padded) -> Optional[Source]:
        """A call of a function, model or layer defined in this module that returns probabilities."""
        ctx = self.ctx
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "predict":
            func = func.value
        callee = self.flow.value_of(func)
        if isinstance(callee, cst.Call):  # actor = Actor(); actor(x)  /  model = Sequential([...]); model(x)
            name = ctx.call_name(callee)
            if name in SEQUENTIAL:
                return self._last_layer(callee, padded)
            if name in FUNCTIONAL:
                return self.probability(arg(callee, 1, "outputs"), seen, padded)
            callee = callee.func
        if not isinstance(callee, cst.Name):
            return None
        binding = self.flow.binding_of(callee)
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
            if ret.value is not None and ctx.encloses(definition, ret) and self.flow.scope_of(ret) is definition:
                found = self.probability(ret.value, seen, padded)
                if found:
                    return found
        return None

    def _last_layer(self, sequential: cst.Call, padded) -> Optional[Source]:
        layers = arg(sequential, 0, "layers")
        if isinstance(layers, (cst.List, cst.Tuple)) and layers.elements:
            last = layers.elements[-1].value
            if isinstance(last, cst.Call):
                kind = activation_of(self.flow, last)
                if kind:
                    return kind, last, padded
        return None
