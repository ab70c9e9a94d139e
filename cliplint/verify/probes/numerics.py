"""The probes of loss numerics: CL004 (the log of a softmax or sigmoid), CL008 (a removed
numerics check) and CL010 (an activation applied before a from-logits loss)."""
from __future__ import annotations

import ast
from typing import List

import numpy as np
import tensorflow as tf

from ...probes import (
    LogOfOneMinusSigmoid,
    LogOfSigmoid,
    LogOfSoftmax,
    Numerics,
    SigmoidThenFromLogits,
    SoftmaxThenFromLogits,
)
from .common import (
    FLAVOUR,
    KERAS,
    PLACEHOLDER,
    TF,
    MissingSymbol,
    as_written,
    call_of,
    dense,
    evaluate,
    execute,
    expression_of,
    free_names,
    namespace,
    quoted,
    runs,
    shown,
    tree_of,
    verdict,
)
from .guard import admit, unwrapped

# --- CL004 ----------------------------------------------------------------------------------

STAND_IN_LOGITS = {
    LogOfSoftmax.kind: ([[100.0, 0.0, -3.0]], tf.nn.softmax, tf.nn.log_softmax, "tf.nn.log_softmax"),
    LogOfSigmoid.kind: ([[-200.0, 0.5]], tf.math.sigmoid, tf.math.log_sigmoid, "tf.math.log_sigmoid"),
    LogOfOneMinusSigmoid.kind: ([[200.0, 0.5]], tf.math.sigmoid, lambda logits: tf.math.log_sigmoid(-logits),
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
LEAST_LIKELY = {LogOfSoftmax.kind: 2, LogOfSigmoid.kind: 0, LogOfOneMinusSigmoid.kind: 0}


def _probabilities(probe: dict, logits, assumptions: List[str]):
    """The user's softmax/sigmoid call applied to stand-in logits (its own keyword arguments kept);
    for a layer that ends in that activation (`tf.layers.dense(..., activation=tf.nn.softmax)`,
    `Dense(n, activation="softmax")`), its activation applied to the stand-in logits."""
    kind = probe["kind"].replace("1-", "")
    source = probe.get("source")
    if source is None:
        assumptions.append(f"the {kind} output is stood in by the {kind} of stand-in logits")
        return STAND_IN_LOGITS[probe["kind"]][1](logits)
    call = call_of(source["code"])
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
    if unwrapped(function) is dense:
        given = next((kw.value for kw in call.keywords if kw.arg == "activation"),
                     call.args[2] if len(call.args) > 2 else None)
        activation = evaluate(given, ns) if given is not None else None
    elif isinstance(function, KERAS.layers.Layer):
        activation = getattr(function, "activation", None)
    else:
        return None
    if activation is None:
        return KERAS.activations.linear
    return KERAS.activations.get(admit(activation, "keras.activations.get", "the layer's `activation=`"))


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
    tree = tree_of(log["code"])
    if probe.get("source") is not None:
        replacer = _Replace(expression_of(probe["source"]["code"]))
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


@runs(LogOfSoftmax, LogOfSigmoid, LogOfOneMinusSigmoid)
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


# --- CL008 ----------------------------------------------------------------------------------

@runs(Numerics)
def probe_numerics(probe: dict) -> dict:
    """The removed numerics check, called by the probe itself without arguments (it takes none):
    judged by the exception's type, never by what the user's arguments could make it say."""
    call = probe["call"]
    function_code = ast.unparse(call_of(call["code"]).func)
    try:
        check = execute(function_code, namespace({**call, "code": function_code}, {}, []))
    except MissingSymbol as err:  # the worker's own message: the symbol is not in this TensorFlow
        return verdict("confirmed", f"{TF} raises AttributeError: {err}")
    try:
        check()
    except RuntimeError as err:
        traced = _checks_nothing_in_function(check)
        return verdict("confirmed", f"{TF} raises {quoted(err)} in eager mode{traced}")
    return verdict("not-reproduced", f"{TF}: the call ran without an error")


def _checks_nothing_in_function(check) -> str:
    @tf.function
    def step(x):
        check()
        return tf.math.log(x)

    try:
        value = float(step(tf.constant(0.0)))
    except tf.errors.InvalidArgumentError:
        return ""
    return f"; placed first in a tf.function it checked nothing: log(0) returned {value:g} without an error"


# --- CL010 ----------------------------------------------------------------------------------

# The Keras loss each kind of from-logits loss is stood in by when the user's cannot be rebuilt.
DEFAULT_LOSS = {SoftmaxThenFromLogits.kind: "CategoricalCrossentropy", SigmoidThenFromLogits.kind: "BinaryCrossentropy"}
ACTIVATIONS = {SoftmaxThenFromLogits.kind: tf.nn.softmax, SigmoidThenFromLogits.kind: tf.math.sigmoid}
# A confidently wrong prediction for (the loss's own activation, the one applied before it), the
# first class being the true one. The other classes are at -10, not 0, when the activations differ:
# a sigmoid's slope at 0 is 0.25, which would leave the gradient a seventh of the raw one, not tiny.
WRONG_PREDICTION = {
    ("softmax", "softmax"): ([[0.0, 10.0, 0.0]], "logits [0, 10, 0], true class 0"),
    ("softmax", "sigmoid"): ([[-10.0, 10.0, -10.0]], "logits [-10, 10, -10], true class 0"),
    ("sigmoid", "sigmoid"): ([[-10.0]], "logit -10, true label 1"),
    ("sigmoid", "softmax"): ([[-10.0, 10.0, -10.0]], "logits [-10, 10, -10], true labels [1, 0, 0]"),
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


# The ops that take logits by definition, by their canonical name's last parts, called as the
# probe calls them (labels, logits).
LOGITS_OPS = {
    "nn.softmax_cross_entropy_with_logits": lambda y, z: tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=z),
    "nn.softmax_cross_entropy_with_logits_v2": lambda y, z: tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=z),
    "nn.sparse_softmax_cross_entropy_with_logits":
        lambda y, z: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z),
    "nn.sigmoid_cross_entropy_with_logits": lambda y, z: tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z),
    "nn.weighted_cross_entropy_with_logits":
        lambda y, z: tf.nn.weighted_cross_entropy_with_logits(labels=y, logits=z, pos_weight=1.0),
    "losses.softmax_cross_entropy": lambda y, z: tf.compat.v1.losses.softmax_cross_entropy(y, z),
    "losses.sparse_softmax_cross_entropy": lambda y, z: tf.compat.v1.losses.sparse_softmax_cross_entropy(y, z),
    "losses.sigmoid_cross_entropy": lambda y, z: tf.compat.v1.losses.sigmoid_cross_entropy(y, z),
}
# The sequence losses (TF 1's contrib, TF Addons; neither in this TensorFlow) average the sparse op
# over the time steps: one step stands for them.
SEQUENCE_LOSSES = ("seq2seq.sequence_loss", "legacy_seq2seq.sequence_loss", "legacy_seq2seq.sequence_loss_by_example")
LOSS_FUNCTIONS = ("sparse_categorical_crossentropy", "categorical_crossentropy", "categorical_focal_crossentropy",
                  "binary_crossentropy", "binary_focal_crossentropy")


def _loss_used(probe: dict, default_class: str, assumptions: List[str]):
    """(the loss as the flagged line computes it, its name in the evidence, sparse labels?):
    the `tf.nn` op or the Keras loss function it calls, else the loss object it builds."""
    op = ".".join(probe.get("op", "").split(".")[-2:])
    if op in SEQUENCE_LOSSES:
        assumptions.append(f"`{op.rsplit('.', 1)[1]}` is stood in by one time step of it, "
                           "`tf.nn.sparse_softmax_cross_entropy_with_logits`")
        op = "nn.sparse_softmax_cross_entropy_with_logits"
    if op in LOGITS_OPS:
        function = LOGITS_OPS[op]
        shown_op = f"tf.compat.v1.{op}" if op.startswith("losses.") else f"tf.{op}"
        return (lambda labels, logits: tf.reduce_mean(function(labels, logits)),
                f"{TF} `{shown_op}`", "sparse_" in op)
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


@runs(SoftmaxThenFromLogits, SigmoidThenFromLogits)
def probe_double_activation(probe: dict) -> dict:
    kind = probe["kind"]
    squashed = probe.get("squashed") or kind
    logits_values, described = WRONG_PREDICTION[(kind, squashed)]
    assumptions = [f"a confidently wrong prediction: {described}"]
    loss, used, sparse = _loss_used(probe, DEFAULT_LOSS[kind], assumptions)
    classes = len(logits_values[0])
    labels = tf.constant([0]) if sparse else tf.one_hot([0], classes)
    logits = tf.Variable(logits_values)
    with tf.GradientTape(persistent=True) as tape:
        single = loss(labels, logits)
        double = loss(labels, ACTIVATIONS[squashed](logits))
    single_grad = float(tf.norm(tape.gradient(single, logits)))
    double_grad = float(tf.norm(tape.gradient(double, logits)))
    applied = f"{kind} applied twice" if squashed == kind else f"{squashed} applied before the loss's {kind}"
    evidence = (f"{used}: with {applied} the loss is {float(double):.3g} and the gradient norm "
                f"{double_grad:.2g}; with the {kind} once (on the raw logits) they are {float(single):.3g} "
                f"and {single_grad:.3g}")
    if float(double) < 0.5 * float(single) and double_grad < 0.1 * single_grad:
        return verdict("confirmed", evidence, assumptions)
    return verdict("not-reproduced", evidence, assumptions)
