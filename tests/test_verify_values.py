"""The verifier tests what the finding is about, on the code real projects write: the
file's own values, inert arguments, every spelling of pure functions, trainer classes, every rule.
One real `cliplint --verify` run over all the programs below, with real TensorFlow."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("tensorflow", reason="the verifier tests need tensorflow-cpu (pip install '.[verify]')")

PROGRAMS = {
    # the flag default the finding is about, not a placeholder
    "argparse_flag.py": """\
        import argparse
        import tensorflow as tf

        parser = argparse.ArgumentParser()
        parser.add_argument("--clipnorm", type=float, default=0.0)
        FLAGS = parser.parse_args()

        opt = tf.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=FLAGS.clipnorm)
    """,
    "absl_flag.py": """\
        import tensorflow as tf
        from absl import flags

        flags.DEFINE_float("clip_norm", 0.0, "gradient clipping")
        FLAGS = flags.FLAGS

        def train_op(grads):
            return tf.clip_by_global_norm(grads, FLAGS.clip_norm)[0]
    """,
    "module_constant.py": """\
        import tensorflow as tf

        CLIP = -1.0
        opt = tf.keras.optimizers.SGD(0.1, global_clipnorm=CLIP)
    """,
    # a placeholder for a value the probe could not read never says "not reproduced"
    "placeholder.py": """\
        import tensorflow as tf

        def build(model, config):
            sgd = tf.keras.optimizers.SGD(1.0)
            model.compile(optimizer=sgd, loss="mse")
            sgd.clipnorm = config.clip_norm
            model.fit(x, y)
    """,
    # CL007's discarded clip and the kept original
    "discarded.py": """\
        import tensorflow as tf

        def step(model, x, opt):
            with tf.GradientTape() as tape:
                loss = model(x)
            grads = tape.gradient(loss, model.trainable_variables)
            for g in grads:
                tf.clip_by_norm(g, 5.0)
            opt.apply_gradients(zip(grads, model.trainable_variables))
    """,
    "kept_original.py": """\
        import tensorflow as tf

        def step(model, x, opt):
            with tf.GradientTape() as tape:
                loss = model(x)
            grads = tape.gradient(loss, model.trainable_variables)
            kept = []
            for g in grads:
                if g is not None:
                    c_g = tf.clip_by_norm(g, 1.0)
                    kept.append(g)
            opt.apply_gradients(zip(kept, model.trainable_variables))
    """,
    # inert arguments, float("inf"), name filters, compat.v2 spellings: still verified
    "metrics.py": """\
        import tensorflow as tf

        def build(model, x, y):
            opt = tf.keras.optimizers.SGD(1.0)
            model.compile(optimizer=opt, loss="mse", metrics=["accuracy"])
            model.fit(x, y, verbose=2)
            opt.clipnorm = 1.0
            model.fit(x, y, verbose=2)
    """,
    "float_inf.py": """\
        import tensorflow as tf

        def loss(logits, labels):
            p = tf.nn.softmax(logits)
            return -tf.reduce_sum(labels * tf.math.log(tf.clip_by_value(p, 1e-10, float("inf")) * p))
    """,
    "name_filter.py": """\
        import tensorflow as tf

        def step(model, x, opt):
            with tf.GradientTape() as tape:
                loss = model(x)
            tvars = model.trainable_variables
            grads = tape.gradient(loss, tvars)
            grads = [tf.clip_by_norm(g, 1.0) if "kernel" in v.name else g for g, v in zip(grads, tvars)]
            opt.apply_gradients(zip(grads, tvars))
    """,
    "compat_v2.py": """\
        import tensorflow as tf

        def loss(x, labels):
            logits = tf.compat.v2.reshape(tf.convert_to_tensor(x), [-1])
            probs = tf.compat.v2.nn.softmax(logits)
            return -tf.reduce_sum(labels * tf.compat.v2.math.log(probs))
    """,
    # trainer classes, Keras train_step, the model as a parameter: the model is found
    "trainer.py": """\
        import tensorflow as tf

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = tf.keras.optimizers.Adam(1e-3)

            def train_step(self, x, y):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(self.model(x) - y))
                grads = tape.gradient(loss, self.model.trainable_variables)
                clipped, _ = tf.clip_by_global_norm(grads, 1.0)
                self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    """,
    "keras_train_step.py": """\
        import tensorflow as tf

        class Net(tf.keras.Model):
            def train_step(self, data):
                x, y = data
                with tf.GradientTape() as tape:
                    loss = self.compiled_loss(y, self(x, training=True))
                grads = tape.gradient(loss, self.trainable_variables)
                grads = [tf.clip_by_norm(g, 1.0) for g in grads]
                self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
    """,
    "clip_helper.py": """\
        import tensorflow as tf

        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = tf.keras.optimizers.Adam(1e-3)

            def clip_grad(self, grad):
                return tf.clip_by_norm(grad, 1.0)

            def train_step(self, x, y):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean(tf.square(self.model(x) - y))
                grads = tape.gradient(loss, self.model.trainable_variables)
                grads = [self.clip_grad(g) for g in grads]
                self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    """,
    "model_parameter.py": """\
        import tensorflow as tf

        def step(model, optimizer, x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            grads = tf.clip_by_global_norm(grads, 1.0)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
    """,
}


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """(file, code) -> the verifications of that file's findings of that rule, from one run."""
    folder = tmp_path_factory.mktemp("values")
    for name, text in PROGRAMS.items():
        (folder / name).write_text(textwrap.dedent(text))
    result = subprocess.run([sys.executable, "-m", "cliplint", "--verify", "--output-format", "json", "--isolated",
                             "--exit-zero", "--no-cache", "--verify-timeout", "120", "."], cwd=folder,
                            capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=1200)
    assert result.returncode == 0, result.stderr[-2000:]
    found = {}
    for finding in json.loads(result.stdout):
        found.setdefault((os.path.basename(finding["path"]), finding["code"]), []).append(finding["verification"])
    return found


def one(verified, name, code):
    assert (name, code) in verified, sorted(verified)
    return verified[(name, code)][0]


# (file, rule, verdict, what the evidence must say)
EVIDENCE = [
    # the flag default / constant the finding is about, named in the evidence
    ("argparse_flag.py", "CL009", "confirmed",
     "clipnorm=0 does not clip: one SGD step applied the whole gradient [3, -4] (run on the file's values: "
     "`FLAGS.clipnorm` = 0.0 (the default of its command-line flag `clipnorm`))"),
    ("absl_flag.py", "CL009", "confirmed", "`FLAGS.clip_norm` = 0.0 (the default of its command-line flag"),
    ("module_constant.py", "CL009", "confirmed", "`CLIP` = -1.0 (its value in the file)"),
    # a placeholder stood in for a value the probe could not read: never "not reproduced"
    ("placeholder.py", "CL002", "inconclusive", "`config.clip_norm` = 1.0 (placeholder)"),
    # CL007's discarded clip and its clipped copy never used
    ("discarded.py", "CL007", "confirmed", "left its input unchanged; afterwards `grads` holds the unclipped"),
    ("kept_original.py", "CL007", "confirmed", "afterwards `kept` holds the unclipped gradients"),
]


@pytest.mark.parametrize("name, code, expected, evidence", EVIDENCE)
def test_the_verdict_is_about_the_finding_and_says_why(verified, name, code, expected, evidence):
    v = one(verified, name, code)
    assert v["verdict"] == expected, v
    assert evidence in v["evidence"], v


@pytest.mark.parametrize("name, code", [("metrics.py", "CL002"), ("float_inf.py", "CL004"),
                                        ("name_filter.py", "CL003"), ("compat_v2.py", "CL004")])
def test_inert_arguments_and_every_spelling_run(verified, name, code):
    v = one(verified, name, code)
    assert v["verdict"] == "confirmed", v


def test_metrics_and_verbose_are_dropped_and_listed(verified):
    assumptions = " ".join(one(verified, "metrics.py", "CL002")["assumptions"])
    assert "`metrics=` argument was dropped" in assumptions


def test_name_filter_is_a_listed_stand_in(verified):
    assumptions = " ".join(one(verified, "name_filter.py", "CL003")["assumptions"])
    assert "`a name filter on v.name` = 1.0 (placeholder)" in assumptions


@pytest.mark.parametrize("name, code", [("trainer.py", "CL007"), ("keras_train_step.py", "CL003"),
                                        ("keras_train_step.py", "CL005"), ("model_parameter.py", "CL006"),
                                        ("clip_helper.py", "CL003")])
def test_trainer_layouts_run(verified, name, code):
    v = one(verified, name, code)
    assert v["verdict"] == "confirmed", v
