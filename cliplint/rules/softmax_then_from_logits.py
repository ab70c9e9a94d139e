"""CL010 softmax-then-from-logits."""
from __future__ import annotations

from typing import Dict, Iterator, Optional, TypedDict

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import UNSAFE, Fix, Report
from ..flow.carriers import trace
from ..flow.nodes import arg, walk
from ..flow.probabilities import Compiled, Source
from ..names import LOGITS_OPS, SEQUENCE_LOSSES, logits_position
from ..probes import FROM_LOGITS, Snippet, Squashing
from ..replacements import without_keywords
from . import Invalid, Rule, makes_probabilities

LOSS_CLASSES = {f"keras.losses.{n}": kind for n, kind in (
    ("SparseCategoricalCrossentropy", "softmax"), ("CategoricalCrossentropy", "softmax"),
    ("CategoricalFocalCrossentropy", "softmax"), ("BinaryCrossentropy", "sigmoid"),
    ("BinaryFocalCrossentropy", "sigmoid"))}
LOSS_FUNCTIONS = {f"{module}.{n}": kind for module in ("keras.losses", "keras.metrics", "keras.backend")
                  for n, kind in (("sparse_categorical_crossentropy", "softmax"),
                                  ("categorical_crossentropy", "softmax"),
                                  ("categorical_focal_crossentropy", "softmax"), ("binary_crossentropy", "sigmoid"),
                                  ("binary_focal_crossentropy", "sigmoid"))}
# What to use on probabilities instead of each op.
PROBABILITY_LOSSES = {op: "sparse_categorical_crossentropy" if "sparse" in op or op in SEQUENCE_LOSSES else
                      "categorical_crossentropy" if kind == "softmax" else "binary_crossentropy"
                      for op, kind in LOGITS_OPS.items()}


OP_WORDS = tuple({op.rsplit(".", 1)[1] for op in LOGITS_OPS})


class FromLogitsFields(TypedDict, total=False):
    """The fields of a `FromLogits` probe a report fills: `op`, or `function` and `call`, or `loss`."""

    op: str
    function: str
    call: Snippet
    loss: Snippet
    squashed: Squashing


# What an input that went through each kind of probability was squashed by (1 - sigmoid(x) is sigmoid(-x)).
SQUASHED_BY: Dict[str, Squashing] = {"softmax": "softmax", "sigmoid": "sigmoid", "1-sigmoid": "sigmoid"}


def _true(ctx: Context, expr) -> bool:
    return ctx.flow.constant(expr) is True


class SoftmaxThenFromLogits(Rule):
    code = "CL010"
    name = "softmax-then-from-logits"
    summary = ("A loss that applies softmax/sigmoid itself (`from_logits=True`, the `*_with_logits` ops) is given "
               "a softmax/sigmoid output.")
    severity = "error"
    tokens = (b"from_logits", b"_cross_entropy", b"sequence_loss")  # `*_cross_entropy_with_logits`, `losses.*`
    why = """
        `from_logits=True` tells the loss to apply softmax (or sigmoid) itself. When the model's
        last layer already applies it, softmax runs twice: the loss sees probabilities squashed
        into a narrow band, so it can neither get small for a right answer nor large for a wrong
        one, and the gradient through the first softmax is tiny once the model is confident.
        Training runs without an error and plateaus. The same happens with
        `tf.nn.softmax_cross_entropy_with_logits(logits=probabilities)` (also `_v2`, the sparse,
        sigmoid and weighted ops, and TF 1's `tf.compat.v1.losses.softmax_cross_entropy`,
        `sparse_softmax_cross_entropy` and `sigmoid_cross_entropy`, and the sequence losses of TF 1's
        contrib and TF Addons, `sequence_loss(logits, targets, weights)`, whose `logits` are logits
        by definition), and with a sigmoid output fed to `BinaryCrossentropy(from_logits=True)`.
        Measured: the `tf.nn` op on `softmax(logits)` gives 0.605 and 0.584 where the logits give
        0.085 and 0.051. The two activations need not be the same: a sigmoid output given to a
        softmax loss (or a softmax output to a sigmoid one) lies in (0, 1) too, and is as flat
        (measured: 1.55 with a gradient norm of 4.5e-05, where the logits give 20 and 1.41). A
        softmax or sigmoid written out by hand (`exp(x) / reduce_sum(exp(x))`, `1 / (1 + exp(-x))`)
        counts as one. A loss built apart from `compile` (`loss_fn = ...(from_logits=True)`, then
        `model.compile(loss=loss_fn)`) is reported on its `from_logits=True`, the code to change.
    """
    example = """
        model = tf.keras.Sequential([..., tf.keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer="adam",
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    """
    instead = """
        model = tf.keras.Sequential([..., tf.keras.layers.Dense(10)])   # logits
        model.compile(optimizer="adam",
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    """
    fixes = """
        **Unsafe**: `from_logits=True` is dropped from the loss, so the model keeps returning
        probabilities (what `predict` gave all along). The other cure, a linear last layer, is
        left to you. Not offered for `*_with_logits` ops or serialized loss configs.
    """
    VALID = [
        # layers applied in turn: the last one is linear, whatever the earlier ones squash with
        "import tensorflow as tf\nfrom tensorflow import keras\nclass Aux(keras.layers.Layer):\n"
        "    def __init__(self, units):\n        super().__init__()\n"
        "        self.layers = [keras.layers.Dense(u, activation='sigmoid') for u in units[:-1]]\n"
        "        self.layers.append(keras.layers.Dense(units[-1], activation=None))\n"
        "    def call(self, x):\n        for layer in self.layers:\n            x = layer(x)\n        return x\n"
        "aux = Aux([80, 40, 1])\nloss = tf.nn.sigmoid_cross_entropy_with_logits(labels, aux(h))\n",
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
        "model.compile(optimizer='adam', loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n",
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(10, activation='softmax')])\n"
        "model.compile(optimizer='adam', loss=tf.keras.losses.SparseCategoricalCrossentropy())\n",
        # softmax in a hidden layer (attention), linear head
        "from tensorflow import keras\ninp = keras.Input((8,))\nh = keras.layers.Dense(8, activation='softmax')(inp)\n"
        "out = keras.layers.Dense(3)(h)\nmodel = keras.Model(inp, out)\n"
        "model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))\n",
        # from_logits=False spelled out
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1, activation='sigmoid')])\n"
        "model.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=False))\n",
        # the builder's softmax is switched off by the caller
        "import tensorflow as tf\ndef make(probs=True):\n    if probs:\n"
        "        return tf.keras.Sequential([tf.keras.layers.Dense(3, activation='softmax')])\n"
        "    return tf.keras.Sequential([tf.keras.layers.Dense(3)])\nmodel = make(probs=False)\n"
        "model.compile(loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))\n",
        # TF 1's losses given logits; the probabilities go to a probability loss
        "import tensorflow.compat.v1 as tf\nlogits = tf.layers.dense(h, 10)\nprobs = tf.nn.softmax(logits)\n"
        "loss = tf.losses.softmax_cross_entropy(onehot_labels, logits)\n"
        "acc = tf.keras.losses.categorical_crossentropy(y, probs)\n",
        # the labels (not the logits) are a softmax: distillation targets
        "import tensorflow as tf\nsoft = tf.nn.softmax(teacher / t)\n"
        "loss = tf.nn.softmax_cross_entropy_with_logits(labels=soft, logits=student)\n",
        # a model from elsewhere: its last layer is not visible here
        "import tensorflow as tf\nfrom mypkg import build\nmodel = build()\n"
        "model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n",
        # a Keras application without its classifier, or with a linear one
        "import tensorflow as tf\nbase = tf.keras.applications.ResNet50(include_top=False, weights='imagenet')\n"
        "head = tf.keras.applications.MobileNetV2(weights=None, classes=3, classifier_activation=None)\n"
        "base.compile(loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))\n"
        "head.compile(loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))\n",
        # one loss per output: the from_logits loss is on the linear head (the first head is a softmax)
        "import tensorflow as tf\ninp = tf.keras.Input((8,))\nh = tf.keras.layers.Dense(32, activation='relu')(inp)\n"
        "probs = tf.keras.layers.Dense(5, activation='softmax', name='probs')(h)\n"
        "scores = tf.keras.layers.Dense(5, name='scores')(h)\nmodel = tf.keras.Model(inp, [probs, scores])\n"
        "model.compile(loss=['categorical_crossentropy', tf.keras.losses.CategoricalCrossentropy(from_logits=True)])\n",
    ]
    INVALID = [
        # a builder with a chain of model.add(...)
        Invalid("import tensorflow as tf\ndef make():\n    m = tf.keras.Sequential()\n"
                "    m.add(tf.keras.layers.Dense(8, activation='relu'))\n"
                "    m.add(tf.keras.layers.Dense(3, 'softmax'))\n"
                "    return m\nmodel = make()\n"
                "model.compile(loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))\n", 8),
        Invalid("import tensorflow as tf\n"
                "model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation='relu'),\n"
                "                             tf.keras.layers.Dense(10, activation='softmax')])\n"
                "model.compile(optimizer='adam', loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n",  # noqa: E501
                4, "softmax is applied twice"),
        Invalid("from tensorflow import keras\ninp = keras.Input((8,))\n"
                "out = keras.layers.Dense(3, activation='softmax')(inp)\n"
                "model = keras.Model(inputs=inp, outputs=out)\n"
                "loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)\n"
                "model.compile('adam', loss=loss_fn)\n", 5, "the loss given to `model.compile` applies softmax"),
        Invalid("import tensorflow as tf\nclass Net(tf.keras.Model):\n    def call(self, x):\n"
                "        return tf.nn.softmax(self.d(x))\nnet = Net()\n"
                "loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)\n"
                "def step(x, y):\n    return loss_fn(y, net(x))\n", 8),
        Invalid("import tensorflow as tf\n"
                "model = tf.keras.Sequential([tf.keras.layers.Dense(1, activation='sigmoid')])\n"
                "model.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))\n", 3, "sigmoid"),
        Invalid("import tensorflow as tf\nprobs = tf.nn.softmax(z)\n"
                "loss = tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=probs)\n", 3,
                "applies softmax to `logits` itself"),
        # round 3: TF 1's losses, the v2 and weighted ops, a hand-written softmax and sigmoid
        Invalid("import tensorflow.compat.v1 as tf\nprobs = tf.layers.dense(h, 10, activation=tf.nn.softmax)\n"
                "loss = tf.losses.softmax_cross_entropy(onehot_labels, probs)\n", 3, "tf.compat.v1.losses"),
        Invalid("import tensorflow as tf\ndef head(x):\n    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))\n"
                "    return e / tf.reduce_sum(e, -1, keepdims=True)\n"
                "loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=head(z))\n", 5),
        Invalid("import tensorflow as tf\np = 1 / (1 + tf.exp(-z))\n"
                "loss = tf.nn.weighted_cross_entropy_with_logits(y, p, pos_weight=3.0)\n", 3, "sigmoid"),
        Invalid("import tensorflow as tf\nprobs = tf.nn.sigmoid(tf.matmul(h, w))\n"
                "loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, probs)\n", 3),
        # a sequence loss takes logits first
        Invalid("import tensorflow as tf\nprobs = tf.nn.softmax(tf.layers.dense(h, vocab))\n"
                "loss = tf.contrib.seq2seq.sequence_loss(probs, targets, weights)\n", 3, "sequence_loss"),
        # a sigmoid output given to a softmax loss: squashed twice all the same
        Invalid("import tensorflow as tf\ndef net(x):\n    return tf.nn.sigmoid(tf.layers.dense(x, 10))\n"
                "loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=net(x)))\n", 4,
                "sigmoid and then softmax are applied"),
        Invalid("import keras\nmodel = keras.Sequential([keras.layers.Dense(4, activation='softmax')])\n"
                "model.compile(loss={'class_name': 'CategoricalCrossentropy', 'config': {'from_logits': True}})\n", 3),
        # federated learning: TFF trains the model it wraps with the loss it is given
        Invalid("import tensorflow as tf\nimport tensorflow_federated as tff\ndef model_fn():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10, activation='softmax')])\n"
                "    return tff.learning.models.from_keras_model(model, input_spec=spec,\n"
                "        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n", 6),
        # a Keras application keeps its classifier, softmax by default
        Invalid("import tensorflow as tf\nfrom tensorflow.keras.applications import EfficientNetB0\n"
                "net = EfficientNetB0(weights=None, classes=5)\n"
                "net.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n", 4),
        # layers applied in turn, the last a softmax
        Invalid("import tensorflow as tf\nfrom tensorflow import keras\nclass Net(keras.Model):\n"
                "    def __init__(self):\n        super().__init__()\n"
                "        self.blocks = [keras.layers.Dense(64, activation='relu'), "
                "keras.layers.Dense(10, activation='softmax')]\n"
                "    def call(self, x):\n        for block in self.blocks:\n            x = block(x)\n"
                "        return x\nnet = Net()\n"
                "loss = tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=net(x))\n", 12),
        # one loss per output, matched by the output layer's name
        Invalid("import tensorflow as tf\ninp = tf.keras.Input((8,))\n"
                "h = tf.keras.layers.Dense(32, activation='relu')(inp)\n"
                "box = tf.keras.layers.Dense(4, name='box')(h)\n"
                "cls = tf.keras.layers.Dense(5, activation='softmax', name='cls')(h)\n"
                "model = tf.keras.Model(inp, [box, cls])\nmodel.compile(optimizer='adam', loss={'box': 'mse',\n"
                "    'cls': tf.keras.losses.CategoricalCrossentropy(from_logits=True)})\n", 8,
                "the model's output `cls`"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        with_logits = facts.has("from_logits") or any(w.endswith(OP_WORDS) for w in facts.words)
        return with_logits and makes_probabilities(facts)

    def check(self, ctx: Context) -> Iterator[Report]:
        for compiled in ctx.flow.compiled():
            per_output = ctx.flow.probabilities.output_losses(compiled)
            for given, head in per_output:  # one loss per output: each applies to its own
                kind = self._from_logits(ctx, given)
                output = ctx.flow.probability(head) if kind else None
                if output and kind:
                    yield self._report(ctx, given, kind, output, f"the model's output `{ctx.text(head)[:40]}`",
                                       {"loss": ctx.flow.snippet(ctx.flow.value_of(given))})
            kind = self._from_logits(ctx, compiled.loss) if not per_output else None
            output = ctx.flow.model_output(compiled.model) if kind else None
            if output and kind:  # any squashing: sigmoid outputs given to a softmax are flattened too
                keyword = self._keyword(ctx, compiled)
                loss = f"the loss given to `{ctx.text(compiled.call.func)}`" if keyword is not None else "the loss"
                yield self._report(ctx, keyword or compiled.loss, kind, output, "the model output",
                                   {"loss": ctx.flow.snippet(ctx.flow.value_of(compiled.loss))}, loss,
                                   fix_of=compiled.loss)
        compiling = {compiled.call for compiled in ctx.flow.compiled()}
        for call in ctx.nodes(cst.Call):
            if call not in compiling:
                yield from self._direct(ctx, call)

    def _direct(self, ctx: Context, call: cst.Call) -> Iterator[Report]:
        """`loss_fn(y, model(x))`, `sparse_categorical_crossentropy(y, p, from_logits=True)`,
        `*_with_logits(logits=p)`."""
        name = ctx.call_name(call)
        kind: Optional[str]
        probe: FromLogitsFields
        if name in LOGITS_OPS:  # the probe runs the op itself
            position = logits_position(name)
            kind, predictions, what, probe = LOGITS_OPS[name], arg(call, position, "logits"), None, {"op": name}
        elif name in LOSS_FUNCTIONS and _true(ctx, arg(call, 99, "from_logits")):
            kind, predictions, what = LOSS_FUNCTIONS[name], arg(call, 1, "y_pred"), "the predictions"
            probe = {"function": name.rsplit(".", 1)[-1], "call": ctx.flow.snippet(call)}
        else:
            # a loss object called: `loss_fn(y, p)`, `self.loss(y, p)`, `CategoricalCrossentropy(...)(y, p)`
            kind = self._from_logits(ctx, call.func) if isinstance(call.func, (cst.Name, cst.Attribute, cst.Call)) \
                else None
            predictions, what = (arg(call, 1, "y_pred") if kind else None), "the predictions"
            probe = {"loss": ctx.flow.snippet(ctx.flow.value_of(call.func))} if kind else {}
        source = ctx.flow.probability(predictions) if predictions is not None else None
        if source and kind:  # an epsilon or a clip on the way changes nothing: squashed twice
            yield self._report(ctx, call, kind, source, what, probe)

    @staticmethod
    def _keyword(ctx: Context, compiled: Compiled) -> Optional[cst.Arg]:
        """The `from_logits=True` of a loss built in this file apart from `compile`
        (`loss_fn = ...(from_logits=True)`, then `compile(loss=loss_fn)`): where it is reported,
        the code the fix edits and a reader changes. None for a loss written inline or of a
        linked module (then the finding stays on this file's `compile`)."""
        call = ctx.flow.value_of(compiled.loss)
        if not isinstance(call, cst.Call) or call is compiled.loss:
            return None
        keyword = next((a for a in call.args if a.keyword is not None and a.keyword.value == "from_logits"), None)
        return keyword if keyword is not None and keyword in ctx.own else None

    def _from_logits(self, ctx: Context, loss) -> Optional[str]:
        """'softmax'/'sigmoid' when `loss` holds a from_logits=True loss (through every carrier)."""
        return trace(ctx.flow, loss, lambda value: self._loss_kind(ctx, value))

    @staticmethod
    def _loss_kind(ctx: Context, value) -> Optional[str]:
        if isinstance(value, cst.Call):
            name = ctx.call_name(value)
            if name in LOSS_CLASSES and _true(ctx, arg(value, 99, "from_logits")):
                return LOSS_CLASSES[name]
        if isinstance(value, cst.Dict):  # the serialized form: {"class_name": ..., "config": {...}}
            mapping = ctx.flow.constant(value)
            if isinstance(mapping, dict) and isinstance(mapping.get("config"), dict) \
                    and mapping["config"].get("from_logits") is True:
                return LOSS_CLASSES.get(f"keras.losses.{mapping.get('class_name')}")
        if isinstance(value, cst.Lambda):
            for sub in walk(value.body):
                if isinstance(sub, cst.Call) and (name := ctx.call_name(sub)) in LOSS_FUNCTIONS \
                        and _true(ctx, arg(sub, 99, "from_logits")):
                    return LOSS_FUNCTIONS[name]
        return None

    def _report(self, ctx: Context, node, kind: str, source: Source, what: Optional[str],
                probe: FromLogitsFields, loss: str = "the loss", fix_of=None) -> Report:
        """`what` went through `source` (softmax or sigmoid), then into a loss that applies `kind`
        itself; `what` is None for a `tf.nn.*_with_logits` op (`probe["op"]`), which has no `from_logits`.
        `loss` is how the message names the loss; `fix_of` the loss the fix edits when `node` is not it
        (its `from_logits=True` keyword)."""
        squashed = SQUASHED_BY[source.kind]
        where = f"(`{ctx.text(source.node).strip().splitlines()[0][:80]}`)"
        if source.via:
            where += f" (the output comes in through {', then '.join(source.via)})"
        twice = f"{kind} is applied twice" if squashed == kind else f"{squashed} and then {kind} are applied"
        twice += (", so the loss is flattened and the gradients are tiny; training plateaus without an error.")
        if what is None:
            op = probe["op"].replace("tensorflow.losses.", "tf.compat.v1.losses.").replace("tensorflow.", "tf.") \
                .replace("tensorflow_addons.", "tfa.")
            message = (f"`{op}` applies {kind} to `logits` itself, but the `logits` given already went through "
                       f"{squashed} {where}: {twice} Pass the values from before the {squashed}, or give the "
                       f"probabilities to `tf.keras.losses.{PROBABILITY_LOSSES[probe['op']]}`.")
        else:
            instead = f"Pass the values from before the {squashed}"
            if what == "the model output":
                instead = "Make the last layer linear"
            message = (f"{loss} applies {kind} itself (`from_logits=True`), but {what} already went through "
                       f"{squashed} {where}: {twice} {instead}, or drop `from_logits=True`.")
        if squashed != kind:
            probe["squashed"] = squashed
        return Report(node, message, probe=FROM_LOGITS[kind](**probe), fix=self._fix(ctx, fix_of or node))

    @staticmethod
    def _fix(ctx: Context, loss) -> Optional[Fix]:
        """Drop `from_logits=True` from the loss: the model keeps returning probabilities (what
        `predict` gave all along) and the loss takes them as such. Unsafe: the other choice, a
        linear last layer, changes what the model returns. Only where the keyword is written
        on a loss constructor or loss function call (not `*_with_logits` ops or dict configs)."""
        call = ctx.flow.value_of(loss)
        if not isinstance(call, cst.Call) or not (
                ctx.call_name(call) in LOSS_CLASSES or ctx.call_name(call) in LOSS_FUNCTIONS):
            return None
        if not any(a.keyword is not None and a.keyword.value == "from_logits" and _true(ctx, a.value)
                   for a in call.args):
            return None
        return Fix("drop `from_logits=True` (the model outputs probabilities)", UNSAFE,
                   ((call, without_keywords(call, ["from_logits"])),))
