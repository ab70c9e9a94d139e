"""Layer 1's reviewed data: everything a `--verify` snippet may name. Nothing else runs.

Each entry is one fully qualified symbol that computes on numbers and nothing else: no files,
processes, network, native code, (de)serialization, string formatting, callbacks or Python
functions taken as arguments. A snippet's name or attribute chain must resolve, through the
linted file's imports, to exactly one of these (spellings of Keras are folded: `tf.keras.X`,
`tf_keras.X` and `keras.X` are all `keras.X`, the flavour the worker runs). TensorFlow's
`compat.v1` is *not* folded: a TF 1 name is allowed only when it is listed here by its own full
name, one line each (`tensorflow.compat.v1.log`), so nothing becomes reachable through it by
accident. Review every addition against the rule above; `tests/test_redteam.py` is the check.

Besides the hand-reviewed lists below, `data/pure_tensorflow.txt` lists the pure math and array
functions derived by tracing (`derive.py`: every op of their graph stateless and without files,
strings or handles, by TensorFlow's op registry), under each spelling that names the same object.
`tensorflow.compat.v2.X` is TF 2's own `tensorflow.X` and is folded onto it.
"""
from __future__ import annotations

import os
import unicodedata

from ..findings import CLIP_OPTIONS
from ..spellings import KERAS_MODULES

# Pure-computation TensorFlow symbols the probes need (math, nn, clip, reduce, tensors, dtypes).
_TENSORFLOW = """
    abs add argmax cast clip_by_global_norm clip_by_norm clip_by_value concat constant
    convert_to_tensor divide exp expand_dims fill gather GradientTape identity IndexedSlices matmul maximum minimum
    multiply negative one_hot ones ones_like reduce_logsumexp reduce_max reduce_mean reduce_min
    reduce_sum reshape sigmoid sqrt square squeeze stack stop_gradient subtract tanh Variable where
    zeros zeros_like float16 float32 float64 bfloat16 int32 int64 bool
    add_check_numerics_ops
    debugging.check_numerics
    linalg.global_norm linalg.matmul linalg.norm norm
    math.abs math.add math.argmax math.divide math.exp math.is_finite math.log math.log1p
    math.log_sigmoid math.maximum math.minimum math.multiply math.reduce_logsumexp math.reduce_mean
    math.reduce_sum math.sigmoid math.softmax math.sqrt math.square math.subtract math.tanh
    nn.l2_loss nn.log_softmax nn.relu nn.sigmoid nn.sigmoid_cross_entropy_with_logits nn.softmax
    nn.softmax_cross_entropy_with_logits nn.sparse_softmax_cross_entropy_with_logits
    math.rsqrt math.pow pow math.reciprocal math.acos math.asin math.xlogy math.divide_no_nan
    math.softplus nn.softplus math.l2_normalize nn.l2_normalize math.truediv truediv math.reduce_max
    math.squared_difference math.reduce_euclidean_norm nn.relu6 math.softsign math.reduce_std
    math.reduce_variance nn.moments
    equal not_equal greater greater_equal less less_equal math.equal math.not_equal math.greater
    math.greater_equal math.less math.less_equal
"""
# TF 1 names, each by its own full name: the ones a file importing `tensorflow.compat.v1 as tf`
# uses, and the targets of the migration shim (`tf.log` gone from TF 2 runs as `tf.compat.v1.log`).
# Only computation: no `gfile`, `py_func`, `Session`, `train.Saver`, summaries or queues.
_TENSORFLOW_COMPAT_V1 = """
    abs add argmax cast clip_by_global_norm clip_by_norm clip_by_value concat constant convert_to_tensor
    IndexedSlices div divide exp expand_dims fill gather identity log log1p log_sigmoid matmul maximum minimum multiply
    negative one_hot ones ones_like reduce_logsumexp reduce_max reduce_mean reduce_min reduce_sum reshape
    sigmoid sqrt square squared_difference squeeze stack stop_gradient subtract tanh to_float where zeros
    zeros_like float16 float32 float64 int32 int64 bool
    add_check_numerics_ops batch_gather global_norm
    math.exp math.log math.log1p math.log_sigmoid math.sigmoid math.softmax norm rsqrt pow reciprocal
    nn.l2_loss nn.log_softmax nn.relu nn.sigmoid nn.sigmoid_cross_entropy_with_logits nn.softmax
    nn.softmax_cross_entropy_with_logits nn.softmax_cross_entropy_with_logits_v2
    nn.sparse_softmax_cross_entropy_with_logits
    train.AdagradOptimizer train.AdamOptimizer train.GradientDescentOptimizer train.MomentumOptimizer
    train.RMSPropOptimizer
"""
_KERAS = """
    Input Sequential
    activations.linear activations.relu activations.sigmoid activations.softmax
    backend.abs backend.binary_crossentropy backend.categorical_crossentropy backend.clip backend.epsilon
    backend.exp backend.log backend.maximum backend.mean backend.minimum backend.sigmoid backend.softmax
    backend.sqrt backend.square backend.std backend.stop_gradient backend.sum
    layers.Activation layers.Dense layers.Softmax
    losses.BinaryCrossentropy losses.CategoricalCrossentropy losses.MeanSquaredError
    losses.SparseCategoricalCrossentropy losses.binary_crossentropy losses.categorical_crossentropy
    losses.sparse_categorical_crossentropy
    ops.abs ops.add ops.binary_crossentropy ops.cast ops.categorical_crossentropy ops.clip ops.convert_to_tensor
    ops.divide ops.exp ops.log ops.log_sigmoid ops.log_softmax ops.matmul ops.maximum ops.mean ops.minimum
    ops.multiply ops.sigmoid ops.softmax ops.sqrt ops.square ops.std ops.stop_gradient ops.subtract ops.sum
    ops.where ops.log1p ops.softplus ops.logsumexp ops.norm ops.max ops.reciprocal ops.power
    backend.max backend.pow backend.cast backend.floatx backend.squeeze backend.expand_dims backend.reshape
    backend.dot backend.tanh
    optimizers.Adadelta optimizers.Adafactor optimizers.Adagrad optimizers.Adam optimizers.AdamW
    optimizers.Adamax optimizers.Ftrl optimizers.Lamb optimizers.Lion optimizers.Muon optimizers.Nadam
    optimizers.RMSprop optimizers.SGD
    optimizers.legacy.Adadelta optimizers.legacy.Adagrad optimizers.legacy.Adam optimizers.legacy.Adamax
    optimizers.legacy.Ftrl optimizers.legacy.Nadam optimizers.legacy.RMSprop optimizers.legacy.SGD
"""
_NUMPY = """
    abs array asarray clip e exp float16 float32 float64 inf log log1p max maximum mean min minimum
    nan ones pi sqrt square sum zeros
"""


# The migration shim's stand-ins: a TF 1 / Keras 2 name that builds a graph input or a layer runs as
# a function of the worker's own (`cliplint.shims.X`, in `probes.SHIMS`) that only computes:
# a placeholder becomes a concrete tensor, `tf.layers.dense` a Keras `Dense` with the same activation.
SHIMS = {
    "tensorflow.placeholder": "cliplint.shims.placeholder",
    "tensorflow.compat.v1.placeholder": "cliplint.shims.placeholder",
    "keras.backend.placeholder": "cliplint.shims.placeholder",
    "tensorflow.layers.dense": "cliplint.shims.dense",
    "tensorflow.compat.v1.layers.dense": "cliplint.shims.dense",
}
SHIM_NOTES = {
    "cliplint.shims.placeholder": "a concrete tensor of 0.5s with its dtype and shape (None dimensions as 2)",
    "cliplint.shims.dense": "a Keras Dense layer with the same units and activation",
}


def _entries(root: str, names: str) -> frozenset:
    return frozenset(f"{root}.{name}" for name in names.split())


DERIVED_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                            "pure_tensorflow.txt")


def derived() -> frozenset:
    """The pure functions `derive.py` admitted (one fully qualified name a line, `#` comments)."""
    with open(DERIVED_FILE, encoding="utf-8") as listed:
        return frozenset(line.strip() for line in listed if line.strip() and not line.startswith("#"))


SYMBOLS = derived() | (_entries("tensorflow", _TENSORFLOW) | _entries("tensorflow.compat.v1", _TENSORFLOW_COMPAT_V1)
           | _entries("keras", _KERAS) | _entries("numpy", _NUMPY) | frozenset(SHIMS.values()))

# What standalone Keras 3 still has in `keras.backend` (of the allowlisted backend functions).
KERAS3_BACKEND = frozenset({"epsilon"})

# Keyword arguments of Keras 2 optimizers that Keras 3 (and tf-keras's new optimizers) refuse:
# renamed (None: dropped; `decay` is a learning-rate decay by step count, which is 1 at the first step).
LEGACY_OPTIMIZER_KEYWORDS = {"lr": "learning_rate", "decay": None}

# Attributes a snippet may read on values (never on modules): variable lists, an optimizer's
# clip options, a model's optimizer, list.append, the shape of a tensor, and a tensor's value as a
# NumPy array (`g.numpy().flatten()`, how gradients are handed to SciPy's optimizers). Any other attribute
# of an unknown name (`args.lr`, `self.out`) is replaced whole by a stand-in; of any other value
# it makes the probe `skipped`.
ATTRIBUTES = frozenset("""
    trainable_variables trainable_weights variables weights non_trainable_variables non_trainable_weights
    optimizer model clipnorm clipvalue global_clipnorm learning_rate append apply_gradients apply
    shape dtype name values indices dense_shape numpy flatten
""".split())
# Attributes a snippet may assign (the CL001/CL002 changes under test).
SETTABLE = frozenset({*CLIP_OPTIONS, "learning_rate", "optimizer"})

# Builtins that only compute (no attribute access by name, no I/O, no code, no introspection).
BUILTINS = frozenset("""
    abs all any bool dict enumerate filter float int isinstance len list map max min range reversed
    round set sorted str sum tuple zip
""".split())

# String literals a snippet may pass: losses, activations, optimizers by name, reductions,
# initializers, dtypes, paddings, norm orders and clip option names. Any other string makes the probe `skipped`.
STRINGS = frozenset("""
    adam sgd rmsprop adamw adagrad adadelta adamax nadam ftrl
    mse mae mean_squared_error mean_absolute_error binary_crossentropy categorical_crossentropy
    sparse_categorical_crossentropy softmax sigmoid relu linear tanh elu selu softplus softsign swish
    gelu exponential same valid fro euclidean
    sum mean none auto sum_over_batch_size ones zeros glorot_uniform he_normal
    float16 float32 float64 bfloat16 int32 int64 channels_last channels_first
    clipnorm clipvalue global_clipnorm learning_rate lr momentum beta_1 beta_2 epsilon weight_decay
    from_logits axis reduction
""".split())

# Keyword arguments that never matter to a probe: dropped whatever their value. Metrics are only
# computed and reported, `verbose` only prints, names and summaries only label.
# `global_step=` (TF 1's apply_gradients) only counts steps.
DROPPED_KEYWORDS = frozenset({"name", "metrics", "weighted_metrics", "verbose", "summary", "summaries",
                              "display_name", "log_dir", "global_step"})
# What `float(...)` may parse: the special values real code writes as strings.
FLOAT_STRINGS = frozenset({"inf", "+inf", "-inf", "infinity", "-infinity", "nan"})

# Spellings of the Keras namespace, folded onto `keras.` (the flavour the worker runs).
_KERAS_SPELLINGS = ("tensorflow.keras.", "tf_keras.", "keras.api._v2.keras.", "keras._tf_keras.keras.",
                    "keras.api.")  # last: Keras 3.0-3.5's `keras.api.layers` is `keras.layers`
_TF2 = "tensorflow.compat.v2."  # the very module `tensorflow` is in TF 2


def identifier(text: str) -> str:
    """How Python itself reads an identifier (NFKC: `ｅｘｅｃ` is `exec`)."""
    return unicodedata.normalize("NFKC", text)


def entry(qualified: str) -> str:
    """The allowlist key of a fully qualified name (Keras spellings folded, nothing else)."""
    qualified = identifier(qualified)
    if qualified in ("tensorflow.keras", "tf_keras"):
        return "keras"
    if qualified.startswith(_TF2):
        qualified = "tensorflow." + qualified[len(_TF2):]
    for spelling in _KERAS_SPELLINGS:
        if qualified.startswith(spelling):
            return "keras." + qualified[len(spelling):]
    for module in KERAS_MODULES:  # TF 2's `tf.losses.X` is `keras.losses.X` itself, when Keras has an X
        if qualified.startswith(module) and (keras := "keras." + qualified[len("tensorflow."):]) in SYMBOLS:
            return keras
    return qualified


def allowed(qualified: str) -> bool:
    return entry(qualified) in SYMBOLS


def migrated(qualified: str):
    """The allowlisted name a TF 1 / Keras 2 name runs as (`tensorflow.log` ->
    `tensorflow.compat.v1.log`, `tensorflow.placeholder` -> a shim), or None. Only names already on
    the allowlist are targets: the shim opens nothing the allowlist does not list by name."""
    name = entry(qualified)
    if name in SHIMS:
        return SHIMS[name]
    if name.startswith("tensorflow.") and not name.startswith("tensorflow.compat."):
        v1 = "tensorflow.compat.v1." + name[len("tensorflow."):]
        return v1 if v1 in SYMBOLS else None
    return None


def legacy_backend(qualified: str) -> bool:
    """`keras.backend.log` written against standalone Keras: Keras 3's `keras.backend` no longer has
    it; the worker runs the legacy backend's function (`tf.keras.backend` / `tf_keras.backend`)."""
    name = identifier(qualified)
    return name.startswith("keras.backend.") and name[len("keras.backend."):] not in KERAS3_BACKEND
