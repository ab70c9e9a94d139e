"""The optimizer model: which clip options a call that builds an optimizer passes, however it
passes them (keywords, a `**config` dict, `keras.optimizers.get({"class_name": ...,
"config": {...}})`, `Adam.from_config({...})`), each with the node holding its value. Every rule
about an optimizer's clip options asks this one place.
"""
from __future__ import annotations

from typing import Dict, Optional

import libcst as cst

from ..names import CLIP_OPTIONS, OPTIMIZER_CLASSES, OPTIMIZER_FACTORIES
from .carriers import keyword, splatted_dict
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
        mapping = splatted_dict(flow, arg(call, 0, "identifier" if name in OPTIMIZER_FACTORIES else "config"))
        if name in OPTIMIZER_FACTORIES:
            config = mapping.get("config")
            mapping = splatted_dict(flow, config) if config is not None else {}
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
    """The clip options an optimizer's constructor call passes, written or through `**`."""
    options: Options = {}
    for option in CLIP_OPTIONS:
        value = keyword(flow, call, option)
        if value is not None:
            options[option] = value
    return options
