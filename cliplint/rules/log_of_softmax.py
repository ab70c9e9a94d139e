"""CL004 log-of-softmax."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import SAFE, UNSAFE, Fix, Report
from ..flow.constants import UNKNOWN
from ..flow.nodes import arg, walk
from ..flow.probabilities import Source
from ..names import CLAMPS, SIGMOID, SOFTMAX
from ..probes import LOG_OF, LogOf
from ..replacements import negated, rebound_between, renamed_callee, spelled
from . import Invalid, Rule, makes_probabilities

LOGS = {"tensorflow.math.log", "keras.backend.log", "keras.ops.log", "tensorflow.experimental.numpy.log"}
LOG_CALLS = frozenset(LOGS)  # every report is a call of one of them
SAMPLERS = {"tensorflow.random.categorical", "tensorflow.random.stateless_categorical"}
# The log-space function for each softmax/sigmoid: (its name in the same namespace, canonical
# names that name it, canonical names to spell it with the file's aliases otherwise).
LOG_FORMS = {
    "tensorflow.nn.softmax": ("log_softmax", ("tensorflow.nn.log_softmax", "tensorflow.math.log_softmax")),
    "keras.ops.softmax": ("log_softmax", ("keras.ops.log_softmax",)),
    "keras.activations.softmax": (None, ("tensorflow.nn.log_softmax", "keras.ops.log_softmax")),
    "keras.backend.softmax": (None, ("tensorflow.nn.log_softmax", "keras.ops.log_softmax")),
    "tensorflow.math.sigmoid": ("log_sigmoid", ("tensorflow.math.log_sigmoid",)),
    "keras.ops.sigmoid": ("log_sigmoid", ("keras.ops.log_sigmoid",)),
    "keras.activations.sigmoid": (None, ("tensorflow.math.log_sigmoid", "keras.ops.log_sigmoid")),
    "keras.backend.sigmoid": (None, ("tensorflow.math.log_sigmoid", "keras.ops.log_sigmoid")),
}


class LogOfSoftmax(Rule):
    code = "CL004"
    name = "log-of-softmax"
    summary = "`log` is applied to a softmax (or sigmoid) output instead of using `log_softmax`."
    severity = "error"
    # exp: a softmax or sigmoid written out; applications: a Keras application's softmax classifier
    tokens = (b"softmax", b"sigmoid", b"Softmax", b"exp", b"applications")
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

        A helper that is a log under another name (`def safe_log(x): return tf.log(tf.maximum(x,
        1e-12))`, in this module or another of the project) is a log where it is called: the
        finding is at the call that gives it probabilities, not inside the helper.

        Not reported: a log that only feeds sampling (`tf.random.categorical`: no gradient, and
        `-inf` is the right logit there), and a softmax of numbers written in the file
        (`tf.nn.softmax(tf.constant([[1., 2., 3.]]))`, as demos comparing the hand-written
        cross-entropy with TensorFlow's do): nothing computes them, so nothing trains through it.
    """
    example = """
        probs = tf.nn.softmax(logits)
        loss = -tf.reduce_sum(labels * tf.math.log(probs + 1e-9), axis=-1)
    """
    instead = """
        loss = -tf.reduce_sum(labels * tf.nn.log_softmax(logits), axis=-1)
        # or: tf.keras.losses.CategoricalCrossentropy(from_logits=True)(labels, logits)
    """
    fixes = """
        **Safe** when the log directly wraps the call: `log(softmax(x, axis))` becomes
        `log_softmax(x, axis)`, `log(sigmoid(x))` becomes `log_sigmoid(x)` and
        `log(1 - sigmoid(x))` becomes `log_sigmoid(-x)`, in the namespace the file already uses
        (`tf.nn`, `keras.ops`; `tf.math.log_sigmoid` for a sigmoid). **Unsafe** when the fix
        removes something on the way: an epsilon, a clip, or a name holding the softmax (the
        name stays, its other uses are untouched). Not offered when a probability is picked out
        of the softmax (indexing, `gather`), the softmax's inputs change in between, or no
        import of the file names the log form (a fix never adds an import), nor at the call of a
        log helper (the helper's other callers may need it).
    """
    VALID = [
        # the softmax is assigned in a branch the script's constant switches off
        "import tensorflow as tf\nUSE_SOFTMAX = False\nh = tf.layers.dense(x, 10)\nif USE_SOFTMAX:\n"
        "    out = tf.nn.softmax(h)\nelse:\n    out = h\nloss = -tf.reduce_sum(y * tf.log(out + 1e-8))\n",
        # a demo on numbers written in the file: nothing computes them, nothing trains
        "import numpy as np, tensorflow as tf\nx = np.array([[12, 3, 2], [3, 10, 1]])\n"
        "cost = -tf.reduce_sum(y * tf.log(tf.nn.softmax(x)))\n"
        "p = tf.nn.softmax(tf.constant([[1.0, 2.0, 3.0]]))\nce = -tf.reduce_sum(y_ * tf.math.log(p))\n",
        "import tensorflow as tf\nloss = -tf.reduce_sum(y * tf.nn.log_softmax(logits), axis=-1)\n",
        # the dict holds a softmax, but under another key than the one the log reads
        "import tensorflow as tf\nops = {}\nops['logits'] = h\nops['probs'] = tf.nn.softmax(h)\n"
        "z = tf.math.log(ops['logits'])\n",
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
        # a log helper given a standard deviation, not probabilities
        "import tensorflow as tf\ndef safe_log(x):\n    return tf.math.log(x + 1e-8)\n"
        "probs = tf.nn.softmax(h)\nnll = safe_log(tf.exp(log_std))\n",
        # a helper whose parameter only ever receives logits
        "import tensorflow as tf\ndef nll(z, y):\n    return -tf.math.log(tf.gather(z, y, batch_dims=1))\n"
        "probs = tf.nn.softmax(h)\nloss = nll(h, y)\n",
        # another class's attribute of the same name holds values, not probabilities
        "import tensorflow as tf\nclass Actor:\n    def __init__(self):\n        self.out = tf.nn.softmax(self.h)\n"
        "class Critic:\n    def __init__(self):\n        self.out = tf.layers.dense(self.h, 1)\n"
        "    def loss(self):\n        return tf.log(self.out + 1.0)\n",
        # the caller switches the activation off
        "import tensorflow as tf\ndef block(x, act=True):\n    if act:\n        return tf.nn.sigmoid(x)\n    return x\n"
        "lp = tf.math.log(block(h, act=False))\n",
    ]
    INVALID = [
        # a helper that is a log under another name: reported at its call
        Invalid("import tensorflow as tf\ndef safe_log(x):\n"
                "    return tf.where(tf.equal(x, 0), tf.zeros_like(x), tf.log(tf.maximum(1e-12, x)))\n"
                "probs = tf.nn.softmax(h)\nentropy = -tf.reduce_sum(probs * safe_log(probs), axis=-1)\n",
                5, "`safe_log` takes the log"),
        # a parameter's default is one value among those calls pass: the branch is live
        Invalid("import tensorflow as tf\ndef focal(from_logits=False):\n    def fn(y_true, y_pred):\n"
                "        if from_logits:\n            y_pred = tf.nn.sigmoid(y_pred)\n"
                "        return -y_true * tf.math.log(y_pred)\n    return fn\n", 6),
        Invalid("import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n", 2, "log_softmax"),
        # stored into a dict on self under a key, read back under it
        Invalid("import tensorflow as tf\nclass VAE:\n    def build(self, logits):\n        self.ops = {}\n"
                "        self.ops['prob'] = tf.nn.softmax(logits)\n"
                "        return tf.log(self.ops['prob'] + 1e-8)\n", 6),
        # an epsilon whose value is in another module: its name says what it is
        Invalid("import tensorflow as tf\nfrom utils import *\n"
                "loss = -tf.reduce_sum(tf.log(tf.nn.softmax(logits) + SMALL_NUMBER) * labels, axis=1)\n", 3),
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
        # across methods, through a tuple returned by a builder method and TF 1's positional activation
        Invalid("import tensorflow as tf\nclass AC:\n    def __init__(self):\n"
                "        self.probs, self.v = self._build()\n"
                "        self.lp = tf.log(self.probs + 1e-5)\n"
                "    def _build(self):\n        h = tf.layers.dense(self.s, 200, tf.nn.relu6)\n"
                "        return tf.layers.dense(h, 4, tf.nn.softmax), tf.layers.dense(h, 1)\n", 5),
        # into a helper through its parameter: reported at the log, naming the call
        Invalid("import tensorflow as tf\ndef xent(p, y):\n    p = tf.clip_by_value(p, 1e-9, 1.0)\n"
                "    return -tf.reduce_sum(y * tf.math.log(p))\n"
                "def step(x, y):\n    return xent(tf.nn.softmax(x), y)\n", 4, "`xent(tf.nn.softmax(x), y)` in `step`"),
        # a model from a builder, and contrib/slim activations
        Invalid("import tensorflow as tf\nfrom tensorflow.keras import backend as K\n"
                "def make():\n    return tf.keras.Sequential([tf.keras.layers.Dense(3, 'softmax')])\n"
                "model = make()\nlp = K.log(model.output + 1e-10)\n", 6),
        Invalid("import tensorflow as tf\nimport tensorflow.contrib.slim as slim\n"
                "p = slim.fully_connected(h, 4, activation_fn=tf.nn.softmax)\nlp = tf.log(p)\n", 4),
        # a Bernoulli likelihood written with tf.multiply: p * y + (1 - p) * (1 - y)
        Invalid("import tensorflow as tf\ndef nll(z_eos, eos):\n    z = tf.sigmoid(z_eos)\n"
                "    return -tf.log(tf.multiply(z, eos) + tf.multiply(1 - z, 1 - eos))\n", 4, "sigmoid"),
        # a Keras Lambda layer runs its function on what the layer is called with
        Invalid("from tensorflow import keras\nfrom tensorflow.keras import backend as K\n"
                "probs = keras.layers.Dense(5, activation='softmax')(features)\n"
                "log_layer = keras.layers.Lambda(lambda t: K.log(t))\nlog_probs = log_layer(probs)\n",
                5, "`log_layer` takes the log"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.refers_to(LOG_CALLS) and makes_probabilities(facts)

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            logged = self._logged(ctx, call)
            if logged is None or self._feeds_sampling(ctx, call):
                continue
            source = ctx.flow.probability(logged)
            if source is None:
                continue
            if ctx.call_name(call) in LOGS:
                yield Report(call, self._message(source), probe=self._probe(ctx, call, source),
                             fix=self._fix(ctx, call, source))
            else:  # a helper applying the log: the mistake is this call's, as its fix is
                defined_at = getattr(ctx.flow.ctx, "defined_at", None)  # a helper of another project module
                where = defined_at(ctx.flow.callee(call)) if defined_at is not None else None
                helper = f" {where or f'`{ctx.text(call.func)}`'} takes the log of what it is given."
                yield Report(call, self._message(source, helper), probe=self._probe(ctx, call, source))

    @staticmethod
    def _logged(ctx: Context, call: cst.Call) -> Optional[cst.BaseExpression]:
        """What a log call, or a call of a helper that is a log under another name (`safe_log(p)`,
        `Flow.applied_argument`), takes the log of. Not the log inside such a helper when the
        helper is called: each call is the log of what it passes, and is reported there."""
        if ctx.call_name(call) not in LOGS:
            return ctx.flow.applied_argument(call, LOG_CALLS)
        helper = next((a for a in ctx.ancestors(call) if isinstance(a, (cst.FunctionDef, cst.Lambda))), None)
        if helper is not None and ctx.flow.call_sites(helper) and ctx.flow.applied_parameter(helper, LOG_CALLS):
            return None
        return arg(call, 0, "x")

    @staticmethod
    def _message(source: Source, helper: str = "") -> str:
        kind = source.kind
        hidden = (" The epsilon or clip hides the -inf but makes the gradient vanish for the entries it "
                  "touches." if source.padded else "")
        path = (" The probabilities come in through " + ", then ".join(source.via) + "."
                if source.via else "")
        if kind == "softmax":
            return ("log of a softmax output: in float32 it is -inf once the logit gap passes about 87 "
                    "(float16: wrong from about 16) and the gradient becomes NaN." + helper + hidden + path +
                    " Use `tf.nn.log_softmax(logits)` or a `from_logits=True` loss.")
        fix = "tf.math.log_sigmoid(-x)" if kind == "1-sigmoid" else "tf.math.log_sigmoid(x)"
        return (f"log of a sigmoid output: the sigmoid underflows to {'1' if kind == '1-sigmoid' else '0'} "
                f"for large logits, giving -inf and NaN gradients.{helper}{hidden}{path} Use `{fix}` or "
                f"`tf.nn.sigmoid_cross_entropy_with_logits`.")

    def _fix(self, ctx: Context, log: cst.Call, source: Source) -> Optional[Fix]:
        """`log(softmax(x))` -> `log_softmax(x)`, `log(1 - sigmoid(x))` -> `log_sigmoid(-x)`. Safe
        when the log directly wraps the call; unsafe when a name, an epsilon or a clip is
        removed on the way. None when the value is picked out of the softmax (indexing,
        `gather`), the softmax has arguments the log form does not take, its inputs change
        between the two, or the file imports nothing that names the log form."""
        kind, node = source.kind, source.node
        if not isinstance(node, cst.Call):
            return None
        name = ctx.call_name(node)
        if name not in LOG_FORMS or any(a.star for a in node.args):
            return None
        path = self._path(ctx, arg(log, 0, "x"), node, kind, [])
        if path is None or not self._same_inputs(ctx, node, log):
            return None
        renamed, targets = LOG_FORMS[name]  # name is one of LOG_FORMS' keys: not None
        func = renamed_callee(ctx.imports, node.func, renamed, targets) if renamed else spelled(ctx.imports, targets)
        args = self._arguments(node, kind)
        if func is None or args is None:
            return None
        fixed = cst.Call(func=func, args=args)
        safety = SAFE if not path else UNSAFE
        # the log is replaced; what stood between it and the softmax is no longer used here (a name
        # holding the softmax stays where it is assigned: other code may read it)
        bypassed = f" (instead of {', '.join(path)})" if path else ""
        return Fix(f"use `{ctx.text(fixed)}`{bypassed}", safety, ((log, fixed),))

    def _path(self, ctx: Context, expr, node: cst.Call, kind: str, removed: list) -> Optional[list]:
        """What lies between the log's argument and the softmax call: [] when it is the call
        itself, else what a fix would remove (a name, an epsilon, a clip); None when the value
        is not the whole softmax output (indexed, gathered, multiplied)."""
        if expr is node:
            return removed
        if len(removed) > 4:
            return None
        if isinstance(expr, cst.Name):
            value = ctx.flow.value_of(expr)
            return None if value is expr else self._path(ctx, value, node, kind, removed + [f"`{expr.value}`"])
        if isinstance(expr, cst.BinaryOperation):
            left, right = expr.left, expr.right
            if kind == "1-sigmoid" and isinstance(expr.operator, cst.Subtract) and ctx.flow.constant(left) == 1:
                return self._path(ctx, right, node, "sigmoid", removed)
            if isinstance(expr.operator, cst.Add):
                if ctx.flow.constant(right) is not UNKNOWN or isinstance(right, cst.Name):
                    return self._path(ctx, left, node, kind, removed + ["the epsilon"])
                if ctx.flow.constant(left) is not UNKNOWN or isinstance(left, cst.Name):
                    return self._path(ctx, right, node, kind, removed + ["the epsilon"])
            return None
        if isinstance(expr, cst.Call) and ctx.call_name(expr) in CLAMPS:  # what a fix may remove: a clip, a floor
            return self._path(ctx, arg(expr, 0, "x"), node, kind, removed + [f"`{ctx.text(expr.func)}`"])
        return None

    @staticmethod
    def _same_inputs(ctx: Context, softmax: cst.Call, log: cst.Call) -> bool:
        """The softmax's inputs mean the same at the log: plain names, attributes and constants,
        none of them assigned in between (a call could be random or have side effects)."""
        if ctx.encloses(log, softmax):
            return True
        scope = ctx.flow.scope_of(softmax)
        if ctx.flow.scope_of(log) is not scope or ctx.pre[softmax] > ctx.pre[log]:
            return False
        for argument in softmax.args:
            for sub in walk(argument.value):
                if isinstance(sub, cst.Call):
                    return False
                if isinstance(sub, cst.Name) and rebound_between(ctx, sub.value, scope, ctx.pre[softmax], ctx.pre[log]):
                    return False
        return True

    @staticmethod
    def _arguments(node: cst.Call, kind: str) -> Optional[tuple]:
        """The log form's arguments: the softmax's own (same signature: `x, axis`), or for a
        sigmoid its one input, negated for `1 - sigmoid(x)`."""
        keywords = {a.keyword.value for a in node.args if a.keyword is not None}
        if "softmax" in kind:
            return tuple(node.args) if keywords <= {"axis"} else None
        if keywords or len(node.args) != 1:
            return None
        x = node.args[0].value
        return (cst.Arg(negated(x) if kind == "1-sigmoid" else x),)

    def _probe(self, ctx: Context, call: cst.Call, source: Source) -> LogOf:
        kind, node, padded, _ = source
        direct = isinstance(node, cst.Call) and ctx.call_name(node) in SOFTMAX | SIGMOID
        return LOG_OF[kind](ctx.flow.snippet(call), padded, ctx.flow.snippet(node) if direct else None)

    @staticmethod
    def _sampler_given(ctx: Context, node: cst.CSTNode) -> bool:
        """`node` is an argument of `tf.random.categorical` (or another sampler)."""
        argument = ctx.parent.get(node)
        return isinstance(argument, cst.Arg) and ctx.call_name(ctx.parent.get(argument)) in SAMPLERS

    def _feeds_sampling(self, ctx: Context, call: cst.Call) -> bool:
        """The log is only sampled from, itself or scaled (`log(p) / temperature`)."""
        value: cst.CSTNode = call
        parent = ctx.parent.get(call)
        while isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):  # a temperature, a sign
            value, parent = parent, ctx.parent.get(parent)
        if isinstance(parent, cst.Arg):
            return self._sampler_given(ctx, value)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 \
                and isinstance(parent.targets[0].target, cst.Name):
            uses = ctx.flow.uses_after(parent.targets[0].target.value, parent)
            return bool(uses) and all(
                self._sampler_given(ctx, u) for u in uses)
        return False
