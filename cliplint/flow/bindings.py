"""What a binding of a name is, and the part of `local.Dataflow` its mixins build on.

Apart from local.py so that the mixins (calls.py, constants.py), which local.py imports, can
name both without importing it back.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Literal, Optional, Protocol, Tuple

import libcst as cst

from .nodes import ModuleIndex

Kind = Literal["assign", "iter", "with", "param", "def", "append"]


@dataclass(frozen=True)
class Binding:
    name: str
    scope: cst.CSTNode
    kind: Kind
    value: Optional[cst.BaseExpression]  # right-hand side, iterable, default, appended item
    path: Tuple[int, ...]  # position inside an unpacking target: `a, (b, c) = ...` -> c is (1, 1)
    owner: cst.CSTNode  # the statement, loop, comprehension or function that binds
    visible_from: int  # source-order index from which uses see it


class LocalFlow(Protocol):
    """The bindings and scopes of `local.Dataflow`, which its mixins (`calls.CallSummaries`,
    `constants.FlagDefaults`) build on: they subclass this and `Dataflow` defines it, so each
    mixin reads on its own and is type-checked against what it uses."""

    ctx: ModuleIndex

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode: ...

    def method_of(self, node: cst.CSTNode) -> Optional[Tuple[cst.FunctionDef, cst.ClassDef]]: ...

    def binding_of(self, use: cst.CSTNode) -> Optional[Binding]: ...

    def value_of(self, expr: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression: ...

    def flag_defaults(self) -> Dict[str, Optional[cst.BaseExpression]]: ...

    def imported(self, use: cst.CSTNode) -> Optional[Binding]: ...
