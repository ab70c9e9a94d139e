"""CL009 invalid-clip-threshold."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator, Optional, Tuple

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import Report
from ..flow.carriers import carried_constant
from ..flow.constants import UNKNOWN, ruled_out
from ..flow.nodes import arg
from ..flow.optimizers import passed_options
from ..names import CLIP_OPTIONS
from ..probes import OptimizerThreshold, TensorThreshold, ValueBounds
from . import Invalid, Rule

if TYPE_CHECKING:  # the config readers (PyYAML) are loaded only to audit a config
    from ..configs import ConfigOptimizer


def _number(ctx: Context, expr) -> Optional[float]:
    """The number a threshold holds: folded where it is written, or where every carrier that
    brings it starts (a helper's return, an attribute, a container)."""
    value = ctx.flow.constant(expr)
    if value is UNKNOWN and expr is not None:
        value = carried_constant(ctx.flow, expr)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not UNKNOWN else None


def _guarded(ctx: Context, call: cst.Call, threshold: Optional[cst.BaseExpression], value: float) -> bool:
    """A threshold read from a name (a flag, a parameter's default) that a branch around the call
    keeps away from this value: `if clip > 0:` makes -1 mean "no clipping"."""
    return isinstance(threshold, (cst.Name, cst.Attribute)) and ruled_out(ctx.flow, call, threshold, value)


def _given(ctx: Context, option: str, node: cst.BaseExpression, value: float) -> str:
    """How the threshold is given: `clipnorm=0`, or the flag whose default it is (a run that
    passes the flag is fine; one that does not clips nothing)."""
    if isinstance(node, cst.Attribute) and ctx.flow.flag_defaults().get(node.attr.value) is not None:
        return (f"`{option}={ctx.text(node)}`, whose command-line flag `{node.attr.value}` defaults to "
                f"{value:g},")
    return f"`{option}={value:g}`"


def _value_bounds(call: ast.Call) -> Tuple[Optional[ast.AST], Optional[ast.AST]]:
    bounds = {k.arg: k.value for k in call.keywords}
    low = call.args[1] if len(call.args) > 1 else bounds.get("clip_value_min")
    high = call.args[2] if len(call.args) > 2 else bounds.get("clip_value_max")
    return low, high


def _operands(node: ast.AST) -> Iterator[ast.AST]:
    """The operands of an arithmetic expression, through its unary and binary operators (walked
    without recursion: a generated sum nests thousands deep)."""
    todo = [node]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.UnaryOp):
            todo.append(node.operand)
        elif isinstance(node, ast.BinOp):
            todo.extend((node.right, node.left))
        else:
            yield node


def _literal_number(node: ast.AST) -> Optional[float]:
    """The int or float a constant is (not a bool), else None."""
    value = node.value if isinstance(node, ast.Constant) else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _maybe_numeric(node: ast.AST) -> bool:
    """Could the engine fold `node` to a number: a literal, arithmetic on one, or anything a
    number may be carried by (a name, an attribute, a call's return, an element)."""
    return any(_literal_number(operand) is not None or isinstance(operand, CARRIED)
               for operand in _operands(node))


def _maybe_nonpositive(node: ast.AST) -> bool:
    """Anything but a positive literal may be <= 0 (a flag's default, a helper's return...)."""
    while isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.USub):
            return True
        node = node.operand
    if isinstance(node, ast.Constant):
        number = _literal_number(node)
        return number is not None and number <= 0
    return isinstance(node, (ast.BinOp, *CARRIED))


# What a value the engine follows may be written as (`carriers.carried_constant`).
CARRIED = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.IfExp, ast.NamedExpr)


class InvalidClipThreshold(Rule):
    code = "CL009"
    name = "invalid-clip-threshold"
    summary = "A literal clip threshold that cannot do what was meant: <= 0, or clip_by_value with min > max."
    severity = "error"
    tokens = (b"clipnorm", b"clipvalue", b"clip_by")
    why = """
        A clipping threshold of zero or below does not clip; what it does instead depends on
        where it is. Keras 3 and tf-keras optimizers silently turn clipping off for
        `clipnorm`/`clipvalue`/`global_clipnorm` <= 0; tf-keras legacy optimizers zero every
        gradient for 0 (training silently stops) and reject negative values.
        `tf.clip_by_norm(t, c)` with `c` <= 0 returns zeros; `tf.clip_by_global_norm(t, c)`
        returns zeros for 0 and leaves the gradients unchanged for a negative `c`.
        `tf.clip_by_value(t, lo, hi)` with `lo > hi` raises nothing and sets every element to `lo`.
    """
    example = """
        optimizer = tf.keras.optimizers.Adam(1e-3, clipnorm=0.0)
        grads = [tf.clip_by_value(g, 1.0, -1.0) for g in grads]
    """
    instead = """
        optimizer = tf.keras.optimizers.Adam(1e-3, clipnorm=1.0)
        grads = [tf.clip_by_value(g, -1.0, 1.0) for g in grads]
    """
    fixes = """
        No automatic fix: only you know the threshold you meant.
    """
    VALID = [
        "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0)\ng = tf.clip_by_value(g, -1.0, 1.0)\n",
        "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=None)\n",
        "import tensorflow as tf\nOPTIONS = {'clipnorm': 1.0}\nopt = tf.keras.optimizers.Adam(**OPTIONS)\n",
        # bounds from variables are not literals
        "import tensorflow as tf\ny = tf.clip_by_value(x, lo, hi)\nz = tf.clip_by_norm(x, max_norm)\n",
        # a probability clip with sensible bounds
        "import tensorflow as tf\np = tf.clip_by_value(p, 1e-7, 1.0 - 1e-7)\n",
        # -1 means "no clipping": the branch keeps the default away from the clip
        "import tensorflow as tf\ndef train_op(grads, clip=-1):\n    if clip > 0:\n"
        "        grads, _ = tf.clip_by_global_norm(grads, clip)\n    return grads\n",
        # numpy's clip takes (a, a_min, a_max) too, but is not TensorFlow
        "import numpy as np\nx = np.clip(x, 1, -1)\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\nopt = tf.keras.optimizers.SGD(0.1, clipnorm=0)\n", 2, "turn clipping off"),
        Invalid("import tensorflow as tf\nopt = tf.keras.optimizers.legacy.SGD(0.1, clipvalue=-1.0)\n", 2),
        # a flag's default: the message names the flag
        Invalid("import argparse\nimport tensorflow as tf\nparser = argparse.ArgumentParser()\n"
                "parser.add_argument('--clipnorm', type=float, default=0.0)\nargs = parser.parse_args()\n"
                "opt = tf.keras.optimizers.Adam(clipnorm=args.clipnorm)\n", 6,
                "`clipnorm=args.clipnorm`, whose command-line flag `clipnorm` defaults to 0"),
        # the options in a config dict, splatted or given to the factory (the optimizer model's carriers)
        Invalid("import tensorflow as tf\nOPTIONS = {'learning_rate': 1e-3, 'clipnorm': 0.0}\n"
                "opt = tf.keras.optimizers.Adam(**OPTIONS)\n", 2, "`clipnorm=0` does not clip"),
        Invalid("import tensorflow as tf\n"
                "opt = tf.keras.optimizers.get({'class_name': 'adam', 'config': {'global_clipnorm': 0}})\n", 2),
        Invalid("import tensorflow as tf\nclipped, _ = tf.clip_by_global_norm(grads, 0.0)\n", 2, "zeros"),
        # the guard tests another name: the default -1 still reaches the clip
        Invalid("import tensorflow as tf\ndef train_op(grads, clip=-1, use_clip=True):\n    if use_clip:\n"
                "        grads, _ = tf.clip_by_global_norm(grads, clip)\n    return grads\n", 4),
        Invalid("import tensorflow as tf\ng = tf.clip_by_norm(g, -5)\n", 2),
        Invalid("import tensorflow as tf\nLIMIT = 1.0\ng = tf.clip_by_value(g, LIMIT, -LIMIT)\n", 3, "every element"),
        Invalid("import tensorflow as tf\ng = tf.clip_by_value(g, clip_value_min=2 * 0.5, clip_value_max=0.5)\n", 2),
    ]

    def could_fire(self, facts: Facts) -> bool:
        """A clip threshold that may be a constant <= 0, or clip_by_value bounds that may both be constants."""
        thresholds = [call.args[1] for name in ("clip_by_norm", "clip_by_global_norm")
                      for call in facts.calls_by_name.get(name, ()) if len(call.args) > 1]
        thresholds += [value for keyword in (*CLIP_OPTIONS, "clip_norm")
                       for value in facts.keyword_values.get(keyword, ())]
        return any(_maybe_nonpositive(threshold) for threshold in thresholds) or any(
            low is not None and high is not None and _maybe_numeric(low) and _maybe_numeric(high)
            for low, high in map(_value_bounds, facts.calls_by_name.get("clip_by_value", ())))

    def check_config(self, optimizer: "ConfigOptimizer") -> Iterator[Report]:
        for key, value in optimizer.options.items():
            if value <= 0:
                yield Report(key, (
                    f"`{optimizer.where(key)}: {value:g}` does not clip: Keras 3 and tf-keras silently turn clipping "
                    f"off (tf-keras legacy optimizers zero every gradient for 0 and reject negative values). "
                    f"Use a positive threshold, or remove the key."))

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            name = ctx.call_name(call)
            if passed_options(ctx.flow, call) is not None:
                yield from self._optimizer(ctx, call)
            elif name in ("tensorflow.clip_by_norm", "tensorflow.clip_by_global_norm"):
                threshold = arg(call, 1, "clip_norm")
                value = _number(ctx, threshold)
                if value is not None and value <= 0 and not _guarded(ctx, call, threshold, value):
                    yield self._tensor_clip(ctx, call, name.split(".")[-1], value)
            elif name == "tensorflow.clip_by_value":
                low = _number(ctx, arg(call, 1, "clip_value_min"))
                high = _number(ctx, arg(call, 2, "clip_value_max"))
                if low is not None and high is not None and low > high:
                    yield Report(call, (
                        f"`tf.clip_by_value` with minimum {low:g} above maximum {high:g}: it raises nothing and every "
                        f"element becomes {low:g}. Swap the bounds."),
                        probe=ValueBounds(ctx.flow.snippet(call)))

    def _optimizer(self, ctx: Context, call: cst.Call) -> Iterator[Report]:
        for option, node in (passed_options(ctx.flow, call) or {}).items():
            value = _number(ctx, node)
            if value is None or value > 0 or _guarded(ctx, call, node, value):
                continue
            legacy = ".legacy." in (ctx.call_name(call) or "")
            effect = ("tf-keras legacy optimizers zero every gradient, so training silently stops"
                      if value == 0 else "tf-keras legacy optimizers raise ValueError at construction")
            given = _given(ctx, option, node, value)
            if legacy:
                message = (f"{given} on a legacy optimizer: {effect}. Use a positive "
                           f"threshold, or leave the option out.")
            else:
                message = (f"{given} does not clip: Keras 3 and tf-keras silently turn "
                           f"clipping off ({effect}). Use a positive threshold, or leave the option out.")
            parent = ctx.parent.get(node)
            anchor = parent if isinstance(parent, cst.Arg) else node
            yield Report(anchor, message, probe=OptimizerThreshold(ctx.flow.snippet(call)))

    @staticmethod
    def _tensor_clip(ctx: Context, call: cst.Call, function: str, value: float) -> Report:
        if function == "clip_by_norm" or value == 0:
            effect = "returns zeros: every clipped gradient is zeroed"
        else:
            effect = "leaves the gradients unchanged: nothing is clipped"
        return Report(call, f"`tf.{function}` with clip_norm {value:g} {effect}. Use a positive threshold.",
                      probe=TensorThreshold(ctx.flow.snippet(call)))
