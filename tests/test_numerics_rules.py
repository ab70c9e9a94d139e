"""Round 3's numerics rules (CL011-CL015, CL010 on the with-logits ops) through the installed
command: the fixtures' findings with and without the gate, the verifier's measured evidence,
the fixes verified, and the rule metadata every output carries."""
import json
import shutil
from pathlib import Path

import pytest

from cliplint.analysis import lint_module
from cliplint.lint import lint_text
from cliplint.rules import ALL_RULES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FILES = sorted(FIXTURES.glob("numerics_*.py")) + [FIXTURES / "clean_numerics_lookalikes.py"]
NEW = ("CL011", "CL012", "CL013", "CL014", "CL015")
SELECT = ",".join(("CL010",) + NEW)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_gate_and_reduced_parse_change_nothing_on_the_fixtures(path):
    """The prefilter tokens, the ast gate and the reduced parse leave the findings as the full run has them."""
    text = path.read_text()
    rules = list(ALL_RULES.values())
    gated, _ = lint_text(str(path), text, rules, path.name)
    ungated, _ = lint_module(str(path), text, rules, path.name)
    assert [(f.code, f.line, f.message) for f in gated] == [(f.code, f.line, f.message) for f in ungated]


def test_every_new_rule_is_found_in_the_fixtures(run_cli):
    result = run_cli("--select", SELECT, "--output-format", "json", *map(str, FILES))
    codes = {record["code"] for record in json.loads(result.stdout)}
    assert codes == {"CL010", *NEW}, result.stderr


def test_verify_confirms_each_fixture_finding_with_the_measured_values(run_cli):
    pytest.importorskip("tensorflow")
    result = run_cli("--select", SELECT, "--verify", "--output-format", "json", *map(str, FILES[:-1]))
    records = json.loads(result.stdout)
    verdicts = {(Path(r["path"]).name, r["line"], r["code"]): r["verification"] for r in records}
    assert all(v["verdict"] == "confirmed" for v in verdicts.values()), verdicts
    evidence = {code: " ".join(v["evidence"] for (_, _, c), v in verdicts.items() if c == code) for code in NEW}
    assert "nan" in evidence["CL011"] and "inf" in evidence["CL011"]
    assert "from_logits=True it is" in evidence["CL012"]
    assert "[1, 1, 1, 1]" in evidence["CL013"]
    assert "gradient [nan" in evidence["CL014"] and "gradient [nan" in evidence["CL015"]


def test_a_stable_expression_is_not_reproduced(tmp_path, run_cli):
    """The probe runs the user's own expression: a bounded input (clipped inside a helper the
    rule cannot see into) gives finite values, and the verifier says so."""
    pytest.importorskip("tensorflow")
    (tmp_path / "a.py").write_text("import tensorflow as tf\nx = v * 0.0\n"
                                   "p = tf.exp(x * 0.0) / tf.reduce_sum(tf.exp(x * 0.0), axis=-1, keepdims=True)\n")
    record = json.loads(run_cli("--select", "CL011", "--verify", "--output-format", "json", "a.py").stdout)[0]
    assert record["verification"]["verdict"] == "not-reproduced", record


def test_fixes_are_verified_by_the_worker(tmp_path, run_cli):
    pytest.importorskip("tensorflow")
    source = ("import tensorflow as tf\n"
              "p = tf.exp(x) / tf.reduce_sum(tf.exp(x), axis=-1, keepdims=True)\n"
              "lse = tf.math.log(tf.reduce_sum(tf.exp(z), axis=1))\n"
              "sp = tf.math.log(1.0 + tf.exp(z))\n"
              "std = tf.sqrt(tf.exp(log_var))\n"
              "def safe_log(v):\n    return tf.where(v > 0, tf.math.log(v), 0.0)\n")
    path = tmp_path / "a.py"
    path.write_text(source)
    result = run_cli("--select", "CL011,CL015", "--fix", "--verify", "a.py")
    assert result.stdout.count("fixed and verified") == 5, result.stdout + result.stderr
    fixed = path.read_text()
    assert "tf.nn.softmax(x, -1)" in fixed and "tf.reduce_logsumexp(z, axis=1)" in fixed
    assert "tf.nn.softplus(z)" in fixed and "tf.exp(0.5 * log_var)" in fixed
    assert "tf.math.log(tf.where(v > 0, v, 1.0))" in fixed


def test_unsafe_fixes_are_offered_only_with_the_flag(tmp_path, run_cli):
    shutil.copy(FIXTURES / "numerics_keras_classifier.py", tmp_path / "c.py")
    safe = run_cli("--select", "CL012,CL013", "--fix", "c.py")
    assert "Fixed 0" in safe.stdout or "Fixed" not in safe.stdout, safe.stdout
    run_cli("--select", "CL013", "--fix", "--unsafe-fixes", "c.py")
    assert 'keras.layers.Dense(1, activation="sigmoid")' in (tmp_path / "c.py").read_text()


@pytest.mark.parametrize("code", NEW)
def test_rules_explain_and_sarif_cover_the_new_rules(tmp_path, run_cli, code):
    rule = ALL_RULES[code]
    assert f"{code}  {rule.name}" in run_cli("rules").stdout
    explained = run_cli("explain", code).stdout
    assert "## Why is this bad?" in explained and "## Use instead" in explained
    sarif = json.loads(run_cli("--select", code, "--output-format", "sarif", *map(str, FILES)).stdout)
    described = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert described[code]["name"] == rule.name
