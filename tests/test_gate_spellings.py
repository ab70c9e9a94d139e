"""The ast gate asks which TensorFlow/Keras names a module could call (`Facts.refers_to`): it must
say yes however the name is spelled. Every rule's INVALID examples are respelled three ways (the
module imported under another alias, each called name bound to a local alias first, each call
made through an alias of its namespace) and each variant must give the same findings with the
gate and the reduced parse as without them."""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Tuple

import pytest

from cliplint.analysis import lint_module
from cliplint.lint import lint_text
from cliplint.rules import ALL_RULES

RULES = list(ALL_RULES.values())
CHAIN = re.compile(r"(?<![\w.])((?:tf|tf1|keras|K|ops|layers|optimizers)(?:\.\w+)+)(?=\()")


def _after_imports(text: str, lines: List[str]) -> str:
    """`lines` inserted after the last top-level import (the text unchanged when it has none)."""
    rows = text.splitlines()
    last = max((i for i, row in enumerate(rows) if row.startswith(("import ", "from "))), default=None)
    if last is None:
        return text
    return "\n".join(rows[:last + 1] + lines + rows[last + 1:]) + "\n"


def hoisted(text: str) -> str:
    """`f = tf.nn.softmax` once, then `f(x)` wherever `tf.nn.softmax(x)` was called."""
    chains = sorted(set(CHAIN.findall(text)), key=len, reverse=True)
    aliases = {chain: f"alias_{i}" for i, chain in enumerate(chains)}
    for chain, alias in aliases.items():
        text = re.sub(rf"(?<![\w.]){re.escape(chain)}(?=\()", alias, text)
    return _after_imports(text, [f"{alias} = {chain}" for chain, alias in aliases.items()])


def namespaced(text: str) -> str:
    """`ns = tf.math` once, then `ns.log(x)` wherever `tf.math.log(x)` was called."""
    chains = sorted({c.rsplit(".", 1)[0] for c in CHAIN.findall(text) if c.count(".") >= 2}, key=len, reverse=True)
    aliases = {chain: f"namespace_{i}" for i, chain in enumerate(chains)}
    for chain, alias in aliases.items():
        text = re.sub(rf"(?<![\w.]){re.escape(chain)}(?=\.\w+\()", alias, text)
    return _after_imports(text, [f"{alias} = {chain}" for chain, alias in aliases.items()])


def renamed(text: str) -> str:
    """`import tensorflow as tensorflow_module` instead of `as tf`."""
    if "import tensorflow as tf\n" not in text:
        return text
    text = text.replace("import tensorflow as tf\n", "import tensorflow as tensorflow_module\n")
    return re.sub(r"(?<![\w.])tf\.", "tensorflow_module.", text)


def assigned(text: str) -> str:
    """`import tensorflow` and then `tf = tensorflow.compat.v2`: the module's alias made by an
    assignment, through a namespace that is TensorFlow itself."""
    if "import tensorflow as tf\n" not in text:
        return text
    return text.replace("import tensorflow as tf\n", "import tensorflow\ntf = tensorflow.compat.v2\n")


def contrib_keras(text: str) -> str:
    """TF 1.2-1.3's `tf.contrib.keras` for `tf.keras`."""
    return re.sub(r"(?<![\w.])tf\.keras\.", "tf.contrib.keras.", text)


def tf2_aliases(text: str) -> str:
    """`tf.losses.X` and `tf.optimizers.X` for `tf.keras.losses.X` and `tf.keras.optimizers.X`:
    TensorFlow 2's own names for Keras's modules."""
    return re.sub(r"(?<![\w.])tf\.keras\.(losses|optimizers)\.", r"tf.\1.", text)


def keras_api(text: str) -> str:
    """Keras 3.0-3.5's `keras.api` package for the modules imported from Keras
    (`from keras.api.layers import Dense`, `import keras.api.backend as K`)."""
    return re.sub(r"^(from|import) (?:tensorflow\.)?keras\.(\w)", r"\1 keras.api.\2", text, flags=re.M)


SPELLINGS: Dict[str, Callable[[str], str]] = {
    "hoisted": hoisted, "namespaced": namespaced, "renamed": renamed, "assigned": assigned,
    "tf2_aliases": tf2_aliases, "contrib_keras": contrib_keras, "keras_api": keras_api}


def _variants() -> List[Tuple[str, str, str]]:
    found = []
    for rule in RULES:
        for index, example in enumerate(rule.INVALID):
            for spelling, respell in SPELLINGS.items():
                text = respell(example.source)
                if text != example.source:
                    found.append((f"{rule.code}-{index}-{spelling}", example.source, text))
    return found


def _findings(text: str, gate: bool) -> List[Tuple[str, int, str]]:
    run = lint_text("m.py", text, RULES, "m.py") if gate else lint_module("m.py", text, RULES, "m.py")
    return sorted((f.code, f.line, f.message) for f in run[0])


VARIANTS = _variants()


def test_every_rule_is_respelled():
    assert {label.split("-")[0] for label, _, _ in VARIANTS} >= {rule.code for rule in RULES if rule.INVALID}


@pytest.mark.parametrize("text", [text for _, _, text in VARIANTS], ids=[label for label, _, _ in VARIANTS])
def test_the_gate_follows_every_spelling(text):
    assert _findings(text, gate=True) == _findings(text, gate=False), text


def _placed(text: str) -> List[Tuple[str, int]]:
    """Each finding's code, and its line counted from the end of the imports and aliases (a
    respelling inserts lines there)."""
    rows = text.splitlines()
    body = max((i for i, row in enumerate(rows) if re.match(r"(import |from |\w+ = [\w.]+$)", row)), default=0)
    return sorted((code, line - body) for code, line, _ in _findings(text, gate=False))


@pytest.mark.parametrize("original, text", [(original, text) for _, original, text in VARIANTS],
                         ids=[label for label, _, _ in VARIANTS])
def test_every_spelling_is_analysed_alike(original, text):
    """The engine, not only the gate, reads each spelling as the original."""
    assert _placed(text) == _placed(original), text
