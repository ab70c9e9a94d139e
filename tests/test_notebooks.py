"""Notebooks: cells as one program, magics, positions, suppressions, malformed input, verify."""
import json

import pytest


def notebook(cells, extra=None):
    data = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": kind, "metadata": {}, "source": source, **({"outputs": [], "execution_count": None}
                                                                   if kind == "code" else {})}
        for kind, source in cells]}
    data.update(extra or {})
    return json.dumps(data)


CONFLICT = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)"


def lint(tmp_path, run_cli, name, text, *args):
    (tmp_path / name).write_text(text)
    result = run_cli("--output-format", "json", *args, name)
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout), result


def test_cell_positions_in_json_and_text(tmp_path, run_cli):
    text = notebook([("markdown", "# title"), ("code", "x = 1"), ("code", CONFLICT)])
    records, _ = lint(tmp_path, run_cli, "nb.ipynb", text)
    assert [(r["cell"], r["line"], r["column"], r["code"]) for r in records] == [(3, 2, 7, "CL001")]
    assert run_cli("nb.ipynb").stdout.startswith("nb.ipynb:cell 3:2:7: CL001 error: ")


def test_magics_are_neutralised_without_shifting_positions(tmp_path, run_cli):
    code = ["%load_ext autoreload\n", "!pip install tf\n", "files = !ls\n", "model?\n",
            "import tensorflow as tf\n", "if True:\n", "    %time x = 1\n",
            "    opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"]
    records, _ = lint(tmp_path, run_cli, "nb.ipynb", notebook([("code", code), ("code", "%%bash\nls -l\necho ?")]))
    assert [(r["cell"], r["line"], r["column"]) for r in records] == [(1, 8, 11)]


def test_noqa_in_cells_and_file_level_only_in_first_code_cell(tmp_path, run_cli):
    text = notebook([("code", "# cliplint: noqa: CL004\nimport tensorflow as tf"),
                     ("code", "lp = tf.math.log(tf.nn.softmax(z))\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)  # noqa: CL001"),
                     ("code", "opt2 = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)")])
    records, _ = lint(tmp_path, run_cli, "a.ipynb", text)
    assert [(r["cell"], r["code"]) for r in records] == [(3, "CL001")]
    late = notebook([("code", "import tensorflow as tf"), ("code", "# cliplint: noqa\n" + CONFLICT)])
    records, _ = lint(tmp_path, run_cli, "b.ipynb", late)
    assert [r["code"] for r in records] == ["CL001"]  # a file-level noqa counts only in the first code cell


@pytest.mark.parametrize("text,message", [
    ("{not json, clipnorm", "invalid JSON"),
    (json.dumps({"nbformat": 4, "metadata": {}, "clipnorm": 1}), "no `cells` list"),
    (notebook([("code", CONFLICT)]).replace('"source": "import', '"source": 42, "x": "import'), "not text"),
])
def test_malformed_notebooks_give_cl000_and_the_tree_goes_on(tmp_path, run_cli, text, message):
    (tmp_path / "good.py").write_text(CONFLICT + "\n")
    records, _ = lint(tmp_path, run_cli, "bad.ipynb", text, ".")
    bad = [r for r in records if r["path"] == "bad.ipynb"]
    assert len(bad) == 1 and bad[0]["code"] == "CL000" and message in bad[0]["message"]
    assert [r["code"] for r in records if r["path"] == "good.py"] == ["CL001"]


def test_a_cell_with_a_syntax_error_does_not_hide_the_others(tmp_path, run_cli):
    text = notebook([("code", "import tensorflow as tf"), ("code", "def broken(:\n    pass"), ("code", CONFLICT)])
    records, _ = lint(tmp_path, run_cli, "nb.ipynb", text)
    assert [(r["cell"], r["code"]) for r in records] == [(2, "CL000"), (3, "CL001")]


def test_sarif_and_github_name_the_cell(tmp_path, run_cli):
    (tmp_path / "nb.ipynb").write_text(notebook([("markdown", "x"), ("code", CONFLICT)]))
    sarif = json.loads(run_cli("--output-format", "sarif", "nb.ipynb").stdout)
    result = sarif["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "nb.ipynb"
    assert result["message"]["text"].startswith("(cell 2, line 2)") and result["properties"]["cell"] == 2
    assert "::CL001 (cell 2, line 2)" in run_cli("--output-format", "github", "nb.ipynb").stdout


def test_verify_on_a_notebook(tmp_path, run_cli):
    pytest.importorskip("tensorflow")
    text = notebook([("code", "import tensorflow as tf\nprobs = tf.nn.softmax(logits)"),
                     ("code", "loss = -tf.reduce_sum(y * tf.math.log(probs))")])
    records, _ = lint(tmp_path, run_cli, "nb.ipynb", text, "--verify")
    assert records[0]["cell"] == 2 and records[0]["verification"]["verdict"] == "confirmed"
