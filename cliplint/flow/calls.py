"""Calls between the module's own functions and methods: which definition a call runs, what it
returns, where it is called from, what each call site passes, and branches a call switches off.

A mixin of `local.Dataflow` (it uses the bindings and scopes there), kept apart so the local
dataflow and the inter-procedural summaries can each be read on their own.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from .constants import UNKNOWN, constant


class CallSummaries:
    _call_sites: Optional[Dict[cst.CSTNode, List[cst.Call]]] = None  # built on first need

    def callee(self, call: cst.Call) -> Optional[cst.CSTNode]:
        """The FunctionDef or ClassDef of this module a call runs: `f(...)` for a function or
        class bound here, `self.m(...)` for a method of the caller's own class."""
        func = call.func
        if isinstance(func, cst.Name):
            binding = self.binding_of(func)
            return binding.owner if binding is not None and binding.kind == "def" else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            method = self.method_of(call)
            if method is not None and self._attribute_scope(func) is method[1]:
                return self.method_named(method[1], func.attr.value)
        return None

    @staticmethod
    def method_named(cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
        found = [m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m.name.value == name]
        return found[-1] if found else None

    def returns(self, function: cst.FunctionDef) -> List[cst.Return]:
        """The `return <value>` statements of the function itself (not of nested functions)."""
        return [r for r in self.ctx.nodes(cst.Return) if r.value is not None
                and self.ctx.encloses(function, r) and self.scope_of(r) is function]

    def call_sites(self, function: cst.CSTNode) -> List[cst.Call]:
        """The calls of this module that run `function` (built once, on first need)."""
        if self._call_sites is None:
            self._call_sites = {}
            for call in self.ctx.nodes(cst.Call):
                called = self.callee(call)
                if called is not None:
                    self._call_sites.setdefault(called, []).append(call)
        return self._call_sites.get(function, [])

    def argument_for(self, call: cst.Call, function: cst.FunctionDef, name: str) -> Optional[cst.BaseExpression]:
        """What `call` passes for the parameter `name` of `function` (its default when it passes
        nothing); `self` is skipped for methods, `*args`/`**kwargs` give up."""
        params = [*function.params.posonly_params, *function.params.params]
        if type(self.scope_of(function)) is cst.ClassDef and params and not self._static(function):
            params = params[1:]
        for a in call.args:
            if a.keyword is not None and a.keyword.value == name:
                return a.value
        if any(a.star for a in call.args):
            return None
        positional = [a.value for a in call.args if a.keyword is None]
        for index, param in enumerate(params):
            if param.name.value == name:
                return positional[index] if index < len(positional) else param.default
        kwonly = [p for p in function.params.kwonly_params if p.name.value == name]
        return kwonly[0].default if kwonly else None

    @staticmethod
    def _static(function: cst.FunctionDef) -> bool:
        return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
                   for d in function.decorators)

    def describe_call(self, call: cst.Call) -> str:
        """`f(x)` in `train_step`: how a message names a call site."""
        text = " ".join(self.ctx.text(call).split())
        text = text if len(text) <= 60 else text[:57] + "..."
        scope = self.scope_of(call)
        where = f" in `{scope.name.value}`" if type(scope) is cst.FunctionDef else ""
        return f"`{text}`{where}"

    def not_taken(self, node: cst.CSTNode, function: cst.FunctionDef, call: cst.Call) -> bool:
        """Is `node` in a branch of `function` that `call` switches off? (`if activation:` with
        `activation=False` passed, `if not is_training:` with `is_training=True`)."""
        for anc in self.ctx.ancestors(node):
            if anc is function:
                return False
            if isinstance(anc, cst.If):
                test, negated = anc.test, False
                if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                    test, negated = test.expression, True
                if not isinstance(test, cst.Name):
                    continue
                passed = self.argument_for(call, function, test.value)
                value = constant(self, passed) if passed is not None else UNKNOWN
                if value is UNKNOWN:
                    continue
                taken = bool(value) != negated
                if self.ctx.encloses(anc.body, node) != taken:
                    return True
        return False
