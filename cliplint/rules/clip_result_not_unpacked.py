"""CL006 clip-result-not-unpacked."""
from __future__ import annotations

from typing import Iterator, NamedTuple, Optional, Tuple

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import SAFE, Fix, Report
from ..flow.gradients import APPLY_METHODS
from ..flow.nodes import arg
from ..flow.snippets import origin_name
from ..probes import Name, NotUnpacked
from . import Invalid, Rule

CLIP = "tensorflow.clip_by_global_norm"
CLIP_CALLS = frozenset({CLIP})


class Assigned(NamedTuple):
    """The pair bound to one name (`grads = tf.clip_by_global_norm(...)`)."""

    assign: cst.Assign
    name: str


def _gradient_use(ctx: Context, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The call, loop or comprehension where a value is used as a list of gradients: zip,
    apply, iteration."""
    parent = ctx.parent.get(node)
    if isinstance(parent, cst.Arg):
        call = ctx.parent.get(parent)
        func = call.func if isinstance(call, cst.Call) else None  # not a class's base
        if isinstance(func, cst.Name) and func.value in ("zip", "list", "map", "enumerate"):
            return call
        if isinstance(func, cst.Attribute) and func.attr.value in APPLY_METHODS:
            return call
    if isinstance(parent, cst.For) and parent.iter is node:
        return parent
    if isinstance(parent, cst.CompFor) and parent.iter is node:
        return ctx.parent.get(parent)  # what the probe replays: the comprehension (or outer loop)
    return None


class ClipResultNotUnpacked(Rule):
    code = "CL006"
    name = "clip-result-not-unpacked"
    summary = "The `(clipped, global_norm)` tuple of `tf.clip_by_global_norm` is used as the gradient list."
    severity = "error"
    tokens = (b"clip_by_global_norm",)
    why = """
        `tf.clip_by_global_norm(t_list, clip_norm)` returns a pair: the clipped list and the
        global norm. Assigned to one name, or passed straight on, the pair is used as if it were
        the list: `zip(grads, variables)` pairs the whole clipped list with the first variable and
        the norm with the second, and drops the rest. It always fails, but later and with errors
        that never mention clipping: `Shapes of all inputs must match` (Pack),
        `Cannot update variable with shape [2] using a Tensor with shape [1,2]`, or, with
        tf-keras SGD, `bad operand type for unary -: 'list'`.
    """
    example = """
        grads = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    """
    instead = """
        grads, global_norm = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    """
    fixes = """
        **Safe**: `grads = tf.clip_by_global_norm(grads, c)` becomes
        `grads, _ = tf.clip_by_global_norm(grads, c)`; a call passed straight on gets `[0]`.
        Not offered when the name is also indexed (`pair[1]` wants the norm).
    """
    VALID = [
        "import tensorflow as tf\ngrads, _ = tf.clip_by_global_norm(grads, 1.0)\nopt.apply_gradients(zip(grads, vs))\n",
        "import tensorflow as tf\ngrads = tf.clip_by_global_norm(grads, 1.0)[0]\nopt.apply_gradients(zip(grads, vs))\n",
        "import tensorflow as tf\n(clipped, norm) = tf.clip_by_global_norm(grads, 5.0)\nfor g in clipped:\n    pass\n",
        # the pair kept on purpose and unpacked later
        "import tensorflow as tf\nresult = tf.clip_by_global_norm(grads, 1.0)\nclipped, norm = result\n"
        "opt.apply_gradients(zip(clipped, vs))\n",
        # optax has its own clip_by_global_norm (a transformation, not a tuple)
        "import optax\nclip = optax.clip_by_global_norm(1.0)\nopt = optax.chain(clip, optax.adam(1e-3))\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\ngrads = tf.clip_by_global_norm(grads, 1.0)\n"
                "opt.apply_gradients(zip(grads, model.trainable_variables))\n", 2, "returns a pair"),
        Invalid("import tensorflow as tf\n"
                "opt.apply_gradients(zip(tf.clip_by_global_norm(grads, 1.0), model.trainable_variables))\n", 2),
        Invalid("from tensorflow import clip_by_global_norm\nclipped = clip_by_global_norm(grads, 1.0)\n"
                "capped = [g * 0.5 for g in clipped]\n", 2),
        # a helper returns the pair
        Invalid("import tensorflow as tf\ndef clip(grads):\n    return tf.clip_by_global_norm(grads, 1.0)\n"
                "grads = clip(tape.gradient(loss, tvars))\nopt.apply_gradients(zip(grads, tvars))\n", 3),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.refers_to(CLIP_CALLS)

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            if ctx.call_name(call) != CLIP:
                continue
            found = self._used_as_list(ctx, call)
            if found is None and isinstance(ctx.parent.get(call), cst.Return):  # a helper returns the pair
                function = next((a for a in ctx.ancestors(call) if isinstance(a, cst.FunctionDef)), None)
                sites = ctx.flow.call_sites(function) if function is not None else []
                found = next(filter(None, (self._used_as_list(ctx, site, helper=True) for site in sites)), None)
            if found is not None:
                yield self._report(ctx, call, *found)

    @staticmethod
    def _used_as_list(ctx: Context, holder: cst.Call, helper: bool = False
                      ) -> Optional[Tuple[Optional[Assigned], cst.CSTNode]]:
        """(where the pair is assigned, the gradient use) when the pair `holder` makes (the clip,
        or a call of a helper returning it) is assigned to one name then used as the gradient
        list, or passed straight to such a use (not for a helper: its `[0]` would change it)."""
        parent = ctx.parent.get(holder)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 \
                and isinstance(parent.targets[0].target, cst.Name):
            name = parent.targets[0].target.value
            uses = [u for u in ctx.flow.uses_after(name, parent)
                    if getattr(ctx.flow.binding_of(u), "owner", None) is parent]
            use = next(filter(None, (_gradient_use(ctx, u) for u in uses)), None)
            return (Assigned(parent, name), use) if use is not None else None
        if isinstance(parent, cst.Arg) and not helper:
            use = _gradient_use(ctx, holder)
            return (None, use) if use is not None else None
        return None

    @staticmethod
    def _fix(ctx: Context, call: cst.Call, assigned: Optional[Assigned]) -> Optional[Fix]:
        """Unpack the pair where it is assigned, or take its first element where it is passed on.
        Not offered when some use of the name indexes it (`pair[1]` wants the norm)."""
        if assigned is None:
            zero = cst.SubscriptElement(cst.Index(cst.Integer("0")))
            return Fix("take the clipped list: `clip_by_global_norm(...)[0]`", SAFE,
                       ((call, cst.Subscript(value=call, slice=[zero])),))
        assign, name = assigned
        uses = ctx.flow.uses_after(name, assign)
        if any(isinstance(ctx.parent.get(u), cst.Subscript) for u in uses):
            return None
        target = assign.targets[0].target
        pair = cst.Tuple([cst.Element(target), cst.Element(cst.Name("_"))], lpar=[], rpar=[])
        # the whole assignment is replaced, not the name: the verifier replays the fix on the
        # probe's snippets by their text, and a bare name occurs in more places than its binding
        unpacked = assign.with_changes(targets=[assign.targets[0].with_changes(target=pair)])
        return Fix(f"unpack the pair: `{name}, _ = clip_by_global_norm(...)`", SAFE, ((assign, unpacked),))

    def _report(self, ctx: Context, call: cst.Call, assigned: Optional[Assigned], use: cst.CSTNode) -> Report:
        name = assigned.name if assigned is not None else None
        shown = f"`{name}` holds" if name else "this passes on"
        fix = f"`{name}, global_norm = tf.clip_by_global_norm(...)`" if name else "`tf.clip_by_global_norm(...)[0]`"
        t_list = arg(call, 0, "t_list")
        grads = ctx.flow.gradient_list(t_list)
        return Report(call, (
            f"`tf.clip_by_global_norm` returns a pair (clipped list, global norm); {shown} the pair, which is then "
            f"used as the gradient list: zip pairs the whole list with the first variable and the norm with the "
            f"second. It fails later with shape errors (or `bad operand type for unary -: 'list'`) that never "
            f"mention clipping. Unpack it: {fix}."),
            probe=NotUnpacked(
                use=ctx.flow.snippet(use),
                statement=ctx.flow.snippet(assigned.assign) if assigned is not None else None,
                gradients=(Name(ctx.text(t_list)) if isinstance(t_list, cst.Name)
                           else origin_name(ctx.flow, grads) if grads else None)),
            fix=self._fix(ctx, call, assigned))

