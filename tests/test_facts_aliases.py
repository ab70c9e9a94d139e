"""The gate's alias table stays small: a class whose methods assign its own attributes to each
other (`self.step = self._step`) once made `self` stand for every concatenation of them (237,808
dotted names for one federated-learning model file: minutes and gigabytes before any rule ran)."""
from cliplint.facts import MAX_ALIASES, Facts

SELF_ALIASED = """import tensorflow as tf
class Trainer:
    def __init__(self):
        self.act = tf.nn.relu
        self.train_step = self._train_step
        self.test_step = self._test_step
        self._train_step = self.train_step
        self._test_step = self.test_step
        self.fast_step = self.factorized_step
        self.factorized_step = self._factorized_step
        self._factorized_step = self.fast_step
"""


def test_an_object_aliasing_its_own_attributes_does_not_grow_the_table():
    aliases = Facts.of(SELF_ALIASED)._module_aliases()
    assert max(len(names) for names in aliases.values()) <= MAX_ALIASES


def test_an_alias_of_an_alias_is_still_followed():
    aliases = Facts.of("import tensorflow as tf\nk = tf.keras\nL = k.layers\n")._module_aliases()
    assert "tensorflow.keras.layers" in aliases["L"]
