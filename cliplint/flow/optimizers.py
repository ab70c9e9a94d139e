"""The optimizer model: which clip options a call that builds an optimizer passes, however it
passes them (keywords, a `**config` dict, `keras.optimizers.get({"class_name": ...,
"config": {...}})`, `Adam.from_config({...})`), each with the node holding its value. Every rule
about an optimizer's clip options asks this one place.
"""
from __future__ import annotations

from typing import Dict, Optional

import libcst as cst

from ..names import CLIP_OPTIONS, OPTIMIZER_CLASSES, OPTIMIZER_FACTORIES
from .carriers import trace
from .constants import UNKNOWN, constant
from .local import Dataflow
from .nodes import arg

Options = Dict[str, cst.BaseExpression]


def passed_options(flow: Dataflow, call: cst.Call) -> Optional[Options]:
    """The clip options an optimizer-building call passes, whatever their value (None when the
    call builds no optimizer)."""
    ctx = flow.ctx
    name = ctx.call_name(call)
    if name in OPTIMIZER_CLASSES:
        return _keyword_options(flow, call)
    if name in OPTIMIZER_FACTORIES or (name or "").removesuffix(".from_config") in OPTIMIZER_CLASSES:
        mapping = _dict(flow, arg(call, 0, "identifier" if name in OPTIMIZER_FACTORIES else "config"))
        if mapping is not None and name in OPTIMIZER_FACTORIES:
            mapping = _dict(flow, mapping.get("config"))
        return {k: v for k, v in (mapping or {}).items() if k in CLIP_OPTIONS}
    return None


def set_options(flow: Dataflow, call: cst.Call) -> Optional[Options]:
    """The clip options known to be set (a constant other than None), in `CLIP_OPTIONS` order."""
    passed = passed_options(flow, call)
    if passed is None:
        return None
    known = {option for option, value in passed.items() if constant(flow, value) not in (UNKNOWN, None)}
    return {o: passed[o] for o in CLIP_OPTIONS if o in known}


def _keyword_options(flow: Dataflow, call: cst.Call) -> Options:
    options: Options = {}
    for a in call.args:
        if a.keyword is not None and a.keyword.value in CLIP_OPTIONS:
            options[a.keyword.value] = a.value
        elif a.star == "**":
            splatted = _dict(flow, a.value) or {}
            options.update({k: v for k, v in splatted.items() if k in CLIP_OPTIONS})
    return options


def _dict(flow: Dataflow, expr) -> Optional[Options]:
    """A dict literal or `dict(...)` call (directly or through every carrier) as key -> value node."""
    found = trace(flow, expr, _literal_dict)
    return _keyed(found) if found is not None else None


def _literal_dict(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    if isinstance(value, cst.Dict) or (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
                                       and value.func.value == "dict"):
        return value
    return None


def _keyed(expr: cst.BaseExpression) -> Options:
    if isinstance(expr, cst.Dict):
        found: Options = {}
        for element in expr.elements:
            key = element.key.evaluated_value if isinstance(element, cst.DictElement) \
                and isinstance(element.key, cst.SimpleString) else None
            if isinstance(key, str):  # not b"clipnorm": Keras reads no bytes key
                found[key] = element.value
        return found
    if isinstance(expr, cst.Call):  # `dict(clipnorm=1.0)`
        return {a.keyword.value: a.value for a in expr.args if a.keyword is not None}
    return {}
