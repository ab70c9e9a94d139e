"""`--fix --verify`: each fix's probe runs on the fixed snippet with real TensorFlow (no mocks)."""
import pytest

from cliplint.fix import FixVerifier, offered
from cliplint.rules import ALL_RULES

pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def verifier():
    session = FixVerifier(timeout=120)
    yield session
    session.close()


@pytest.mark.parametrize("code,source", [
    ("CL004", "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n"),
    ("CL005", ALL_RULES["CL005"].INVALID[2].source),
    ("CL006", ALL_RULES["CL006"].INVALID[0].source),
])
def test_fix_is_verified_with_tensorflow(verifier, code, source):
    edit = offered("x.py", source, [ALL_RULES[code]])[0]
    ok, note = verifier(edit)
    assert ok and note.startswith("fixed and verified:"), note


def test_a_fix_whose_fixed_snippet_still_reproduces_is_refused(verifier):
    source = "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n"
    edit = offered("x.py", source, [ALL_RULES["CL004"]])[0]
    unfixed_log = {**edit.fixed_probe["log"], "code": "tf.math.log(tf.nn.softmax(logits))"}
    still_broken = {**edit.fixed_probe, "log": unfixed_log}
    ok, note = verifier(type(edit)(**{**edit.__dict__, "fixed_probe": still_broken}))
    assert not ok and note.startswith("fix not applied"), note
