"""Calls between the module's own functions and methods: which definition a call runs, what it
returns, where it is called from, what each call site passes, and branches a call switches off.

A mixin of `local.Dataflow` (it uses the bindings and scopes there, as `bindings.LocalFlow`
declares them), kept apart so the local dataflow and the inter-procedural summaries can each
be read on their own.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

import libcst as cst

from ..names import CLAMPS, MAPPERS, RUNS_ITS_FUNCTION, SHAPE_CHANGES, SONNET_MODULES, WHERES
from .bindings import Binding, LocalFlow
from .constants import UNKNOWN, constant, says_small, switched_off
from .nodes import Function


class CallSummaries(LocalFlow):
    _call_sites: Optional[Dict[cst.CSTNode, List[cst.Call]]] = None  # built on first need
    _bound: Optional[Dict[cst.Call, cst.Call]] = None  # calls through a partial, as `bound` merges them
    _has_partial: Optional[bool] = None
    _mappers: Optional[Dict[cst.CSTNode, List[Tuple[cst.Call, cst.BaseExpression]]]] = None  # `_mapped`
    _gathering = False  # the call sites are being gathered (`class_of` must not read them yet)
    _entered: Dict[cst.CSTNode, cst.Call] = {}  # function -> the call a query follows it from (`entering`)

    def callee(self, call: cst.Call) -> Optional[cst.CSTNode]:
        """The FunctionDef, ClassDef or Lambda of this module a call runs: `f(...)` for a function,
        class or lambda bound here, `obj.m(...)` for a method of the class `obj` is an instance of
        (`self`, `Agent(...)`, a name or attribute bound to one) or the class itself (`Agent.m`)."""
        return self.definition_of(call.func)

    def definition_of(self, func: cst.BaseExpression) -> Optional[cst.CSTNode]:
        """What calling `func` runs, as `callee` says: a function, class, lambda or method."""
        if isinstance(func, cst.Call) and self.ctx.call_name(func) in RUNS_ITS_FUNCTION and func.args:
            func = func.args[0].value  # partial(f, ...)(x) and a Keras Lambda(f)(x) run f
        if isinstance(func, cst.Lambda):
            return func
        if isinstance(func, cst.Name):
            binding = self.binding_of(func)
            if binding is not None and binding.kind == "def":
                return binding.owner
            lam = binding.value if binding is not None and binding.kind == "assign" and not binding.path else None
            if isinstance(lam, cst.Lambda):
                return lam
            if isinstance(lam, cst.Call) and self.ctx.call_name(lam) in RUNS_ITS_FUNCTION and lam.args:
                return self.definition_of(lam)  # log_layer = Lambda(f); log_layer(p)
            passed = self._passed_definition(binding) if binding is not None and binding.kind == "param" else None
            if passed is not None:
                return passed
        if isinstance(func, cst.Attribute):
            binding = self.imported(func)  # `models.build(...)`: a function of a project module
            if binding is not None and binding.kind == "def":
                return binding.owner
            cls = self.class_of(func.value)
            method = self.method_named(cls, func.attr.value) if cls is not None else None
            held = self.class_of(func) if method is None and cls is not None else None
            return self.called_method(held) if held is not None else method  # self.net(x), self.net = Net()
        made = self._made_function(func) if isinstance(func, cst.Call) else None
        if made is not None:  # m.dense(4, tf.nn.softmax)(h): the function the factory returns
            return made
        instance = self.class_of(func) if isinstance(func, (cst.Name, cst.Call)) else None
        if instance is not None:  # layer(x), Head()(x): an instance's `call` (Keras) or `__call__`
            return self.called_method(instance)
        return None

    def class_of(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[cst.ClassDef]:
        """The class of this module that `expr` is an instance of, or is: `self` in its methods,
        `Agent`, `Agent(...)`, and names or attributes bound to those."""
        if depth > 4:
            return None
        if isinstance(expr, cst.Name):
            method = self.method_of(expr)
            if method is not None and method[0].params.params and method[0].params.params[0].name.value == expr.value:
                return method[1]
            binding = self.binding_of(expr)
            if binding is not None and binding.kind == "def" and isinstance(binding.owner, cst.ClassDef):
                return binding.owner
            if binding is not None and binding.kind == "param":
                return self._passed_class(binding, depth)
        if isinstance(expr, cst.Attribute):  # `models.Agent`, of a project module
            found = self._imported_class(expr)
            if found is not None:
                return found
        value = self.value_of(expr)
        if isinstance(value, cst.Name) and value is not expr:  # self.model = model, a parameter given Model()
            return self.class_of(value, depth + 1)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):  # Agent(...)
            return self.class_of(value.func, depth + 1)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):  # models.Agent(...)
            # or self.network_cls(...) of `network_cls=FullyConv`
            return self._imported_class(value.func) or self.class_of(value.func, depth + 1)
        return None

    def _made_function(self, factory_call: cst.Call) -> Optional[Function]:
        """The function a factory of this module returns (a closure defined in it, a lambda):
        what calling the factory's result runs."""
        factory = self.callee(factory_call)
        if not isinstance(factory, cst.FunctionDef):
            return None
        for value in self.returned(factory):
            if isinstance(value, cst.Lambda):
                return value
            binding = self.binding_of(value) if isinstance(value, cst.Name) else None
            if binding is not None and binding.kind == "def" and isinstance(binding.owner, cst.FunctionDef):
                return binding.owner
        return None

    def passed(self, param: Binding) -> List[Tuple[cst.Call, cst.BaseExpression]]:
        """(call, argument) for what each call of a parameter's function passes it: the call a
        query entered the function from (`sites`), else every call. None while the call sites
        are being gathered: they are what this reads."""
        if self._gathering or param.kind != "param" or not isinstance(param.owner, (cst.FunctionDef, cst.Lambda)):
            return []
        found = []
        for call in self.sites(param.owner):
            argument = self.argument_for(call, param.owner, param.name)
            if argument is not None:
                found.append((call, argument))
        params = self.passed_params(param.owner)
        if params and params[0].name.value == param.name:  # `tf.map_fn(f, elems)`: f is given each element
            found += [(call, elements) for call, elements in self._mapped(param.owner)]
        return found

    def _mapped(self, function: cst.CSTNode) -> List[Tuple[cst.Call, cst.BaseExpression]]:
        """(call, structure) for each `tf.map_fn(function, structure)` (or another of `MAPPERS`)
        naming `function`: its first parameter holds an element of the structure, which for a
        probability is a probability (a slice of it)."""
        if self._mappers is None:
            self._mappers = {}
            for call in self.ctx.nodes(cst.Call):
                if self.ctx.call_name(call) in MAPPERS and len(call.args) > 1 and not call.args[0].star:
                    mapped = self.definition_of(call.args[0].value)
                    if isinstance(mapped, cst.FunctionDef):
                        self._mappers.setdefault(mapped, []).append((call, call.args[1].value))
        return self._mappers.get(function, [])

    def _passed_definition(self, param: Binding) -> Optional[cst.CSTNode]:
        """The function or class a parameter is given by name, which calling the parameter runs
        (`train(build_model)`, `Agent(env, PolicyNet)`)."""
        for _, argument in self.passed(param):
            given = self.binding_of(argument) if isinstance(argument, cst.Name) else \
                self.imported(argument) if isinstance(argument, cst.Attribute) else None
            if given is not None and given.kind == "def":
                return given.owner
        return None

    def _passed_class(self, param: Binding, depth: int) -> Optional[cst.ClassDef]:
        """The class a parameter holds, or holds an instance of (`Agent(env, PolicyNet)` for
        `def __init__(self, env, policy_net)`: `policy_net(n)` builds a PolicyNet)."""
        given = [argument for _, argument in self.passed(param)]
        if not given and isinstance(param.owner, cst.FunctionDef) and not self.sites(param.owner):
            default = self._default(param.owner, param.name)  # `network_cls=FullyConv`, no call seen
            given = [default] if default is not None else []
        return next(filter(None, (self.class_of(argument, depth + 1) for argument in given)), None)

    @staticmethod
    def _default(function: Function, name: str) -> Optional[cst.BaseExpression]:
        """The default of the parameter `name` of `function` (None when it has none)."""
        params = [*function.params.posonly_params, *function.params.params, *function.params.kwonly_params]
        return next((p.default for p in params if p.name.value == name), None)

    def _imported_class(self, expr: cst.Attribute) -> Optional[cst.ClassDef]:
        binding = self.imported(expr)
        return binding.owner if binding is not None and isinstance(binding.owner, cst.ClassDef) else None

    def called_method(self, cls: cst.ClassDef) -> Optional[cst.FunctionDef]:
        """What calling an instance of `cls` runs: a Keras layer's or model's `call`, `__call__`, or
        the `_build` of a Sonnet 1 module (`snt.AbstractModule`, whose `__call__` runs it)."""
        if any(self.ctx.qualify(base.value) in SONNET_MODULES
               for owner in (cls, *self.bases(cls)) for base in owner.bases):
            return self.method_named(cls, "_build")
        return self.method_named(cls, "call") or self.method_named(cls, "__call__")

    def method_named(self, cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
        """The method `name` of a class of this module, or of the nearest of its bases defined here."""
        for owner in (cls, *self.bases(cls)):
            found = [m for m in owner.body.body if isinstance(m, cst.FunctionDef) and m.name.value == name]
            if found:
                return found[-1]
        return None

    def dispatched(self, call: cst.Call) -> List[Function]:
        """The functions a call may run: its callee, and for `self.head(x)` the overrides of the
        method in the subclasses (a base class's abstract `raise NotImplementedError`, or a
        default, is not what a subclass's instance runs)."""
        called = self.callee(call)
        if not isinstance(called, (cst.FunctionDef, cst.Lambda)):
            return []
        func = call.func
        on_self = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
        return [called, *self.overrides(called)] if on_self else [called]

    def overrides(self, method: Function) -> List[cst.FunctionDef]:
        """The methods of the same name in the subclasses of `method`'s class (this module's, and
        those of linked modules: a base class whose subclasses live in the modules importing it)."""
        cls = self.scope_of(method)
        if not isinstance(method, cst.FunctionDef) or not isinstance(cls, cst.ClassDef):
            return []
        return [m for sub in self.ctx.nodes(cst.ClassDef) if sub is not cls and cls in self.bases(sub)
                for m in sub.body.body if isinstance(m, cst.FunctionDef) and m.name.value == method.name.value]

    def bases(self, cls: cst.ClassDef, depth: int = 0) -> List[cst.ClassDef]:
        """The bases of a class that are defined in this module, nearest first."""
        found: List[cst.ClassDef] = []
        for base in cls.bases:
            parent = self.class_of(base.value) if isinstance(base.value, cst.Name) else None
            if parent is not None and parent is not cls and depth < 4:
                found += [parent, *self.bases(parent, depth + 1)]
        return found

    def related_classes(self, cls: cst.ClassDef) -> List[cst.ClassDef]:
        """The bases and the subclasses of a class that are defined in this module: where an
        attribute a method reads may be set (`self.probs` set by a subclass, read in the base)."""
        return self.bases(cls) + [c for c in self.ctx.nodes(cst.ClassDef) if c is not cls and cls in self.bases(c)]

    def returns(self, function: cst.FunctionDef) -> List[cst.Return]:
        """The `return <value>` statements of the function itself (not of nested functions)."""
        return [r for r in self.ctx.nodes(cst.Return) if r.value is not None
                and self.ctx.encloses(function, r) and self.scope_of(r) is function]

    def returned(self, function: Function) -> List[cst.BaseExpression]:
        """What a function returns: the values of its own `return` statements (not of nested
        functions), or a lambda's body."""
        if isinstance(function, cst.Lambda):
            return [function.body]
        return [r.value for r in self.returns(function) if r.value is not None]

    def applied_argument(self, call: cst.Call, names: frozenset) -> Optional[cst.BaseExpression]:
        """What `call` passes to a function that returns one of `names` applied to that argument
        (`applied_parameter`): `safe_log(probs)` is a log of `probs`. None for any other call."""
        function = self.callee(call)
        if not isinstance(function, (cst.FunctionDef, cst.Lambda)):
            return None
        parameter = self.applied_parameter(function, names)
        return self.argument_for(call, function, parameter) if parameter is not None else None

    def applied_parameter(self, function: Function, names: frozenset) -> Optional[str]:
        """The parameter every return of `function` applies one of `names` to, changed by nothing but
        an epsilon, a clamp or a cast, with a `where` guard around it allowed (`def safe_log(x):
        return tf.where(x > 0, tf.log(tf.maximum(x, 1e-12)), 0.)`): the function is that call
        under another name. None for a function doing anything else."""
        found = {self._applied(value, names, function, 0) for value in self.returned(function)}
        parameter = found.pop() if len(found) == 1 else None
        passed = {param.name.value for param in self.passed_params(function)}
        return parameter if parameter in passed else None

    def _applied(self, expr: cst.BaseExpression, names: frozenset, function: Function, depth: int) -> Optional[str]:
        if depth > 6:
            return None
        value = self.value_of(expr) if isinstance(expr, cst.Name) else expr
        if not isinstance(value, cst.Call):
            return None
        name = self.ctx.call_name(value)
        if name in WHERES:  # the guarded branch: the one applying the function
            branches = {self._applied(b.value, names, function, depth + 1) for b in value.args[1:3]}
            applied = branches - {None}
            return applied.pop() if len(applied) == 1 else None
        if name in names and value.args:
            return self._unchanged_parameter(value.args[0].value, function, depth + 1)
        return None

    def _unchanged_parameter(self, expr: cst.BaseExpression, function: Function, depth: int) -> Optional[str]:
        """The parameter of `function` that `expr` is, but for an epsilon added, a clamp or a cast."""
        if depth > 6:
            return None
        if isinstance(expr, cst.Name):
            binding = self.binding_of(expr)
            if binding is not None and binding.kind == "param" and binding.owner is function:
                return expr.value
            value = self.value_of(expr)
            return self._unchanged_parameter(value, function, depth + 1) if value is not expr else None
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            for kept, added in ((expr.left, expr.right), (expr.right, expr.left)):
                if constant(self, added) is not UNKNOWN or says_small(added):
                    return self._unchanged_parameter(kept, function, depth + 1)
            return None
        name = self.ctx.call_name(expr) if isinstance(expr, cst.Call) else None
        if isinstance(expr, cst.Call) and (name in CLAMPS or name in SHAPE_CHANGES) and expr.args:
            value = expr.args[0].value
            if name in CLAMPS and constant(self, value) is not UNKNOWN and len(expr.args) > 1:
                value = expr.args[1].value  # tf.maximum(1e-12, x): the clamp is symmetric
            return self._unchanged_parameter(value, function, depth + 1)
        return None

    def call_sites(self, function: cst.CSTNode) -> List[cst.Call]:
        """The calls of this module that run `function` (built once, on first need)."""
        if self._call_sites is None:
            self._call_sites, self._gathering = {}, True
            unresolved = [call for call in self.ctx.nodes(cst.Call) if not self._gather(call)]
            self._gathering = False
            # A method of an instance a parameter holds (`self.model.build()` with `self.model = model`,
            # `Agent(Model())`) is known once the first pass has found what each call passes.
            for call in unresolved:
                if isinstance(call.func, cst.Attribute) and self.ctx.call_name(call) is None:
                    self._gather(call)
        return self._call_sites.get(function, [])

    def _gather(self, call: cst.Call) -> bool:
        """Record the call site of the definition `call` runs; False when it runs none known."""
        called = self.callee(call)
        if isinstance(called, cst.ClassDef):  # Agent(...) runs Agent.__init__ with its arguments
            called = self.method_named(called, "__init__") or called
        if called is not None and self._call_sites is not None:
            self._call_sites.setdefault(called, []).append(call)
        return called is not None

    @contextmanager
    def entering(self, *calls: Tuple[cst.CSTNode, cst.Call]) -> Iterator[None]:
        """While a query follows a value into functions from given calls (function, call), each
        function's parameters are what that call passes, not what any call does: the output of
        `dense(h, 4, tf.nn.softmax)` is a softmax, that of `dense(x, 64, tf.nn.relu)` is not."""
        before = self._entered
        self._entered = {**before, **dict(calls)}  # a new dict: the class attribute stays empty
        try:
            yield
        finally:
            self._entered = before

    def sites(self, function: cst.CSTNode) -> List[cst.Call]:
        """The calls whose arguments a parameter of `function` holds: the one a query entered it
        from (`entering`), else every call of it."""
        entered = self._entered.get(function)
        return [entered] if entered is not None else self.call_sites(function)

    def argument_for(self, call: cst.Call, function: Function, name: str) -> Optional[cst.BaseExpression]:
        """What `call` passes for the parameter `name` of `function` (its default when it passes
        nothing); `self` is skipped for methods, `*args`/`**kwargs` give up."""
        params = self.passed_params(function)
        args = self._arguments(call)
        for a in args:
            if a.keyword is not None and a.keyword.value == name:
                return a.value
        if any(a.star for a in args):
            return None
        positional = [a.value for a in args if a.keyword is None]
        index = next((i for i, param in enumerate(params) if param.name.value == name), len(positional))
        return positional[index] if index < len(positional) else self._default(function, name)

    def passed_params(self, function: Function) -> List[cst.Param]:
        """The positional parameters a call fills: a method's `self` (or `cls`) is not one."""
        params = [*function.params.posonly_params, *function.params.params]
        if type(self.scope_of(function)) is cst.ClassDef and params and not self._static(function):
            params = params[1:]
        return params

    def bound(self, call: cst.Call) -> cst.Call:
        """The call as the library sees it when its function is a `functools.partial` of one:
        `Dense(1, activation=None)` of `Dense = partial(keras.layers.Dense, activation="relu")` is
        `keras.layers.Dense(1, activation=None)`, the call's keywords over the partial's. A new
        node, for reading a layer's name and arguments; findings stay on the call as written."""
        if self._bound is None:
            self._bound = {}
        if call not in self._bound:
            self._bound[call] = self._merged(call)
        return self._bound[call]

    def called_name(self, call: cst.Call) -> Optional[str]:
        """The canonical name of what a call runs, through `functools.partial` too (`bound`)."""
        return self.ctx.call_name(self.bound(call))

    def _merged(self, call: cst.Call) -> cst.Call:
        if not self._partials():
            return call
        func = call.func
        partial = self.value_of(func) if isinstance(func, (cst.Name, cst.Attribute)) else func
        if not (isinstance(partial, cst.Call) and self.ctx.call_name(partial) == "functools.partial"
                and partial.args and not partial.args[0].star):
            return call
        given = partial.args[1:]
        passed = {a.keyword.value for a in call.args if a.keyword is not None}
        args = [*(a for a in given if a.keyword is None), *(a for a in call.args if a.keyword is None),
                *(a for a in given if a.keyword is not None and a.keyword.value not in passed),
                *(a for a in call.args if a.keyword is not None)]
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args = [a.with_changes(comma=comma) for a in args[:-1]] + [a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                                                                   for a in args[-1:]]
        return call.with_changes(func=partial.args[0].value, args=args)

    def _partials(self) -> bool:
        """Does the module name `partial` at all (else no call goes through one: the common case,
        and `bound` is asked of every call)?"""
        if self._has_partial is None:
            self._has_partial = any(n.value == "partial" for n in self.ctx.nodes(cst.Name))
        return self._has_partial

    def _arguments(self, call: cst.Call) -> List[cst.Arg]:
        """The arguments a call passes, with those bound by `functools.partial(f, ...)` first."""
        func = call.func
        if isinstance(func, cst.Call) and self.ctx.call_name(func) == "functools.partial" and func.args:
            return [*func.args[1:], *call.args]
        return list(call.args)

    @staticmethod
    def _static(function: Function) -> bool:
        return isinstance(function, cst.FunctionDef) and any(
            isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in function.decorators)

    def describe_call(self, call: cst.Call) -> str:
        """`f(x)` in `train_step`: how a message names a call site."""
        text = " ".join(self.ctx.text(call).split())
        text = text if len(text) <= 60 else text[:57] + "..."
        scope = self.scope_of(call)
        where = f" in `{scope.name.value}`" if type(scope) is cst.FunctionDef else ""
        defined_at = getattr(self.ctx, "defined_at", None)  # a function of another project module
        site = defined_at(call) if defined_at is not None else None  # a call in a module importing this one
        where = f" in {site}" if site else where
        elsewhere = defined_at(self.callee(call)) if defined_at is not None else None
        return f"`{text}`{where}" + (f", which runs {elsewhere}" if elsewhere else "")

    def not_taken(self, node: cst.CSTNode, function: Function, call: cst.Call) -> bool:
        """Is `node` in a branch of `function` that `call` switches off? (`if activation:` with
        `activation=False` passed, `if not is_training:` with `is_training=True`, and the same for
        `a if is_training else b`)."""
        def passed(test: cst.BaseExpression) -> object:
            given = self.argument_for(call, function, test.value) if isinstance(test, cst.Name) else None
            return constant(self, given) if given is not None else UNKNOWN
        return switched_off(self, node, function, passed)
