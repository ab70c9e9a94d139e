"""CL015 where-nan-gradient."""
from __future__ import annotations

from typing import Iterator, Optional, Tuple

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import SAFE, Fix, Report
from ..flow.carriers import same_value, trace
from ..flow.constants import UNKNOWN
from ..flow.formulas import (
    DATA_WORDS,
    LOGS,
    TRAINING_WORDS,
    away_from_zero,
    in_optimizer,
    in_pipeline,
    never_differentiated,
    only_from,
    stopped,
)
from ..flow.nodes import arg, walk
from ..names import DIVIDES, POWERS, WHERES
from ..probes import WhereGradient
from . import Invalid, Rule

# Functions whose slope is infinite or undefined at the point a comparison with a constant masks.
# Not `sqrt`, `rsqrt`, `reciprocal`: TensorFlow masks their gradients (measured, TF 2.21: no NaN).
ARC_FUNCTIONS = frozenset({"tensorflow.math.acos", "tensorflow.acos", "tensorflow.math.asin", "tensorflow.asin",
                           "keras.ops.arccos", "keras.ops.arcsin"})
SINGULAR = LOGS | ARC_FUNCTIONS
# The safe value put in place of the masked input: inside every function's domain, away from its edges.
SAFE_VALUE = {name: "0.0" for name in ARC_FUNCTIONS}
NOT_DIFFERENTIATED_WORDS = frozenset({"mask", "label", "labels", "shape", "length", "lengths", "count", "counts"})


class WhereNanGradient(Rule):
    code = "CL015"
    name = "where-nan-gradient"
    summary = "`tf.where(cond, f(x), other)` masks the point where `f` is undefined, but its gradient is still NaN."
    severity = "error"
    tokens = (b"where",)
    context_tokens = tuple(word.encode() for word in TRAINING_WORDS)  # a module that trains: see never_differentiated
    why = """
        `tf.where` computes both branches and sends the gradient through the one that is not
        selected multiplied by 0. Where that branch is `log(x)`, `1 / x`, `pow(x, p)` with
        `p < 1`, `acos` or `asin` at the point the condition masks, its slope is infinite and
        `0 * inf = nan`. Measured (TF 2.21): `tf.where(v > 0, log(v), 0)` at
        `[0., 2.]` has the value 0.693 but the gradient `[nan, 0.5]`; `keras.ops.where` is the same.
        One NaN gradient makes every weight NaN at the next step, and clipping cannot repair it.
        `sqrt`, `rsqrt` and `reciprocal` are not reported: TensorFlow masks their gradients
        (measured: no NaN).
    """
    example = """
        safe_log = tf.where(v > 0, tf.math.log(v), 0.0)
        inverse = tf.where(d != 0, 1.0 / d, 0.0)
    """
    instead = """
        safe_log = tf.where(v > 0, tf.math.log(tf.where(v > 0, v, 1.0)), 0.0)   # the double where
        inverse = tf.math.divide_no_nan(1.0, d)
        entropy = tf.math.xlogy(p, p)
    """
    fixes = """
        **Safe**: the double where. The masked input inside `f` is replaced by
        `where(cond, x, 1.0)` (0.0 for `acos`/`asin`), with the where function and condition as
        written, so the value is unchanged and the branch that is not selected has a finite
        slope. Offered when the condition and the input are names, attributes or constants.
    """
    VALID = [
        # a metric's log of the data (y_true), and a rounded value: no gradient reaches them
        "import tensorflow as tf\ndef kl_divergence(y_true, y_pred):\n"
        "    return tf.where(y_true == 0.0, 0.0, y_true * tf.math.log(y_true))\n"
        "def smape(pred, true):\n    summ = tf.abs(tf.round(pred)) + tf.abs(tf.round(true))\n"
        "    return tf.where(summ < 0.01, 0.0, 1.0 / summ)\n",
        # the double where
        "import tensorflow as tf\ny = tf.where(v > 0, tf.math.log(tf.where(v > 0, v, 1.0)), 0.0)\n",
        "import tensorflow as tf\nh = tf.math.xlogy(p, p)\nr = tf.math.divide_no_nan(1.0, d)\n",
        # sqrt, rsqrt and reciprocal are masked by TensorFlow
        "import tensorflow as tf\ndef f(v):\n    s = tf.where(v > 0, tf.sqrt(v), 0.0)\n"
        "    return s + tf.where(v > 0, tf.math.rsqrt(v), 0.0) + tf.where(v > 0, tf.math.reciprocal(v), 0.0)\n",
        # the condition is not about the input
        "import tensorflow as tf\ny = tf.where(training, tf.math.log(v), v)\n",
        # an input pipeline: no gradient
        "import tensorflow as tf\ndef prep(x):\n    return tf.where(x > 0, tf.math.log(x), 0.0)\n"
        "ds = tf.data.Dataset.from_tensor_slices(a).map(prep)\n",
        # the input is floored away from zero: log is finite everywhere
        "import tensorflow as tf\np = tf.maximum(a - b, 1e-12)\ny = tf.where(p > 1e-5, tf.math.log(p), p)\n",
        # an optimizer's trust ratio: made of gradients and weights, never differentiated
        "import tensorflow as tf\nclass Lars(tf.keras.optimizers.Optimizer):\n    def _apply(self, g, w):\n"
        "        g_norm = tf.norm(g)\n        return tf.where(g_norm > 0, tf.norm(w) / g_norm, 1.0)\n",
        # computed from the labels alone: no gradient reaches it
        "import tensorflow as tf\ngain = tf.reduce_sum(tf.cast(labels, tf.float32), axis=1)\n"
        "inv = tf.where(gain > 0.0, 1.0 / gain, tf.zeros_like(gain))\n",
        # a script that differentiates nothing
        "import tensorflow as tf\nratio = tf.where(n > 0, 1.0 / n, 0.0)\nprint(ratio)\n",
        # NumPy
        "import numpy as np\ny = np.where(v > 0, np.log(v), 0)\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\ndef safe_log(v):\n    return tf.where(v > 0, tf.math.log(v), 0.0)\n", 3,
                "0 * inf"),
        Invalid("import tensorflow as tf\ndef inverse(d):\n"
                "    return tf.where(tf.equal(d, 0.0), tf.zeros_like(d), 1.0 / d)\n", 3),
        Invalid("import tensorflow as tf\nwith tf.GradientTape() as tape:\n"
                "    y = tf.where(r > 0.0, tf.pow(r, -0.5), 0.0)\n", 3),
        Invalid("import keras\nfrom keras import ops\nclass L(keras.layers.Layer):\n    def call(self, v):\n"
                "        return ops.where(v > 0, ops.log(v), 0)\n", 5),
        Invalid("import tensorflow as tf\ndef entropy(p):\n    lg = tf.math.log(p)\n"
                "    return -tf.reduce_sum(tf.where(p > 0.0, p * lg, tf.zeros_like(p)))\n", 4),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.refers_to(WHERES)

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            if ctx.call_name(call) not in WHERES or len(call.args) < 3:
                continue
            found = self._masked(ctx, call)
            if found is None or in_pipeline(ctx.flow, call) or stopped(ctx.flow, call) or in_optimizer(ctx.flow, call) \
                    or never_differentiated(ctx.flow, call):
                continue
            singular, x, compared, held = found
            text = ctx.text(singular).strip().splitlines()[0][:60]
            message = (f"`{text}` is masked by the `where`, but its gradient is not: the branch that is not selected "
                       f"is still differentiated, and at the masked point its slope is infinite, so the gradient is "
                       f"0 * inf = nan (measured: `tf.where(v > 0, log(v), 0)` at 0 has gradient NaN). Use the double "
                       f"where (`{ctx.text(x)}` replaced by `where(cond, {ctx.text(x)}, 1.0)` inside), "
                       f"`tf.math.xlogy` or `tf.math.divide_no_nan`.")
            assign = ctx.parent.get(ctx.flow.value_of(held)) if held is not None else None
            probe = WhereGradient(ctx.flow.snippet(call), (ctx.flow.snippet(compared),),
                                  # the name holding the singular value: replayed first
                                  setup=ctx.flow.snippet(assign) if isinstance(assign, cst.Assign) else None,
                                  at_one=ctx.call_name(singular) in ARC_FUNCTIONS)
            fixable = held is None and ctx.encloses(call, singular)  # the guard goes where the where is
            yield Report(call, message, probe=probe, fix=self._fix(ctx, call, singular, x) if fixable else None)

    def _masked(self, ctx: Context, where: cst.Call) -> Optional[tuple]:
        """(the singular sub-expression, its input, the input as the condition compares it, the
        name it is reached through or None) when a branch holds `f(x)` with `f` singular at
        the point the condition (a comparison of `x` with a constant) masks."""
        compared = self._compared(ctx, where.args[0].value)
        if compared is None or away_from_zero(ctx.flow, compared):
            return None
        cond = where.args[0].value
        for selected, branch in ((True, where.args[1].value), (False, where.args[2].value)):
            found = self._singular(ctx, branch, compared)
            # made of labels, masks and shapes alone, the branch has no gradient to spoil
            if found is None or only_from(ctx.flow, found[0], NOT_DIFFERENTIATED_WORDS | DATA_WORDS):
                continue
            singular, x, held = found
            points = (-1.0, 1.0) if ctx.call_name(singular) in ARC_FUNCTIONS else (0.0,)
            # the branch must be the one the condition leaves out where `f` is singular
            if any(_holds_at(ctx, cond, point) is not selected for point in points):
                return singular, x, compared, held
        return None

    @staticmethod
    def _compared(ctx: Context, cond) -> Optional[cst.BaseExpression]:
        """`x` in `x > 0`, `0 < x`, `tf.equal(x, 0)`, `tf.greater(x, 0.)`, `tf.not_equal(x, 0)`."""
        found = _comparison(ctx, cond)
        if found is None:
            return None
        _, left, right = found
        if ctx.flow.constant(right) is not UNKNOWN:
            return left
        return right if ctx.flow.constant(left) is not UNKNOWN else None

    def _singular(self, ctx: Context, branch, compared):
        """(the singular expression, its input, the name the branch reads it through or None):
        in the branch as written, or wherever its value comes from (the engine's carriers)."""
        found = self._traced(ctx, branch, compared, 0)
        if found is None:
            return None
        singular, x = found
        held = None if ctx.encloses(branch, singular) else next(  # the name the branch reads it through
            (n for n in walk(branch) if isinstance(n, cst.Name) and ctx.flow.value_of(n) is singular), None)
        return singular, x, held

    def _traced(self, ctx: Context, expr, compared, depth: int):
        if depth > 3:
            return None
        return trace(ctx.flow, expr, lambda value: self._singular_here(ctx, value, compared, depth))

    def _singular_here(self, ctx: Context, expr, compared, depth: int):
        """(`f(x)` singular where `x` is masked, `x`) when `expr` is one, or holds one in a sum,
        product or negation."""
        def masked(inner) -> bool:
            return inner is not None and same_value(ctx.flow, inner, compared)
        if isinstance(expr, cst.Call):
            name = ctx.call_name(expr)
            inner, second = arg(expr, 0, "x"), arg(expr, 1, "y")
            if name in SINGULAR and masked(inner):
                return expr, inner
            if name in POWERS and masked(inner) and self._fractional(ctx, second):
                return expr, inner
            if name in DIVIDES and masked(second):
                return expr, second
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.Divide) and masked(expr.right):
                return expr, expr.right
            if isinstance(expr.operator, cst.Power) and masked(expr.left) and self._fractional(ctx, expr.right):
                return expr, expr.left
            return self._traced(ctx, expr.left, compared, depth + 1) \
                or self._traced(ctx, expr.right, compared, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self._traced(ctx, expr.expression, compared, depth + 1)
        return None

    @staticmethod
    def _fractional(ctx: Context, power) -> bool:
        value = ctx.flow.constant(power)
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value < 1 and value != 0

    @staticmethod
    def _fix(ctx: Context, where: cst.Call, singular, x) -> Optional[Fix]:
        cond = where.args[0].value
        plain = (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Comparison)
        if not isinstance(x, (cst.Name, cst.Attribute)) or not isinstance(cond, plain) \
                or any(isinstance(n, cst.Call) for n in walk(cond)):
            return None
        value = SAFE_VALUE.get(ctx.call_name(singular) or "", "1.0")
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        guarded = cst.Call(func=where.func, args=(cst.Arg(cond, comma=comma), cst.Arg(x, comma=comma),
                                                 cst.Arg(cst.Float(value))))
        return Fix(f"guard the input: `{ctx.text(guarded)}` (the double where)", SAFE, ((x, guarded),))


COMPARE = {cst.LessThan: "less", cst.LessThanEqual: "less_equal", cst.GreaterThan: "greater",
           cst.GreaterThanEqual: "greater_equal", cst.Equal: "equal", cst.NotEqual: "not_equal"}
HOLDS = {"less": lambda a, b: a < b, "less_equal": lambda a, b: a <= b, "greater": lambda a, b: a > b,
         "greater_equal": lambda a, b: a >= b, "equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b}


def _comparison(ctx: Context, cond) -> Optional[Tuple[Optional[str], cst.BaseExpression, cst.BaseExpression]]:
    """(the comparison's name in `HOLDS`, or None for `is`/`in`; its two sides) of `x > 0` or
    `tf.greater(x, 0)`, the condition followed through names; None for anything else."""
    cond = ctx.flow.value_of(cond)
    if isinstance(cond, cst.Comparison) and len(cond.comparisons) == 1:
        return COMPARE.get(type(cond.comparisons[0].operator)), cond.left, cond.comparisons[0].comparator
    op = (ctx.call_name(cond) or "").rsplit(".", 1)[-1] if isinstance(cond, cst.Call) else ""
    if op in HOLDS and isinstance(cond, cst.Call) and len(cond.args) >= 2:
        return op, cond.args[0].value, cond.args[1].value
    return None


def _holds_at(ctx: Context, cond, point: float) -> Optional[bool]:
    """The condition's value where the compared input is `point` (`x < 1` at 0: True), or None
    when it is not a comparison of the input with a number."""
    found = _comparison(ctx, cond)
    if found is None:
        return None
    op, left, right = found
    if op is None:
        return None
    low, high = ctx.flow.constant(left), ctx.flow.constant(right)
    if isinstance(high, (int, float)) and not isinstance(high, bool):
        return HOLDS[op](point, high)
    if isinstance(low, (int, float)) and not isinstance(low, bool):
        return HOLDS[op](low, point)
    return None
