"""CL012 probabilities-loss-on-logits."""
from __future__ import annotations

from typing import Iterator

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import UNSAFE, Fix, Report
from ..flow.nodes import arg
from ..names import APPLICATIONS, LINEAR_LAYERS, MATMULS
from ..probes import ProbabilityLoss
from . import Invalid, Rule

PROBABILITY_LOSSES = ("BinaryCrossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy")
LOSS_CLASSES = {f"keras.losses.{n}": n for n in PROBABILITY_LOSSES}
LOSS_NAMES = {"binary_crossentropy": "BinaryCrossentropy", "categorical_crossentropy": "CategoricalCrossentropy",
              "sparse_categorical_crossentropy": "SparseCategoricalCrossentropy"}
LOSS_FUNCTIONS = {f"{module}.{n}": cls for module in ("keras.losses", "keras.metrics", "keras.backend")
                  for n, cls in LOSS_NAMES.items()}
TRAINING = ("fit", "fit_generator", "train_on_batch")


class ProbabilitiesLossOnLogits(Rule):
    code = "CL012"
    name = "probabilities-loss-on-logits"
    summary = "A loss that expects probabilities (`from_logits=False`, the default) is given a model's logits."
    severity = "error"
    tokens = (b"rossentropy",)
    why = """
        `BinaryCrossentropy`, `CategoricalCrossentropy` and `SparseCategoricalCrossentropy`
        (and their functions and string names) expect probabilities unless `from_logits=True`.
        Keras clips the predictions to `[1e-7, 1 - 1e-7]` and normalises categorical ones by their
        sum, so logits from a last layer without a squashing activation (a `Dense` without
        activation, `"linear"`, `"relu"`) give meaningless losses with no error and no warning.
        Measured (TF 2.21, Keras 3): `BinaryCrossentropy()` on logits `[[2.5], [-3.0]]` with
        labels `[[1], [0]]` is 1.19e-07, "perfect", with no gradient, where the right value is
        0.0637; `SparseCategoricalCrossentropy()` on logits `[[3, -2, .5], [-1, -4, 2]]` is 0.2027
        instead of 0.0680, and `CategoricalCrossentropy()` 8.059.
    """
    example = """
        model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu"),
                                     tf.keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss="binary_crossentropy")
        model.fit(x, y)
    """
    instead = """
        model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu"),
                                     tf.keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
        model.fit(x, y)
    """
    fixes = """
        **Unsafe**: `from_logits=True` is added to a loss constructor written in the call
        (`BinaryCrossentropy()` becomes `BinaryCrossentropy(from_logits=True)`). The model keeps
        returning logits, so code that reads `predict` as probabilities (a 0.5 threshold) must
        apply the sigmoid or softmax itself. Not offered for string names.
    """
    VALID = [
        # the product squashed before the loss; a loss told it gets logits
        "import tensorflow as tf\ndef step(h, w, b, y):\n    logits = tf.matmul(h, w) + b\n"
        "    a = tf.keras.losses.binary_crossentropy(y, tf.sigmoid(logits))\n"
        "    return a + tf.keras.losses.binary_crossentropy(y, logits, from_logits=True)\n",
        # the two-headed model's squashed head
        "from tensorflow import keras\ninp = keras.Input((4,))\n"
        "heads = keras.Model(inp, [keras.layers.Dense(3, activation='softmax')(inp), keras.layers.Dense(1)(inp)])\n"
        "probs, value = heads(inp)\nloss = keras.losses.categorical_crossentropy(inp, probs)\n",
        # the same loss in a test step, logged; the training step's is the finding (not here: a softmax)
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(10, activation='softmax')])\n"
        "logits_model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
        "loss_object = tf.keras.losses.SparseCategoricalCrossentropy()\n"
        "def train_step(x, y):\n    with tf.GradientTape() as tape:\n        loss = loss_object(y, model(x))\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n"
        "def test_step(x, y):\n    test_loss(loss_object(y, logits_model(x)))\n"
        "for x, y in dataset:\n    train_step(x, y)\n    test_step(x, y)\n",
        # the linear layer is in a branch the script's constant switches off
        "import tensorflow as tf\nCLASSIFICATION = True\nmodel = tf.keras.models.Sequential()\n"
        "model.add(tf.keras.layers.LSTM(16))\nif CLASSIFICATION:\n"
        "    model.add(tf.keras.layers.Dense(1, activation='sigmoid'))\nelse:\n"
        "    model.add(tf.keras.layers.Dense(1))\n"
        "model.compile(optimizer='adam', loss=tf.keras.losses.BinaryCrossentropy())\nmodel.fit(x, y)\n",
        # the activation ends the model, also through a partial
        "import functools\nimport tensorflow as tf\n"
        "Out = functools.partial(tf.keras.layers.Dense, activation='sigmoid')\n"
        "model = tf.keras.Sequential([tf.keras.layers.Dense(8), Out(1)])\n"
        "model.compile(loss='binary_crossentropy')\nmodel.fit(x, y)\n",
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1, activation='sigmoid')])\n"
        "model.compile(loss='binary_crossentropy')\nmodel.fit(x, y)\n",
        # from_logits=True
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
        "model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\nmodel.fit(x, y)\n",
        # a softmax between the model and the loss
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
        "loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()\n"
        "def step(x, y):\n    return loss_fn(y, tf.nn.softmax(model(x)))\n",
        # a regression loss on a linear output
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "model.compile(loss='mse')\nmodel.fit(x, y)\n",
        # compiled and returned, with a sigmoid head
        "import tensorflow as tf\ndef build():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1, activation='sigmoid')])\n"
        "    model.compile(optimizer='adam', loss='binary_crossentropy')\n    return model\n",
        # the model's last layer is not known here
        "import tensorflow as tf\nfrom zoo import build\nmodel = build()\n"
        "model.compile(loss='categorical_crossentropy')\nmodel.fit(x, y)\n",
        # the function told the predictions are logits
        "import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "def step(x, y):\n    return tf.keras.losses.binary_crossentropy(y, model(x), from_logits=True)\n",
        # an Activation layer ends the model
        "import tensorflow as tf\nmodel = tf.keras.Sequential()\nmodel.add(tf.keras.layers.Dense(3))\n"
        "model.add(tf.keras.layers.Activation('softmax'))\nmodel.compile(loss='categorical_crossentropy')\n"
        "model.fit(x, y)\n",
        # a builder whose activation defaults to None, called with a sigmoid (and elsewhere without)
        "import tensorflow as tf\ndef build(units, activation=None):\n"
        "    return tf.keras.Sequential([tf.keras.layers.Dense(units, activation=activation)])\n"
        "classifier = build(1, activation='sigmoid')\nclassifier.compile(loss='binary_crossentropy')\n"
        "classifier.fit(x, y)\nregressor = build(1)\nregressor.compile(loss='mse')\nregressor.fit(x, y)\n",
        # one loss per output: the probability loss is on the softmax head, the logits go to mse
        "import tensorflow as tf\ninp = tf.keras.Input((8,))\nh = tf.keras.layers.Dense(32, activation='relu')(inp)\n"
        "cls = tf.keras.layers.Dense(5, activation='softmax', name='cls')(h)\n"
        "box = tf.keras.layers.Dense(4, name='box')(h)\nmodel = tf.keras.Model(inp, [box, cls])\n"
        "model.compile(optimizer='adam', loss={'cls': 'categorical_crossentropy', 'box': 'mse'})\nmodel.fit(x, y)\n",
    ]
    INVALID = [
        # logits from a matrix product, reshaped, into the loss function
        Invalid("import tensorflow as tf\ndef step(h, w, b, y):\n"
                "    logits = tf.reshape(tf.matmul(h, w) + b, [-1, 4])\n"
                "    return tf.losses.binary_crossentropy(y, logits)\n", 4, "tf.matmul(h, w)"),
        # the second output of a two-headed functional model its builder returns
        Invalid("from tensorflow import keras\nfrom tensorflow.keras import backend as K\nclass GAN:\n"
                "    def __init__(self):\n        self.disc = self.build()\n    def build(self):\n"
                "        inp = keras.Input((8, 8, 3))\n        h = keras.layers.Conv2D(8, 3)(inp)\n"
                "        src = keras.layers.Flatten()(keras.layers.Conv2D(1, 3)(h))\n"
                "        cls = keras.layers.Flatten()(keras.layers.Conv2D(5, 3)(h))\n"
                "        return keras.Model(inp, [src, cls])\n    def losses(self, x, y):\n"
                "        src, cls = self.disc(x)\n        return K.mean(K.categorical_crossentropy(y, cls))\n", 14),
        # the y_pred of a loss method a linear model is compiled with
        Invalid("from keras import metrics\nfrom keras.layers import Dense, Input\nfrom keras.models import Model\n"
                "class AE:\n    def __init__(self, n, act='relu'):\n        inp = Input((n,))\n"
                "        self.model = Model(inp, Dense(n, activation=act)(inp))\n"
                "    def loss(self, x, x_decoded):\n        return metrics.binary_crossentropy(x, x_decoded)\n"
                "    def train(self, x):\n        self.model.compile(optimizer='rmsprop', loss=self.loss)\n"
                "        self.model.fit(x, x)\n", 9, "Dense(n, activation=act)"),
        # a loss factory's closure, compiled on a functional model whose output is a product of logits
        Invalid("from tensorflow.keras import backend as K\nfrom tensorflow.keras.layers import Dense, Input\n"
                "from tensorflow.keras.models import Model\ndef make_loss(mask):\n"
                "    def masked(y_true, y_pred):\n"
                "        return K.mean(K.categorical_crossentropy(y_true, y_pred) * mask)\n"
                "    return masked\nadj, x = Input((None,)), Input((16,))\n"
                "model = Model([adj, x], K.dot(adj, Dense(7)(x)))\n"
                "model.compile(loss=make_loss(1.0), optimizer='adam')\nmodel.fit(x, x)\n", 6, "K.dot(adj, Dense(7)"),
        # a builder compiles the linear model and returns it (its callers train it)
        Invalid("import tensorflow as tf\ndef build(loss='binary_crossentropy'):\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation='relu'),\n"
                "                                 tf.keras.layers.Dense(1)])\n"
                "    model.compile(optimizer='adam', loss=loss)\n    return model\n", 5),
        # ... and on
        Invalid("import tensorflow as tf\nCLASSIFICATION = False\nmodel = tf.keras.models.Sequential()\n"
                "model.add(tf.keras.layers.LSTM(16))\nif CLASSIFICATION:\n"
                "    model.add(tf.keras.layers.Dense(1, activation='sigmoid'))\nelse:\n"
                "    model.add(tf.keras.layers.Dense(1))\n"
                "model.compile(optimizer='adam', loss=tf.keras.losses.BinaryCrossentropy())\nmodel.fit(x, y)\n", 9),
        Invalid("import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(8, activation='relu'),\n"
                "    tf.keras.layers.Dense(1)])\nmodel.compile(optimizer='adam', loss='binary_crossentropy')\n"
                "model.fit(x, y)\n", 4, "1.19e-07"),
        Invalid("from tensorflow import keras\ninp = keras.Input((4,))\nout = keras.layers.Dense(3)(inp)\n"
                "model = keras.Model(inp, out)\nmodel.compile('adam', loss=keras.losses.CategoricalCrossentropy())\n"
                "model.fit(x, y)\n", 5, "from_logits=True"),
        Invalid("import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(10, activation='relu')])\n"
                "loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()\n"
                "def train_step(x, y):\n    with tf.GradientTape() as tape:\n"
                "        loss = loss_fn(y, model(x, training=True))\n", 6),
        # a builder function
        Invalid("import tensorflow as tf\ndef build(n):\n    m = tf.keras.Sequential()\n"
                "    m.add(tf.keras.layers.Dense(n))\n    return m\nmodel = build(10)\n"
                "model.compile(loss='sparse_categorical_crossentropy')\nmodel.fit(x, y)\n", 7),
        Invalid("import tensorflow as tf\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
                "def step(x, y):\n    return tf.keras.losses.binary_crossentropy(y, model(x))\n", 4),
        # the layers through a partial whose activation the last call overrides
        Invalid("import functools\nimport tensorflow as tf\n"
                "Dense = functools.partial(tf.keras.layers.Dense, activation='relu')\n"
                "model = tf.keras.Sequential([Dense(512), Dense(1, activation=None)])\n"
                "model.compile(optimizer='adam', loss=tf.keras.losses.BinaryCrossentropy())\nmodel.fit(x, y)\n", 5),
        # a subclassed model whose `call` ends with a linear layer
        Invalid("from tensorflow import keras\nclass Net(keras.Model):\n    def __init__(self):\n"
                "        super().__init__()\n        self.out = keras.layers.Dense(3)\n"
                "    def call(self, x):\n        return self.out(x)\nmodel = Net()\n"
                "model.compile(optimizer='adam', loss='categorical_crossentropy')\nmodel.fit(x, y)\n", 9),
        Invalid("import tensorflow as tf\nmodel = tf.keras.Sequential()\nmodel.add(tf.keras.layers.Dense(16))\n"
                "model.add(tf.keras.layers.Dense(1, activation=None))\n"
                "model.compile(loss=tf.keras.losses.binary_crossentropy)\nmodel.fit(x, y)\n", 5),
        # a Keras application whose classifier is made linear
        Invalid("import tensorflow as tf\nnet = tf.keras.applications.ResNet50(weights=None, classes=10,\n"
                "    classifier_activation=None)\n"
                "net.compile(optimizer='adam', loss='sparse_categorical_crossentropy')\nnet.fit(x, y)\n", 4),
        # one loss per output, matched by position: the class head is linear
        Invalid("import tensorflow as tf\ninp = tf.keras.Input((8,))\n"
                "h = tf.keras.layers.Dense(32, activation='relu')(inp)\n"
                "cls = tf.keras.layers.Dense(5, name='cls')(h)\nbox = tf.keras.layers.Dense(4, name='box')(h)\n"
                "model = tf.keras.Model(inp, [box, cls])\n"
                "model.compile(optimizer='adam', loss=['mse', 'categorical_crossentropy'])\nmodel.fit(x, y)\n",
                7, "the model's output `cls`"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        # the loss (a class, a function or its string name) and a linear last layer it is given
        return any("rossentropy" in w for w in facts.words) and facts.refers_to(LINEAR_LAYERS | APPLICATIONS | MATMULS)

    def check(self, ctx: Context) -> Iterator[Report]:
        for compiled in ctx.flow.compiled():
            if not (compiled.trains or self._trained(ctx, compiled.model)
                    or self._handed_on(ctx, compiled.call, compiled.model)):
                continue
            found = self._probability_loss(ctx, compiled.loss)
            made = ctx.flow.probabilities.model_logits(compiled.model) if found is not None else None
            if found is not None and made is not None:
                yield self._report(ctx, found, made, "the compiled model's outputs", compiled.loss)
            for loss, output in ctx.flow.probabilities.output_losses(compiled):  # one loss per output
                found = self._probability_loss(ctx, loss)
                made = ctx.flow.logits(output) if found is not None else None
                if found is not None and made is not None:
                    what = f"the values of the model's output `{ctx.text(output)[:40]}`"
                    yield self._report(ctx, found, made, what, loss)
        for call in ctx.nodes(cst.Call):
            if len(call.args) < 2:
                continue
            found = self._probability_loss(ctx, call.func)  # a loss function or object called
            if found is None or self._from_logits(ctx, call) or ctx.flow.evaluated_only(call):
                continue
            made = ctx.flow.logits(arg(call, 1, "y_pred"))
            if made is not None:
                yield self._report(ctx, found, made, "the predictions", call)

    def _report(self, ctx: Context, found, made: cst.CSTNode, what: str, at: cst.CSTNode) -> Report:
        """The loss (`found`: its class and constructor) is given the logits `made` makes: a
        model's last layer, a layer applied, or a matrix product."""
        loss_class, constructor = found
        last = ctx.text(ctx.flow.bound(made) if isinstance(made, cst.Call) else made).strip().splitlines()[0][:80]
        message = (f"`{loss_class}` expects probabilities (`from_logits=False`, the default), but {what} come from "
                   f"`{last}`, which has no squashing activation: Keras clips the logits to [1e-7, 1 - 1e-7] "
                   f"(measured: `BinaryCrossentropy()` on logits 2.5 / -3.0 is 1.19e-07, \"perfect\", with no "
                   f"gradient). Use `from_logits=True`, or end the model with a sigmoid/softmax.")
        fix = None
        if constructor is not None:
            fixed = constructor.with_changes(args=(*constructor.args, cst.Arg(
                keyword=cst.Name("from_logits"), value=cst.Name("True"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))))
            fix = Fix("add `from_logits=True` (the model outputs logits)", UNSAFE, ((constructor, fixed),))
        return Report(at, message, probe=ProbabilityLoss(loss_class), fix=fix)

    @staticmethod
    def _probability_loss(ctx: Context, loss):
        """(the loss class, its constructor call when written as one) for a probabilities loss
        with `from_logits` false or absent."""
        value = ctx.flow.value_of(loss)
        if isinstance(value, cst.Call) and (name := ctx.call_name(value)) in LOSS_CLASSES:
            given = arg(value, 0, "from_logits")
            if given is not None and ctx.flow.constant(given) is not False:
                return None
            written = not any(a.keyword is not None and a.keyword.value == "from_logits" for a in value.args)
            return LOSS_CLASSES[name], value if written and not value.args else None
        text = ctx.flow.constant(value)
        if isinstance(text, str) and text in LOSS_NAMES:
            return LOSS_NAMES[text], None
        qualified = ctx.qualify(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
        if qualified in LOSS_FUNCTIONS:
            return LOSS_FUNCTIONS[qualified], None
        return None

    @staticmethod
    def _from_logits(ctx: Context, call: cst.Call) -> bool:
        """A loss function called with a `from_logits` that is not literally False."""
        given = arg(call, 99, "from_logits")
        return given is not None and ctx.flow.constant(given) is not False

    @staticmethod
    def _handed_on(ctx: Context, call: cst.Call, model) -> bool:
        """The function compiling the model returns it (`model.compile(...)`, then `return model`):
        a builder whose callers train what it compiled."""
        function = next((a for a in ctx.ancestors(call) if isinstance(a, cst.FunctionDef)), None)
        text = ctx.text(model)
        return function is not None and any(ctx.text(value) == text for value in ctx.flow.returned(function))

    @staticmethod
    def _trained(ctx: Context, model) -> bool:
        """The compiled model is trained in this module (`fit` on the same name or attribute)."""
        text = ctx.text(model)
        return any(isinstance(c.func, cst.Attribute) and c.func.attr.value in TRAINING
                   and ctx.text(c.func.value) == text for c in ctx.nodes(cst.Call))
