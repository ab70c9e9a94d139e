"""Baselines through the command: record today's findings of every file
kind, report only new ones, stable when code moves, and in pre-commit."""
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CLIP = "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"
TRAIN = "import tensorflow as tf\n" + CLIP + "probs = tf.nn.softmax(logits)\nlp = tf.math.log(probs)\n"
YAML = "optimizer:\n  class_name: Adam\n  config:\n    clipnorm: 1.0\n    clipvalue: 0.5\n"
NOTEBOOK = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": TRAIN}]}, indent=1)
KERAS = {"class_name": "Sequential", "config": {},
         "compile_config": {"optimizer": {"module": "keras.optimizers", "class_name": "Adam",
                                          "config": {"learning_rate": 0.001, "clipnorm": 1.0, "clipvalue": 0.5}}}}


@pytest.fixture
def legacy(tmp_path):
    """A codebase with findings in every kind of file cliplint reads."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    (tmp_path / "explore.ipynb").write_text(NOTEBOOK)
    (tmp_path / "exp.yaml").write_text(YAML)
    shutil.copy(FIXTURES / "configs" / "training.toml", tmp_path / "training.toml")
    shutil.copy(FIXTURES / "configs" / "sweep.json", tmp_path / "sweep.json")
    with zipfile.ZipFile(tmp_path / "model.keras", "w") as archive:
        archive.writestr("config.json", json.dumps(KERAS))
        archive.writestr("metadata.json", "{}")
    return tmp_path


def _kinds(records):
    return {os.path.splitext(r["path"])[1] for r in records}


def test_a_baseline_hides_todays_findings_of_every_kind(legacy, run_cli):
    today = json.loads(run_cli("--output-format", "json", ".", cwd=legacy).stdout)
    assert _kinds(today) == {".py", ".ipynb", ".yaml", ".toml", ".json", ".keras"}
    written = run_cli("--write-baseline", "cliplint-baseline.json", ".", cwd=legacy)
    assert written.returncode == 0 and written.stdout == f"Wrote a baseline of {len(today)} findings to " \
        "cliplint-baseline.json.\n"
    baseline = json.loads((legacy / "cliplint-baseline.json").read_text())
    assert baseline["format"] == "cliplint-baseline" and all("line" not in e for e in baseline["findings"])
    result = run_cli("--baseline", "cliplint-baseline.json", ".", cwd=legacy)
    assert result.returncode == 0 and "All checks passed!" in result.stdout, result.stdout
    assert f"cliplint: {len(today)} findings in the baseline cliplint-baseline.json not shown" in result.stderr


def test_moved_code_keeps_its_entry_and_new_code_is_reported(legacy, run_cli):
    run_cli("--write-baseline", "cliplint-baseline.json", ".", cwd=legacy)
    train = legacy / "src" / "train.py"
    train.write_text("import os\n\n\n" + train.read_text() + "\ndef more():\n    " + CLIP)  # moved down, one more
    (legacy / "exp.yaml").write_text("# moved\nseed: 1\n" + YAML)
    result = run_cli("--baseline", "cliplint-baseline.json", "--output-format", "json", ".", cwd=legacy)
    new = json.loads(result.stdout)
    assert [(r["path"], r["line"], r["code"]) for r in new] == [("src/train.py", 10, "CL001")]
    assert result.returncode == 1


def test_the_baseline_works_from_another_folder(legacy, run_cli):
    run_cli("--write-baseline", "cliplint-baseline.json", ".", cwd=legacy)
    result = run_cli("--baseline", "../cliplint-baseline.json", ".", cwd=legacy / "src")
    assert result.returncode == 0, result.stdout


def test_a_fixed_mistake_leaves_the_baseline_and_a_second_copy_is_new(tmp_path, run_cli):
    (tmp_path / "a.py").write_text("import tensorflow as tf\n" + CLIP)
    run_cli("--write-baseline", "b.json", "a.py")
    (tmp_path / "a.py").write_text("import tensorflow as tf\n" + CLIP + CLIP)
    result = run_cli("--baseline", "b.json", "a.py")
    assert result.returncode == 1 and result.stdout.startswith("a.py:3:7: CL001") and "Found 1 problem" in result.stdout


@pytest.mark.parametrize("content,message", [
    (None, "cannot read the baseline b.json"),
    ("{not json", "b.json: not a cliplint baseline (invalid JSON"),
    ('{"format": "other"}', "b.json: not a cliplint baseline of version 1"),
    ('{"format": "cliplint-baseline", "version": 1, "findings": [{"code": "CL001"}]}', "a baseline entry needs"),
])
def test_a_bad_baseline_is_a_usage_error(tmp_path, run_cli, content, message):
    (tmp_path / "a.py").write_text("import tensorflow as tf\n" + CLIP)
    if content is not None:
        (tmp_path / "b.json").write_text(content)
    result = run_cli("--baseline", "b.json", "a.py")
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_writing_a_baseline_fixes_nothing_and_refuses_both_flags(tmp_path, run_cli):
    (tmp_path / "pyproject.toml").write_text("[tool.cliplint]\nfix = true\n")
    source = "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n"
    (tmp_path / "a.py").write_text(source)
    assert run_cli("--write-baseline", "b.json", "a.py").returncode == 0
    assert (tmp_path / "a.py").read_text() == source
    both = run_cli("--write-baseline", "b.json", "--baseline", "b.json", "a.py")
    assert both.returncode == 2 and "--write-baseline and --baseline together" in both.stderr


def test_a_baseline_in_pre_commit(tmp_path):
    if shutil.which("git") is None or shutil.which("pre-commit") is None:
        pytest.skip("needs git and pre-commit")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "home"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {ROOT}\n    rev: {head.stdout.strip()}\n    hooks:\n      - id: cliplint\n"
        "        args: [--baseline, cliplint-baseline.json]\n")
    (repo / "train.py").write_text(TRAIN)
    (repo / "exp.yaml").write_text(YAML)
    subprocess.run(["cliplint", "--write-baseline", "cliplint-baseline.json", "."], cwd=repo, check=True, env=env)
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)

    def pre_commit():
        return subprocess.run(["pre-commit", "run", "--all-files"], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=900)

    passed = pre_commit()
    assert passed.returncode == 0 and "Passed" in passed.stdout, passed.stdout + passed.stderr
    (repo / "new.py").write_text("import tensorflow as tf\n" + CLIP)
    subprocess.run(["git", "add", "new.py"], cwd=repo, check=True, env=env)
    failed = pre_commit()
    assert failed.returncode == 1 and "new.py:2:7: CL001" in failed.stdout and "train.py:" not in failed.stdout
