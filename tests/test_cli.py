"""The CLI contract: output lines, exit codes, config, noqa. Through click's CliRunner in this
process (`run_cli`), the command the console script runs; through a process of its own where
only a real process shows it: the console script's exit, Ctrl-C, a worker pool, a file-size
limit, binary standard input."""
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

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
    assert lines[-2] == "Found 4 problems in 2 files."
    assert lines[-1] == "`cliplint explain CODE` prints a rule's documentation (e.g. `cliplint explain CL001`)."


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
    lines = run_cli("a.py").stdout.splitlines()[:-2]  # no summary, no `cliplint explain` line
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


# --- standard input: linted as the file --stdin-filename names, with its settings -------------

STDIN_FILES = ["notebooks/keras_fit_tutorial.ipynb", "notebooks/actor_critic_tutorial.ipynb",
               "configs/keras_serialized.yaml", "configs/sweep.json", "configs/training.toml",
               "double_softmax_classifier.py"]


@pytest.mark.parametrize("name", STDIN_FILES)
def test_stdin_is_linted_as_the_kind_its_filename_names(tmp_path, run_cli, name):
    source = FIXTURES / name
    write(tmp_path, name, source.read_bytes())
    on_disk = run_cli("--isolated", "--output-format", "json", name)
    piped = run_cli("--isolated", "--output-format", "json", "-", "--stdin-filename", name, stdin=source.read_text())
    assert json.loads(on_disk.stdout), name  # each has findings on disk
    assert json.loads(piped.stdout) == json.loads(on_disk.stdout)
    assert piped.returncode == on_disk.returncode == 1 and piped.stderr == ""


def test_stdin_keras_archive_is_read_as_an_archive(tmp_path):
    config = {"class_name": "Sequential", "config": {},
              "compile_config": {"optimizer": {"class_name": "Adam", "config": {"clipnorm": 1.0, "clipvalue": 0.5}}}}
    with zipfile.ZipFile(tmp_path / "model.keras", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("config.json", json.dumps(config))

    def lint(*args, stdin=None):
        return subprocess.run([sys.executable, "-m", "cliplint", "--output-format", "json", *args], cwd=tmp_path,
                              input=stdin, capture_output=True, timeout=300)

    on_disk = lint("model.keras")
    piped = lint("-", "--stdin-filename", "model.keras", stdin=(tmp_path / "model.keras").read_bytes())
    assert [r["code"] for r in json.loads(piped.stdout)] == ["CL001"]
    assert json.loads(piped.stdout) == json.loads(on_disk.stdout)


CONFIG_MATCHING = """\
[tool.cliplint]
config-files = ["configs/*.yaml"]
extend-exclude = ["generated/"]
[tool.cliplint.per-file-ignores]
"legacy/**" = ["CL001"]
"""
KINDS = {".yaml": (FIXTURES / "configs/keras_serialized.yaml").read_text(),
         ".ipynb": (FIXTURES / "notebooks/keras_fit_tutorial.ipynb").read_text(), ".py": BAD}


@pytest.mark.parametrize("name", ["legacy/exp.yaml", "data/exp.yaml", "generated/exp.yaml", "configs/exp.yaml",
                                  "legacy/train.py", "generated/train.py", "legacy/nb.ipynb"])
@pytest.mark.parametrize("force_exclude", [[], ["--force-exclude"]])
def test_stdin_gets_the_settings_of_the_file_it_stands_for(tmp_path, run_cli, name, force_exclude):
    """per-file-ignores, config-files and excludes (with --force-exclude) as for the file on disk."""
    write(tmp_path, "pyproject.toml", CONFIG_MATCHING)
    text = KINDS[Path(name).suffix]
    write(tmp_path, name, text)
    on_disk = run_cli(*force_exclude, "--output-format", "json", name)
    piped = run_cli(*force_exclude, "--output-format", "json", "-", "--stdin-filename", name, stdin=text)
    assert (piped.returncode, json.loads(piped.stdout)) == (on_disk.returncode, json.loads(on_disk.stdout))


def test_stdin_matching_is_really_applied(tmp_path, run_cli):
    """The matrix above compares with the disk; here, what the settings do to standard input."""
    write(tmp_path, "pyproject.toml", CONFIG_MATCHING)

    def codes(*args):
        result = run_cli("--output-format", "json", "-", *args, stdin=KINDS[".yaml"])
        return [record["code"] for record in json.loads(result.stdout)]

    assert codes("--stdin-filename", "configs/exp.yaml") == ["CL001"]
    assert codes("--stdin-filename", "legacy/exp.yaml") == []  # per-file-ignores
    assert codes("--stdin-filename", "data/exp.yaml") == ["CL001"]  # named explicitly: audited
    assert codes("--force-exclude", "--stdin-filename", "data/exp.yaml") == []  # not in config-files
    assert codes("--force-exclude", "--stdin-filename", "generated/exp.yaml") == []  # excluded


def test_stdin_findings_are_sorted_by_position(tmp_path, run_cli):
    # CL004 (line 2) and CL003/CL005 (line 4) come from rules that run after CL001 (lines 5 and 7)
    text = textwrap.dedent("""\
        import tensorflow as tf
        lp = tf.math.log(tf.nn.softmax(logits))
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [tf.clip_by_norm(g, 1.0) for g in grads]
        a = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)
        x = 1
        b = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)
    """)
    write(tmp_path, "t.py", text)
    piped = run_cli("-", "--stdin-filename", "t.py", stdin=text).stdout.splitlines()[:-2]
    positions = [tuple(int(n) for n in line.split(":")[1:3]) for line in piped]
    assert len(positions) >= 4 and positions == sorted(positions)
    assert piped == run_cli("t.py").stdout.splitlines()[:-2]


# --- a report file that cannot be written: one line, exit 2, nothing left behind --------------

def _leftovers(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob(".cliplint-*"))


@pytest.mark.parametrize("target", ["missing/report.json", "a.py/report.json"])
def test_output_file_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, run_cli, target):
    write(tmp_path, "a.py", BAD)
    result = run_cli("--output-format", "json", "--output-file", target, "a.py")
    assert result.returncode == 2
    assert result.stderr.startswith(f"cliplint: error: cannot write the report to {target}: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr and result.stdout == ""
    assert _leftovers(tmp_path) == []


def test_output_file_on_a_full_disk_leaves_nothing_behind(tmp_path):
    """The write itself fails (a 100-byte file-size limit stands in for a full disk): no
    temporary file, no partial report, exit 2."""
    write(tmp_path, "a.py", BAD)

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    result = subprocess.run([sys.executable, "-m", "cliplint", "--no-cache", "--output-format", "json",
                             "--output-file", "report.json", "a.py"], cwd=tmp_path, capture_output=True, text=True,
                            preexec_fn=small_files, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "cannot write the report to report.json: File too large" in result.stderr
    assert not (tmp_path / "report.json").exists() and _leftovers(tmp_path) == []


# --- Ctrl-C: exit 130, no traceback, workers and temporary files gone -------------------------

def _stat(pid):
    """(state, parent pid) from /proc, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def _pids():
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _cwd_under(pid, folder):
    try:
        return os.readlink(f"/proc/{pid}/cwd").startswith(str(folder))
    except OSError:
        return False


def _alive(pid):
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def _wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return condition()


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT as a terminal's command gets it: a suite started in the background (`cmd &` in a
    script) runs with SIGINT ignored, and Python then raises no KeyboardInterrupt in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(process, whole_group=True, seconds=120):
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group; `kill -INT`
    (or an IDE's stop button) to the main process only."""
    if whole_group:
        os.killpg(process.pid, signal.SIGINT)
    else:
        os.kill(process.pid, signal.SIGINT)
    try:
        stdout, stderr = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # do not leave a run behind
        process.communicate()
        raise
    return process.returncode, stdout, stderr


def test_ctrl_c_during_verify_exits_130_and_cleans_up(tmp_path):
    pytest.importorskip("tensorflow")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    # many findings to verify: the run is still verifying when the interrupt comes, however long
    # finding the worker among the machine's processes took
    write(tmp_path, "a.py", BAD + "".join(f"lp{n} = tf.math.log(tf.nn.softmax(logits * {n}))\n" for n in range(200)))
    process = subprocess.Popen(
        [sys.executable, "-m", "cliplint", "--verify", "--output-format", "json", "--output-file", "report.json",
         "a.py"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(temporary)}, start_new_session=True, preexec_fn=_ctrl_c_as_in_a_terminal)
    # the worker runs in the verifier's temporary folder, in a session of its own
    workers = _wait_for(lambda: [pid for pid in _pids() if _cwd_under(pid, temporary)], 120)
    assert workers, "the verifier worker never started"
    code, stdout, stderr = _interrupt(process)
    assert code == 130, stderr
    assert stderr == "cliplint: interrupted\n" and stdout == ""  # no traceback, no "Aborted!"
    assert all(_wait_for(lambda: not _alive(pid), 10) for pid in workers)
    assert list(temporary.iterdir()) == []  # the verifier's folder is removed
    assert not (tmp_path / "report.json").exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("whole_group", [True, False])
def test_ctrl_c_during_a_parallel_run_stops_it_at_once(tmp_path, whole_group):
    """Uninterrupted, this run takes 20 s to 90 s (2 workers); interrupted, it ends at once, the
    workers with it, without a traceback from any of them."""
    for index in range(600):
        write(tmp_path, f"pkg{index % 20}/m{index}.py", BAD * 20)
    process = subprocess.Popen([sys.executable, "-m", "cliplint", "--no-cache", "-j", "2", "--output-file", "r.txt",
                                "."], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=_ctrl_c_as_in_a_terminal)

    def pool():
        children = [pid for pid in _pids() if (_stat(pid) or ("", 0))[1] == process.pid]
        return children if len(children) >= 2 else None

    workers = _wait_for(pool, 120)
    assert workers, "the worker pool never started"
    time.sleep(0.3)  # the workers are busy linting
    code, stdout, stderr = _interrupt(process, whole_group, seconds=15)
    assert code == 130, stderr
    assert stderr == "cliplint: interrupted\n"
    assert all(_wait_for(lambda: not _alive(pid), 10) for pid in workers)
    assert not (tmp_path / "r.txt").exists() and _leftovers(tmp_path) == []


# --- the console script ----------------------------------------------------------------------

@pytest.mark.parametrize("files, args, code", [({"ok.py": GOOD}, ["ok.py"], 0), ({"a.py": BAD}, ["a.py"], 1),
                                               ({}, ["--select", "CL999", "."], 2)])
def test_the_console_script_exits_with_the_commands_code(tmp_path, files, args, code):
    """The installed `cliplint` exits where no command does (without interpreter teardown): with
    the code the command returned, its report written out whole first."""
    for name, text in files.items():
        write(tmp_path, name, text)
    script = Path(sys.executable).with_name("cliplint")
    result = subprocess.run([str(script), "--output-format", "json", "--no-cache", *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == code, result.stderr
    if code < 2:
        assert len(json.loads(result.stdout)) == 2 * code  # BAD holds two findings
    else:
        assert result.stdout == "" and "unknown rule selector 'CL999'" in result.stderr


# --- a mistyped command is a usage error, not a missing path ----------------------------------

@pytest.mark.parametrize("typed, meant", [("chek", "check"), ("rule", "rules"), ("explian", "explain")])
def test_a_mistyped_command_is_a_usage_error(tmp_path, run_cli, typed, meant):
    write(tmp_path, "a.py", BAD)
    result = run_cli(typed, ".")
    assert result.returncode == 2 and result.stdout == ""
    assert f"`{typed}` is neither a command nor an existing path; did you mean `{meant}`?" in result.stderr


def test_an_existing_path_close_to_a_command_is_linted(tmp_path, run_cli):
    # a script that happens to look like a typo of `check` (without a suffix, a file is Python
    # when its first line runs Python: a Makefile or LICENSE named explicitly is skipped)
    write(tmp_path, "chek", "#!/usr/bin/env python3\n" + BAD)
    result = run_cli("chek")
    assert result.returncode == 1 and result.stdout.startswith("chek:3:7: CL001")
    for missing in ("missing.py", "check.py", "rules/"):  # far from every command, or path-like: a missing path
        result = run_cli(missing)
        assert result.returncode == 1 and f"{missing.rstrip('/')}:1:1: CL000" in result.stdout, result.stderr


# --- rule selection follows ruff's precedence across configuration and flags ------------------

SELECTION = textwrap.dedent("""\
    import tensorflow as tf
    opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)
    probs = tf.nn.softmax(logits)
    lp = tf.math.log(probs)
    grads = [tf.clip_by_norm(g, 1.0) for g in tape.gradient(loss, model.trainable_variables)]
    opt.apply_gradients(zip(grads, model.trainable_variables))
""")


@pytest.mark.parametrize("config, flags, expected", [
    ("", [], {"CL001", "CL003", "CL004", "CL005"}),  # the default: every rule
    # the command line's `select` is the basis: the configuration's ignore does not apply to it
    ('ignore = ["CL001"]', ["--select", "CL001"], {"CL001"}),
    ('select = ["CL00"]\nignore = ["CL001"]', ["--select", "CL001"], {"CL001"}),
    # without a `select` on the command line, the configuration's selection is adjusted
    ('select = ["CL00"]\nignore = ["CL001"]', ["--extend-select", "CL001"], {"CL001", "CL003", "CL004", "CL005"}),
    ('select = ["CL00"]\nignore = ["CL001"]', ["--ignore", "CL004"], {"CL003", "CL005"}),
    ('ignore = ["CL001"]', [], {"CL003", "CL004", "CL005"}),
    # inside one layer the more specific selector wins; at equal specificity, ignore wins
    ('select = ["CL001"]\nignore = ["CL00"]', [], {"CL001"}),
    ('select = ["CL001"]\nignore = ["conflicting-clip-options"]', [], set()),
    ("", ["--ignore", "ALL", "--select", "CL004"], {"CL004"}),
    ("", ["--select", "CL00", "--ignore", "CL00"], set()),
    # `select = []` with `ignore` hands its ignores on to the command line
    ('select = []\nignore = ["CL001"]', ["--select", "CL001,CL004"], {"CL004"}),
    ("select = []", ["--select", "CL001"], {"CL001"}),
])
def test_rule_selection_follows_ruffs_precedence(tmp_path, run_cli, config, flags, expected):
    write(tmp_path, "pyproject.toml", f"[tool.cliplint]\n{config}\n")
    write(tmp_path, "a.py", SELECTION)
    result = run_cli(*flags, "--output-format", "json", "a.py")
    assert {r["code"] for r in json.loads(result.stdout)} == expected


def test_warnings_when_nothing_is_selected_or_the_configuration_removes_a_named_rule(tmp_path, run_cli):
    write(tmp_path, "a.py", SELECTION)
    write(tmp_path, "pyproject.toml", "[tool.cliplint]\nselect = []\n")
    result = run_cli("a.py")
    assert result.returncode == 0 and "All checks passed" in result.stdout
    assert result.stderr == ("cliplint: warning: no rule is enabled by pyproject.toml: nothing is reported "
                             "for the files it configures\n")
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nselect = []\nignore = ["CL001"]\n'
                                      '[tool.cliplint.per-file-ignores]\n"a.py" = ["CL004"]\n')
    result = run_cli("--select", "CL001,log-of-softmax,CL00", "a.py")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "cliplint: warning: CL001 is selected on the command line but the `ignore` of pyproject.toml removes it: "
        "a configuration with `select = []` and `ignore` carries its ignores over to the command line",
        "cliplint: warning: CL004 is selected on the command line but `per-file-ignores` \"a.py\" in "
        "pyproject.toml turns it off for the files that pattern matches"]
    # removed by the command line itself: that is what was asked; only the empty set is worth a warning
    result = run_cli("--isolated", "--select", "CL001", "--ignore", "CL001", "a.py")
    assert result.stderr == ("cliplint: warning: no rule is enabled by the command line: nothing is reported "
                             "for the files it configures\n")
    assert run_cli("--select", "CL003", "a.py").stderr == ""


# --- numeric options: out of range (nan, inf, negative) is a usage error ----------------------

@pytest.mark.parametrize("flags", [["--verify-timeout", "-1"], ["--verify-timeout", "0"],
                                   ["--verify-timeout", "nan"], ["--verify-timeout", "inf"],
                                   ["--verify-timeout", "soon"], ["--verify-budget", "-5"],
                                   ["--verify-budget", "nan"], ["--jobs", "-1"], ["--jobs", "1.5"]])
def test_numeric_options_out_of_range_are_usage_errors(tmp_path, run_cli, flags):
    write(tmp_path, "a.py", BAD)
    result = run_cli(*flags, "--verify", "a.py")
    assert result.returncode == 2 and result.stdout == ""
    assert "Invalid value for" in result.stderr and flags[0] in result.stderr
    assert "Traceback" not in result.stderr


def test_numeric_options_in_range_are_accepted(tmp_path, run_cli):
    write(tmp_path, "a.py", BAD)
    assert run_cli("--verify-timeout", "0.5", "-j", "0", "a.py").returncode == 1
    assert run_cli("--verify-timeout", "1e3", "-j", "3", "a.py").returncode == 1


# --- CL010: the message and the verifier's evidence name each shape ---------------------------

CL010_SHAPES = textwrap.dedent("""\
    import tensorflow as tf
    from tensorflow import keras
    loss = tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=tf.nn.softmax(x))
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=k, logits=tf.nn.softmax(x))
    loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=tf.math.sigmoid(x))
    loss = keras.losses.categorical_crossentropy(y, tf.nn.softmax(x), from_logits=True)
    inp = keras.Input((8,))
    model = keras.Model(inp, keras.layers.Dense(3, activation="softmax")(inp))
    model.compile("adam", loss=keras.losses.CategoricalCrossentropy(from_logits=True))
""")


def _by_line(result):
    return {record["line"]: record for record in json.loads(result.stdout)}


def test_cl010_says_what_each_shape_does(tmp_path, run_cli):
    write(tmp_path, "a.py", CL010_SHAPES)
    found = _by_line(run_cli("--select", "CL010", "--output-format", "json", "a.py"))
    assert sorted(found) == [3, 4, 5, 6, 9]
    for line, op, kind, instead in ((3, "softmax_cross_entropy_with_logits", "softmax", "categorical_crossentropy"),
                                    (4, "sparse_softmax_cross_entropy_with_logits", "softmax",
                                     "sparse_categorical_crossentropy"),
                                    (5, "sigmoid_cross_entropy_with_logits", "sigmoid", "binary_crossentropy")):
        message = found[line]["message"]
        assert message.startswith(f"`tf.nn.{op}` applies {kind} to `logits` itself")
        assert "from_logits" not in message and f"tf.keras.losses.{instead}" in message
    assert "(`from_logits=True`), but the predictions already went through softmax" in found[6]["message"]
    assert "(`from_logits=True`), but the model output already went through softmax" in found[9]["message"]
    assert "Make the last layer linear" in found[9]["message"]


def test_cl010_evidence_names_what_ran(tmp_path, run_cli):
    pytest.importorskip("tensorflow")
    write(tmp_path, "a.py", CL010_SHAPES)
    found = _by_line(run_cli("--select", "CL010", "--verify", "--output-format", "json", "a.py"))
    verdicts = {line: record["verification"] for line, record in found.items()}
    assert all(v["verdict"] == "confirmed" for v in verdicts.values()), verdicts
    op = verdicts[3]["evidence"]
    assert op.startswith("TensorFlow ") and "`tf.nn.softmax_cross_entropy_with_logits`" in op and "Keras" not in op
    assert "`tf.nn.sparse_softmax_cross_entropy_with_logits`" in verdicts[4]["evidence"]
    assert "`tf.nn.sigmoid_cross_entropy_with_logits`" in verdicts[5]["evidence"]
    assert "`categorical_crossentropy(..., from_logits=True)`" in verdicts[6]["evidence"]
    assert "`CategoricalCrossentropy`" in verdicts[9]["evidence"]
    assert not any("stood in" in a for v in verdicts.values() for a in v["assumptions"])


def test_cl010_fixes_are_verified_on_the_fixed_code(tmp_path, run_cli):
    """The probe reads what the flagged line passes: after `--fix` drops `from_logits=True`,
    the same probe no longer reproduces the problem."""
    pytest.importorskip("tensorflow")
    write(tmp_path, "a.py", CL010_SHAPES)
    result = run_cli("--diff", "--unsafe-fixes", "--verify", "--select", "CL010", "a.py")
    notes = [line for line in result.stderr.splitlines() if line.startswith("a.py:")]
    assert [note.split(":")[1] for note in notes] == ["6", "9"]
    assert all(": CL010 fixed and verified: " in note for note in notes), notes
    assert "`categorical_crossentropy(..., from_logits=False)`" in notes[0]


def _readme_selection_rows():
    readme = (FIXTURES.parent / "docs" / "configuration.md").read_text()
    section = readme.split("## Which rules run", 1)[1].split("\n## ", 1)[0]
    table = section.split("|---|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines()]
    assert len(rows) >= 5
    return [tuple(cell.strip() for cell in row) for row in rows]


def _codes_named(cell):
    """`CL000, CL002...CL010 (why)` -> the set of codes; `none` -> empty."""
    codes = set()
    for part in cell.split(" (")[0].split(", "):
        if part == "none":
            continue
        first, _, last = part.partition("...")
        codes.update(f"CL{n:03d}" for n in range(int(first[2:]), int((last or first)[2:]) + 1))
    return codes


@pytest.mark.parametrize("config, flags, rules", _readme_selection_rows())
def test_the_readme_precedence_table_holds(tmp_path, monkeypatch, config, flags, rules):
    from cliplint.settings import Config, Overrides

    settings = "\n".join(part.strip("`") for part in config.split("`, `"))
    write(tmp_path, "pyproject.toml", f"[tool.cliplint]\n{settings}\n")
    cli = {"select": None, "extend_select": [], "ignore": []}
    for flag, value in zip(flags.strip("`").split()[::2], flags.strip("`").split()[1::2]):
        key = flag.lstrip("-").replace("-", "_")
        cli[key] = value.split(",") if key == "select" else [*cli[key], *value.split(",")]
    monkeypatch.chdir(tmp_path)
    enabled = Config(Overrides(**cli)).for_path(str(tmp_path / "a.py")).enabled_codes(str(tmp_path / "a.py"))
    assert set(enabled) - {"CL000"} == _codes_named(rules) and "CL000" in enabled  # CL000: always on
