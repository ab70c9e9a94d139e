"""A star import of one of the project's modules binds the library names that module imports
(`from utils import *` where `utils.py` has `import tensorflow as tf`): the script's `tf`,
`keras`, `K` and `slim` are TensorFlow's though it imports none of them itself.

Generated projects: every way a module binds the names (an alias, `compat.v1`, `from`-imports,
another star import it re-exports) x every rule's mistake written with those names only, each
with its clean twin (one sanitiser apart). The mistake is found at its line; the twin gives
nothing; and a module whose `__all__` leaves the names out binds nothing.
"""
import itertools
import json
import textwrap
from pathlib import Path

import pytest

# name -> the modules of `pkg/` that bind the names; the script star-imports `pkg.common`.
BINDINGS = {
    "import as": {"common.py": "import tensorflow as tf\nfrom tensorflow import keras\n"
                               "from tensorflow.keras import backend as K\n"},
    "compat.v1 alias": {"common.py": "import tensorflow.compat.v1 as tf\nimport tensorflow.keras as keras\n"
                                     "import tensorflow.keras.backend as K\n"},
    "re-exported star import": {"base.py": "import tensorflow as tf\nfrom tensorflow import keras\n"
                                           "from tensorflow.keras import backend as K\n",
                                "common.py": "from pkg.base import *\n\n\ndef preprocess(x):\n    return x / 255.0\n"},
    "__all__ naming them": {"common.py": "import tensorflow as tf\nfrom tensorflow import keras\n"
                                         "from tensorflow.keras import backend as K\n"
                                         "__all__ = ['tf', 'keras', 'K', 'preprocess']\n\n\n"
                                         "def preprocess(x):\n    return x / 255.0\n"},
}
# rule -> (the mistake, its twin): statements of `step(logits, labels, model, tape, loss)`; the
# statement holding `# <-` is where the finding is.
MISTAKES = {
    "CL004": ("probs = tf.nn.softmax(logits)\nreturn -tf.reduce_sum(labels * tf.log(probs))  # <-",
              "log_probs = tf.nn.log_softmax(logits)\nreturn -tf.reduce_sum(labels * log_probs)"),
    "CL004 backend": ("probs = keras.layers.Dense(10, activation='softmax')(logits)\nreturn K.log(probs)  # <-",
                      "probs = keras.layers.Dense(10)(logits)\nreturn K.log(K.exp(probs))"),
    "CL010": ("probs = tf.nn.softmax(logits)\n"
              "return keras.losses.CategoricalCrossentropy(from_logits=True)(labels, probs)  # <-",
              "return keras.losses.CategoricalCrossentropy(from_logits=True)(labels, logits)"),
    "CL001": ("return keras.optimizers.Adam(1e-3, clipnorm=1.0, clipvalue=0.5)  # <-",
              "return keras.optimizers.Adam(1e-3, clipnorm=1.0)"),
    "CL003": ("grads = tape.gradient(loss, model.trainable_variables)\n"
              "grads = [tf.clip_by_norm(g, 1.0) if g is not None else g for g in grads]  # <-\n"
              "keras.optimizers.Adam(clipnorm=None).apply_gradients(zip(grads, model.trainable_variables))",
              "grads = tape.gradient(loss, model.trainable_variables)\n"
              "grads, _ = tf.clip_by_global_norm(grads, 1.0)\n"
              "keras.optimizers.Adam(clipnorm=None).apply_gradients(zip(grads, model.trainable_variables))"),
}
HIDDEN = "import tensorflow as tf\nfrom tensorflow import keras\n__all__ = ['preprocess']\n\n\n" \
         "def preprocess(x):\n    return x / 255.0\n"


def write_project(root: Path, modules: dict, body: str) -> int:
    """The project; the line of `train.py` marked `# <-` (0 when none is)."""
    script = "from pkg.common import *\n\n\ndef step(logits, labels, model, tape, loss):\n" \
        + textwrap.indent(body, "    ") + "\n"
    files = {"pyproject.toml": "", "pkg/__init__.py": "", "train.py": script,
             **{f"pkg/{name}": text for name, text in modules.items()}}
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    return next((n for n, line in enumerate(script.splitlines(), 1) if "# <-" in line), 0)


def findings(result):
    assert result.returncode in (0, 1), result.stderr
    return {(r["path"], r["line"], r["code"]) for r in json.loads(result.stdout)}


CASES = list(itertools.product(BINDINGS, MISTAKES))


@pytest.mark.parametrize("binding, rule", CASES, ids=[" | ".join(case) for case in CASES])
def test_the_star_imported_modules_library_names_are_the_scripts(tmp_path, run_cli, binding, rule):
    mistake, twin = MISTAKES[rule]
    line = write_project(tmp_path / "mistake", BINDINGS[binding], mistake)
    found = findings(run_cli("--output-format", "json", "--no-cache", ".", cwd=tmp_path / "mistake"))
    assert found == {("train.py", line, rule.split()[0])}
    write_project(tmp_path / "twin", BINDINGS[binding], twin)
    assert findings(run_cli("--output-format", "json", "--no-cache", ".", cwd=tmp_path / "twin")) == set()


def test_a_module_whose_all_leaves_the_names_out_binds_none_of_them(tmp_path, run_cli):
    write_project(tmp_path, {"common.py": HIDDEN}, MISTAKES["CL004"][0])
    assert findings(run_cli("--output-format", "json", "--no-cache", ".")) == set()
