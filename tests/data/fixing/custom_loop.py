"""A custom training loop with the mistakes cliplint fixes (golden input: see custom_loop.fixed.py)."""
import tensorflow as tf

model = tf.keras.Sequential([tf.keras.layers.Dense(10)])
optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0, clipvalue=0.5)


def loss_fn(labels, logits):
    # cross-entropy by hand
    return -tf.reduce_sum(labels * tf.math.log(tf.nn.softmax(logits, axis=-1)), axis=-1)


def binary_loss(y, z):
    return -(y * tf.math.log(tf.sigmoid(z)) + (1 - y) * tf.math.log(1 - tf.sigmoid(z)))


@tf.function
def train_step(x, y):
    tf.compat.v1.add_check_numerics_ops()
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_fn(y, model(x)))
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [g for g in grads if g is not None]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


def clipped_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_fn(y, model(x)))
    gradients = tape.gradient(loss, model.trainable_variables)
    gradients = tf.clip_by_global_norm(gradients, 5.0)   # the pair, not the list
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))


def per_tensor_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_fn(y, model(x)))
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [tf.clip_by_norm(g, 1.0) for g in grads]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def unused_clip_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(loss_fn(y, model(x)))
    grads = tape.gradient(loss, model.trainable_variables)
    clipped, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
