"""The derived list of pure TensorFlow functions, and the contract between rules and probes."""
import re
import textwrap

import pytest

tf = pytest.importorskip("tensorflow", reason="deriving the allowlist traces with tensorflow-cpu")

from cliplint.analysis import lint_module  # noqa: E402
from cliplint.rules import ALL_RULES  # noqa: E402
from cliplint.verify import allowlist, derive  # noqa: E402
from cliplint.verify.probes import PROBES  # noqa: E402


def _listed():
    with open(allowlist.DERIVED_FILE, encoding="utf-8") as listed:
        text = listed.read()
    version = re.search(r"^# TensorFlow (\S+)$", text, re.M)
    return (version.group(1) if version else None), allowlist.derived()


def test_the_checked_in_list_is_what_tracing_derives():
    version, listed = _listed()
    if version != tf.__version__:
        pytest.skip(f"the list was derived with TensorFlow {version}; this is {tf.__version__}: re-derive it")
    assert set(derive.derive(tf)) == set(listed)


def test_every_derived_function_traces_to_stateless_ops_only():
    from tensorflow.python.framework import op_def_registry

    x = tf.constant([[0.5, 2.0], [1.0, 4.0]])
    graph = tf.function(lambda: tf.math.reduce_sum(tf.reshape(x, [-1]))).get_concrete_function().graph
    assert all(not op_def_registry.get(op.type).is_stateful for op in graph.get_operations())
    assert not derive.pure(tf, tf.print)  # PrintV2 is stateful
    assert not derive.pure(tf, tf.io.read_file)  # ReadFile is stateless in the registry, but takes a file name
    assert not derive.pure(tf, tf.map_fn)  # takes a Python callable
    assert not derive.pure(tf, tf.random.uniform)


@pytest.mark.parametrize("spelled", ["tensorflow.compat.v2.reshape", "tensorflow.compat.v2.math.log",
                                     "tensorflow.convert_to_tensor", "tensorflow.compat.v1.reshape",
                                     "tensorflow.math.reduce_std", "tensorflow.compat.v2.nn.softmax"])
def test_pure_functions_are_allowed_under_every_spelling(spelled):
    assert allowlist.allowed(spelled)


@pytest.mark.parametrize("spelled", ["tensorflow.compat.v2.io.write_file", "tensorflow.compat.v2.compat.v1.gfile.GFile",
                                     "tensorflow.print", "tensorflow.py_function", "tensorflow.compat.v1.read_file",
                                     "tensorflow.random.uniform"])
def test_side_effects_stay_off_the_list(spelled):
    assert not allowlist.allowed(spelled)


@pytest.mark.parametrize("spelled", ["keras.api.layers.Dense", "keras.api._v2.keras.layers.Dense",
                                     "keras._tf_keras.keras.layers.Dense", "tensorflow.keras.layers.Dense"])
def test_keras_spellings_fold_onto_the_flavour_the_worker_runs(spelled):
    assert allowlist.entry(spelled) == "keras.layers.Dense"


@pytest.mark.parametrize("spelled, keras", [("tensorflow.losses.SparseCategoricalCrossentropy",
                                             "SparseCategoricalCrossentropy"),
                                            ("tensorflow.optimizers.Adam", "Adam")])
def test_tf2_names_of_keras_modules_are_keras_itself(spelled, keras):
    """`tf.losses.X` is allowed because it is the very object `keras.losses.X` (measured here),
    and only then: TF 1's `tf.losses.softmax_cross_entropy` is not folded into Keras."""
    module = spelled.split(".")[1]
    assert getattr(getattr(tf, module), keras) is getattr(getattr(tf.keras, module), keras)
    assert allowlist.allowed(spelled) and allowlist.entry(spelled) == f"keras.{module}.{keras}"
    assert allowlist.entry("tensorflow.losses.softmax_cross_entropy") == "tensorflow.losses.softmax_cross_entropy"


def test_every_rule_has_a_probe_and_every_probe_kind_a_runner():
    """Each rule's own examples of the mistake carry a probe the worker has a runner for; every
    runner's rule exists."""
    for rule in ALL_RULES.values():
        for example in rule.INVALID:
            findings, _ = lint_module("example.py", textwrap.dedent(example.source), [rule])
            for finding in findings:
                assert finding.probe is not None, (rule.code, example.source)
                assert (finding.code, finding.probe["kind"]) in PROBES, (rule.code, finding.probe["kind"])
    assert {code for code, _ in PROBES} <= set(ALL_RULES)
    assert {code for code, _ in PROBES} == set(ALL_RULES)


def test_the_contract_is_a_leaf_the_worker_may_import():
    from test_architecture import import_graph

    graph = import_graph()
    assert graph["cliplint.probes"] == set()
    assert "cliplint.probes" in graph["cliplint.verify.payload"]


def test_a_field_with_named_values_takes_only_those():
    """The contract checks a closed field (which other activation came first, CL010) against its
    values: the worker is never asked to look up a name it has no entry for."""
    from cliplint.probes import Malformed, parse

    op = "tensorflow.nn.softmax_cross_entropy_with_logits"
    assert parse("CL010", {"kind": "softmax", "op": op, "squashed": "sigmoid"}).squashed == "sigmoid"
    assert parse("CL010", {"kind": "softmax", "op": op}).squashed is None
    with pytest.raises(Malformed, match="not one of 'softmax', 'sigmoid'"):
        parse("CL010", {"kind": "softmax", "op": op, "squashed": "__import__"})
