"""Where probabilities come from: softmax/sigmoid calls, layers with a softmax or sigmoid
activation (Keras, TF 1 `tf.layers`, contrib and slim), functions, methods, models and `call`
methods of the module that return one, `self` attributes holding one, TensorArrays and lists
they are written into, and parameters a call of their function passes one into.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, FrozenSet, List, NamedTuple, Optional, Tuple, cast

import libcst as cst

from ..names import (
    ABSOLUTES,
    ACTIVATION_GETTERS,
    ARITHMETIC,
    EXP,
    FUNCTIONAL,
    KEEPS_PROBABILITY,
    LAYER_FUNCTIONS,
    LAYOUTS,
    LINEAR_LAYERS,
    MAPPERS,
    MATMULS,
    MERGING_LAYERS,
    MODEL_LOSS_CALLS,
    MODEL_WRAPPERS,
    MOVING_LAYERS,
    SEQUENTIAL,
    SIGMOID,
    SOFTMAX,
    STACKS,
    WHERES,
)
from .carriers import (
    TENSOR_ARRAY_READS,
    carried_constant,
    element_at,
    elements,
    held,
    iterated,
    keyword,
    origins,
    trace,
    traced,
)
from .constants import UNKNOWN, constant, dead, says_small
from .formulas import summed
from .local import PARAMETER_DEPTH, Binding, Dataflow
from .nodes import MAX_DEPTH, Function, arg

# A linear layer's output is logits (`logits`): MATMULS, a bias added, layers without activation.
BIAS_ADDS = frozenset({"tensorflow.nn.bias_add", "tensorflow.add", "tensorflow.math.add"})
# Activations that leave a layer's output unbounded: logits (or a ReLU's), not probabilities.
NOT_SQUASHING = (None, "linear", "relu")


class Source(NamedTuple):
    """Where a probability comes from."""

    kind: str  # softmax | sigmoid | 1-sigmoid
    node: cst.CSTNode  # the call or layer that produces it
    padded: bool  # an epsilon or a clip was added on the way
    via: Tuple[str, ...] = ()  # the calls it came in through, for messages


class Compiled(NamedTuple):
    """A model given the loss it trains with."""

    call: cst.Call  # `model.compile(...)`, `tff.learning.models.from_keras_model(...)`
    model: cst.BaseExpression
    loss: cst.BaseExpression
    trains: bool  # the call exists to train the model (else ask whether `fit` is called)


def activation_of(flow: Dataflow, layer: cst.Call) -> Optional[str]:
    """'softmax'/'sigmoid' when a layer constructor or layer function applies that activation."""
    layer = flow.bound(layer)
    if flow.ctx.call_name(layer) == "keras.layers.Softmax":
        return "softmax"
    value = activation_argument(flow, layer)
    return activation_kind(flow, value) if value is not None else None


def activation_argument(flow: Dataflow, layer: cst.Call) -> Optional[cst.BaseExpression]:
    """What a layer constructor or layer function (as the library sees it: `flow.bound`) is given
    as its activation: by position where the layer takes one there, else the keyword, written or
    through `**` (`Dense(n, **cfg)`, a builder's `**kwargs`); None when it is given none."""
    name = flow.ctx.call_name(layer) or ""
    if name == "keras.layers.Activation":
        value = arg(layer, 0, "activation")
    elif name == "keras.layers.Dense":
        value = arg(layer, 1, "activation")
    elif name in LAYER_FUNCTIONS:
        value = arg(layer, *LAYER_FUNCTIONS[name])
    elif name.startswith(("keras.layers.", "tensorflow.layers.")):
        value = None
    else:
        return None
    return value if value is not None else keyword(flow, layer, "activation")


def application(flow: Dataflow, call: cst.Call) -> bool:
    """Does `call` build a Keras application with its classifier: a model class of
    `keras.applications` (`ResNet50(weights=None, classes=10)`) with `include_top` not given
    False? Its last layer applies `classifier_activation` (softmax unless given). Read from
    keywords only: the positions of these parameters differ between the applications."""
    name = flow.ctx.call_name(call) or ""
    if not (name.startswith("keras.applications.") and name.rsplit(".", 1)[-1][:1].isupper()) \
            or any(a.keyword is None for a in call.args):
        return False
    top = arg(call, 99, "include_top")
    return top is None or constant(flow, top) is True


def application_head(flow: Dataflow, call: cst.Call) -> Optional[str]:
    """'softmax'/'sigmoid' when `call` builds a Keras application whose classifier applies it."""
    if not application(flow, call):
        return None
    head = arg(call, 99, "classifier_activation")
    return "softmax" if head is None else activation_kind(flow, head)


def unsquashed(flow: Dataflow, layer: cst.Call) -> bool:
    """Does the layer constructor `layer` (as the library sees it) output logits: a linear layer
    (`LINEAR_LAYERS`) whose activation is none, "linear" or "relu" on every value it takes (each
    call of a builder passing one, not the parameter's default alone), or a Keras application
    whose `classifier_activation` is one of those?"""
    layer = flow.bound(layer)
    if application(flow, layer):  # its classifier: softmax unless given
        activation = arg(layer, 99, "classifier_activation")
        if activation is None:
            return False
    elif flow.ctx.call_name(layer) not in LINEAR_LAYERS:
        return False
    else:
        activation = activation_argument(flow, layer)
    if activation is None:
        return True
    value = carried_constant(flow, activation)
    return value is not UNKNOWN and value in NOT_SQUASHING


def activation_kind(flow: Dataflow, value: cst.BaseExpression, depth: int = 0) -> Optional[str]:
    """'softmax'/'sigmoid' when `value` is that activation: its name as a string, the function,
    `keras.activations.get(...)` of one, or a name, attribute or parameter that holds one
    (`self.activation` set from a constructor argument: followed through the carriers)."""
    if depth > MAX_DEPTH:
        return None
    # A name is followed through the carriers, not folded: a parameter's default ("relu") is one
    # of the values it takes, and a call may pass "sigmoid".
    literal = constant(flow, value) if not isinstance(value, (cst.Name, cst.Attribute)) else UNKNOWN
    if isinstance(literal, str):
        return literal if literal in ("softmax", "sigmoid") else None
    qualified = flow.ctx.qualify(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    if qualified in SOFTMAX or qualified in SIGMOID:
        return "softmax" if qualified in SOFTMAX else "sigmoid"
    if isinstance(value, cst.Call) and flow.ctx.call_name(value) in ACTIVATION_GETTERS and value.args:
        return activation_kind(flow, value.args[0].value, depth + 1)
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):  # `cfg["activation"]` too
        return None
    found = next(filter(None, (activation_kind(flow, origin.expr, depth + 1) for origin in origins(flow, value))), None)
    if found is None and isinstance(value, cst.Attribute):  # an argparse/absl flag's default (`args.activation`)
        literal = constant(flow, value)
        found = literal if literal in ("softmax", "sigmoid") else None
    return found


class Probabilities:
    """Where softmax/sigmoid outputs come from: the calls, layers with a softmax activation,
    functions, methods, models and `call` methods of the module that return one, `self`
    attributes holding one, and parameters that a call of their function passes one into."""

    def __init__(self, flow: Dataflow) -> None:
        self.flow = flow
        self.ctx = flow.ctx
        self._hops = 0  # parameters followed into callers on the current path
        self._modelled = 0  # functional models' outputs followed on the current path (`model_logits`)
        self._compiled: Optional[List[Compiled]] = None

    def model_output(self, model) -> Optional[Source]:
        return self._model(model, frozenset(), False)

    def output_losses(self, compiled: Compiled) -> List[Tuple[cst.BaseExpression, cst.BaseExpression]]:
        """(loss, output) for each loss of a list or dict given to compile, matched to the outputs
        of the functional model compiled: by position, or by the `name` of the layer making the
        output (`loss={"cls": "categorical_crossentropy", "box": "mse"}`). Empty when the loss is
        one loss (Keras applies it to every output) or the outputs are not known."""
        losses = self.flow.value_of(compiled.loss)
        built = self._built(compiled.model)[0]
        if not (isinstance(losses, (cst.List, cst.Tuple, cst.Dict)) and isinstance(built, cst.Call)
                and self.ctx.call_name(built) in FUNCTIONAL):
            return []
        outputs = arg(built, 1, "outputs")
        outputs = self.flow.value_of(outputs) if outputs is not None else None
        if not isinstance(outputs, (cst.List, cst.Tuple)) or any(isinstance(e, cst.StarredElement)
                                                                for e in outputs.elements):
            return []
        heads = [element.value for element in outputs.elements]
        if isinstance(losses, cst.Dict):
            named = {self._output_name(head): head for head in heads}
            keyed = [(constant(self.flow, e.key), e.value) for e in losses.elements if isinstance(e, cst.DictElement)]
            return [(loss, named[key]) for key, loss in keyed if isinstance(key, str) and key in named]
        given = [element.value for element in losses.elements]
        if len(given) != len(heads) or any(isinstance(e, cst.StarredElement) for e in losses.elements):
            return []
        return list(zip(given, heads))

    def _output_name(self, output: cst.BaseExpression) -> Optional[str]:
        """The `name` given to the layer whose application makes `output` (`Dense(5, name="cls")(h)`,
        also a layer bound to a name first), through every carrier."""
        def named(value: cst.BaseExpression) -> Optional[str]:
            if not isinstance(value, cst.Call):
                return None
            layer = self.flow.value_of(value.func) if isinstance(value.func, (cst.Name, cst.Attribute)) else value.func
            given = arg(layer, 99, "name") if isinstance(layer, cst.Call) else None
            text = constant(self.flow, given) if given is not None else None
            return text if isinstance(text, str) else None
        return trace(self.flow, output, named)

    def last_layer(self, model, depth: int = 0) -> Optional[cst.Call]:
        """The constructor call of the layer whose output a Sequential or functional model built
        in this module returns (`Dense(1)` in `Sequential([..., Dense(1)])`, `.add(Dense(1))`,
        `Model(inp, Dense(1)(h))`, also from a builder function's return), or the Keras
        application call whose classifier ends the model (`application`), else None."""
        value = self._built(model)[0]
        if not isinstance(value, cst.Call) or depth > MAX_DEPTH:
            return None
        built = self.flow.callee(value)
        if isinstance(built, cst.FunctionDef):  # model = make_model(): the model every return gives
            return self._every([self.last_layer(r, depth + 1) for r in self.flow.returned(built)])
        name = self.ctx.call_name(value)
        if isinstance(built, cst.ClassDef) and name not in SEQUENTIAL | FUNCTIONAL:
            # a subclassed Model: the layer each return of `call` applies (not Keras' own classes,
            # which a project-wide run of Keras itself links to)
            call = self.flow.method_named(built, "call")
            return self._every([self._applied(r) for r in self.flow.returned(call)]) if call is not None else None
        if name in SEQUENTIAL:
            return self._sequential_last(value)
        if name in FUNCTIONAL:
            return self._applied(arg(value, 1, "outputs"))
        return value if application(self.flow, value) else None  # its classifier is its last layer

    @staticmethod
    def _every(layers: List[Optional[cst.Call]]) -> Optional[cst.Call]:
        """The layer when every path gives one (the first), else None: an unknown path is unknown."""
        return layers[0] if layers and all(layer is not None for layer in layers) else None

    def _applied(self, output: Optional[cst.BaseExpression]) -> Optional[cst.Call]:
        """The constructor of the layer whose call makes `output`, through every carrier."""
        return trace(self.flow, output,
                     lambda value: self.layer_applied(value) if isinstance(value, cst.Call) else None)

    def layer_applied(self, call: cst.Call) -> Optional[cst.Call]:
        """The Keras layer constructor a call applies, as the library sees it (`bound`):
        `Dense(3)(h)`, `head = Dense(3)` then `head(h)`, `self.head(h)` of `self.head = Dense(3)`."""
        layer = call.func if isinstance(call.func, cst.Call) else self.flow.value_of(call.func)
        if not isinstance(layer, cst.Call):
            return None
        layer = self.flow.bound(layer)
        return layer if (self.ctx.call_name(layer) or "").startswith("keras.layers.") else None

    def probability(self, expr, seen: FrozenSet[cst.CSTNode], padded: bool = False) -> Optional[Source]:
        if expr is None or len(seen) > MAX_DEPTH * 2 or expr in seen:
            return None
        seen = seen | {expr}
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self._named(expr, seen, padded)
        if isinstance(expr, cst.Subscript):
            return self._subscript(expr, seen, padded)
        if isinstance(expr, (cst.List, cst.Tuple)):  # a container holds probabilities if an element does
            return self._stacked(expr, seen, padded)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.probability(expr.elt, seen, padded)
        if isinstance(expr, cst.DictComp):
            return self.probability(expr.value, seen, padded)
        if isinstance(expr, (cst.IfExp, cst.NamedExpr)):
            return self._from_origins(expr, seen, padded)
        if isinstance(expr, cst.BinaryOperation):
            return self._arithmetic(expr, seen, padded)
        if isinstance(expr, cst.Call):
            return self._call(expr, seen, padded)
        return None

    def _named(self, expr, seen, padded) -> Optional[Source]:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "output":  # model.output, or an attribute
            found = self._model(expr.value, seen, padded)                   # named `output`
            if found is not None:
                return found
        binding = self.flow.binding_of(expr) if isinstance(expr, cst.Name) else None
        if binding is not None and binding.kind == "iter":  # `for p in heads`, zip(gates, heads), map(f, heads)
            iterable = iterated(binding)
            if iterable is None:
                return None
            found = self.probability(iterable, seen, padded)
            if found is None and isinstance(iterable, cst.Name):  # the elements its list was given (`append`)
                found = self._stacked(iterable, seen, padded)
            return found
        if binding is not None and binding.kind == "param" and isinstance(binding.owner, cst.FunctionDef):
            compiled = self._loss_input(binding.owner, binding, seen, padded)
            if compiled is not None:
                return compiled
        return self._from_origins(expr, seen, padded)

    def compiled(self) -> List[Compiled]:
        """Every place the module gives a model the loss it trains with: `model.compile(loss=...)`
        on a model (not a Keras class's own `compile`), and the calls of `MODEL_LOSS_CALLS`."""
        if self._compiled is None:
            self._compiled = []
            for call in self.ctx.nodes(cst.Call):
                func, name = call.func, self.ctx.call_name(call)
                if name in MODEL_LOSS_CALLS:
                    model_keyword, loss_keyword = MODEL_LOSS_CALLS[name]
                    model, loss = arg(call, 0, model_keyword), arg(call, 1, loss_keyword)
                    if model is not None and loss is not None:
                        self._compiled.append(Compiled(call, model, loss, True))
                elif isinstance(func, cst.Attribute) and func.attr.value == "compile" and name is None:
                    loss = arg(call, 1, "loss")
                    if loss is not None:
                        self._compiled.append(Compiled(call, func.value, loss, False))
        return self._compiled

    def _loss_input(self, function: cst.FunctionDef, binding: Binding, seen, padded) -> Optional[Source]:
        """`y_pred` of a loss function (or method) a model is compiled with (`compiled`): what
        the compiled model outputs (`binding`, a parameter of `function`). Keras calls the loss
        itself, so no call site passes it."""
        for compiled, output in self._compiled_with(function, binding):
            found = self._model(compiled.model, seen, padded) if output is None \
                else self.probability(output, seen, padded)
            if found is not None:
                return found._replace(via=(self.flow.describe_call(compiled.call),) + found.via)
        return None

    def _compiled_with(self, function: cst.FunctionDef,
                       binding: Binding) -> List[Tuple[Compiled, Optional[cst.BaseExpression]]]:
        """The compiles whose loss is `function`, when `binding` is its `y_pred` (second)
        parameter, each with the output it is the loss of (None: the model's)."""
        params = self.flow.passed_params(function)
        if len(params) < 2 or params[1].name.value != binding.name:
            return []
        return [(c, output) for c in self.compiled() for loss, output in self._losses(c)
                if self._loss_function(loss) is function]

    def _losses(self, compiled: Compiled) -> List[Tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]:
        """Each loss of a compile with the output it applies to: one per output (`output_losses`),
        else the loss given, for the model's output (None)."""
        return [(loss, output) for loss, output in self.output_losses(compiled)] or [(compiled.loss, None)]

    def _from_origins(self, expr, seen, padded) -> Optional[Source]:
        """The first probability among where the value of `expr` comes from (`carriers`); each
        hop through a call (a parameter, a return) is counted, so call chains stay bounded."""
        for origin in origins(self.flow, expr):
            if origin.via and self._hops >= PARAMETER_DEPTH:
                continue
            self._hops += bool(origin.via)
            try:
                found = self.probability(origin.expr, seen, padded)
            finally:
                self._hops -= bool(origin.via)
            if found is not None:
                return found._replace(via=origin.via + found.via)
        return None

    def _arithmetic(self, expr: cst.BinaryOperation, seen, padded) -> Optional[Source]:
        flow = self.flow
        left, right = expr.left, expr.right
        left_value, right_value = constant(flow, left), constant(flow, right)
        if isinstance(expr.operator, cst.Add):
            if right_value is not UNKNOWN or says_small(right):
                return self.probability(left, seen, True)
            if left_value is not UNKNOWN or says_small(left):
                return self.probability(right, seen, True)
            mixed = self.probability(left, seen, padded)  # g * p + (1 - g) * q: a mixture of probabilities
            return mixed if mixed is not None and self.probability(right, seen, padded) is not None else None
        if isinstance(expr.operator, cst.Subtract) and _about_one(left_value):
            inner = self.probability(right, seen, padded)  # 1 - p, also `1e-10 + 1 - p`
            if inner and inner.kind == "sigmoid":
                return inner._replace(kind="1-sigmoid", padded=inner.padded or left_value != 1)
            return None
        if isinstance(expr.operator, cst.Multiply):  # p * one_hot(a): picks out one probability
            if self.logits(left) or self.logits(right):  # g * linear_head: a gated mixture of logits
                return None
            return self.probability(left, seen, padded) or self.probability(right, seen, padded)
        if isinstance(expr.operator, cst.Divide):
            written = handwritten(flow, expr)
            if written is not None:
                return Source(written, expr, padded)
            return self.probability(left, seen, padded)  # p / sum(p), (p1 + p2) / 2: still probabilities
        return None

    def logits(self, expr: Optional[cst.BaseExpression]) -> Optional[cst.CSTNode]:
        """What makes `expr` logits, through every carrier: a matrix product (plus a bias), a
        layer without a squashing activation applied (`unsquashed`), a model whose last layer is
        one, or the `y_pred` of a loss such a model is compiled with; also after shape changes and
        layers that only move or average values (`Flatten`, `Reshape`, pooling). None when the
        value is a probability on any path."""
        if expr is None or self.probability(expr, frozenset()) is not None:
            return None
        return trace(self.flow, expr, self._linear_output, self._keeping_logits)

    def _linear_output(self, value: cst.BaseExpression) -> Optional[cst.CSTNode]:
        ctx = self.ctx
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.MatrixMultiply):
            return value
        if isinstance(value, cst.Name):
            binding = self.flow.binding_of(value)
            if binding is not None and binding.kind == "param" and isinstance(binding.owner, cst.FunctionDef):
                made = (self.model_logits(c.model) if output is None else self.logits(output)
                        for c, output in self._compiled_with(binding.owner, binding))
                return next(filter(None, made), None)
            return None
        if not isinstance(value, cst.Call):
            return None
        if ctx.call_name(value) in MATMULS:
            return value
        layer = self.layer_applied(value)
        if layer is not None:
            return layer if unsquashed(self.flow, layer) else None
        return self.model_logits(value.func) if not isinstance(value.func, cst.Call) else None

    def model_logits(self, model: cst.BaseExpression) -> Optional[cst.CSTNode]:
        """What makes the outputs of the model `model` logits: its last layer (`last_layer`),
        unsquashed, or what a functional model's outputs are made of (`K.dot(adj, Dense(n)(h))`)."""
        layer = self.last_layer(model)
        if layer is not None:
            return layer if unsquashed(self.flow, layer) else None
        value = self._built(model)[0]
        if not isinstance(value, cst.Call) or self.ctx.call_name(value) not in FUNCTIONAL \
                or self._modelled >= MAX_DEPTH:
            return None
        self._modelled += 1  # a model built of models: bounded
        try:
            return self.logits(arg(value, 1, "outputs"))
        finally:
            self._modelled -= 1

    def _keeping_logits(self, value: cst.BaseExpression) -> List[cst.BaseExpression]:
        """What `value` is logits if it is: the terms of a sum (a bias added), a scaled or shifted
        value (`z / temperature`, `z - max(z)`), the tensor a piece or a rearrangement is taken
        of, the parts of a concatenation, and the input of a layer that only moves or averages
        values."""
        if isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, (cst.Add, cst.Multiply)):
                return [value.left, value.right]
            return [value.left] if isinstance(value.operator, (cst.Divide, cst.Subtract)) else []
        if isinstance(value, cst.Subscript):  # z[:, 0]; a container's element is `carriers.held`'s
            return [value.value] if element_at(self.flow, value) is None else []
        if not isinstance(value, cst.Call) or not value.args:
            return []
        name = self.ctx.call_name(value)
        if name in STACKS and isinstance(parts := value.args[0].value, (cst.List, cst.Tuple)):
            return [element.value for element in parts.elements]
        if name in BIAS_ADDS or name in LAYOUTS or name in STACKS:
            return [value.args[0].value]
        if isinstance(value.func, cst.Call) and self.ctx.call_name(value.func) in MOVING_LAYERS:
            return [value.args[0].value]
        if isinstance(value.func, cst.Call) and self.ctx.call_name(value.func) == "keras.layers.Activation":
            given = arg(value.func, 0, "activation")  # Activation("linear"), Activation("relu") keep logits
            if given is not None and carried_constant(self.flow, given) in NOT_SQUASHING:
                return [value.args[0].value]
        return []

    def _call(self, call: cst.Call, seen, padded) -> Optional[Source]:
        ctx = self.ctx
        name = ctx.call_name(call)
        if name in SOFTMAX:
            return Source("softmax", call, padded)
        if name in SIGMOID:
            return Source("sigmoid", call, padded)
        if name in KEEPS_PROBABILITY:
            clipped = padded or name.endswith(("clip_by_value", "clip", "maximum"))
            value = arg(call, 0, "x")
            symmetric = name.endswith(("maximum", "minimum"))
            if symmetric and value is not None and constant(self.flow, value) is not UNKNOWN:
                value = arg(call, 1, "y")  # tf.maximum(1e-12, p): the clamp is symmetric
            return self.probability(value, seen, clipped)
        if name in STACKS:
            return self._stacked(arg(call, 0, "values"), seen, padded)
        if name in ABSOLUTES:  # |y - p| with 0/1 labels is p or 1 - p: the likelihood of the label
            inner = arg(call, 0, "x")
            inner = self.flow.value_of(inner) if isinstance(inner, cst.Name) else inner
            if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Subtract):
                return self.probability(inner.left, seen, padded) or self.probability(inner.right, seen, padded)
            return self.probability(inner, seen, padded)
        if name in ARITHMETIC and len(call.args) >= 2 and not any(a.keyword or a.star for a in call.args[:2]):
            # tf.multiply(p, y), tf.add(p, eps), tf.subtract(1.0, p): as the operator would be
            spelled = cst.BinaryOperation(left=call.args[0].value, operator=ARITHMETIC[name](),
                                          right=call.args[1].value)
            found = self._arithmetic(spelled, seen, padded)
            return found._replace(node=call) if found is not None and found.node is spelled else found
        if name in WHERES:  # an element-wise choice: probabilities from either branch are probabilities
            branches = (arg(call, 1, "x"), arg(call, 2, "y"))
            return next(filter(None, (self.probability(b, seen, padded) for b in branches)), None)
        if name in MAPPERS:  # map_structure(lambda t: ..., probs): what the function makes of each one
            function = arg(call, 0, "fn")
            return self.probability(function.body, seen, padded) if isinstance(function, cst.Lambda) else None
        if name in LAYER_FUNCTIONS:
            kind = activation_of(self.flow, call)
            return Source(kind, call, padded) if kind else None
        func = call.func
        if isinstance(func, cst.Call) and self.ctx.call_name(func) in MERGING_LAYERS:  # Concatenate()([p, boxes])
            return self._stacked(arg(call, 0, "inputs"), seen, padded)
        if isinstance(func, cst.Call):  # Dense(10, activation="softmax")(h), Softmax()(h)
            kind = activation_of(self.flow, func)
            if kind:
                return Source(kind, call, padded)
        if isinstance(func, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and name is None:
            # self.activation(x) with activation=tf.nn.softmax; self.acts[i](x), `for act in acts`
            chain = _chain(self.flow, call)
            last = _last_layer(self.flow, chain) if chain is not None else func
            kind = activation_kind(self.flow, func) or (layer_kind(self.flow, last) if last is not None else None)
            if kind:
                return Source(kind, call, padded)
        if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_ARRAY_READS:
            return self._tensor_array(func.value, seen, padded)
        if isinstance(func, cst.Attribute) and func.attr.value == "predict" and self.flow.callee(call) is None:
            return self._model(func.value, seen, padded)  # Keras' model.predict(x); not a method of this module
        return self._model(func, seen, padded, call)

    def _subscript(self, expr: cst.Subscript, seen, padded) -> Optional[Source]:
        """`heads[0]`, `outputs["probs"]`: what the container holds there (`carriers.held`: a
        literal's element, the values stored at the key, any element appended); else the
        container itself (a slice or an element of probabilities is probabilities)."""
        element = element_at(self.flow, expr)
        if element is not None:
            return self.probability(element, seen, padded)
        candidates = held(self.flow, expr)
        if candidates:
            return next(filter(None, (self.probability(v, seen, padded) for v in candidates)), None)
        if isinstance(self.flow.value_of(expr.value), (cst.Dict, cst.List, cst.Tuple)):
            return None  # a container known to hold no probabilities
        return self.probability(expr.value, seen, padded)

    def _stacked(self, values, seen, padded) -> Optional[Source]:
        """`tf.stack(probs_list)`: a list literal, or the elements of the list a name holds."""
        if isinstance(values, (cst.List, cst.Tuple)):
            return next(filter(None, (self.probability(e.value, seen, padded) for e in values.elements)), None)
        if isinstance(values, cst.Name):
            return next(filter(None, (self.probability(v, seen, padded) for v in elements(self.flow, values))), None)
        return None

    def loss_functions(self) -> List[Function]:
        """The functions (or lambdas) models are compiled with as their loss (`_loss_function`)."""
        return [f for f in (self._loss_function(loss) for compiled in self.compiled()
                            for loss, _ in self._losses(compiled)) if f is not None]

    def _loss_function(self, loss: cst.BaseExpression) -> Optional[Function]:
        """What the `loss=` of a compile runs: a function named, returned by a factory (a closure,
        `loss=make_loss(2.0)`), a `Loss` subclass's `call`, through every carrier; or the one element
        of a list or dict of losses (one output: with several, each output has its own)."""
        chosen: Optional[cst.BaseExpression] = loss
        if isinstance(loss, (cst.List, cst.Tuple, cst.Dict)):
            only = loss.elements[0] if len(loss.elements) == 1 else None
            chosen = only.value if isinstance(only, (cst.Element, cst.DictElement)) else None

        def runs(value: cst.BaseExpression) -> Optional[Function]:
            definition = self.flow.definition_of(value) if isinstance(value, (cst.Name, cst.Attribute, cst.Call)) \
                else None
            if isinstance(definition, (cst.FunctionDef, cst.Lambda)):
                return definition
            return None
        return cast(Optional[Function], trace(self.flow, chosen, runs))

    def _tensor_array(self, array, seen, padded) -> Optional[Source]:
        """`ta.stack()` after `ta = ta.write(t, p)`."""
        value = self.flow.value_of(array)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "write":
            return self.probability(arg(value, 1, "value"), seen, padded)
        return None

    def _model(self, model, seen, padded, call: Optional[cst.Call] = None) -> Optional[Source]:
        """What calling `model` returns, when it is built in this module: a Sequential or
        functional model, a builder function or method returning one, a function, or a class
        whose `call` returns probabilities. `call` is the call being followed, if any (its
        arguments can switch branches of the callee off)."""
        if model in seen or len(seen) > MAX_DEPTH * 2:
            return None
        seen = seen | {model}
        flow = self.flow
        value, via = self._built(model)
        found = self._built_model(value, seen, padded, call)
        if found is not None or call is None:
            return found._replace(via=via + found.via) if found is not None else None
        follow = partial(self.probability, seen=seen, padded=padded)
        returned = (self._from_returns(called, call, follow, seen) for called in flow.dispatched(call))
        return next(filter(None, returned), None)  # Net()(x) is rare; Net(x) builds an object

    def _built_model(self, value: cst.BaseExpression, seen: FrozenSet[cst.CSTNode], padded: bool,
                     call: Optional[cst.Call]) -> Optional[Source]:
        """What calling the model `value` built returns: its last layer's or output's activation,
        a builder's returns, a class's `call`."""
        flow = self.flow
        if isinstance(value, cst.Call):
            name = self.ctx.call_name(value)
            kind = activation_of(self.flow, value) if call is not None else None
            if kind and call is not None:  # softmax = layers.Softmax(); softmax(h)
                return Source(kind, call, padded)
            if name in SEQUENTIAL:
                return self._last_layer(value, padded)
            if name in FUNCTIONAL:
                return self._outputs(arg(value, 1, "outputs"), seen, padded)
            head = application_head(flow, value)
            if head:
                return Source(head, value, padded)
            built = flow.callee(value)
            if isinstance(built, cst.FunctionDef):  # model = make_model(): what the builder returns
                return self._from_returns(built, value, lambda r: self._model(r, seen, padded), seen)
            if isinstance(built, cst.ClassDef):  # net = Net(); net(x)
                return self._class_call(built, call, seen, padded)
        return None

    def _built(self, model: cst.BaseExpression) -> Tuple[cst.BaseExpression, Tuple[str, ...]]:
        """The call that built the model `model` holds, through every carrier (a builder's
        return, a parameter, an attribute, a container): a Sequential or functional model, an
        instance of a class of this module, a layer; else `model`'s own value. With the calls
        it came in through."""
        def builds(value: cst.BaseExpression) -> Optional[cst.Call]:
            if not isinstance(value, cst.Call):
                return None
            if self.ctx.call_name(value) in SEQUENTIAL | FUNCTIONAL or activation_of(self.flow, value) \
                    or application(self.flow, value):
                return value
            return value if isinstance(self.flow.callee(value), cst.ClassDef) else None
        found = traced(self.flow, model, builds, self._wrapped)
        if found is not None:
            return found
        return (self.flow.value_of(model) if isinstance(model, (cst.Name, cst.Attribute)) else model), ()

    def _wrapped(self, value: cst.BaseExpression) -> List[cst.BaseExpression]:
        """The model a wrapper that keeps its outputs was given (`prune_low_magnitude(model)`)."""
        parameter = MODEL_WRAPPERS.get(self.ctx.call_name(value) or "") if isinstance(value, cst.Call) else None
        model = arg(value, 0, parameter) if parameter is not None and isinstance(value, cst.Call) else None
        return [model] if model is not None else []

    def _class_call(self, cls: cst.ClassDef, call: Optional[cst.Call], seen, padded) -> Optional[Source]:
        method = self.flow.called_method(cls)
        if method is None:
            return None
        if call is None:
            return self._from_returns(method, None, lambda r: self.probability(r, seen, padded), seen)
        return self._from_returns(method, call, lambda r: self.probability(r, seen, padded), seen)

    def _from_returns(self, function: Function, call: Optional[cst.Call],
                      follow: Callable[[cst.BaseExpression], Optional[Source]], seen) -> Optional[Source]:
        """The first return of `function` that `follow` finds a probability in, skipping what
        lies in a branch the call switches off (`if activation:` with `activation=False`)."""
        flow = self.flow
        for value in flow.returned(function):
            if call is not None and flow.not_taken(value, function, call):
                continue
            with flow.entering(*self._calls_into(function, call)):
                found = follow(value)
            if found is not None and (call is None or not self._inside_off_branch(found.node, function, call)):
                return self._elsewhere(found, function, call)
        return None

    def _calls_into(self, function: Function, call: Optional[cst.Call]) -> List[Tuple[cst.CSTNode, cst.Call]]:
        """The functions `call` runs with its arguments: `function`, and for a call of what a
        factory returned (`m.dense(4, tf.nn.softmax)(h)`) the factory, with its own call."""
        if call is None:
            return []
        entered: List[Tuple[cst.CSTNode, cst.Call]] = [(function, call)]
        factory_call = call.func
        if isinstance(factory_call, cst.Call):
            maker = self.flow.callee(factory_call)
            if maker is not None:
                entered.append((maker, factory_call))
        return entered

    def _elsewhere(self, found: Source, function: cst.CSTNode, call: Optional[cst.Call]) -> Source:
        """`found` with the call named when `function` is another project module's (the message
        then says where the value was made)."""
        defined_at = getattr(self.flow.ctx, "defined_at", None)
        if call is None or defined_at is None or not defined_at(function):
            return found
        return found._replace(via=(self.flow.describe_call(call),) + found.via)

    def _inside_off_branch(self, node: cst.CSTNode, function: Function, call: cst.Call) -> bool:
        return self.ctx.encloses(function, node) and self.flow.not_taken(node, function, call)

    def _outputs(self, outputs, seen, padded) -> Optional[Source]:
        if isinstance(outputs, (cst.List, cst.Tuple)) and outputs.elements:
            outputs = outputs.elements[0].value  # the first head: `Model(inp, [policy, value])`
        return self.probability(outputs, seen, padded)

    def _last_layer(self, sequential: cst.Call, padded) -> Optional[Source]:
        last = self._sequential_last(sequential)
        if last is None:
            return None
        kind = activation_of(self.flow, last)
        return Source(kind, last, padded) if kind else None

    def _sequential_last(self, sequential: cst.Call) -> Optional[cst.Call]:
        """The call that made a Sequential model's last layer: the last of its list, or of what
        `model.add` gives it, through every carrier (`dense = Dense(3)`; `Sequential([dense])`)."""
        layers = arg(sequential, 0, "layers")
        if isinstance(layers, (cst.List, cst.Tuple)):
            last = layers.elements[-1].value if layers.elements else None
        else:  # model = Sequential(); model.add(...) ...
            last = next(reversed(self.added_layers(sequential)), None) if layers is None else None
        return trace(self.flow, last, lambda value: value if isinstance(value, cst.Call) else None)

    def _bound_by(self, use: cst.Name, assign: cst.Assign) -> bool:
        binding = self.flow.binding_of(use)
        return binding is not None and binding.owner is assign

    def added_layers(self, sequential: cst.Call) -> List[cst.BaseExpression]:
        """The layers `model.add(...)` gives the model `model = Sequential()` holds, in order
        (adds to this model, not to one the name is rebound to); also `self.model.add(...)` of
        `self.model = Sequential()`, in the method that assigns it."""
        parent = self.ctx.parent.get(sequential)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
            return []
        target = parent.targets[0].target
        if isinstance(target, cst.Name):
            holders: List[cst.CSTNode] = [use for use in self.flow.uses_after(target.value, parent)
                                          if self._bound_by(use, parent)]
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            owners = (self.ctx.parent.get(use) for use in self.flow.uses_after(target.value.value, parent))
            holders = [a for a in owners if isinstance(a, cst.Attribute) and a.attr.value == target.attr.value]
        else:
            return []
        above = [self.ctx.parent.get(holder) for holder in holders]
        added = [a for a in above if isinstance(a, cst.Attribute) and a.attr.value == "add"]
        calls = [c for c in (self.ctx.parent.get(a) for a in added)
                 if isinstance(c, cst.Call) and c.args and not dead(self.flow, c)]
        return [c.args[0].value for c in calls]


def layer_kind(flow: Dataflow, value: cst.BaseExpression, depth: int = 0) -> Optional[str]:
    """'softmax'/'sigmoid' when `value` is a layer built with that activation, reached through
    the carriers and the elements of lists of layers (`self.acts = [Activation(a) for ...]`,
    `self.acts[i]`, `for act in self.acts`)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, cst.Call):
        return activation_of(flow, value)
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return layer_kind(flow, value.elt, depth + 1)
    if isinstance(value, (cst.List, cst.Tuple)):
        return next(filter(None, (layer_kind(flow, e.value, depth + 1) for e in value.elements)), None)
    if isinstance(value, cst.Subscript):
        element = element_at(flow, value)
        return layer_kind(flow, element if element is not None else value.value, depth + 1)
    binding = flow.binding_of(value) if isinstance(value, cst.Name) else None
    iterable = iterated(binding) if binding is not None else None
    if iterable is not None:
        return layer_kind(flow, iterable, depth + 1)
    return next(filter(None, (layer_kind(flow, o.expr, depth + 1) for o in origins(flow, value))), None)


def _chain(flow: Dataflow, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The list of layers the loop around `call` applies in turn (`for layer in self.layers:
    x = layer(x)`), whose last layer's output is what leaves the loop; None when the call is
    not such a chain."""
    func = call.func
    binding = flow.binding_of(func) if isinstance(func, cst.Name) else None
    container = iterated(binding) if binding is not None and isinstance(binding.owner, cst.For) else None
    assign = flow.ctx.parent.get(call)
    first = call.args[0].value if call.args else None
    if container is None or not isinstance(assign, cst.Assign) or len(assign.targets) != 1 \
            or not isinstance(first, cst.Name) or not isinstance(assign.targets[0].target, cst.Name) \
            or assign.targets[0].target.value != first.value:
        return None
    return container


def _last_layer(flow: Dataflow, layers: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The last element of a list of layers: the last appended, else the literal's last or a
    comprehension's element; None when the module does not show it."""
    appended = [b.value for b in flow.added_to(layers) if b.value is not None]
    if appended:
        return appended[-1]
    listed = flow.value_of(layers)
    if isinstance(listed, (cst.List, cst.Tuple)) and listed.elements \
            and isinstance(listed.elements[-1], cst.Element):
        return listed.elements[-1].value
    return listed.elt if isinstance(listed, (cst.ListComp, cst.GeneratorExp)) else None


def handwritten(flow: Dataflow, division: cst.BinaryOperation) -> Optional[str]:
    """'sigmoid' for `1 / (1 + exp(-x))`, 'softmax' for `exp(x) / reduce_sum(exp(x), ...)`
    (names followed): the formulas written out by hand, which squash exactly as the library ones."""
    left, right = flow.value_of(division.left), flow.value_of(division.right)
    if _about_one(constant(flow, left)) and isinstance(right, cst.BinaryOperation) \
            and isinstance(right.operator, cst.Add) and _about_one(constant(flow, right.left)) \
            and flow.ctx.call_name(flow.value_of(right.right)) in EXP:
        return "sigmoid"
    total = summed(flow, division.right) if flow.ctx.call_name(left) in EXP else None
    if total is not None and flow.ctx.call_name(flow.value_of(total.args[0].value)) in EXP:
        return "softmax"  # the sum tiled or reshaped back to the shape of the numerator keeps its value
    return None


def _about_one(value) -> bool:
    """1, or 1 plus an epsilon (`1e-10 + 1 - p`)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value - 1) <= 1e-3
