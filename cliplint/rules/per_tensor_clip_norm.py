"""CL003 per-tensor-clip-norm."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import UNSAFE, Fix, Report
from ..flow.carriers import collected
from ..flow.gradients import Element, applied
from ..flow.nodes import arg, walk
from ..flow.snippets import appended_lists, element_roles, loop_node
from ..probes import Name, PerTensor
from ..replacements import renamed_callee
from . import Invalid, Rule


class PerTensorClipNorm(Rule):
    code = "CL003"
    name = "per-tensor-clip-norm"
    summary = "`tf.clip_by_norm` is applied to each gradient separately before `apply_gradients`."
    severity = "warning"
    tokens = (b"clip_by_norm",)
    why = """
        `tf.clip_by_norm(g, c)` bounds one tensor. Applied to every gradient of a model it bounds
        each variable's gradient on its own: the whole update can still have a global norm of
        sqrt(n) x c for n variables, and layers with small gradients are scaled up relative to
        the others, so the update's direction changes (cosine 0.71 to the raw gradient for
        per-variable norms 1000 and 10, 0.55 for five layers of scales 1e3 to 1e-1). Code written
        this way usually meant to bound the update, which is what `tf.clip_by_global_norm` does:
        it rescales all gradients by one factor and keeps the direction.

        Keras' `clipnorm=` is per-variable too (only `global_clipnorm=` is global), so if
        per-variable clipping is what you want, saying `clipnorm=` makes that explicit.

        Not reported: a loop over `(grad, var)` pairs that tests each gradient for None before
        clipping it (`for grad, var in gvs: if grad is not None: ...`). Code that handles each
        `(grad, var)` pair on its own, frozen variables included, clips per variable on
        purpose: the long-standing TF 1 idiom of baselines' DQN (`grad_norm_clipping`),
        MADDPG's `minimize_and_clip` and the GGNN samples, whose thresholds were tuned per
        variable. A comprehension's `if g is not None` only drops the frozen variables, and is
        reported.

        The update may also be one flat vector of every gradient (`tf.concat([tf.reshape(g,
        [-1]) ...], 0)`, baselines' `flatgrad`), which an MPI Adam or a conjugate gradient step
        applies: clipping each gradient before it is flattened bounds it no better.
    """
    example = """
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [tf.clip_by_norm(g, 1.0) for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    """
    instead = """
        grads = tape.gradient(loss, model.trainable_variables)
        grads, global_norm = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    """
    fixes = """
        **Unsafe** (it changes the training dynamics, as intended):
        `[tf.clip_by_norm(g, c) for g in grads]` becomes `tf.clip_by_global_norm(grads, c)[0]`.
        Only for a plain comprehension over a named list; loops that append, `map` and filtered
        comprehensions are left to you.
    """
    VALID = [
        "import tensorflow as tf\n"
        "grads = tape.gradient(loss, model.trainable_variables)\n"
        "grads, _ = tf.clip_by_global_norm(grads, 1.0)\n"
        "opt.apply_gradients(zip(grads, model.trainable_variables))\n",
        # a max-norm constraint on one embedding matrix, not a gradient
        "import tensorflow as tf\nemb.assign(tf.clip_by_norm(emb, 1.0, axes=[1]))\n",
        # clipped copies that are only logged, never applied
        "import tensorflow as tf\n"
        "def step(x):\n"
        "    with tf.GradientTape() as tape:\n        loss = model(x)\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n"
        "    norms = [tf.norm(tf.clip_by_norm(g, 1.0)) for g in grads if g is not None]\n"
        "    tf.summary.scalar('n', tf.add_n(norms))\n",
        # PyTorch's per-parameter clipping is a different library
        "import torch\nfor p in model.parameters():\n    torch.nn.utils.clip_grad_norm_(p, 1.0)\n",
        # a helper that clips with the global norm
        "import tensorflow as tf\ndef clip_all(gs):\n    return tf.clip_by_global_norm(gs, 1.0)[0]\n"
        "grads = clip_all(tape.gradient(loss, vs))\nopt.apply_gradients(zip(grads, vs))\n",
        # each (grad, var) pair handled on its own, None included: per-variable on purpose (TF 1 DQN)
        "import tensorflow.compat.v1 as tf\n"
        "gvs = optimizer.compute_gradients(loss, var_list=q_vars)\n"
        "for i, (grad, var) in enumerate(gvs):\n"
        "    if grad is not None:\n"
        "        gvs[i] = (tf.clip_by_norm(grad, grad_norm_clipping), var)\n"
        "train_op = optimizer.apply_gradients(gvs)\n",
        # a helper that clips a copy for a summary and returns the gradient as it was
        "import tensorflow as tf\ndef logged(grad):\n"
        "    tf.summary.histogram('clipped', tf.clip_by_norm(grad, 5.0))\n    return grad\n"
        "grads = [logged(g) for g in tape.gradient(loss, vs)]\nopt.apply_gradients(zip(grads, vs))\n",
        # a user's own clip_by_norm
        "import tensorflow as tf\ndef clip_by_norm(g, c): return g\n"
        "grads = tape.gradient(loss, vs)\nopt.apply_gradients(zip([clip_by_norm(g, 1.0) for g in grads], vs))\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\n"
                "grads = tape.gradient(loss, model.trainable_variables)\n"
                "grads = [tf.clip_by_norm(g, 1.0) for g in grads]\n"
                "opt.apply_gradients(zip(grads, model.trainable_variables))\n", 3, "tf.clip_by_global_norm"),
        Invalid("import tensorflow as tf\n"
                "@tf.function\ndef train_step(x, y):\n"
                "    with tf.GradientTape() as tape:\n        loss = loss_fn(y, model(x))\n"
                "    gradients = tape.gradient(loss, model.trainable_variables)\n"
                "    clipped = []\n"
                "    for g in gradients:\n        clipped.append(tf.clip_by_norm(g, 5.0))\n"
                "    optimizer.apply_gradients(zip(clipped, model.trainable_variables))\n", 9),
        Invalid("import tensorflow.compat.v1 as tf\n"
                "gvs = optimizer.compute_gradients(loss)\n"
                "capped = [(tf.clip_by_norm(g, 5.0), v) for g, v in gvs if g is not None]\n"
                "train_op = optimizer.apply_gradients(capped)\n", 3),
        # TF 1 pairs updated in place
        # the pair bound to one name, its gradient taken by index
        Invalid("import tensorflow.compat.v1 as tf\ngrads_and_vars = opt.compute_gradients(loss, params)\n"
                "clipped = [(tf.clip_by_norm(gv[0], 40.0), gv[1]) for gv in grads_and_vars]\n"
                "train_op = opt.apply_gradients(clipped)\n", 3),
        Invalid("import tensorflow as tf\ngvs = opt.compute_gradients(loss)\n"
                "for i, (g, v) in enumerate(gvs):\n"
                "    gvs[i] = (tf.clip_by_norm(g, 10.0), v)\n"
                "train_op = opt.apply_gradients(gvs)\n", 4),
        # a helper that clips each gradient, called on the tape's gradients
        Invalid("import tensorflow as tf\ndef clip_each(gs):\n"
                "    return [tf.clip_by_norm(g, 1.0) for g in gs if g is not None]\n"
                "grads = clip_each(tape.gradient(loss, vs))\nopt.apply_gradients(zip(grads, vs))\n", 3,
                "come in through `clip_each(tape.gradient(loss, vs))`"),
        Invalid("import tensorflow as tf\nfrom tensorflow import clip_by_norm as cbn\n"
                "g = tf.gradients(loss, params)\n"
                "optimizer.apply_gradients(zip(map(lambda t: cbn(t, 1.0), g), params))\n", 4),
        # the clip through a partial
        Invalid("import functools\nimport tensorflow as tf\nclip = functools.partial(tf.clip_by_norm, clip_norm=1.0)\n"
                "grads = tape.gradient(loss, model.trainable_variables)\n"
                "opt.apply_gradients(zip([clip(g) for g in grads], model.trainable_variables))\n", 5),
        # the clip in a helper called on each gradient
        Invalid("import tensorflow as tf\ndef clip_gradient(grad):\n    return tf.clip_by_norm(grad, 5.0)\n"
                "grads = tape.gradient(loss, model.trainable_variables)\n"
                "grads = [clip_gradient(g) for g in grads]\n"
                "opt.apply_gradients(zip(grads, model.trainable_variables))\n", 3,
                "through `clip_gradient(g)`"),
        # the clipped gradients flattened into the one update vector (baselines' flatgrad)
        Invalid("import tensorflow as tf\ndef flatgrad(loss, var_list, clip_norm):\n"
                "    grads = tf.gradients(loss, var_list)\n"
                "    grads = [tf.clip_by_norm(g, clip_norm) if g is not None else g for g in grads]\n"
                "    return tf.concat([tf.reshape(g if g is not None else tf.zeros_like(v), [-1])\n"
                "                      for v, g in zip(var_list, grads)], axis=0)\n", 4),
    ]

    @staticmethod
    def _fix(ctx: Context, call: cst.Call, owner: cst.CSTNode) -> Optional[Fix]:
        """`[tf.clip_by_norm(g, c) for g in grads]` -> `tf.clip_by_global_norm(grads, c)[0]`: one
        factor for all gradients. Unsafe: it changes the update, as intended. Only for a plain
        comprehension over a named list (a filter would make the lists differ in length:
        `clip_by_global_norm` keeps None entries)."""
        if not isinstance(owner, (cst.ListComp, cst.GeneratorExp)) or owner.elt is not call:
            return None
        loop = owner.for_in
        threshold = arg(call, 1, "clip_norm")
        if loop.ifs or loop.inner_for_in is not None or not isinstance(loop.iter, cst.Name) \
                or not isinstance(loop.target, cst.Name) or threshold is None or len(call.args) != 2 \
                or any(isinstance(n, cst.Name) and n.value == loop.target.value for n in walk(threshold)):
            return None
        func = renamed_callee(ctx.imports, call.func, "clip_by_global_norm", ("tensorflow.clip_by_global_norm",))
        if func is None:
            return None
        clipped = cst.Call(func=func, args=[cst.Arg(loop.iter), cst.Arg(threshold)])
        first = cst.Subscript(value=clipped, slice=[cst.SubscriptElement(cst.Index(cst.Integer("0")))])
        return Fix(f"clip the global norm: `{ctx.text(first)}`", UNSAFE, ((owner, first),))

    @staticmethod
    def _pair_by_pair(ctx: Context, tensor: cst.BaseExpression, grads, binding) -> bool:
        """A loop over `(grad, var)` pairs that tests each gradient for None before clipping it
        handles the variables one by one, on purpose (see `why`); a comprehension's filter only
        drops the None ones, and a plain list's loop does not have the variables at hand."""
        name = tensor.value if isinstance(tensor, cst.Subscript) else tensor  # `gv[0]`: the pair's name
        return grads.pairs and isinstance(binding.owner, cst.For) and isinstance(name, cst.Name) \
            and ctx.flow.none_guarded(name, binding)

    @staticmethod
    def _helper(ctx: Context, call: cst.Call, element: Element, tensor: cst.BaseExpression) -> dict:
        """The probe's helper fields when a helper's call stands for the clip of its parameter `tensor`."""
        helper = element.stands_for
        if helper is call or not isinstance(helper, cst.Call) or not isinstance(tensor, cst.Name):
            return {}
        return {"helper": Name(ctx.text(helper.func)), "parameter": Name(tensor.value)}

    def could_fire(self, facts: Facts) -> bool:
        return facts.has("clip_by_norm") and facts.iterates_gradients()

    def check(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            if ctx.flow.called_name(call) != "tensorflow.clip_by_norm":  # also through a partial
                continue
            tensor = arg(ctx.flow.bound(call), 0, "t")
            if not isinstance(tensor, (cst.Name, cst.Subscript)):  # `g`, or `gv[0]` of a (grad, var) pair
                continue
            element = ctx.flow.element_taken(tensor, call)
            if element is None or self._pair_by_pair(ctx, element.name, element.grads, element.binding):
                continue
            grads, owner = element.grads, element.binding.owner
            produced = collected(ctx.flow, element.stands_for, owner)
            if produced is not None and applied(ctx.flow, produced):
                yield Report(call, (
                    "`tf.clip_by_norm` clips each gradient on its own: the update's global norm can reach "
                    "sqrt(n) x clip_norm and its direction changes (cosine 0.55 for five layers of different "
                    "scale). To bound the whole update use `tf.clip_by_global_norm(grads, clip_norm)`; if "
                    "per-variable clipping is intended, Keras' `clipnorm=` does exactly that."
                    + (f" The gradients come in through {', then '.join(grads.via)}." if grads.via else "")
                    + (f" The clip runs for each gradient through {ctx.flow.describe_call(element.stands_for)}."
                       if isinstance(element.stands_for, cst.Call) and element.stands_for is not call else "")),
                    probe=PerTensor(ctx.flow.snippet(loop_node(ctx.flow, owner)), ctx.flow.snippet(call),
                                    Name(produced.value) if isinstance(produced, cst.Name) else None,
                                    appended_lists(owner),
                                    **element_roles(ctx.flow.gradients, element.name, element.binding.value),
                                    **self._helper(ctx, call, element, tensor)),
                    fix=self._fix(ctx, call, owner))
