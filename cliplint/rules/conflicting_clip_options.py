"""CL001 conflicting-clip-options."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import UNSAFE, Fix, Report
from ..flow.constants import UNKNOWN
from ..flow.optimizers import Options, set_options
from ..names import CLIP_OPTIONS, OPTIMIZER_CLASSES, OPTIMIZER_FACTORIES
from ..probes import Attribute, Construct, LateAttribute
from ..replacements import statement_line, without_keywords
from . import Invalid, Rule

BUILDERS = OPTIMIZER_CLASSES | OPTIMIZER_FACTORIES  # every report is about an optimizer one of them builds

if TYPE_CHECKING:  # the config readers (PyYAML) are loaded only to audit a config
    from ..configs import ConfigOptimizer



def construction_message(options) -> str:
    """What really happens when these options are set together in the constructor."""
    listed = " and ".join(f"`{o}`" for o in options)
    if "clipnorm" in options and "global_clipnorm" in options:
        return (f"{listed} are both set: every Keras flavour raises ValueError at construction "
                "(Keras 3, tf-keras and legacy optimizers). Keep one: `global_clipnorm` bounds the "
                "whole update, `clipnorm` each variable's gradient separately")
    kept = "clipnorm" if "clipnorm" in options else "global_clipnorm"
    return (f"{listed} are both set: Keras 3 raises ValueError at construction; tf-keras accepts it "
            f"and silently ignores `clipvalue` (only `{kept}` applies); tf-keras legacy optimizers "
            "apply both in sequence. Keep one option")


def _precedence(options) -> str:
    for option in ("clipnorm", "global_clipnorm", "clipvalue"):
        if option in options:
            return option
    return ""


class ConflictingClipOptions(Rule):
    code = "CL001"
    name = "conflicting-clip-options"
    summary = "More than one of `clipnorm`, `clipvalue`, `global_clipnorm` is set on one Keras optimizer."
    severity = "error"
    tokens = (b"clipnorm", b"clipvalue")
    # flag definitions give `args.x` / `FLAGS.x` their defaults (Flow.flag_defaults)
    context_tokens = (b"add_argument", b"DEFINE_")
    why = """
        Keras optimizers apply at most one clipping option, and what happens when several are
        set depends on the Keras flavour. Keras 3 raises `ValueError: Only one of clipnorm,
        clipvalue and global_clipnorm can be set` when the optimizer is built (`0` counts as set).
        tf-keras (`TF_USE_LEGACY_KERAS=1`) accepts `clipvalue` together with `clipnorm` or
        `global_clipnorm` and silently ignores `clipvalue`; its legacy optimizers
        (`tf.keras.optimizers.legacy.*`) apply all of them one after the other. `clipnorm` with
        `global_clipnorm` raises everywhere. Setting a second option as an attribute after
        construction never raises in any flavour, and only one option applies
        (Keras 3 and tf-keras: `clipnorm`, then `global_clipnorm`, then `clipvalue`).

        The same code therefore crashes after an upgrade, or trains with a different clip than
        the one written down.
    """
    example = """
        optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0, clipvalue=0.5)
    """
    instead = """
        # one bound on the whole update (what tf.clip_by_global_norm does):
        optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3, global_clipnorm=1.0)
    """
    fixes = """
        **Unsafe**, and it keeps what the code did where it ran: tf-keras builds
        `clipnorm=...` (or `global_clipnorm=...`) with `clipvalue=...` and ignores `clipvalue`
        (Keras 3 raises), so the fix drops `clipvalue`. For an option set after construction,
        the one that applied (`clipnorm`, then `global_clipnorm`, then `clipvalue`) is kept: the
        losing assignment is removed, or the constructor keywords it overrode. Not offered for
        `clipnorm` with `global_clipnorm` (raises everywhere: your choice) or for legacy
        optimizers (they apply both).
    """
    VALID = [
        "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0)\n",
        "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=None)\n",
        # pass-through: a factory forwarding its own None-defaulted parameters
        "import keras\n"
        "def make(clipnorm=None, clipvalue=None):\n"
        "    return keras.optimizers.SGD(clipnorm=clipnorm, clipvalue=clipvalue)\n",
        # values from a config object are not known to be set
        "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=cfg.clipnorm, clipvalue=cfg.clipvalue)\n",
        # a flag whose default is None is not set
        "import argparse, keras\np = argparse.ArgumentParser()\np.add_argument('--clipnorm', type=float, default=1.0)\n"
        "p.add_argument('--clipvalue', type=float, default=None)\nargs = p.parse_args()\n"
        "opt = keras.optimizers.Adam(clipnorm=args.clipnorm, clipvalue=args.clipvalue)\n",
        # PyTorch has its own clip arguments; not Keras
        "import torch\nopt = torch.optim.Adam(params, lr=1e-3)\n"
        "torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)\n",
        # a user's own class that happens to take the same keywords
        "import tensorflow as tf\nclass Adam:\n    def __init__(self, **kw): pass\n"
        "opt = Adam(clipnorm=1.0, clipvalue=0.5)\n",
        # setting the same option again is not a conflict
        "from tensorflow.keras.optimizers import Adam\nopt = Adam(clipnorm=1.0)\nopt.clipnorm = 2.0\n",
        # the test of the very error, as in Keras' own optimizer tests
        "import pytest, keras\n"
        "def test_raises():\n"
        "    with pytest.raises(ValueError):\n"
        "        keras.optimizers.Adam(clipnorm=1.0, clipvalue=1.0)\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\n"
                "opt = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0, clipvalue=0.5)\n",
                2, "silently ignores `clipvalue`"),
        Invalid("from tensorflow.keras.optimizers import SGD as S\nopt = S(clipnorm=1.0, global_clipnorm=1.0)\n",
                2, "every Keras flavour raises"),
        Invalid("import tf_keras\nopt = tf_keras.optimizers.legacy.RMSprop(clipvalue=0, clipnorm=1)\n", 2),
        Invalid("import keras\nkw = {'clipnorm': 1.0, 'clipvalue': 0.5}\nopt = keras.optimizers.Adam(**kw)\n", 3),
        Invalid("import keras\nopt = keras.optimizers.Adam(**dict(global_clipnorm=1.0, clipvalue=0.5))\n", 2),
        Invalid("import keras\nCLIP = 1.0\ndef build(clip=CLIP):\n"
                "    return keras.optimizers.Adam(clipnorm=clip, clipvalue=0.5)\n", 4),
        Invalid("import tensorflow as tf\n"
                "opt = tf.keras.optimizers.get(\n"
                "    {'class_name': 'Adam', 'config': {'clipnorm': 1.0, 'clipvalue': 0.1}})\n", 2),
        Invalid("import tensorflow as tf\n"
                "opt = tf.keras.optimizers.Adam.from_config(\n"
                "    {'learning_rate': 0.1, 'clipnorm': 1.0, 'global_clipnorm': 2.0})\n", 2),
        Invalid("from keras import optimizers\nopt = optimizers.SGD(clipnorm=1.0)\nopt.clipvalue = 0.5\n",
                3, "never raises"),
        Invalid("import argparse, keras\np = argparse.ArgumentParser()\n"
                "p.add_argument('--clipnorm', type=float, default=1.0)\n"
                "p.add_argument('--clip-value', type=float, default=0.5)\nargs = p.parse_args()\n"
                "opt = keras.optimizers.Adam(clipnorm=args.clipnorm, clipvalue=args.clip_value)\n", 6,
                "command-line flags"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return len(facts.words.intersection(CLIP_OPTIONS)) > 1 and facts.refers_to(BUILDERS)

    def check_config(self, optimizer: "ConfigOptimizer") -> Iterator[Report]:
        present = list(optimizer.options)
        if len(present) < 2:
            return
        listed = " and ".join(f"`{optimizer.where(key)}`" for key in present)
        if "clipnorm" in present and "global_clipnorm" in present:
            effect = "every Keras flavour raises ValueError when this optimizer is built"
        else:
            effect = ("Keras 3 raises ValueError when this optimizer is built; tf-keras silently ignores `clipvalue`; "
                      "legacy optimizers apply both")
        yield Report(present[-1], f"{listed} are both set on one optimizer: {effect}. Keep one option.")

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            options = set_options(ctx.flow, call)
            if options is not None and len(options) > 1:
                yield Report(call, f"{construction_message(options)}.{self._flags_note(ctx, options)}",
                             probe=Construct(ctx.flow.snippet(call)),
                             fix=self._construction_fix(ctx, call, options))
        for assign in ctx.nodes(cst.Assign):
            report = self._late_attribute(ctx, assign)
            if report is not None:
                yield report

    @staticmethod
    def _construction_fix(ctx: Context, call: cst.Call, options: Options) -> Optional[Fix]:
        """Keep what took effect where this code ran: tf-keras builds the optimizer and ignores
        `clipvalue` next to `clipnorm` or `global_clipnorm` (Keras 3 raises), so the fix drops
        `clipvalue`. Not offered for `clipnorm` with `global_clipnorm` (raises everywhere: the
        choice is the author's), for legacy optimizers (they apply both), or for options that
        are not keywords of this call."""
        name = ctx.call_name(call) or ""
        keywords = {a.keyword.value for a in call.args if a.keyword is not None}
        if set(options) != {"clipvalue", _precedence(options)} or "legacy" in name \
                or not set(options) <= keywords:
            return None
        return Fix(f"drop `clipvalue` (tf-keras ignored it; `{_precedence(options)}` applied)", UNSAFE,
                   ((call, without_keywords(call, ["clipvalue"])),))

    @staticmethod
    def _flags_note(ctx: Context, options: Options) -> str:
        """Say where values come from command-line flag defaults: a run without the flags sets them."""
        defaults = ctx.flow.flag_defaults()
        flagged = [f"`{ctx.text(value)}` (default {ctx.text(default)})" for value in options.values()
                   if isinstance(value, cst.Attribute) and (default := defaults.get(value.attr.value)) is not None]
        return (f" The values come from command-line flags whose defaults are set: {', '.join(flagged)}; "
                "a run that passes no flag sets them all." if flagged else "")

    def _late_attribute(self, ctx: Context, assign: cst.Assign) -> Optional[Report]:
        """`opt = Adam(clipnorm=1.0); opt.clipvalue = 0.5` in the same scope (also on `self.opt`)."""
        target = assign.targets[0].target
        if len(assign.targets) != 1 or not isinstance(target, cst.Attribute) \
                or target.attr.value not in CLIP_OPTIONS or not isinstance(target.value, (cst.Name, cst.Attribute)):
            return None
        if ctx.flow.constant(assign.value) in (None, UNKNOWN):
            return None
        built = ctx.flow.value_of(target.value)
        if not isinstance(built, cst.Call) or ctx.flow.scope_of(built) is not ctx.flow.scope_of(assign):
            return None
        options = set_options(ctx.flow, built)
        if not options or target.attr.value in options:
            return None
        late = target.attr.value
        winner = _precedence({**options, late: None})
        return Report(assign, (
            f"`{ctx.text(target)}` is set after the optimizer was built with `{next(iter(options))}`: "
            f"this never raises, and in Keras 3 and tf-keras only `{winner}` applies "
            f"(legacy optimizers apply both). Set exactly one clip option in the constructor."),
            probe=LateAttribute(ctx.flow.snippet(built), Attribute(late), ctx.flow.snippet(assign.value)),
            fix=self._late_fix(ctx, assign, built, options, late, winner))

    @staticmethod
    def _late_fix(ctx: Context, assign: cst.Assign, built: cst.Call, options: Options, late: str,
                  winner: str) -> Optional[Fix]:
        """Keep the option that applied (Keras 3 and tf-keras: `clipnorm`, then `global_clipnorm`,
        then `clipvalue`): remove the assignment when it lost, or the constructor keywords it
        overrode when it won. Not for legacy optimizers (they apply both)."""
        if "legacy" in (ctx.call_name(built) or ""):
            return None
        if winner != late:
            line = statement_line(ctx, assign)
            if line is None:
                return None
            return Fix(f"remove `{ctx.text(assign.targets[0].target)} = ...` (it had no effect; "
                       f"`{winner}` applied)", UNSAFE, ((assign if len(line.body) > 1 else line, None),))
        keywords = {a.keyword.value for a in built.args if a.keyword is not None}
        if not set(options) <= keywords:
            return None
        listed = ", ".join(f"`{o}`" for o in options)
        return Fix(f"drop {listed} from the constructor (`{late}` set later overrode it)", UNSAFE,
                   ((built, without_keywords(built, options)),))
