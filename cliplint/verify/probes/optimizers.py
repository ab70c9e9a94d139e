"""The probes of the optimizer's clip options: CL001 (conflicting options, in code and in a
training config), CL002 (the optimizer changed after compile) and CL009 (an invalid threshold)."""
from __future__ import annotations

import ast
import inspect
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from ...probes import (
    CallbackChange,
    Config,
    Construct,
    LateAttribute,
    OptimizerRebound,
    OptimizerReplaced,
    OptimizerThreshold,
    OptionChanged,
    TensorThreshold,
    ValueBounds,
)
from ..allowlist import allowed
from .common import (
    CLIP_OPTIONS,
    FLAVOUR,
    KERAS,
    SHIMS,
    TF,
    StandIn,
    call_of,
    evaluate,
    execute,
    expression_of,
    free_names,
    kind_of,
    namespace,
    quoted,
    runs,
    shown,
    verdict,
)
from .guard import unwrapped

# --- CL001 ----------------------------------------------------------------------------------

def one_step_update(optimizer) -> Tuple[Dict[str, float], np.ndarray]:
    """The clip options that are set on `optimizer`, replayed on SGD(learning_rate=1.0), and the
    update one step makes for the gradient [3, -4]."""
    set_options = {k: getattr(optimizer, k, None) for k in CLIP_OPTIONS}
    options: Dict[str, float] = {k: v for k, v in set_options.items() if v is not None}
    legacy = "legacy" in type(optimizer).__module__ or "optimizer_v2" in type(optimizer).__module__
    sgd = (KERAS.optimizers.legacy.SGD if legacy else KERAS.optimizers.SGD)(learning_rate=1.0)
    for option, value in options.items():
        setattr(sgd, option, value)
    variable = tf.Variable([0.0, 0.0])
    sgd.apply_gradients([(tf.constant([3.0, -4.0]), variable)])
    return options, -variable.numpy()


def _expected(option: str, value: float, g: np.ndarray) -> np.ndarray:
    t = tf.constant(g)
    if option == "clipnorm":
        return tf.clip_by_norm(t, value).numpy()
    if option == "global_clipnorm":
        return tf.clip_by_global_norm([t], value)[0][0].numpy()
    return tf.clip_by_value(t, -value, value).numpy()


def describe_options(optimizer, built: str) -> dict:
    options, update = one_step_update(optimizer)
    listed = ", ".join(f"{k}={v:g}" for k, v in options.items())
    if len(options) < 2:
        return verdict("not-reproduced", f"{FLAVOUR}: only {listed or 'no clip option'} is set at run time")
    raw = np.array([3.0, -4.0], dtype="float32")
    alone = [k for k, v in options.items() if np.allclose(update, _expected(k, v, raw), atol=1e-4)]
    sequence = raw
    for option in ("clipvalue", "clipnorm", "global_clipnorm"):
        if option in options:
            sequence = _expected(option, options[option], sequence)
    step = f"one SGD step on the gradient [3, -4] moved the weights by {shown(-update)}"
    if alone:
        ignored = [k for k in options if k not in alone]
        silent = ", ".join(f"`{k}`" for k in ignored)
        return verdict("confirmed", f"{FLAVOUR} {built} without an error ({listed} set); {step}, which is "
                                    f"`{alone[0]}` alone: {silent} silently had no effect")
    if np.allclose(update, sequence, atol=1e-4):
        return verdict("confirmed", f"{FLAVOUR} {built} without an error ({listed} set) and applies all of them "
                                    f"in sequence: {step}")
    return verdict("confirmed", f"{FLAVOUR} {built} without an error ({listed} set); {step}")


def _build_optimizer(probe: dict, assumptions: List[str]):
    """The optimizer the user's call builds, or the verdict when building it raises."""
    ns = namespace(probe["call"], {}, assumptions)
    try:
        return execute(probe["call"]["code"], ns)
    except ValueError as err:
        conflict = clip_options_raise(probe["call"], ns)
        if conflict:
            return verdict("confirmed", f"{FLAVOUR}: {conflict}", assumptions, other_flavour=True)
        return verdict("inconclusive", f"{FLAVOUR} raises an unrelated {kind_of(err)}", assumptions,
                       other_flavour=True)
    except ImportError as err:
        return verdict("inconclusive", f"{FLAVOUR} cannot build this optimizer ({kind_of(err)})", assumptions,
                       other_flavour=True)


def clip_options_raise(call: dict, ns: dict) -> Optional[str]:
    """When the user's call raised: whether its clip options alone make its optimizer class raise,
    judged by the probe's own build of `Class(clipnorm=.., ...)` from the numbers the call gives
    (never by the text of the user's exception, which can echo any value of the snippet). The
    evidence, or None."""
    tree = call_of(call["code"])
    if not isinstance(tree, ast.Call):
        return None
    cls = unwrapped(evaluate(tree.func, ns))
    options = {kw.arg: evaluate(kw.value, ns) for kw in tree.keywords if kw.arg in CLIP_OPTIONS}
    if not isinstance(cls, type) or not options or not all(_number(v) for v in options.values()):
        return None
    return _raised_by(cls, {k: float(v) for k, v in options.items()}, "your call's clip options alone")


def _number(value) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


def _raised_by(cls: type, options: Dict[str, float], described: str) -> Optional[str]:
    """The probe's own build of `cls(**options)`: what it raises (a ValueError), or None."""
    built = f"{cls.__name__}({', '.join(f'{k}={v:g}' for k, v in options.items())})"
    try:
        cls(**options)
    except ValueError as err:
        return f"{built} ({described}) raises {quoted(err)}"
    return None


@runs(Construct)
def probe_construct(probe: dict) -> dict:
    assumptions: List[str] = []
    optimizer = _build_optimizer(probe, assumptions)
    if isinstance(optimizer, dict):
        return optimizer
    result = describe_options(optimizer, "builds the optimizer")
    return verdict(result["verdict"], result["evidence"], assumptions)


@runs(LateAttribute)
def probe_late_attribute(probe: dict) -> dict:
    assumptions: List[str] = []
    optimizer = _build_optimizer(probe, assumptions)
    if isinstance(optimizer, dict):
        return optimizer
    value = execute(probe["value"]["code"], namespace(probe["value"], {}, assumptions))
    if not _number(value):
        return verdict("inconclusive", f"the value assigned to `.{probe['attribute']}` is not a number", assumptions)
    setattr(optimizer, probe["attribute"], value)
    result = describe_options(optimizer, f"accepts `.{probe['attribute']} = {value:g}` after construction")
    return verdict(result["verdict"], result["evidence"], assumptions)


# --- CL002 ----------------------------------------------------------------------------------

def _tiny_model():
    model = KERAS.Sequential([KERAS.Input(shape=(1,)),
                              KERAS.layers.Dense(1, use_bias=False, kernel_initializer="ones")])
    return model


def _weight(model) -> float:
    return float(np.asarray(model.layers[-1].kernel).reshape(-1)[0])


def _compile_names(compile_snippet: dict):
    """(model expression, optimizer name or None) of a `model.compile(...)` call (never run: layer 1
    made its `model.compile` a stand-in, whose text says which model it is)."""
    call = call_of(compile_snippet["code"])
    function = call.func
    if isinstance(function, ast.Name) and function.id in compile_snippet.get("stand_ins", {}):
        function = expression_of(compile_snippet["stand_ins"][function.id])
    if not isinstance(function, ast.Attribute):
        raise ValueError(f"not a method call: {ast.unparse(function)[:80]}")
    model = ast.unparse(function.value)
    optimizer = next((kw.value for kw in call.keywords if kw.arg == "optimizer"), call.args[0] if call.args else None)
    return model, optimizer.id if isinstance(optimizer, ast.Name) else None


def _bind_model(expression: str, model, bound: dict, assumptions: List[str]) -> None:
    node = expression_of(expression)
    if isinstance(node, ast.Name):
        bound[node.id] = model
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        bound[node.value.id] = StandIn(node.value.id, assumptions, None, **{node.attr: model})


@runs(OptionChanged, OptimizerReplaced, OptimizerRebound, CallbackChange)
def probe_after_compile(probe: dict) -> dict:
    assumptions = ["the model is a one-weight Dense layer (w=1, x=10, y=0, mse) compiled with "
                   "SGD(learning_rate=1.0), standing in for yours"]
    change = probe["change"]
    model = _tiny_model()
    optimizer = KERAS.optimizers.SGD(learning_rate=1.0)
    if "compile" in probe:
        model_expression, optimizer_name = _compile_names(probe["compile"])
    else:  # a callback: self.model is the model
        model_expression, optimizer_name = "self.model", None
    model.compile(optimizer=optimizer, loss="mse")
    x, y = np.array([[10.0]], "float32"), np.array([[0.0]], "float32")
    if probe["trained_before"]:
        model.fit(x, y, epochs=1, batch_size=1, verbose=0)
    before = _weight(model)
    bound: Dict[str, object] = {}
    _bind_model(model_expression, model, bound, assumptions)
    if optimizer_name:
        bound[optimizer_name] = optimizer
    ns = namespace(change, bound, assumptions)
    execute(change["code"], ns)
    replaced = model.optimizer
    model.fit(x, y, epochs=1, batch_size=1, verbose=0)
    after = _weight(model)
    unclipped = before - 200.0 * before  # SGD(1.0) on d/dw (10w)^2 = 200w
    ignored = abs(after - unclipped) <= 1e-3 * max(1.0, abs(unclipped))
    moved = f"the weight moved {before:g} -> {after:g}"
    when = "after one fit()" if probe["trained_before"] else "before any fit()"
    kind = probe["kind"]
    if kind == OptimizerRebound.kind:
        new = ns.get(optimizer_name)
        if model.optimizer is not new and ignored:
            return verdict("confirmed", f"{FLAVOUR}: after the rebinding, model.optimizer is still the old "
                                        f"optimizer and the step was unclipped ({moved})", assumptions)
        return verdict("not-reproduced", f"{FLAVOUR}: the new optimizer was used ({moved})", assumptions)
    if kind == OptimizerReplaced.kind and ignored:
        iterations = int(np.asarray(replaced.iterations))
        return verdict("confirmed", f"{FLAVOUR}: {when}, model.optimizer is the new object but its iterations "
                                    f"stayed {iterations}; the old optimizer took the step ({moved}, unclipped)",
                       assumptions)
    if ignored:
        return verdict("confirmed", f"{FLAVOUR}: {when}, the change did not reach the next step: {moved}, "
                                    f"exactly the unclipped SGD step", assumptions)
    return verdict("not-reproduced", f"{FLAVOUR}: the change takes effect because no fit() ran before it: "
                                     f"{moved} instead of the unclipped {unclipped:g}" if not probe["trained_before"]
                   else f"{FLAVOUR}: the change took effect {when}: {moved} instead of {unclipped:g}", assumptions)


# --- CL009 ----------------------------------------------------------------------------------

def judge_threshold(optimizer, described: str, assumptions: List[str]) -> dict:
    """CL009: with these clip options, does one SGD step clip, not clip at all, or zero the gradient?"""
    _, update = one_step_update(optimizer)
    if np.allclose(update, [3.0, -4.0], atol=1e-5):
        return verdict("confirmed", f"{FLAVOUR}: {described} does not clip: one SGD step applied the whole "
                                    f"gradient {shown(update)}", assumptions)
    if np.allclose(update, 0.0, atol=1e-7):
        return verdict("confirmed", f"{FLAVOUR}: {described} zeroes the gradient: one SGD step moved the weights "
                                    f"by {shown(-update)}", assumptions)
    return verdict("not-reproduced", f"{FLAVOUR}: {described} clipped the step to {shown(update)}", assumptions)


@runs(OptimizerThreshold, TensorThreshold, ValueBounds)
def probe_threshold(probe: dict) -> dict:
    call = probe["call"]
    assumptions: List[str] = []
    if probe["kind"] == OptimizerThreshold.kind:
        ns = namespace(call, {}, assumptions)
        try:
            optimizer = execute(call["code"], ns)
        except ValueError as err:
            conflict = clip_options_raise(call, ns)
            if conflict:
                return verdict("confirmed", f"{FLAVOUR}: {conflict}", assumptions)
            return verdict("inconclusive", f"{FLAVOUR} raises an unrelated {kind_of(err)}", assumptions)
        except ImportError as err:
            return verdict("inconclusive", f"{FLAVOUR} cannot build this optimizer ({kind_of(err)})",
                           assumptions, other_flavour=True)
        options = {k: getattr(optimizer, k, None) for k in CLIP_OPTIONS}
        described = ", ".join(f"{k}={v:g}" for k, v in options.items() if v is not None)
        return judge_threshold(optimizer, described, assumptions)
    tree = call_of(call["code"])
    before, whose = _clipped_tensor(probe, call, tree, assumptions)
    stand_in = [before] if "global_norm" in call["code"] else before
    tensor = tree.args[0] if tree.args else None
    bound = {tensor.id: stand_in} if isinstance(tensor, ast.Name) else {}
    result = execute(call["code"], namespace(call, bound, assumptions))
    if isinstance(result, tuple):
        result = result[0][0]
    before, after = np.asarray(before), np.asarray(result)
    flattened = after.size > 1 and np.allclose(after, after.reshape(-1)[0])
    if probe["kind"] == ValueBounds.kind and (flattened or _inverted_bounds(tree, call, assumptions)):
        return verdict("confirmed", f"{TF}: {whose} {shown(before)} became {shown(after)}: the minimum is above the "
                                    "maximum, so every element becomes the same value", assumptions)
    if np.allclose(after, 0.0):
        return verdict("confirmed", f"{TF}: {whose} {shown(before)} became {shown(after)}: the tensor is zeroed",
                       assumptions)
    if np.allclose(after, before):
        return verdict("confirmed", f"{TF}: {whose} {shown(before)} came back unchanged: nothing is clipped",
                       assumptions)
    return verdict("not-reproduced", f"{TF}: {whose} {shown(before)} became {shown(after)}", assumptions)


def _clipped_tensor(probe: dict, call: dict, tree: ast.Call, assumptions: List[str]):
    """(the tensor to clip, how the evidence names it): the user's own when it is written with
    literals only (`tf.constant([1.0])`), else a stand-in listed in the assumptions."""
    tensor = tree.args[0] if tree.args else None
    known = {**call.get("symbols", {}), **call.get("constants", {})}
    if tensor is not None and not isinstance(tensor, ast.Name) \
            and all(n in known for n in free_names(ast.unparse(tensor))):
        value = evaluate(tensor, namespace(call, {}, assumptions))
        value = value[0] if isinstance(value, (list, tuple)) else value
        symbols = call.get("symbols", {})
        shimmed = any(symbols.get(n.id, "") in SHIMS for n in ast.walk(tensor) if isinstance(n, ast.Name))
        return tf.convert_to_tensor(value, tf.float32), "the placeholder's stand-in" if shimmed else "your tensor"
    stand_in = tf.constant([0.5, 2.0, -2.0]) if probe["kind"] == ValueBounds.kind else tf.constant([3.0, -4.0])
    assumptions.append(f"the clipped tensor is stood in by {shown(stand_in)}")
    return stand_in, "the stand-in tensor"


def _inverted_bounds(tree: ast.Call, call: dict, assumptions: List[str]) -> bool:
    """clip_by_value(t, low, high) with literal bounds and low > high."""
    bounds = tree.args[1:3]
    if len(bounds) < 2 or not all(isinstance(b, (ast.Constant, ast.UnaryOp)) for b in bounds):
        return False
    low, high = (float(evaluate(b, namespace(call, {}, assumptions))) for b in bounds)
    return low > high


# --- config files (CL001, CL009) --------------------------------------------------------------

@runs(Config)
def probe_config(probe: dict) -> dict:
    """Build the optimizer a config mapping describes with the installed Keras, then judge it as
    the code probes do. Only a known optimizer class and its numeric options are used: nothing
    is deserialized from the file."""
    classes = {name.lower(): getattr(KERAS.optimizers, name) for name in dir(KERAS.optimizers)
               if allowed(f"keras.optimizers.{name}") and isinstance(getattr(KERAS.optimizers, name), type)}
    cls = classes.get(probe["class_name"].lower())
    assumed = "the optimizer class is assumed to be SGD (the mapping names none)"
    assumptions = [assumed] if probe["assumed_class"] else []
    if cls is None:
        return verdict("inconclusive", f"{FLAVOUR} has no optimizer named {probe['class_name']}", assumptions)
    accepted = inspect.signature(cls.__init__).parameters
    options = {k: v for k, v in probe["options"].items() if k in accepted}
    built = f"{cls.__name__}({', '.join(f'{k}={v!r}' for k, v in options.items())})"
    try:
        optimizer = cls(**options)
    except ValueError as err:
        clip = {k: float(v) for k, v in options.items() if k in CLIP_OPTIONS and _number(v)}
        conflict = _raised_by(cls, clip, "the clip options alone") if clip else None
        if conflict:
            return verdict("confirmed", f"{FLAVOUR}: {conflict}", assumptions)
        return verdict("inconclusive", f"{FLAVOUR}: {built} raises an unrelated {kind_of(err)}", assumptions)
    if probe["rule"] == "CL001":
        result = describe_options(optimizer, f"builds {built}")
        return verdict(result["verdict"], result["evidence"], assumptions)
    return judge_threshold(optimizer, built, assumptions)
