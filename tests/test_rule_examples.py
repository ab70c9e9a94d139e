"""Every rule's VALID/INVALID examples become tests (Fixit style)."""
import textwrap

import pytest

from cliplint.analysis import lint_module
from cliplint.rules import ALL_RULES

ALL = list(ALL_RULES.values())
VALID = [pytest.param(rule, src, id=f"{code}-valid-{i}") for code, rule in ALL_RULES.items()
         for i, src in enumerate(rule.VALID)]
INVALID = [pytest.param(rule, case, id=f"{code}-invalid-{i}") for code, rule in ALL_RULES.items()
           for i, case in enumerate(rule.INVALID)]


@pytest.mark.parametrize("rule,source", VALID)
def test_valid_example_produces_no_finding(rule, source):
    findings, crashed = lint_module("example.py", textwrap.dedent(source), ALL)
    assert not crashed
    assert [f for f in findings if f.code == rule.code] == []


@pytest.mark.parametrize("rule,case", INVALID)
def test_invalid_example_is_found(rule, case):
    findings, crashed = lint_module("example.py", textwrap.dedent(case.source), ALL)
    assert not crashed
    mine = [f for f in findings if f.code == rule.code and f.line == case.line]
    assert mine, f"expected {rule.code} on line {case.line}, got {[(f.code, f.line) for f in findings]}"
    if case.contains:
        assert any(case.contains in f.message for f in mine), [f.message for f in mine]
    if case.severity:
        assert {f.severity for f in mine} == {case.severity}


@pytest.mark.parametrize("code,rule", ALL_RULES.items())
def test_rule_is_documented_and_has_negative_cases(code, rule):
    assert rule.name and rule.summary and rule.why.strip() and rule.example.strip() and rule.instead.strip()
    assert len(rule.VALID) >= 3, "every rule needs look-alikes that a naive pattern would flag"
    assert len(rule.INVALID) >= 3
    assert rule.tokens, "the prefilter needs the rule's marker tokens"


@pytest.mark.parametrize("code,rule", ALL_RULES.items())
def test_every_invalid_example_contains_a_prefilter_token(code, rule):
    for case in rule.INVALID:
        assert any(token in case.source.encode() for token in rule.tokens), case.source


def test_catalogue_matches_the_rule_classes():
    """Regenerate with `python -m cliplint.docs` when this fails."""
    from cliplint import catalogue
    from cliplint.findings import UNREADABLE

    names = {code: rule.name for code, rule in ALL_RULES.items()}
    assert catalogue.codes() == {UNREADABLE.code: UNREADABLE.name, **names}
    assert catalogue.GENERATED == {code: (rule.name, type(rule).__module__.rsplit(".", 1)[-1])
                                   for code, rule in ALL_RULES.items()}
    assert catalogue.TOKENS == {code: tuple(t.decode() for t in rule.tokens) for code, rule in ALL_RULES.items()}


def test_a_file_no_rule_could_fire_on_imports_neither_the_rules_nor_libcst(tmp_path):
    """The token prefilter runs from the catalogue: a plain file costs the CLI and a read."""
    import subprocess
    import sys

    (tmp_path / "plain.py").write_text("import os\n\ndef f(x):\n    return x + 1\n")
    (tmp_path / "broken.py").write_text("import tensorflow as tf\nx = tf.nn.softmax(\n")
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "cliplint", "--no-cache", "--select",
                             "CL001", "plain.py", "broken.py"], cwd=tmp_path, capture_output=True, text=True)
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time")}
    assert "libcst" not in imported and "cliplint.rules" not in imported
    assert "broken.py:2:18: CL000" in result.stdout  # a syntax error is still reported, whatever the selection


@pytest.mark.parametrize("rule,case", INVALID)
def test_the_ast_gate_never_skips_an_invalid_example(rule, case):
    """`Rule.could_fire` may over-approximate but must say yes wherever the rule reports."""
    from cliplint.lint import facts_of, gate

    assert rule in gate(facts_of(textwrap.dedent(case.source)), [rule])


def _every_known_program():
    from pathlib import Path

    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    for path in sorted(fixtures.rglob("*.py")):
        yield pytest.param(path.read_text(encoding="utf-8", errors="replace"), id=path.name)
    for code, rule in ALL_RULES.items():
        for i, source in enumerate(rule.VALID):
            yield pytest.param(textwrap.dedent(source), id=f"{code}-valid-{i}")
        for i, case in enumerate(rule.INVALID):
            yield pytest.param(textwrap.dedent(case.source), id=f"{code}-invalid-{i}")


@pytest.mark.parametrize("source", list(_every_known_program()))
def test_gate_and_reduced_parse_change_no_result(source):
    """Every fixture and example: the engine (prefilter, ast gate, definitions no rule can see
    left out of the parse) finds exactly what every rule finds on the whole module."""
    from cliplint.lint import lint_bytes

    assert lint_bytes("program.py", source.encode(), ALL) == lint_module("program.py", source, ALL)
