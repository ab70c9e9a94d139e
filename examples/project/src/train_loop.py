"""Custom GradientTape loop for a policy network with three numerics mistakes."""
import tensorflow as tf

policy = tf.keras.Sequential([
    tf.keras.layers.Dense(64, activation="tanh"),
    tf.keras.layers.Dense(4),
])
value_head = tf.keras.layers.Dense(1)  # not used by this loss: its gradients are None
optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)
variables = policy.trainable_variables + value_head.trainable_variables


@tf.function
def train_step(states, actions, advantages):
    with tf.GradientTape() as tape:
        probs = tf.nn.softmax(policy(states))
        picked = tf.gather(probs, actions, batch_dims=1)
        loss = -tf.reduce_mean(tf.math.log(picked) * advantages)
    grads = tape.gradient(loss, variables)
    grads = [tf.clip_by_norm(g, 1.0) for g in grads]
    optimizer.apply_gradients(zip(grads, variables))
    return loss


@tf.function
def train_step_filtered(states, actions, advantages):
    with tf.GradientTape() as tape:
        log_probs = tf.nn.log_softmax(policy(states))
        loss = -tf.reduce_mean(tf.gather(log_probs, actions, batch_dims=1) * advantages)
    grads = tape.gradient(loss, variables)
    grads = [g for g in grads if g is not None]
    optimizer.apply_gradients(zip(grads, variables))
    return loss
