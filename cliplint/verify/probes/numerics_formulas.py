"""The probes of hand-written numerics (round 3): CL011 (formulas that overflow), CL012 (a
probabilities loss given logits), CL013 (a softmax over one unit), CL014 (a norm at zero) and
CL015 (`tf.where` masking a NaN gradient).

The formula probes run the user's own expression with its input (`inputs`: the snippets of the
sub-expressions standing for it; `exp_inputs`: names holding `exp` of it) replaced by the stand-in
values TF_FACTS section 13 measured, and report the value and the gradient with respect to the
stand-in; "not reproduced" when both are finite.
"""
from __future__ import annotations

import ast
from typing import List, Tuple

import numpy as np
import tensorflow as tf

from ...probes import (
    LogSumExp,
    NormAtZero,
    ProbabilityLoss,
    SingleUnit,
    Softplus,
    SqrtExp,
    UnstableSoftmax,
    WhereGradient,
)
from .common import FLAVOUR, KERAS, TF, as_written, execute, expression_of, namespace, runs, shown, tree_of, verdict

# kind -> (stand-in input, what it is, the stable form run on it, its name)
STAND_INS = {
    UnstableSoftmax.kind: ([[100.0, 0.0]], "a score of 100", lambda v: tf.nn.softmax(v), "tf.nn.softmax"),
    LogSumExp.kind: ([[100.0, 0.0]], "a logit of 100", lambda v: tf.reduce_logsumexp(v, -1),
                          "tf.reduce_logsumexp"),
    Softplus.kind: ([[100.0]], "an input of 100", tf.nn.softplus, "tf.nn.softplus"),
    SqrtExp.kind: ([[100.0]], "a log-variance of 100", lambda v: tf.exp(0.5 * v), "tf.exp(0.5 * x)"),
    NormAtZero.kind: ([[0.0, 0.0]], "a zero vector (two equal points)",
                             lambda v: tf.sqrt(tf.reduce_sum(tf.square(v)) + 1e-12), "the epsilon inside the sqrt"),
    WhereGradient.kind: ([[0.0, 2.0]], "the masked point 0 and 2", None, "the double where"),
}
OVERFLOWS = (UnstableSoftmax.kind, LogSumExp.kind, Softplus.kind, SqrtExp.kind)
CONSTANT_MAP = [[[[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]]  # batch, height, width, channels
PAIRWISE = [[0.0, 0.0], [1.0, 1.0]]  # one set of points: the diagonal of their differences is zero
INPUT, EXP_INPUT = "probe_input", "probe_exp_input"


class _Bind(ast.NodeTransformer):
    """Put a name where each of the given sub-expressions sits."""

    def __init__(self, targets: List[Tuple[str, str]]) -> None:
        self.targets = targets  # (ast.dump of the sub-expression, the name to put there)
        self.found = 0

    def visit(self, node):
        dumped = ast.dump(node) if isinstance(node, ast.expr) else None
        for target, name in self.targets:
            if dumped == target:
                self.found += 1
                return ast.copy_location(ast.Name(name, ast.Load()), node)
        return super().visit(node)


def _bound_code(probe: dict, field: str) -> Tuple[str, int]:
    """A snippet's code with the inputs replaced by the probe's names, and how many were."""
    targets = [(ast.dump(expression_of(s["code"])), INPUT) for s in probe.get("inputs") or () if s]
    targets += [(ast.dump(expression_of(s["code"])), EXP_INPUT) for s in probe.get("exp_inputs") or () if s]
    tree = tree_of(probe[field]["code"])
    binder = _Bind(targets)
    tree = ast.fix_missing_locations(binder.visit(tree))
    return ast.unparse(tree), binder.found


def _value_and_gradient(probe: dict, values, assumptions: List[str]):
    """The expression on the stand-in, after its `setup` (the assignment of a name it reads that
    holds the singular value, `logp = tf.math.log(p)`), with the same inputs bound."""
    code, found = _bound_code(probe, "expr")
    setup, found_in_setup = _bound_code(probe, "setup") if probe.get("setup") else ("", 0)
    if not found + found_in_setup:
        raise ValueError("the expression's input could not be located")
    stand_in = tf.Variable(values)
    with tf.GradientTape() as tape:
        bound = {INPUT: stand_in, EXP_INPUT: tf.exp(stand_in)}
        ns = namespace({**probe["expr"], "code": code}, bound, assumptions)
        if setup:
            ns.update({k: v for k, v in namespace({**probe["setup"], "code": setup}, bound, assumptions).items()
                       if k not in ns})
            execute(setup, ns)
        value = tf.cast(execute(code, ns), tf.float32)
        total = tf.reduce_sum(value)
    grad = tape.gradient(total, stand_in)
    grad = np.zeros_like(values) if grad is None else np.asarray(grad)
    return np.asarray(value), grad


def _finite(value, grad) -> bool:
    return bool(np.all(np.isfinite(value)) and np.all(np.isfinite(grad)))


@runs(UnstableSoftmax, LogSumExp, Softplus, SqrtExp, NormAtZero, WhereGradient)
def probe_formula(probe: dict) -> dict:
    """CL011, CL014, CL015: the user's expression on the stand-in input, value and gradient."""
    kind = probe["kind"]
    values: list
    values, described, stable, stable_name = STAND_INS[kind]
    if probe.get("pairwise"):
        values, described = PAIRWISE, "two points, so the differences of the set with itself have a zero diagonal"
    if probe.get("at_one"):  # acos/asin: singular at 1
        values, described = [[1.0, 0.0]], "the masked point 1 and 0"
    if probe.get("constant"):  # a feature map, so any axes a layer reduces over exist
        values, described = CONSTANT_MAP, "a constant feature map (zeros, 1x2x2x2)"
        stable, stable_name = lambda v: tf.sqrt(tf.math.reduce_variance(v) + 1e-5), "the epsilon inside the sqrt"
    if probe.get("normalise"):
        described, stable, stable_name = "a zero vector", lambda v: tf.math.l2_normalize(v, -1), "tf.math.l2_normalize"
    assumptions = [f"the input is {described}: {shown(values)} (float32)"]
    if probe.get("exp_inputs"):
        assumptions.append(f"`{probe['exp_inputs'][0]['code']}` holds exp of the input")
    value, grad = _value_and_gradient(probe, values, assumptions)
    if _finite(value, grad) and kind in OVERFLOWS:  # the input's sign is unknown: `exp(-beta * energy)`
        values = (-np.asarray(values)).tolist()
        value, grad = _value_and_gradient(probe, values, assumptions)
        assumptions.append(f"with the stand-in as given the expression is finite; tried its negation {shown(values)}")
    mine = f"your expression gives {shown(value)} with gradient {shown(grad)}"
    if _finite(value, grad):
        return verdict("not-reproduced", f"{TF}: {mine}: finite", assumptions)
    theirs = f"; {stable_name} keeps it finite"
    if stable is not None and not probe.get("pairwise"):
        reference = tf.Variable(STAND_INS[kind][0] if kind in OVERFLOWS else values)
        with tf.GradientTape() as tape:
            out = stable(reference)
            total = tf.reduce_sum(out)
        theirs = (f"; {stable_name} on {shown(reference)} gives {shown(out)} with gradient "
                  f"{shown(tape.gradient(total, reference))}")
    return verdict("confirmed", f"{TF}: {mine}{theirs}", assumptions)


# --- CL012 ----------------------------------------------------------------------------------

# loss class -> (stand-in logits, labels, described)
LOGITS_FOR = {
    "BinaryCrossentropy": ([[2.5], [-3.0]], [[1.0], [0.0]], "logits [[2.5], [-3.0]], labels [[1], [0]]"),
    "CategoricalCrossentropy": ([[3.0, -2.0, 0.5], [-1.0, -4.0, 2.0]], [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
                                "logits [[3, -2, .5], [-1, -4, 2]], one-hot labels of classes 0 and 2"),
    "SparseCategoricalCrossentropy": ([[3.0, -2.0, 0.5], [-1.0, -4.0, 2.0]], [0, 2],
                                      "logits [[3, -2, .5], [-1, -4, 2]], labels [0, 2]"),
}


@runs(ProbabilityLoss)
def probe_probability_loss(probe: dict) -> dict:
    """CL012: the loss as configured (`from_logits=False`) on stand-in logits, against the same
    loss with `from_logits=True`; after `--fix`, the fixed loss's own `from_logits`."""
    loss_class = probe["loss_class"]
    logits, labels, described = LOGITS_FOR[loss_class]
    from_logits = bool(probe.get("fixed"))
    assumptions = [f"the model outputs {described}"]
    cls = getattr(KERAS.losses, loss_class)
    used = cls(from_logits=from_logits)
    right = cls(from_logits=True)
    z = tf.Variable(logits)
    with tf.GradientTape(persistent=True) as tape:
        value, expected = used(tf.constant(labels), z), right(tf.constant(labels), z)
    grad = float(tf.norm(tape.gradient(value, z)))
    evidence = (f"{FLAVOUR} `{loss_class}(from_logits={from_logits})` on the logits gives {float(value):.4g} "
                f"(gradient norm {grad:.3g}); with from_logits=True it is {float(expected):.4g}")
    if not np.isclose(float(value), float(expected), rtol=1e-2):
        return verdict("confirmed", evidence, assumptions)
    return verdict("not-reproduced", evidence, assumptions)


# --- CL013 ----------------------------------------------------------------------------------

@runs(SingleUnit)
def probe_single_unit(probe: dict) -> dict:
    """CL013: the user's layer (`Dense(1, activation="softmax")`) on varied inputs, or softmax over
    the one unit itself: always 1, where a sigmoid is not."""
    inputs = tf.constant([[-3.0, 1.0], [0.0, 0.0], [0.5, -2.0], [7.0, 4.0]])
    assumptions = [f"inputs {shown(inputs)} (four examples of two features)"]
    layer = execute(probe["layer"]["code"], namespace(probe["layer"], {}, assumptions)) if probe.get("layer") else None
    if isinstance(layer, KERAS.layers.Layer):
        written = as_written(expression_of(probe["layer"]["code"]), probe["layer"])
        out, used = np.asarray(layer(inputs)), f"your layer `{written}`"
    else:
        assumptions.append("the softmax is applied to the one unit's values (the inputs' first column)")
        out, used = np.asarray(tf.nn.softmax(inputs[:, :1], axis=-1)), "softmax over the one unit"
    evidence = f"{FLAVOUR}: {used} gives {shown(out)} for the four inputs"
    if out.shape[-1] == 1 and np.allclose(out, 1.0):
        return verdict("confirmed", evidence + ": the output is 1 whatever the input", assumptions)
    return verdict("not-reproduced", evidence, assumptions)
