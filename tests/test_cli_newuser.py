"""Issue 29, through the installed command: what a new user ran into (settings of a folder
argument, CL000 under --select, files of other kinds named explicitly, default excludes, the
verify hook's dependencies)."""
import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
FIXABLE = "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n"
FIXED = "import tensorflow as tf\nlp = tf.nn.log_softmax(logits)\n"
BAD = textwrap.dedent("""\
    import tensorflow as tf
    opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)
""")


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("where,args", [("", ["."]), ("", ["src/"]), ("src/", ["src/"]), ("src/", ["src"]),
                                        ("", [])])
def test_fix_true_applies_to_a_folder_argument(tmp_path, run_cli, where, args):
    write(tmp_path, where + "pyproject.toml", "[tool.cliplint]\nfix = true\n")
    train = write(tmp_path, "src/train.py", FIXABLE)
    result = run_cli(*args)
    assert train.read_text() == FIXED, result.stdout + result.stderr
    assert result.returncode == 0


def test_a_folders_own_settings_decide_its_force_exclude(tmp_path, run_cli):
    write(tmp_path, "src/pyproject.toml", '[tool.cliplint]\nforce-exclude = true\nextend-exclude = ["gen"]\n')
    write(tmp_path, "src/gen/train.py", BAD)
    assert run_cli("src/gen").returncode == 0  # src/'s settings exclude src/gen, named or not


@pytest.mark.parametrize("selection", [["--select", "CL001"], ["--select", "CL004"], ["--ignore", "CL00"],
                                       ["--select", "log-of-softmax"]])
def test_a_file_that_does_not_parse_is_reported_whatever_the_selection(tmp_path, run_cli, selection):
    # it names `softmax` (CL004's token) but not CL001's: reported with the default selection,
    # so with any other too
    write(tmp_path, "broken.py", "import tensorflow as tf\np = tf.nn.softmax(\ndef f(:\n")
    result = run_cli(*selection, "--output-format", "json", "broken.py")
    assert [r["code"] for r in json.loads(result.stdout)] == ["CL000"] and result.returncode == 1


def test_cl000_goes_only_when_ignored_by_name(tmp_path, run_cli):
    write(tmp_path, "broken.py", "import tensorflow as tf\np = tf.nn.softmax(\ndef f(:\n")
    for ignored in ("CL000", "unreadable-file"):
        assert run_cli("--select", "CL001", "--ignore", ignored, "broken.py").returncode == 0
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nselect = ["CL001"]\n')
    assert "CL000" in run_cli("broken.py").stdout


def test_named_files_of_other_kinds_are_skipped_with_a_note_under_verbose(tmp_path, run_cli):
    write(tmp_path, "NOTES.md", "# Notes\n\nclipnorm clipvalue (\n")
    write(tmp_path, "requirements.txt", "tensorflow>=2.16\n")
    write(tmp_path, "Makefile", "all:\n\tpython train.py\n")
    write(tmp_path, "run", "#!/usr/bin/env python3\n" + BAD)  # a script without a suffix is Python
    write(tmp_path, "train.py", BAD)
    quiet = run_cli("NOTES.md", "requirements.txt", "Makefile", "run", "train.py")
    assert "CL000" not in quiet.stdout and "NOTES.md" not in quiet.stdout + quiet.stderr
    assert re.findall(r"^(\S+?):\d+:\d+: (CL\d+)", quiet.stdout, re.M) == [("run", "CL001"), ("train.py", "CL001")]
    verbose = run_cli("-v", "NOTES.md", "requirements.txt", "train.py")
    assert "cliplint: skipped NOTES.md: not a file kind cliplint lints" in verbose.stderr
    assert "cliplint: skipped requirements.txt:" in verbose.stderr
    alone = run_cli("NOTES.md")  # nothing left to lint is not "lint the current folder"
    assert alone.returncode == 0 and "All checks passed! (0 files checked)" in alone.stdout


@pytest.mark.parametrize("folder", ["build", ".pytest_cache", ".vscode", ".pyenv", "site-packages", "_build"])
def test_ruffs_default_excludes(tmp_path, run_cli, folder):
    write(tmp_path, f"{folder}/lib/train.py", BAD)
    write(tmp_path, "ok.py", "x = 1\n")
    result = run_cli(".")
    assert result.returncode == 0 and "(1 file checked)" in result.stdout


def test_the_verify_hook_installs_the_verify_extra_with_seccomp():
    import tomllib

    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["verify"]
    assert hooks["cliplint-verify"]["additional_dependencies"] == extra
    assert any(dependency.startswith("pyseccomp") for dependency in extra)


def test_the_docs_say_how_to_keep_ruff_and_flake8_from_touching_cliplint_codes():
    guide = (ROOT / "docs" / "adopting.md").read_text()
    assert 'external = ["CL"]' in guide and "RUF100" in guide and "RUF102" in guide
    assert "**With flake8.**" in guide


# --- severity gating and run-wide settings -------------------------------------------------------

TWO = BAD + "probs = tf.nn.softmax(logits)\nlp = tf.math.log(probs)\n"  # CL001 and CL004


def _codes_and_levels(result):
    return [(r["code"], r["severity"]) for r in json.loads(result.stdout)]


def test_fail_on_error_passes_a_run_with_warnings_only(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint.severity]\nCL = "warning"\nCL004 = "error"\n')
    write(tmp_path, "train.py", TWO)
    result = run_cli("--output-format", "json", "train.py")
    assert _codes_and_levels(result) == [("CL001", "warning"), ("CL004", "error")] and result.returncode == 1
    write(tmp_path, "pyproject.toml", '[tool.cliplint.severity]\nCL = "warning"\n')
    text = run_cli("train.py")
    assert "train.py:2:7: CL001 warning:" in text.stdout and text.returncode == 1  # default: any finding fails
    passing = run_cli("--fail-on", "error", "train.py")
    assert passing.returncode == 0 and "CL004 warning" in passing.stdout  # still shown, not blocking
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nfail-on = "error"\n[tool.cliplint.severity]\nCL = "warning"\n')
    assert run_cli("train.py").returncode == 0
    assert run_cli("--fail-on", "warning", "train.py").returncode == 1  # the flag wins


def test_severity_appears_in_every_output(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint.severity]\nconflicting-clip-options = "warning"\n')
    write(tmp_path, "train.py", BAD)
    sarif = json.loads(run_cli("--output-format", "sarif", "train.py").stdout)
    assert sarif["runs"][0]["results"][0]["level"] == "warning"
    assert run_cli("--output-format", "github", "train.py").stdout.startswith("::warning ")


@pytest.mark.parametrize("table,message", [
    ('[tool.cliplint.severity]\nCL001 = "info"\n', '`severity.CL001` must be "error" or "warning"'),
    ('[tool.cliplint.severity]\nCL999 = "error"\n', "unknown rule selector 'CL999'"),
    ('[tool.cliplint]\nfail-on = "never"\n', '`fail-on` must be "error" or "warning"'),
    ('[tool.cliplint]\nverify-timeout = 0\n', "`verify-timeout` must be a number of seconds above 0"),
    # a checkout's settings may shorten the limits its own code runs under, never lengthen them
    ('[tool.cliplint]\nverify-timeout = 3600\n', "`verify-timeout` may be at most its default (30 s)"),
    ('[tool.cliplint]\nverify-budget = 1e9\n', "`verify-budget` may be at most its default (600 s)"),
    ('[tool.cliplint]\njobs = -1\n', "`jobs` must be a whole number, 0 or more"),
    ('[tool.cliplint]\ncache-dir = 3\n', "`cache-dir` must be a folder path"),
])
def test_bad_run_settings_are_config_errors(tmp_path, run_cli, table, message):
    write(tmp_path, "pyproject.toml", table)
    write(tmp_path, "train.py", BAD)
    result = run_cli("train.py")
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_cache_dir_setting_and_its_precedence(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\ncache-dir = "build-cache/cl"\n')
    write(tmp_path, "src/train.py", BAD)
    run_cli("src")
    assert (tmp_path / "build-cache" / "cl").is_dir() and not (tmp_path / ".cliplint_cache").exists()
    run_cli("src", env={"CLIPLINT_CACHE_DIR": str(tmp_path / "from-env")})
    assert (tmp_path / "from-env").is_dir()  # the environment wins over the file
    run_cli("--cache-dir", "flag-cache", "src", env={"CLIPLINT_CACHE_DIR": str(tmp_path / "env2")})
    assert (tmp_path / "flag-cache").is_dir() and not (tmp_path / "env2").exists()  # the flag over both


@pytest.mark.parametrize("value", ["../outside", "/tmp/elsewhere", "link/cache"])
def test_a_checkouts_cache_dir_cannot_point_outside_it(tmp_path, run_cli, value):
    checkout, outside = tmp_path / "checkout", tmp_path / "outside"
    outside.mkdir()
    (checkout / "link").parent.mkdir()
    (checkout / "link").symlink_to(outside)
    write(checkout, "pyproject.toml", f'[tool.cliplint]\ncache-dir = "{value}"\n')
    write(checkout, "train.py", BAD)
    result = run_cli(".", cwd=checkout)
    assert result.returncode == 2 and "`cache-dir` must be a folder inside" in result.stderr
    assert list(outside.iterdir()) == []


def test_jobs_and_verify_settings_are_read(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\njobs = 1\nverify-timeout = 5\nverify-budget = 60.5\n')
    write(tmp_path, "train.py", BAD)
    from cliplint.settings import Config

    settings = Config().for_path(str(tmp_path / "train.py"))
    assert [settings.run_setting(n) for n in ("jobs", "verify_timeout", "verify_budget", "fail_on")] == \
        [1, 5.0, 60.5, "warning"]
    assert run_cli("train.py").returncode == 1


def test_the_log_softmax_fix_title_says_what_it_replaces_not_that_it_removes_a_line(tmp_path, run_cli):
    """The fix rewrites the log; `action_probs = tf.nn.softmax(logits)` stays where it is."""
    write(tmp_path, "step.py", "import tensorflow as tf\n\ndef step(logits):\n"
                               "    action_probs = tf.nn.softmax(logits)\n    return tf.math.log(action_probs)\n")
    shown = run_cli("--show-fixes", "step.py").stdout
    assert "use `tf.nn.log_softmax(logits)` (instead of `action_probs`)" in shown and "removes" not in shown
    run_cli("--fix", "--unsafe-fixes", "step.py")
    assert "action_probs = tf.nn.softmax(logits)" in (tmp_path / "step.py").read_text()
