"""The CLI contract, through the installed command: output lines, exit codes, config, noqa."""
import json
import os
import textwrap

import pytest

BAD = textwrap.dedent("""\
    import tensorflow as tf
    opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)
    probs = tf.nn.softmax(logits)
    lp = tf.math.log(probs)
""")
GOOD = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(global_clipnorm=1.0)\n"


def write(root, name, text, mode="w"):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_text_output_lines_sorted_and_summary(tmp_path, run_cli):
    write(tmp_path, "b.py", BAD)
    write(tmp_path, "a.py", BAD)
    result = run_cli(".")
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    assert lines[0].startswith("a.py:2:7: CL001 error: ")
    assert lines[1].startswith("a.py:4:6: CL004 error: ")
    assert lines[2].startswith("b.py:2:7: CL001")
    assert lines[-1] == "Found 4 problems in 2 files."


def test_clean_tree_exits_zero(tmp_path, run_cli):
    write(tmp_path, "ok.py", GOOD)
    result = run_cli(".")
    assert result.returncode == 0 and "All checks passed" in result.stdout


def test_exit_zero_and_quiet(tmp_path, run_cli):
    write(tmp_path, "a.py", BAD)
    result = run_cli("--exit-zero", "--quiet", "a.py")
    assert result.returncode == 0
    assert len(result.stdout.splitlines()) == 2  # findings only, no summary


def test_json_schema(tmp_path, run_cli):
    write(tmp_path, "a.py", BAD)
    result = run_cli("--output-format", "json", "a.py")
    records = json.loads(result.stdout)
    assert [r["code"] for r in records] == ["CL001", "CL004"]
    first = records[0]
    assert set(first) >= {"path", "line", "column", "end_line", "end_column", "code", "name", "severity", "message"}
    assert (first["line"], first["column"], first["end_line"], first["end_column"]) == (2, 7, 2, 60)
    assert first["name"] == "conflicting-clip-options" and first["severity"] == "error"


def test_select_ignore_by_code_prefix_and_name(tmp_path, run_cli):
    write(tmp_path, "a.py", BAD)
    assert "CL004" not in run_cli("--select", "CL001", "a.py").stdout
    assert "CL001" not in run_cli("--ignore", "conflicting-clip-options", "a.py").stdout
    both = run_cli("--select", "CL00", "a.py").stdout
    assert "CL001" in both and "CL004" in both


def test_unknown_selector_is_a_usage_error(tmp_path, run_cli):
    write(tmp_path, "a.py", BAD)
    result = run_cli("--select", "CL999", "a.py")
    assert result.returncode == 2
    assert "unknown rule selector 'CL999'" in result.stderr
    assert "Traceback" not in result.stderr


def test_noqa_forms(tmp_path, run_cli):
    write(tmp_path, "a.py", textwrap.dedent("""\
        import tensorflow as tf
        a = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)  # noqa: CL001
        b = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)  # noqa
        c = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)  # noqa: CL004
        d = tf.keras.optimizers.Adam(
            clipnorm=1.0,
            clipvalue=0.5,
        )  # noqa: cl001
        e = "# noqa: CL001"; f = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)
    """))
    lines = run_cli("a.py").stdout.splitlines()[:-1]
    assert [line.split(":")[1] for line in lines] == ["4", "9"]


def test_file_level_noqa(tmp_path, run_cli):
    write(tmp_path, "a.py", "# cliplint: noqa: CL004\n" + BAD)
    out = run_cli("a.py").stdout
    assert "CL001" in out and "CL004" not in out
    write(tmp_path, "b.py", "# cliplint: noqa\n" + BAD)
    assert run_cli("b.py").returncode == 0


def test_pyproject_config_nearest_wins(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nignore = ["CL004"]\n'
          '[tool.cliplint.per-file-ignores]\n"legacy/*.py" = ["CL001"]\n')
    write(tmp_path, "src/train.py", BAD)
    write(tmp_path, "legacy/old.py", BAD)
    write(tmp_path, "sub/pyproject.toml", '[tool.cliplint]\nselect = ["log-of-softmax"]\n')
    write(tmp_path, "sub/x.py", BAD)
    out = run_cli(".").stdout
    assert "src/train.py:2:7: CL001" in out
    assert "CL004" not in out.split("sub/")[0]
    assert "legacy/old.py" not in out
    assert "sub/x.py:4:6: CL004" in out and "sub/x.py:2" not in out


def test_exclude_and_force_exclude(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nextend-exclude = ["generated/"]\n')
    write(tmp_path, "generated/g.py", BAD)
    write(tmp_path, "ok.py", GOOD)
    assert "generated" not in run_cli(".").stdout
    # explicitly named files are linted unless --force-exclude (what pre-commit passes)
    assert run_cli("generated/g.py").returncode == 1
    assert run_cli("--force-exclude", "generated/g.py").returncode == 0


def test_gitignore_and_virtualenvs_are_skipped(tmp_path, run_cli):
    write(tmp_path, ".git/HEAD", "ref: refs/heads/main\n")
    write(tmp_path, ".gitignore", "build_out/\n*.gen.py\n")
    write(tmp_path, "build_out/a.py", BAD)
    write(tmp_path, "x.gen.py", BAD)
    write(tmp_path, "env/pyvenv.cfg", "home = /usr\n")
    write(tmp_path, "env/lib/site.py", BAD)
    write(tmp_path, ".venv/lib/x.py", BAD)
    write(tmp_path, "keep.py", BAD)
    out = run_cli(".").stdout
    assert "keep.py" in out
    assert not any(name in out for name in ("build_out", "x.gen.py", "env/", ".venv"))


def test_invalid_config_is_exit_2_without_traceback(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", "[tool.cliplint\nselect = 1\n")
    write(tmp_path, "a.py", BAD)
    result = run_cli("a.py")
    assert result.returncode == 2 and "invalid TOML" in result.stderr and "Traceback" not in result.stderr
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nselect = "CL001"\n')
    result = run_cli("a.py")
    assert result.returncode == 2 and "must be a list of strings" in result.stderr
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nslect = ["CL001"]\n')
    result = run_cli("a.py")
    assert result.returncode == 2 and "unknown key(s) slect" in result.stderr


def test_isolated_and_explicit_config(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nignore = ["CL001"]\n')
    write(tmp_path, "other.toml", '[tool.cliplint]\nselect = ["CL001"]\n')
    write(tmp_path, "a.py", BAD)
    assert "CL001" not in run_cli("a.py").stdout
    assert "CL001" in run_cli("--isolated", "a.py").stdout
    out = run_cli("--config", "other.toml", "a.py").stdout
    assert "CL001" in out and "CL004" not in out


def test_unreadable_inputs_give_cl000_and_others_still_linted(tmp_path, run_cli):
    write(tmp_path, "syntax.py", "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0\n")
    write(tmp_path, "latin.py", b"import tensorflow as tf  # clipnorm\nname = '\xe9'\n")
    write(tmp_path, "declared.py", b"# -*- coding: latin-1 -*-\nimport tensorflow as tf\n"
          b"s = '\xe9'\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    write(tmp_path, "binary.py", b"clipnorm\x00\x01\x02")
    os.symlink(tmp_path / "nowhere.py", tmp_path / "dangling.py")
    write(tmp_path, "good.py", BAD)
    result = run_cli("--output-format", "json", ".", "missing.py")
    records = json.loads(result.stdout)
    by_path = {}
    for r in records:
        by_path.setdefault(r["path"], []).append((r["code"], r["line"], r["message"]))
    assert by_path["syntax.py"][0][:2] == ("CL000", 2) and "syntax error" in by_path["syntax.py"][0][2]
    assert by_path["latin.py"][0][:2] == ("CL000", 2) and "0xe9" in by_path["latin.py"][0][2]
    assert [c for c, _, _ in by_path["declared.py"]] == ["CL001"]  # PEP 263 honoured
    assert "binary" in by_path["binary.py"][0][2]
    assert "broken symlink" in by_path["dangling.py"][0][2]
    assert "no such file" in by_path["missing.py"][0][2]
    assert [c for c, _, _ in by_path["good.py"]] == ["CL001", "CL004"]
    assert result.returncode == 1 and "Traceback" not in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_permission_denied(tmp_path, run_cli):
    path = write(tmp_path, "secret.py", BAD)
    path.chmod(0)
    assert "cannot read" in run_cli("secret.py").stdout


def test_stdin_with_filename_uses_its_config(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint.per-file-ignores]\n"scripts/*" = ["CL004"]\n')
    result = run_cli("-", "--stdin-filename", "scripts/train.py", stdin=BAD)
    assert result.stdout.startswith("scripts/train.py:2:7: CL001")
    assert "CL004" not in result.stdout


def test_statistics(tmp_path, run_cli):
    write(tmp_path, "a.py", BAD + BAD)
    out = run_cli("--statistics", "a.py").stdout
    assert "    2  CL001  conflicting-clip-options" in out


def test_output_file_is_written(tmp_path, run_cli):
    write(tmp_path, "a.py", BAD)
    result = run_cli("--output-format", "json", "--output-file", "report.json", "a.py")
    assert result.stdout == "" and result.returncode == 1
    assert len(json.loads((tmp_path / "report.json").read_text())) == 2


def test_rules_and_explain(tmp_path, run_cli):
    listing = run_cli("rules").stdout
    assert "CL003  per-tensor-clip-norm" in listing
    doc = run_cli("explain", "CL003").stdout
    assert "## Why is this bad?" in doc and "## Use instead" in doc and "tf.clip_by_global_norm" in doc
    assert "## Example" in run_cli("explain", "log-of-softmax").stdout
    assert run_cli("explain", "CL999").returncode == 2


def test_rule_crash_is_isolated(tmp_path, monkeypatch):
    """One rule raising on a file keeps the other rules' findings and reports CL000 + exit 2."""
    from cliplint.analysis import lint_module
    from cliplint.rules import ALL_RULES

    class Broken:
        code, name, severity, tokens = "CL003", "per-tensor-clip-norm", "warning", (b"tf",)

        def check(self, ctx):
            raise KeyError("boom")

    findings, crashed = lint_module("a.py", BAD, [ALL_RULES["CL001"], Broken()])
    assert crashed
    assert [f.code for f in findings] == ["CL001", "CL000"]
    assert "internal error in rule CL003" in findings[1].message
