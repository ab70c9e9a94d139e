"""What every probe shares: the installed versions, the verdict, stand-ins, the migration shim's
stand-ins, and running a rebuilt snippet in a namespace of allowlisted symbols and stand-ins.

Imports TensorFlow: the worker imports this package after `sandbox.before_import`.
"""
from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
import textwrap
from typing import Any, Callable, Dict, List, Optional, Sequence, Type

import numpy as np
import tensorflow as tf

from ...findings import CLIP_OPTIONS  # noqa: F401 (re-exported to the probes)
from ...probes import Probe
from ..allowlist import BUILTINS, allowed, entry
from ..rebuild import SYMBOL_PREFIX, check_worker_code, name_parts, stand_in_name
from .guard import REGISTRY, Refusal, guard

KERAS = tf.keras
LEGACY_KERAS = KERAS.__name__.startswith("tf_keras")
VARIABLE_LISTS = ("trainable_variables", "trainable_weights", "variables", "weights")
HOLDERS = ("optimizer", "model")  # attributes of a stand-in that are objects in their turn
PLACEHOLDER = 1.0
RESTRICTED_BUILTINS = {name: getattr(builtins, name) for name in BUILTINS}
UNCHECKED = False  # set by the worker under the test-only hook: snippets run as written (layer 2 alone)
STAND_INS = " stand-ins"  # a key no snippet can name: the namespace's stand-in texts, for the assumptions


class Used:
    """What the running probe took from the linted file (`FLAGS.clipnorm` = its flag default 0)
    and what it had to stand in for with a placeholder; emptied before every probe. A probe that
    used a placeholder cannot say `not-reproduced` (`probes.run`): the placeholder may be the reason."""

    file_values: List[str] = []
    placeholders: List[str] = []

    @classmethod
    def clear(cls) -> None:
        cls.file_values, cls.placeholders = [], []


def stood_in(text: str, assumptions: List[str]) -> float:
    """The placeholder number for `text`, a value nobody could read statically, noted."""
    note = f"`{text}` = {PLACEHOLDER} (placeholder)"
    assumptions.append(note)
    Used.placeholders.append(note)
    return PLACEHOLDER


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


# --- the probe functions, by the probe class they run (cliplint.probes) --------------------------

RUNNERS: Dict[Type[Probe], Callable[[dict], dict]] = {}


def runs(*classes: Type[Probe]) -> Callable[[Callable[[dict], dict]], Callable[[dict], dict]]:
    """Register a probe function for the probe classes whose prepared payloads it runs."""
    def register(function: Callable[[dict], dict]) -> Callable[[dict], dict]:
        for cls in classes:
            RUNNERS[cls] = function
        return function
    return register


def verdict(kind: str, evidence: str, assumptions: Sequence[str] = (), other_flavour: bool = False) -> dict:
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
        if attribute in HOLDERS:  # `self.optimizer.apply_gradients`: an object, not a number
            return self.__dict__.setdefault(attribute, StandIn(f"{self._name}.{attribute}", self._assumptions,
                                                               self._variables))
        if attribute in ("apply_gradients", "apply"):
            self._assumptions.append(f"`{self._name}` is stood in by SGD(learning_rate=1.0)")
            # a new optimizer each call: TF 1 code applies a growing list inside its loop, which one
            # built Keras optimizer refuses (it knows only the variables of its first call)
            return lambda *args, **keywords: getattr(KERAS.optimizers.SGD(learning_rate=1.0), attribute)(*args,
                                                                                                     **keywords)
        return stood_in(f"{self._name}.{attribute}", self._assumptions)


class MissingSymbol(AttributeError):
    """An allowlisted symbol this installation does not have (`tf.add_check_numerics_ops` in TF 2).
    Its message is composed by the worker from the allowlist entry; `keras`: a Keras symbol (the
    other Keras flavour may have it)."""

    def __init__(self, message: str, keras: bool) -> None:
        super().__init__(message)
        self.keras = keras


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
            raise MissingSymbol(f"module '{getattr(obj, '__name__', root)}' has no attribute '{part}'", root == "keras")
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


# --- the worker's global state between probes ----------------------------------------------

def _provided_kinds() -> tuple:
    """The kinds of objects the probes provide to snippets (their models, optimizers, losses,
    variables, symbolic inputs, stand-ins): a snippet may pass these to an allowlisted call."""
    legacy = getattr(getattr(KERAS.optimizers, "legacy", None), "Optimizer", None)
    optimizers = (KERAS.optimizers.Optimizer, *([legacy] if legacy is not None else []))
    variable = (KERAS.Variable,) if isinstance(getattr(KERAS, "Variable", None), type) else ()
    return (StandIn, KERAS.layers.Layer, KERAS.losses.Loss, type(KERAS.Input(shape=(1,))), *optimizers, *variable)


def _global_state() -> dict:
    return {"floatx": KERAS.backend.floatx(), "epsilon": KERAS.backend.epsilon(),
            "image_data_format": KERAS.backend.image_data_format(),
            "policy": KERAS.mixed_precision.global_policy().name}


REGISTRY.kinds = _provided_kinds()
INITIAL_STATE = _global_state()
# Keras 3's clear_session runs the garbage collector (about 0.2 s a probe) unless told not to; the
# worker's memory is bounded by its rlimit and its process's life, not by collection.
_WITHOUT_GC = {"free_memory": False} if "free_memory" in inspect.signature(KERAS.backend.clear_session).parameters \
    else {}


def reset_state() -> None:
    """After every probe: Keras' global state as the worker started (a snippet that reached it,
    which layer 1 should make impossible, changes no later finding), and the registry emptied."""
    REGISTRY.clear()
    Used.clear()
    KERAS.backend.clear_session(**_WITHOUT_GC)
    KERAS.backend.set_floatx(INITIAL_STATE["floatx"])
    KERAS.backend.set_epsilon(INITIAL_STATE["epsilon"])
    KERAS.backend.set_image_data_format(INITIAL_STATE["image_data_format"])
    KERAS.mixed_precision.set_global_policy(INITIAL_STATE["policy"])


def tree_of(code: str) -> ast.Module:
    return ast.parse(textwrap.dedent(code).strip())


def expression_of(code: str) -> ast.expr:
    """The value of a snippet's first statement: an expression statement's, or an assignment's."""
    statement = tree_of(code).body[0]
    if isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)) and statement.value is not None:
        return statement.value
    raise ValueError(f"not an expression or an assignment: {ast.unparse(statement)[:80]}")


def call_of(code: str) -> ast.Call:
    """The call a snippet makes (`expression_of`): the snippets of calls the rules flagged."""
    node = expression_of(code)
    if not isinstance(node, ast.Call):
        raise ValueError(f"not a call: {ast.unparse(node)[:80]}")
    return node


def free_names(code: str) -> Dict[str, bool]:
    """Names the snippet reads but does not bind -> whether it uses them with an attribute."""
    tree = tree_of(code)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    stored |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda) for a in n.args.args}
    roots = {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    return {n.id: n.id in roots for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id not in stored and n.id not in RESTRICTED_BUILTINS}


def namespace(snippet: dict, bound: dict, assumptions: List[str], variables=None, default=None) -> dict:
    """Allowlisted symbols, literal constants, role stand-ins, and inert stand-ins for the rest."""
    ns: Dict[str, Any] = {"__builtins__": builtins if UNCHECKED else RESTRICTED_BUILTINS,
          STAND_INS: (snippet, assumptions)}
    for name, qualified in snippet.get("symbols", {}).items():
        ns[name] = resolve(qualified) if UNCHECKED else guard(resolve(qualified), qualified)
    for name in snippet.get("stand_ins", {}):
        ns[name] = snippet.get("values", {}).get(name, PLACEHOLDER)
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
            ns[name] = stood_in(name, assumptions)
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


def evaluate(node: ast.expr, ns: dict):
    """One expression of a snippet (a call's function or argument), noting the stand-ins it uses."""
    _note_stand_ins(node, ns)
    return eval(compile(ast.Expression(node), "<snippet>", "eval"), ns)


def _note_stand_ins(tree: ast.AST, ns: dict) -> None:
    """The placeholder numbers an expression uses (a stand-in a probe bound to a value of its role
    was listed by that probe)."""
    snippet, assumptions = ns.get(STAND_INS, ({}, []))
    stand_ins, values = snippet.get("stand_ins", {}), {**snippet.get("constants", {}), **snippet.get("values", {})}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name):
            continue
        text = stand_ins.get(node.id, node.id)
        if node.id in stand_ins and ns.get(node.id) is PLACEHOLDER and isinstance(node.ctx, ast.Load):
            stood_in(text, assumptions)
        elif node.id in values and ns.get(node.id) is values[node.id]:
            source = snippet.get("sources", {}).get(text) or snippet.get("sources", {}).get(node.id, "from the file")
            Used.file_values.append(f"`{text}` = {values[node.id]!r} ({source})")


def execute(code: str, ns: dict):
    """The value of an expression snippet; None for statements (their effects are in `ns`)."""
    tree = tree_of(code)
    if not UNCHECKED:
        refused = check_worker_code(code, tuple(k for k in ns if k.startswith(SYMBOL_PREFIX))
                                     + tuple(ns[STAND_INS][0].get("stand_ins", {})))
        if refused:
            raise Refusal(f"the worker refused a snippet with {refused}")
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        return evaluate(tree.body[0].value, ns)
    _note_stand_ins(tree, ns)
    exec(compile(tree, "<snippet>", "exec"), ns)
    return None


def bound_name(text: str) -> str:
    """The name a snippet reads `text` by: itself, or the stand-in layer 1 made of an attribute chain."""
    return text if "." not in text else stand_in_name(text)


def bind_expression(text: Optional[str], value, bound: dict, assumptions: List[str], variables=None) -> None:
    """Bind the expression `text` to `value`: a name, or a variable list read through attributes
    (`model.trainable_variables`, `self.model.trainable_variables`): stand-ins along the chain."""
    chain = name_parts(expression_of(text)) if text else None
    if not chain or text is None:
        return
    if len(chain) == 1:
        bound[chain[0]] = value
        return
    if chain[-1] not in VARIABLE_LISTS:  # `self.gvs`: layer 1 made the chain one stand-in name
        bound[bound_name(text)] = value
        return
    holder = bound.get(chain[0])
    if not isinstance(holder, StandIn):
        holder = bound[chain[0]] = StandIn(chain[0], assumptions, variables)
    for depth, attribute in enumerate(chain[1:-1], start=2):
        inner = holder.__dict__.get(attribute)
        if not isinstance(inner, StandIn):
            inner = StandIn(".".join(chain[:depth]), assumptions, variables)
            holder.__dict__[attribute] = inner
        holder = inner
    holder.__dict__["_variables"] = value


def shown(values) -> str:
    """Numbers as a person would write them: [0, -20.72, -inf]."""
    return "[" + ", ".join(f"{v:.4g}" for v in np.asarray(values, dtype="float64").reshape(-1)) + "]"


def quoted(err: BaseException) -> str:
    """An exception as evidence: its type, which the probe judges by, then its message, marked as
    quoted (it can echo the snippet's own values, so no verdict is ever read from it), without
    control characters and with no `"` that could end the quotation early."""
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", " ".join(str(err).split()))
    text = "".join(c if c.isprintable() else " " for c in text).replace('"', "'")[:300]
    return f'{kind_of(err)} (message quoted from {_source(err)}: "{text}")'


def _source(err: BaseException) -> str:
    """Who raised it: the module of the innermost frame of its traceback."""
    frame = err.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    module = (frame.tb_frame.f_globals.get("__name__", "") if frame else "").split(".")[0]
    return {"tensorflow": "TensorFlow", "keras": "Keras", "tf_keras": "Keras"}.get(module, "Python")


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


def flat(tensors) -> np.ndarray:
    return np.concatenate([np.reshape(np.asarray(t), -1) for t in tensors])
