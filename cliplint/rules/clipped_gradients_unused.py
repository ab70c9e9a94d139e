"""CL007 clipped-gradients-unused."""
from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import UNSAFE, Fix, Report
from ..flow.carriers import collected
from ..flow.gradients import APPLY_METHODS, applied, reached_by
from ..flow.nodes import arg, target_names, walk
from ..flow.snippets import Roles, appended_lists, enclosing_for, probe_roles
from ..probes import Discarded, Name, Unused
from ..replacements import block_encloses
from . import Invalid, Rule

CLIPS = {"tensorflow.clip_by_norm", "tensorflow.clip_by_value", "tensorflow.clip_by_global_norm"}
CLIP_CALLS = frozenset(CLIPS)


def _discarded(ctx: Context, call: cst.Call) -> bool:
    """`tf.clip_by_norm(g, c)` as a statement of its own: TF ops never work in place."""
    parent = ctx.parent.get(call)
    return isinstance(parent, cst.Expr) and ctx.call_name(call) in CLIPS


def _clipped_but_original_kept(ctx: Context, call: cst.Call) -> Optional[Tuple[str, str]]:
    """(clipped name, original name) for `c_g = tf.clip_by_norm(g, c)` whose result is never
    read, while `g` itself is gathered into a list afterwards in the same loop body or block
    (`carriers.collected`: appended, alone or in a pair, or stored back)."""
    assign = ctx.parent.get(call)
    original = arg(call, 0, "t")
    if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name) and isinstance(original, cst.Name)
            and ctx.call_name(call) in CLIPS):
        return None
    clipped = assign.targets[0].target.value
    if clipped in ("_", original.value) or ctx.flow.uses_after(clipped, assign):
        return None
    block = _iteration(ctx, assign)
    later = [use for use in ctx.flow.uses_after(original.value, assign)
             if ctx.encloses(block, use) and ctx.flow.binding_of(use) == ctx.flow.binding_of(original)
             and collected(ctx.flow, use, block) is not None]
    return (clipped, original.value) if later else None


def _iteration(ctx: Context, assign: cst.Assign) -> cst.CSTNode:
    """Where a later `append(g)` still belongs to the same element: the body of the innermost loop
    around the assignment (`if sparse: c_g = ... else: c_g = ...` then `clipped.append(g)`), else
    the assignment's own block."""
    for ancestor in ctx.ancestors(assign):
        if isinstance(ancestor, (cst.For, cst.While)):
            return ancestor.body
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            break
    return ctx.parent.get(ctx.parent.get(assign) or assign) or assign  # a statement's line, then its block


def _discarded_probe(ctx: Context, call: cst.Call, kept: Optional[str]) -> Discarded:
    """What the verifier replays for a clip whose result is lost: the loop around it (or its own
    statement) on stand-in gradients, then what is left of them: the iterated list, or the list
    the unclipped `kept` tensor is appended to."""
    loop = enclosing_for(ctx.flow, call)
    line = ctx.parent.get(call)  # an expression statement: the call's line, then its block
    statement = loop or (ctx.parent.get(line) if line is not None else None) or call
    tensor = arg(call, 0, "t") or arg(call, 0, "t_list")
    return Discarded(ctx.flow.snippet(statement), ctx.flow.snippet(call),
                     tensor=Name(ctx.text(tensor)) if isinstance(tensor, cst.Name) else None,
                     kept=Name(kept) if kept else None, appends=appended_lists(loop),
                     **(probe_roles(ctx.flow.gradients, loop.iter) if loop is not None else {}))


def _sliced(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The list a slice or an item is taken of (`grads` of `grads[offset:]`)."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr


def _same_path(ctx: Context, clip: cst.CSTNode, apply: cst.CSTNode) -> bool:
    """False when the clip and the apply sit in different branches of one `if`."""
    for anc in ctx.ancestors(clip):
        if isinstance(anc, cst.If) and ctx.encloses(anc, apply):
            branch = anc.body if ctx.encloses(anc.body, clip) else anc.orelse
            return branch is not None and ctx.encloses(branch, apply)
    return True


class ClippedGradientsUnused(Rule):
    code = "CL007"
    name = "clipped-gradients-unused"
    summary = "Clipped gradients are computed, but `apply_gradients` receives the unclipped list."
    severity = "error"
    tokens = (b"clip_by",)
    why = """
        The clipped list gets a new name, and the `apply_gradients` call below still uses the
        old one. Nothing fails: the clipping is computed and thrown away, and training runs
        unclipped, which is exactly what the clipping was added to prevent (the run diverges on
        the first gradient spike). A variant computes the clipped list in an `if` and applies the
        unclipped list after it.
    """
    example = """
        grads = tape.gradient(loss, model.trainable_variables)
        clipped, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    """
    instead = """
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    """
    fixes = """
        **Unsafe** (training changes, as intended): the apply call receives the clipped name.
        Not offered when the clip sits in a branch or loop the apply call is not in.
    """
    VALID = [
        "import tensorflow as tf\ngrads = tape.gradient(loss, vs)\nclipped, _ = tf.clip_by_global_norm(grads, 1.0)\n"
        "opt.apply_gradients(zip(clipped, vs))\n",
        # the clipped tensor is the one kept
        "import tensorflow as tf\nkept = []\nfor g in grads:\n    c_g = tf.clip_by_norm(g, 1.0)\n"
        "    kept.append(c_g)\nopt.apply_gradients(zip(kept, vs))\n",
        # a user's own clip function may work in place
        "import tensorflow as tf\ndef clip_by_norm(g, c):\n    g *= 0\nfor g in grads:\n    clip_by_norm(g, 1.0)\n",
        # only the norm is wanted (for logging): the clipped list is discarded on purpose
        "import tensorflow as tf\ngrads = tape.gradient(loss, vs)\n_, norm = tf.clip_by_global_norm(grads, 1.0)\n"
        "tf.summary.scalar('grad_norm', norm)\nopt.apply_gradients(zip(grads, vs))\n",
        # clipped on one path, unclipped on the other, on purpose
        "import tensorflow as tf\ngrads = tape.gradient(loss, vs)\nif clip:\n"
        "    clipped, _ = tf.clip_by_global_norm(grads, 1.0)\n    opt.apply_gradients(zip(clipped, vs))\n"
        "else:\n    opt.apply_gradients(zip(grads, vs))\n",
        # the name is rebound: the apply sees the clipped list
        "import tensorflow as tf\ngrads = tape.gradient(loss, vs)\nif clip:\n"
        "    grads, _ = tf.clip_by_global_norm(grads, 1.0)\nopt.apply_gradients(zip(grads, vs))\n",
        # the clipped list is applied after another step
        "import tensorflow as tf\ngrads = tape.gradient(loss, vs)\nclipped = [tf.clip_by_norm(g, 1.0) for g in grads]\n"
        "pairs = list(zip(clipped, vs))\nopt.apply_gradients(pairs)\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\ngrads = tape.gradient(loss, vs)\n"
                "clipped, _ = tf.clip_by_global_norm(grads, 1.0)\n"
                "opt.apply_gradients(zip(grads, vs))\n", 4, "unclipped"),
        # the unclipped list applied in slices, one optimizer per part of the model
        Invalid("import tensorflow as tf\ngrads = tf.gradients(loss, params)\n"
                "clipped, _ = tf.clip_by_global_norm(grads, 5.0)\ngrad_cnn = grads[:n]\n"
                "cnn_train = cnn_op.apply_gradients(zip(grad_cnn, params[:n]))\n", 5),
        Invalid("import tensorflow as tf\ndef step(x):\n    with tf.GradientTape() as tape:\n        loss = model(x)\n"
                "    gradients = tape.gradient(loss, model.trainable_variables)\n"
                "    if CLIP:\n        capped = [tf.clip_by_norm(g, 5.0) for g in gradients]\n"
                "    optimizer.apply_gradients(zip(gradients, model.trainable_variables))\n", 8),
        Invalid("import tensorflow as tf\ngrads = tf.gradients(loss, params)\n"
                "clipped_grads = tf.clip_by_global_norm(grads, 5.0)[0]\n"
                "train_op = opt.apply_gradients(zip(grads, params))\n", 4),
        # the clip in one branch of the loop body, the unclipped gradient appended after the branch
        Invalid("import tensorflow as tf\ngrads = tf.gradients(loss, params)\nclipped = []\nfor g in grads:\n"
                "    if isinstance(g, tf.IndexedSlices):\n        c_g = tf.IndexedSlices(g.indices, g.values)\n"
                "    else:\n        c_g = tf.clip_by_norm(g, 5.0)\n    clipped.append(g)\n"
                "train_op = opt.apply_gradients(zip(clipped, params))\n", 8, "never used"),
        # no threshold written (TF raises TypeError there): still the unclipped list applied, and no crash
        Invalid("import tensorflow as tf\ngrads = tape.gradient(loss, vs)\n"
                "clipped = [tf.clip_by_norm(g) for g in grads]\nopt.apply_gradients(zip(grads, vs))\n", 4, "unclipped"),
        Invalid("import tensorflow as tf\ngrads = tape.gradient(loss, vs, unconnected_gradients='zero')\n"
                "for g in grads:\n    tf.clip_by_norm(g, 15)\nopt.apply_gradients(zip(grads, vs))\n", 4, "thrown away"),
        Invalid("import tensorflow as tf\nkept = []\nfor g in grads:\n    c_g = tf.clip_by_norm(g, 1.0)\n"
                "    kept.append(g)\nopt.apply_gradients(zip(kept, vs))\n", 4, "never used"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        return facts.refers_to(CLIP_CALLS)  # every report is about a clip's result

    def check(self, ctx: Context) -> Iterator[Report]:
        yield from self._thrown_away(ctx)
        applies = [c for c in ctx.nodes(cst.Call) if isinstance(c.func, cst.Attribute)
                   and c.func.attr.value in APPLY_METHODS]
        if not applies:
            return
        for assign in ctx.nodes(cst.Assign):
            found = ctx.flow.gradients.clipping(assign)
            if found is None:
                continue
            clipped, source, call = found
            if self._clipped_is_applied(ctx, assign, clipped):
                continue
            for apply in self._unclipped_applies(ctx, assign, source, applies):
                yield self._report(ctx, assign, apply, clipped, source, call)

    @staticmethod
    def _thrown_away(ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            if _discarded(ctx, call):
                yield Report(call, (
                    f"the result of `{ctx.text(call.func)}(...)` is thrown away: TensorFlow ops return a new "
                    f"tensor and never change their input, so nothing is clipped and training runs unclipped. "
                    f"Assign the result and use it (`g = {ctx.text(call.func)}(g, ...)`)."),
                    probe=_discarded_probe(ctx, call, None))
                continue
            kept = _clipped_but_original_kept(ctx, call)
            if kept is not None:
                clipped, original = kept
                yield Report(call, (
                    f"`{clipped}` holds the clipped tensor but is never used: `{original}`, the unclipped one, is "
                    f"what is kept afterwards, so training runs unclipped with no error. Use `{clipped}`."),
                    probe=_discarded_probe(ctx, call, original))

    @staticmethod
    def _clipped_is_applied(ctx: Context, assign: cst.Assign, clipped: str) -> bool:
        return any(applied(ctx.flow, name) for name, _ in target_names(assign.targets[0].target)
                   if name.value == clipped)

    @staticmethod
    def _unclipped_applies(ctx: Context, assign, source: cst.Name, applies) -> List[cst.Call]:
        before = ctx.flow.binding_of(source)
        scope = ctx.flow.scope_of(assign)
        found = []
        for apply in applies:
            if ctx.pre[apply] < ctx.post[assign] or ctx.flow.scope_of(apply) is not scope \
                    or not _same_path(ctx, assign, apply):
                continue
            # also `gvs = list(zip(grads, v))`, and a slice of the list (`grad_cnn = grads[:n]`)
            if any(isinstance(n, cst.Name) and n.value == source.value and ctx.flow.binding_of(n) == before
                   for n in (*walk(apply), *map(_sliced, reached_by(ctx.flow, apply)))):
                found.append(apply)
        return found

    def _report(self, ctx: Context, assign, apply: cst.Call, clipped: str, source: cst.Name, call) -> Report:
        line = ctx.text(assign).strip().splitlines()[0]
        applied = apply.args[0].value if apply.args else apply
        roles: Roles = probe_roles(ctx.flow.gradients, applied) if isinstance(applied, cst.Call) else {}
        roles["gradients"] = Name(source.value)
        threshold = arg(call, 1, "clip_norm") if call is not None else None  # absent: TF raises TypeError
        return Report(apply, (
            f"`{ctx.text(apply.func)}` receives `{source.value}`, the unclipped gradients: the clipped list "
            f"`{clipped}` (from `{line}`) is never applied, so training runs unclipped with no error. "
            f"Pass `{clipped}` instead."),
            probe=Unused(ctx.flow.snippet(assign), ctx.flow.snippet(applied),
                         ctx.flow.snippet(threshold) if threshold is not None else None,
                         **roles),
            fix=self._fix(ctx, assign, apply, clipped, source))

    @staticmethod
    def _fix(ctx: Context, assign, apply: cst.Call, clipped: str, source: cst.Name) -> Optional[Fix]:
        """Pass the clipped list: every use of the unclipped name in the apply call becomes the
        clipped one. Unsafe: training changes (as intended). Not offered when the clip is in a
        branch or loop the apply is not in (the clipped name may not exist there)."""
        if not block_encloses(ctx, assign, apply):
            return None
        before = ctx.flow.binding_of(source)
        uses = [n for n in walk(apply) if isinstance(n, cst.Name) and n.value == source.value
                and ctx.flow.binding_of(n) == before]
        return Fix(f"apply the clipped gradients `{clipped}`", UNSAFE,
                   tuple((use, use.with_changes(value=clipped)) for use in uses)) if uses else None
