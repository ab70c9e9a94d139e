"""Canonical spellings of TensorFlow/Keras names, without libcst: the ast gate (`facts.py`)
qualifies names with the same table as the analysis (`names.py`).
"""
from __future__ import annotations

from functools import lru_cache

# Longest prefix first: each maps a spelling of a namespace to its canonical one.
_PREFIXES = (
    ("tensorflow.compat.v1.keras.", "keras."),
    ("tensorflow.compat.v2.keras.", "keras."),
    ("tensorflow.contrib.keras.api.keras.", "keras."),  # TF 1.2-1.3's Keras
    ("tensorflow.contrib.keras.", "keras."),
    ("tensorflow.python.keras.", "keras."),
    ("tensorflow.keras.", "keras."),
    ("keras._tf_keras.keras.", "keras."),
    ("keras.api._v2.keras.", "keras."),
    ("keras.api.", "keras."),  # Keras 3.0-3.5's public modules (`from keras.api.layers import Dense`)
    ("tf_keras.", "keras."),
    ("tensorflow.compat.v1.", "tensorflow."),
    ("tensorflow.compat.v2.", "tensorflow."),
    ("keras.optimizers.experimental.", "keras.optimizers."),
    ("tensorflow.contrib.slim.", "tensorflow.contrib.layers."),  # slim re-exports contrib's layers
    ("tf_slim.layers.", "tensorflow.contrib.layers."),
    ("tf_slim.", "tensorflow.contrib.layers."),
    ("bert4keras.layers.", "keras.layers."),  # bert4keras re-exports Keras' layers (`from keras.layers import *`)
)

# Symbols TensorFlow exports under several names.
_SYNONYMS = {
    "tensorflow.log": "tensorflow.math.log",
    "tensorflow.math.softmax": "tensorflow.nn.softmax",
    "tensorflow.sigmoid": "tensorflow.math.sigmoid",
    "tensorflow.nn.sigmoid": "tensorflow.math.sigmoid",
    "tensorflow.norm": "tensorflow.linalg.norm",
    "tensorflow.global_norm": "tensorflow.linalg.global_norm",
    "tensorflow.multinomial": "tensorflow.random.categorical",
    "tensorflow.random.multinomial": "tensorflow.random.categorical",
    "tensorflow.clip_by_average_norm": "tensorflow.clip_by_norm",
    "keras.backend.gradients": "tensorflow.gradients",  # tf-keras: `tf.compat.v1.gradients(loss, variables)`
    "keras.ops.nn.softmax": "keras.ops.softmax",
    "keras.ops.nn.sigmoid": "keras.ops.sigmoid",
    "keras.ops.numpy.log": "keras.ops.log",
}


# TensorFlow 2's `tf.optimizers` and `tf.losses` are Keras's modules (measured, TF 2.21:
# `tf.losses.SparseCategoricalCrossentropy is keras.losses.SparseCategoricalCrossentropy`). TF 1's
# `tf.losses` (also `tf.compat.v1.losses`) is its own, with these names: they stay TensorFlow's.
KERAS_MODULES = ("tensorflow.optimizers.", "tensorflow.losses.")
_TF1_LOSSES = frozenset({
    "absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance", "get_losses",
    "get_regularization_loss", "get_regularization_losses", "get_total_loss", "hinge_loss", "huber_loss",
    "log_loss", "mean_pairwise_squared_error", "mean_squared_error", "sigmoid_cross_entropy",
    "softmax_cross_entropy", "sparse_softmax_cross_entropy", "Reduction"})


def _keras_module(dotted: str) -> str:
    """`tensorflow.losses.BinaryCrossentropy` -> `keras.losses.BinaryCrossentropy` (TF 2's alias);
    TF 1's `tensorflow.losses.softmax_cross_entropy` is left as it is."""
    for module in KERAS_MODULES:
        if dotted.startswith(module) and dotted[len(module):].split(".", 1)[0] not in _TF1_LOSSES:
            return "keras." + dotted[len("tensorflow."):]
    return dotted


@lru_cache(maxsize=4096)
def canonical(dotted: str) -> str:
    """The canonical spelling of a fully qualified name (memoised: every call of a module is
    qualified, and a module calls few distinct names)."""
    if dotted in ("tensorflow.keras", "tf_keras", "tensorflow.python.keras"):
        return "keras"
    for prefix, replacement in _PREFIXES:
        if dotted.startswith(prefix):
            dotted = replacement + dotted[len(prefix):]
    return _SYNONYMS.get(dotted, _keras_module(dotted))


# Names a star import binds that its module never lists: standalone Keras 2's `keras.layers`
# re-exports its modules' `from .. import backend as K`, so `from keras.layers import *` binds `K`.
STAR_EXPORTS = {"keras.layers": {"K": "keras.backend"}}
# Keras' modules whose star import may bind a class name the engine reads (`ImportTable.star_qualify`).
STAR_QUALIFIED = ("keras.layers.", "keras.models.", "keras.optimizers.")
