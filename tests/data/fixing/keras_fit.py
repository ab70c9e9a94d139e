"""Keras fit with a double softmax; only safe fixes apply to it (golden: keras_fit.fixed.py)."""
import tensorflow as tf

model = tf.keras.Sequential([
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10, activation="softmax"),
])
model.compile(
    optimizer="adam",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),  # unsafe fix only
)
log_probs = tf.math.log(tf.nn.softmax(model(x)))
