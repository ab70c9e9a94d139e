"""Definitions no rule can see are left out of the libcst parse (`reduction.reduced`); the findings
must be exactly those of every rule on the whole module, however definitions refer to each other."""
import textwrap

import pytest

from cliplint.analysis import lint_module
from cliplint.lint import facts_of, lint_bytes
from cliplint.reduction import reduced
from cliplint.rules import ALL_RULES

RULES = list(ALL_RULES.values())
WORDS = sorted({t.decode() for r in RULES for t in (*r.tokens, *r.context_tokens)})

FILLER = '''
def summarise(records):
    """Ordinary project code: nothing any rule looks at."""
    totals = {}
    for record in records:
        totals[record["name"]] = totals.get(record["name"], 0) + record["value"]
    return totals
'''


def codes(source):
    source = textwrap.dedent(source)
    findings = lint_bytes("m.py", source.encode(), RULES)
    assert findings == lint_module("m.py", source, RULES)
    return [(f.line, f.code) for f in findings[0]]


def blanked(source):
    """The definitions the engine leaves out, by name."""
    source = textwrap.dedent(source)
    kept, _ = reduced(facts_of(source), source, WORDS)
    assert len(kept.splitlines()) == len(source.splitlines()), "line numbers must not move"
    return {line.split("(")[0][4:] for line in source.splitlines() if line.startswith("def ")} - \
        {line.split("(")[0][4:] for line in kept.splitlines() if line.startswith("def ")}


def test_unrelated_definitions_are_left_out_and_findings_stay():
    source = "import tensorflow as tf\n" + FILLER + '''
def loss(logits, y):
    probs = tf.nn.softmax(logits)
    return -tf.reduce_sum(y * tf.math.log(probs))
'''
    assert blanked(source) == {"summarise"}
    assert codes(source) == [(12, "CL004")]


def test_a_definition_reading_a_module_binding_of_a_token_is_kept():
    source = '''
    import tensorflow as tf
    probs = tf.nn.softmax(tf.ones([2, 3]))

    def entropy():
        return -tf.reduce_sum(probs * tf.math.log(probs))
    '''
    assert blanked(source) == set()
    assert codes(source) == [(6, "CL004")]


def test_an_alias_of_a_token_taints_what_it_binds():
    source = '''
    import tensorflow as tf
    sm = tf.nn.softmax
    squash = sm

    def log_probs(x):
        return tf.math.log(squash(x))
    '''
    assert blanked(source) == set()
    assert codes(source) == [(7, "CL004")]


def test_a_definition_named_by_a_kept_statement_is_kept():
    source = '''
    import tensorflow as tf

    def build():
        return tf.keras.Sequential([tf.keras.layers.Dense(3)])

    model = build()
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    '''
    assert blanked(source) == set()
    assert codes(source) == []


def test_attribute_bindings_across_definitions_are_kept():
    """`agent.actions` is bound in one function and read in another (dotted bindings are
    module-wide): leaving `attach` out would hide that the gradients are w.r.t. a network output."""
    source = '''
    import tensorflow as tf

    def attach(agent, net, states):
        agent.actions = net(states)

    def train(agent, q):
        with tf.GradientTape() as tape:
            value = q(agent.actions)
        dqda = tape.gradient(value, agent.actions)
        return [tf.clip_by_value(d, -1.0, 1.0) for d in dqda]
    '''
    assert blanked(source) == set()
    assert codes(source) == []


def test_context_words_keep_a_definition_that_changes_another_rule():
    """CL008 is silent in TF 1 graph modules: the definition that turns eager execution off
    holds no token of any rule, but must be seen."""
    source = '''
    import tensorflow as tf

    def graph_mode():
        tf.compat.v1.disable_eager_execution()

    check = tf.compat.v1.add_check_numerics_ops()
    with tf.compat.v1.Session() as session:
        session.run(check)
    '''
    assert blanked(source) == set()
    assert codes(source) == []


@pytest.mark.parametrize("statement", ["import numpy as np", "global STEP"])
def test_imports_and_global_declarations_keep_a_definition(statement):
    source = f"import tensorflow as tf\n\ndef helper(x):\n    {statement}\n    return x\n"
    assert blanked(source) == set()


def test_comment_lines_of_a_left_out_definition_stay():
    filler = FILLER.replace("    totals = {}", "    # cliplint: noqa\n    totals = {}")
    source = "import tensorflow as tf\n" + filler + (
        "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    assert blanked(source) == {"summarise"}
    assert codes(source) == []  # the file-level noqa inside the left-out function still counts


def test_definitions_a_call_summary_needs_are_kept():
    """The log is in a helper, the softmax in another, and only an untokened third function
    calls both: every one of them must be parsed for the parameter to be followed."""
    source = '''
    import tensorflow as tf

    def xent(p, y):
        return -tf.reduce_sum(y * tf.math.log(p))

    def predict(x):
        return tf.nn.softmax(x)

    def step(x, y):
        return xent(predict(x), y)
    '''
    assert blanked(source) == set()
    assert codes(source) == [(5, "CL004")]


def test_a_clip_helper_and_its_untokened_caller_are_kept():
    source = '''
    import tensorflow as tf

    def clip_each(gs):
        return [tf.clip_by_norm(g, 1.0) for g in gs if g is not None]

    def train(tape, loss, model, opt):
        grads = clip_each(tape.gradient(loss, model.trainable_variables))
        opt.apply_gradients(zip(grads, model.trainable_variables))
    '''
    assert blanked(source) == set()
    # CL005 too: the helper drops None gradients, and the shorter list is zipped with every variable
    assert codes(source) == [(5, "CL003"), (9, "CL005")]


def test_flag_definitions_in_a_function_are_kept():
    """`FLAGS.gclip` gets its default from a definition that holds no clip word."""
    source = '''
    import tensorflow as tf
    from absl import flags

    FLAGS = flags.FLAGS

    def define_flags():
        flags.DEFINE_float("gclip", 1.0, "global clip")
        flags.DEFINE_float("vclip", 0.5, "value clip")

    opt = tf.keras.optimizers.Adam(global_clipnorm=FLAGS.gclip, clipvalue=FLAGS.vclip)
    '''
    assert blanked(source) == set()
    assert codes(source) == [(11, "CL001")]


def _blanked_methods(source):
    """The methods the engine leaves out, by name (the reduced text keeps every line)."""
    source = textwrap.dedent(source)
    kept, _ = reduced(facts_of(source), source, WORDS)
    assert len(kept.splitlines()) == len(source.splitlines()), "line numbers must not move"
    compile(kept, "m.py", "exec")  # a class left with no method still parses (`pass`)

    def methods(text):
        return {line.strip().split("(")[0][4:] for line in text.splitlines() if line.startswith("    def ")}
    return methods(source) - methods(kept)


def test_a_class_keeps_only_the_methods_a_rule_can_see():
    """A test class of hundreds of methods: the ones holding a token, what they name, and the
    methods a class runs unnamed (`__init__`, `call`) stay; the others are left out."""
    source = '''
    import tensorflow as tf

    class Head(tf.keras.layers.Layer):
        def __init__(self, activation):
            super().__init__()
            self.activation = activation

        def call(self, x):
            return self.activation(x)

        def describe(self):
            return "a head"

    class NumpyTest:
        def test_sum(self):
            assert sum([1, 2]) == 3

        def test_entropy(self):
            probs = self.predict()
            return -tf.reduce_sum(probs * tf.math.log(probs))

        def predict(self):
            return Head(tf.nn.softmax)(tf.ones([2, 3]))

        def test_strings(self):
            assert "a".upper() == "A"
    '''
    assert _blanked_methods(source) == {"describe", "test_sum", "test_strings"}
    assert codes(source) == [(21, "CL004")]


def test_an_attribute_stored_by_a_kept_method_keeps_the_method_that_reads_it():
    source = '''
    import tensorflow as tf

    class Agent:
        def build(self, logits):
            self.probs = tf.nn.softmax(logits)

        def unrelated(self):
            return 1

        def entropy(self):
            return -tf.reduce_sum(self.probs * tf.math.log(self.probs))
    '''
    assert _blanked_methods(source) == {"unrelated"}
    assert codes(source) == [(12, "CL004")]


def test_a_class_left_with_no_method_and_one_line_classes_still_parse():
    source = '''
    import tensorflow as tf

    class Config:
        def describe(self):
            return "nothing a rule sees"

    class Inline: value = 1; name = "x"

    config = Config()
    loss = tf.math.log(tf.nn.softmax(config.logits))
    '''
    assert _blanked_methods(source) == {"describe"}
    assert codes(source) == [(11, "CL004")]
