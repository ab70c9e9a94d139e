"""Keras compile/fit training script with two clipping mistakes."""
import tensorflow as tf


def build_model(num_classes=10):
    return tf.keras.Sequential([
        tf.keras.layers.Dense(128, activation="relu", input_shape=(784,)),
        tf.keras.layers.Dense(num_classes),
    ])


def train(x, y, epochs=10):
    model = build_model()
    optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0, clipvalue=0.5)
    model.compile(optimizer=optimizer,
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=1)  # warm-up epoch
    model.optimizer.clipnorm = 0.5  # tighten clipping for the main run
    model.fit(x, y, epochs=epochs)
    return model
