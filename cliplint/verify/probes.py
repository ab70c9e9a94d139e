"""One probe per rule, run inside the worker with the installed TensorFlow.

A probe executes the user's own flagged snippet (the constructor call, the clipping
comprehension or loop, the log expression, the filtering statements, the mutation after
compile) with the names it needs bound to stand-ins, measures what TensorFlow does, and
answers `confirmed`, `not-reproduced` or `inconclusive` with one line of evidence. Every
stand-in that could change the outcome is listed in `assumptions`. The ground truth each
probe checks is in TF_FACTS.md; where TensorFlow disagrees, the verdict follows TensorFlow.
"""
from __future__ import annotations

import ast
import builtins
import importlib
import re
import textwrap
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from .allowlist import BUILTINS, allowed, entry
from .rebuild import SYMBOL_PREFIX, check_worker_code

KERAS = tf.keras
LEGACY_KERAS = KERAS.__name__.startswith("tf_keras")
CLIP_OPTIONS = ("clipnorm", "clipvalue", "global_clipnorm")
VARIABLE_LISTS = ("trainable_variables", "trainable_weights", "variables", "weights")
PLACEHOLDER = 1.0
RESTRICTED_BUILTINS = {name: getattr(builtins, name) for name in BUILTINS}
UNCHECKED = False  # set by the worker under the test-only hook: snippets run as written (layer 2 alone)
STAND_INS = " stand-ins"  # a key no snippet can name: the namespace's stand-in texts, for the assumptions


def versions() -> dict:
    if LEGACY_KERAS:
        import tf_keras

        keras_version, flavour = tf_keras.__version__, "tf-keras"
    else:
        import keras

        keras_version, flavour = keras.__version__, "Keras 3"
    return {"tensorflow": tf.__version__, "keras": keras_version, "flavour": flavour}


VERSIONS = versions()
FLAVOUR = f"tf-keras {VERSIONS['keras']}" if LEGACY_KERAS else f"Keras {VERSIONS['keras']}"
TF = f"TensorFlow {tf.__version__}"


def verdict(kind: str, evidence: str, assumptions: List[str] = (), other_flavour: bool = False) -> dict:
    """`other_flavour`: this Keras flavour refused the code (a removed name, a legacy optimizer, an
    argument it does not know, clip options it rejects): the parent asks the other flavour too."""
    found = {"verdict": kind, "evidence": evidence, "assumptions": list(dict.fromkeys(assumptions))}
    return {**found, "other_flavour": True} if other_flavour else found


# --- executing snippets -------------------------------------------------------------------

class StandIn:
    """An inert object standing in for an unknown name that is used with attributes: variable
    lists are stand-in variables, explicit attributes are given, anything else is a number."""

    def __init__(self, name: str, assumptions: List[str], variables=None, **attributes) -> None:
        self.__dict__.update(_name=name, _assumptions=assumptions, _variables=variables or [], **attributes)

    def __getattr__(self, attribute: str):
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        if attribute in VARIABLE_LISTS:
            return self._variables
        if attribute in ("apply_gradients", "apply"):
            self._assumptions.append(f"`{self._name}` is stood in by SGD(learning_rate=1.0)")
            optimizer = self.__dict__.setdefault("_optimizer", KERAS.optimizers.SGD(learning_rate=1.0))
            return getattr(optimizer, attribute)
        self._assumptions.append(f"`{self._name}.{attribute}` = {PLACEHOLDER} (placeholder)")
        return PLACEHOLDER


class Refusal(Exception):
    """The worker's own re-check of layer 1 refused a snippet (its message is composed here)."""


class MissingSymbol(AttributeError):
    """An allowlisted symbol this installation does not have (`tf.add_check_numerics_ops` in TF 2)."""


def resolve(qualified: str):
    """The object an allowlisted qualified name (`keras.optimizers.Adam`) names under the active
    Keras flavour; the worker refuses any other name, whatever the parent sent."""
    if not (UNCHECKED or allowed(qualified)):
        raise Refusal(f"`{qualified}` is not on the verifier's allowlist")
    name = entry(qualified)
    return SHIMS[name] if name in SHIMS else _lookup(name)


def _lookup(name: str):
    root, _, rest = name.partition(".")
    obj = {"tensorflow": tf, "keras": KERAS, "numpy": np}[root]
    for part in filter(None, rest.split(".")):
        if not hasattr(obj, part):
            raise MissingSymbol(f"module '{getattr(obj, '__name__', root)}' has no attribute '{part}'")
        obj = getattr(obj, part)
    return obj


# --- the migration shim's stand-ins (allowlist.SHIMS) -----------------------------------------

PLACEHOLDER_FILL = 0.5


def placeholder(*args, **keywords):
    """`tf.placeholder(dtype, shape)` / `K.placeholder(shape=..., ndim=..., dtype=...)`: a concrete
    tensor of 0.5s of that dtype and shape, None dimensions as 2."""
    dtype = keywords.get("dtype", next((a for a in args if isinstance(a, (tf.DType, str))), tf.float32))
    shape = keywords.get("shape", next((a for a in args if isinstance(a, (list, tuple))), None))
    if shape is None:
        shape = [None] * int(keywords.get("ndim") or 0)
    dims = [2 if d is None else int(d) for d in shape]
    return tf.cast(tf.fill(dims, PLACEHOLDER_FILL), tf.as_dtype(dtype or tf.float32))


def dense(inputs, units, activation=None, use_bias=True, **_ignored):
    """`tf.layers.dense(inputs, units, activation)`: a Keras Dense layer with the same units and
    activation (seeded initial weights), applied to the inputs as a batch."""
    inputs = tf.convert_to_tensor(inputs, tf.float32)
    if inputs.shape.rank < 2:
        inputs = tf.reshape(inputs, [1, -1])
    layer = KERAS.layers.Dense(int(units), activation=activation, use_bias=bool(use_bias),
                               kernel_initializer=KERAS.initializers.GlorotUniform(seed=0))
    return layer(inputs)


SHIMS = {"cliplint.shims.placeholder": placeholder, "cliplint.shims.dense": dense}


def _tree(code: str) -> ast.Module:
    return ast.parse(textwrap.dedent(code).strip())


def free_names(code: str) -> Dict[str, bool]:
    """Names the snippet reads but does not bind -> whether it uses them with an attribute."""
    tree = _tree(code)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    stored |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda) for a in n.args.args}
    roots = {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    return {n.id: n.id in roots for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id not in stored and n.id not in RESTRICTED_BUILTINS}


def namespace(snippet: dict, bound: dict, assumptions: List[str], variables=None, default=None) -> dict:
    """Allowlisted symbols, literal constants, role stand-ins, and inert stand-ins for the rest."""
    ns = {"__builtins__": builtins if UNCHECKED else RESTRICTED_BUILTINS,
          STAND_INS: (snippet.get("stand_ins", {}), assumptions)}
    for name, qualified in snippet.get("symbols", {}).items():
        ns[name] = resolve(qualified)
    for name in snippet.get("stand_ins", {}):
        ns[name] = PLACEHOLDER
    if UNCHECKED:  # layer 1 off: the file's own imports, as written
        for local, qualified in snippet.get("imports", {}).items():
            ns[local] = _module(qualified)
    ns.update(snippet.get("constants", {}))
    ns.update(bound)
    for name, has_attributes in free_names(snippet["code"]).items():
        if name in ns:
            continue
        if has_attributes:
            ns[name] = StandIn(name, assumptions, variables)
        elif default is not None:
            ns[name] = default
        else:
            ns[name] = PLACEHOLDER
            assumptions.append(f"`{name}` = {PLACEHOLDER} (placeholder)")
    return ns


def _module(qualified: str):
    """Layer 1 off only: the module or object an import names, imported as the file would."""
    module, _, attribute = qualified.rpartition(".")
    if qualified.split(".")[0] == "keras":
        return resolve(qualified)
    try:
        return importlib.import_module(qualified)
    except ImportError:
        return getattr(importlib.import_module(module), attribute)


def as_written(node: ast.AST, snippet: dict) -> str:
    """An expression of a rebuilt snippet as the user wrote it (`tf.nn.softmax`, not its synthetic name)."""
    texts = {**snippet.get("written", {}), **snippet.get("stand_ins", {})}
    copy = ast.parse(ast.unparse(node), mode="eval")
    for name in ast.walk(copy):
        if isinstance(name, ast.Name) and name.id in texts:
            name.id = texts[name.id]
    return ast.unparse(copy)


def bound_values(ns: dict) -> dict:
    """What a statement snippet left in its namespace for the next one (no builtins, no synthetic names)."""
    return {k: v for k, v in ns.items() if not k.startswith(("_", " "))}


def evaluate(node: ast.AST, ns: dict):
    """One expression of a snippet (a call's function or argument), noting the stand-ins it uses."""
    _note_stand_ins(node, ns)
    return eval(compile(ast.Expression(node), "<snippet>", "eval"), ns)


def _note_stand_ins(tree: ast.AST, ns: dict) -> None:
    """The placeholder numbers an expression uses (a stand-in a probe bound to a value of its role
    was listed by that probe)."""
    stand_ins, assumptions = ns.get(STAND_INS, ({}, []))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in stand_ins and ns.get(node.id) is PLACEHOLDER:
            assumptions.append(f"`{stand_ins[node.id]}` = {PLACEHOLDER} (placeholder)")


def execute(code: str, ns: dict):
    """The value of an expression snippet; None for statements (their effects are in `ns`)."""
    tree = _tree(code)
    if not UNCHECKED:
        refused = check_worker_code(code, tuple(k for k in ns if k.startswith(SYMBOL_PREFIX)) + tuple(ns[STAND_INS][0]))
        if refused:
            raise Refusal(f"the worker refused a snippet with {refused}")
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        return evaluate(tree.body[0].value, ns)
    _note_stand_ins(tree, ns)
    exec(compile(tree, "<snippet>", "exec"), ns)
    return None


def bind_expression(text: Optional[str], value, bound: dict, assumptions: List[str], variables=None) -> None:
    """Bind the expression `text` (a name, or `model.trainable_variables`) to `value`."""
    if not text:
        return
    node = _tree(text).body[0].value
    if isinstance(node, ast.Name):
        bound[node.id] = value
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in VARIABLE_LISTS:
        bound[node.value.id] = StandIn(node.value.id, assumptions, value)


def shown(values) -> str:
    """Numbers as a person would write them: [0, -20.72, -inf]."""
    return "[" + ", ".join(f"{v:.4g}" for v in np.asarray(values, dtype="float64").reshape(-1)) + "]"


def first_line(err: BaseException) -> str:
    """The exception's type and message: only for the exception a probe predicts (raised by
    TensorFlow/Keras on the user's own values); any other exception is named by its type alone."""
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", " ".join(str(err).split()))
    return f"{kind_of(err)}: {text[:300]}"


def kind_of(err: BaseException) -> str:
    return "AttributeError" if isinstance(err, MissingSymbol) else type(err).__name__


# --- stand-in gradients ---------------------------------------------------------------------

def spread_gradients(norms=(1000.0, 100.0, 10.0, 1.0, 0.1)) -> List[tf.Tensor]:
    """Gradients of several shapes and very different norms (five layers of different scale)."""
    shapes = [(4, 4), (8,), (3, 2), (5,), (2, 2)]
    rng = np.random.default_rng(0)
    grads = []
    for norm, shape in zip(norms, shapes):
        g = rng.normal(size=shape).astype("float32")
        grads.append(tf.constant(g * (norm / np.linalg.norm(g))))
    return grads


def _flat(tensors) -> np.ndarray:
    return np.concatenate([np.reshape(np.asarray(t), -1) for t in tensors])


# --- CL001 ----------------------------------------------------------------------------------

def one_step_update(optimizer) -> Dict[str, float]:
    """The clip options that are set on `optimizer`, replayed on SGD(learning_rate=1.0), and the
    update one step makes for the gradient [3, -4]."""
    options = {k: getattr(optimizer, k, None) for k in CLIP_OPTIONS}
    options = {k: v for k, v in options.items() if v is not None}
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
    try:
        return execute(probe["call"]["code"], namespace(probe["call"], {}, assumptions))
    except ValueError as err:
        if any(option in str(err) for option in CLIP_OPTIONS):
            return verdict("confirmed", f"{FLAVOUR} raises {first_line(err)}", assumptions, other_flavour=True)
        return verdict("inconclusive", f"{FLAVOUR} raises an unrelated {kind_of(err)}", assumptions,
                       other_flavour=True)
    except ImportError as err:
        return verdict("inconclusive", f"{FLAVOUR} cannot build this optimizer ({kind_of(err)})", assumptions,
                       other_flavour=True)


def probe_construct(probe: dict) -> dict:
    assumptions: List[str] = []
    optimizer = _build_optimizer(probe, assumptions)
    if isinstance(optimizer, dict):
        return optimizer
    result = describe_options(optimizer, "builds the optimizer")
    return verdict(result["verdict"], result["evidence"], assumptions)


def probe_late_attribute(probe: dict) -> dict:
    assumptions: List[str] = []
    optimizer = _build_optimizer(probe, assumptions)
    if isinstance(optimizer, dict):
        return optimizer
    value = execute(probe["value"]["code"], namespace(probe["value"], {}, assumptions))
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
    call = _tree(compile_snippet["code"]).body[0].value
    function = call.func
    if isinstance(function, ast.Name) and function.id in compile_snippet.get("stand_ins", {}):
        function = _tree(compile_snippet["stand_ins"][function.id]).body[0].value
    model = ast.unparse(function.value)
    optimizer = next((kw.value for kw in call.keywords if kw.arg == "optimizer"), call.args[0] if call.args else None)
    return model, optimizer.id if isinstance(optimizer, ast.Name) else None


def _bind_model(expression: str, model, bound: dict, assumptions: List[str]) -> None:
    node = _tree(expression).body[0].value
    if isinstance(node, ast.Name):
        bound[node.id] = model
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        bound[node.value.id] = StandIn(node.value.id, assumptions, None, **{node.attr: model})


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
    if kind == "rebind":
        new = ns.get(optimizer_name)
        if model.optimizer is not new and ignored:
            return verdict("confirmed", f"{FLAVOUR}: after the rebinding, model.optimizer is still the old "
                                        f"optimizer and the step was unclipped ({moved})", assumptions)
        return verdict("not-reproduced", f"{FLAVOUR}: the new optimizer was used ({moved})", assumptions)
    if kind == "replace" and ignored:
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


# --- CL003 ----------------------------------------------------------------------------------

def _gradient_stand_ins(probe: dict, grads, variables, assumptions) -> dict:
    bound: Dict[str, object] = {}
    listed = list(zip(grads, variables)) if probe.get("pairs") else grads
    bind_expression(probe.get("gradients"), listed, bound, assumptions, variables)
    bind_expression(probe.get("variables"), variables, bound, assumptions, variables)
    for name in probe.get("appends", []):
        bound[name] = []
    return bound


def _replay_loop(probe: dict, snippet: dict, grads, variables, assumptions):
    bound = _gradient_stand_ins(probe, grads, variables, assumptions)
    ns = namespace(snippet, bound, assumptions, variables)
    result = execute(snippet["code"], ns)
    if probe.get("result"):
        result = ns[probe["result"]]
    return [item[0] if isinstance(item, tuple) else item for item in list(result)], ns


def _clip_threshold(clip: dict, ns: dict) -> float:
    call = _tree(clip["code"]).body[0].value
    threshold = next((kw.value for kw in call.keywords if kw.arg == "clip_norm"),
                     call.args[1] if len(call.args) > 1 else None)
    return float(evaluate(threshold, ns))


STAND_IN_THRESHOLD = 1.0


def _unset_threshold(probe: dict, assumptions: List[str]) -> None:
    """`clip_by_norm(grad, grad_norm_clipping)` where the name's only literal value is a `None`
    default (the clipping runs only when it is set): a stand-in threshold, listed."""
    clip = probe["clip"]
    call = _tree(clip["code"]).body[0].value
    threshold = next((kw.value for kw in call.keywords if kw.arg == "clip_norm"),
                     call.args[1] if len(call.args) > 1 else None)
    if not isinstance(threshold, ast.Name) or threshold.id not in clip.get("constants", {}) \
            or clip["constants"][threshold.id] is not None:
        return
    for snippet in (clip, probe["loop"]):
        snippet.setdefault("constants", {})[threshold.id] = STAND_IN_THRESHOLD
    assumptions.append(f"`{threshold.id}` is None by default and the clipping runs only when it is set: "
                       f"stood in by {STAND_IN_THRESHOLD:g}")


def probe_per_tensor(probe: dict) -> dict:
    assumptions = ["stand-in gradients: 5 tensors of shapes (4,4), (8,), (3,2), (5,), (2,2) "
                   "with norms 1000, 100, 10, 1, 0.1"]
    _unset_threshold(probe, assumptions)
    grads = spread_gradients()
    variables = [tf.Variable(tf.zeros_like(g)) for g in grads]
    clipped, ns = _replay_loop(probe, probe["loop"], grads, variables, assumptions)
    threshold = _clip_threshold(probe["clip"], ns)
    raw, update = _flat(grads), _flat(clipped)
    norm = float(np.linalg.norm(update))
    cosine = float(raw @ update / (np.linalg.norm(raw) * np.linalg.norm(update)))
    global_clipped, _ = tf.clip_by_global_norm(grads, threshold)
    global_norm = float(np.linalg.norm(_flat(global_clipped)))
    evidence = (f"{TF}: after your per-tensor clipping the update's global norm is {norm:.3g} "
                f"({'>' if norm > threshold * 1.001 else '<='} {threshold:g}) and its direction changed "
                f"(cosine {cosine:.2f} to the raw gradient); tf.clip_by_global_norm gives norm {global_norm:.3g}, "
                "cosine 1.00")
    if norm > threshold * 1.001 or cosine < 0.999:
        return verdict("confirmed", evidence, assumptions)
    return verdict("not-reproduced", f"{TF}: the clipped update has norm {norm:.3g} and cosine {cosine:.3f}",
                   assumptions)


# --- CL004 ----------------------------------------------------------------------------------

STAND_IN_LOGITS = {
    "softmax": ([[100.0, 0.0, -3.0]], tf.nn.softmax, tf.nn.log_softmax, "tf.nn.log_softmax"),
    "sigmoid": ([[-200.0, 0.5]], tf.math.sigmoid, tf.math.log_sigmoid, "tf.math.log_sigmoid"),
    "1-sigmoid": ([[200.0, 0.5]], tf.math.sigmoid, lambda logits: tf.math.log_sigmoid(-logits),
                  "tf.math.log_sigmoid(-x)"),
}


class _Replace(ast.NodeTransformer):
    """Put a name where the softmax call sits inside the log expression."""

    def __init__(self, target: ast.AST) -> None:
        self.target = ast.dump(target)
        self.found = False

    def visit_Call(self, node: ast.Call):
        if ast.dump(node) == self.target:
            self.found = True
            return ast.copy_location(ast.Name("probabilities_", ast.Load()), node)
        return self.generic_visit(node)


# The class the stand-in logits make least likely: where a picked probability underflows.
LEAST_LIKELY = {"softmax": 2, "sigmoid": 0, "1-sigmoid": 0}


def _probabilities(probe: dict, logits, assumptions: List[str]):
    """The user's softmax/sigmoid call applied to stand-in logits (its own keyword arguments kept);
    for a layer that ends in that activation (`tf.layers.dense(..., activation=tf.nn.softmax)`,
    `Dense(n, activation="softmax")`), its activation applied to the stand-in logits."""
    kind = probe["kind"].replace("1-", "")
    source = probe.get("source")
    if source is None:
        assumptions.append(f"the {kind} output is stood in by the {kind} of stand-in logits")
        return STAND_IN_LOGITS[probe["kind"]][1](logits)
    call = _tree(source["code"]).body[0].value
    ns = namespace(source, {}, assumptions, default=PLACEHOLDER)  # its input is replaced: no assumption
    function = evaluate(call.func, ns)
    activation = _layer_activation(function, call, ns)
    if activation is not None:
        assumptions.append(f"the output of `{as_written(call.func, source)}` before its activation is the "
                           "stand-in logits")
        return activation(logits)
    keywords = {kw.arg: evaluate(kw.value, ns) for kw in call.keywords if kw.arg}
    assumptions.append(f"the input of `{as_written(call.func, source)}` is the stand-in logits")
    return function(logits, **keywords)


def _layer_activation(function, call: ast.Call, ns: dict):
    """The activation a layer call ends in, or None when `function` is the activation itself."""
    if function is dense:
        given = next((kw.value for kw in call.keywords if kw.arg == "activation"),
                     call.args[2] if len(call.args) > 2 else None)
        activation = evaluate(given, ns) if given is not None else None
    elif isinstance(function, KERAS.layers.Layer):
        activation = getattr(function, "activation", None)
    else:
        return None
    return KERAS.activations.get(activation) if activation is not None else KERAS.activations.linear


def _roles(tree: ast.AST, unknown: List[str]):
    """The unknown names of a log expression split into indices (inside a subscript's brackets:
    `self.a` in `self.acts_prob[0, self.a]`) and values."""
    indices = {n.id for sub in ast.walk(tree) if isinstance(sub, ast.Subscript)
               for n in ast.walk(sub.slice) if isinstance(n, ast.Name)}
    return [n for n in unknown if n in indices], [n for n in unknown if n not in indices]


UNPADDED = ("your code pads or clips the probabilities between the activation and the log: that step is not "
            "replayed, the log's input is the activation's output itself")


def _pads(tree: ast.AST) -> bool:
    """Whether the log expression itself pads (`+ 1e-8`) or clips its input (then it is replayed)."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)) or isinstance(n, ast.Call)
               and isinstance(n.func, ast.Name) and n.func.id.endswith(("clip_by_value", "clip", "maximum"))
               for n in ast.walk(tree))


def _unknown_names(snippet: dict, stand_ins_known: bool = True) -> List[str]:
    """The names a snippet reads that are neither imported, constant, allowlisted nor (unless
    `stand_ins_known` is False) stood in for."""
    known = {**snippet.get("imports", {}), **snippet.get("constants", {}), **snippet.get("symbols", {}),
             **(snippet.get("stand_ins", {}) if stand_ins_known else {})}
    return [n for n in free_names(snippet["code"]) if n not in known]


def _log_value(probe: dict, logits, assumptions: List[str]):
    log = probe["log"]
    if probe.get("fixed"):  # an autofix's log-space expression: its one unknown input is the logits
        unknown = _unknown_names(log)
        if len(unknown) != 1:
            raise ValueError(f"the fixed expression has {len(unknown)} unknown inputs, not just the logits")
        return execute(log["code"], namespace(log, {unknown[0]: logits}, assumptions))
    probabilities = _probabilities(probe, logits, assumptions)
    tree = _tree(log["code"])
    if probe.get("source") is not None:
        replacer = _Replace(_tree(probe["source"]["code"]).body[0].value)
        tree = ast.fix_missing_locations(replacer.visit(tree))
        if replacer.found:
            code = ast.unparse(tree)
            return execute(code, namespace({**log, "code": code}, {"probabilities_": probabilities}, assumptions))
    indices, values = _roles(tree, _unknown_names(log, stand_ins_known=False))
    if len(values) > 1:
        assumptions.append(f"evaluated the log of the probabilities directly: {', '.join(values)} are not known")
        return tf.math.log(probabilities)
    bound = {n: probabilities for n in values}
    bound.update({n: LEAST_LIKELY[probe["kind"]] for n in indices})
    if values and probe.get("padded") and not _pads(tree):
        assumptions.append(UNPADDED)
    texts = log.get("stand_ins", {})
    assumptions.extend(f"`{texts.get(n, n)}` is the {probe['kind'].replace('1-', '')} output" for n in values)
    assumptions.extend(f"`{texts.get(n, n)}` picks the class the stand-in logits make least likely "
                       f"({LEAST_LIKELY[probe['kind']]})" for n in indices)
    return execute(log["code"], namespace(log, bound, assumptions))


def probe_log_softmax(probe: dict) -> dict:
    kind = probe["kind"]
    values, _, reference, reference_name = STAND_IN_LOGITS[kind]
    assumptions = [f"stand-in logits {values[0]} (float32)"]
    logits = tf.Variable(values)
    with tf.GradientTape(persistent=True) as tape:
        value = tf.cast(_log_value(probe, logits, assumptions), tf.float32)
        total = tf.reduce_sum(value)
        expected = reference(logits)
        expected_total = tf.reduce_sum(expected)
    grad = tape.gradient(total, logits)
    expected_grad = tape.gradient(expected_total, logits)
    value, expected = np.asarray(value), np.asarray(expected)
    grad = np.zeros_like(values) if grad is None else np.asarray(grad)
    mine, theirs = shown(value), shown(expected)
    if UNPADDED in assumptions:
        mine += " (without your padding, not replayed)"
    if not np.all(np.isfinite(value)) or not np.all(np.isfinite(grad)):
        nan_grad = "and its gradient is NaN" if not np.all(np.isfinite(grad)) else "and its gradient is finite"
        return verdict("confirmed", f"{TF}: your expression gives {mine} {nan_grad}; {reference_name} gives "
                                    f"{theirs}", assumptions)
    vanished = np.isclose(grad, 0.0, atol=1e-6) & ~np.isclose(np.asarray(expected_grad), 0.0, atol=1e-6)
    if value.shape == expected.shape and not np.allclose(value, expected, rtol=1e-3, atol=1e-3):
        return verdict("confirmed", f"{TF}: your expression gives {mine} where {reference_name} gives "
                                    f"{theirs}" + (f"; the gradient vanished for {int(vanished.sum())} "
                                                            f"logit(s)" if vanished.any() else ""), assumptions)
    if vanished.any():
        return verdict("confirmed", f"{TF}: your expression gives {mine}, but its gradient is 0 for "
                                    f"{int(vanished.sum())} logit(s) where {reference_name}'s is not", assumptions)
    return verdict("not-reproduced", f"{TF}: your expression matches {reference_name} ({mine})", assumptions)


# --- CL005 ----------------------------------------------------------------------------------

def probe_none_unsafe(probe: dict) -> dict:
    assumptions = ["stand-in gradients: 3 variables, the middle one without a gradient (None), "
                   "as for a frozen or unused layer"]
    grads = [tf.ones([2, 2]), None, tf.ones([3])]
    variables = [tf.Variable(tf.zeros([2, 2])), tf.Variable(tf.zeros([4])), tf.Variable(tf.zeros([3]))]
    try:
        _replay_loop(probe, probe["loop"], grads, variables, assumptions)
    except (ValueError, TypeError) as err:
        return verdict("confirmed", f"{TF}: with one None gradient your code raises {first_line(err)}", assumptions)
    return verdict("not-reproduced", f"{TF}: your code handled a None gradient without an error", assumptions)


def probe_misaligned(probe: dict) -> dict:
    assumptions = ["stand-in: variables v0, v1, v2 of shape (2,); v1 gets no gradient (None)"]
    grads = [tf.fill([2], 1.0), None, tf.fill([2], 3.0)]
    variables = [tf.Variable(tf.zeros([2]), name=f"v{i}") for i in range(3)]
    bound: Dict[str, object] = {}
    bind_expression(probe.get("gradients"), grads, bound, assumptions, variables)
    bind_expression(probe.get("variables"), variables, bound, assumptions, variables)
    for statement in probe.get("statements", []):
        ns = namespace(statement, bound, assumptions, variables)
        execute(statement["code"], ns)
        bound.update(bound_values(ns))
    pairs = list(execute(probe["zip"]["code"], namespace(probe["zip"], bound, assumptions, variables)))
    wrong = []
    for grad, variable in pairs:
        source = int(round(float(np.asarray(grad).reshape(-1)[0]))) - 1 if grad is not None else None
        target = next(i for i, v in enumerate(variables) if v is variable)
        if source is not None and source != target:
            wrong.append(f"v{target} got v{source}'s gradient")
    if not wrong:
        return verdict("not-reproduced", f"{TF}: every gradient was paired with its own variable", assumptions)
    KERAS.optimizers.SGD(learning_rate=1.0).apply_gradients([(g, v) for g, v in pairs if g is not None])
    return verdict("confirmed", f"{TF}, {FLAVOUR}: {'; '.join(wrong)}, and apply_gradients raised nothing "
                                f"(the shapes match)", assumptions)


# --- CL006 ----------------------------------------------------------------------------------

def probe_not_unpacked(probe: dict) -> dict:
    assumptions = ["stand-in gradients: two tensors of shapes (2,) and (3,), with matching variables"]
    grads = [tf.fill([2], 3.0), tf.fill([3], 4.0)]
    variables = [tf.Variable(tf.zeros([2])), tf.Variable(tf.zeros([3]))]
    bound: Dict[str, object] = {}
    bind_expression(probe.get("gradients"), grads, bound, assumptions, variables)
    use = probe["use"]
    try:
        if probe.get("statement"):
            ns = namespace(probe["statement"], bound, assumptions, variables)
            execute(probe["statement"]["code"], ns)
            bound.update(bound_values(ns))
        result = execute(use["code"], namespace(use, bound, assumptions, variables))
        if isinstance(result, (zip, map)) or (result is not None and hasattr(result, "__iter__")
                                               and not isinstance(result, (tf.Tensor, tf.Variable))):
            pairs = list(result)
            KERAS.optimizers.SGD(learning_rate=1.0).apply_gradients(pairs)
    except (ValueError, TypeError, tf.errors.OpError) as err:
        return verdict("confirmed", f"{TF}, {FLAVOUR}: using the pair as the gradient list raises "
                                    f"{first_line(err)}", assumptions)
    return verdict("not-reproduced", f"{TF}, {FLAVOUR}: the code ran without an error", assumptions)


# --- CL007 ----------------------------------------------------------------------------------

def probe_unused(probe: dict) -> dict:
    assumptions = ["stand-in gradients: 5 tensors with norms 1000, 100, 10, 1, 0.1"]
    grads = spread_gradients()
    variables = [tf.Variable(tf.zeros_like(g)) for g in grads]
    bound = _gradient_stand_ins(probe, grads, variables, assumptions)
    ns = namespace(probe["clip"], bound, assumptions, variables)
    execute(probe["clip"]["code"], ns)
    bound.update(bound_values(ns))
    applied = execute(probe["applied"]["code"], namespace(probe["applied"], bound, assumptions, variables))
    applied_grads = [item[0] if isinstance(item, tuple) else item for item in list(applied)]
    norm = float(np.linalg.norm(_flat([g for g in applied_grads if g is not None])))
    threshold = None
    if probe.get("threshold"):
        threshold = float(execute(probe["threshold"]["code"], namespace(probe["threshold"], bound, assumptions)))
    if threshold is not None and norm > threshold * 1.001:
        return verdict("confirmed", f"{TF}: the gradients passed to apply_gradients have global norm {norm:.4g} "
                                    f"(threshold {threshold:g}): the clipped list was computed and not used",
                       assumptions)
    return verdict("not-reproduced", f"{TF}: the applied gradients have global norm {norm:.4g}", assumptions)


# --- CL008 ----------------------------------------------------------------------------------

def probe_numerics(probe: dict) -> dict:
    call = probe["call"]
    function_code = ast.unparse(_tree(call["code"]).body[0].value.func)
    try:
        execute(call["code"], namespace(call, {}, []))
    except AttributeError as err:
        return verdict("confirmed", f"{TF} raises {first_line(err)}")
    except RuntimeError as err:
        traced = _checks_nothing_in_function(call, function_code)
        return verdict("confirmed", f"{TF} raises {first_line(err)} in eager mode{traced}")
    return verdict("not-reproduced", f"{TF}: the call ran without an error")


def _checks_nothing_in_function(call: dict, function_code: str) -> str:
    check = execute(function_code, namespace({**call, "code": function_code}, {}, []))

    @tf.function
    def step(x):
        check()
        return tf.math.log(x)

    try:
        value = float(step(tf.constant(0.0)))
    except tf.errors.InvalidArgumentError:
        return ""
    return f"; placed first in a tf.function it checked nothing: log(0) returned {value:g} without an error"


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


def probe_threshold(probe: dict) -> dict:
    call = probe["call"]
    assumptions: List[str] = []
    if probe["kind"] == "optimizer":
        try:
            optimizer = execute(call["code"], namespace(call, {}, assumptions))
        except ValueError as err:
            return verdict("confirmed", f"{FLAVOUR} raises {first_line(err)}", assumptions)
        except ImportError as err:
            return verdict("inconclusive", f"{FLAVOUR} cannot build this optimizer ({kind_of(err)})",
                           assumptions, other_flavour=True)
        options = {k: getattr(optimizer, k, None) for k in CLIP_OPTIONS}
        described = ", ".join(f"{k}={v:g}" for k, v in options.items() if v is not None)
        return judge_threshold(optimizer, described, assumptions)
    tree = _tree(call["code"]).body[0].value
    before, whose = _clipped_tensor(probe, call, tree, assumptions)
    stand_in = [before] if "global_norm" in call["code"] else before
    tensor = tree.args[0] if tree.args else None
    bound = {tensor.id: stand_in} if isinstance(tensor, ast.Name) else {}
    result = execute(call["code"], namespace(call, bound, assumptions))
    if isinstance(result, tuple):
        result = result[0][0]
    before, after = np.asarray(before), np.asarray(result)
    flattened = after.size > 1 and np.allclose(after, after.reshape(-1)[0])
    if probe["kind"] == "value" and (flattened or _inverted_bounds(tree, call, assumptions)):
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
    stand_in = tf.constant([0.5, 2.0, -2.0]) if probe["kind"] == "value" else tf.constant([3.0, -4.0])
    assumptions.append(f"the clipped tensor is stood in by {shown(stand_in)}")
    return stand_in, "the stand-in tensor"


def _inverted_bounds(tree: ast.Call, call: dict, assumptions: List[str]) -> bool:
    """clip_by_value(t, low, high) with literal bounds and low > high."""
    bounds = tree.args[1:3]
    if len(bounds) < 2 or not all(isinstance(b, (ast.Constant, ast.UnaryOp)) for b in bounds):
        return False
    low, high = (float(evaluate(b, namespace(call, {}, assumptions))) for b in bounds)
    return low > high


# --- CL010 ----------------------------------------------------------------------------------

DOUBLE_ACTIVATION = {
    "softmax": ("CategoricalCrossentropy", [[0.0, 10.0, 0.0]], tf.nn.softmax, "logits [0, 10, 0], true class 0"),
    "sigmoid": ("BinaryCrossentropy", [[-10.0]], tf.math.sigmoid, "logit -10, true label 1"),
}


def _user_loss(probe: dict, default_class: str, assumptions: List[str]):
    snippet = probe["loss"]
    try:
        loss = execute(snippet["code"], namespace(snippet, {}, assumptions))
        if isinstance(loss, KERAS.losses.Loss):
            return loss
    except Exception:  # the snippet is a call with names the probe cannot stand in for
        pass
    assumptions.append(f"the loss is stood in by {default_class}(from_logits=True)")
    return getattr(KERAS.losses, default_class)(from_logits=True)


LOGITS_OPS = ("softmax_cross_entropy_with_logits", "sparse_softmax_cross_entropy_with_logits",
              "sigmoid_cross_entropy_with_logits")
LOSS_FUNCTIONS = ("sparse_categorical_crossentropy", "categorical_crossentropy", "categorical_focal_crossentropy",
                  "binary_crossentropy", "binary_focal_crossentropy")


def _loss_used(probe: dict, default_class: str, assumptions: List[str]):
    """(the loss as the flagged line computes it, its name in the evidence, sparse labels?):
    the `tf.nn` op or the Keras loss function it calls, else the loss object it builds."""
    op = probe.get("op", "").rsplit(".", 1)[-1]
    if op in LOGITS_OPS:
        function = getattr(tf.nn, op)
        return (lambda labels, logits: tf.reduce_mean(function(labels=labels, logits=logits)),
                f"{TF} `tf.nn.{op}`", op.startswith("sparse_"))
    if probe.get("function") in LOSS_FUNCTIONS:
        function, from_logits = getattr(KERAS.losses, probe["function"]), _from_logits_in(probe["call"])
        return (lambda labels, predictions: tf.reduce_mean(function(labels, predictions, from_logits=from_logits)),
                f"{FLAVOUR} `{probe['function']}(..., from_logits={from_logits})`",
                probe["function"].startswith("sparse_"))
    loss = _user_loss(probe, default_class, assumptions)
    return loss, f"{FLAVOUR} `{type(loss).__name__}`", "Sparse" in type(loss).__name__


def _from_logits_in(snippet: dict) -> bool:
    """The `from_logits` the flagged call passes (a literal or a known local constant); after
    `--fix` drops it, False."""
    call = ast.parse(snippet["code"].strip(), mode="eval").body
    for keyword in getattr(call, "keywords", ()):
        if keyword.arg == "from_logits":
            if isinstance(keyword.value, ast.Name):
                return snippet.get("constants", {}).get(keyword.value.id, True) is True
            return not isinstance(keyword.value, ast.Constant) or keyword.value.value is True
    return False


def probe_double_activation(probe: dict) -> dict:
    default_class, logits_values, activation, described = DOUBLE_ACTIVATION[probe["kind"]]
    assumptions = [f"a confidently wrong prediction: {described}"]
    loss, used, sparse = _loss_used(probe, default_class, assumptions)
    if probe["kind"] == "softmax":
        labels = tf.constant([0]) if sparse else tf.constant([[1.0, 0.0, 0.0]])
    else:
        labels = tf.constant([[1.0]])
    logits = tf.Variable(logits_values)
    with tf.GradientTape(persistent=True) as tape:
        single = loss(labels, logits)
        double = loss(labels, activation(logits))
    single_grad = float(tf.norm(tape.gradient(single, logits)))
    double_grad = float(tf.norm(tape.gradient(double, logits)))
    evidence = (f"{used}: with {probe['kind']} applied twice the loss is {float(double):.3g} and the gradient norm "
                f"{double_grad:.2g}; with the {probe['kind']} once (on the raw logits) they are {float(single):.3g} "
                f"and {single_grad:.3g}")
    if float(double) < 0.5 * float(single) and double_grad < 0.1 * single_grad:
        return verdict("confirmed", evidence, assumptions)
    return verdict("not-reproduced", evidence, assumptions)



# --- config files (CL001, CL009) --------------------------------------------------------------

def probe_config(probe: dict) -> dict:
    """Build the optimizer a config mapping describes with the installed Keras, then judge it as
    the code probes do. Only a known optimizer class and its numeric options are used: nothing
    is deserialized from the file."""
    import inspect

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
        if probe["rule"] == "CL001" and any(option in str(err) for option in CLIP_OPTIONS):
            return verdict("confirmed", f"{FLAVOUR}: {built} raises {first_line(err)}", assumptions)
        if probe["rule"] == "CL009":
            return verdict("confirmed", f"{FLAVOUR}: {built} raises {first_line(err)}", assumptions)
        return verdict("inconclusive", f"{FLAVOUR}: {built} raises an unrelated {kind_of(err)}", assumptions)
    if probe["rule"] == "CL001":
        result = describe_options(optimizer, f"builds {built}")
        return verdict(result["verdict"], result["evidence"], assumptions)
    return judge_threshold(optimizer, built, assumptions)


PROBES = {
    ("CL001", "construct"): probe_construct,
    ("CL001", "late-attribute"): probe_late_attribute,
    ("CL002", "option"): probe_after_compile,
    ("CL002", "replace"): probe_after_compile,
    ("CL002", "rebind"): probe_after_compile,
    ("CL002", "callback"): probe_after_compile,
    ("CL003", "per-tensor"): probe_per_tensor,
    ("CL004", "softmax"): probe_log_softmax,
    ("CL004", "sigmoid"): probe_log_softmax,
    ("CL004", "1-sigmoid"): probe_log_softmax,
    ("CL005", "none-unsafe"): probe_none_unsafe,
    ("CL005", "misaligned"): probe_misaligned,
    ("CL006", "not-unpacked"): probe_not_unpacked,
    ("CL007", "unused"): probe_unused,
    ("CL008", "numerics"): probe_numerics,
    ("CL009", "optimizer"): probe_threshold,
    ("CL009", "tensor"): probe_threshold,
    ("CL009", "value"): probe_threshold,
    ("CL010", "softmax"): probe_double_activation,
    ("CL010", "sigmoid"): probe_double_activation,
    ("CL001", "config"): probe_config,
    ("CL009", "config"): probe_config,
}


def run(probe: dict) -> dict:
    handler = PROBES.get((probe.get("rule"), probe.get("kind")))
    if handler is None:
        return verdict("skipped", f"no probe for {probe.get('rule')} ({probe.get('kind')})")
    try:
        return handler(probe)
    except MissingSymbol as err:
        return verdict("inconclusive", f"{FLAVOUR}: the snippet needs something this installation does not have: "
                                       f"{first_line(err)}", other_flavour="keras" in str(err))
    except Refusal as err:
        return verdict("skipped", f"not executed: {err}")
    except (AttributeError, NameError, KeyError, IndexError, TypeError, ValueError, tf.errors.OpError) as err:
        return verdict("inconclusive", f"the snippet could not run with stand-ins ({kind_of(err)})")
