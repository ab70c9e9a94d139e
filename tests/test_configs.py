"""The config auditor: YAML, JSON, TOML and `.keras` archives, malformed input, suppression."""
import json
import os
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def findings(run_cli, *args, cwd=None):
    result = run_cli("--output-format", "json", *args, cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout), result.returncode


@pytest.mark.parametrize("name,content,message,line", [
    ("bad.yaml", "optimizer:\n  clipnorm: 1.0\n   clipvalue: [\n", "invalid YAML", 3),
    ("bad.json", '{"optimizer": {"clipnorm": 1.0,, "lr": 1}}', "invalid JSON", 1),
    ("bad.toml", "[optimizer]\nclipnorm = 1.0\nclipvalue = \n", "invalid TOML", 3),
    ("dup.yaml", "optimizer:\n  lr: 0.1\n  clipnorm: 1.0\n  clipnorm: 2.0\n", "duplicate key 'clipnorm'", 4),
    ("dup.json", '{"lr": 0.1,\n "clipnorm": 1, "clipnorm": 2}', "duplicate key 'clipnorm'", 1),
    ("anchor.yaml", "base: &opt\n  lr: 0.1\n  clipnorm: 1.0\nrun:\n  optimizer: *opt\n", "anchors and aliases", 1),
])
def test_malformed_configs_give_cl000_with_position(tmp_path, run_cli, name, content, message, line):
    (tmp_path / name).write_text(content)
    (tmp_path / "ok.yaml").write_text("optimizer:\n  name: adam\n  clipnorm: 1.0\n  clipvalue: 0.5\n")
    records, code = findings(run_cli, ".", cwd=tmp_path)
    bad = [r for r in records if r["path"] == name]
    assert len(bad) == 1 and bad[0]["code"] == "CL000" and message in bad[0]["message"], records
    assert bad[0]["line"] == line
    assert [r["code"] for r in records if r["path"] == "ok.yaml"] == ["CL001"]  # the rest is still audited


def test_yaml_is_loaded_safely(tmp_path, run_cli):
    (tmp_path / "evil.yaml").write_text(
        "optimizer: !!python/object/apply:os.system ['touch pwned']\nclipnorm: 1.0\n")
    records, _ = findings(run_cli, "evil.yaml", cwd=tmp_path)
    assert records[0]["code"] == "CL000" and "custom YAML tag" in records[0]["message"]
    assert not (tmp_path / "pwned").exists()


def test_noqa_in_yaml_and_toml_and_file_level(tmp_path, run_cli):
    (tmp_path / "a.yaml").write_text("optimizer:\n  name: adam\n  clipnorm: 1.0\n  clipvalue: 0.5  # noqa: CL001\n")
    (tmp_path / "b.toml").write_text("[optimizer]\nlr = 0.1\nclipnorm = 1.0\nclipvalue = 0.5  # noqa\n")
    (tmp_path / "c.yaml").write_text("# cliplint: noqa\noptimizer:\n  name: adam\n  clipnorm: 0\n")
    records, code = findings(run_cli, ".", cwd=tmp_path)
    assert records == [] and code == 0


def test_skipped_and_configurable_file_kinds(tmp_path, run_cli):
    conflicting = "optimizer:\n  name: adam\n  clipnorm: 1.0\n  clipvalue: 0.5\n"
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "train.yml").write_text(conflicting)
    (tmp_path / "package-lock.json").write_text('{"optimizer": {"name": "adam", "clipnorm": 1, "clipvalue": 1}}')
    (tmp_path / "exp.yml").write_text(conflicting)
    records, _ = findings(run_cli, ".", cwd=tmp_path)
    assert [r["path"] for r in records] == ["exp.yml"]
    (tmp_path / "pyproject.toml").write_text('[tool.cliplint]\nconfig-files = ["*.yaml"]\n')
    records, _ = findings(run_cli, ".", cwd=tmp_path)
    assert records == []
    # named on the command line: audited whatever the globs say
    records, _ = findings(run_cli, "exp.yml", cwd=tmp_path)
    assert [r["code"] for r in records] == ["CL001"]


def test_this_repository_has_no_config_findings(run_cli):
    records, _ = findings(run_cli, "--select", "CL001,CL009", ".", cwd=ROOT)
    assert [r for r in records if not r["path"].endswith((".py", ".pyi"))] == []


def _write_archive(path, config, compress=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compress) as archive:
        archive.writestr("config.json", json.dumps(config))
        archive.writestr("metadata.json", "{}")


def test_keras_archive_conflict_found_at_key_path(tmp_path, run_cli):
    config = {"class_name": "Sequential", "config": {},
              "compile_config": {"optimizer": {"module": "keras.optimizers", "class_name": "Adam",
                                               "config": {"learning_rate": 0.001, "clipnorm": 1.0,
                                                          "clipvalue": 0.5, "global_clipnorm": None}}}}
    _write_archive(tmp_path / "model.keras", config)
    records, _ = findings(run_cli, "model.keras", cwd=tmp_path)
    assert [r["code"] for r in records] == ["CL001"]
    assert "`compile_config.optimizer.config.clipvalue`" in records[0]["message"]


@pytest.mark.parametrize("make,message", [
    (lambda p: p.write_bytes(b"PK\x03\x04 not really a zip"), "not a .keras archive"),
    (lambda p: p.write_text("hello"), "not a .keras archive"),
    (lambda p: zipfile.ZipFile(p, "w").writestr("model.weights.h5", b"x"), "no config.json"),
    (lambda p: zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED).writestr("config.json", b" " * (20 * 1024 * 1024)),
     "above the"),
])
def test_bad_archives_give_cl000(tmp_path, run_cli, make, message):
    make(tmp_path / "model.keras")
    records, _ = findings(run_cli, "model.keras", cwd=tmp_path)
    assert records[0]["code"] == "CL000" and message in records[0]["message"]


def test_large_archive_is_read_lazily(tmp_path, run_cli):
    """A 64 MB archive (far above max-file-size) is audited from its config.json alone."""
    with zipfile.ZipFile(tmp_path / "big.keras", "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("config.json", json.dumps({"compile_config": {"optimizer": {
            "class_name": "SGD", "config": {"learning_rate": 0.1, "clipnorm": 0.0}}}}))
        archive.writestr("model.weights.h5", os.urandom(64 * 1024 * 1024))
    records, _ = findings(run_cli, "big.keras", cwd=tmp_path)
    assert [r["code"] for r in records] == ["CL009"]


def test_keras_saved_model_with_conflicting_optimizer(tmp_path, run_cli):
    """A .keras file written by Keras itself: the second option set as an attribute (Keras 3
    refuses it in the constructor) is saved in the optimizer config and reported there."""
    tf = pytest.importorskip("tensorflow")
    keras = tf.keras
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0)
    optimizer.clipvalue = 0.5
    model.compile(optimizer=optimizer, loss="mse")
    model.save(tmp_path / "saved.keras")
    records, code = findings(run_cli, "saved.keras", cwd=tmp_path)
    assert code == 1 and [r["code"] for r in records] == ["CL001"]
    assert "compile_config.optimizer.config.clipvalue" in records[0]["message"]
    verified, _ = findings(run_cli, "--verify", "saved.keras", cwd=tmp_path)
    assert verified[0]["verification"]["verdict"] == "confirmed"
