"""A reproducible benchmark corpus: TensorFlow training code with the mistakes cliplint finds,
clean TensorFlow code, and code that does not use TensorFlow at all.

    python bench/corpus.py [--files 2000] [--out bench/corpus]

The same arguments always give the same files (seeded), about 200 lines each.
"""
from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

HEADER_TF = "import numpy as np\nimport tensorflow as tf\nfrom tensorflow import keras\n\n"
HEADER_PLAIN = "import collections\nimport json\nimport math\nimport os\n\n"

TF_MISTAKES = [
    """
def build_optimizer_{n}(lr={lr}):
    return keras.optimizers.Adam(learning_rate=lr, clipnorm={c}, clipvalue=0.5)
""",
    """
@tf.function
def train_step_{n}(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        probs = tf.nn.softmax(model(x, training=True))
        loss = -tf.reduce_mean(tf.reduce_sum(y * tf.math.log(probs + 1e-9), axis=-1))
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [tf.clip_by_norm(g, {c}) for g in grads]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
""",
    """
def two_stage_{n}(model, x, y):
    model.compile(optimizer=keras.optimizers.SGD({lr}), loss="mse")
    model.fit(x, y, epochs=1, verbose=0)
    model.optimizer.clipnorm = {c}
    model.fit(x, y, epochs=3, verbose=0)
""",
    """
def filtered_step_{n}(model, optimizer, tape, loss):
    grads = tape.gradient(loss, model.trainable_variables)
    grads = [g for g in grads if g is not None]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
""",
]

TF_CLEAN = [
    """
@tf.function
def clean_step_{n}(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    grads = tape.gradient(loss, model.trainable_variables)
    grads, norm = tf.clip_by_global_norm(grads, {c})
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss, norm
""",
    """
def make_model_{n}(units={u}):
    model = keras.Sequential([
        keras.layers.Dense(units, activation="relu"),
        keras.layers.Dropout(0.1),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam({lr}, global_clipnorm={c}),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model
""",
    """
def log_probs_{n}(logits):
    return tf.nn.log_softmax(logits, axis=-1)
""",
]

PLAIN = [
    """
def summarise_{n}(records):
    totals = collections.Counter()
    for record in records:
        totals[record.get("kind", "other")] += record.get("count", {u})
    return {{key: math.log1p(value) for key, value in totals.items()}}
""",
    """
class Store{n}:
    def __init__(self, root):
        self.root = root
        self.items = {{}}

    def load(self, name):
        with open(os.path.join(self.root, name)) as handle:
            self.items[name] = json.load(handle)
        return self.items[name]

    def clip(self, value, low=0.0, high={c}):
        return max(low, min(high, value))
""",
]

FILLER = """
def helper_{n}_{k}(values, scale={lr}):
    \"\"\"Filler that looks like ordinary project code.\"\"\"
    result = []
    for index, value in enumerate(values):
        if index % {u} == 0:
            result.append(value * scale)
        else:
            result.append(value - scale)
    return result
"""


def make_file(rng: random.Random, index: int) -> str:
    kind = rng.random()
    if kind < 0.3:
        header, blocks = HEADER_TF, TF_MISTAKES + TF_CLEAN
    elif kind < 0.6:
        header, blocks = HEADER_TF, TF_CLEAN
    else:
        header, blocks = HEADER_PLAIN, PLAIN
    parts = [f'"""Benchmark module {index}."""\n', header]
    lines = 0
    k = 0
    while lines < rng.randint(150, 250):
        template = rng.choice(blocks) if rng.random() < 0.4 else FILLER
        values = {"n": f"{index}_{k}", "k": k, "lr": rng.choice([1e-3, 3e-4, 0.1]),
                  "c": rng.choice([0.5, 1.0, 5.0]), "u": rng.randint(2, 512)}
        block = template.format(**values)
        parts.append(block)
        lines += block.count("\n")
        k += 1
    return "".join(parts)


def generate(files: int, out: Path, seed: int = 20261130) -> int:
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    total = 0
    for index in range(files):
        folder = out / f"pkg{index // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        text = make_file(rng, index)
        (folder / f"module_{index:04d}.py").write_text(text)
        total += text.count("\n")
    return total


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "cliplint-bench-corpus")
    args = parser.parse_args()
    lines = generate(args.files, args.out)
    print(f"wrote {args.files} files, {lines:,} lines to {args.out}")
