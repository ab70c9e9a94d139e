"""The value-flow engine on generated programs (tests/flow_matrix.py): a fixed sample of every
source x carrier x sink, carriers nested in pairs; `bench/flow_matrix.py` runs the whole matrix."""
import re

import pytest
from flow_matrix import CARRIERS, build, check, sample, starred


@pytest.mark.parametrize("program", sample(300), ids=lambda p: p.label)
def test_mistake_found_twins_clean_gate_exact(program):
    outcome = check(program)
    assert outcome.found, program.text
    assert outcome.twin_findings == (), (outcome.twin_findings, program.twins)
    assert outcome.gate_agrees, program.text


@pytest.mark.parametrize("carrier", sorted(CARRIERS))
def test_every_carrier_at_least_once(carrier):
    program = build("tf.nn.softmax", [carrier], "tf.math.log")
    outcome = check(program)
    assert outcome.found and not outcome.twin_findings and outcome.gate_agrees, program.text


KERAS_SPELLED = re.compile(r"(?<![\w.])keras\.(layers|backend)\.|(?<![\w.])keras\.(Sequential|Model)\(")


@pytest.mark.parametrize("program", [p for p in sample(600, seed=7) if KERAS_SPELLED.search(p.text)][:60],
                         ids=lambda p: p.label)
def test_star_imported_keras_names_are_the_same_names(program):
    # `from keras.layers import *`, then `Dense(...)`, `Model(...)`, `K.log(...)`
    outcome = check(starred(program))
    assert outcome.found and not outcome.twin_findings and outcome.gate_agrees, starred(program).text
