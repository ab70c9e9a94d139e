"""The training script the editor smoke tests open, and the findings every editor must show."""
from __future__ import annotations

TRAIN = ("import tensorflow as tf\n"
         "probs = tf.nn.softmax(logits)\n"
         "loss = -tf.reduce_sum(labels * tf.math.log(probs))\n"
         "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
_LINES = TRAIN.split("\n")
_LOG = _LINES[2].index("tf.math.log(probs)")
# (0-based line, 0-based start column, end column, code), in order
EXPECTED = [(2, _LOG, _LOG + len("tf.math.log(probs)"), "CL004"),
            (3, _LINES[3].index("tf.keras"), len(_LINES[3]), "CL001")]
