"""CL014 nan-gradient-at-zero."""
from __future__ import annotations

from typing import Iterator, List, Optional

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import Report
from ..flow.carriers import same_value, trace
from ..flow.formulas import (
    DATA_WORDS,
    NORMS,
    SQRTS,
    SQUARES,
    TRAINING_WORDS,
    centring,
    difference,
    discarded,
    in_optimizer,
    in_pipeline,
    mentions,
    never_differentiated,
    only_from,
    only_stored,
    operands,
    pairwise,
    stopped,
    summed_values,
    weight,
)
from ..flow.nodes import MAX_DEPTH, arg, walk
from ..names import DIVIDES, MATMULS, MAXIMUMS, MEANS, MULTIPLIES, POWERS, STDS, SUMS, ZEROS_LIKE
from ..probes import NormAtZero, Snippet
from . import Invalid, Rule

# Functions that are zero where their input is, with a gradient there that does not cancel NaN.
ZERO_KEEPING = frozenset({"tensorflow.nn.relu", "keras.activations.relu", "keras.ops.relu", "tensorflow.abs",
                          "tensorflow.math.abs"})
SQUARED_DIFFERENCES = frozenset({"tensorflow.math.squared_difference", "tensorflow.squared_difference"})
# Names of values no gradient flows to, or norms taken for logging, clipping and constraints. Labels
# and masks are not among them: `labels - pred` is a loss; a value made of them alone is data
# (`formulas.DATA_WORDS`, which `only_from` asks of every name the value is computed from).
NOT_DIFFERENTIATED_WORDS = frozenset({"grad", "grads", "gradient", "gradients", "weight", "weights", "kernel",
                                      "variables", "params", "shape", "update", "updates", "delta", "deltas"})

LOGGING = ("tensorflow.summary.", "tensorflow.print", "tensorflow.debugging.", "tensorflow.clip_by_norm")
EUCLIDEAN = (None, 2, "euclidean", "fro")
# What a cosine multiplies: element-wise and matrix products.
PRODUCTS = MULTIPLIES | MATMULS | frozenset({"tensorflow.einsum", "keras.ops.dot", "keras.backend.dot",
                                             "keras.backend.batch_dot"})


class NanGradientAtZero(Rule):
    code = "CL014"
    name = "nan-gradient-at-zero"
    summary = "A Euclidean norm of a difference (or `x / norm(x)`) has a NaN gradient where its argument is zero."
    severity = "warning"
    tokens = (b"norm", b"sqrt", b"std")
    context_tokens = tuple(word.encode() for word in TRAINING_WORDS)  # a module that trains: see never_differentiated
    why = """
        The gradient of `sqrt` at 0 is infinite, and the gradient of a Euclidean norm at the zero
        vector is `0 / 0 = nan`: `tf.norm(v)` and `tf.sqrt(tf.reduce_sum(tf.square(v)))` at
        `[0., 0.]` have the value 0 and the gradient `[nan, nan]` (measured, TF 2.21). A norm of a
        difference `a - b` is zero whenever two points coincide; a pairwise distance of one set
        with itself (`r[:, None] - r[None, :]`) always has a zero diagonal, so every gradient is
        NaN (an error). `x / tf.norm(x)` is NaN at `x = 0`. A standard deviation is the norm of
        `x - mean(x)`: `tf.math.reduce_std` or `K.std` in a layer or a loss has a NaN gradient where
        its input is constant (`reduce_std([[1., 1., 1.]]) + 1e-5`: gradient `[[nan, nan, nan]]`,
        measured), an epsilon added after it does not help. One NaN gradient makes every weight NaN
        at the next step, and clipping cannot repair it. Only values gradients flow through are
        reported: not an input pipeline's (`Dataset.map`, `tf.py_function`), not under
        `tf.stop_gradient`, not of what Keras' `predict` returns (NumPy arrays: a nearest-neighbour
        search over embeddings), not norms of gradients or weights (logging, clipping, constraints).
    """
    example = """
        d = tf.norm(x[:, None, :] - x[None, :, :], axis=-1)   # pairwise distances
        u = v / tf.norm(v, axis=-1, keepdims=True)
    """
    instead = """
        d = tf.sqrt(tf.reduce_sum(tf.square(x[:, None, :] - x[None, :, :]), axis=-1) + 1e-12)
        u = tf.math.l2_normalize(v, axis=-1)   # or tf.math.divide_no_nan(v, tf.norm(v, ...))
    """
    VALID = [
        # the root of the product of the sums of squares, with its epsilon
        "import tensorflow as tf\ndef cos_mode(a, b):\n    sq_norm_1 = tf.reduce_sum(a ** 2, axis=-1)\n"
        "    sq_norm_2 = tf.reduce_sum(b ** 2, axis=-1)\n    dot = tf.reduce_sum(a * b, axis=-1)\n"
        "    return dot / tf.sqrt(sq_norm_1 * sq_norm_2 + 1e-12)\n"
        "with tf.GradientTape() as tape:\n    loss = cos_mode(x, y)\n",
        # a search over what `predict` returned: NumPy, no gradient
        "import tensorflow as tf\nall_embeddings = model.predict(dataset)\nmodel.fit(ds)\n"
        "def most_similar(batch):\n    new_emb = model.predict(batch)\n"
        "    return tf.sqrt(tf.reduce_sum((all_embeddings - new_emb) ** 2, -1)).numpy()\n",
        # an epsilon inside the square root
        "import tensorflow as tf\nd = tf.sqrt(tf.reduce_sum(tf.square(a - b), axis=-1) + 1e-12)\n",
        "import tensorflow as tf\nu = tf.math.l2_normalize(v, axis=-1)\nw = tf.math.divide_no_nan(v, tf.norm(v))\n",
        # the norm of gradients, for logging and clipping
        "import tensorflow as tf\ngrads = tape.gradient(loss, model.trainable_variables)\n"
        "gn = tf.norm(grads[0] - prev_grads[0])\n",
        # an input pipeline
        "import tensorflow as tf\ndef prep(x, y):\n    return x / tf.norm(x), y\n"
        "ds = tf.data.Dataset.from_tensor_slices((a, b)).map(prep)\n",
        # under stop_gradient, and NumPy
        "import tensorflow as tf\nimport numpy as np\nd = tf.stop_gradient(tf.norm(a - b))\n"
        "e = np.linalg.norm(a - b)\n",
        # weight normalisation of a variable, and a metric computed and thrown away (only named)
        "import tensorflow.compat.v1 as tf\nv = tf.get_variable('v', [4, 8])\n"
        "v = v / tf.norm(v, axis=0, keepdims=True)\n"
        "tf.reduce_mean(tf.norm(pred - gt, axis=1), name='epe')\n",
        # a script that differentiates nothing: the norm is a printed number
        "import tensorflow as tf\nerr = tf.norm(a - a_approx) ** 2\nprint(err)\n",
        # a random direction, normalised; a TF 1 evaluation op built after `minimize`
        "import tensorflow as tf\ndef noise(n):\n    u = tf.random.normal((n, 4))\n"
        "    return u / tf.sqrt(tf.reduce_sum(tf.square(u), axis=0))\n",
        "import tensorflow.compat.v1 as tf\ntrain_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)\n"
        "x_norm = x_embed / tf.sqrt(tf.reduce_sum(tf.square(x_embed)))\n",
        # made of ground truth and of what carries no gradient (argmax, one_hot)
        "import tensorflow as tf\ndef volume(prediction, ground_truth, eps=1e-3):\n"
        "    gt_red = tf.reduce_sum(tf.one_hot(ground_truth, 4), 0)\n"
        "    pred_red = tf.reduce_sum(tf.one_hot(tf.argmax(prediction, -1), 4), 0)\n"
        "    return tf.sqrt(tf.square((gt_red + eps) / (pred_red + eps) - (pred_red + eps) / (gt_red + eps)))\n",
        # an embedding variable a helper normalises for a similarity report (word2vec's nearest words)
        "import tensorflow as tf\ndef embed(n):\n    embedding = tf.Variable(tf.random.uniform([n, 8]))\n"
        "    return embedding, tf.nn.embedding_lookup(embedding, ids)\n"
        "def nearest(embedding):\n"
        "    unit = embedding / tf.sqrt(tf.reduce_sum(tf.square(embedding), 1, keepdims=True))\n"
        "    return tf.matmul(unit, tf.transpose(unit))\nembedding, looked_up = embed(100)\n"
        "similarity = nearest(embedding)\n",
        # an RMSE as a metric: nothing minimises it
        "import tensorflow as tf\ndef rmse(y_true, y_pred):\n"
        "    return tf.sqrt(tf.reduce_mean(tf.square(y_true - y_pred)))\n"
        "model.compile(optimizer='sgd', loss='mse', metrics=[rmse])\nmodel.fit(x, y)\n",
        # a norm raised to a power above 1: its gradient at zero is 0 (TransE's squared L2 score)
        "import tensorflow as tf\ndef score(h, r, t):\n    return tf.square(tf.norm(h + r - t, ord=2, axis=-1))\n"
        "def energy(a, b):\n    return tf.norm(a - b, axis=-1) ** 2 + tf.pow(tf.linalg.norm(a - b), 3)\n",
        # a standard deviation with its epsilon in a layer; one of data statistics, outside any layer
        "import keras\nfrom keras import ops\nclass Std(keras.layers.Layer):\n    def call(self, x):\n"
        "        v = ops.mean(ops.square(x - ops.mean(x, 0)), 0)\n        return ops.sqrt(ops.maximum(v, 0.0) + 1e-6)\n"
        "class Stats:\n    def spread(self, x):\n"
        "        return ops.sqrt(ops.mean(ops.square(x - ops.mean(x, 0)), 0))\n",
        # the norm of a single vector (not a difference)
        "import tensorflow as tf\nn = tf.norm(h, axis=-1)\n",
        # a cosine and a hand-written normalisation with their epsilon; a ratio of unrelated norms
        "import tensorflow as tf\ndef cosine(a, b):\n"
        "    return tf.reduce_sum(a * b, -1) / (tf.norm(a, axis=-1) * tf.norm(b, axis=-1) + 1e-8)\n"
        "def unit(v):\n    return v / tf.sqrt(tf.reduce_sum(tf.square(v), -1, keepdims=True) + 1e-12)\n"
        "def scaled(x, y):\n    return x / tf.norm(y)\n",
        # a magnitude written term by term, not divided by; a distance of points with its epsilon
        "import tensorflow as tf\ndef magnitude(real, imag):\n"
        "    return tf.tanh(tf.sqrt(tf.square(real) + tf.square(imag)))\n"
        "def distance(p, q):\n    dx, dy = p[:, 0] - q[:, 0], p[:, 1] - q[:, 1]\n"
        "    return tf.sqrt(dx ** 2 + dy ** 2 + 1e-12)\n",
        # a layer's moving statistic, only stored in a variable
        "import tensorflow as tf\nclass Running(tf.keras.layers.Layer):\n    def call(self, x):\n"
        "        new = tf.math.reduce_std(x - self.mean, axis=0)\n        new = 0.9 * new + 0.1 * self.var\n"
        "        tf.keras.backend.update(self.var, new)\n        return x / self.var\n",
        # a standard deviation of data, outside training; a layer's with the epsilon inside the square root
        "import tensorflow as tf\nfeatures = tf.constant(table)\nz = (features - tf.reduce_mean(features, 0)) / "
        "tf.math.reduce_std(features, 0)\n",
        "import tensorflow as tf\nclass InstanceNorm(tf.keras.layers.Layer):\n    def call(self, x):\n"
        "        std = tf.sqrt(tf.math.reduce_variance(x, [1, 2], keepdims=True) + 1e-5)\n"
        "        return (x - tf.reduce_mean(x, [1, 2], keepdims=True)) / std\n",
        # the magnitude of values less their mean (a complex batch norm's parts): not two points
        "import tensorflow as tf\ndef centred_magnitude(x):\n    c = x - tf.reshape(tf.reduce_mean(x, 0), (1, -1))\n"
        "    return tf.sqrt(tf.square(c[:, 0]) + tf.square(c[:, 1]))\n",
    ]
    INVALID = [
        # a complex number's phase: divided by its magnitude written term by term
        Invalid("import tensorflow as tf\ndef mask_processing(real, imag):\n"
                "    unit_real = tf.divide(real, tf.sqrt(tf.square(real) + tf.square(imag)))\n"
                "    return unit_real\n", 3, "norm of what it divides"),
        # a distance between points written term by term
        Invalid("import tensorflow as tf\ndef keypoint_loss(pred, target):\n"
                "    dx = pred[:, 0] - target[:, 0]\n    dy = pred[:, 1] - target[:, 1]\n"
                "    return tf.reduce_mean(tf.sqrt(dx ** 2 + dy ** 2))\n", 5, "sum of squares of a difference"),
        Invalid("import tensorflow as tf\ndef distances(r):\n"
                "    return tf.norm(r[:, None, :] - r[None, :, :], axis=-1)\n", 3, "diagonal", "error"),
        Invalid("import tensorflow as tf\ndef triplet(anchor, positive):\n    diff = anchor - positive\n"
                "    return tf.sqrt(tf.reduce_sum(tf.square(diff), axis=1))\n", 4, "NaN", "warning"),
        Invalid("import tensorflow as tf\nclass Head(tf.keras.layers.Layer):\n    def call(self, v):\n"
                "        return v / tf.norm(v, axis=-1, keepdims=True)\n", 4, "l2_normalize"),
        Invalid("import tensorflow as tf\nwith tf.GradientTape() as tape:\n"
                "    d = tf.sqrt(tf.reduce_sum((a - b) ** 2, -1))\n", 3),
        Invalid("import tensorflow as tf\ndef volume(gt, pred):\n"
                "    return tf.sqrt(tf.square(gt / pred - pred / gt))\n", 3),
        # one square root of the product of the two sums of squares
        Invalid("import tensorflow as tf\ndef cos_mode(a, b):\n    sq_norm_1 = tf.reduce_sum(a ** 2, axis=-1)\n"
                "    sq_norm_2 = tf.reduce_sum(b ** 2, axis=-1)\n    dot = tf.reduce_sum(a * b, axis=-1)\n"
                "    return dot / tf.sqrt(sq_norm_1 * sq_norm_2)\n"
                "with tf.GradientTape() as tape:\n    loss = cos_mode(x, y)\n", 6, "cosine"),
        Invalid("import tensorflow as tf\ndef cosine(x_n, x_k):\n    dots = tf.reduce_sum(x_n * x_k, -1)\n"
                "    return dots / (tf.norm(x_n, axis=-1) * tf.norm(x_k, axis=-1))\n", 4, "cosine"),
        # the norms of both sets multiplied out by a matrix product (a memory's content addressing)
        Invalid("import tensorflow as tf\ndef weightings(memory, keys):\n"
                "    numerator = tf.matmul(keys, memory, adjoint_b=True)\n"
                "    norm_m = tf.sqrt(tf.reduce_sum(tf.square(memory), axis=2, keepdims=True))\n"
                "    norm_k = tf.sqrt(tf.reduce_sum(tf.square(keys), axis=2, keepdims=True))\n"
                "    return numerator / tf.matmul(norm_k, norm_m, adjoint_b=True)\n", 6, "cosine"),
        Invalid("import tensorflow as tf\ndef unit(v):\n"
                "    n = tf.sqrt(tf.reduce_sum(tf.square(v), -1, keepdims=True))\n"
                "    return v / n\n", 4, "l2_normalize"),
        Invalid("import tensorflow as tf\ndef energy(xyz):\n    rij = tf.expand_dims(xyz, 1) - tf.expand_dims(xyz, 0)\n"
                "    return tf.reduce_sum(tf.linalg.norm(rij, axis=-1))\n", 4, "diagonal", "error"),
        # an RMSE that training minimises: a loss given to compile, a term of what `minimize` gets
        Invalid("import tensorflow as tf\nfrom tensorflow.keras import backend as K\ndef rmse(y_true, y_pred):\n"
                "    return K.sqrt(K.mean(K.square(y_true - y_pred)))\n"
                "model.compile(optimizer='sgd', loss=rmse)\n", 4),
        # a standard deviation per node of a graph: segment sums, floored by zeros_like
        Invalid("import keras\nfrom keras import ops\nclass Std(keras.layers.Layer):\n"
                "    def call(self, m, idx, n):\n"
                "        count = ops.segment_sum(data=ops.ones_like(m), segment_ids=idx, num_segments=n)\n"
                "        mean = ops.segment_sum(data=m, segment_ids=idx, num_segments=n) / count\n"
                "        d = ops.square(m - ops.take(mean, idx, axis=0))\n"
                "        var = ops.segment_sum(data=d, segment_ids=idx, num_segments=n) / count\n"
                "        return ops.sqrt(ops.maximum(var, ops.zeros_like(var)))\n", 9, "standard deviation"),
        # a standard deviation written out in a layer's forward pass: sum / count, floored at zero
        Invalid("import keras\nfrom keras import ops\nclass StdAggregator(keras.layers.Layer):\n"
                "    def call(self, messages, count):\n"
                "        mean = ops.expand_dims(ops.sum(messages, 0) / count, 0)\n"
                "        variance = ops.sum(ops.square(messages - mean), axis=0) / count\n"
                "        return ops.sqrt(ops.maximum(variance, 0.0))\n", 7, "standard deviation"),
        Invalid("import tensorflow as tf\nrmse = tf.sqrt(tf.reduce_mean(tf.squared_difference(pred, labels)))\n"
                "train_op = tf.train.AdamOptimizer(0.01).minimize(rmse + 0.01 * tf.nn.l2_loss(w))\n", 2),
        # adaptive instance normalisation: a library standard deviation, the epsilon outside it
        Invalid("from tensorflow import keras\nfrom tensorflow.keras import backend as K\n"
                "class AdaIN(keras.layers.Layer):\n    def call(self, inputs):\n"
                "        mean = K.mean(inputs[0], [1, 2], keepdims=True)\n"
                "        stddev = K.std(inputs[0], [1, 2], keepdims=True) + 1e-3\n"
                "        return (inputs[0] - mean) / stddev * inputs[2] + inputs[1]\n", 6, "standard deviation"),
        # a masked reconstruction error: the product is zero wherever the difference is
        Invalid("import tensorflow as tf\nloss = tf.norm(tf.multiply(ratings - decoded, mask))\n"
                "train_op = tf.train.AdamOptimizer(0.01).minimize(loss)\n", 2),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.refers_to(NORMS | SQRTS | STDS)  # a norm, `sqrt`, `x / norm(x)`, a standard deviation

    def check(self, ctx: Context) -> Iterator[Report]:
        for node in ctx.nodes(cst.Call, cst.BinaryOperation):
            found = self._finding(ctx, node)
            if found is None or self._excluded(ctx, node, found[1]) or (found[0] != "normalise" and raised(ctx, node)):
                continue
            kind, inner, base = found
            pair = base is not None
            probe = NormAtZero(ctx.flow.snippet(node), tuple(self._inputs(ctx, node, kind, inner, base)),
                               setup=self._setup(ctx, node) if kind == "normalise" else None,
                               pairwise=pair, normalise=kind == "normalise", constant=kind == "library std")
            yield Report(node, self._message(kind, pair), severity="error" if pair else "warning", probe=probe)

    def _finding(self, ctx: Context, node):
        """(what, the value whose zero is singular, pairwise?) for a norm of a difference, a square
        root of a sum of its squares, or `x / norm(x)`."""
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Divide) and self._norm_of(ctx, node.right, node.left):
                return "normalise", node.left, None
            return None
        name = ctx.call_name(node)
        if name in DIVIDES and self._norm_of(ctx, arg(node, 1, "y"), arg(node, 0, "x")):
            return "normalise", arg(node, 0, "x"), None
        if name in NORMS and self._euclidean(ctx, node):
            diff = difference(ctx.flow, arg(node, 0, "tensor"))
            return ("norm", diff, pairwise(ctx.flow, diff)) if diff is not None else None
        if name in STDS and ctx.flow.in_forward_pass(node):
            value = arg(node, 0, "input_tensor") or arg(node, 0, "x")
            return ("library std", value, None) if value is not None else None
        if name in SQRTS:
            inside = arg(node, 0, "x")
            diff, kind = self._summed_squares(ctx, inside) or _added_differences(ctx, inside), "sqrt"
            if diff is None and ctx.flow.trained_on(node):  # an RMSE that training minimises
                diff, kind = self._summed_squares(ctx, inside, means=True), "rmse"
            elif diff is None and ctx.flow.in_forward_pass(node):  # a standard deviation a layer computes
                diff, kind = self._summed_squares(ctx, inside, means=True), "std"
            return (kind, diff, pairwise(ctx.flow, diff)) if diff is not None else None
        return None

    def _norm_of(self, ctx: Context, denominator, numerator) -> bool:
        """Is `denominator` a Euclidean norm (`tf.norm`, or `sqrt` of a sum of squares, no epsilon)
        of what `numerator` is made of, through every carrier: `x / norm(x)`, and the cosine
        `reduce_sum(a * b) / (norm(a) * norm(b))`, a factor of the product at a time?"""
        if denominator is None or numerator is None:
            return False
        made_of = [numerator, *self._factors(ctx, numerator)]

        def normed(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
            if isinstance(value, cst.Call) and ctx.call_name(value) in NORMS and self._euclidean(ctx, value):
                tensor = arg(value, 0, "tensor")
            elif isinstance(value, cst.Call) and ctx.call_name(value) in SQRTS:
                inside = arg(value, 0, "x")
                # one root of the product of both sums of squares: `sqrt(sum(a * a) * sum(b * b))`
                product = ctx.flow.value_of(inside) if inside is not None else None
                sides = [product.left, product.right] if isinstance(product, cst.BinaryOperation) \
                    and isinstance(product.operator, cst.Multiply) else [inside]
                squared = [t for side in sides for t in (
                    self._summed_squares(ctx, side, differences=False), *_squares_added(ctx, side))]
                return next((t for t in squared if t is not None
                             and any(same_value(ctx.flow, t, m) for m in made_of)), None)
            else:
                return None
            return tensor if tensor is not None and any(same_value(ctx.flow, tensor, m) for m in made_of) else None

        def factors(value: cst.BaseExpression) -> List[cst.BaseExpression]:
            products = (cst.Multiply, cst.MatrixMultiply)
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, products):
                return [value.left, value.right]
            if isinstance(value, cst.Call) and ctx.call_name(value) in PRODUCTS:  # matmul(norm_k, norm_m): all pairs
                return [a.value for a in value.args if a.keyword is None]
            return [value.value] if isinstance(value, cst.Subscript) else []  # norm[:, None]
        return trace(ctx.flow, denominator, normed, factors) is not None

    @staticmethod
    def _factors(ctx: Context, numerator: cst.BaseExpression) -> List[cst.BaseExpression]:
        """The factors of the products written in `numerator` (`a * b`, `matmul(a, b)`): what a
        cosine similarity divides by the norms of."""
        found: List[cst.BaseExpression] = []
        for node in (*walk(numerator), *walk(ctx.flow.value_of(numerator))):
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
                found += [node.left, node.right]
            elif isinstance(node, cst.Call) and ctx.call_name(node) in PRODUCTS:
                found += [a.value for a in node.args if a.keyword is None and not isinstance(a.value, cst.SimpleString)]
        return found

    @staticmethod
    def _euclidean(ctx: Context, norm: cst.Call) -> bool:
        order = arg(norm, 1, "ord")
        return order is None or ctx.flow.constant(order) in EUCLIDEAN

    @staticmethod
    def _summed_squares(ctx: Context, expr, differences: bool = True, means: bool = False):
        """The difference in `reduce_sum(square(a - b))`, `reduce_sum((a - b) ** 2)`, `reduce_sum(d * d)`,
        `reduce_sum(squared_difference(a, b))`, or a square with no sum (`sqrt(square(a - b))`),
        through every carrier and what keeps a zero zero (`relu`, `abs`): no epsilon added. A mean
        of them (a standard deviation, an RMSE) only with `means`: in real code it is mostly a
        statistic no gradient flows through, so the caller asks that training minimises it. With
        `differences` False, the squared value itself, a difference or not."""
        reductions = SUMS | MEANS if means else SUMS

        def reduced(value: cst.BaseExpression) -> Optional[cst.Call]:
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide) and means:
                return reduced(ctx.flow.value_of(value.left))  # sum(...) / count: a mean written out
            return value if isinstance(value, cst.Call) and summed_values(ctx.flow, value, reductions) is not None \
                else None

        def is_zero(bound: cst.BaseExpression) -> bool:  # 0, or zeros_like(...)
            return ctx.flow.constant(bound) == 0 or ctx.call_name(ctx.flow.value_of(bound)) in ZEROS_LIKE

        def keeps_zero(value: cst.BaseExpression) -> List[cst.BaseExpression]:
            if isinstance(value, cst.Call) and ctx.call_name(value) in ZERO_KEEPING and value.args:
                return [value.args[0].value]
            if isinstance(value, cst.Call) and ctx.call_name(value) in MAXIMUMS and len(value.args) == 2 \
                    and is_zero(value.args[1].value):  # maximum(v, 0): rounding kept from below 0
                return [value.args[0].value]
            return []
        total = trace(ctx.flow, expr, reduced, keeps_zero)
        # sqrt(square(d)) with no sum is |d|: as singular
        squares = summed_values(ctx.flow, total, reductions) if total is not None else expr
        if squares is None:
            return None
        base = trace(ctx.flow, squares, lambda value: _squared(ctx, value))
        if base is None or (isinstance(base, cst.Call) and ctx.call_name(base) in SQUARED_DIFFERENCES):
            return base  # squared_difference(a, b) is the square of a difference itself
        return difference(ctx.flow, base) if differences else base

    @staticmethod
    def _excluded(ctx: Context, node, inner) -> bool:
        """No gradient flows here: an input pipeline, `stop_gradient`, gradients, weights, labels,
        masks; or the norm is only logged, clipped or kept in a variable. The names are a guess, which a value training
        is shown to minimise (`Flow.trained_on`) overrides: `sqrt(mean(square(pred - labels)))` minimised."""
        guessed = mentions(inner, NOT_DIFFERENTIATED_WORDS) and not ctx.flow.trained_on(node)
        if in_pipeline(ctx.flow, node) or stopped(ctx.flow, node) or guessed \
                or only_from(ctx.flow, inner, NOT_DIFFERENTIATED_WORDS | DATA_WORDS) \
                or discarded(ctx.flow, node) or only_stored(ctx.flow, node) or weight(ctx.flow, inner) \
                or in_optimizer(ctx.flow, node) or never_differentiated(ctx.flow, node):
            return True
        for outer in ctx.ancestors(node):
            if isinstance(outer, cst.Call) and (ctx.call_name(outer) or "").startswith(LOGGING):
                return True
        return False

    @staticmethod
    def _inputs(ctx: Context, node, kind: str, inner, base) -> list:
        """The snippets the probe binds to its stand-in, as the expression writes them: the set of a
        pairwise difference, both sides of a difference (the same point), the name holding the
        difference, the factors of a cosine, or the normalised value; and every component of a
        sum of squares written term by term (`re` and `im` of `sqrt(re ** 2 + im ** 2)`)."""
        found = NanGradientAtZero._singular(ctx, node, kind, inner, base)
        components = [c for sqrt in walk(node) if isinstance(sqrt, cst.Call) and ctx.call_name(sqrt) in SQRTS
                      for c in _squares_added(ctx, arg(sqrt, 0, "x"))
                      if isinstance(c, (cst.Name, cst.Attribute)) and ctx.encloses(node, c)]
        written = {snippet.code for snippet in found}
        return found + [ctx.flow.snippet(c) for c in components if ctx.text(c) not in written]

    @staticmethod
    def _singular(ctx: Context, node, kind: str, inner, base) -> list:
        """`_inputs` but the components."""
        factors = [f for f in NanGradientAtZero._factors(ctx, inner) if isinstance(f, (cst.Name, cst.Attribute))
                   and ctx.encloses(node, f)] if kind == "normalise" else []
        if factors:
            return [ctx.flow.snippet(f) for f in factors]
        if not ctx.encloses(node, inner):
            held = [n for n in walk(node) if isinstance(n, cst.Name) and ctx.flow.value_of(n) is inner]
            return [ctx.flow.snippet(held[0])] if held else []
        if base is not None:
            return [ctx.flow.snippet(base)]
        if difference(ctx.flow, inner) is inner:
            return [ctx.flow.snippet(side) for side in operands(inner) if side is not None]
        return [ctx.flow.snippet(inner)]

    @staticmethod
    def _setup(ctx: Context, division) -> Optional[Snippet]:
        """The assignment of the name a division's denominator reads (`n = tf.norm(v)`; `v / n`),
        replayed by the probe before the division."""
        denominator = division.right if isinstance(division, cst.BinaryOperation) else arg(division, 1, "y")
        if not isinstance(denominator, cst.Name):
            return None
        assign = ctx.parent.get(ctx.flow.value_of(denominator))
        return ctx.flow.snippet(assign) if isinstance(assign, cst.Assign) else None

    @staticmethod
    def _message(kind: str, pair: bool) -> str:
        if kind == "normalise":
            return ("a division by the norm of what it divides (`x / norm(x)`, a cosine `a.b / (norm(a) * norm(b))`) "
                    "is NaN at zero, in value and gradient (measured: `[0, 0]` gives NaN). Use "
                    "`tf.math.l2_normalize(x, axis)` or `tf.math.divide_no_nan`.")
        if kind == "library std":
            return ("a standard deviation (`tf.math.reduce_std`, `K.std`) that training differentiates has a NaN "
                    "gradient where its input is constant (a dead ReLU channel, a padded row; measured: "
                    "`tf.math.reduce_std([[1., 1., 1.]]) + 1e-5` has gradient `[[nan, nan, nan]]`), whatever is "
                    "added after it. Put the epsilon inside the square root: "
                    "`tf.sqrt(tf.math.reduce_variance(x, axis) + 1e-5)`.")
        what = {"norm": "the norm", "rmse": "the root mean square (a loss training minimises)",
                "std": "the standard deviation (the root mean square) in a layer's forward pass"}.get(
            kind, "the square root of the sum of squares")
        if pair:
            return (f"{what} of a pairwise difference of one set with itself: its diagonal is always zero, where the "
                    "gradient of a Euclidean norm is NaN (measured: every gradient NaN), so the first step makes every "
                    "weight NaN. Add an epsilon inside the square root: "
                    "`tf.sqrt(tf.reduce_sum(tf.square(d), axis) + 1e-12)`.")
        return (f"{what} of a difference: where the two points coincide its gradient is NaN (measured: `tf.norm` at "
                "`[0, 0]` has gradient `[nan, nan]`), and one NaN gradient makes every weight NaN. Add an epsilon "
                "inside the square root: `tf.sqrt(tf.reduce_sum(tf.square(d), axis) + 1e-12)`.")


def raised(ctx: Context, norm: cst.BaseExpression) -> bool:
    """Is the norm raised to a power above 1 where it is made (`tf.square(tf.norm(d))`,
    `tf.norm(d) ** 2`, `tf.pow(n, 3)`, `n * n`)? Then its gradient at zero is 0, not NaN
    (measured, TF 2.21: `p * n ** (p - 1)` is 0 there and TF's norm gradient keeps it 0)."""
    parent = ctx.parent.get(norm)
    if isinstance(parent, cst.Arg):
        call = ctx.parent.get(parent)
        if not isinstance(call, cst.Call) or not call.args or call.args[0] is not parent:
            return False
        name = ctx.call_name(call)
        if name in SQUARES:
            return True
        exponent = arg(call, 1, "y") if name in POWERS else None
        return exponent is not None and _above_one(ctx.flow.constant(exponent))
    if isinstance(parent, cst.BinaryOperation) and parent.left is norm:
        if isinstance(parent.operator, cst.Power):
            return _above_one(ctx.flow.constant(parent.right))
        return isinstance(parent.operator, cst.Multiply) and same_value(ctx.flow, parent.left, parent.right)
    return False


def _above_one(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1


def _squares_added(ctx: Context, expr: Optional[cst.BaseExpression]) -> List[cst.BaseExpression]:
    """What each term of a sum of squares written term by term is the square of (`square(re) +
    square(im)`, `dx ** 2 + dy ** 2`: a squared norm with no reduction, through every carrier);
    [] unless every term of two or more is a square (`+ eps` is not)."""
    terms: List[cst.BaseExpression] = []
    pending = [expr] if expr is not None else []
    while pending and len(terms) <= MAX_DEPTH:
        value = ctx.flow.value_of(pending.pop())
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            pending += [value.right, value.left]
            continue
        base = trace(ctx.flow, value, lambda v: _squared(ctx, v))
        if base is None:
            return []
        terms.append(base)
    return terms if len(terms) > 1 and not pending else []


def _added_differences(ctx: Context, expr: Optional[cst.BaseExpression]) -> Optional[cst.BaseExpression]:
    """The first difference of a sum of squares of differences written term by term (`sqrt((x1 -
    x2) ** 2 + (y1 - y2) ** 2)`, a distance between points: zero where they coincide). Not of
    values less their means (the real and imaginary parts out of a batch norm): a magnitude."""
    differences = [difference(ctx.flow, base) for base in _squares_added(ctx, expr)]
    points = differences and all(d is not None and not centring(ctx.flow, d) for d in differences)
    return differences[0] if points else None


def _squared(ctx: Context, value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """What `value` is the square of: `square(d)`, `d ** 2`, `pow(d, 2)`, `d * d`, `multiply(d, d)`; a
    `squared_difference(a, b)` call stands for its own difference."""
    name = ctx.call_name(value)
    if name in SQUARED_DIFFERENCES:
        return value
    if name in SQUARES and isinstance(value, cst.Call) and value.args:
        return value.args[0].value
    if name in POWERS and isinstance(value, cst.Call) and len(value.args) >= 2 \
            and ctx.flow.constant(value.args[1].value) == 2:
        return value.args[0].value
    if name in MULTIPLIES and isinstance(value, cst.Call) and len(value.args) >= 2 \
            and same_value(ctx.flow, value.args[0].value, value.args[1].value):
        return value.args[0].value
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, cst.Power) and ctx.flow.constant(value.right) == 2:
            return value.left
        if isinstance(value.operator, cst.Multiply) and same_value(ctx.flow, value.left, value.right):
            return value.left
    return None
