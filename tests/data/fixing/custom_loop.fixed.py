"""A custom training loop with the mistakes cliplint fixes (golden input: see custom_loop.fixed.py)."""
import tensorflow as tf

model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0)


def loss_fn(labels, logits):
    # cross-entropy by hand
    return -tf.reduce_sum(labels * tf.nn.log_softmax(logits, axis=-1), axis=-1)


def binary_loss(y, z):
    return -(y * tf.math.log_sigmoid(z) + (1 - y) * tf.math.log_sigmoid(-z))


@tf.function
def train_step(x, y):
    tf.debugging.enable_check_numerics()
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_fn(y, model(x)))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients([(g, v) for g, v in zip(grads, model.trainable_variables) if g is not None])
    return loss


def clipped_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_fn(y, model(x)))
    gradients = tape.gradient(loss, model.trainable_variables)
    gradients, _ = tf.clip_by_global_norm(gradients, 5.0)   # the pair, not the list
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))


def per_tensor_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_fn(y, model(x)))
    grads = tape.gradient(loss, model.trainable_variables)
    grads = tf.clip_by_global_norm(grads, 1.0)[0]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def unused_clip_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_fn(y, model(x)))
    grads = tape.gradient(loss, model.trainable_variables)
    clipped, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(clipped, model.trainable_variables))
