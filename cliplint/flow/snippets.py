"""What the verifier re-executes for a finding: a snippet's source with the imported names and
literal values it uses, and for loops over gradients, the code to replay and the names the
probe binds to stand-in gradients, variables and empty lists.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple, TypedDict

import libcst as cst

from ..probes import Name, Snippet
from .constants import UNKNOWN, constant
from .gradients import Gradients, GradList, loop_key
from .local import Dataflow
from .nodes import grandparent, walk

PLAIN = (int, float, str, bool, type(None))


def snippet(flow: Dataflow, node: cst.CSTNode) -> Snippet:
    """What the verifier needs to re-execute `node`: its source text, the imported names it
    uses (canonical), the literal values of the local names it uses, and `values`: the values
    the static analysis read for the attributes it uses (`FLAGS.clipnorm` -> the flag's default),
    with `sources` saying where each value and constant came from, for the verdict's evidence."""
    imports: Dict[str, str] = {}
    constants: Dict[str, object] = {}
    values: Dict[str, object] = {}
    sources: Dict[str, str] = {}
    for sub in walk(node):
        if isinstance(sub, cst.Attribute):
            _attribute_value(flow, sub, values, sources)
        if not isinstance(sub, cst.Name) or sub.value in imports or sub.value in constants:
            continue
        qualified = flow.ctx.imports.qualify(sub)
        if qualified is not None:
            imports[sub.value] = qualified
            continue
        value = constant(flow, sub)
        if value is not UNKNOWN and isinstance(value, (*PLAIN, dict)):
            constants[sub.value] = value
            sources[sub.value] = _source(flow, sub)
    return Snippet(flow.ctx.text(node), imports, constants, values, sources, node)


def _attribute_value(flow: Dataflow, attribute: cst.Attribute, values: Dict[str, object],
                     sources: Dict[str, str]) -> None:
    """`args.clipnorm` / `FLAGS.clipnorm`: the flag default the rules folded it to."""
    if not isinstance(attribute.value, cst.Name) or flow.ctx.imports.qualify(attribute.value) is not None:
        return
    value = constant(flow, attribute)
    if value is not UNKNOWN and isinstance(value, PLAIN):
        text = flow.ctx.text(attribute)
        values[text] = value
        sources[text] = f"the default of its command-line flag `{attribute.attr.value}`"


def _source(flow: Dataflow, name: cst.Name) -> str:
    binding = flow.binding_of(name)
    if binding is not None and binding.kind == "param":
        return "its parameter default"
    return "its value in the file"


class Roles(TypedDict, total=False):
    """The probe's fields of the same names (`**probe_roles(...)`); one left out keeps its default."""

    gradients: Optional[Name]
    variables: Optional[Name]
    pairs: bool


class ElementRoles(Roles, total=False):
    """`Roles` of a loop's element, for the probes that replay the loop (`NoneUnsafe`, `PerTensor`)."""

    keyed: bool  # the gradients and variables are dicts with the same keys


def probe_roles(gradients: Gradients, iterable: Optional[cst.BaseExpression]) -> Roles:
    """Which expressions of a loop's iterable the verifier must bind to stand-in gradients and
    variables: `grads` in `for g in grads`, both in `zip(grads, model.trainable_variables)`."""
    roles = Roles(gradients=None, variables=None, pairs=False)
    if iterable is None:
        return roles
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) \
            and iterable.func.value in ("zip", "enumerate"):
        for zipped in iterable.args:
            grads = gradients.gradient_list(zipped.value)
            if grads is not None and roles["gradients"] is None:
                roles["gradients"], roles["pairs"] = Name(gradients.ctx.text(zipped.value)), grads.pairs
            elif iterable.func.value == "zip":
                roles["variables"] = Name(gradients.ctx.text(zipped.value))
        return roles
    grads = gradients.gradient_list(iterable)
    return Roles(gradients=Name(gradients.ctx.text(iterable)), variables=None, pairs=bool(grads and grads.pairs))


def element_roles(gradients: Gradients, element: cst.BaseExpression,
                  iterable: Optional[cst.BaseExpression]) -> ElementRoles:
    """`probe_roles` for one gradient element a loop reads: by its loop's iterable, or, for
    `grads[key]` (`Gradients._keyed_gradient`), the container itself, as a list when the loop
    counts through it (`range(len(grads))`) or as a dict keyed like the variables dict the loop's
    keys come from (`weights` of `for key in weights.keys()`)."""
    if not (isinstance(element, cst.Subscript) and loop_key(element) is not None
            and gradients.keyed_gradients(element.value) is not None):
        return ElementRoles(**probe_roles(gradients, iterable))
    container = Name(gradients.ctx.text(element.value))
    if gradients.gradient_list(element.value) is not None:
        return ElementRoles(gradients=container)
    keys = iterable
    if isinstance(keys, cst.Call) and isinstance(keys.func, cst.Attribute) and keys.func.attr.value == "keys":
        keys = keys.func.value
    variables = Name(gradients.ctx.text(keys)) if isinstance(keys, (cst.Name, cst.Attribute)) \
        and gradients.ctx.text(keys) != container else None  # `for key in grads`: its own keys
    return ElementRoles(gradients=container, variables=variables, keyed=True)


def loop_node(flow: Dataflow, owner: cst.CSTNode) -> cst.CSTNode:
    """The code to replay for a loop binding: the comprehension or `for`, or the `map(...)` call
    around a mapped lambda."""
    if isinstance(owner, cst.Lambda):
        call = grandparent(flow.ctx, owner)
        return call if isinstance(call, cst.Call) else owner
    return owner


def enclosing_for(flow: Dataflow, node: cst.CSTNode) -> Optional[cst.For]:
    """The innermost `for` loop of the function around `node`: what a probe replays to show what
    one statement of its body does to every element."""
    for ancestor in flow.ctx.ancestors(node):
        if isinstance(ancestor, cst.For):
            return ancestor
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
            return None
    return None


def appended_lists(owner: Optional[cst.CSTNode]) -> Tuple[Name, ...]:
    """Names of the lists a `for` loop appends to (`kept`, `self.clipped`): the probe starts them empty."""
    if not isinstance(owner, cst.For):
        return ()
    return tuple(sorted({Name(_receiver(sub.func.value)) for sub in walk(owner.body) if isinstance(sub, cst.Call)
                         and isinstance(sub.func, cst.Attribute) and sub.func.attr.value in ("append", "extend")
                         and _receiver(sub.func.value)}))


def _receiver(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return f"{node.value.value}.{node.attr.value}"
    return ""


def origin_name(flow: Dataflow, grads: GradList) -> Optional[Name]:
    """The name `tape.gradient(...)` was assigned to (`grads` in `grads = tape.gradient(...)`)."""
    parent = flow.ctx.parent.get(grads.origin)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return Name(parent.targets[0].target.value)
    return None
