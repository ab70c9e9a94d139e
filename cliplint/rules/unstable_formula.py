"""CL011 unstable-formula."""
from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import SAFE, Fix, Report
from ..flow.constants import UNKNOWN
from ..flow.formulas import LOG1P, LOGS, SQRTS, bounded_above, exp_of, number, summed
from ..flow.nodes import arg, walk
from ..names import DIVIDES, EXP, SUMS
from ..probes import FORMULAS, Formula, LogSumExp, Snippet, Softplus, SqrtExp, UnstableSoftmax
from ..replacements import parenthesized, spelled
from . import Invalid, Rule

# kind -> (the stable form's canonical names, preferred first; how the message names it)
STABLE = {
    UnstableSoftmax.kind: (("tensorflow.nn.softmax", "keras.ops.softmax"), "tf.nn.softmax(x, axis)"),
    LogSumExp.kind: (("tensorflow.reduce_logsumexp", "tensorflow.math.reduce_logsumexp", "keras.ops.logsumexp"),
                          "tf.reduce_logsumexp(x, axis)"),
    Softplus.kind: (("tensorflow.nn.softplus", "tensorflow.math.softplus", "keras.ops.softplus"),
                         "tf.nn.softplus(x)"),
    SqrtExp.kind: (("tensorflow.exp", "tensorflow.math.exp", "keras.ops.exp", "keras.backend.exp"),
                         "tf.exp(0.5 * x)"),
}
MESSAGES = {
    UnstableSoftmax.kind: "a softmax written out without subtracting the max: `exp` overflows in float32 once "
                                "an input passes about 88, and the value and the gradient become NaN (inf / inf).",
    LogSumExp.kind: "log-sum-exp written out: `exp` overflows in float32 once an input passes about 88, giving "
                         "inf and a NaN gradient.",
    Softplus.kind: "softplus written out: `exp` overflows in float32 once the input passes about 88, giving inf "
                        "and a NaN gradient.",
    SqrtExp.kind: "`sqrt(exp(x))` (a standard deviation from a log-variance): `exp` overflows in float32 once "
                        "the input passes about 88, giving inf and a NaN gradient.",
}


class UnstableFormula(Rule):
    code = "CL011"
    name = "unstable-formula"
    summary = ("A softmax, log-sum-exp, softplus or `sqrt(exp(x))` is written out by hand and overflows where "
               "TensorFlow's own op does not.")
    severity = "error"
    tokens = (b"exp",)
    why = """
        `exp` overflows float32 once its input passes about 88.7: `exp(100.)` is `inf`. Written
        out by hand, a softmax `exp(x) / reduce_sum(exp(x))` then gives `inf / inf = nan`
        (measured at `[100., 0.]`: value and gradient NaN), `log(reduce_sum(exp(x)))` gives `inf`
        with a NaN gradient, `log(1 + exp(x))` gives `inf`, and `sqrt(exp(logvar))` (a VAE's
        standard deviation) gives `inf` with a NaN gradient. Logits, scores and log-variances
        reach such values early in training, and once a single gradient is NaN every weight is
        NaN after the next step; gradient clipping cannot repair a NaN. TensorFlow's ops
        subtract the max first or use a stable formula: `tf.nn.softmax` gives `[1, 0]`,
        `tf.reduce_logsumexp` 100, `tf.nn.softplus` 100, `exp(0.5 * x)` 5.18e21 with finite
        gradients.

        The softmax and log-sum-exp forms are errors; softplus and `sqrt(exp)` are warnings
        (their inputs overflow less often). Inputs shown to be bounded are not reported:
        `x - reduce_max(x)`, `tanh(x)`, `-relu(x)`, `-d` of a distance or a square. A negated
        unknown (`exp(-beta * energy)`) is not bounded.
    """
    example = """
        def attention(q, k):
            scores = tf.matmul(q, k, transpose_b=True)
            weights = tf.exp(scores) / tf.reduce_sum(tf.exp(scores), axis=-1, keepdims=True)
            std = tf.sqrt(tf.exp(log_var))
    """
    instead = """
        def attention(q, k):
            scores = tf.matmul(q, k, transpose_b=True)
            weights = tf.nn.softmax(scores, axis=-1)
            std = tf.exp(0.5 * log_var)
    """
    fixes = """
        **Safe**, where the formula is written in one expression on one input: `sqrt(exp(x))`
        becomes `exp(0.5 * x)`, `log(1 + exp(x))` and `log1p(exp(x))` become `softplus(x)`,
        `log(reduce_sum(exp(x), axis))` becomes `reduce_logsumexp(x, axis)`, and
        `exp(x) / reduce_sum(exp(x), axis, keepdims=True)` with a constant axis becomes
        `softmax(x, axis)`, spelled through the file's imports. Not offered through names, for
        masked sums, different inputs, or a sum without `keepdims=True` (its shape differs).
    """
    VALID = [
        # the segment max subtracted first, on every path
        "import tensorflow as tf\ndef edge_softmax(e, seg, n):\n"
        "    e = e - tf.gather(tf.math.unsorted_segment_max(e, seg, n), seg)\n    x = tf.exp(e)\n"
        "    return x / tf.gather(tf.math.unsorted_segment_sum(x, seg, n), seg)\n",
        # the max subtracted first
        "import tensorflow as tf\ne = tf.exp(x - tf.reduce_max(x, axis=-1, keepdims=True))\n"
        "p = e / tf.reduce_sum(e, axis=-1, keepdims=True)\n",
        # the max a helper returns (baselines' `U.max`), subtracted first
        "import tensorflow as tf\ndef max(x, axis=None, keepdims=False):\n"
        "    return tf.reduce_max(x, axis=axis, keepdims=keepdims)\n"
        "a0 = logits - max(logits, axis=-1, keepdims=True)\nea0 = tf.exp(a0)\n"
        "p0 = ea0 / tf.reduce_sum(ea0, axis=-1, keepdims=True)\n",
        # the max subtracted in place
        "import tensorflow as tf\nz = h * w\nz -= tf.reduce_max(z, axis=-1, keepdims=True)\n"
        "lse = tf.math.log(tf.reduce_sum(tf.exp(z), axis=-1))\n",
        # the library ops, and the stable log-sum-exp with its max
        "import tensorflow as tf\np = tf.nn.softmax(x)\nlse = tf.reduce_logsumexp(x, axis=1)\n"
        "m = tf.reduce_max(x, 1, keepdims=True)\n"
        "lse2 = m + tf.math.log(tf.reduce_sum(tf.exp(x - m), 1, keepdims=True))\n",
        # bounded inputs: a negated distance (an RBF kernel), tanh, a stable BCE term
        "import tensorflow as tf\nd = tf.reduce_sum(tf.square(a - b), axis=-1)\nk = tf.exp(-d / (2.0 * s ** 2))\n"
        "w = k / tf.reduce_sum(k)\nz = tf.math.log1p(tf.exp(-tf.abs(x)))\n"
        "g = tf.exp(tf.tanh(h)) / tf.reduce_sum(tf.exp(tf.tanh(h)))\n"
        "ssp = tf.math.log(0.5 * tf.exp(-tf.nn.relu(x)) + 0.5)\n",
        # the stable standard deviation, and an epsilon inside the sqrt of a variance
        "import tensorflow as tf\nstd = tf.exp(0.5 * log_var)\nstd2 = tf.sqrt(var + 1e-6)\n",
        # the same layer with the max subtracted first
        "from keras import backend as K\ndef call(x, u):\n    ait = K.squeeze(K.dot(x, u), -1)\n"
        "    ait = K.exp(ait - K.max(ait, axis=1, keepdims=True))\n"
        "    ait /= K.sum(ait, axis=1, keepdims=True) + K.epsilon()\n    return ait\n",
        # NumPy and PyTorch
        "import numpy as np\nimport torch\np = np.exp(x) / np.sum(np.exp(x))\n"
        "q = torch.exp(y) / torch.sum(torch.exp(y))\n"
        "s = torch.sqrt(torch.exp(v))\n",
        # a user's own exp
        "import tensorflow as tf\ndef exp(v):\n    return tf.clip_by_value(v, -5, 5)\n"
        "p = exp(x) / tf.reduce_sum(exp(x))\n",
    ]
    INVALID = [
        # a graph's softmax over each node's edges: the sum per segment, gathered back per edge
        Invalid("import tensorflow as tf\ndef edge_softmax(e, seg, n):\n    x = tf.exp(e)\n"
                "    return x / tf.gather(tf.math.unsorted_segment_sum(x, seg, n), seg)\n", 4, "max"),
        # the max subtracted on one path only: the other overflows
        Invalid("import tensorflow as tf\ndef scatter_softmax(idx, values, shape, normalize=False):\n"
                "    if normalize:\n"
                "        values = values - tf.gather(tf.math.unsorted_segment_max(values, idx, shape), idx)\n"
                "    e = tf.exp(values)\n"
                "    return e / tf.gather(tf.scatter_nd(tf.expand_dims(idx, 1), e, [shape]), idx)\n", 6, "max"),
        # tf_unet's pixel-wise softmax: the sum tiled back to the channels, divided with `tf.div`
        Invalid("import tensorflow as tf\ndef pixel_wise_softmax(output_map):\n"
                "    exponential_map = tf.exp(output_map)\n"
                "    sum_exp = tf.reduce_sum(exponential_map, 3, keep_dims=True)\n"
                "    tensor_sum_exp = tf.tile(sum_exp, tf.stack([1, 1, 1, 2]))\n"
                "    return tf.div(exponential_map, tensor_sum_exp)\n", 6, None, "error"),
        Invalid("import tensorflow as tf\np = tf.exp(x) / tf.reduce_sum(tf.exp(x), axis=-1, keepdims=True)\n", 2,
                "tf.nn.softmax", "error"),
        Invalid("import tensorflow as tf\ndef attend(q, k):\n    s = tf.matmul(q, k, transpose_b=True)\n"
                "    e = tf.exp(s)\n    return e / tf.reduce_sum(e, axis=-1, keepdims=True)\n", 5),
        Invalid("import tensorflow as tf\nlse = tf.math.log(tf.reduce_sum(tf.exp(logits), axis=1))\n", 2,
                "tf.reduce_logsumexp"),
        Invalid("import tensorflow as tf\nsp = tf.math.log(1.0 + tf.exp(z))\n", 2, "softplus", "warning"),
        Invalid("from tensorflow.keras import backend as K\nstd = K.sqrt(K.exp(z_log_var))\n", 2, "exp(0.5 * x)",
                "warning"),
        # a negated unknown is not bounded
        Invalid("import tensorflow as tf\nw = tf.exp(-beta * energy)\nz = w / tf.reduce_sum(w)\n", 3),
        Invalid("import keras\nfrom keras import ops\nsp = ops.log1p(ops.exp(x))\n", 3),
        # softplus shifted and scaled: a shifted softplus, a smooth ELU
        Invalid("import tensorflow as tf\ndef ssp(x):\n    return tf.math.log(0.5 * tf.exp(x) + 0.5)\n", 3, "softplus"),
        Invalid("import tensorflow as tf\ndef smooth_elu(x):\n    return tf.math.log1p(1.718 * tf.exp(x)) - 1.0\n", 3),
        # into a helper through its parameter
        Invalid("import tensorflow as tf\ndef normalise(w, axis):\n"
                "    return w / tf.reduce_sum(w, axis, keepdims=True)\n"
                "def attend(s):\n    return normalise(tf.exp(s), -1)\n", 3),
        # a Keras attention layer's weights, squeezed, masked and divided in place
        Invalid("from keras import backend as K\ndef call(x, w, u, mask=None):\n"
                "    uit = K.tanh(K.dot(x, w))\n    ait = K.squeeze(K.dot(uit, u), -1)\n    ait = K.exp(ait)\n"
                "    if mask is not None:\n        ait *= K.cast(mask, K.floatx())\n"
                "    ait /= K.cast(K.sum(ait, axis=1, keepdims=True) + K.epsilon(), K.floatx())\n"
                "    return ait\n", 8, None, "error"),
        Invalid("import tensorflow as tf\ne = tf.expand_dims(tf.exp(s), -1)\np = e / tf.reduce_sum(e, axis=1)\n", 3),
        # masked: the mask does not bound the exp
        Invalid("import tensorflow as tf\ne = tf.exp(scores) * mask\n"
                "a = e / (tf.reduce_sum(e, axis=1, keepdims=True) + 1e-9)\n",
                3),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.refers_to(EXP)  # every formula overflows through an `exp` call

    def check(self, ctx: Context) -> Iterator[Report]:
        # `ctx.flow.written_as`: the `a / d` an update in place (`a /= d`) is, made by the dataflow
        for node in (*ctx.nodes(cst.BinaryOperation, cst.Call), *ctx.flow.written_as):
            found = self._formula(ctx, node)
            if found is None:
                continue
            kind, exp_call = found
            x = arg(exp_call, 0, "x")
            if (x is not None and bounded_above(ctx.flow, x)) or self._custom_gradient(ctx, node):
                continue
            severity = "error" if kind in (UnstableSoftmax.kind, LogSumExp.kind) else "warning"
            message = f"{MESSAGES[kind]} Use `{STABLE[kind][1]}`."
            yield Report(node, message, severity=severity, probe=self._probe(ctx, node, kind, exp_call),
                         fix=self._fix(ctx, node, kind, exp_call))

    @staticmethod
    def _custom_gradient(ctx: Context, node) -> bool:
        """Inside a `@tf.custom_gradient` function: its author wrote the stable gradient by hand."""
        return any(isinstance(outer, cst.FunctionDef) and any(
            ctx.qualify(d.decorator) == "tensorflow.custom_gradient" for d in outer.decorators)
            for outer in ctx.ancestors(node))

    def _formula(self, ctx: Context, node) -> Optional[Tuple[str, cst.Call]]:
        """(kind, the exp call that overflows) when `node` is one of the formulas."""
        flow = ctx.flow
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Divide):
                return self._softmax(ctx, node.left, node.right)
            if isinstance(node.operator, cst.Power) and flow.constant(node.right) == 0.5:
                exp_call = exp_of(flow, node.left, factors=False)
                return (SqrtExp.kind, exp_call) if exp_call is not None else None
            return None
        name = ctx.call_name(node)
        inner = arg(node, 0, "x")
        if name in DIVIDES:
            return self._softmax(ctx, inner, arg(node, 1, "y"))
        if inner is None:
            return None
        value = flow.value_of(inner)
        if name in SQRTS:
            exp_call = self._exp_itself(ctx, value)
            return (SqrtExp.kind, exp_call) if exp_call is not None else None
        if name in LOG1P:
            exp_call = exp_of(flow, value)  # log1p(exp(x)), log1p(c * exp(x))
            return (Softplus.kind, exp_call) if exp_call is not None else None
        if name not in LOGS:
            return None
        total = summed(flow, value)
        if total is not None:
            exp_call = exp_of(flow, total.args[0].value)
            return (LogSumExp.kind, exp_call) if exp_call is not None else None
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            for one, other in ((value.left, value.right), (value.right, value.left)):
                offset = number(flow, one)
                if offset is not UNKNOWN and offset > 0:  # log(1 + exp(x)), log(0.5 * exp(x) + 0.5)
                    exp_call = exp_of(flow, other)
                    return (Softplus.kind, exp_call) if exp_call is not None else None
        return None

    @staticmethod
    def _exp_itself(ctx: Context, value) -> Optional[cst.Call]:
        return exp_of(ctx.flow, value, factors=False)

    @staticmethod
    def _softmax(ctx: Context, top, bottom) -> Optional[Tuple[str, cst.Call]]:
        flow = ctx.flow
        if top is None or bottom is None:
            return None
        exp_call, total = exp_of(flow, top), summed(flow, bottom)
        if exp_call is None or total is None or exp_of(flow, total.args[0].value) is None:
            return None
        return UnstableSoftmax.kind, exp_call

    def _probe(self, ctx: Context, node, kind: str, exp_call: cst.Call) -> Formula:
        """The user's expression with the exp's input stood in by [100, 0]: the value the exp is
        taken of (`scores` in `exp(scores / t)`, the rest of the argument as written); when the
        exp is reached through a name (`e = tf.exp(x)`), that name is bound to exp of the stand-in."""
        inputs: List[Snippet] = []
        exp_inputs: List[Snippet] = []
        if ctx.encloses(node, exp_call):
            x = arg(exp_call, 0, "x")
            if x is not None:  # not `exp(*xs)`
                inputs.append(ctx.flow.snippet(self._variable(ctx, x)))
        else:
            held = [n for n in _names_in(node) if exp_of(ctx.flow, n) is exp_call]
            exp_inputs.extend(ctx.flow.snippet(n) for n in held[:1])
        return FORMULAS[kind](ctx.flow.snippet(node), tuple(inputs), tuple(exp_inputs))

    @staticmethod
    def _variable(ctx: Context, argument: cst.BaseExpression) -> cst.BaseExpression:
        """The first name or attribute in the exp's argument that is neither imported nor a
        known constant (the argument itself when there is none)."""
        for sub in walk(argument):
            if isinstance(sub, (cst.Name, cst.Attribute)) and ctx.qualify(sub) is None \
                    and ctx.flow.constant(sub) is UNKNOWN and not _inside_attribute(ctx, sub) \
                    and not isinstance(ctx.parent.get(sub), cst.Call):
                return sub
        return argument

    def _fix(self, ctx: Context, node, kind: str, exp_call: cst.Call) -> Optional[Fix]:
        if node in ctx.flow.written_as or not ctx.encloses(node, exp_call) \
                or any(a.star for a in exp_call.args) or len(exp_call.args) != 1:
            return None
        x = exp_call.args[0].value
        func = exp_call.func if kind == SqrtExp.kind else spelled(ctx.imports, STABLE[kind][0])
        if func is None:
            return None
        fixed: Optional[cst.Call]
        if kind == SqrtExp.kind:
            half = cst.BinaryOperation(cst.Float("0.5"), cst.Multiply(), parenthesized(x))
            fixed = cst.Call(func=func, args=(cst.Arg(half),))
        elif kind == Softplus.kind:
            fixed = cst.Call(func=func, args=(cst.Arg(x),)) if self._plain_softplus(ctx, node, exp_call) else None
        elif kind == LogSumExp.kind:
            fixed = self._reduced(ctx, node, func, x)
        else:
            fixed = self._softmax_fix(ctx, node, func, x)
        if fixed is None:
            return None
        return Fix(f"use `{ctx.text(fixed)}`", SAFE, ((node, fixed),))

    @staticmethod
    def _plain_softplus(ctx: Context, log: cst.CSTNode, exp_call: cst.Call) -> bool:
        """`log1p(exp(x))` or `log(1 + exp(x))` as written: only those are `softplus(x)`
        (`log(0.5 * exp(x) + 0.5)` is softplus shifted and scaled)."""
        inner = arg(log, 0, "x") if isinstance(log, cst.Call) else None
        if inner is exp_call:
            return ctx.call_name(log) in LOG1P
        return isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Add) and any(
            one is exp_call and ctx.flow.constant(other) == 1
            for one, other in ((inner.left, inner.right), (inner.right, inner.left)))

    @staticmethod
    def _reduced(ctx: Context, log: cst.Call, func, x) -> Optional[cst.Call]:
        """`log(reduce_sum(exp(x), axis, keepdims))` -> `reduce_logsumexp(x, axis, keepdims)`."""
        total = arg(log, 0, "x")
        if not (isinstance(total, cst.Call) and ctx.call_name(total) in SUMS and total.args
                and isinstance(total.args[0].value, cst.Call) and ctx.call_name(total.args[0].value) in EXP):
            return None
        return cst.Call(func=func, args=(cst.Arg(x), *total.args[1:]))

    @staticmethod
    def _softmax_fix(ctx: Context, division, func, x) -> Optional[cst.Call]:
        """`exp(x) / reduce_sum(exp(x), axis, keepdims=True)` on one plain input, a constant axis."""
        top, bottom = (division.left, division.right) if isinstance(division, cst.BinaryOperation) else (
            arg(division, 0, "x"), arg(division, 1, "y"))
        if not (isinstance(top, cst.Call) and isinstance(bottom, cst.Call) and ctx.call_name(bottom) in SUMS):
            return None
        inner = bottom.args[0].value if bottom.args else None
        if not isinstance(inner, cst.Call) or ctx.text(inner) != ctx.text(top) \
                or not isinstance(x, (cst.Name, cst.Attribute)):
            return None
        axis, keep = arg(bottom, 1, "axis"), arg(bottom, 2, "keepdims")
        if axis is None or ctx.flow.constant(axis) is UNKNOWN or ctx.flow.constant(keep) is not True:
            return None
        return cst.Call(func=func, args=(cst.Arg(x), cst.Arg(axis)))


def _inside_attribute(ctx: Context, node: cst.CSTNode) -> bool:
    """`self` or `x` in `self.x`: the attribute as a whole is the value."""
    return isinstance(ctx.parent.get(node), cst.Attribute)


def _names_in(node: cst.CSTNode) -> List[cst.Name]:
    return [n for n in walk(node) if isinstance(n, cst.Name)]
