"""CL013 single-unit-softmax."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import UNSAFE, Fix, Report
from ..flow.nodes import arg
from ..flow.probabilities import activation_of
from ..names import LAYER_FUNCTION_UNITS, LOGITS_OPS, SEQUENCE_LOSSES, SEQUENTIAL, SOFTMAX, logits_position
from ..probes import SingleUnit
from . import Invalid, Rule

SOFTMAX_LAYERS = ("keras.layers.Softmax", "keras.layers.Activation")
# Every report starts at a Dense layer or a softmax (a function, or a layer applied)
# The ops that apply a softmax to the logits they are given (not the sequence losses: a vocabulary).
SOFTMAX_LOSSES = frozenset(op for op, kind in LOGITS_OPS.items() if kind == "softmax" and op not in SEQUENCE_LOSSES)
GATE = frozenset({"keras.layers.Dense", *LAYER_FUNCTION_UNITS, *SOFTMAX_LAYERS, *SOFTMAX, *SOFTMAX_LOSSES})

MESSAGE = ("softmax over an axis of size one: its output is 1 for every input (measured: 0.99999994), so the "
           "model learns nothing; Keras 3 warns only at run time. Use a sigmoid with a binary loss, or two units "
           "with softmax (for a one-unit attention score, the softmax over the positions: `axis=1`).")


LOSS_MESSAGE = ("`{op}` applies a softmax over the last axis of its `logits`, here of size one: the loss and its "
                "gradient are 0 for every prediction (measured), and a label of 1 raises `Received a label value "
                "of 1 which is outside the valid range of [0, 1)`, so the model learns nothing. Use "
                "`tf.nn.sigmoid_cross_entropy_with_logits` for a binary target, or two units.")


def _shown(op: str) -> str:
    return op.replace("tensorflow.losses.", "tf.compat.v1.losses.").replace("tensorflow.", "tf.")


class SingleUnitSoftmax(Rule):
    code = "CL013"
    name = "single-unit-softmax"
    summary = "A softmax over an axis of size one (`Dense(1, activation=\"softmax\")`): its output is always 1."
    severity = "error"
    tokens = (b"softmax", b"Softmax")
    why = """
        Softmax normalises over its axis: over a single unit, `exp(x) / exp(x)` is 1 whatever `x`
        is. `Dense(1, activation="softmax")` outputs 0.99999994 for every input, the loss is
        constant, and three epochs of SGD with `binary_crossentropy` moved the weights by at most
        0.008 (noise). Keras 3 warns only at run time, inside the training log ("You are using a
        softmax over axis -1 of a tensor of shape (None, 1)"). The same holds for a loss that applies
        the softmax itself to one-unit logits (`tf.nn.sparse_softmax_cross_entropy_with_logits`,
        TF 1's `tf.losses.sparse_softmax_cross_entropy`): measured, the loss and its gradient are 0
        for every prediction, and a label of 1 raises `InvalidArgumentError`.
    """
    example = """
        model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu"),
                                     tf.keras.layers.Dense(1, activation="softmax")])
        model.compile(loss="binary_crossentropy")
    """
    instead = """
        model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu"),
                                     tf.keras.layers.Dense(1, activation="sigmoid")])
        model.compile(loss="binary_crossentropy")
    """
    fixes = """
        **Unsafe**: `activation="softmax"` on a one-unit `Dense` becomes `activation="sigmoid"`;
        right with a binary loss, but the loss must be one (a categorical loss over one unit is
        still constant).
    """
    VALID = [
        "import tensorflow as tf\nout = tf.keras.layers.Dense(1, activation='sigmoid')(h)\n",
        "import tensorflow as tf\nout = tf.keras.layers.Dense(2, activation='softmax')(h)\n",
        # softmax over the other axis of a one-unit score: attention pooling over time
        "import tensorflow as tf\nscores = tf.keras.layers.Dense(1)(h)\nweights = tf.nn.softmax(scores, axis=1)\n",
        "import tensorflow as tf\nscore = tf.layers.dense(h, 1)\nweights = tf.nn.softmax(score, axis=1)\n"
        "gate = tf.layers.dense(h, 1, tf.nn.sigmoid)\n",
        "import tensorflow as tf\nlogit = tf.layers.dense(h, 1)\n"
        "loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logit)\n"
        "xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=tf.layers.dense(h, 10))\n",
        "import torch\nout = torch.softmax(torch.nn.Linear(8, 1)(h), dim=-1)\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\nout = tf.keras.layers.Dense(1, activation='softmax')(h)\n", 2, "sigmoid"),
        Invalid("from tensorflow import keras\nmodel = keras.Sequential([keras.layers.Dense(8, activation='relu'),\n"
                "    keras.layers.Dense(1), keras.layers.Activation('softmax')])\n", 3),
        Invalid("import tensorflow as tf\nlogit = tf.keras.layers.Dense(1)(h)\np = tf.nn.softmax(logit)\n", 3),
        # TF 1's layer function: an attention score of one unit, normalised over that unit
        Invalid("import tensorflow as tf\nscore = tf.layers.dense(tf.tanh(keys + query), 1)\n"
                "alignment = tf.nn.softmax(score)\n", 3),
        Invalid("import tensorflow as tf\np = tf.compat.v1.layers.dense(h, 1, tf.nn.softmax)\n", 2),
        # a loss that applies the softmax itself, over one unit
        Invalid("import tensorflow.compat.v1 as tf\ncollector = tf.layers.dense(inputs=h, units=1)\n"
                "loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=collector)\n", 3,
                "the loss and its gradient are 0 for every prediction"),
        Invalid("import tensorflow as tf\nunits = 1\nout = tf.keras.layers.Dense(units, 'softmax')(h)\n", 3),
        Invalid("from tensorflow.keras import layers, models\nmodel = models.Sequential()\n"
                "model.add(layers.Dense(1))\nmodel.add(layers.Activation('softmax'))\n", 4),
        Invalid("from functools import partial\nfrom tensorflow import keras\n"
                "Out = partial(keras.layers.Dense, activation='softmax')\nout = Out(1)(h)\n", 4),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.refers_to(GATE)

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            name = ctx.flow.called_name(call)
            if name == "keras.layers.Dense" and self._one_unit(ctx, ctx.flow.bound(call)) \
                    and activation_of(ctx.flow, call) == "softmax":
                yield Report(call, MESSAGE, probe=self._probe(ctx, call), fix=self._fix(ctx, call))
            elif name in LAYER_FUNCTION_UNITS and self._one_unit(ctx, call) \
                    and activation_of(ctx.flow, call) == "softmax":
                yield Report(call, MESSAGE, probe=SingleUnit())  # TF 1's `tf.layers.dense(h, 1, tf.nn.softmax)`
            elif name in SEQUENTIAL:
                yield from self._sequential(ctx, call)
            elif self._softmax_of_one_unit(ctx, call):
                yield Report(call, MESSAGE, probe=SingleUnit())
            elif name in SOFTMAX_LOSSES and self._one_unit_output(ctx, arg(call, logits_position(name), "logits")):
                yield Report(call, LOSS_MESSAGE.format(op=_shown(name)), probe=SingleUnit())

    @staticmethod
    def _one_unit(ctx: Context, dense: cst.Call) -> bool:
        """`Dense(1)`, or TF 1's `tf.layers.dense(h, 1)` (a layer function: its inputs come first)."""
        units = LAYER_FUNCTION_UNITS.get(ctx.call_name(dense) or "", (0, "units"))
        return ctx.flow.constant(arg(dense, *units)) == 1

    def _probe(self, ctx: Context, layer: cst.Call) -> SingleUnit:
        return SingleUnit(ctx.flow.snippet(ctx.flow.bound(layer)))  # a partial run as the library sees it

    def _sequential(self, ctx: Context, call: cst.Call) -> Iterator[Report]:
        """`Sequential([..., Dense(1), Activation("softmax")])`, or the same layers added one
        after the other (`model.add(Dense(1))`, `model.add(Activation("softmax"))`)."""
        layers = arg(call, 0, "layers")
        if isinstance(layers, (cst.List, cst.Tuple)):
            values = [e.value for e in layers.elements]
        elif layers is None:
            values = ctx.flow.probabilities.added_layers(call)
        else:
            return
        for before, after in zip(values, values[1:]):
            if isinstance(before, cst.Call) and isinstance(after, cst.Call) \
                    and ctx.call_name(before) == "keras.layers.Dense" and self._one_unit(ctx, before) \
                    and activation_of(ctx.flow, before) is None \
                    and ctx.call_name(after) in SOFTMAX_LAYERS \
                    and activation_of(ctx.flow, after) == "softmax":
                yield Report(after, MESSAGE, probe=SingleUnit())

    def _softmax_of_one_unit(self, ctx: Context, call: cst.Call) -> bool:
        """`tf.nn.softmax(Dense(1)(h))` over the last axis, or `Softmax()(...)` of it."""
        if ctx.call_name(call) in SOFTMAX:
            axis = arg(call, 1, "axis")
            if axis is not None and ctx.flow.constant(axis) not in (-1,):
                return False
        else:
            layer = ctx.flow.probabilities.layer_applied(call)
            if not (layer is not None and ctx.call_name(layer) in SOFTMAX_LAYERS
                    and activation_of(ctx.flow, layer) == "softmax" and arg(layer, 99, "axis") is None):
                return False
        return self._one_unit_output(ctx, arg(call, 0, "x" if ctx.call_name(call) in SOFTMAX else "inputs"))

    def _one_unit_output(self, ctx: Context, source: Optional[cst.BaseExpression]) -> bool:
        """Is `source` the output of a one-unit layer without activation (`Dense(1)(h)`,
        `tf.layers.dense(h, 1)`), directly or through a name or a `self` attribute?"""
        value = ctx.flow.value_of(source) if isinstance(source, (cst.Name, cst.Attribute)) else source
        dense = None
        if isinstance(value, cst.Call):  # a layer function's call is its output; a layer's is where it is applied
            applied = ctx.flow.probabilities.layer_applied(value)
            dense = value if ctx.call_name(value) in LAYER_FUNCTION_UNITS else applied
        return dense is not None and ctx.call_name(dense) in ("keras.layers.Dense", *LAYER_FUNCTION_UNITS) \
            and self._one_unit(ctx, dense) and activation_of(ctx.flow, dense) is None

    @staticmethod
    def _fix(ctx: Context, dense: cst.Call) -> Optional[Fix]:
        activation = arg(dense, 1, "activation")
        if not isinstance(activation, cst.SimpleString):
            return None
        quote = activation.value[0]
        fixed = cst.SimpleString(f"{quote}sigmoid{quote}")
        return Fix("use `activation=\"sigmoid\"` (with a binary loss)", UNSAFE, ((activation, fixed),))

