"""Generated programs for the value-flow engine: every source x carrier x sink, carriers nested in
pairs, each program with a clean twin that passes logits instead of probabilities.

A program is a realistic little module: imports, a function or class that makes the value, the
carrier that takes it to the sink, and the sink on a line marked `# <- CODE`. Its twin is the same
text with the source replaced by the logits it would have squashed, so a finding on the twin is a
false positive of the carrier, never of the source or sink. `bench/flow_matrix.py` runs the whole
matrix; `tests/test_flow_matrix.py` a fixed sample of it.

Templates use `{value}` for the expression the previous stage produced and `{next}` for the name
the next stage reads; each carrier is a function of the expression it receives, returning (the
lines it adds, the expression that now holds the value).
"""
from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass, replace
from typing import Callable, Iterator, List, Sequence, Tuple

HEADER = ("import functools\n\nimport sonnet as snt\nimport tensorflow as tf\nimport tensorflow_federated as tff\n"
          "import tensorflow_model_optimization as tfmot\nfrom tensorflow import keras\n\n")

# name -> (expression making probabilities from `logits`, its clean twin)
PROBABILITY_SOURCES = {
    "tf.nn.softmax": "tf.nn.softmax(logits)",
    "tf.math.softmax(axis)": "tf.math.softmax(logits, axis=-1)",
    "keras.activations.softmax": "keras.activations.softmax(logits)",
    "tf.sigmoid": "tf.sigmoid(logits)",
    "tf.math.sigmoid": "tf.math.sigmoid(logits)",
    "Softmax layer": "keras.layers.Softmax()(logits)",
    "Dense softmax": 'keras.layers.Dense(10, activation="softmax")(features)',
    "Dense tf.nn.softmax": "keras.layers.Dense(10, activation=tf.nn.softmax)(features)",
}
PROBABILITY_SOURCES.update({
    "hand-written sigmoid": "(1.0 / (1.0 + tf.exp(-logits)))",
    # the max subtracted (stable: not CL011's), so the twins stay clean
    "hand-written softmax": "(tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True)) / tf.reduce_sum("
                            "tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True)), axis=-1, keepdims=True))",
    # tf_unet's: divided with `tf.div` by the sum tiled back to the classes
    "hand-written softmax, tiled sum": "tf.div(tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True)), tf.tile("
                                       "tf.reduce_sum(tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True)), "
                                       "axis=-1, keepdims=True), [1, 10]))",
    "user layer given softmax": "PredictionHead(tf.nn.softmax)(logits)",
    "builder given sigmoid": 'build_head(features, activation="sigmoid")',
})
TWIN_SOURCES = {
    "Dense softmax": "keras.layers.Dense(10)(features)",
    "Dense tf.nn.softmax": "keras.layers.Dense(10, activation=None)(features)",
    "user layer given softmax": "PredictionHead(None)(logits)",
    "builder given sigmoid": "build_head(features)",
}
# Module-level definitions a source needs (the activation travels through a constructor or a builder).
SOURCE_DEFINITIONS = {
    "user layer given softmax": [
        "class PredictionHead(keras.layers.Layer):", "    def __init__(self, activation=None):",
        "        super().__init__()", "        self.activation = keras.activations.get(activation)", "",
        "    def call(self, inputs):", "        return self.activation(inputs)", ""],
    "builder given sigmoid": [
        'def build_head(features, activation="linear"):',
        "    return keras.layers.Dense(10, activation=activation)(features)", "",
        # another call passes the sigmoid: the twin's call, which passes none, stays linear
        'side_head = build_head(tf.zeros([1, 4]), activation="sigmoid")', ""],
}


def twin_of(source: str) -> str:
    return TWIN_SOURCES.get(source, "logits")


Carrier = Callable[[str, int], Tuple[List[str], str]]


def _assign(template: str) -> Carrier:
    """A carrier that binds a new name to `template` around the value."""
    def carry(value: str, depth: int) -> Tuple[List[str], str]:
        name = f"p{depth}"
        return [f"{name} = {template.format(value=value)}"], name
    return carry


def _helper_return(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"make_probs{depth}"
    return [f"def {name}(logits, features):", f"    out = {value}", "    return out", ""], f"{name}(logits, features)"


def _builder_parameter(value: str, depth: int) -> Tuple[List[str], str]:
    # a builder whose result passes through a parameter it was given
    name = f"finish{depth}"
    return [f"def {name}(x, scale=1.0):", "    return x * scale", ""], f"{name}({value})"


def _helper_parameter(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"prepare{depth}"
    return [f"def {name}(values, name=None):", "    checked = values", "    return checked", ""], f"{name}({value})"


def _partial_helper(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"select{depth}"
    return [f"def {name}(values, verbose):", "    return values", ""], \
        f"functools.partial({name}, verbose=False)({value})"


def _self_attribute(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"Head{depth}"
    lines = [f"class {name}:", "    def __init__(self, logits, features):", f"        self.probs = {value}", "",
             "    def output(self):", "        return self.probs", ""]
    return lines, f"{name}(logits, features).output()"


def _self_method(value: str, depth: int) -> Tuple[List[str], str]:
    # a method called on self, named like Keras' `predict` (which it is not)
    name = f"Policy{depth}"
    lines = [f"class {name}:", "    def predict(self, logits, features):", f"        return {value}", "",
             "    def run(self, logits, features):", "        return self.predict(logits, features)", ""]
    return lines, f"{name}().run(logits, features)"


def _self_call(value: str, depth: int) -> Tuple[List[str], str]:
    # a Keras model calling itself: `self(x)` runs its `call`
    name = f"Head{depth}"
    lines = [f"class {name}(keras.Model):", "    def call(self, logits, features):", f"        return {value}", "",
             "    def score(self, logits, features):", "        return self(logits, features)", ""]
    return lines, f"{name}().score(logits, features)"


def _list_element(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"heads{depth} = [{value}]", f"p{depth} = heads{depth}[0]"], f"p{depth}"


def _dict_value(value: str, depth: int) -> Tuple[List[str], str]:
    return [f'outputs{depth} = {{"probs": {value}, "logits": logits}}'], f'outputs{depth}["probs"]'


def _append(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"collected{depth} = []", f"collected{depth}.append({value})"], f"collected{depth}[-1]"


def _tuple_unpack(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"p{depth}, n{depth} = {value}, 3"], f"p{depth}"


def _mapped_unpack(value: str, depth: int) -> Tuple[List[str], str]:
    # several tensors reshaped alike by one comprehension, and unpacked again
    return [f"p{depth}, v{depth} = [tf.expand_dims(x, 1) for x in [{value}, features]]"], f"p{depth}"


def _static_method(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"Ops{depth}"
    return [f"class {name}:", "    @staticmethod", "    def keep(p):", "        return p", ""], f"{name}.keep({value})"


def _lambda(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"same{depth} = lambda p: p"], f"same{depth}({value})"


def _branch(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"p{depth}"
    return ["if features is not None:", f"    {name} = {value}", "else:", f"    {name} = {value}"], name


def _one_branch(value: str, depth: int) -> Tuple[List[str], str]:
    # the value on one path only: the join of the branches keeps it
    name = f"p{depth}"
    return ["if features is not None:", f"    {name} = {value}", "else:", f"    {name} = logits"], name


def _if_without_else(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"p{depth}"
    return [f"{name} = logits", "if features is not None:", f"    {name} = {value}"], name


def _try_except(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"p{depth}"
    return ["try:", f"    {name} = {value}", "except ValueError:", f"    {name} = logits"], name


def _instance_attribute(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"Agent{depth}"
    lines = [f"class {name}:", "    def __init__(self, logits, features):", f"        self.probs = {value}", ""]
    return lines, f"{name}(logits, features).probs"


def _subclass_attribute(value: str, depth: int) -> Tuple[List[str], str]:
    # set in a subclass, read by a method of the base class
    base, sub = f"Policy{depth}", f"SoftPolicy{depth}"
    lines = [f"class {base}:", "    def probabilities(self):", "        return self.probs", "",
             f"class {sub}({base}):", "    def __init__(self, logits, features):", f"        self.probs = {value}", ""]
    return lines, f"{sub}(logits, features).probabilities()"


def _layer_activation(value: str, depth: int) -> Tuple[List[str], str]:
    # a user Layer whose `call` applies what it was given; here what it is given is the value itself
    name = f"Passthrough{depth}"
    lines = [f"class {name}(keras.layers.Layer):", "    def __init__(self, scale=1.0):", "        super().__init__()",
             "        self.scale = scale", "", "    def call(self, x):", "        return x * self.scale", ""]
    return lines, f"{name}()({value})"


def _class_argument(value: str, depth: int) -> Tuple[List[str], str]:
    # a model class handed to a trainer, which builds it: `Agent(env, PolicyNet)`
    net, trainer = f"Net{depth}", f"Trainer{depth}"
    lines = [f"class {net}(keras.Model):", "    def call(self, logits, features):", f"        return {value}", "",
             f"class {trainer}:", "    def __init__(self, net_class):", "        self.net = net_class()", "",
             "    def run(self, logits, features):", "        return self.net(logits, features)", ""]
    return lines, f"{trainer}({net}).run(logits, features)"


def _function_argument(value: str, depth: int) -> Tuple[List[str], str]:
    # a function handed to another, which calls it: `apply(head, x)`
    head, apply = f"head{depth}", f"apply{depth}"
    lines = [f"def {head}(logits, features):", f"    return {value}", "",
             f"def {apply}(fn, logits, features):", "    return fn(logits, features)", ""]
    return lines, f"{apply}({head}, logits, features)"


def _factory(value: str, depth: int) -> Tuple[List[str], str]:
    # a function made by a factory and called at once: `m.dense(4, tf.nn.softmax)(h)`
    name = f"make_head{depth}"
    lines = [f"def {name}(scale):", "    def head(logits, features):", f"        return {value}", "",
             "    return head", ""]
    return lines, f"{name}(1.0)(logits, features)"


def _unpacked_parameter(value: str, depth: int) -> Tuple[List[str], str]:
    # a pair handed to a helper that unpacks its parameter: `fns, args = policy`
    name = f"first{depth}"
    lines = [f"def {name}(policy):", f"    p{depth}, rest{depth} = policy", f"    return p{depth}", ""]
    return lines, f"{name}(({value}, features))"


def _held_instance(value: str, depth: int) -> Tuple[List[str], str]:
    # a model object given to an agent's constructor, whose method the agent calls: `self.model.build()`
    model, agent = f"Model{depth}", f"Agent{depth}"
    lines = [f"class {model}:", "    def build(self, logits, features):", f"        return {value}", "",
             f"class {agent}:", "    def __init__(self, model):", "        self.model = model", "",
             "    def act(self, logits, features):", "        return self.model.build(logits, features)", ""]
    return lines, f"{agent}({model}()).act(logits, features)"


def _held_attribute(value: str, depth: int) -> Tuple[List[str], str]:
    # a policy object given to a trainer's constructor, whose attribute the trainer reads:
    # `self.policy = policy`, then `self.policy.probs`
    policy, trainer = f"Policy{depth}", f"Trainer{depth}"
    lines = [f"class {policy}:", "    def __init__(self, logits, features):", f"        self.probs = {value}", "",
             f"class {trainer}:", "    def __init__(self, policy):", "        self.policy = policy", "",
             "    def probabilities(self):", "        return self.policy.probs", ""]
    return lines, f"{trainer}({policy}(logits, features)).probabilities()"


def _held_callable(value: str, depth: int) -> Tuple[List[str], str]:
    # a network built into an attribute and called through it, its pair unpacked:
    # `self.net = Net()`, then `policy, value = self.net(x)`
    net, agent = f"Net{depth}", f"Agent{depth}"
    lines = [f"class {net}:", "    def __call__(self, logits, features):", f"        return {value}, features", "",
             f"class {agent}:", "    def __init__(self):", f"        self.net = {net}()", "",
             "    def act(self, logits, features):", f"        p{depth}, v{depth} = self.net(logits, features)",
             f"        return p{depth}", ""]
    return lines, f"{agent}().act(logits, features)"


def _sonnet_module(value: str, depth: int) -> Tuple[List[str], str]:
    # a Sonnet 1 module: calling it runs its `_build`
    name = f"Head{depth}"
    lines = [f"class {name}(snt.AbstractModule):", "    def _build(self, logits, features):", f"        return {value}",
             ""]
    return lines, f"{name}(name='head')(logits, features)"


def _model_outputs(value: str, depth: int) -> Tuple[List[str], str]:
    # a functional model with two outputs, called and its outputs unpacked: `mu, var = decoder(z)`
    return [f"heads{depth} = keras.Model(features, [features, {value}])",
            f"v{depth}, p{depth} = heads{depth}(features)"], f"p{depth}"


def _comprehension(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"heads{depth} = [{value} for _ in range(2)]"], f"heads{depth}[0]"


def _conditional(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"p{depth} = {value} if features is not None else {value}"], f"p{depth}"


def _walrus(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"if (p{depth} := {value}) is None:", "    raise ValueError('no output')"], f"p{depth}"


def _augmented(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"p{depth} = {value}", f"p{depth} += 1e-8"], f"p{depth}"


def _masked(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"p{depth} = {value}", "if mask is not None:", f"    p{depth} *= mask[0]"], f"p{depth}"


def _dict_store(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"outputs{depth} = {{}}", f"outputs{depth}['logits'] = logits", f"outputs{depth}['out'] = {value}"], \
        f"outputs{depth}['out']"


def _tensor_array(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"array{depth} = tf.TensorArray(tf.float32, size=1)", f"array{depth} = array{depth}.write(0, {value})"], \
        f"array{depth}.stack()"


def _while_loop(value: str, depth: int) -> Tuple[List[str], str]:
    body = [f"def step{depth}(i, array):", f"    return i + 1, array.write(i, {value})", ""]
    start = "(0, tf.TensorArray(tf.float32, size=1))"
    loop = f"_, written{depth} = tf.while_loop(lambda i, a: i < 1, step{depth}, {start})"
    return body + [loop], f"written{depth}.stack()"


def _unstack(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"parts{depth} = tf.unstack({value})"], f"parts{depth}[0]"


def _map_structure(value: str, depth: int) -> Tuple[List[str], str]:
    return [f"p{depth} = tf.nest.map_structure(lambda t: t, {value})"], f"p{depth}"


def _partial(value: str, depth: int) -> Tuple[List[str], str]:
    name = f"scaled{depth}"
    return [f"def {name}(x, scale):", "    return x * scale", ""], f"functools.partial({name}, scale=1.0)({value})"


CLOSURES = ("while_loop",)  # carriers whose definitions read the training function's names
CARRIERS = {
    "direct": lambda value, depth: ([], value),
    "name": _assign("{value}"),
    "function return": _helper_return,
    "parameter passthrough": _builder_parameter,
    "helper parameter": _helper_parameter,
    "partial helper": _partial_helper,
    "self attribute": _self_attribute,
    "self method": _self_method,
    "self call": _self_call,
    "list element": _list_element,
    "dict value": _dict_value,
    "dict store": _dict_store,
    "append": _append,
    "tuple unpack": _tuple_unpack,
    "mapped unpack": _mapped_unpack,
    "static method": _static_method,
    "lambda": _lambda,
    "branches": _branch,
    "one branch": _one_branch,
    "if without else": _if_without_else,
    "try/except": _try_except,
    "+ eps": _assign("{value} + 1e-8"),
    "+ keras epsilon": _assign("{value} + keras.backend.epsilon()"),
    "+ epsilon of another module": _assign("{value} + SMALL_NUMBER"),
    "masked *=": _masked,
    "clip_by_value": _assign("tf.clip_by_value({value}, 1e-8, 1.0)"),
    "tf.where": _assign("tf.where(labels > 0, {value}, 1.0 - {value})"),
    "tf.maximum": _assign("tf.maximum({value}, 1e-8)"),
    "label likelihood |y - p|": _assign("keras.backend.abs(labels - {value})"),
    "tf.minimum(max)": _assign("tf.minimum(tf.maximum({value}, 1e-8), 1.0)"),
    "index": _assign("{value}[:, 0]"),
    "tf.gather": _assign("tf.gather({value}, actions, axis=1, batch_dims=1)"),
    "diagonal": _assign("tf.linalg.diag_part({value})"),
    "tf.slice": _assign("tf.slice({value}, [0, 0], [-1, 1])"),
    "one-hot product": _assign("tf.reduce_sum({value} * tf.one_hot(actions, 10), axis=-1)"),
    "tf.multiply product": _assign("tf.reduce_sum(tf.multiply({value}, tf.one_hot(actions, 10)), axis=-1)"),
    "reshape": _assign("tf.reshape({value}, [-1])"),
    "K.flatten": _assign("keras.backend.flatten({value})"),
    "tile": _assign("tf.tile({value}, [1, 2])"),
    "transpose": _assign("tf.transpose({value})"),
    "cast": _assign("tf.cast({value}, tf.float64)"),
    "ensemble mean": _assign("tf.reduce_mean(tf.stack([{value}, {value}]), axis=0)"),
    "ratio": _assign("{value} / tf.reduce_sum({value}, axis=-1, keepdims=True)"),
    "instance attribute": _instance_attribute,
    "subclass attribute": _subclass_attribute,
    "user layer": _layer_activation,
    "class argument": _class_argument,
    "factory": _factory,
    "function argument": _function_argument,
    "unpacked parameter": _unpacked_parameter,
    "held instance": _held_instance,
    "held instance's attribute": _held_attribute,
    "held callable, unpacked": _held_callable,
    "Sonnet module": _sonnet_module,
    "functional model's outputs": _model_outputs,
    "comprehension": _comprehension,
    "conditional": _conditional,
    "walrus": _walrus,
    "augmented +=": _augmented,
    "TensorArray": _tensor_array,
    "while_loop": _while_loop,
    "unstack": _unstack,
    "map_structure": _map_structure,
    "functools.partial": _partial,
    "Keras Lambda layer": _assign("keras.layers.Lambda(lambda t: t)({value})"),
    "add_n mean": _assign("tf.add_n([{value}, {value}]) / 2.0"),
    "concat": _assign("tf.concat([{value}, {value}], axis=0)"),
}

MARK = "  # <-"  # the statement of a multi-statement sink where the finding belongs
LOG_SINKS = {
    "tf.math.log": "tf.math.log({value})",
    "tf.log": "tf.log({value})",
    "tf.compat.v1.log": "tf.compat.v1.log({value})",
    "keras.backend.log": "keras.backend.log({value})",
    "keras.ops.log": "keras.ops.log({value})",
    "negative log in a sum": "-tf.reduce_sum(labels * tf.math.log({value}))",
    # a helper that is a log under another name: its call is the log (the finding is there)
    "log helper": "def safe_log(x):\n    return tf.math.log(tf.maximum(x, 1e-12))\n"
                  "loss = -tf.reduce_sum(labels * safe_log({value}))" + MARK,
    "Keras Lambda log layer": "keras.layers.Lambda(lambda t: tf.math.log(t))({value})",
    "guarded log helper": "def safe_log(x):\n    return tf.where(x > 0.0, tf.math.log(x + 1e-12), tf.zeros_like(x))\n"
                          "loss = safe_log({value})" + MARK,
}

# Losses that squash their input themselves (CL010): probabilities of either kind given to them are
# squashed twice (a sigmoid output given to a softmax loss is as flat as a softmax output).
FROM_LOGITS_SINKS = {
    "CategoricalCrossentropy(from_logits=True)":
        "keras.losses.CategoricalCrossentropy(from_logits=True)(labels, {value})",
    "softmax_cross_entropy_with_logits": "tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits={value})",
    "binary_crossentropy(from_logits=True)": "keras.losses.binary_crossentropy(labels, {value}, from_logits=True)",
    "sigmoid_cross_entropy_with_logits": "tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits={value})",
    "contrib sequence_loss": "tf.contrib.seq2seq.sequence_loss({value}, targets, weights)",
}
SINKS = {**{name: ("CL004", sink) for name, sink in LOG_SINKS.items()},
         **{name: ("CL010", sink) for name, sink in FROM_LOGITS_SINKS.items()}}

# The sanitiser twin: a log of probabilities that only feeds sampling is no mistake (no gradient
# flows through it, and -inf is the right logit for a probability that underflowed).
SAMPLING = "tf.random.categorical({log}, 1)"


@dataclass(frozen=True)
class Program:
    source: str
    carriers: Tuple[str, ...]
    sink: str
    text: str
    twins: Tuple[str, ...]  # the same program with logits instead of probabilities, or a sanitiser
    line: int  # where the finding belongs (the sink's line)
    code: str

    @property
    def label(self) -> str:
        return f"{self.code} {self.source} -> {' -> '.join(self.carriers)} -> {self.sink}"


def build(source: str, carriers: Sequence[str], sink: str) -> Program:
    prelude = SOURCE_DEFINITIONS.get(source, [])
    code, template = SINKS[sink]
    text, line = _render(PROBABILITY_SOURCES[source], carriers, template, prelude)
    logits_twin, _ = _render(twin_of(source), carriers, template, prelude)
    twins = [logits_twin]
    if code == "CL004" and template.endswith("({value})"):  # a bare log: the same log, feeding sampling only
        sampling = SAMPLING.replace("{log}", template)
        twins.append(_render(PROBABILITY_SOURCES[source], carriers, sampling, prelude)[0])
    return Program(source, tuple(carriers), sink, text, tuple(twins), line, code)


def _render(value: str, carriers: Sequence[str], sink: str, prelude: Sequence[str] = (),
            opening: Sequence[str] = ()) -> Tuple[str, int]:
    """The module, inside a training function (whose first statements are `opening`), and the
    line of its sink."""
    definitions: List[str] = list(prelude)
    body: List[str] = list(opening)
    for depth, name in enumerate(carriers):
        added, value = {**CARRIERS, **MODEL_HOPS}[name](value, depth)
        # A definition that reads only the logits sits at module level; one that reads what an
        # earlier carrier bound in the training function is a closure inside it, and so is a loop
        # body with the statement running the loop.
        defines = bool(added) and added[0].startswith(("def ", "class ")) and name not in CLOSURES
        (definitions if defines and not body else body).extend(added)
    statements = sink.format(value=value).split("\n")  # one expression, or statements (the first is marked)
    marked = len(body) + next((i for i, s in enumerate(statements) if s.endswith(MARK)), 0)
    body += [f"loss = {statements[0]}"] if len(statements) == 1 else [s.replace(MARK, "") for s in statements]
    body.append("return loss")
    head = HEADER.splitlines() + definitions + ["def training_loss(logits, features, labels, actions):"]
    lines = head + ["    " + line if line else "" for line in body]
    return "\n".join(lines) + "\n", len(head) + marked + 1


# --- Keras models: built, carried, then compiled with a loss that does not fit their last layer ----

SOFTMAX_MODELS = {
    "Sequential": "keras.Sequential([keras.layers.Dense(10, activation='softmax')])",
    "functional": "keras.Model(features, keras.layers.Dense(10, activation='softmax')(features))",
    "functional, layer by name": "keras.Model(features, softmax_head(features))",
    "subclassed": "SoftmaxNet()",
    "Sequential, layer through partial": "keras.Sequential([softmax_dense(10)])",
    "builder, activation as parameter": "dense_model(activation='softmax')",
    "Keras application": "keras.applications.MobileNetV2(weights=None, classes=10)",
    "Sequential, sigmoid head": "keras.Sequential([keras.layers.Dense(10, activation='sigmoid')])",
    "Sequential, layer by name": "keras.Sequential([keras.layers.Dense(32), softmax_head])",
    # the activation's own carriers: a constant, a config dict, `**` of one, a class attribute,
    # a builder's `**kwargs`, a flag's default
    "activation constant": "keras.Sequential([keras.layers.Dense(10, activation=HEAD_ACTIVATION)])",
    "activation from a config": "keras.Sequential([keras.layers.Dense(10, activation=HEAD['activation'])])",
    "config splatted": "keras.Sequential([keras.layers.Dense(10, **HEAD)])",
    "class attribute": "keras.Sequential([keras.layers.Dense(10, activation=HeadConfig.activation)])",
    "builder **kwargs": "kwargs_model(activation='softmax')",
    "flag default": "keras.Sequential([keras.layers.Dense(10, activation=FLAGS.head)])",
    # `model.add(...)` builds the model: in a builder, and on an attribute of the object holding it
    "Sequential, add in a builder": "added_model(activation='softmax')",
    "Sequential held by self, add": "SoftmaxHolder().model",
}
LINEAR = {"Sequential": "keras.Sequential([keras.layers.Dense(10)])",
          "functional": "keras.Model(features, keras.layers.Dense(10)(features))",
          "functional, layer by name": "keras.Model(features, linear_head(features))",
          "subclassed": "LinearNet()",
          "Sequential, layer through partial": "keras.Sequential([relu_dense(10)])",
          "builder, activation as parameter": "dense_model()",
          "Keras application": "keras.applications.MobileNetV2(weights=None, classes=10, classifier_activation=None)",
          "Sequential, sigmoid head": "keras.Sequential([keras.layers.Dense(10)])",
          "Sequential, layer by name": "keras.Sequential([keras.layers.Dense(32), linear_head])",
          "activation constant": "keras.Sequential([keras.layers.Dense(10, activation=PLAIN_ACTIVATION)])",
          "activation from a config": "keras.Sequential([keras.layers.Dense(10, activation=PLAIN['activation'])])",
          "config splatted": "keras.Sequential([keras.layers.Dense(10, **PLAIN)])",
          "class attribute": "keras.Sequential([keras.layers.Dense(10, activation=PlainConfig.activation)])",
          "builder **kwargs": "kwargs_model()",
          "flag default": "keras.Sequential([keras.layers.Dense(10, activation=FLAGS.plain)])",
          "Sequential, add in a builder": "added_model()",
          "Sequential held by self, add": "LinearHolder().model"}
# Both programs of a pair define both heads and both subclassed models: they differ by the one used.
MODEL_PRELUDE = ["softmax_head = keras.layers.Dense(10, activation='softmax')", "linear_head = keras.layers.Dense(10)",
                 "softmax_dense = functools.partial(keras.layers.Dense, activation='softmax')",
                 "relu_dense = functools.partial(keras.layers.Dense, activation='relu')", "",
                 "def dense_model(activation=None):",
                 "    return keras.Sequential([keras.layers.Dense(10, activation=activation)])", "",
                 "def added_model(activation=None):", "    model = keras.Sequential()",
                 "    model.add(keras.layers.Dense(32, activation='relu'))",
                 "    model.add(keras.layers.Dense(10, activation=activation))", "    return model", "",
                 *(line for name, activation in (("SoftmaxHolder", ", activation='softmax'"), ("LinearHolder", ""))
                       for line in (f"class {name}:", "    def __init__(self):",
                                    "        self.model = keras.Sequential()",
                                    "        self.model.add(keras.layers.Dense(32, activation='relu'))",
                                    f"        self.model.add(keras.layers.Dense(10{activation}))", "")),
                 "def kwargs_model(**kwargs):", "    return keras.Sequential([keras.layers.Dense(10, **kwargs)])", "",
                 "HEAD_ACTIVATION, PLAIN_ACTIVATION = 'softmax', None",
                 "HEAD, PLAIN = {'activation': 'softmax'}, {'activation': None}", "",
                 "class HeadConfig:", "    activation = 'softmax'", "",
                 "class PlainConfig:", "    activation = None", "",
                 "import argparse", "parser = argparse.ArgumentParser()",
                 "parser.add_argument('--head', default='softmax')", "parser.add_argument('--plain', default=None)",
                 "FLAGS = parser.parse_args()", "",
                 *(line for name, activation in (("SoftmaxNet", ", activation='softmax'"), ("LinearNet", ""))
                       for line in (f"class {name}(keras.Model):", "    def __init__(self):",
                                    "        super().__init__()",
                                    "        self.hidden = keras.layers.Dense(32, activation='relu')",
                                    f"        self.head = keras.layers.Dense(10{activation})", "",
                                    "    def call(self, inputs):", "        h = self.hidden(inputs)",
                                    "        return self.head(h)", ""))]
# name -> (code, the model that makes it a mistake, the sink)
MODEL_SINKS = {
    "compile(from_logits=True)": ("CL010", SOFTMAX_MODELS, "model = {value}\nmodel.compile(optimizer='adam', "
                                  "loss=keras.losses.CategoricalCrossentropy(from_logits=True))" + MARK
                                  + "\nmodel.fit(features, labels)"),
    "compile('categorical_crossentropy')": ("CL012", LINEAR, "model = {value}\nmodel.compile(optimizer='adam', "
                                            "loss='categorical_crossentropy')" + MARK
                                            + "\nmodel.fit(features, labels)"),
    # a builder compiles the model and returns it: its caller trains it
    "compile in a builder": ("CL012", LINEAR, "def compiled_model():\n    model = {value}\n"
                             "    model.compile(optimizer='adam', loss='categorical_crossentropy')" + MARK
                             + "\n    return model\nloss = compiled_model()"),
    # a loss of one's own given to compile: Keras calls it with the model's output as `y_pred`
    "compile(loss=function)": ("CL004", SOFTMAX_MODELS, "def xent(y_true, y_pred):\n"
                               "    return -tf.reduce_sum(y_true * tf.math.log(y_pred), axis=-1)" + MARK
                               + "\nmodel = {value}\nmodel.compile(optimizer='adam', loss=xent)"
                               "\nmodel.fit(features, labels)"),
    "compile(loss=factory())": ("CL004", SOFTMAX_MODELS, "def make_loss(weight):\n    def loss(y_true, y_pred):\n"
                                "        return -tf.reduce_sum(weight * y_true * tf.math.log(y_pred), axis=-1)" + MARK
                                + "\n    return loss\nmodel = {value}\n"
                                "model.compile(optimizer='adam', loss=make_loss(2.0))\nmodel.fit(features, labels)"),
    "compile(loss=Loss subclass)": ("CL004", SOFTMAX_MODELS, "class Xent(keras.losses.Loss):\n"
                                    "    def call(self, y_true, y_pred):\n"
                                    "        return -tf.reduce_sum(y_true * tf.math.log(y_pred), axis=-1)" + MARK
                                    + "\nmodel = {value}\nmodel.compile(optimizer='adam', loss=Xent())"
                                    "\nmodel.fit(features, labels)"),
    "compile(loss={output: function})": ("CL004", SOFTMAX_MODELS, "def xent(y_true, y_pred):\n"
                                         "    return -tf.reduce_sum(y_true * tf.math.log(y_pred), axis=-1)" + MARK
                                         + "\nmodel = {value}\nmodel.compile(optimizer='adam', loss={{'out': xent}})"
                                         "\nmodel.fit(features, labels)"),
    # a federated process trains what TFF wraps: no `fit` is called
    "tff from_keras_model(from_logits=True)": (
        "CL010", SOFTMAX_MODELS, "federated = tff.learning.models.from_keras_model(\n    {value}, input_spec=spec,\n"
        "    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))" + MARK),
    "tff from_keras_model('binary_crossentropy')": (
        "CL012", LINEAR, "federated = tff.learning.from_keras_model({value}, loss='binary_crossentropy'," + MARK
        + "\n                                          input_spec=spec)"),
}
# The carriers a model or a dict of options travels by (a tensor's transforms do not apply to them).
OBJECT_CARRIERS = ("direct", "name", "function return", "helper parameter", "partial helper", "self attribute",
                  "self method", "list element", "dict value", "append", "tuple unpack", "static method", "lambda",
                  "branches", "instance attribute", "subclass attribute", "comprehension", "conditional", "walrus",
                  "one branch", "if without else", "try/except")
# A threshold is reported only when every path gives it the same literal (`carried_constant`): 0 on
# one path and unknown on another is not known to clip nothing.
THRESHOLD_CARRIERS = tuple(c for c in OBJECT_CARRIERS if c not in ("one branch", "if without else", "try/except"))
# Hops only a model takes: its copy or a wrapper computes what the model computes.
MODEL_HOPS = {
    "cloned model": _assign("keras.models.clone_model({value})"),
    "pruned model": _assign("tfmot.sparsity.keras.prune_low_magnitude({value}, pruning_schedule=schedule)"),
}
MODEL_CARRIERS = OBJECT_CARRIERS + tuple(MODEL_HOPS)


def build_model(model: str, carriers: Sequence[str], sink: str) -> Program:
    code, wrong, template = MODEL_SINKS[sink]
    right = LINEAR if wrong is SOFTMAX_MODELS else SOFTMAX_MODELS
    text, line = _render(wrong[model], carriers, template, MODEL_PRELUDE)
    twin, _ = _render(right[model], carriers, template, MODEL_PRELUDE)
    return Program(f"{model} model", tuple(carriers), sink, text, (twin,), line, code)


# --- optimizer options: a dict with both clip options, carried to the optimizer it configures ------

OPTIONS = '{"clipnorm": 1.0, "clipvalue": 0.5}'
ONE_OPTION = '{"clipnorm": 1.0}'
OPTION_SINKS = {
    "Adam(**options)": "keras.optimizers.Adam(learning_rate=1e-3, **{value})",
    "optimizers.get(config)": "keras.optimizers.get({{'class_name': 'Adam', 'config': {value}}})",
}


# A threshold that clips nothing (CL009), carried to where it is used; the twin's is positive.
THRESHOLD_SINKS = {
    "clip_by_global_norm": ("0.0", "1.0", "tf.clip_by_global_norm(features, {value})"),
    "clipnorm=": ("0.0", "1.0", "keras.optimizers.Adam(clipnorm={value})"),
    "clip_by_value bounds": ("-1.0", "2.0", "tf.clip_by_value(features, 1.0, {value})"),
}


def build_threshold(carriers: Sequence[str], sink: str) -> Program:
    wrong, right, template = THRESHOLD_SINKS[sink]
    text, line = _render(wrong, carriers, template)
    twin, _ = _render(right, carriers, template)
    return Program("threshold", tuple(carriers), sink, text, (twin,), line, "CL009")


def build_options(carriers: Sequence[str], sink: str) -> Program:
    text, line = _render(OPTIONS, carriers, OPTION_SINKS[sink])
    twin, _ = _render(ONE_OPTION, carriers, OPTION_SINKS[sink])
    return Program("clip options", tuple(carriers), sink, text, (twin,), line, "CL001")


# --- gradient lists: from the tape or the optimizer, to a per-tensor clip (CL003) -------------------

GRADIENT_HEADER = HEADER + "optimizer = keras.optimizers.Adam(1e-3)\n\n"
GRADIENT_SOURCES = {
    "tape.gradient": "tape.gradient(loss, model.trainable_variables)",
    "tf.gradients": "tf.gradients(loss, model.trainable_variables)",
    "compute_gradients pairs": "[g for g, v in optimizer.compute_gradients(loss, model.trainable_variables)]",
}
# A per-tensor clip of every gradient, the update applied; the clean twin clips by the global norm.
# Each way of clipping element by element: (definitions, statements binding `clipped`).
GRADIENT_SINKS = {
    "comprehension": ([], ["clipped = [tf.clip_by_norm(g, 1.0) for g in {value}]"]),
    "loop append": ([], ["clipped = []", "for g in {value}:", "    clipped.append(tf.clip_by_norm(g, 1.0))"]),
    "mapped lambda": ([], ["clipped = list(map(lambda g: tf.clip_by_norm(g, 1.0), {value}))"]),
    "element helper": (["def clip_one(grad):", "    return tf.clip_by_norm(grad, 1.0)", ""],
                       ["clipped = [clip_one(g) for g in {value}]"]),
    "element helper, named": (["def clip_one(grad):", "    bounded = tf.clip_by_norm(grad, 1.0)",
                               "    return bounded", ""],
                              ["clipped = []", "for g in {value}:", "    clipped.append(clip_one(g))"]),
    "index loop": ([], ["listed = {value}", "clipped = [tf.clip_by_norm(listed[i], 1.0) for i in range(len(listed))]"]),
    "dict by variable name": ([], ["by_name = dict(zip([v.name for v in model.trainable_variables], {value}))",
                                   "clipped = []", "for key in by_name:",
                                   "    clipped.append(tf.clip_by_norm(by_name[key], 1.0))"]),
}
GRADIENT_TWIN = "clipped, _ = tf.clip_by_global_norm({value}, 1.0)"
GRADIENT_CARRIERS = ("direct", "name", "function return", "helper parameter", "self attribute", "self method",
                     "instance attribute", "subclass attribute", "list element", "dict value", "tuple unpack",
                     "static method", "lambda", "branches", "conditional", "walrus", "partial helper",
                     "one branch", "if without else", "try/except")


# How the clipped list reaches `apply_gradients`: the carriers on the way to the sink. Each gives
# (definitions, statements) around the list named `clipped`.
APPLY_CARRIERS = {
    "direct": ([], ["optimizer.apply_gradients(zip(clipped, model.trainable_variables))"]),
    "name": ([], ["final = clipped", "optimizer.apply_gradients(zip(final, model.trainable_variables))"]),
    "tuple unpack": ([], ["final, count = clipped, 3",
                          "optimizer.apply_gradients(zip(final, model.trainable_variables))"]),
    "dict value": ([], ["update = {'grads': clipped}",
                        "optimizer.apply_gradients(zip(update['grads'], model.trainable_variables))"]),
    "pairs comprehension": ([], ["optimizer.apply_gradients(",
                                 "    [(g, v) for g, v in zip(clipped, model.trainable_variables)])"]),
    "pairs list": ([], ["pairs = list(zip(clipped, model.trainable_variables))", "optimizer.apply_gradients(pairs)"]),
    "keyword": ([], ["optimizer.apply_gradients(grads_and_vars=zip(clipped, model.trainable_variables))"]),
    "one branch": ([], ["final = []", "if features is not None:", "    final = clipped",
                        "optimizer.apply_gradients(zip(final, model.trainable_variables))"]),
    "helper parameter": (["def apply_update(grads, model):",
                          "    optimizer.apply_gradients(zip(grads, model.trainable_variables))", ""],
                         ["apply_update(clipped, model)"]),
    "instance attribute": (["class Updater:", "    def __init__(self, grads):", "        self.grads = grads", "",
                            "    def apply(self, model):",
                            "        optimizer.apply_gradients(zip(self.grads, model.trainable_variables))", ""],
                           ["Updater(clipped).apply(model)"]),
    "branches": ([], ["if model.trainable:", "    final = clipped", "else:", "    final = clipped",
                      "optimizer.apply_gradients(zip(final, model.trainable_variables))"]),
    # one flat update vector (baselines' flatgrad), which an MPI Adam or a conjugate gradient applies
    "flattened into one vector": ([], ["flat = tf.concat([tf.reshape(g if g is not None else tf.zeros_like(v), [-1])",
                                       "                  for g, v in zip(clipped, model.trainable_variables)], 0)",
                                       "mpi_adam.update(flat)"]),
}


def build_gradient(source: str, carriers: Sequence[str], to_apply: str = "direct",
                   clip: str = "comprehension") -> Program:
    value = GRADIENT_SOURCES[source]
    helpers, clipping = GRADIENT_SINKS[clip]
    text, line = _render_gradient(value, carriers, (helpers, clipping), to_apply)
    twin, _ = _render_gradient(value, carriers, (helpers, [GRADIENT_TWIN]), to_apply)
    via = tuple(carriers) + ((f"to apply: {to_apply}",) if to_apply != "direct" else ())
    return Program(source, via, f"per-tensor clip ({clip})", text, (twin,), line, "CL003")


def _render_gradient(value: str, carriers: Sequence[str], sink: Tuple[List[str], List[str]],
                     to_apply: str) -> Tuple[str, int]:
    helpers, clipping = sink
    definitions, applying = APPLY_CARRIERS[to_apply]
    definitions = list(helpers) + list(definitions)
    body = ["with tf.GradientTape() as tape:", "    loss = tf.reduce_mean(model(features))"]
    for depth, name in enumerate(carriers):
        added, value = CARRIERS[name](value, depth)
        # the carriers' helpers take what the gradient needs instead of (logits, features)
        added, value = [line.replace("logits, features", "tape, loss, model") for line in added], \
            value.replace("logits, features", "tape, loss, model")
        defines = bool(added) and added[0].startswith(("def ", "class "))
        (definitions if defines and len(body) == 2 else body).extend(added)
    body += [line.format(value=value) for line in clipping] + applying
    lines = GRADIENT_HEADER.splitlines() + definitions + ["def train_step(model, features):"]
    lines += ["    " + line if line else "" for line in body]
    marked = [i for i, line in enumerate(lines) if "tf.clip_by_norm(" in line or "clip_by_global_norm(" in line]
    return "\n".join(lines) + "\n", marked[0] + 1


# --- logits: a linear output carried to a loss that expects probabilities (CL012) -------------------

# name -> (an expression making logits, its twin: the same layer or product squashed)
LOGIT_SOURCES = {
    "Dense without activation": ("keras.layers.Dense(10)(features)",
                                 "keras.layers.Dense(10, activation='sigmoid')(features)"),
    "Dense relu": ("keras.layers.Dense(10, activation='relu')(features)",
                   "keras.layers.Dense(10, activation='softmax')(features)"),
    "Conv2D, flattened": ("keras.layers.Flatten()(keras.layers.Conv2D(10, 3)(features))",
                          "keras.layers.Flatten()(keras.layers.Conv2D(10, 3, activation='sigmoid')(features))"),
    "Conv1D, pooled": ("keras.layers.GlobalAveragePooling1D()(keras.layers.Conv1D(10, 3)(features))",
                       "keras.layers.GlobalAveragePooling1D()(keras.layers.Conv1D(10, 3, activation='sigmoid')"
                       "(features))"),
    "matmul plus bias": ("tf.matmul(features, kernel) + bias", "tf.sigmoid(tf.matmul(features, kernel) + bias)"),
    "@ with bias_add": ("tf.nn.bias_add(features @ kernel, bias)",
                        "tf.nn.softmax(tf.nn.bias_add(features @ kernel, bias))"),
    "einsum, reshaped": ("tf.reshape(tf.einsum('bi,ij->bj', features, kernel), [-1, 10])",
                         "tf.nn.sigmoid(tf.reshape(tf.einsum('bi,ij->bj', features, kernel), [-1, 10]))"),
    "temperature": ("keras.layers.Dense(10)(features) / 2.0", "tf.nn.softmax(keras.layers.Dense(10)(features) / 2.0)"),
    "linear model called": ("linear_model(features)", "squashed_model(features)"),
    "two-headed model, second head": ("two_heads(features)[1]", "two_heads(features)[0]"),
}
LOGIT_DEFINITIONS = ["kernel = tf.Variable(tf.zeros([4, 10]))", "bias = tf.Variable(tf.zeros([10]))",
                     "linear_model = keras.Sequential([keras.layers.Dense(10)])",
                     "squashed_model = keras.Sequential([keras.layers.Dense(10, activation='sigmoid')])",
                     "two_heads_in = keras.Input((4,))",
                     "two_heads = keras.Model(two_heads_in, [",
                     "    keras.layers.Dense(10, activation='softmax')(two_heads_in),",
                     "    keras.layers.Dense(10)(two_heads_in)])",
                     ""]
# name -> (the loss given logits, its sanitised twin: told they are logits)
LOGIT_SINKS = {
    "keras.losses.binary_crossentropy": ("keras.losses.binary_crossentropy(labels, {value})",
                                         "keras.losses.binary_crossentropy(labels, {value}, from_logits=True)"),
    "y_pred keyword": ("keras.losses.categorical_crossentropy(y_true=labels, y_pred={value})",
                       "keras.losses.categorical_crossentropy(y_true=labels, y_pred={value}, from_logits=True)"),
    "keras.backend.categorical_crossentropy": (
        "keras.backend.categorical_crossentropy(labels, {value})",
        "keras.backend.categorical_crossentropy(labels, {value}, from_logits=True)"),
    "keras.metrics.sparse_categorical_crossentropy": (
        "keras.metrics.sparse_categorical_crossentropy(labels, {value})",
        "keras.metrics.sparse_categorical_crossentropy(labels, {value}, from_logits=True)"),
    "BinaryCrossentropy()(...)": ("keras.losses.BinaryCrossentropy()(labels, {value})",
                                  "keras.losses.BinaryCrossentropy(from_logits=True)(labels, {value})"),
    "loss object": ("loss_fn = keras.losses.CategoricalCrossentropy()\nloss = loss_fn(labels, {value})" + MARK,
                    "loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True)\n"
                    "loss = loss_fn(labels, {value})"),
}
# The carriers that hand a tensor on as logits: not the clamps, epsilons, products with one-hot
# labels, ratios and layers that make a probability-like value of it.
LOGIT_CARRIERS = tuple(c for c in CARRIERS if c not in (
    "+ eps", "+ keras epsilon", "+ epsilon of another module", "masked *=", "clip_by_value", "tf.where",
    "tf.maximum", "label likelihood |y - p|", "tf.minimum(max)", "one-hot product", "tf.multiply product",
    "ensemble mean", "ratio", "user layer", "augmented +=", "add_n mean", "diagonal"))


def build_logits(source: str, carriers: Sequence[str], sink: str) -> Program:
    value, squashed = LOGIT_SOURCES[source]
    wrong, told = LOGIT_SINKS[sink]
    text, line = _render(value, carriers, wrong, LOGIT_DEFINITIONS)
    twins = (_render(squashed, carriers, wrong, LOGIT_DEFINITIONS)[0],
             _render(value, carriers, told, LOGIT_DEFINITIONS)[0])
    return Program(source, tuple(carriers), sink, text, twins, line, "CL012")


# --- one loss per output: a list or dict given to compile, each loss on its own output -------------

# name -> (how the compile names the losses, `{wrong}` for the head's, `{other}` for the box's; the
# order of the model's outputs). A dict matches the layer making the output by its `name`.
OUTPUT_MATCHES = {
    "list, head first": ("[{wrong}, {other}]", "[head, box]"),
    "list, head second": ("[{other}, {wrong}]", "[box, head]"),
    "tuple": ("({other}, {wrong})", "(box, head)"),
    "dict by name": ("{{'box': {other}, 'head': {wrong}}}", "[box, head]"),
    "dict, key from a constant": ("{{BOX: {other}, HEAD: {wrong}}}", "[head, box]"),
    "dict given as a name": ("losses\nlosses = {{'head': {wrong}, 'box': {other}}}", "[box, head]"),
}
# name -> (a head making logits, its squashed twin): the layer making the output is named 'head'.
OUTPUT_HEADS = {
    "Dense": ("keras.layers.Dense(10, name='head')(hidden)",
              "keras.layers.Dense(10, activation='softmax', name='head')(hidden)"),
    "layer bound first": ("head_layer(hidden)\nhead_layer = keras.layers.Dense(10, name='head')",
                          "head_layer(hidden)\nhead_layer = keras.layers.Dense(10, activation='sigmoid', name='head')"),
    "Activation named after a Dense": (
        "keras.layers.Activation('linear', name='head')(keras.layers.Dense(10)(hidden))",
        "keras.layers.Activation('softmax', name='head')(keras.layers.Dense(10)(hidden))"),
    "builder's return": ("make_head(hidden, None)", "make_head(hidden, 'softmax')"),
}
# code -> (the loss that does not fit the head, the head that makes it a mistake: 0 logits, 1
# squashed, the text on the finding's line). A loss function's `y_pred` is its own output's.
OUTPUT_LOSSES = {"CL012": ("'categorical_crossentropy'", 0, "'categorical_crossentropy'"),
                 "CL010": ("keras.losses.CategoricalCrossentropy(from_logits=True)", 1, "from_logits=True"),
                 "CL004": ("xent", 1, "tf.math.log(y_pred)")}


def build_output_loss(head: str, match: str, code: str) -> Program:
    wrong, which, marked = OUTPUT_LOSSES[code]
    heads = OUTPUT_HEADS[head]
    text, line = _render_outputs(heads[which], match, wrong, marked)
    twin, _ = _render_outputs(heads[1 - which], match, wrong, marked)
    return Program(f"{head} output", (match,), f"compile {code}", text, (twin,), line, code)


def _render_outputs(head: str, match: str, wrong: str, marked: str) -> Tuple[str, int]:
    losses, outputs = OUTPUT_MATCHES[match]
    loss, *loss_lines = losses.format(wrong=wrong, other="'mse'").split("\n")
    value, *head_lines = head.split("\n")
    lines = HEADER.splitlines() + ["BOX, HEAD = 'box', 'head'", "def make_head(h, activation):",
                                   "    return keras.layers.Dense(10, activation=activation, name='head')(h)", "",
                                   "def xent(y_true, y_pred):",
                                   "    return -tf.reduce_sum(y_true * tf.math.log(y_pred), axis=-1)", "",
                                   "features = keras.Input((8,))",
                                   "hidden = keras.layers.Dense(32, activation='relu')(features)", *head_lines,
                                   f"head = {value}", "box = keras.layers.Dense(4, name='box')(hidden)",
                                   f"model = keras.Model(features, {outputs})", *loss_lines,
                                   f"model.compile(optimizer='adam', loss={loss})", "model.fit(x, y)"]
    # the finding is where the wrong loss is written (the compile, or the dict given to it), or its log
    return "\n".join(lines) + "\n", max(number for number, line in enumerate(lines, 1) if marked in line)


# --- hand-written formulas: an `exp`, a difference or a `log` carried to the formula it breaks ------

# name -> (code, the value made from the logits, its stable twin, the sink the value reaches)
FORMULAS = {
    "exp / sum (softmax)": ("CL011", "tf.exp(logits)", "tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))",
                            "{value} / tf.reduce_sum({value}, axis=-1, keepdims=True)"),
    "log of a sum of exp": ("CL011", "tf.exp(logits)", "tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))",
                            "tf.math.log(tf.reduce_sum({value}, axis=-1))"),
    "log(1 + exp)": ("CL011", "tf.exp(logits)", "tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))",
                     "tf.math.log(1.0 + {value})"),
    "log(c * exp + c)": ("CL011", "tf.exp(logits)", "tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))",
                         "tf.math.log(0.5 * {value} + 0.5)"),
    "log1p(c * exp)": ("CL011", "tf.exp(logits)", "tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))",
                       "tf.math.log1p(1.718 * {value})"),
    "norm of a difference": ("CL014", "(logits - features)", "logits", "tf.norm({value}, axis=-1)"),
    # a product is zero wherever its difference is (a masked reconstruction error)
    "norm of a masked difference": ("CL014", "tf.multiply(logits - features, labels)", "tf.multiply(logits, labels)",
                                    "tf.norm({value}, axis=-1)"),
    # a distance between points written term by term (`sqrt(dx ** 2 + dy ** 2)`)
    "squares added of a difference": ("CL014", "(logits - features)", "logits",
                                      "tf.sqrt(tf.square({value}[:, 0]) + {value}[:, 1] ** 2)"),
    "where over a log": ("CL015", "tf.math.log(logits)", "tf.math.log(tf.where(logits > 0, logits, 1.0))",
                         "tf.where(logits > 0, {value}, tf.zeros_like(logits))"),
}
# The carriers that hand a value on unchanged (a scale, an epsilon or a reshape changes what a
# formula computes: a norm of `d + eps` is no longer zero where the points coincide).
FORMULA_CARRIERS = ("direct", "name", "function return", "helper parameter", "partial helper", "self attribute",
                    "self method", "list element", "dict value", "append", "tuple unpack", "static method", "lambda",
                    "branches", "instance attribute", "subclass attribute", "comprehension", "conditional", "walrus",
                    "TensorArray", "while_loop", "map_structure", "one branch", "if without else", "try/except")


# Sinks that sanitise the formula's value where it is used: twins with the unstable value itself.
SANITISED_SINKS = {
    # a norm raised to a power above 1 has gradient 0 at zero (measured, TF 2.21)
    "norm of a difference": ("tf.square(tf.norm({value}, axis=-1))", "tf.norm({value}, axis=-1) ** 2"),
    "norm of a masked difference": ("tf.square(tf.norm({value}, axis=-1))",),
    "squares added of a difference": ("tf.sqrt(tf.square({value}[:, 0]) + {value}[:, 1] ** 2 + 1e-12)",),
}


# The sanitiser written in place, before the value is made: a twin for each formula of an exp.
IN_PLACE_SHIFT = ["logits -= tf.reduce_max(logits, axis=-1, keepdims=True)"]


def build_formula(formula: str, carriers: Sequence[str]) -> Program:
    code, value, stable, sink = FORMULAS[formula]
    text, line = _render(value, carriers, sink)
    twins = [_render(stable, carriers, sink)[0]]
    twins += [_render(value, carriers, sanitised)[0] for sanitised in SANITISED_SINKS.get(formula, ())]
    if value == "tf.exp(logits)":
        twins.append(_render(value, carriers, sink, opening=IN_PLACE_SHIFT)[0])
    return Program(value, tuple(carriers), formula, text, tuple(twins), line, code)


def matrix(nested: bool = True) -> Iterator[Program]:
    """Every source x carrier x sink, then every ordered pair of carriers (source and sink rotated
    through so each pair meets several of them)."""
    for source, carrier, sink in itertools.product(PROBABILITY_SOURCES, CARRIERS, SINKS):
        yield build(source, [carrier], sink)
    if not nested:
        return
    pairs = list(itertools.product(PROBABILITY_SOURCES, SINKS))
    for index, (outer, inner) in enumerate(itertools.product(CARRIERS, repeat=2)):
        yield build(*_rotated(pairs, index, [outer, inner]))
    for source, carrier in itertools.product(GRADIENT_SOURCES, GRADIENT_CARRIERS):
        yield build_gradient(source, [carrier])
    for index, (outer, inner) in enumerate(itertools.product(GRADIENT_CARRIERS, repeat=2)):
        yield build_gradient(list(GRADIENT_SOURCES)[index % len(GRADIENT_SOURCES)], [outer, inner])
    # every carrier on the way to the sink, after every carrier from the source
    for index, (carrier, to_apply) in enumerate(itertools.product(GRADIENT_CARRIERS, APPLY_CARRIERS)):
        yield build_gradient(list(GRADIENT_SOURCES)[index % len(GRADIENT_SOURCES)], [carrier], to_apply)
    # every way of clipping element by element, after every carrier, on every way to the sink
    for index, (carrier, clip) in enumerate(itertools.product(GRADIENT_CARRIERS, GRADIENT_SINKS)):
        to_apply = list(APPLY_CARRIERS)[index % len(APPLY_CARRIERS)]
        yield build_gradient(list(GRADIENT_SOURCES)[index % len(GRADIENT_SOURCES)], [carrier], to_apply, clip)
    for model, carrier, sink in itertools.product(SOFTMAX_MODELS, MODEL_CARRIERS, MODEL_SINKS):
        yield build_model(model, [carrier], sink)
    for index, (outer, inner) in enumerate(itertools.product(MODEL_CARRIERS, repeat=2)):
        model = list(SOFTMAX_MODELS)[index % len(SOFTMAX_MODELS)]
        yield build_model(model, [outer, inner], list(MODEL_SINKS)[index // 2 % len(MODEL_SINKS)])
    for carrier, sink in itertools.product(OBJECT_CARRIERS, OPTION_SINKS):
        yield build_options([carrier], sink)
    for index, (outer, inner) in enumerate(itertools.product(OBJECT_CARRIERS, repeat=2)):
        yield build_options([outer, inner], list(OPTION_SINKS)[index % 2])
    for carrier, sink in itertools.product(THRESHOLD_CARRIERS, THRESHOLD_SINKS):
        yield build_threshold([carrier], sink)
    for index, (outer, inner) in enumerate(itertools.product(THRESHOLD_CARRIERS, repeat=2)):
        yield build_threshold([outer, inner], list(THRESHOLD_SINKS)[index % 3])
    for source, carrier, sink in itertools.product(LOGIT_SOURCES, LOGIT_CARRIERS, LOGIT_SINKS):
        yield build_logits(source, [carrier], sink)
    logit_pairs = list(itertools.product(LOGIT_SOURCES, LOGIT_SINKS))
    for index, (outer, inner) in enumerate(itertools.product(LOGIT_CARRIERS, repeat=2)):
        source, carriers, sink = _rotated(logit_pairs, index, [outer, inner])
        yield build_logits(source, carriers, sink)
    for head, match, code in itertools.product(OUTPUT_HEADS, OUTPUT_MATCHES, OUTPUT_LOSSES):
        yield build_output_loss(head, match, code)
    for formula, carrier in itertools.product(FORMULAS, FORMULA_CARRIERS):
        yield build_formula(formula, [carrier])
    for index, (outer, inner) in enumerate(itertools.product(FORMULA_CARRIERS, repeat=2)):
        yield build_formula(list(FORMULAS)[index % len(FORMULAS)], [outer, inner])


def _rotated(pairs, index: int, carriers):
    source, sink = pairs[index % len(pairs)]
    return source, carriers, sink


def sample(size: int, seed: int = 25) -> List[Program]:
    """A fixed sample of the matrix (the same programs on every run)."""
    programs = list(matrix())
    return random.Random(seed).sample(programs, min(size, len(programs)))


STAR_HEADER = "from keras.layers import *\nfrom keras.models import *\n"
STAR_SPELLINGS = ((re.compile(r"(?<![\w.])keras\.layers\."), ""), (re.compile(r"(?<![\w.])keras\.backend\."), "K."),
                  (re.compile(r"(?<![\w.])keras\.(Sequential|Model)\("), r"\1("))


def starred(program: Program) -> Program:
    """The program written as old Keras scripts are: `from keras.layers import *` (which binds `K`,
    the backend, too), then `Dense(...)`, `Model(...)`, `K.log(...)`; the finding two lines lower."""
    def rewritten(text: str) -> str:
        for pattern, spelling in STAR_SPELLINGS:
            text = pattern.sub(spelling, text)
        return STAR_HEADER + text
    return replace(program, text=rewritten(program.text), twins=tuple(map(rewritten, program.twins)),
                   line=program.line + 2)


@dataclass(frozen=True)
class Outcome:
    found: bool  # the mistake is reported at its line
    twin_findings: Tuple[str, ...]  # anything reported on the clean twin (false positives)
    gate_agrees: bool  # the gate and the reduced parse change nothing, on the program and its twin


def check(program: Program) -> Outcome:
    """Lint the program and its twin in-process, with and without the gate and reduced parse."""
    gated, ungated = _lint(program.text), _lint(program.text, gate=False)
    twins = [(_lint(twin), _lint(twin, gate=False)) for twin in program.twins]
    found = (program.code, program.line) in {(code, line) for code, line, _ in gated}
    on_twins = tuple(f"{code}@{line}: {message}" for twin, _ in twins for code, line, message in twin)
    return Outcome(found, on_twins, gated == ungated and all(a == b for a, b in twins))


def _lint(text: str, gate: bool = True) -> List[Tuple[str, int, str]]:
    from cliplint.analysis import lint_module
    from cliplint.lint import lint_text
    from cliplint.rules import ALL_RULES

    rules = list(ALL_RULES.values())
    findings, _ = lint_text("m.py", text, rules, "m.py") if gate else lint_module("m.py", text, rules, "m.py")
    return sorted((f.code, f.line, f.message) for f in findings)
