"""What rules' fixes share: naming a TF/Keras symbol with the aliases the file already has,
and building replacement nodes that print as valid Python.

A fix never adds an import: it spells a symbol through a module alias the file already
imports (`tf.nn.log_softmax` when `tf` is `tensorflow`), or it is not offered.
"""
from __future__ import annotations

from typing import Iterable, Optional

import libcst as cst

from .names import canonical

# Expressions that need no parentheses as the operand of a unary minus, a call or a subscript.
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString,
          cst.List, cst.Tuple, cst.Dict)


def attribute_chain(text: str) -> cst.BaseExpression:
    """`a.b.c` as Name/Attribute nodes."""
    head, *rest = text.split(".")
    node: cst.BaseExpression = cst.Name(head)
    for part in rest:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def spelled(imports, targets: Iterable[str]) -> Optional[cst.BaseExpression]:
    """An expression naming one of `targets` (canonical names, preferred first) through the
    module's imports: the shortest spelling of the first target that has one, else None."""
    for target in targets:
        found = []
        for local, full in imports.aliases.items():
            prefix = canonical(full + ".x")[:-2]  # a module's own name: `tensorflow.compat.v1` -> `tensorflow`
            if target == prefix:
                found.append(local)
            elif target.startswith(prefix + "."):
                found.append(local + target[len(prefix):])
        if found:
            return attribute_chain(min(found, key=lambda text: (text.count("."), text)))
    return None


def renamed_callee(imports, func: cst.BaseExpression, name: str, targets: Iterable[str]
                   ) -> Optional[cst.BaseExpression]:
    """`func` with its last name replaced by `name` (`tf.nn.softmax` -> `tf.nn.log_softmax`) when
    that still names one of `targets` through the file's imports; otherwise any spelling of the
    targets the imports allow; None when the file imports nothing that reaches them."""
    targets = tuple(targets)
    if isinstance(func, cst.Attribute):
        candidate = func.with_changes(attr=cst.Name(name))
        if imports.qualify(candidate) in targets:
            return candidate
    return spelled(imports, targets)


def parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` wrapped in parentheses unless it is an atom (or already wrapped)."""
    if isinstance(expr, _ATOMS) or getattr(expr, "lpar", None):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def negated(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`-expr`, or `expr` itself for `-x`."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and not expr.lpar:
        return expr.expression
    return cst.UnaryOperation(operator=cst.Minus(), expression=parenthesized(expr))


def without_keywords(call: cst.Call, keywords: Iterable[str]) -> cst.Call:
    """`call` without the named keyword arguments; the last argument kept takes the comma (or
    its absence) of the original last argument, so no stray `, )` is left."""
    dropped = set(keywords)
    kept = [a for a in call.args if a.keyword is None or a.keyword.value not in dropped]
    if kept and kept[-1] is not call.args[-1]:
        kept[-1] = kept[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=kept)


def rebound_between(ctx, name: str, scope: cst.CSTNode, start: int, end: int) -> bool:
    """Is `name` assigned in `scope` between the source-order positions `start` and `end`?"""
    for node in ctx.flow.names(name):
        if start < ctx.pre[node] < end and ctx.flow.scope_of(node) is scope and _stored(ctx, node):
            return True
    return False


def _stored(ctx, name: cst.Name) -> bool:
    node: cst.CSTNode = name
    parent = ctx.parent.get(name)
    while isinstance(parent, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        node, parent = parent, ctx.parent.get(parent)
    if isinstance(parent, (cst.AssignTarget, cst.AsName)):
        return True
    if isinstance(parent, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
        return parent.target is node
    return False


def block_encloses(ctx, statement: cst.CSTNode, other: cst.CSTNode) -> bool:
    """Does every compound statement around `statement` (up to its function) also enclose
    `other`? Then a name `statement` binds is bound wherever `other` runs."""
    for ancestor in ctx.ancestors(statement):
        if isinstance(ancestor, (cst.FunctionDef, cst.Module, cst.ClassDef)):
            return True
        if isinstance(ancestor, cst.BaseCompoundStatement) and not isinstance(ancestor, cst.With) \
                and not ctx.encloses(ancestor, other):
            return False
    return True


def statement_line(ctx, node: cst.CSTNode) -> Optional[cst.SimpleStatementLine]:
    parent = ctx.parent.get(node)
    return parent if isinstance(parent, cst.SimpleStatementLine) else None

