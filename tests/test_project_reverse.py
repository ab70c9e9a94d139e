"""A module is also given its values by the modules that import it (`project/importers.py`).

Generated projects: a loss library `pkg/losses.py` holds only the sink (a log, a from-logits
loss), and a training script gives it probabilities through every way one module reaches
another's code (a function imported by name or by a star import, the module imported, by its
package chain or an alias, a relative import inside the package, an instance's `__call__`, a
subclass overriding the method a base class's loss calls). One source is itself a third
module's (`pkg/model.py`: script -> library <- model). Each program's finding is in the
library, at its sink; each clean twin passes logits and gives nothing. Then the cache: an
importer added later reaches a library answered from the cache.
"""
import itertools
import json
import textwrap
from pathlib import Path

import pytest

SOURCES = {
    "tf.nn.softmax": "tf.nn.softmax(logits)",
    "tf.sigmoid": "tf.sigmoid(logits)",
    "a third module's softmax head": "head(features)",
}
TWIN = {"a third module's softmax head": "linear_head(features)"}
# The sink the library applies to what it is given, `{p}`.
SINKS = {
    "CL004 log": ("CL004", "-tf.reduce_sum(labels * tf.math.log({p}), axis=-1)"),
    "CL010 tf.nn op": ("CL010", "tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits={p})"),
    "CL010 from_logits": ("CL010", "keras.losses.categorical_crossentropy(labels, {p}, from_logits=True)"),
}
LIBRARY_HEAD = "import tensorflow as tf\nfrom tensorflow import keras\n\n\n"
MODEL = ("from tensorflow import keras\n\n\ndef head(features):\n"
         "    return keras.layers.Dense(10, activation='softmax')(features)\n\n\n"
         "def linear_head(features):\n    return keras.layers.Dense(10)(features)\n")
SCRIPT_HEAD = "import tensorflow as tf\nfrom pkg.model import head, linear_head\n"
# name -> (the library's code around the sink `{sink}`, the script's import, its use of `{value}`,
# where the script is). The sink's line in the library is the one holding `{sink}`.
CARRIERS = {
    "function imported by name": ("def xent(p, labels):\n    return {sink}\n",
                                  "from pkg.losses import xent", "loss = xent({value}, labels)", "train.py"),
    "star import": ("def xent(p, labels):\n    return {sink}\n",
                    "from pkg.losses import *", "loss = xent({value}, labels)", "train.py"),
    "module imported": ("def xent(p, labels):\n    return {sink}\n",
                        "from pkg import losses", "loss = losses.xent({value}, labels)", "train.py"),
    "package chain": ("def xent(p, labels):\n    return {sink}\n",
                      "import pkg.losses", "loss = pkg.losses.xent({value}, labels)", "train.py"),
    "module aliased": ("def xent(p, labels):\n    return {sink}\n",
                       "import pkg.losses as L", "loss = L.xent({value}, labels)", "train.py"),
    "relative import": ("def xent(p, labels):\n    return {sink}\n",
                        "from .losses import xent", "loss = xent({value}, labels)", "pkg/train.py"),
    "instance __call__": ("class Xent:\n    def __call__(self, p, labels):\n        return {sink}\n",
                          "from pkg.losses import Xent", "loss = Xent()({value}, labels)", "train.py"),
    "subclass override": ("class Base:\n    def loss(self, x, labels):\n        p = self.head(x)\n"
                          "        return {sink}\n\n    def head(self, x):\n        raise NotImplementedError\n",
                          "from pkg.losses import Base",
                          "class Net(Base):\n    def head(self, x):\n        return {value}", "train.py"),
}


def write_project(root: Path, source: str, sink: str, carrier: str, twin: bool) -> int:
    """The project of one (source, sink, carrier); the sink's line in `pkg/losses.py`."""
    library, imported, use, script = CARRIERS[carrier]
    value = (TWIN.get(source, "logits") if twin else SOURCES[source])
    sink_code = SINKS[sink][1].format(p="p")
    text = LIBRARY_HEAD + library.format(sink=sink_code)
    files = {"pyproject.toml": "", "pkg/__init__.py": "", "pkg/model.py": MODEL, "pkg/losses.py": text,
             script: SCRIPT_HEAD + imported + "\n\n\ndef step(logits, features, labels):\n"
             + textwrap.indent(use.format(value=value), "    ") + "\n    return 0\n"}
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    return next(number for number, line in enumerate(text.splitlines(), 1) if sink_code in line)


def findings(result):
    assert result.returncode in (0, 1), result.stderr
    return {(r["path"], r["line"], r["code"]) for r in json.loads(result.stdout)}


CASES = list(itertools.product(SOURCES, SINKS, CARRIERS))


@pytest.mark.parametrize("source, sink, carrier", CASES, ids=[" | ".join(case) for case in CASES])
def test_the_importers_value_reaches_the_librarys_sink(tmp_path, run_cli, source, sink, carrier):
    line = write_project(tmp_path / "mistake", source, sink, carrier, twin=False)
    found = findings(run_cli("--output-format", "json", "--no-cache", ".", cwd=tmp_path / "mistake"))
    assert found == {("pkg/losses.py", line, SINKS[sink][0])}
    write_project(tmp_path / "twin", source, sink, carrier, twin=True)
    assert findings(run_cli("--output-format", "json", "--no-cache", ".", cwd=tmp_path / "twin")) == set()


def test_an_importer_added_later_reaches_a_library_answered_from_the_cache(tmp_path, run_cli):
    """The library's cached result is clean; a new script gives it a softmax: the run that lints
    the new script lints the library again (`engine.run`), and the next warm run keeps it."""
    line = write_project(tmp_path, "tf.nn.softmax", "CL004 log", "module imported", twin=True)
    assert findings(run_cli("--output-format", "json", ".")) == set()
    (tmp_path / "evaluate.py").write_text(SCRIPT_HEAD + "from pkg import losses\n\n\ndef score(logits, labels):\n"
                                          "    return losses.xent(tf.nn.softmax(logits), labels)\n")
    expected = {("pkg/losses.py", line, "CL004")}
    assert findings(run_cli("--output-format", "json", ".")) == expected
    assert findings(run_cli("--output-format", "json", ".")) == expected
    (tmp_path / "evaluate.py").unlink()
    assert findings(run_cli("--output-format", "json", ".")) == set()


def test_a_library_holding_no_rules_token_is_still_read_for_its_importers(tmp_path, run_cli):
    """The byte prefilter skips a file holding none of the rules' tokens; `pkg/losses.py` holds
    only a log, and its importer the softmax: it is linted."""
    line = write_project(tmp_path, "tf.nn.softmax", "CL004 log", "function imported by name", twin=False)
    assert b"softmax" not in (tmp_path / "pkg" / "losses.py").read_bytes()
    assert findings(run_cli("--output-format", "json", "--no-cache", "pkg/losses.py")) == \
        {("pkg/losses.py", line, "CL004")}
