"""The probes of the gradient list's handling: CL003 (per-tensor clip norms), CL005 (None
gradients), CL006 (the clipped pair not unpacked) and CL007 (the clipped gradients unused)."""
from __future__ import annotations

import ast
from typing import Dict, List

import numpy as np
import tensorflow as tf

from ...probes import Discarded, Misaligned, NoneUnsafe, NotUnpacked, PerTensor, Unused
from .common import (
    FLAVOUR,
    KERAS,
    TF,
    bind_expression,
    bound_name,
    bound_values,
    call_of,
    evaluate,
    execute,
    flat,
    kind_of,
    namespace,
    quoted,
    runs,
    spread_gradients,
    tree_of,
    verdict,
)

# --- CL003 ----------------------------------------------------------------------------------

def _gradient_stand_ins(probe: dict, grads, variables, assumptions) -> dict:
    bound: Dict[str, object] = {}
    listed = list(zip(grads, variables)) if probe.get("pairs") else grads
    given = variables
    if probe.get("keyed"):  # `dict(zip(weights.keys(), grads))`: both by the variables' names
        keys = [f"w{index}" for index in range(len(variables))]
        listed, given = dict(zip(keys, grads)), dict(zip(keys, variables))
    bind_expression(probe.get("gradients"), listed, bound, assumptions, variables)
    bind_expression(probe.get("variables"), given, bound, assumptions, variables)
    if probe.get("keyed") and probe.get("variables"):  # layer 1 made `weights.keys` a stand-in name
        for method in ("keys", "values", "items"):
            bound[bound_name(f"{probe['variables']}.{method}")] = getattr(given, method)
    for name in probe.get("appends", []):
        bound[bound_name(name)] = []
    return bound


def _replay_loop(probe: dict, snippet: dict, grads, variables, assumptions):
    bound = _gradient_stand_ins(probe, grads, variables, assumptions)
    if probe.get("helper") and probe.get("parameter"):
        bound[bound_name(probe["helper"])] = _clip_helper(probe, variables, assumptions)
    ns = namespace(snippet, bound, assumptions, variables)
    result = execute(snippet["code"], ns)
    if probe.get("result"):
        result = ns[probe["result"]]
    elif result is None:  # a `for` statement: what it appended to, if anything
        result = next((ns[bound_name(name)] for name in probe.get("appends", []) if ns.get(bound_name(name))), [])
    return _unpaired(result), ns


def _clip_helper(probe: dict, variables, assumptions):
    """The user's helper the loop calls (`clip(g)` of `def clip(g): return tf.clip_by_norm(g, c)`),
    stood in by the flagged clip call itself, run on the tensor passed: the helper's other code
    never reaches the worker."""
    clip, parameter = probe["clip"], probe["parameter"]
    assumptions.append(f"`{probe['helper']}` runs as the `{clip['code'][:60]}` it returns")

    def helper(tensor, *_args, **_kwargs):
        return execute(clip["code"], namespace(clip, {parameter: tensor}, assumptions, variables))
    return helper


def _clip_threshold(clip: dict, ns: dict) -> float:
    call = call_of(clip["code"])
    threshold = next((kw.value for kw in call.keywords if kw.arg == "clip_norm"),
                     call.args[1] if len(call.args) > 1 else None)
    if threshold is None:
        raise ValueError(f"no clip_norm in {clip['code'][:80]}")
    return float(evaluate(threshold, ns))


STAND_IN_THRESHOLD = 1.0


def _unset_threshold(probe: dict, assumptions: List[str], fields=("clip", "loop")) -> None:
    """`clip_by_norm(grad, grad_norm_clipping)` where the name's only literal value is a `None`
    default (the clipping runs only when it is set): a stand-in threshold, listed."""
    snippets = [probe[f] for f in fields if probe.get(f)]
    names = {n for snippet in snippets for n in _none_thresholds(snippet)}
    for name in sorted(names):
        for snippet in snippets:
            if name in snippet.get("constants", {}):
                snippet["constants"][name] = STAND_IN_THRESHOLD
        assumptions.append(f"`{name}` is None by default and the clipping runs only when it is set: "
                           f"stood in by {STAND_IN_THRESHOLD:g}")


def _none_thresholds(snippet: dict) -> List[str]:
    """Names holding None passed as the threshold of a clip call of the snippet."""
    clips = {name for name, qualified in snippet.get("symbols", {}).items() if ".clip_by_" in qualified}
    found = []
    for call in ast.walk(tree_of(snippet["code"])):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in clips):
            continue
        threshold = next((kw.value for kw in call.keywords if kw.arg == "clip_norm"),
                         call.args[1] if len(call.args) > 1 else None)
        if isinstance(threshold, ast.Name) and snippet.get("constants", {}).get(threshold.id, 0) is None \
                and threshold.id in snippet["constants"]:
            found.append(threshold.id)
    return found


@runs(PerTensor)
def probe_per_tensor(probe: dict) -> dict:
    assumptions = ["stand-in gradients: 5 tensors of shapes (4,4), (8,), (3,2), (5,), (2,2) "
                   "with norms 1000, 100, 10, 1, 0.1"]
    _unset_threshold(probe, assumptions)
    grads = spread_gradients()
    variables = [tf.Variable(tf.zeros_like(g)) for g in grads]
    clipped, ns = _replay_loop(probe, probe["loop"], grads, variables, assumptions)
    threshold = _clip_threshold(probe["clip"], ns)
    raw, update = flat(grads), flat(clipped)
    norm = float(np.linalg.norm(update))
    cosine = float(raw @ update / (np.linalg.norm(raw) * np.linalg.norm(update)))
    global_clipped, _ = tf.clip_by_global_norm(grads, threshold)
    global_norm = float(np.linalg.norm(flat(global_clipped)))
    evidence = (f"{TF}: after your per-tensor clipping the update's global norm is {norm:.3g} "
                f"({'>' if norm > threshold * 1.001 else '<='} {threshold:g}) and its direction changed "
                f"(cosine {cosine:.2f} to the raw gradient); tf.clip_by_global_norm gives norm {global_norm:.3g}, "
                "cosine 1.00")
    if norm > threshold * 1.001 or cosine < 0.999:
        return verdict("confirmed", evidence, assumptions)
    return verdict("not-reproduced", f"{TF}: the clipped update has norm {norm:.3g} and cosine {cosine:.3f}",
                   assumptions)


# --- CL005 ----------------------------------------------------------------------------------

@runs(NoneUnsafe)
def probe_none_unsafe(probe: dict) -> dict:
    assumptions = ["stand-in gradients: 3 variables, the middle one without a gradient (None), "
                   "as for a frozen or unused layer"]
    variables = [tf.Variable(tf.zeros([2, 2])), tf.Variable(tf.zeros([4])), tf.Variable(tf.zeros([3]))]
    _unset_threshold(probe, assumptions, ("loop",))
    try:
        _replay_loop(probe, probe["loop"], [tf.ones([2, 2]), None, tf.ones([3])], variables, assumptions)
    except (ValueError, TypeError, AttributeError) as err:  # AttributeError: `g.numpy()` on the None
        failure = _raises(lambda: _replay_loop(probe, probe["loop"], [tf.ones(v.shape) for v in variables],
                                               variables, []))
        if failure is not None:  # the None is not the cause: the exception's type is all the probe judges by
            return verdict("inconclusive", f"{TF}: your code raises {kind_of(failure)} even when every gradient "
                                           "is a tensor", assumptions)
        return verdict("confirmed", f"{TF}: with one None gradient your code raises {quoted(err)}; with every "
                                    "gradient a tensor it runs", assumptions)
    return verdict("not-reproduced", f"{TF}: your code handled a None gradient without an error", assumptions)


def _raises(run):
    """The exception `run()` raises, or None."""
    try:
        run()
    except Exception as err:  # any type: the control run must raise nothing at all
        return err
    return None


@runs(Misaligned)
def probe_misaligned(probe: dict) -> dict:
    assumptions = ["stand-in: variables v0, v1, v2 of shape (2,); v1 gets no gradient (None)"]
    grads = [tf.fill([2], 1.0), None, tf.fill([2], 3.0)]
    variables = [tf.Variable(tf.zeros([2]), name=f"v{i}") for i in range(3)]
    bound: Dict[str, object] = {}
    bind_expression(probe.get("gradients"), grads, bound, assumptions, variables)
    bind_expression(probe.get("variables"), variables, bound, assumptions, variables)
    for statement in probe.get("statements", []):
        ns = namespace(statement, bound, assumptions, variables)
        execute(statement["code"], ns)
        bound.update(bound_values(ns))
    pairs = list(execute(probe["zip"]["code"], namespace(probe["zip"], bound, assumptions, variables)))
    wrong = []
    for grad, variable in pairs:
        source = int(round(float(np.asarray(grad).reshape(-1)[0]))) - 1 if grad is not None else None
        target = next(i for i, v in enumerate(variables) if v is variable)
        if source is not None and source != target:
            wrong.append(f"v{target} got v{source}'s gradient")
    if not wrong:
        return verdict("not-reproduced", f"{TF}: every gradient was paired with its own variable", assumptions)
    KERAS.optimizers.SGD(learning_rate=1.0).apply_gradients([(g, v) for g, v in pairs if g is not None])
    return verdict("confirmed", f"{TF}, {FLAVOUR}: {'; '.join(wrong)}, and apply_gradients raised nothing "
                                f"(the shapes match)", assumptions)


# --- CL006 ----------------------------------------------------------------------------------

@runs(NotUnpacked)
def probe_not_unpacked(probe: dict) -> dict:
    assumptions = ["stand-in gradients: two tensors of shapes (2,) and (3,), with matching variables"]
    grads = [tf.fill([2], 3.0), tf.fill([3], 4.0)]
    variables = [tf.Variable(tf.zeros([2])), tf.Variable(tf.zeros([3]))]
    bound: Dict[str, object] = {}
    bind_expression(probe.get("gradients"), grads, bound, assumptions, variables)
    try:
        _use_pair(probe, bound, variables, assumptions)
    except (ValueError, TypeError, tf.errors.OpError) as err:
        failure = _raises(lambda: _use_pair(probe, bound, variables, [], unpacked=True)) \
            if probe.get("statement") else None
        if failure is not None:  # the pair is not the cause: judged by the type alone
            return verdict("inconclusive", f"{TF}, {FLAVOUR}: your code raises {kind_of(failure)} even with the "
                                           "pair unpacked", assumptions)
        return verdict("confirmed", f"{TF}, {FLAVOUR}: using the pair as the gradient list raises {quoted(err)}"
                                    + ("; with the pair unpacked it runs" if probe.get("statement") else ""),
                       assumptions)
    return verdict("not-reproduced", f"{TF}, {FLAVOUR}: the code ran without an error", assumptions)


def _use_pair(probe: dict, given: dict, variables, assumptions: List[str], unpacked: bool = False) -> None:
    """The flagged statement, then the use of its result; `unpacked`: the statement's target is then
    rebound to the clipped list alone (the fix), the probe's control run."""
    bound = dict(given)
    use = probe["use"]
    if probe.get("statement"):
        ns = namespace(probe["statement"], bound, assumptions, variables)
        execute(probe["statement"]["code"], ns)
        bound.update(bound_values(ns))
        target = tree_of(probe["statement"]["code"]).body[0]
        if unpacked and isinstance(target, ast.Assign) and isinstance(target.targets[0], ast.Name):
            bound[target.targets[0].id] = list(bound[target.targets[0].id][0])
    result = execute(use["code"], namespace(use, bound, assumptions, variables))
    if isinstance(result, (zip, map)) or (result is not None and hasattr(result, "__iter__")
                                           and not isinstance(result, (tf.Tensor, tf.Variable))):
        KERAS.optimizers.SGD(learning_rate=1.0).apply_gradients(list(result))


# --- CL007 ----------------------------------------------------------------------------------

@runs(Unused)
def probe_unused(probe: dict) -> dict:
    assumptions = ["stand-in gradients: 5 tensors with norms 1000, 100, 10, 1, 0.1"]
    grads = spread_gradients()
    variables = [tf.Variable(tf.zeros_like(g)) for g in grads]
    bound = _gradient_stand_ins(probe, grads, variables, assumptions)
    ns = namespace(probe["clip"], bound, assumptions, variables)
    execute(probe["clip"]["code"], ns)
    bound.update(bound_values(ns))
    applied = execute(probe["applied"]["code"], namespace(probe["applied"], bound, assumptions, variables))
    applied_grads = [item[0] if isinstance(item, tuple) else item for item in list(applied)]
    norm = float(np.linalg.norm(flat([g for g in applied_grads if g is not None])))
    threshold = None
    if probe.get("threshold"):
        threshold = float(execute(probe["threshold"]["code"], namespace(probe["threshold"], bound, assumptions)))
    if threshold is not None and norm > threshold * 1.001:
        return verdict("confirmed", f"{TF}: the gradients passed to apply_gradients have global norm {norm:.4g} "
                                    f"(threshold {threshold:g}): the clipped list was computed and not used",
                       assumptions)
    return verdict("not-reproduced", f"{TF}: the applied gradients have global norm {norm:.4g}", assumptions)


def _unpaired(items) -> list:
    return [item[0] if isinstance(item, tuple) else item for item in list(items)]


@runs(Discarded)
def probe_discarded(probe: dict) -> dict:
    """CL007, a clip whose result is lost: replay the loop (or the statement) on stand-in gradients,
    run the clip itself on one of them, and look at what is left: the unclipped tensors or not."""
    assumptions = ["stand-in gradients: 5 tensors with norms 1000, 100, 10, 1, 0.1"]
    _unset_threshold(probe, assumptions)
    grads = spread_gradients()
    variables = [tf.Variable(tf.zeros_like(g)) for g in grads]
    bound = _gradient_stand_ins(probe, grads, variables, assumptions)
    tensor = probe.get("tensor")
    if tensor and not probe.get("gradients"):
        bound.setdefault(tensor, grads[0])
    ns = namespace(probe["loop"], bound, assumptions, variables)
    execute(probe["loop"]["code"], ns)
    appended = [name for name in probe.get("appends", []) if ns.get(bound_name(name))]
    if appended:
        kept, where = _unpaired(ns[bound_name(appended[0])]), f"`{appended[0]}`"
    elif probe.get("gradients"):
        kept, where = grads, f"`{probe['gradients']}`"
    else:
        kept, where = [ns.get(tensor, grads[0])], f"`{tensor}`"
    one = [grads[0]] if "global_norm" in probe["clip"]["code"] else grads[0]
    result = execute(probe["clip"]["code"], namespace(probe["clip"], {tensor: one} if tensor else {}, assumptions))
    clipped = result[0][0] if isinstance(result, tuple) else result
    before, after = float(np.linalg.norm(grads[0])), float(np.linalg.norm(np.asarray(clipped)))
    unclipped = [g for g in kept if g is not None and any(g is o for o in grads)]
    norm = float(np.linalg.norm(flat([g for g in kept if g is not None]))) if kept else 0.0
    if unclipped and abs(after - before) > 1e-3 * before:
        return verdict("confirmed", f"{TF}: the clip returned a new tensor (norm {before:.4g} -> {after:.4g}) and "
                                    f"left its input unchanged; afterwards {where} holds the unclipped gradients "
                                    f"(global norm {norm:.4g})", assumptions)
    return verdict("not-reproduced", f"{TF}: afterwards {where} holds {len(unclipped)} unclipped stand-in "
                                     f"gradient(s); the clip took norm {before:.4g} to {after:.4g}", assumptions)
