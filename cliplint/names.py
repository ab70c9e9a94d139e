"""Import aliases and canonical TensorFlow/Keras names.

`tf.keras.optimizers.Adam`, `keras.optimizers.Adam`, `tf_keras.optimizers.Adam` and
`from tensorflow.keras.optimizers import Adam as A` all canonicalise to
`keras.optimizers.Adam`; `tf.compat.v1.log` and `tf.log` to `tensorflow.math.log`.
Only the module's import table is consulted: cheap, and enough for library symbols
(local rebinding such as `s = tf.nn.softmax` is followed by `flow/local.py`).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import libcst as cst

from .findings import CLIP_OPTIONS  # noqa: F401 (the rules take it from here with the other names)
from .spellings import STAR_EXPORTS, STAR_QUALIFIED, canonical


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for a chain of Name/Attribute nodes, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_text(node: Optional[cst.BaseExpression]) -> str:
    return (dotted_name(node) if node is not None else None) or ""


class ImportTable:
    """Local name -> fully qualified name, from every import statement in a module."""

    def __init__(self) -> None:
        self.aliases: Dict[str, str] = {}
        self.stars: List[str] = []  # the TF/Keras modules star-imported, in order

    def add(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full, local = alias.evaluated_name, alias.evaluated_alias
                if local is not None:
                    self.aliases[local] = full
                else:
                    head = full.split(".")[0]
                    self.aliases[head] = head
        elif isinstance(node, cst.ImportFrom) and not node.relative:
            module = _module_text(node.module)
            if isinstance(node.names, cst.ImportStar):
                if canonical(module + ".x").startswith(STAR_QUALIFIED):
                    self.stars.append(module)
                for local, full in STAR_EXPORTS.get(module, {}).items():
                    self.aliases.setdefault(local, full)  # an import of the name before it stands
                return
            if not module:
                return
            for alias in node.names:
                self.aliases[alias.evaluated_alias or alias.evaluated_name] = f"{module}.{alias.evaluated_name}"

    def star_qualify(self, node: cst.BaseExpression) -> Optional[str]:
        """The canonical name a class name no import binds has when a star import of Keras'
        models, optimizers or layers may bind it (`from keras.layers import *`, then
        `Activation("sigmoid")`): `Model`/`Sequential` of a models module, an optimizer class of
        an optimizers module, else any capitalised name of a layers module. The caller checks
        the module binds no such name itself."""
        dotted = dotted_name(node)
        head = (dotted or "").split(".")[0]
        if not head[:1].isupper():
            return None
        for module in reversed(self.stars):  # the last star import binding the name wins
            full = canonical(f"{module}.{dotted}")
            kind = canonical(module + ".x")[:-2].rsplit(".", 1)[-1]
            if (kind == "models" and head in ("Model", "Sequential")) \
                    or (kind == "optimizers" and f"keras.optimizers.{head}" in OPTIMIZER_CLASSES):
                return full
        layers = next((m for m in reversed(self.stars) if canonical(m + ".x")[:-2].endswith(".layers")), None)
        return canonical(f"{layers}.{dotted}") if layers is not None else None

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        """Canonical qualified name of `node` when its head is an imported name."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return None
        return canonical(f"{full}.{rest}" if rest else full)



# Canonical symbol sets shared by several rules.
OPTIMIZER_CLASSES = frozenset(
    f"keras.optimizers.{name}"
    for name in (
        "Adam", "SGD", "RMSprop", "AdamW", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl",
        "Lion", "Adafactor", "Lamb", "Optimizer", "Muon",
    )
) | frozenset(
    f"keras.optimizers.legacy.{name}"
    for name in ("Adam", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl", "Optimizer")
)
OPTIMIZER_FACTORIES = frozenset({"keras.optimizers.get", "keras.optimizers.deserialize"})
# Where probabilities come from (the probability model in flow/probabilities.py).
SOFTMAX = frozenset({
    "tensorflow.nn.softmax", "keras.activations.softmax", "keras.ops.softmax", "keras.backend.softmax"})
SIGMOID = frozenset({
    "tensorflow.math.sigmoid", "keras.activations.sigmoid", "keras.ops.sigmoid", "keras.backend.sigmoid"})
# Words without which a module makes no probability (a library softmax/sigmoid, an activation
# string, or one written out with exp): the gate of the rules that need one.
PROBABILITY_WORDS = ("softmax", "sigmoid", "Softmax", "exp")
# Keras' pretrained models: with their classifier (`include_top=True`, the default) they end in
# `classifier_activation`, softmax by default.
APPLICATIONS = frozenset({"keras.applications"})
# Changes of a tensor's shape or dtype, and repetitions of it (`tile`), that leave the values it holds
# as they are (any model's value).
SHAPE_CHANGES = frozenset({"tensorflow.expand_dims", "tensorflow.squeeze", "tensorflow.reshape", "tensorflow.cast",
                           "tensorflow.identity", "keras.ops.expand_dims",
                           "keras.ops.squeeze", "keras.ops.reshape", "keras.ops.cast", "tensorflow.tile",
                           "tensorflow.broadcast_to", "keras.ops.tile", "keras.ops.broadcast_to",
                           "keras.backend.expand_dims", "keras.backend.squeeze", "keras.backend.reshape",
                           "keras.backend.tile", "keras.backend.cast", "keras.backend.repeat_elements",
                           "keras.backend.flatten", "keras.backend.batch_flatten", "keras.ops.ravel"})
# exp and the sums a softmax written out divides by; what turns an activation's name into it.
EXP = frozenset({"tensorflow.exp", "tensorflow.math.exp", "keras.ops.exp", "keras.backend.exp"})
SUMS = frozenset({"tensorflow.reduce_sum", "tensorflow.math.reduce_sum", "keras.ops.sum", "keras.backend.sum"})
# Sums and maxima per segment (a graph's edges grouped by node), read back per element by `gather`.
# (the position of the summed values)
SEGMENT_SUMS = {"tensorflow.math.unsorted_segment_sum": 0, "tensorflow.unsorted_segment_sum": 0,
                "tensorflow.math.segment_sum": 0, "tensorflow.segment_sum": 0, "keras.ops.segment_sum": 0,
                "tensorflow.scatter_nd": 1, "tensorflow.tensor_scatter_nd_add": 2}
SEGMENT_MAXIMA = frozenset({"tensorflow.math.unsorted_segment_max", "tensorflow.unsorted_segment_max",
                            "tensorflow.math.segment_max", "tensorflow.segment_max", "tensorflow.tensor_scatter_nd_max",
                            "keras.ops.segment_max"})
GATHERS = frozenset({"tensorflow.gather", "keras.ops.take", "keras.backend.gather"})
MAXIMUMS = frozenset({"tensorflow.maximum", "tensorflow.math.maximum", "keras.ops.maximum", "keras.backend.maximum"})
# Sonnet 1's module base: calling an instance of a subclass runs its `_build`.
SONNET_MODULES = frozenset({"sonnet.AbstractModule", "sonnet.python.modules.base.AbstractModule"})
# Clamps: a tensor floored or capped by a constant (an epsilon's work, done with a bound).
CLAMPS = MAXIMUMS | frozenset({"tensorflow.clip_by_value", "keras.backend.clip", "keras.ops.clip", "tensorflow.minimum",
                               "tensorflow.math.minimum", "keras.ops.minimum", "keras.backend.minimum"})
ABSOLUTES = frozenset({"tensorflow.abs", "tensorflow.math.abs", "keras.ops.abs", "keras.ops.absolute",
                       "keras.backend.abs"})
ZEROS_LIKE = frozenset({"tensorflow.zeros_like", "keras.ops.zeros_like", "keras.backend.zeros_like"})
MEANS = frozenset({"tensorflow.reduce_mean", "tensorflow.math.reduce_mean", "keras.ops.mean", "keras.backend.mean"})
# A standard deviation as a library computes it: the square root of a variance, no epsilon inside.
STDS = frozenset({"tensorflow.math.reduce_std", "keras.backend.std", "keras.ops.std",
                  "tensorflow.experimental.numpy.std"})
ACTIVATION_GETTERS = frozenset({"keras.activations.get", "keras.activations.deserialize"})
# Functions that keep "this is (a piece of) a probability" true of their first argument.
# The arithmetic functions (read as their operators by the models), powers and matrix products.
MULTIPLIES = frozenset({"tensorflow.multiply", "tensorflow.math.multiply", "keras.ops.multiply"})
ADDS = frozenset({"tensorflow.add", "tensorflow.math.add", "keras.ops.add"})
SUBTRACTS = frozenset({"tensorflow.subtract", "tensorflow.math.subtract", "keras.ops.subtract"})
POWERS = frozenset({"tensorflow.pow", "tensorflow.math.pow", "keras.ops.power", "keras.backend.pow"})
MATMULS = frozenset({"tensorflow.linalg.matmul", "tensorflow.matmul", "keras.ops.matmul", "tensorflow.tensordot",
                     "keras.ops.tensordot", "tensorflow.compat.v1.nn.xw_plus_b", "tensorflow.nn.xw_plus_b",
                     "tensorflow.einsum", "tensorflow.linalg.einsum", "keras.ops.einsum", "keras.backend.dot",
                     "keras.backend.batch_dot", "keras.ops.dot"})
# Layers whose output is linear unless an activation is given (keyword `activation`; Dense's second argument).
LINEAR_LAYERS = frozenset({"keras.layers.Dense", "keras.layers.Conv1D", "keras.layers.Conv2D", "keras.layers.Conv3D",
                           "keras.layers.EinsumDense"})
# Layers that only move, select or average the values they are given: logits in, logits out.
MOVING_LAYERS = frozenset({f"keras.layers.{name}" for name in (
    "Flatten", "Reshape", "Permute", "Dropout", "SpatialDropout1D", "SpatialDropout2D", "Cropping1D", "Cropping2D",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D", "AveragePooling1D",
    "AveragePooling2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D", "MaxPooling1D", "MaxPooling2D")})
# The arithmetic functions, read as their operators (`tf.multiply(p, y)` as `p * y`).
DIVIDES = frozenset({"tensorflow.divide", "tensorflow.math.divide", "tensorflow.truediv", "tensorflow.math.truediv",
                     "tensorflow.div", "keras.ops.divide", "keras.ops.true_divide"})
ARITHMETIC: Dict[str, Callable[[], cst.BaseBinaryOp]] = {
    **dict.fromkeys(MULTIPLIES, cst.Multiply), **dict.fromkeys(ADDS, cst.Add), **dict.fromkeys(SUBTRACTS, cst.Subtract),
    **dict.fromkeys(DIVIDES, cst.Divide)}
# Element-wise choices between two tensors.
WHERES = frozenset({"tensorflow.where", "tensorflow.where_v2", "tensorflow.experimental.numpy.where",
                    "keras.ops.where"})
# Pieces and rearrangements of a tensor: each element is one of the tensor's values.
LAYOUTS = SHAPE_CHANGES | frozenset({
    "tensorflow.transpose", "keras.ops.transpose", "tensorflow.gather", "tensorflow.gather_nd", "tensorflow.slice",
    "tensorflow.strided_slice", "keras.ops.slice", "tensorflow.unstack", "tensorflow.split", "keras.ops.split",
    "tensorflow.boolean_mask", "keras.ops.take", "tensorflow.stop_gradient",
    "tensorflow.experimental.numpy.take_along_axis", "keras.ops.take_along_axis"})
KEEPS_PROBABILITY = LAYOUTS | frozenset({
    "tensorflow.clip_by_value", "keras.backend.clip", "keras.ops.clip", "tensorflow.maximum",
    "tensorflow.math.maximum", "keras.ops.maximum", "keras.backend.maximum", "tensorflow.gather",
    "tensorflow.gather_nd", "tensorflow.reduce_sum",
    "tensorflow.math.reduce_sum", "keras.ops.sum", "keras.backend.sum", "tensorflow.reduce_max",
    "tensorflow.math.reduce_max", "tensorflow.experimental.numpy.take_along_axis", "keras.ops.take_along_axis",
    "tensorflow.slice", "tensorflow.stop_gradient",
    # layout changes, clamps from above, means over an ensemble or a batch, pieces
    "tensorflow.transpose", "tensorflow.tile", "keras.backend.cast", "keras.ops.transpose",
    "keras.backend.reshape", "keras.backend.squeeze",
    "tensorflow.minimum", "tensorflow.math.minimum", "keras.ops.minimum", "keras.backend.minimum",
    "tensorflow.reduce_mean", "tensorflow.math.reduce_mean", "keras.ops.mean", "keras.backend.mean",
    "tensorflow.boolean_mask", "keras.ops.take", "tensorflow.unstack", "tensorflow.split", "keras.ops.split",
    # elements picked out by position: a diagonal (the positives of in-batch negatives), a slice
    "tensorflow.linalg.diag_part", "tensorflow.diag_part", "tensorflow.matrix_diag_part", "keras.ops.diagonal",
    "tensorflow.linalg.tensor_diag_part", "tensorflow.slice", "tensorflow.strided_slice", "keras.ops.slice",
})
# Functions that make one tensor of a list of them: probabilities when an element is one.
STACKS = frozenset({"tensorflow.stack", "tensorflow.convert_to_tensor", "tensorflow.concat", "keras.ops.stack",
                    "tensorflow.add_n", "tensorflow.math.add_n", "keras.ops.concatenate", "keras.layers.average"})
# Keras layers that merge a list of tensors: probabilities when an input is one.
MERGING_LAYERS = frozenset({"keras.layers.Concatenate", "keras.layers.Average", "keras.layers.Maximum"})
# tf.while_loop under its spellings: its results are what the body returns.
WHILE_LOOPS = frozenset({"tensorflow.while_loop", "tensorflow.compat.v1.while_loop",
                         "tensorflow.python.ops.control_flow_ops.while_loop"})
# Calls whose result, called, runs the function they are given first (`partial(f, ...)(x)`, a
# Keras `Lambda(f)(x)` layer).
RUNS_ITS_FUNCTION = frozenset({"functools.partial", "keras.layers.Lambda"})
# Functions that apply a function to each element of a structure: (function, structure) first.
MAPPERS = frozenset({"tensorflow.nest.map_structure", "tensorflow.map_fn", "tensorflow.vectorized_map"})
# Layer functions of TF 1 and contrib/slim: (position, keyword) of their activation argument.
LAYER_FUNCTIONS = {"tensorflow.layers.dense": (2, "activation"),
                   "tensorflow.contrib.layers.fully_connected": (2, "activation_fn")}
# ... and of their number of units.
LAYER_FUNCTION_UNITS = {"tensorflow.layers.dense": (1, "units"),
                        "tensorflow.contrib.layers.fully_connected": (1, "num_outputs")}
SEQUENTIAL = frozenset({"keras.Sequential", "keras.models.Sequential"})
FUNCTIONAL = frozenset({"keras.Model", "keras.models.Model"})
# Calls other than `model.compile(loss=...)` that give a Keras model the loss it is trained with,
# and exist to train it (TFF's federated process trains what they wrap): -> (model, loss) keywords,
# at positions 0 and 1.
MODEL_LOSS_CALLS = {
    "tensorflow_federated.learning.from_keras_model": ("keras_model", "loss"),
    "tensorflow_federated.learning.models.from_keras_model": ("keras_model", "loss"),
}
# Calls that return a model computing what their model argument computes (its outputs' activations
# kept): a copy, and the wrappers of the model optimisation toolkit. -> the argument's keyword.
_TFMOT = "tensorflow_model_optimization"
MODEL_WRAPPERS = {
    "keras.models.clone_model": "model",
    f"{_TFMOT}.sparsity.keras.prune_low_magnitude": "to_prune",
    f"{_TFMOT}.sparsity.keras.strip_pruning": "model",
    f"{_TFMOT}.quantization.keras.quantize_model": "to_quantize",
    f"{_TFMOT}.quantization.keras.quantize_annotate_model": "to_annotate",
    f"{_TFMOT}.quantization.keras.quantize_apply": "model",
    f"{_TFMOT}.clustering.keras.cluster_weights": "to_cluster",
    f"{_TFMOT}.clustering.keras.strip_clustering": "model",
}

# The ops that take logits by definition (their `logits` argument, second when positional): the
# `tf.nn` ops and TF 1's `tf.compat.v1.losses` wrappers of them.
LOGITS_OPS = {"tensorflow.nn.softmax_cross_entropy_with_logits": "softmax",
              "tensorflow.nn.softmax_cross_entropy_with_logits_v2": "softmax",
              "tensorflow.nn.sparse_softmax_cross_entropy_with_logits": "softmax",
              "tensorflow.nn.sigmoid_cross_entropy_with_logits": "sigmoid",
              "tensorflow.nn.weighted_cross_entropy_with_logits": "sigmoid",
              "tensorflow.losses.softmax_cross_entropy": "softmax",
              "tensorflow.losses.sparse_softmax_cross_entropy": "softmax",
              "tensorflow.losses.sigmoid_cross_entropy": "sigmoid"}
# The sequence losses of TF 1's contrib and of TF Addons: a weighted mean of the sparse softmax
# op over the time steps, their `logits` first.
SEQUENCE_LOSSES = ("tensorflow.contrib.seq2seq.sequence_loss", "tensorflow_addons.seq2seq.sequence_loss",
                   "tensorflow.contrib.legacy_seq2seq.sequence_loss",
                   "tensorflow.contrib.legacy_seq2seq.sequence_loss_by_example")
LOGITS_OPS.update(dict.fromkeys(SEQUENCE_LOSSES, "softmax"))


def logits_position(op: str) -> int:
    """Where a `LOGITS_OPS` op takes its logits when they are passed by position."""
    return 0 if op in SEQUENCE_LOSSES else 1
