"""CL004 log-of-softmax."""
from __future__ import annotations

from typing import Iterator

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import Report
from ..flow.nodes import arg
from ..flow.probabilities import Source
from ..names import SIGMOID, SOFTMAX
from . import Invalid, Rule

LOGS = {"tensorflow.math.log", "keras.backend.log", "keras.ops.log", "tensorflow.experimental.numpy.log"}
SAMPLERS = {"tensorflow.random.categorical", "tensorflow.random.stateless_categorical"}
class LogOfSoftmax(Rule):
    code = "CL004"
    name = "log-of-softmax"
    summary = "`log` is applied to a softmax (or sigmoid) output instead of using `log_softmax`."
    severity = "error"
    tokens = (b"softmax", b"sigmoid", b"Softmax")
    why = """
        `softmax` underflows to exactly 0 for a class whose logit is far below the largest one,
        and `log(0)` is `-inf`. In float32 this happens once the logit gap passes about 87
        (float16: wrong from a gap of about 16, `-inf` from 18), so a confident model produces
        `-inf` losses and NaN gradients; a hand-written `-sum(y * log(softmax(x)))` is NaN even
        for the correctly predicted class (`0 * -inf`). Adding an epsilon or clipping the
        probabilities hides the `-inf` but saturates: the gradient through the clipped entries
        is zero, so the model stops learning from exactly the examples it gets most wrong.
        `tf.nn.log_softmax` computes the same quantity exactly at every gap.

        The same holds for `log(sigmoid(x))` (use `tf.math.log_sigmoid(x)`) and
        `log(1 - sigmoid(x))` (use `tf.math.log_sigmoid(-x)`).
    """
    example = """
        probs = tf.nn.softmax(logits)
        loss = -tf.reduce_sum(labels * tf.math.log(probs + 1e-9), axis=-1)
    """
    instead = """
        loss = -tf.reduce_sum(labels * tf.nn.log_softmax(logits), axis=-1)
        # or: tf.keras.losses.CategoricalCrossentropy(from_logits=True)(labels, logits)
    """
    VALID = [
        "import tensorflow as tf\nloss = -tf.reduce_sum(y * tf.nn.log_softmax(logits), axis=-1)\n",
        # log of something not shown to come from a softmax
        "import tensorflow as tf\nstd = tf.exp(log_std)\nnll = tf.math.log(std) + 0.5\n",
        # sampling: no gradient flows through it, and -inf is the right logit
        "import tensorflow as tf\nprobs = tf.nn.softmax(logits)\n"
        "action = tf.random.categorical(tf.math.log(probs), 1)\n",
        # NumPy and PyTorch look-alikes
        "import numpy as np\nimport torch\np = torch.softmax(x, dim=-1)\nlp = torch.log(p)\n"
        "q = np.log(np.exp(x) / np.exp(x).sum())\n",
        # a name rebound to logits before the log
        "import tensorflow as tf\np = tf.nn.softmax(x)\np = model(x)\nlp = tf.math.log(p)\n",
        # a user's own softmax
        "import tensorflow as tf\ndef softmax(x):\n    return x\nlp = tf.math.log(softmax(x))\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n", 2, "log_softmax"),
        Invalid("import tensorflow as tf\n"
                "def loss_fn(y, logits):\n    probs = tf.nn.softmax(logits)\n"
                "    return -tf.reduce_sum(y * tf.math.log(probs + 1e-9), axis=-1)\n", 4, "epsilon"),
        Invalid("from tensorflow.keras import backend as K\nlp = K.log(K.clip(K.softmax(x), 1e-7, 1.0))\n", 2),
        Invalid("import tensorflow as tf\n"
                "probs = tf.nn.softmax(logits)\n"
                "picked = tf.reduce_sum(probs * tf.one_hot(actions, n), axis=-1)\n"
                "loss = -tf.reduce_mean(tf.math.log(picked) * advantages)\n", 4),
        Invalid("import tensorflow as tf\nfrom tensorflow.keras import layers\n"
                "out = layers.Dense(10, activation='softmax')(h)\nlp = tf.math.log(out)\n", 4),
        Invalid("import tensorflow as tf\n"
                "class Actor(tf.keras.Model):\n"
                "    def call(self, x):\n        return tf.nn.softmax(self.d(x))\n"
                "actor = Actor()\n"
                "def loss(states, a):\n    p = actor(states)\n"
                "    return -tf.math.log(tf.gather(p, a, batch_dims=1))\n", 8),
        Invalid("import tensorflow as tf\np = tf.sigmoid(z)\n"
                "bce = -(y * tf.math.log(p) + (1 - y) * tf.math.log(1 - p))\n",
                3, "log_sigmoid"),
        Invalid("import keras\nfrom keras import ops\nlp = ops.log(keras.activations.softmax(x))\n", 3),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.has("log") and facts.has("softmax", "sigmoid", "Softmax")

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            if ctx.call_name(call) not in LOGS or self._feeds_sampling(ctx, call):
                continue
            source = ctx.flow.probability(arg(call, 0, "x"))
            if source is not None:
                yield Report(call, self._message(*source), probe=self._probe(ctx, call, source))

    @staticmethod
    def _message(kind: str, node: cst.CSTNode, padded: bool) -> str:
        hidden = (" The epsilon or clip hides the -inf but makes the gradient vanish for the entries it "
                  "touches." if padded else "")
        if kind == "softmax":
            return ("log of a softmax output: in float32 it is -inf once the logit gap passes about 87 "
                    "(float16: wrong from about 16) and the gradient becomes NaN." + hidden +
                    " Use `tf.nn.log_softmax(logits)` or a `from_logits=True` loss.")
        fix = "tf.math.log_sigmoid(-x)" if kind == "1-sigmoid" else "tf.math.log_sigmoid(x)"
        return (f"log of a sigmoid output: the sigmoid underflows to {'1' if kind == '1-sigmoid' else '0'} "
                f"for large logits, giving -inf and NaN gradients.{hidden} Use `{fix}` or "
                f"`tf.nn.sigmoid_cross_entropy_with_logits`.")

    def _probe(self, ctx: Context, call: cst.Call, source: Source) -> dict:
        kind, node, padded = source
        direct = isinstance(node, cst.Call) and ctx.call_name(node) in SOFTMAX | SIGMOID
        return {"kind": kind, "padded": padded, "log": ctx.flow.snippet(call),
                "source": ctx.flow.snippet(node) if direct else None}

    def _feeds_sampling(self, ctx: Context, call: cst.Call) -> bool:
        parent = ctx.parent.get(call)
        if isinstance(parent, cst.Arg):
            return ctx.call_name(ctx.parent.get(parent)) in SAMPLERS
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 \
                and isinstance(parent.targets[0].target, cst.Name):
            uses = ctx.flow.uses_after(parent.targets[0].target.value, parent)
            return bool(uses) and all(
                isinstance(ctx.parent.get(u), cst.Arg) and ctx.call_name(ctx.parent.get(ctx.parent.get(u))) in SAMPLERS
                for u in uses)
        return False
