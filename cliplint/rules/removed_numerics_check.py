"""CL008 removed-numerics-check."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import UNSAFE, Fix, Report
from ..names import dotted_name
from ..probes import Numerics
from ..replacements import spelled
from . import Invalid, Rule

DISABLES_EAGER = {"tensorflow.disable_eager_execution", "tensorflow.disable_v2_behavior"}
# Names only TF 1 has at the top level: a module spelling them without `compat.v1` is TF 1 code.
TF1_ONLY = {"placeholder", "Session", "InteractiveSession", "get_variable", "variable_scope",
            "global_variables_initializer", "train.Saver"}
SESSIONS = {"tensorflow.Session", "tensorflow.InteractiveSession", "tensorflow.train.MonitoredTrainingSession",
            "tensorflow.train.MonitoredSession"}


class RemovedNumericsCheck(Rule):
    code = "CL008"
    name = "removed-numerics-check"
    summary = "`tf.add_check_numerics_ops()` in TF 2 code: gone, raises, or checks nothing."
    severity = "error"
    tokens = (b"add_check_numerics_ops",)
    # see _graph_mode_module and _tf1_module
    context_tokens = (b"disable_eager_execution", b"disable_v2_behavior", b"Session", b"placeholder",
                      b"Optimizer", b"as_default", b"get_variable", b"variable_scope", b"Saver")
    why = """
        `add_check_numerics_ops` adds a check to every op already in a TF 1 graph. In TF 2 it is
        gone from the top-level namespace (`AttributeError: module 'tensorflow' has no attribute
        'add_check_numerics_ops'`); `tf.compat.v1.add_check_numerics_ops()` raises `RuntimeError`
        under eager execution, and inside a `tf.function` it only covers the ops created before
        the call, so placed first it silently checks nothing. The NaN hunt it was meant for never
        happens.

        `tf.debugging.enable_check_numerics()` does this job in TF 2: called once, it checks every
        op executed afterwards, eager or traced, and names the op that produced the first Inf/NaN.
    """
    example = """
        @tf.function
        def train_step(x, y):
            tf.compat.v1.add_check_numerics_ops()
            ...
    """
    instead = """
        tf.debugging.enable_check_numerics()   # once, before training

        @tf.function
        def train_step(x, y):
            ...
    """
    fixes = """
        **Unsafe**: an `add_check_numerics_ops()` statement becomes
        `tf.debugging.enable_check_numerics()` (spelled with the file's TensorFlow alias); it
        checks every op from then on, which is slower, and is best moved before training.
        Not offered when the result is assigned (it was meant for `sess.run`).
    """
    VALID = [
        "import tensorflow as tf\ntf.debugging.enable_check_numerics()\n",
        # code written for TF 1 (TF 1-only names without compat.v1): the API works there
        "import tensorflow as tf\nx = tf.placeholder(tf.float32, [None, 4])\n"
        "train_op = tf.train.AdamOptimizer(1e-3).minimize(loss)\ncheck = tf.add_check_numerics_ops()\n",
        "import tensorflow as tf\nwith tf.Graph().as_default():\n    check = tf.add_check_numerics_ops()\n",
        # TF 1 code (tf.contrib is gone from TF 2) that spells the check through compat.v1
        "import tensorflow as tf\nsess = tf.compat.v1.InteractiveSession()\n"
        "checks = tf.compat.v1.add_check_numerics_ops()\n"
        "if FLAGS.quantize:\n    tf.contrib.quantize.create_training_graph(quant_delay=0)\n",
        # TF 1 graph code run through compat.v1 with eager execution turned off
        "import tensorflow.compat.v1 as tf\ntf.disable_eager_execution()\nx = tf.placeholder(tf.float32)\n"
        "check = tf.add_check_numerics_ops()\nwith tf.Session() as sess:\n    sess.run(check, {x: 1.0})\n",
        # check_numerics on one tensor is fine in TF 2
        "import tensorflow as tf\ny = tf.debugging.check_numerics(tf.math.log(x), 'log')\n",
        # a project's own helper with the same name
        "import tensorflow as tf\ndef add_check_numerics_ops():\n    return []\nops = add_check_numerics_ops()\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\ncheck = tf.add_check_numerics_ops()\n", 2, "AttributeError"),
        Invalid("import tensorflow as tf\n@tf.function\ndef step(x):\n    tf.compat.v1.add_check_numerics_ops()\n"
                "    return model(x)\n", 4, "RuntimeError"),
        Invalid("from tensorflow.compat import v1\nv1.add_check_numerics_ops()\n", 2),
        # TF 1 names through compat.v1 do not make it TF 1 code: eager is still on
        Invalid("import tensorflow as tf\nx = tf.compat.v1.placeholder(tf.float32)\n"
                "check = tf.compat.v1.add_check_numerics_ops()\n", 3, "RuntimeError"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.has("add_check_numerics_ops")

    def check(self, ctx: Context) -> Iterator[Report]:
        calls = [c for c in ctx.nodes(cst.Call) if ctx.call_name(c) == "tensorflow.add_check_numerics_ops"]
        if not calls or self._graph_mode_module(ctx) or self._tf1_module(ctx):
            return
        for call in calls:
            spelled_as = dotted_name(call.func) or ""
            full = ctx.imports.aliases.get(spelled_as.split(".")[0], "")
            top_level = "compat" not in f"{full}.{spelled_as}"
            what = ("is gone from TF 2: calling it raises `AttributeError: module 'tensorflow' has no attribute "
                    "'add_check_numerics_ops'`" if top_level else
                    "raises `RuntimeError: add_check_numerics_ops() is not compatible with eager execution`; "
                    "inside a `tf.function` it only covers ops created before the call, so placed first it "
                    "checks nothing")
            yield Report(call, f"`{spelled_as}()` {what}. Call `tf.debugging.enable_check_numerics()` once instead.",
                         probe=Numerics(ctx.flow.snippet(call)), fix=self._fix(ctx, call))

    @staticmethod
    def _fix(ctx: Context, call: cst.Call) -> Optional[Fix]:
        """`tf.debugging.enable_check_numerics()` in its place, spelled with the file's own
        TensorFlow alias. Unsafe: it checks every op from then on (slower), and inside a
        `tf.function` it is better moved before training. Only for a call used as a statement
        (an assigned result was meant for `sess.run`)."""
        if not isinstance(ctx.parent.get(call), cst.Expr) or call.args:
            return None
        func = spelled(ctx.imports, ("tensorflow.debugging.enable_check_numerics",))
        if func is None:
            return None
        return Fix(f"call `{ctx.text(func)}()` instead", UNSAFE, ((call, call.with_changes(func=func)),))

    @staticmethod
    def _tf1_module(ctx: Context) -> bool:
        """Code written for TF 1: it uses a TF 1-only name spelled without `compat.v1`
        (`tf.placeholder`, `tf.Session`, `tf.train.AdamOptimizer`, `tf.Graph().as_default()`, anything
        of `tf.contrib`, which TF 2 removed);
        there `tf.add_check_numerics_ops()` works as documented."""
        for attribute in ctx.nodes(cst.Attribute):
            node: cst.BaseExpression = attribute
            if attribute.attr.value == "as_default" and isinstance(attribute.value, cst.Call):
                node = attribute.value.func  # tf.Graph().as_default()
                spelled = "Graph"
            else:
                spelled = None
            head, _, rest = (dotted_name(node) or "").partition(".")
            if ctx.imports.aliases.get(head) != "tensorflow":
                continue
            if rest == spelled or rest in TF1_ONLY or rest.split(".")[0] == "contrib" \
                    or (rest.startswith("train.") and rest.endswith("Optimizer")):
                return True
        return False

    @staticmethod
    def _graph_mode_module(ctx: Context) -> bool:
        """A module that turns eager execution off and runs a Session: TF 1 graph code."""
        names = {ctx.call_name(c) for c in ctx.nodes(cst.Call)}
        return bool(names & DISABLES_EAGER) and bool(names & SESSIONS)
