"""Fixes in the machine outputs, through the installed command: JSON carries each
finding's fix as ruff's JSON does (title, applicability, edits with 1-based ranges), SARIF its
`fixes`; the edits, applied, give what `--fix` writes."""
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path("/work/shared/schemas/sarif-schema-2.1.0.json")
if not SCHEMA.exists():
    SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"
SOURCE = ("import tensorflow as tf\n"
          "lp = tf.math.log(tf.nn.softmax(logits))\n"
          "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"
          "probs = tf.nn.softmax(z)\n"
          "x = tf.math.log(probs)\n")


def _apply(text, edits):
    """Ruff's edit semantics: 1-based rows and columns, the end exclusive."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(point):
        return starts[point["row"] - 1] + point["column"] - 1

    for edit in sorted(edits, key=lambda e: offset(e["location"]), reverse=True):
        text = text[:offset(edit["location"])] + edit["content"] + text[offset(edit["end_location"]):]
    return text


@pytest.mark.parametrize("unsafe", [False, True])
def test_json_edits_applied_give_what_fix_writes(tmp_path, run_cli, unsafe):
    (tmp_path / "a.py").write_text(SOURCE)
    records = json.loads(run_cli("--output-format", "json", "a.py").stdout)
    fixes = [r["fix"] for r in records if r["fix"]]
    assert fixes and all(set(f) == {"title", "applicability", "edits"} for f in fixes)
    assert {f["applicability"] for f in fixes} == {"safe", "unsafe"}
    assert all(r["fix"] is None or r["fix"]["edits"] for r in records)
    chosen = [e for f in fixes if unsafe or f["applicability"] == "safe" for e in f["edits"]]
    by_json = _apply(SOURCE, chosen)
    run_cli("--fix", *(["--unsafe-fixes"] if unsafe else []), "a.py")
    fixed = (tmp_path / "a.py").read_text()
    assert by_json == fixed  # here one round of --fix applies them all (a fix may offer another)
    assert "tf.nn.log_softmax(logits)" in by_json


def test_json_lines_carries_the_fix_too(tmp_path, run_cli):
    (tmp_path / "a.py").write_text(SOURCE)
    first = json.loads(run_cli("--output-format", "json-lines", "a.py").stdout.splitlines()[0])
    assert first["code"] == "CL004" and first["fix"]["edits"][0]["location"] == {"row": 2, "column": 9}


def test_a_notebook_fix_is_placed_in_its_cell(tmp_path, run_cli):
    cell = "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n"
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# Intro"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": cell}]}
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook))
    [record] = json.loads(run_cli("--output-format", "json", "nb.ipynb").stdout)
    [edit] = record["fix"]["edits"]
    assert record["cell"] == 2 and edit["cell"] == 2
    assert _apply(cell, [edit]) == "import tensorflow as tf\nlp = tf.nn.log_softmax(logits)\n"


def test_sarif_fixes_validate_against_the_schema(tmp_path, run_cli):
    jsonschema = pytest.importorskip("jsonschema")
    (tmp_path / "a.py").write_text(SOURCE)
    log = json.loads(run_cli("--output-format", "sarif", "a.py").stdout)
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)
    assert list(validator(schema, format_checker=jsonschema.FormatChecker()).iter_errors(log)) == []
    results = log["runs"][0]["results"]
    fixed = [r for r in results if "fixes" in r]
    assert fixed and all(r["ruleId"] in ("CL001", "CL004") for r in fixed)
    change = fixed[0]["fixes"][0]["artifactChanges"][0]
    assert change["artifactLocation"] == {"uri": "a.py", "uriBaseId": "%SRCROOT%"}
    assert change["replacements"][0] == {"deletedRegion": {"startLine": 2, "startColumn": 9, "endLine": 2,
                                                           "endColumn": 39},
                                         "insertedContent": {"text": "nn.log_softmax(logits"}}
    assert fixed[0]["fixes"][0]["description"]["text"] == "use `tf.nn.log_softmax(logits)` (safe fix)"


def test_no_fix_is_null_in_json(tmp_path, run_cli):
    shutil.copy(ROOT / "fixtures" / "configs" / "training.toml", tmp_path / "t.toml")
    records = json.loads(run_cli("--output-format", "json", "t.toml").stdout)
    assert records and all(r["fix"] is None for r in records)
