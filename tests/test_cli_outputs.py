"""Issue 29 items 4 and 8, through the installed command: --add-noqa in every file kind with
comments (and what it could not suppress), the order of a --fix run's lines, -q with
--show-fixes; and a finding the verifier did not reproduce is no error in the editor."""
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLIP = "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"
YAML = "optimizer:\n  class_name: Adam\n  config:\n    clipnorm: 1.0  # tuned\n    clipvalue: 0.5\n"
TWO_FIXES = "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\nb = tf.math.log(tf.nn.softmax(x))\n"


def test_add_noqa_covers_yaml_and_toml_and_names_what_it_cannot(tmp_path, run_cli):
    for name in ("training.toml", "sweep.json"):
        shutil.copy(ROOT / "fixtures" / "configs" / name, tmp_path / name)
    (tmp_path / "exp.yaml").write_text(YAML)
    (tmp_path / "train.py").write_text("import tensorflow as tf\n" + CLIP)
    (tmp_path / "broken.py").write_text("import tensorflow as tf\np = tf.nn.softmax(x)\ndef f(:\n")
    before = json.loads(run_cli("--output-format", "json", ".").stdout)
    assert {r["path"] for r in before} == {"training.toml", "sweep.json", "exp.yaml", "train.py", "broken.py"}
    result = run_cli("--add-noqa", ".")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "Added 4 noqa directives.",
        "Not suppressed: 2 findings where no comment can go (JSON configs and .keras archives hold no comments; "
        "CL000 is fixed, not silenced; use per-file-ignores or a baseline):",
        "  broken.py:3:7: CL000",
        "  sweep.json:11:5: CL001"]
    assert "    clipvalue: 0.5  # noqa: CL001\n" in (tmp_path / "exp.yaml").read_text()
    assert "    clipnorm: 1.0  # tuned\n" in (tmp_path / "exp.yaml").read_text()
    toml = (tmp_path / "training.toml").read_text()
    assert "clipvalue = 0.1  # expect: CL001  # noqa: CL001\n" in toml and "# noqa: CL009" in toml
    after = json.loads(run_cli("--output-format", "json", ".").stdout)
    assert sorted(r["path"] for r in after) == ["broken.py", "sweep.json"]
    assert run_cli("--add-noqa", ".").stdout.startswith("Added 0 noqa directives.")  # idempotent


def test_a_fix_run_says_what_it_fixed_before_all_checks_passed(tmp_path, run_cli):
    (tmp_path / "a.py").write_text(TWO_FIXES)
    lines = run_cli("--fix", "a.py").stdout.splitlines()
    assert lines == ["Fixed 2 problems (0 remaining).", "All checks passed! (1 file checked)"]


def test_fixed_lines_come_before_the_summary_of_what_remains(tmp_path, run_cli):
    (tmp_path / "a.py").write_text(TWO_FIXES + CLIP)
    lines = run_cli("--fix", "--show-fixes", "a.py").stdout.splitlines()
    assert lines[0].startswith("a.py:4:7: CL001 error:")
    assert lines[1:4] == ["a.py:2:6: CL004 fixed: use `tf.nn.log_softmax(logits)`",
                          "a.py:3:5: CL004 fixed: use `tf.nn.log_softmax(x)`",
                          "Fixed 2 problems (1 remaining; 1 more with --unsafe-fixes)."]
    assert lines[4] == "Found 1 problem in 1 file."


def test_quiet_keeps_show_fixes(tmp_path, run_cli):
    (tmp_path / "a.py").write_text(TWO_FIXES)
    fixed = run_cli("--fix", "-q", "--show-fixes", "a.py")
    assert fixed.stdout.splitlines() == ["a.py:2:6: CL004 fixed: use `tf.nn.log_softmax(logits)`",
                                         "a.py:3:5: CL004 fixed: use `tf.nn.log_softmax(x)`"]
    (tmp_path / "b.py").write_text(TWO_FIXES)
    offered = run_cli("-q", "--show-fixes", "b.py").stdout.splitlines()
    assert offered[2:] == ["b.py:2:6: CL004 safe fix: use `tf.nn.log_softmax(logits)`",
                           "b.py:3:5: CL004 safe fix: use `tf.nn.log_softmax(x)`"]


def test_offered_fixes_in_a_notebook_name_the_cell(tmp_path, run_cli):
    cell = "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n"
    (tmp_path / "nb.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# Intro"},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": cell}]}))
    assert "nb.ipynb:cell 2:2:6: CL004 safe fix:" in run_cli("--show-fixes", "nb.ipynb").stdout
    assert "--- nb.ipynb:cell 2\n" in run_cli("--diff", "nb.ipynb").stdout
    assert "nb.ipynb:cell 2:2:6: CL004 fixed:" in run_cli("--fix", "--show-fixes", "nb.ipynb").stdout


def test_a_finding_not_reproduced_is_information_in_the_editor():
    from lsprotocol import types

    from cliplint.findings import Finding
    from cliplint.server.protocol import severity

    finding = Finding("a.py", 1, 1, 1, 2, "CL001", "conflicting-clip-options", "error", "m")
    assert severity(finding) == types.DiagnosticSeverity.Error
    for verdict, expected in (("not-reproduced", types.DiagnosticSeverity.Information),
                              ("confirmed", types.DiagnosticSeverity.Error),
                              ("inconclusive", types.DiagnosticSeverity.Error)):
        checked = Finding(**{**finding.__dict__, "verification": {"verdict": verdict, "evidence": "e"}})
        assert severity(checked) == expected, verdict


def test_the_editor_shows_the_severity_the_settings_give(tmp_path):
    import os

    from cliplint.server.documents import PYTHON, Part, Snapshot, WorkspaceSettings, diagnose

    (tmp_path / "pyproject.toml").write_text('[tool.cliplint.severity]\nlog-of-softmax = "warning"\n')
    path = os.path.join(tmp_path, "a.py")
    text = "import tensorflow as tf\ny = tf.math.log(tf.nn.softmax(x))\n"
    snapshot = Snapshot(path, 1, PYTHON, path, str(tmp_path), (Part(path, text, 1),))
    (found,) = diagnose(snapshot, WorkspaceSettings())[path]
    assert (found.code, found.severity) == ("CL004", "warning")
