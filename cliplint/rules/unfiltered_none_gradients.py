"""CL005 unfiltered-none-gradients."""
from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ..analysis import Context
from ..facts import Facts
from ..findings import UNSAFE, Fix, Report
from ..flow.gradients import GradList, loop_key
from ..flow.nodes import target_names, tests_none, walk
from ..flow.snippets import appended_lists, element_roles, loop_node, origin_name
from ..probes import Misaligned, Name, NoneUnsafe
from ..replacements import rebound_between, statement_line
from . import Invalid, Rule


def _zips_gradients_with_none_test(facts: Facts) -> bool:
    """`zip(grads, ...)` of a value that may hold gradients, in a module that tests for None
    (the only way a gradient or variable list gets filtered)."""
    return facts.none_compare and facts.mentions_gradients() \
        and any(facts.carries_gradients(first) for first in facts.zipped_first)

# TensorFlow functions that accept None entries (they take lists, and skip None).
NONE_SAFE = {"tensorflow.clip_by_global_norm", "tensorflow.linalg.global_norm", "tensorflow.print",
             "tensorflow.debugging.Assert"}
VARIABLE_LISTS = ("trainable_variables", "trainable_weights", "variables", "weights")
NONE_ERROR = ("ValueError: Attempt to convert a value (None) with an unsupported type "
              "(<class 'NoneType'>) to a Tensor.")
# The same, building a graph (TF 1, or tracing a `tf.function`): measured, TF 2.21.
GRAPH_NONE_ERROR = "in a TF 1 graph or a `tf.function`: `ValueError: None values not supported.`"


def _none_source(ctx: Context, grads: GradList) -> str:
    """What gave the None, as the code wrote it: `tape.gradient` returns, `compute_gradients` gives."""
    func = grads.origin.func
    if isinstance(func, cst.Attribute) and func.attr.value == "compute_gradients":
        return "`compute_gradients` gives"
    if ctx.call_name(grads.origin) == "tensorflow.gradients":
        return "`tf.gradients` returns"
    return "`tape.gradient` returns"


def _tensor_op(ctx: Context, node: cst.CSTNode) -> Optional[str]:
    """The op name when `node` is a None-unsafe TF/Keras call or arithmetic, else None."""
    if isinstance(node, cst.Call):
        name = ctx.flow.called_name(node) or ""  # also through `clip = partial(tf.clip_by_norm, ...)`
        if name.startswith(("tensorflow.", "keras.ops.", "keras.backend.")) and name not in NONE_SAFE \
                and not name.startswith("tensorflow.nest."):
            return f"`{ctx.text(node.func)}`"
    if isinstance(node, cst.BinaryOperation):
        return "arithmetic"
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return "negation"
    return None


def _keyed_by(ctx: Context, use: cst.Name) -> Optional[cst.Subscript]:
    """`grads[key]` when `use` is the `key` it is subscripted by."""
    index = ctx.parent.get(use)
    element = ctx.parent.get(index) if isinstance(index, cst.Index) else None
    item = ctx.parent.get(element) if isinstance(element, cst.SubscriptElement) else None
    return item if isinstance(item, cst.Subscript) and loop_key(item) is use else None


def _called(ctx: Context, attribute: cst.Attribute) -> cst.CSTNode:
    """The call of a method (`g.numpy()`), else the attribute itself (`g.shape`)."""
    parent = ctx.parent.get(attribute)
    return parent if isinstance(parent, cst.Call) and parent.func is attribute else attribute


# What the call a gradient's sources come from is named when it gives variables (`trainable_variables()`,
# `get_weights`, TF 1's `tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope)`, `model.parameters()`).
VARIABLE_GETTERS = ("variables", "weights", "get_collection", "params", "parameters")


class UnfilteredNoneGradients(Rule):
    code = "CL005"
    name = "unfiltered-none-gradients"
    summary = "`None` gradients reach a None-unsafe op, or are filtered out of one list but not the other."
    severity = "error"
    tokens = (b"gradient",)
    why = """
        `tape.gradient(loss, variables)` returns `None` for every variable the loss does not
        depend on: frozen or unused layers, a head not used by this loss, a variable created
        but not wired in. Two mistakes follow.

        (a) An op that needs a tensor (`tf.clip_by_norm`, `tf.clip_by_value`, `tf.norm`,
        arithmetic, `tf.math.*`) applied to every gradient raises `ValueError: Attempt to convert
        a value (None) with an unsupported type (<class 'NoneType'>) to a Tensor.` the day one
        variable gets no gradient; a tensor's attribute (`g.numpy()`, as gradients are flattened for
        SciPy's L-BFGS) raises `AttributeError`. `tf.clip_by_global_norm`, `tf.linalg.global_norm` and
        `apply_gradients` accept `None` entries, so they need no filter.

        (b) Filtering the gradients for `None` and then zipping them with the unfiltered variable
        list shifts every later gradient onto the wrong variable. When shapes match (or
        broadcast) nothing raises and nothing is logged: the model silently trains wrong, and
        the "Gradients do not exist" warning never fires because the `None` was removed.
    """
    example = """
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [g for g in grads if g is not None]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))   # misaligned
    """
    instead = """
        grads = tape.gradient(loss, model.trainable_variables)
        pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]
        optimizer.apply_gradients(pairs)
    """
    fixes = """
        **Unsafe**: `grads = [g for g in grads if g is not None]` followed by
        `zip(grads, variables)` becomes `[(g, v) for g, v in zip(grads, variables) if g is not None]`
        with the filtering line removed, when that line is a plain filter used by this zip
        alone. Part (a), an op applied to a None entry, has no automatic fix.
    """
    VALID = [
        "import tensorflow.compat.v1 as tf\ngrads_and_vars = opt.compute_gradients(loss, params)\n"
        "capped = [(tf.clip_by_value(gv[0], -1.0, 1.0), gv[1]) for gv in grads_and_vars if gv[0] is not None]\n",
        "import tensorflow as tf\n"
        "grads = tape.gradient(loss, model.trainable_variables)\n"
        "grads = [tf.clip_by_norm(g, 1.0) for g in grads if g is not None]\n",
        # the attribute of a variable, not of its gradient; a guarded NumPy copy
        "import numpy as np, tensorflow as tf\n"
        "grads = tape.gradient(loss, model.trainable_variables)\n"
        "names = [v.name for g, v in zip(grads, model.trainable_variables)]\n"
        "flat = np.concatenate([g.numpy().ravel() for g in grads if g is not None])\n",
        "import tensorflow as tf\n"
        "grads = tape.gradient(loss, model.trainable_variables)\n"
        "clipped, _ = tf.clip_by_global_norm(grads, 1.0)\n"
        "opt.apply_gradients(zip(clipped, model.trainable_variables))\n",
        # pairs are filtered together: aligned
        "import tensorflow as tf\n"
        "grads = tape.gradient(loss, model.trainable_variables)\n"
        "pairs = [(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None]\n"
        "opt.apply_gradients(pairs)\n",
        # None replaced, not removed
        "import tensorflow as tf\n"
        "grads = tape.gradient(loss, model.trainable_variables)\n"
        "grads = [g if g is not None else tf.zeros_like(v) for g, v in zip(grads, model.trainable_variables)]\n"
        "grads = [g * 0.5 for g in grads]\n",
        # unconnected gradients are zeros, never None
        "import tensorflow as tf\n"
        "grads = tape.gradient(loss, vs, unconnected_gradients=tf.UnconnectedGradients.ZERO)\n"
        "grads = [tf.clip_by_value(g, -1.0, 1.0) for g in grads]\n",
        # a guarded loop
        "import tensorflow as tf\n"
        "grads = tape.gradient(loss, vs)\nout = []\n"
        "for g in grads:\n    if g is None:\n        continue\n    out.append(tf.norm(g))\n",
        # numpy arrays are not gradients
        "import numpy as np, tensorflow as tf\ngrads = [np.ones(3)]\nscaled = [g * 2 for g in grads]\n",
        # gradients with respect to a network's output (DDPG's dq/da) are never None
        "import tensorflow as tf\n"
        "actions = actor(states)\n"
        "dqdas = tape.gradient(q_values, actions)\n"
        "clipped = [tf.clip_by_value(d, -1.0, 1.0) for d in dqdas]\n",
        # filtered together, then handed to a helper that zips its own two parameters
        "import tensorflow as tf\n"
        "def factors(gradients, varlist):\n    return [g * v for g, v in zip(gradients, varlist)]\n"
        "grads = tf.gradients(loss, varlist)\n"
        "grads, varlist = zip(*[(g, v) for g, v in zip(grads, varlist) if g is not None])\n"
        "f = factors(grads, varlist)\n",
        # both lists filtered the same way
        "import tensorflow as tf\n"
        "grads = tape.gradient(loss, vs)\n"
        "kept_vars = [v for g, v in zip(grads, vs) if g is not None]\n"
        "kept_grads = [g for g in grads if g is not None]\n"
        "opt.apply_gradients(zip(kept_grads, kept_vars))\n",
        # the towers' average, guarded on the first tower's entry
        "import tensorflow.compat.v1 as tf\ntower_grads = [opt.compute_gradients(loss) for loss in losses]\n"
        "for grad_and_vars in zip(*tower_grads):\n    if grad_and_vars[0][0] is not None:\n"
        "        for g, _ in grad_and_vars:\n            tf.expand_dims(g, 0)\n",
        # MAML's fast weights, each gradient tested by its key
        "import tensorflow as tf\n"
        "grads = dict(zip(weights.keys(), tf.gradients(loss, list(weights.values()))))\n"
        "fast = {k: weights[k] - 0.01 * grads[k] if grads[k] is not None else weights[k] for k in weights.keys()}\n",
    ]
    INVALID = [
        Invalid("import tensorflow as tf\n"
                "grads = tape.gradient(loss, model.trainable_variables)\n"
                "grads = [tf.clip_by_norm(g, 1.0) for g in grads]\n", 3, "Attempt to convert", "warning"),
        Invalid("import tensorflow as tf\n"
                "def step(x):\n    with tf.GradientTape() as tape:\n        loss = model(x)\n"
                "    grads = tape.gradient(loss, model.trainable_variables)\n"
                "    grads = [g / tf.cast(8, tf.float32) for g in grads]\n", 6, None, "warning"),
        Invalid("import tensorflow as tf\n"
                "grads = tape.gradient(loss, model.trainable_variables)\n"
                "grads = [g for g in grads if g is not None]\n"
                "opt.apply_gradients(zip(grads, model.trainable_variables))\n", 4, "wrong variable", "error"),
        Invalid("import tensorflow as tf\n"
                "grads = tape.gradient(loss, variables)\n"
                "grads = [g for g in grads if g is not None]\n"
                "var_list = [v for g, v in zip(grads, variables) if g is not None]\n"
                "opt.apply_gradients(zip(grads, var_list))\n", 4, None, "error"),
        Invalid("import tensorflow as tf\n"
                "grads = tape.gradient(loss, net.trainable_weights)\n"
                "for g, v in zip(grads, net.trainable_weights):\n"
                "    v.assign_sub(0.01 * tf.clip_by_value(g, -1, 1))\n", 4),
        # TF 1 pairs: the message names what gave the None
        Invalid("import tensorflow.compat.v1 as tf\ngvs = opt.compute_gradients(loss)\n"
                "capped = [(tf.clip_by_norm(g, 5.0), v) for g, v in gvs]\n", 3, "`compute_gradients` gives None",
                "warning"),
        # the pairs made into a named list first
        Invalid("import tensorflow.compat.v1 as tf\ngrads = tf.gradients(loss, var_list)\n"
                "grads_and_vars = list(zip(grads, var_list))\nfor grad, var in grads_and_vars:\n"
                "    tf.summary.scalar('gradient_norm/' + var.name, tf.norm(grad))\n", 5),
        # the towers' average (a list of gradient lists, one variable's entries at a time)
        Invalid("import tensorflow.compat.v1 as tf\ntower_grads = []\nfor loss in tower_losses:\n"
                "    tower_grads.append(opt.compute_gradients(loss))\n"
                "for grad_and_vars in zip(*tower_grads):\n"
                "    grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]\n", 6),
        # the towers' average in a helper, given the list the towers appended to
        Invalid("import tensorflow.compat.v1 as tf\ndef average_gradients(tower_grads):\n"
                "    for grad_and_vars in zip(*tower_grads):\n"
                "        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]\n"
                "tower_grads = []\nfor i in range(2):\n    tower_grads.append(opt.compute_gradients(loss))\n"
                "tower_grads = average_gradients(tower_grads)\n", 4, "`compute_gradients` gives None"),
        # tf-keras' K.gradients is tf.gradients: None for a weight the loss does not reach
        Invalid("from keras import backend as K\nloss_grad = K.gradients(loss, model.trainable_weights)\n"
                "flat = K.concatenate([K.flatten(g) for g in loss_grad])\n", 3, "`tf.gradients` returns None"),
        # gradients handed to SciPy's L-BFGS as one flat array: None has no `.numpy()`
        Invalid("import numpy as np, tensorflow as tf\n"
                "grads = tape.gradient(loss, model.trainable_variables)\n"
                "flat = np.concatenate([g.numpy().flatten() for g in grads]).astype('float64')\n", 3,
                "has no attribute 'numpy'", "warning"),
        # TF 1's pairs bound to one name, the gradient taken by index
        Invalid("import tensorflow.compat.v1 as tf\ngrads_and_vars = opt.compute_gradients(loss, params)\n"
                "capped = [(tf.clip_by_value(gv[0], -1.0, 1.0), gv[1]) for gv in grads_and_vars]\n", 3,
                "Attempt to convert", "warning"),
        # TF 1's variables of a scope, from the graph's collection
        Invalid("import tensorflow.compat.v1 as tf\n"
                "my_vars = tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope='actor')\n"
                "grads_and_vars = adam.compute_gradients(loss, var_list=my_vars)\n"
                "clipped = [tf.clip_by_value(g, -.1, .1) for g, _ in grads_and_vars]\n", 4, "Attempt to convert",
                "warning"),
        # MAML's fast weights: a dict of gradients keyed like the weights, read by key
        Invalid("import tensorflow as tf\n"
                "grads = dict(zip(weights.keys(), tf.gradients(loss, list(weights.values()))))\n"
                "fast = dict(zip(weights.keys(), [weights[k] - 0.01 * grads[k] for k in weights.keys()]))\n", 3,
                "Attempt to convert", "warning"),
        # the list indexed in turn
        Invalid("import tensorflow as tf\n"
                "grads = tape.gradient(loss, model.trainable_variables)\n"
                "for i in range(len(grads)):\n    grads[i] = tf.clip_by_value(grads[i], -1.0, 1.0)\n", 4,
                None, "warning"),
    ]

    def could_fire(self, facts: Facts) -> bool:
        # (a) needs a loop over gradients; (b) a zip of gradients and a None test that filtered one side
        return facts.iterates_gradients() or _zips_gradients_with_none_test(facts)

    def check(self, ctx: Context) -> Iterator[Report]:
        yield from self._unsafe_ops(ctx)
        yield from self._misaligned(ctx)

    # --- (a) an op that raises on None, on every element ---------------------------------

    def _unsafe_ops(self, ctx: Context) -> Iterator[Report]:
        reported = set()
        loop_names = {name.value for node in ctx.nodes(cst.For, cst.CompFor) for name, _ in target_names(node.target)}
        loop_names |= {p.name.value for lam in ctx.nodes(cst.Lambda) for p in lam.params.params}
        for use in (n for n in ctx.nodes(cst.Name) if n.value in loop_names):  # the file's own, not a linked module's
            element_node: cst.BaseExpression = use
            guarded_name: cst.Name = use  # what an `is not None` test names
            parent = ctx.parent.get(use)
            if isinstance(parent, cst.Subscript) and parent.value is use:  # `gv[0]` of a (grad, var) pair
                element_node, parent = parent, ctx.parent.get(parent)
            keyed = _keyed_by(ctx, use)
            if keyed is not None:  # `grads[key]`, the loop binding `key`
                element_node, parent = keyed, ctx.parent.get(keyed)
                guarded_name = keyed.value if isinstance(keyed.value, cst.Name) else use
            op_node = ctx.parent.get(parent) if isinstance(parent, cst.Arg) else parent
            op = _tensor_op(ctx, op_node) if op_node is not None else None
            error = NONE_ERROR
            if isinstance(parent, cst.Attribute) and parent.value is element_node:  # `g.numpy()`: None has none
                op, op_node = f"`.{parent.attr.value}`", _called(ctx, parent)
                error = f"AttributeError: 'NoneType' object has no attribute '{parent.attr.value}'."
            if op is None or op_node is None:
                continue
            element = ctx.flow.gradient_element(element_node)
            if element is None:
                continue
            grads, binding = element
            if binding.owner in reported or not grads.may_hold_none or grads.filtered \
                    or ctx.flow.none_guarded(guarded_name, binding) or not self._of_variables(ctx, grads):
                continue
            reported.add(binding.owner)
            raised = f"`{error}`" + (f" ({GRAPH_NONE_ERROR})" if error == NONE_ERROR else "")
            yield Report(op_node, (
                f"{op} is applied to every gradient with no `None` check: {_none_source(ctx, grads)} None for "
                f"a variable the loss does not reach (frozen or unused layers, an unused head), and this "
                f"then raises {raised} Skip None entries (`if g is not None`), or use "
                f"`tf.clip_by_global_norm`, which passes None through."), severity="warning",
                probe=NoneUnsafe(ctx.flow.snippet(loop_node(ctx.flow, binding.owner)), appended_lists(binding.owner),
                                 **element_roles(ctx.flow.gradients, element_node, binding.value)))

    @staticmethod
    def _of_variables(ctx: Context, grads: GradList) -> bool:
        """Were the gradients taken for variables (which can be unused, hence None)? False when
        the sources are visibly something else, e.g. a network's output (`dq/da` in DDPG)."""
        if grads.sources is None:
            return True
        value = ctx.flow.value_of(grads.sources)
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Name) \
                and value.func.value in ("list", "tuple") and len(value.args) == 1:  # `list(weights.values())`
            value = ctx.flow.value_of(value.args[0].value)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "values":
            value = ctx.flow.value_of(value.func.value)  # `weights.values()`: the dict's name says what it holds
            return not isinstance(value, (cst.Name, cst.Attribute)) or any(
                word in ctx.text(value).lower() for word in VARIABLE_GETTERS)
        if isinstance(value, cst.Call):
            func = value.func
            name: str = ctx.call_name(value) or (func.attr.value if isinstance(func, cst.Attribute)
                                                 else str(getattr(func, "value", "")))  # TF's, through any alias
            return any(word in name for word in VARIABLE_GETTERS)
        return True

    # --- (b) filtered on one side of a zip only -------------------------------------------

    def _misaligned(self, ctx: Context) -> Iterator[Report]:
        for call in ctx.nodes(cst.Call):
            if not (isinstance(call.func, cst.Name) and call.func.value == "zip") or len(call.args) < 2 \
                    or any(a.star for a in call.args):
                continue
            grads = ctx.flow.gradient_list(call.args[0].value)
            if grads is None or grads.pairs:
                continue
            variables = call.args[1].value
            if grads.filtered and self._all_variables(ctx, variables, grads):
                side = "gradients filtered for `None` are zipped with the unfiltered variable list"
            elif grads.may_hold_none and not grads.filtered and self._filtered_variables(ctx, variables):
                side = "unfiltered gradients are zipped with a variable list filtered for `None`"
            else:
                continue
            yield Report(call, (
                f"{side}: after the first removed entry each gradient is paired with the wrong variable, and "
                f"with matching or broadcastable shapes this trains silently wrong (no error, no warning). "
                f"Filter the pairs together: `[(g, v) for g, v in zip(grads, variables) if g is not None]`."),
                severity="error", probe=Misaligned(
                    ctx.flow.snippet(call), tuple(ctx.flow.snippet(s) for s in self._statements(ctx, call)),
                    origin_name(ctx.flow, grads), Name(ctx.text(grads.sources)) if grads.sources is not None else None),
                fix=self._pairs_fix(ctx, call))

    @staticmethod
    def _pairs_fix(ctx: Context, call: cst.Call) -> Optional[Fix]:
        """`grads = [g for g in G if g is not None]` ... `zip(grads, V)` -> the pairs filtered
        together, `[(g, v) for g, v in zip(G, V) if g is not None]`, and the filtering line
        removed. Only when that line is a plain filter whose result is used by this zip alone,
        and `G` still means the same list at the zip."""
        zipped = call.args[0].value
        if not isinstance(zipped, cst.Name):
            return None
        binding = ctx.flow.binding_of(zipped)
        if binding is None or binding.kind != "assign" or binding.path or len(call.args) != 2:
            return None
        comp, assign = binding.value, binding.owner
        line = statement_line(ctx, assign)
        if not isinstance(comp, cst.ListComp) or line is None or len(line.body) != 1 \
                or comp.for_in.inner_for_in is not None or len(comp.for_in.ifs) != 1:
            return None
        element, source = comp.for_in.target, comp.for_in.iter
        if not (isinstance(element, cst.Name) and isinstance(comp.elt, cst.Name) and comp.elt.value == element.value
                and isinstance(source, cst.Name) and tests_none(comp.for_in.ifs[0].test, element.value)):
            return None
        uses = ctx.flow.uses_after(zipped.value, assign)
        scope = ctx.flow.scope_of(call)
        if uses != [zipped] or ctx.flow.scope_of(assign) is not scope \
                or rebound_between(ctx, source.value, scope, ctx.post[assign], ctx.pre[call]):
            return None
        g = element.value
        v = "v" if g != "v" else "var"
        pairs = cst.parse_expression(
            f"[({g}, {v}) for {g}, {v} in zip({source.value}, {ctx.text(call.args[1].value)}) if {g} is not None]")
        return Fix("filter the (gradient, variable) pairs together", UNSAFE, ((call, pairs), (line, None)))

    def _all_variables(self, ctx: Context, expr, grads: GradList) -> bool:
        value = ctx.flow.value_of(expr)
        if isinstance(value, cst.Attribute) and value.attr.value in VARIABLE_LISTS:
            return True
        sources = grads.sources
        if grads.via:  # the gradients came through a call: the same spelling is another scope's name
            return False
        return sources is not None and (ctx.text(expr) == ctx.text(sources) or
                                        ctx.text(value) == ctx.text(ctx.flow.value_of(sources)))

    def _filtered_variables(self, ctx: Context, expr) -> bool:
        """A comprehension that keeps the variables whose gradient is not None: `[v for g, v in
        zip(grads, vs) if g is not None]`, in either order of the zip."""
        value = ctx.flow.value_of(expr)
        if not isinstance(value, (cst.ListComp, cst.GeneratorExp)) or value.for_in.inner_for_in is not None:
            return False
        names = [n.value for n in walk(value.for_in.target) if isinstance(n, cst.Name)]
        zipped = value.for_in.iter
        if isinstance(zipped, cst.Call) and isinstance(zipped.func, cst.Name) and zipped.func.value == "zip" \
                and len(zipped.args) == len(names):
            graded = [i for i, a in enumerate(zipped.args) if ctx.flow.gradient_list(a.value) is not None]
            names = [names[i] for i in graded] + [n for i, n in enumerate(names) if i not in graded]
        return bool(names) and any(tests_none(cond.test, names[0]) for cond in value.for_in.ifs) \
            and not any(isinstance(n, cst.Name) and n.value == names[0] for n in walk(value.elt))

    def _statements(self, ctx: Context, call: cst.Call) -> list:
        """The list-building assignments the zipped lists depend on, in order: what the probe
        replays (the `tape.gradient` call itself is replaced by stand-in gradients)."""
        needed = {n.value for n in walk(call) if isinstance(n, cst.Name)}
        chosen = []
        scope = ctx.flow.scope_of(call)
        for assign in reversed(ctx.nodes(cst.Assign)):
            if ctx.pre[assign] >= ctx.pre[call] or ctx.flow.scope_of(assign) is not scope:
                continue
            targets = {n.value for t in assign.targets for n in walk(t.target) if isinstance(n, cst.Name)}
            comprehension = any(isinstance(n, (cst.ListComp, cst.GeneratorExp)) for n in walk(assign.value))
            if targets & needed and comprehension:
                chosen.append(assign)
                needed |= {n.value for n in walk(assign.value) if isinstance(n, cst.Name)}
        return list(reversed(chosen))
