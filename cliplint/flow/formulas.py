"""Formulas written out by hand (round 3's numerics rules): what an `exp` is taken of, whether
an expression is shown to stay below the float32 overflow of `exp` (about 88), whether it is a
distance (never negative), a difference, a pairwise difference over one set, and whether a
value is one gradients flow through (not only an input pipeline's, a label's or a constant's).

Names are followed through their assignments (`Dataflow.value_of`); nothing here is a
rule's policy: the rules decide what to report from these answers.
"""
from __future__ import annotations

from typing import FrozenSet, Iterator, List, Optional

import libcst as cst

from ..names import (
    EXP,
    GATHERS,
    LAYER_FUNCTIONS,
    MEANS,
    MULTIPLIES,
    SEGMENT_MAXIMA,
    SEGMENT_SUMS,
    SHAPE_CHANGES,
    SUBTRACTS,
    SUMS,
)
from .carriers import trace
from .constants import UNKNOWN, Number, constant, dead, says_small
from .local import Dataflow
from .nodes import MAX_DEPTH, arg, walk

LOGS = frozenset({"tensorflow.math.log", "keras.backend.log", "keras.ops.log", "tensorflow.experimental.numpy.log"})
LOG1P = frozenset({"tensorflow.math.log1p", "keras.ops.log1p", "tensorflow.log1p"})
SQRTS = frozenset({"tensorflow.sqrt", "tensorflow.math.sqrt", "keras.ops.sqrt", "keras.backend.sqrt"})
SQUARES = frozenset({"tensorflow.square", "tensorflow.math.square", "keras.ops.square", "keras.backend.square"})
NORMS = frozenset({"tensorflow.linalg.norm", "tensorflow.norm", "keras.ops.norm"})
# Methods whose result is a NumPy array, which no gradient flows back through.
NUMPY_RESULTS = frozenset({"predict", "predict_on_batch", "numpy"})
MAXIMA = frozenset({"tensorflow.reduce_max", "tensorflow.math.reduce_max", "keras.ops.max", "keras.backend.max",
                    "tensorflow.reduce_logsumexp", "tensorflow.math.reduce_logsumexp", "keras.ops.logsumexp",
                    "keras.backend.logsumexp"})
# Functions whose value never exceeds a small bound (|f| <= 1, or <= 0 for the log forms).
BOUNDED = frozenset({
    "tensorflow.tanh", "tensorflow.math.tanh", "keras.ops.tanh", "keras.backend.tanh", "tensorflow.math.sigmoid",
    "keras.ops.sigmoid", "keras.backend.sigmoid", "tensorflow.nn.softmax", "keras.ops.softmax",
    "tensorflow.sin", "tensorflow.math.sin", "tensorflow.cos", "tensorflow.math.cos", "keras.ops.sin", "keras.ops.cos",
    "tensorflow.nn.log_softmax", "tensorflow.math.log_sigmoid", "keras.ops.log_softmax", "keras.ops.log_sigmoid",
    "tensorflow.math.l2_normalize", "tensorflow.nn.l2_normalize", "keras.ops.normalize",
    "tensorflow.nn.relu6", "tensorflow.clip_by_value", "keras.ops.clip", "keras.backend.clip",
    "tensorflow.minimum", "tensorflow.math.minimum", "keras.ops.minimum", "keras.backend.minimum",
    "tensorflow.math.cos", "tensorflow.math.erf", "tensorflow.nn.softsign",
})
# Functions whose value is never negative.
NONNEGATIVE = SQRTS | SQUARES | NORMS | EXP | frozenset({
    "tensorflow.abs", "tensorflow.math.abs", "keras.ops.abs", "keras.backend.abs", "tensorflow.nn.relu",
    "keras.ops.relu", "keras.activations.relu", "tensorflow.nn.softplus", "tensorflow.math.softplus",
    "keras.ops.softplus", "tensorflow.math.squared_difference", "tensorflow.squared_difference",
    "tensorflow.nn.l2_loss", "tensorflow.math.reduce_euclidean_norm", "tensorflow.math.softplus",
})
# Reductions that keep the sign of what they reduce.
REDUCTIONS = SUMS | MEANS | SHAPE_CHANGES
# Where a value can come from without gradients flowing to it.
NOT_DIFFERENTIATED = frozenset({"tensorflow.stop_gradient", "keras.ops.stop_gradient", "keras.backend.stop_gradient"})
# Ops whose output carries no gradient back to their inputs: indices, comparisons, rounding, shapes.
NO_GRADIENT = NOT_DIFFERENTIATED | frozenset({
    "tensorflow.argmax", "tensorflow.math.argmax", "tensorflow.argmin", "tensorflow.math.argmin", "keras.ops.argmax",
    "keras.ops.argmin", "keras.backend.argmax", "keras.backend.argmin", "tensorflow.round", "tensorflow.math.round",
    "tensorflow.floor", "tensorflow.math.floor", "tensorflow.math.ceil", "tensorflow.ceil", "tensorflow.sign",
    "tensorflow.math.sign", "keras.ops.round", "keras.backend.round", "tensorflow.equal", "tensorflow.math.equal",
    "tensorflow.not_equal", "tensorflow.math.not_equal", "tensorflow.greater", "tensorflow.math.greater",
    "tensorflow.less", "tensorflow.math.less", "tensorflow.greater_equal", "tensorflow.math.greater_equal",
    "tensorflow.less_equal", "tensorflow.math.less_equal", "tensorflow.shape", "tensorflow.size", "tensorflow.rank",
    "keras.ops.shape", "keras.backend.shape", "tensorflow.one_hot", "keras.ops.one_hot", "keras.backend.one_hot",
    "tensorflow.zeros_like", "tensorflow.ones_like", "keras.ops.zeros_like", "keras.ops.ones_like",
    # random draws: no trainable value in them (noise to add, a random direction to normalise)
    "tensorflow.random.normal", "tensorflow.random.uniform", "tensorflow.random.truncated_normal",
    "tensorflow.random_normal", "tensorflow.random_uniform", "tensorflow.truncated_normal", "keras.random.normal",
    "tensorflow.random.stateless_normal", "tensorflow.random.stateless_uniform",
    "tensorflow.random.stateless_truncated_normal",
    "keras.random.uniform", "keras.backend.random_normal", "keras.backend.random_uniform"})
PIPELINE_METHODS = ("map", "filter", "flat_map", "interleave")
PIPELINE_CALLS = frozenset({"tensorflow.py_function", "tensorflow.numpy_function", "tensorflow.py_func"})
OVERFLOW = 80.0  # exp overflows float32 from about 88.7; a shown bound below this is safe
CONSTANT_TENSORS = frozenset({"tensorflow.constant", "tensorflow.convert_to_tensor", "tensorflow.cast",
                              "keras.ops.convert_to_tensor", "keras.ops.cast", "keras.backend.constant"})
# Words in the names of data no gradient reaches (`only_from`): labels, ground truth, masks, shapes.
DATA_WORDS = frozenset({"label", "labels", "mask", "masks", "shape", "gt", "truth", "true", "target", "targets"})
# Names of label tensors: 0/1 or +-1 targets, bounded by 1 in magnitude.
LABEL_NAMES = frozenset({"y_true", "labels", "label", "targets", "target", "y"})
VARIABLES = frozenset({"tensorflow.Variable", "tensorflow.get_variable", "keras.Variable"})
# Floors and clips: with a positive constant bound, the value stays away from zero.
POSITIVE_FLOORS = frozenset({"tensorflow.maximum", "tensorflow.math.maximum", "keras.ops.maximum",
                             "keras.backend.maximum", "tensorflow.clip_by_value", "keras.ops.clip",
                             "keras.backend.clip"})


def number(flow: Dataflow, expr) -> Number:
    """The literal a value is, also wrapped in `tf.constant(...)`/`tf.cast(...)`; else UNKNOWN."""
    value = flow.value_of(expr)
    for _ in range(3):
        if isinstance(value, cst.Call) and flow.ctx.call_name(value) in CONSTANT_TENSORS and value.args:
            value = flow.value_of(value.args[0].value)
        else:
            break
    found = constant(flow, value)
    return found if isinstance(found, (int, float)) and not isinstance(found, bool) else UNKNOWN


def exp_of(flow: Dataflow, expr: Optional[cst.BaseExpression], factors: bool = True,
           depth: int = 0) -> Optional[cst.Call]:
    """The `exp(...)` call `expr` holds, through every carrier (`carriers.trace`) and every shape
    change (`squeeze(exp(s), -1)` overflows where `exp(s)` does), or holds as a factor
    (`exp(x) * mask`) unless `factors` is False."""
    def classify(value: cst.BaseExpression) -> Optional[cst.Call]:
        if isinstance(value, cst.Call) and flow.ctx.call_name(value) in EXP and value.args:
            return value
        if factors and depth < 3 and isinstance(value, cst.BinaryOperation) \
                and isinstance(value.operator, cst.Multiply):
            return exp_of(flow, value.left, factors, depth + 1) or exp_of(flow, value.right, factors, depth + 1)
        return None

    return trace(flow, expr, classify, lambda value: _input_of(flow, value, SHAPE_CHANGES))


def summed(flow: Dataflow, expr: Optional[cst.BaseExpression]) -> Optional[cst.Call]:
    """The `reduce_sum(...)` call `expr` holds, through every carrier and through what keeps a
    sum a sum here: shape changes, indexing (`[:, None]`) and an added epsilon; or a sum per
    segment read back per element (`gather(unsorted_segment_sum(e, seg), seg)`: a graph's
    softmax over each node's edges). The summed values are the call's first argument, or a
    scatter's second (`scatter_nd(indices, e, shape)`)."""
    def classify(value: cst.BaseExpression) -> Optional[cst.Call]:
        values = summed_values(flow, value)
        if values is None or not isinstance(value, cst.Call):
            return None
        return value if value.args[0].value is values else value.with_changes(args=[cst.Arg(values)])

    def keeps_the_sum(value: cst.BaseExpression) -> List[cst.BaseExpression]:
        if isinstance(value, cst.Subscript):
            return [value.value]
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add) \
                and (constant(flow, value.right) is not UNKNOWN or says_small(value.right)):
            return [value.left]
        return _input_of(flow, value, SHAPE_CHANGES | GATHERS)
    return trace(flow, expr, classify, keeps_the_sum)


def _input_of(flow: Dataflow, value: cst.BaseExpression, calls: FrozenSet[str]) -> List[cst.BaseExpression]:
    """The first argument of `value` when it is a call of one of `calls` (a reshape, a gather:
    the hop a walk takes through what keeps the value it looks for)."""
    if isinstance(value, cst.Call) and flow.ctx.call_name(value) in calls and value.args:
        return [value.args[0].value]
    return []


def summed_values(flow: Dataflow, value: cst.BaseExpression,
                  sums: FrozenSet[str] = SUMS) -> Optional[cst.BaseExpression]:
    """What a sum adds up, when `value` is one: the first argument of a reduction in `sums`, or
    the values a sum per segment takes (`unsorted_segment_sum(e, seg)`, `scatter_nd(idx, e, shape)`)."""
    if not isinstance(value, cst.Call) or not value.args:
        return None
    name = flow.ctx.call_name(value) or ""
    position = 0 if name in sums else SEGMENT_SUMS.get(name, -1)
    return value.args[position].value if 0 <= position < len(value.args) else None


def bounded_above(flow: Dataflow, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether `expr` is shown to stay below OVERFLOW: a small constant, a bounded function
    (`tanh`, `sigmoid`, `clip_by_value`, a log-probability), minus something never negative
    (`-relu(x)`, `-d` of a distance), `x - reduce_max(x)`, or such a value scaled by a positive
    constant. A negated unknown (`-beta * energy`) is not bounded."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name):
        reaching = flow.reaching(expr)
        if len(reaching) > 1:  # the join of the branches: bounded on every path (`if normalize: x = x - max`)
            return all(_bound_on_path(flow, binding, depth + 1) for binding in reaching)
        if reaching and reaching[0].kind == "param":  # bounded by every call: `Policy(logits - max)`
            passed = flow.passed(reaching[0])
            return bool(passed) and all(bounded_above(flow, argument, depth + 1) for _, argument in passed)
    value = flow.value_of(expr)
    known = number(flow, value)
    if known is not UNKNOWN:
        return known < OVERFLOW
    if isinstance(value, cst.Call):
        name = flow.ctx.call_name(value)
        if name in BOUNDED:
            return True
        if name in SUBTRACTS:
            return _is_max(flow, arg(value, 1, "y"))
        return name in REDUCTIONS and bool(value.args) and bounded_above(flow, value.args[0].value, depth + 1)
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        return nonnegative(flow, value.expression, depth + 1)
    if not isinstance(value, cst.BinaryOperation):
        return False
    left, right, op = value.left, value.right, value.operator
    if isinstance(op, cst.Subtract):
        return _is_max(flow, right) or (bounded_above(flow, left, depth + 1) and nonnegative(flow, right, depth + 1))
    if isinstance(op, cst.Add):
        return bounded_above(flow, left, depth + 1) and bounded_above(flow, right, depth + 1)
    if isinstance(op, cst.Multiply) and _small(flow, left, depth + 1) and _small(flow, right, depth + 1):
        return True
    if isinstance(op, (cst.Multiply, cst.Divide)):
        return _scaled_bounded(flow, left, right, isinstance(op, cst.Multiply), depth + 1)
    return False


def _bound_on_path(flow: Dataflow, binding, depth: int) -> bool:
    """Is what one reaching binding assigns bounded above? A parameter's or a loop's value is not
    known to be; a branch folded off (`constants.dead`) takes no path."""
    if binding.kind != "assign" or binding.value is None:
        return False
    if dead(flow, binding.owner):
        return True
    value = flow.unpacked(binding) if binding.path else binding.value
    return value is not None and bounded_above(flow, value, depth)


def _small(flow: Dataflow, expr, depth: int) -> bool:
    """Bounded in magnitude by a small number: a clipped or squashed value, a label (0/1, +-1),
    a small constant, or one of these negated."""
    value = flow.value_of(expr)
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        value = flow.value_of(value.expression)
    known = number(flow, value)
    if known is not UNKNOWN:
        return abs(known) < 10
    if isinstance(value, cst.Name):
        return value.value in LABEL_NAMES
    return isinstance(value, cst.Call) and flow.ctx.call_name(value) in BOUNDED and depth <= MAX_DEPTH


def _scaled_bounded(flow: Dataflow, left, right, multiply: bool, depth: int) -> bool:
    """`c * b`, `b / c` with `b` bounded above by 0 (never positive) and `c` never negative;
    `-0.5 * square(d)`, `-d / (2 * s ** 2)`."""
    if nonpositive(flow, left, depth) and nonnegative(flow, right, depth):
        return True
    return multiply and nonpositive(flow, right, depth) and nonnegative(flow, left, depth)


def nonpositive(flow: Dataflow, expr, depth: int = 0) -> bool:
    value = flow.value_of(expr)
    known = number(flow, value)
    if known is not UNKNOWN:
        return known <= 0
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        return nonnegative(flow, value.expression, depth + 1)
    if isinstance(value, cst.Call):
        name = flow.ctx.call_name(value)
        if name in ("tensorflow.nn.log_softmax", "tensorflow.math.log_sigmoid", "keras.ops.log_softmax"):
            return True
        return name in REDUCTIONS and bool(value.args) and nonpositive(flow, value.args[0].value, depth + 1)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract):
        return _is_max(flow, value.right)
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Multiply, cst.Divide)) \
            and depth < MAX_DEPTH:
        return _scaled_bounded(flow, value.left, value.right, isinstance(value.operator, cst.Multiply), depth + 1)
    return False


def nonnegative(flow: Dataflow, expr, depth: int = 0) -> bool:
    """Never negative: a square, a norm, a square root, an `exp`, a sum of such, a positive
    constant, their products; the distance a contrastive or energy model takes the exp of."""
    if depth > MAX_DEPTH:
        return False
    value = flow.value_of(expr)
    known = number(flow, value)
    if known is not UNKNOWN:
        return known >= 0
    if isinstance(value, cst.Call):
        name = flow.ctx.call_name(value)
        if name in NONNEGATIVE:
            return True
        if name in LOGS:  # log(2.0): the log of a constant of at least 1
            inner = number(flow, arg(value, 0, "x"))
            return inner is not UNKNOWN and inner >= 1
        return name in REDUCTIONS and bool(value.args) and nonnegative(flow, value.args[0].value, depth + 1)
    if isinstance(value, cst.BinaryOperation):
        op = value.operator
        if isinstance(op, cst.Power):
            return constant(flow, value.right) == 2
        if isinstance(op, cst.Multiply) and _same(flow, value.left, value.right):
            return True
        if isinstance(op, (cst.Multiply, cst.Divide, cst.Add)):
            return nonnegative(flow, value.left, depth + 1) and nonnegative(flow, value.right, depth + 1)
    return False


def _is_max(flow: Dataflow, expr) -> bool:
    """`reduce_max(...)` or `reduce_logsumexp(...)` (under `stop_gradient`, reshaped, gathered),
    through every carrier (a helper returning it: `U.max(x, axis=-1)`): what makes `x - m` at
    most 0."""
    def classify(value: cst.BaseExpression) -> Optional[cst.Call]:
        return value if isinstance(value, cst.Call) and flow.ctx.call_name(value) in MAXIMA | SEGMENT_MAXIMA else None

    def through(value: cst.BaseExpression) -> List[cst.BaseExpression]:
        if isinstance(value, cst.Subscript):
            return [value.value]
        return _input_of(flow, value, NOT_DIFFERENTIATED | SHAPE_CHANGES | GATHERS)
    return trace(flow, expr, classify, through) is not None


def _same(flow: Dataflow, a, b) -> bool:
    return flow.ctx.text(a) == flow.ctx.text(b)


def difference(flow: Dataflow, expr: Optional[cst.BaseExpression]) -> Optional[cst.BaseExpression]:
    """The `a - b` (or `tf.subtract(a, b)`) `expr` holds, through every carrier, through products
    (`(a - b) * mask` is zero where `a - b` is) and slices (`d[:, 0]` of a difference `d`), else None."""
    def classify(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Subtract):
            return value
        if isinstance(value, cst.Call) and flow.ctx.call_name(value) in SUBTRACTS:
            return value
        return None

    def factors(value: cst.BaseExpression) -> List[cst.BaseExpression]:
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
            return [value.left, value.right]
        if isinstance(value, cst.Call) and flow.ctx.call_name(value) in MULTIPLIES:
            return [a for a in (arg(value, 0, "x"), arg(value, 1, "y")) if a is not None]
        return [value.value] if isinstance(value, cst.Subscript) else []
    return trace(flow, expr, classify, factors)


def operands(diff) -> tuple:
    if isinstance(diff, cst.BinaryOperation):
        return diff.left, diff.right
    return arg(diff, 0, "x"), arg(diff, 1, "y")


def centring(flow: Dataflow, diff) -> bool:
    """Is the difference `diff` a value less a mean (`x - reduce_mean(x)`, `inputs -
    reshape(mu)`): a statistic taken out, whose zero is where a value is its mean, not where two
    points coincide?"""
    def mean(value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        return value if isinstance(value, cst.Call) and flow.ctx.call_name(value) in MEANS else None
    subtracted = operands(diff)[1]
    return subtracted is not None and \
        trace(flow, subtracted, mean, lambda value: _input_of(flow, value, SHAPE_CHANGES)) is not None


def pairwise(flow: Dataflow, diff) -> Optional[cst.BaseExpression]:
    """`r` in `r[:, None] - r[None, :]`, `expand_dims(r, 1) - expand_dims(r, 0)`: one set against
    itself, so the diagonal is always zero; else None."""
    left, right = operands(diff)
    a, b = _broadcast_base(flow, left), _broadcast_base(flow, right)
    if a is not None and b is not None and _same(flow, a, b) and flow.ctx.text(left) != flow.ctx.text(right):
        return a
    return None


def _broadcast_base(flow: Dataflow, expr) -> Optional[cst.BaseExpression]:
    """`r` in `r[:, None]`, `r[None]`, `expand_dims(r, 1)`, `r[:, tf.newaxis]`."""
    value = flow.value_of(expr) if isinstance(expr, cst.Name) else expr
    if isinstance(value, cst.Subscript) and any(_new_axis(flow, e.slice) for e in value.slice):
        return value.value
    if isinstance(value, cst.Call) and flow.ctx.call_name(value) in ("tensorflow.expand_dims", "keras.ops.expand_dims",
                                                                       "keras.backend.expand_dims"):
        return arg(value, 0, "input")
    return None


def _new_axis(flow: Dataflow, element) -> bool:
    if not isinstance(element, cst.Index):
        return False
    value = element.value
    return (isinstance(value, cst.Name) and value.value == "None") or \
        (isinstance(value, cst.Attribute) and value.attr.value == "newaxis")


def in_pipeline(flow: Dataflow, node: cst.CSTNode, depth: int = 0) -> bool:
    """Whether `node` lies only in code an input pipeline runs (gradients never reach it): a
    function or lambda given to `Dataset.map`/`filter`/`flat_map`/`interleave`, `tf.py_function`
    or `tf.numpy_function`, inside it or in a function every call of which is there."""
    ctx = flow.ctx
    for outer in ctx.ancestors(node):
        if isinstance(outer, cst.Lambda) and _pipeline_argument(flow, outer):
            return True
        if isinstance(outer, cst.FunctionDef):
            return _pipeline_function(flow, outer, depth)
    return False


def _pipeline_function(flow: Dataflow, function: cst.FunctionDef, depth: int) -> bool:
    ctx = flow.ctx
    uses = [n for n in flow.names(function.name.value) if n is not function.name]
    if not uses or depth > 3:
        return False
    for use in uses:
        if _pipeline_argument(flow, use):
            continue
        parent = ctx.parent.get(use)  # called from a lambda or a function the pipeline runs
        if isinstance(parent, cst.Call) and parent.func is use and in_pipeline(flow, use, depth + 1):
            continue
        return False
    return True


def _pipeline_argument(flow: Dataflow, node: cst.CSTNode) -> bool:
    """`node` is an argument of `ds.map(...)` (any `.map`/`.filter`... on a non-module value) or
    of `tf.py_function`/`tf.numpy_function`."""
    ctx = flow.ctx
    parent = ctx.parent.get(node)
    call = ctx.parent.get(parent) if isinstance(parent, cst.Arg) else None
    if not isinstance(call, cst.Call):
        return False
    func = call.func
    if ctx.call_name(call) in PIPELINE_CALLS:
        return True
    return isinstance(func, cst.Attribute) and func.attr.value in PIPELINE_METHODS and ctx.qualify(func) is None


def weight(flow: Dataflow, expr) -> bool:
    """A variable (`tf.Variable`, `tf.get_variable`, `self.add_weight`), through every carrier (a
    helper's parameter its caller passes a variable to): a norm of it is weight normalisation, a
    constraint or an embedding normalised for a similarity report, not a distance between points."""
    def variable(value: cst.BaseExpression) -> Optional[bool]:
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        added = isinstance(func, cst.Attribute) and func.attr.value == "add_weight"
        return True if added or flow.ctx.call_name(value) in VARIABLES else None
    return trace(flow, expr, variable) is not None


def away_from_zero(flow: Dataflow, expr) -> bool:
    """Shown to stay above a positive constant: `maximum(x, 1e-12)`, `clip_by_value(x, 1e-6, 1)`,
    something never negative plus a positive constant, `exp(...)`."""
    value = flow.value_of(expr)
    if isinstance(value, cst.Call):
        name = flow.ctx.call_name(value)
        if name in EXP:
            return True
        if name in POSITIVE_FLOORS and len(value.args) >= 2:
            floor = number(flow, value.args[1].value)
            return floor is not UNKNOWN and floor > 0
        return False
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        for one, other in ((value.left, value.right), (value.right, value.left)):
            known = number(flow, one)
            if known is not UNKNOWN and known > 0 and nonnegative(flow, other):
                return True
    return False


def discarded(flow: Dataflow, node: cst.CSTNode) -> bool:
    """The value is computed and thrown away (a bare expression statement: a named metric, a
    summary): no loss is made of it, so no gradient flows through it."""
    for outer in flow.ctx.ancestors(node):
        if isinstance(outer, cst.Expr):
            return True
        if isinstance(outer, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


# Calls that store a value in a variable (`K.update(self.var, v)`, `self.var.assign(v)`).
STATE_UPDATES = frozenset({"update", "assign", "moving_average_update", "Variable"})


def only_stored(flow: Dataflow, node: cst.CSTNode, depth: int = 0) -> bool:
    """The value is only kept in a variable, through the names it is assigned to (a layer's
    moving statistic, `K.update(self.var, 0.9 * new + 0.1 * self.var)`): no gradient flows back
    through an update."""
    statement = next((a for a in flow.ctx.ancestors(node) if isinstance(a, cst.BaseSmallStatement)), None)
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 \
            or not isinstance(statement.targets[0].target, cst.Name) or depth > MAX_DEPTH:
        return False
    uses = flow.uses_after(statement.targets[0].target.value, statement)
    return bool(uses) and all(_stored(flow, use) or only_stored(flow, use, depth + 1) for use in uses)


def _stored(flow: Dataflow, use: cst.Name) -> bool:
    """Is `use` an argument of a call that stores it in a variable (`STATE_UPDATES`)?"""
    argument = flow.ctx.parent.get(use)
    call = flow.ctx.parent.get(argument) if isinstance(argument, cst.Arg) else None
    func = call.func if isinstance(call, cst.Call) else None
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    return name in STATE_UPDATES


def in_optimizer(flow: Dataflow, node: cst.CSTNode) -> bool:
    """Inside a class deriving from an optimizer (`tf.keras.optimizers.Optimizer`,
    `tf.train.Optimizer`, a base named `...Optimizer`): its values are updates made of gradients and weights, never
    differentiated (LARS's and LAMB's trust ratios, `tf.where(g_norm > 0, w_norm / g_norm, 1)`)."""
    for outer in flow.ctx.ancestors(node):
        if isinstance(outer, cst.ClassDef):
            for cls in [outer, *flow.bases(outer)]:
                for base in cls.bases:
                    name = flow.ctx.qualify(base.value) or flow.ctx.text(base.value)
                    if name.startswith(("keras.optimizers.", "tensorflow.train.")) or name.endswith("Optimizer"):
                        return True
    return False


# What a module that differentiates anything calls: a tape, the gradient functions, Keras training.
TRAINING_WORDS = ("GradientTape", "gradient", "gradients", "compute_gradients", "minimize", "fit", "fit_generator",
                  "train_on_batch", "compile", "apply_gradients")


def never_differentiated(flow: Dataflow, node: cst.CSTNode) -> bool:
    """Code at the top level of a module (or notebook) that differentiates nothing after it: no
    tape, no gradients, no Keras training below it (TF 1's `minimize` builds the gradient of
    the graph as it stands, so an evaluation op defined after it is not differentiated). A
    function's value may be differentiated by its callers elsewhere, so only statements outside
    every function and class count."""
    ctx = flow.ctx
    if any(isinstance(outer, (cst.FunctionDef, cst.Lambda, cst.ClassDef))
           or (isinstance(outer, cst.With) and _under_tape(flow, outer.items[0].item))
           for outer in ctx.ancestors(node)):
        return False
    return not any(isinstance(n, cst.Name) and n.value in TRAINING_WORDS and ctx.pre[n] > ctx.pre[node]
                   for n in ctx.nodes(cst.Name))


def feeds(flow: Dataflow, node: cst.CSTNode, sinks: List[cst.BaseExpression]) -> bool:
    """Is the value `node` makes part of one of `sinks` (what training differentiates, say)? Back
    from each sink through every carrier, and into the operands of the arithmetic and the
    arguments of the library calls that make it (`minimize(rmse + 0.01 * l2)`)."""
    def parts(value: cst.BaseExpression) -> List[cst.BaseExpression]:
        if isinstance(value, cst.BinaryOperation):
            return [value.left, value.right]
        if isinstance(value, cst.UnaryOperation):
            return [value.expression]
        if isinstance(value, cst.Call) and flow.ctx.call_name(value) is not None:
            return [a.value for a in value.args]
        return []
    return any(trace(flow, sink, lambda value: True if value is node else None, parts) is not None for sink in sinks)


def _under_tape(flow: Dataflow, item: cst.BaseExpression) -> bool:
    """A `with` item that opens a tape, spelled out or through an alias (`Tape = tf.GradientTape`)."""
    return "GradientTape" in flow.ctx.text(item) or (
        isinstance(item, cst.Call) and flow.ctx.call_name(item) == "tensorflow.GradientTape")


def stopped(flow: Dataflow, node: cst.CSTNode) -> bool:
    """Inside `tf.stop_gradient(...)`."""
    return any(isinstance(outer, cst.Call) and flow.ctx.call_name(outer) in NOT_DIFFERENTIATED
               for outer in flow.ctx.ancestors(node))


def only_from(flow: Dataflow, expr: cst.CSTNode, words, depth: int = 0) -> bool:
    """Whether every name and attribute `expr` is computed from (followed through their
    assignments, `self.x` too; the functions called are not counted) is one of `words`: a value
    made of labels, masks and shapes alone, which no gradient reaches."""
    leaves: List[cst.BaseExpression] = []
    for sub in _differentiable_parts(flow, expr):
        if isinstance(sub, cst.Call) and _has_weights(flow, sub):
            return False  # `Dense(d)(x)` of data `x` is made of the layer's weights too
        if not isinstance(sub, (cst.Name, cst.Attribute)) or _callee_part(flow, sub) \
                or (isinstance(sub, cst.Name) and sub.value in ("True", "False", "None")):
            continue  # a name inside `self.labels` is part of the attribute, which is the leaf
        value = flow.value_of(sub)
        if value is not sub and depth < MAX_DEPTH:
            if not only_from(flow, value, words, depth + 1):
                return False
        else:
            leaves.append(sub)
    return all(set(_leaf_word(leaf).lower().split("_")) & words or flow.ctx.qualify(leaf)
               or constant(flow, leaf) is not UNKNOWN or says_small(leaf) for leaf in leaves)


def _leaf_word(leaf: cst.BaseExpression) -> str:
    """`labels` of `labels` and of `self.labels`."""
    return leaf.attr.value if isinstance(leaf, cst.Attribute) else leaf.value  # type: ignore[attr-defined]


def _has_weights(flow: Dataflow, call: cst.Call) -> bool:
    """Does the call apply a layer (`Dense(d)(x)`, `head(x)` of `head = Dense(d)`, TF 1's
    `tf.layers.dense(x, d)`), whose output its trainable weights make?"""
    layer = flow.value_of(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else call.func
    made = flow.ctx.call_name(layer) if isinstance(layer, cst.Call) else None
    return (made or "").startswith("keras.layers.") or flow.ctx.call_name(call) in LAYER_FUNCTIONS


def _differentiable_parts(flow: Dataflow, expr: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes of `expr` a gradient can flow back into: not inside a call of a NO_GRADIENT op
    (`one_hot(argmax(p))`, `round(x)`, `shape(x)`), nor of what returns NumPy (Keras'
    `model.predict(x)`, not a method of this module; `t.numpy()`)."""
    return walk(expr, prune=lambda node: isinstance(node, cst.Call) and (
        flow.ctx.call_name(node) in NO_GRADIENT or _numpy_result(flow, node)))


def _numpy_result(flow: Dataflow, call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in NUMPY_RESULTS and flow.callee(call) is None


def _callee_part(flow: Dataflow, name: cst.BaseExpression) -> bool:
    """`name` is (the head of) what a call calls, part of an attribute (`tf` in `tf.shape`,
    `self.x` in `self.x.y`), or a keyword (`axis=`)."""
    parent = flow.ctx.parent.get(name)
    if isinstance(parent, cst.Attribute) or (isinstance(parent, cst.Arg) and parent.keyword is name):
        return True
    return isinstance(parent, cst.Call) and parent.func is name


def mentions(node: cst.CSTNode, words) -> bool:
    """Whether a name or attribute in `node` is one of `words` (lower case, as a part of `_`)."""
    for sub in walk(node):
        if isinstance(sub, cst.Name) and set(sub.value.lower().split("_")) & words:
            return True
    return False
