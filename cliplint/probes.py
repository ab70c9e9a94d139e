"""The contract between the rules and the verifier's probes: one frozen dataclass per probe kind.

A rule reports a finding it can verify with `Report(..., probe=Construct(call=ctx.flow.snippet(call)))`;
the worker's probe function registers for the class (`@runs(Construct)` in `verify/probes`). What
travels between them (the findings cache, `--fix --verify`, the worker's JSON) is the probe's
`payload`: `{"kind": ..., field: value}`, each `Snippet` as its dict. `verify/payload.py` reads a
payload back with `parse` and prepares each field by its type:

- `Snippet`: code layer 1 rebuilds (`Optional[Snippet]` with `STAND_IN` metadata: the probe may
  stand in for it when layer 1 refuses it);
- `Name`: a name or dotted chain the probe binds to a stand-in (never run);
- `Attribute`: an attribute the snippet sets (checked against what may be set);
- `Options`: a config file's numeric optimizer options;
- `bool`, `str`: sent as they are.

A leaf module: it imports nothing from cliplint (the worker imports it; it never imports the analysis).
"""
from __future__ import annotations

import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, ClassVar, Dict, Literal, NewType, Optional, Tuple, Type, TypeVar

Name = NewType("Name", str)
Attribute = NewType("Attribute", str)
Options = NewType("Options", dict)
STAND_IN = "stand_in"  # field metadata: the evidence note when the probe stands in for a refused snippet


@dataclass(frozen=True)
class Snippet:
    """Source the verifier re-executes: its text, the imported names it uses (canonical), the
    literal values of its local names (`constants`) and of the attributes the static analysis
    read (`values`: `FLAGS.clipnorm` -> its flag default), where each came from (`sources`), and
    `node`: the syntax node it shows (a fix is replayed on it; never sent)."""

    code: str
    imports: Dict[str, str] = field(default_factory=dict)
    constants: Dict[str, Any] = field(default_factory=dict)
    values: Dict[str, Any] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)
    node: Any = field(default=None, compare=False, repr=False)

    def wire(self) -> dict:
        return {"code": self.code, "imports": dict(self.imports), "constants": dict(self.constants),
                "values": dict(self.values), "sources": dict(self.sources)}


@dataclass(frozen=True)
class Probe:
    """What every probe kind is: `kind` names it in its payload, `rules` are the rules that use it."""

    kind: ClassVar[str] = ""
    rules: ClassVar[Tuple[str, ...]] = ()


KINDS: Dict[Tuple[str, str], Type[Probe]] = {}  # (rule code, kind) -> the class
P = TypeVar("P", bound=Type[Probe])


def kind(name: str, *rules: str) -> Callable[[P], P]:
    """Register a probe class under its kind for its rules."""
    def register(cls: P) -> P:
        cls.kind, cls.rules = name, rules
        for rule in rules:
            KINDS[(rule, name)] = cls
        return cls
    return register


def variant(base: P, name: str, kind_name: str, *rules: str, doc: str) -> P:
    """A probe kind with its base's fields: one of several that one probe function tells apart by kind."""
    made = type(name, (base,), {"__doc__": doc, "__module__": __name__, "__qualname__": name})
    cls: type = dataclass(frozen=True)(made)
    # a subclass of `base` with its fields: to a type checker, which cannot follow type(), `base` itself
    return kind(kind_name, *rules)(typing.cast(P, cls))


# --- CL001, CL009: an optimizer's clip options ---------------------------------------------------

@kind("construct", "CL001")
@dataclass(frozen=True)
class Construct(Probe):
    call: Snippet  # an optimizer built with several clip options


@kind("late-attribute", "CL001")
@dataclass(frozen=True)
class LateAttribute(Probe):
    call: Snippet  # the optimizer's construction
    attribute: Attribute  # the clip option set afterwards
    value: Snippet


@kind("config", "CL001", "CL009")
@dataclass(frozen=True)
class Config(Probe):
    class_name: Name  # an optimizer described by a training config
    options: Options
    assumed_class: bool = False


@dataclass(frozen=True)
class Threshold(Probe):
    call: Snippet


OptimizerThreshold = variant(Threshold, "OptimizerThreshold", "optimizer", "CL009",
                             doc="An optimizer's clip threshold <= 0.")
TensorThreshold = variant(Threshold, "TensorThreshold", "tensor", "CL009",
                          doc="clip_by_norm / clip_by_global_norm's threshold <= 0.")
ValueBounds = variant(Threshold, "ValueBounds", "value", "CL009", doc="clip_by_value with min > max.")


# --- CL002: the optimizer changed after compile --------------------------------------------------

@dataclass(frozen=True)
class AfterCompile(Probe):
    change: Snippet
    trained_before: bool = False
    option: Optional[str] = None
    compile: Optional[Snippet] = None  # None: a callback's `self.model`


OptionChanged = variant(AfterCompile, "OptionChanged", "option", "CL002", doc="A clip option changed after compile.")
OptimizerReplaced = variant(AfterCompile, "OptimizerReplaced", "replace", "CL002",
                            doc="`model.optimizer = ...` after compile.")
OptimizerRebound = variant(AfterCompile, "OptimizerRebound", "rebind", "CL002",
                           doc="The optimizer's name rebound after compile.")
CallbackChange = variant(AfterCompile, "CallbackChange", "callback", "CL002",
                         doc="A callback that changes a clip option.")


# --- CL003, CL005, CL006, CL007: the gradient list -----------------------------------------------

@kind("per-tensor", "CL003")
@dataclass(frozen=True)
class PerTensor(Probe):
    loop: Snippet
    clip: Snippet
    result: Optional[Name] = None
    appends: Tuple[Name, ...] = ()
    gradients: Optional[Name] = None
    variables: Optional[Name] = None
    pairs: bool = False
    keyed: bool = False  # as NoneUnsafe's
    helper: Optional[Name] = None  # the loop calls a helper returning `clip` (`clip(g)`) ...
    parameter: Optional[Name] = None  # ... whose parameter the clip takes (`g` of `def clip(g)`)


@kind("none-unsafe", "CL005")
@dataclass(frozen=True)
class NoneUnsafe(Probe):
    loop: Snippet  # a clipping loop that fails on a None gradient
    appends: Tuple[Name, ...] = ()
    gradients: Optional[Name] = None
    variables: Optional[Name] = None
    pairs: bool = False
    keyed: bool = False  # gradients and variables are dicts with the same keys (`dict(zip(weights.keys(), grads))`)


@kind("misaligned", "CL005")
@dataclass(frozen=True)
class Misaligned(Probe):
    zip: Snippet  # None gradients filtered out of one list only
    statements: Tuple[Snippet, ...] = ()
    gradients: Optional[Name] = None
    variables: Optional[Name] = None


@kind("not-unpacked", "CL006")
@dataclass(frozen=True)
class NotUnpacked(Probe):
    use: Snippet
    statement: Optional[Snippet] = None
    gradients: Optional[Name] = None


@kind("unused", "CL007")
@dataclass(frozen=True)
class Unused(Probe):
    clip: Snippet  # the clipped list is not the one applied
    applied: Snippet
    threshold: Optional[Snippet] = None
    gradients: Optional[Name] = None
    variables: Optional[Name] = None
    pairs: bool = False


@kind("discarded", "CL007")
@dataclass(frozen=True)
class Discarded(Probe):
    loop: Snippet  # a clip's result thrown away, or its input kept instead
    clip: Snippet
    tensor: Optional[Name] = None
    kept: Optional[Name] = None
    appends: Tuple[Name, ...] = ()
    gradients: Optional[Name] = None
    variables: Optional[Name] = None
    pairs: bool = False


# --- CL004, CL008, CL010: numerics ---------------------------------------------------------------

@dataclass(frozen=True)
class LogOf(Probe):
    log: Snippet
    padded: bool = False
    source: Optional[Snippet] = field(default=None, metadata={STAND_IN: (
        "the probabilities' producer `{code}` is not run ({refusal}): the {activation} of stand-in logits "
        "stands in for its output")})


LogOfSoftmax = variant(LogOf, "LogOfSoftmax", "softmax", "CL004", doc="log of a softmax.")
LogOfSigmoid = variant(LogOf, "LogOfSigmoid", "sigmoid", "CL004", doc="log of a sigmoid.")
LogOfOneMinusSigmoid = variant(LogOf, "LogOfOneMinusSigmoid", "1-sigmoid", "CL004", doc="log(1 - sigmoid).")


@kind("numerics", "CL008")
@dataclass(frozen=True)
class Numerics(Probe):
    call: Snippet  # tf.add_check_numerics_ops()


Squashing = Literal["softmax", "sigmoid"]


@dataclass(frozen=True)
class FromLogits(Probe):
    op: Optional[str] = None  # a `tf.nn.*_with_logits` op, run by the probe itself
    function: Optional[str] = None  # a loss function called with from_logits=True
    call: Optional[Snippet] = None
    loss: Optional[Snippet] = None  # a loss object built with from_logits=True
    squashed: Optional[Squashing] = None  # the other activation the input went through (sigmoid before softmax)


SoftmaxThenFromLogits = variant(FromLogits, "SoftmaxThenFromLogits", "softmax", "CL010",
                                doc="softmax before a from-logits loss.")
SigmoidThenFromLogits = variant(FromLogits, "SigmoidThenFromLogits", "sigmoid", "CL010",
                                doc="sigmoid before a from-logits loss.")


# --- CL011-CL015: numerics written by hand -------------------------------------------------------

@dataclass(frozen=True)
class Formula(Probe):
    """The user's expression run on the stand-in input the facts give (section 13)."""

    expr: Snippet
    inputs: Tuple[Snippet, ...] = ()  # the sub-expressions standing for the input
    exp_inputs: Tuple[Snippet, ...] = ()  # names holding exp of the input
    setup: Optional[Snippet] = None  # the assignment of a name the expression reads, replayed first
    pairwise: bool = False  # CL014: differences of one set with itself
    normalise: bool = False  # CL014: x / norm(x)
    at_one: bool = False  # CL015: acos/asin, singular at 1
    constant: bool = False  # CL014: a standard deviation, singular where its input is constant


UnstableSoftmax = variant(Formula, "UnstableSoftmax", "unstable-softmax", "CL011",
                          doc="exp(x) / reduce_sum(exp(x)) without the max subtracted.")
LogSumExp = variant(Formula, "LogSumExp", "logsumexp", "CL011", doc="log(reduce_sum(exp(x))).")
Softplus = variant(Formula, "Softplus", "softplus", "CL011", doc="log(1 + exp(x)).")
SqrtExp = variant(Formula, "SqrtExp", "sqrt-exp", "CL011", doc="sqrt(exp(x)).")
NormAtZero = variant(Formula, "NormAtZero", "norm-at-zero", "CL014", doc="a norm (or x / norm(x)) at zero.")
WhereGradient = variant(Formula, "WhereGradient", "where-gradient", "CL015",
                        doc="tf.where masking log(x), 1/x, ... at the invalid point.")
FORMULAS = {cls.kind: cls for cls in (UnstableSoftmax, LogSumExp, Softplus, SqrtExp)}


@kind("probability-loss", "CL012")
@dataclass(frozen=True)
class ProbabilityLoss(Probe):
    loss_class: str  # the from_logits=False loss, run on the model's logits and with from_logits=True


@kind("single-unit", "CL013")
@dataclass(frozen=True)
class SingleUnit(Probe):
    layer: Optional[Snippet] = None  # the user's Dense(1, activation="softmax"), when it is one call


LOG_OF = {cls.kind: cls for cls in (LogOfSoftmax, LogOfSigmoid, LogOfOneMinusSigmoid)}
FROM_LOGITS = {cls.kind: cls for cls in (SoftmaxThenFromLogits, SigmoidThenFromLogits)}


# --- the payload ---------------------------------------------------------------------------------

def payload(probe: Probe) -> dict:
    """The probe as data (JSON): what the cache stores and the verifier reads back with `parse`."""
    return {"kind": probe.kind, **{f.name: _wire(getattr(probe, f.name)) for f in fields(probe)}}


def _wire(value):
    if isinstance(value, Snippet):
        return value.wire()
    if isinstance(value, (tuple, list)):
        return [_wire(item) for item in value]
    return dict(value) if isinstance(value, dict) else value


class Malformed(ValueError):
    """A payload that does not fit its probe class (the message names the field)."""


def parse(rule: str, data: dict) -> Probe:
    """The probe a payload describes, each field checked for the shape its type gives."""
    cls = KINDS.get((rule, str(data.get("kind"))))
    if cls is None:
        raise Malformed(f"no probe kind `{data.get('kind')}` for {rule}")
    known = {f.name: f for f in fields(cls)}
    unexpected = set(data) - set(known) - {"kind"}
    if unexpected:
        raise Malformed(f"an unexpected `{sorted(unexpected)[0]}` field")
    hints = field_types(cls)
    values = {}
    for name, declared in known.items():
        if name in data:
            values[name] = _read(hints[name], data[name], name)
        elif declared.default is MISSING and declared.default_factory is MISSING:
            raise Malformed(f"no `{name}` field")
    return cls(**values)


def field_types(cls: type) -> Dict[str, Any]:
    return typing.get_type_hints(cls)


def shape(hint) -> Tuple[Any, bool, bool]:
    """(the field's item type, optional, a tuple of them)."""
    optional = False
    if typing.get_origin(hint) is typing.Union:
        hint, optional = next(a for a in typing.get_args(hint) if a is not type(None)), True
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], optional, True
    return hint, optional, False


def _read(hint, value, name: str):
    item, optional, many = shape(hint)
    if value is None and optional:
        return None
    if many:
        if not isinstance(value, (list, tuple)):
            raise Malformed(f"the `{name}` field is not a list")
        return tuple(_item(item, v, name) for v in value)
    return _item(item, value, name)


_PLAIN = {str: str, Name: str, Attribute: str, bool: bool}


def _item(item, value, name: str):
    if typing.get_origin(item) is typing.Literal:
        if value not in typing.get_args(item):
            raise Malformed(f"the `{name}` field is not one of {', '.join(map(repr, typing.get_args(item)))}")
        return value
    if item is Snippet:
        if not isinstance(value, dict) or not isinstance(value.get("code"), str) \
                or set(value) - {"code", "imports", "constants", "values", "sources"}:
            raise Malformed(f"the `{name}` field is not a snippet")
        return Snippet(**value)
    if item is Options:
        if not isinstance(value, dict):
            raise Malformed(f"the `{name}` field is not a mapping")
        return dict(value)
    if not isinstance(value, _PLAIN.get(item, object)) or item not in _PLAIN:
        raise Malformed(f"the `{name}` field is not a {getattr(item, '__name__', item)}")
    return value
