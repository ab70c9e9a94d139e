"""CL002 optimizer-changed-after-compile."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple, Type

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import Report
from ..flow.nodes import arg
from ..names import CLIP_OPTIONS, OPTIMIZER_CLASSES
from ..probes import AfterCompile, CallbackChange, OptimizerRebound, OptimizerReplaced, OptionChanged
from . import Invalid, Rule


def _rebinds_compiled_optimizer(facts: Facts) -> bool:
    """A name passed to `compile(optimizer=...)` (or first) and assigned more than once."""
    for call in facts.calls_by_name.get("compile", ()):
        optimizer = next((k.value for k in call.keywords if k.arg == "optimizer"), call.args[0] if call.args else None)
        if isinstance(optimizer, ast.Name) and facts.assigned.get(optimizer.id, 0) > 1:
            return True
    return False

TRAINING = ("fit", "train_on_batch", "fit_generator")
BATCH_HOOKS = ("on_epoch_begin", "on_epoch_end", "on_batch_begin", "on_batch_end",
               "on_train_batch_begin", "on_train_batch_end")


@dataclass
class Event:
    kind: str  # compile | train | reset | change
    model: str  # source text of the model expression
    node: cst.CSTNode
    change: Optional[Type[AfterCompile]] = None  # OptionChanged | OptimizerReplaced | OptimizerRebound
    option: str = ""
    optimizer: str = ""  # for compile: the name passed as optimizer
    eager: bool = False


class OptimizerChangedAfterCompile(Rule):
    code = "CL002"
    name = "optimizer-changed-after-compile"
    summary = "A clip option or the optimizer itself is changed after `model.compile`."
    severity = "error"
    tokens = (b"compile", b"Callback", b"callbacks")
    why = """
        `model.fit` traces the train step once and caches it on `model.train_function`. The
        optimizer's `clipnorm`, `clipvalue` and `global_clipnorm` are read by a Python `if` while
        tracing, and `model.optimizer` itself is captured then. A change made after the first
        training step is therefore silently ignored, in Keras 3 and tf-keras alike: the run
        goes on unclipped (or with the old optimizer: a replacement's `iterations` stays 0).
        The same change made between `compile` and the first `fit` does take effect, which is
        why it works in a notebook and not in the script (reported as a warning). A change in a
        callback's epoch or batch hook always comes after the first step. Rebinding the name
        passed to `compile` to a new optimizer never reaches the model at all.

        Learning-rate changes are fine at any time: the learning rate is a variable.
    """
    example = """
        model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss="mse")
        model.fit(x, y, epochs=1)
        model.optimizer.clipnorm = 1.0   # ignored: the train function is already traced
        model.fit(x, y, epochs=10)
    """
    instead = """
        model.compile(optimizer=tf.keras.optimizers.Adam(1e-3, clipnorm=1.0), loss="mse")
        model.fit(x, y, epochs=11)
        # or, to change it between fits, compile again:
        # model.optimizer.clipnorm = 1.0; model.compile(optimizer=model.optimizer, loss="mse")
    """
    fixes = """
        No automatic fix: whether to move the change before training or recompile is your call.
    """
    VALID = [
        # learning-rate changes work at any time
        "import tensorflow as tf\nmodel.compile(optimizer='adam', loss='mse')\nmodel.fit(x, y)\n"
        "model.optimizer.learning_rate = 1e-4\nmodel.optimizer.learning_rate.assign(1e-5)\nmodel.fit(x, y)\n",
        # set before compile
        "import tensorflow as tf\nopt = tf.keras.optimizers.Adam()\nopt.clipnorm = 1.0\n"
        "model.compile(optimizer=opt, loss='mse')\nmodel.fit(x, y)\n",
        # changed, then compiled again before training
        "import tensorflow as tf\nmodel.compile(optimizer='adam', loss='mse')\nmodel.fit(x, y)\n"
        "model.optimizer.clipnorm = 1.0\nmodel.compile(optimizer=model.optimizer, loss='mse')\nmodel.fit(x, y)\n",
        # run_eagerly re-reads the option at every step
        "import tensorflow as tf\nopt = tf.keras.optimizers.SGD()\nmodel.compile(opt, loss='mse', run_eagerly=True)\n"
        "model.fit(x, y)\nopt.clipnorm = 1.0\nmodel.fit(x, y)\n",
        # re.compile is not Keras
        "import re, tensorflow as tf\npattern = re.compile('x')\npattern.clipnorm = 1\n",
        # a callback that changes the learning rate per epoch
        "import tensorflow as tf\nclass Decay(tf.keras.callbacks.Callback):\n"
        "    def on_epoch_end(self, epoch, logs=None):\n"
        "        self.model.optimizer.learning_rate = 0.5 * self.model.optimizer.learning_rate\n",
        # a callback that sets clipping before the first step
        "import tensorflow as tf\nclass Clip(tf.keras.callbacks.Callback):\n"
        "    def on_train_begin(self, logs=None):\n        self.model.optimizer.clipnorm = 1.0\n",
        # the name is rebound, but compile is called again with it
        "import tensorflow as tf\nopt = tf.keras.optimizers.Adam()\nmodel.compile(optimizer=opt, loss='mse')\n"
        "opt = tf.keras.optimizers.Adam(clipnorm=1.0)\nmodel.compile(optimizer=opt, loss='mse')\nmodel.fit(x, y)\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\nmodel.compile(optimizer='adam', loss='mse')\nmodel.fit(x, y)\n"
                "model.optimizer.clipnorm = 1.0\nmodel.fit(x, y)\n", 4, "silently ignored", "error"),
        Invalid("import tensorflow as tf\nopt = tf.keras.optimizers.Adam()\nmodel.compile(optimizer=opt, loss='mse')\n"
                "opt.clipvalue = 0.5\nmodel.fit(x, y)\n", 4, "takes effect only because", "warning"),
        Invalid("import keras\ndef train(model, data):\n    opt = keras.optimizers.SGD(0.1)\n"
                "    model.compile(opt, loss='mse')\n    for epoch in range(10):\n"
                "        model.fit(data, epochs=1)\n        setattr(model.optimizer, 'global_clipnorm', 1.0)\n",
                7, None, "error"),
        Invalid("import tensorflow as tf\nmodel.compile(optimizer='adam', loss='mse')\nmodel.fit(x, y)\n"
                "model.optimizer = tf.keras.optimizers.Adam(clipnorm=1.0)\nmodel.fit(x, y)\n"
                "", 4, "old optimizer", "error"),
        Invalid("import tensorflow as tf\nopt = tf.keras.optimizers.Adam()\nmodel.compile(optimizer=opt, loss='mse')\n"
                "opt = tf.keras.optimizers.Adam(clipnorm=1.0)\nmodel.fit(x, y)\n", 4, "never", "error"),
        Invalid("import tensorflow as tf\nclass Clip(tf.keras.callbacks.Callback):\n"
                "    def on_epoch_end(self, epoch, logs=None):\n"
                "        if epoch == 5:\n            self.model.optimizer.clipnorm = 1.0\n"
                "", 5, "on_epoch_end", "error"),
        # any Keras callback class, not only `Callback` itself
        Invalid("from tensorflow import keras\nclass Stop(keras.callbacks.EarlyStopping):\n"
                "    def on_epoch_end(self, epoch, logs=None):\n"
                "        self.model.optimizer = keras.optimizers.SGD(0.01)\n",
                4, "on_epoch_end", "error"),
        # setattr in a callback's hook
        Invalid("import tensorflow as tf\nclass C(tf.keras.callbacks.Callback):\n"
                "    def on_epoch_begin(self, epoch, logs=None):\n"
                "        setattr(self.model.optimizer, 'clipnorm', 1.0 / (epoch + 1))\n", 4, "on_epoch_begin"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return bool(facts.stored_attributes & {*CLIP_OPTIONS, "optimizer"}) or facts.has("setattr") or (
            facts.has("compile") and _rebinds_compiled_optimizer(facts))

    def check(self, ctx: Context) -> Iterator[Report]:
        by_scope: Dict[Optional[cst.CSTNode], List[Event]] = {}
        for event in self._events(ctx):
            by_scope.setdefault(ctx.flow.scope_of(event.node), []).append(event)
        for events in by_scope.values():
            events.sort(key=lambda e: ctx.pre[e.node])
            yield from self._after_compile(ctx, events)
        yield from self._callback_changes(ctx)

    # --- events -------------------------------------------------------------------------

    def _events(self, ctx: Context) -> Iterator[Event]:
        for call in ctx.nodes(cst.Call):
            func = call.func
            if not isinstance(func, cst.Attribute) or ctx.imports.qualify(func.value) is not None:
                continue
            model, method = ctx.text(func.value), func.attr.value
            if method == "compile":
                optimizer = arg(call, 0, "optimizer")
                if optimizer is not None:
                    eager = arg(call, 99, "run_eagerly")
                    yield Event("compile", model, call, optimizer=ctx.text(optimizer),
                                eager=isinstance(eager, cst.Name) and eager.value == "True")
            elif method in TRAINING:
                yield Event("train", model, call)
            elif method == "make_train_function":
                yield Event("reset", model, call)
        for call in ctx.nodes(cst.Call):
            if isinstance(call.func, cst.Name) and call.func.value == "setattr" and len(call.args) >= 2:
                option = ctx.flow.constant(call.args[1].value)
                if option in CLIP_OPTIONS:
                    yield from self._option_change(ctx, call, call.args[0].value, option)
        for assign in ctx.nodes(cst.Assign):
            target = assign.targets[0].target
            if isinstance(target, cst.Attribute):
                if target.attr.value in CLIP_OPTIONS:
                    yield from self._option_change(ctx, assign, target.value, target.attr.value)
                elif target.attr.value == "optimizer":
                    yield Event("change", ctx.text(target.value), assign, change=OptimizerReplaced)
                elif target.attr.value == "train_function":
                    yield Event("reset", ctx.text(target.value), assign)
            elif isinstance(target, cst.Name) and isinstance(assign.value, cst.Call) \
                    and ctx.call_name(assign.value) in OPTIMIZER_CLASSES:
                yield Event("change", "", assign, change=OptimizerRebound, optimizer=target.value)

    def _option_change(self, ctx: Context, node, holder, option) -> Iterator[Event]:
        if isinstance(holder, cst.Attribute) and holder.attr.value == "optimizer":
            yield Event("change", ctx.text(holder.value), node, change=OptionChanged, option=option)
        elif isinstance(holder, (cst.Name, cst.Attribute)):  # `opt.clipnorm = ...`, `self.opt.clipnorm = ...`
            yield Event("change", "", node, change=OptionChanged, option=option, optimizer=ctx.text(holder))

    # --- ordering -----------------------------------------------------------------------

    def _after_compile(self, ctx: Context, events: List[Event]) -> Iterator[Report]:
        for i, compiled in enumerate(events):
            if compiled.kind != "compile" or compiled.eager:
                continue
            trained = False
            for j in range(i + 1, len(events)):
                event = events[j]
                if event.model == compiled.model and event.kind in ("compile", "reset"):
                    break
                if event.model == compiled.model and event.kind == "train":
                    trained = True
                if event.kind == "change" and self._targets(event, compiled):
                    report = self._judge(ctx, compiled, event, trained, events, j)
                    if report is not None:
                        yield report

    @staticmethod
    def _targets(change: Event, compiled: Event) -> bool:
        if change.model:
            return change.model == compiled.model
        return change.optimizer == compiled.optimizer

    def _judge(self, ctx, compiled: Event, change: Event, trained: bool, events: List[Event], at: int):
        following = next((e for e in events[at + 1:] if e.model == compiled.model and e.kind != "change"), None)
        if following is not None and following.kind in ("compile", "reset"):
            return None  # re-traced before the next step: the change takes effect
        # In a loop that also trains, the next iteration's fit comes after the change.
        in_loop = any(
            e.kind == "train" and e.model == compiled.model and ctx.encloses(loop, e.node)
            for loop in ctx.ancestors(change.node) if isinstance(loop, (cst.For, cst.While))
            for e in events)
        model = compiled.model
        probe = (change.change or OptionChanged)(ctx.flow.snippet(change.node), trained or in_loop, change.option,
                                                 ctx.flow.snippet(compiled.node))
        if change.change is OptimizerRebound:
            if following is None:
                return None
            return Report(change.node, (
                f"`{change.optimizer}` is rebound to a new optimizer after `{model}.compile(...)` received "
                f"the old one: the model never sees the new object, so its settings never apply. "
                f"Pass it to `{model}.compile(optimizer=...)` again."), severity="error", probe=probe)
        what = f"`{change.option}`" if change.change is OptionChanged else f"`{model}.optimizer`"
        if trained or in_loop:
            effect = ("the traced train function keeps the old optimizer (the new one's `iterations` "
                      "stays 0)" if change.change is OptimizerReplaced else
                      "the train function traced by the first step keeps the old value")
            return Report(change.node, (
                f"{what} is changed after `{model}.fit(...)` already ran: {effect}, so the change is "
                f"silently ignored in Keras 3 and tf-keras. Set it in the optimizer's constructor, or "
                f"call `{model}.compile(...)` again after the change."), severity="error", probe=probe)
        return Report(change.node, (
            f"{what} is changed after `{model}.compile(...)`: it takes effect only because no training "
            f"step has run yet; the same line after a `fit` is silently ignored. Set it in the "
            f"optimizer's constructor."), severity="warning", probe=probe)

    # --- callbacks ----------------------------------------------------------------------

    def _callback_changes(self, ctx: Context) -> Iterator[Report]:
        for cls in ctx.nodes(cst.ClassDef):
            if not any((ctx.qualify(base.value) or "").startswith("keras.callbacks.") for base in cls.bases):
                continue
            for method in cls.body.body:
                if isinstance(method, cst.FunctionDef) and method.name.value in BATCH_HOOKS:
                    yield from self._hook_changes(ctx, method)

    def _hook_changes(self, ctx: Context, method: cst.FunctionDef) -> Iterator[Report]:
        for assign, holder_written, attribute in self._attribute_sets(ctx, method):
            holder = ctx.flow.value_of(holder_written)
            holder_text = ctx.text(holder)
            if attribute in CLIP_OPTIONS and holder_text == "self.model.optimizer":
                what = f"`{attribute}` on `self.model.optimizer`"
            elif attribute == "optimizer" and ctx.text(holder_written) == "self.model":
                what = "`self.model.optimizer`"
            else:
                continue
            yield Report(assign, (
                f"changing {what} in `{method.name.value}` is silently ignored: the train function was "
                f"traced at the first step with the old setting. Set it before training (constructor or "
                f"`on_train_begin`), or recompile."), severity="error",
                probe=CallbackChange(ctx.flow.snippet(assign), trained_before=True, option=attribute))

    @staticmethod
    def _attribute_sets(ctx: Context, method: cst.FunctionDef) -> Iterator[Tuple[cst.CSTNode, cst.BaseExpression, str]]:
        """(statement, holder, attribute) for each attribute set in `method`: `x.attr = v`, and
        `setattr(x, "attr", v)` with a constant name."""
        for assign in ctx.nodes(cst.Assign):
            target = assign.targets[0].target
            if ctx.encloses(method, assign) and isinstance(target, cst.Attribute):
                yield assign, target.value, target.attr.value
        for call in ctx.nodes(cst.Call):
            if ctx.encloses(method, call) and isinstance(call.func, cst.Name) and call.func.value == "setattr" \
                    and len(call.args) >= 2 and isinstance(name := ctx.flow.constant(call.args[1].value), str):
                yield call, call.args[0].value, name
