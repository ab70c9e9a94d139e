"""Excluded by pyproject.toml: never linted."""
import tensorflow as tf

opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=1.0)
