"""Each output format parsed with its consumer's rules: the SARIF schema, the Actions runner's
escaping, an XML parser, GitLab's required fields, the problem matchers' regular expressions,
and pre-commit itself."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cliplint.findings import Finding
from cliplint.report import RunInfo
from cliplint.report.ci import github

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"
BAD = textwrap.dedent("""\
    import tensorflow as tf
    opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)
    probs = tf.nn.softmax(logits)
    lp = tf.math.log(probs)
""")
GOOD = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(global_clipnorm=1.0)\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src dir").mkdir()
    (tmp_path / "src dir" / "train.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def test_sarif_validates_against_the_2_1_0_schema_and_has_what_github_needs(project, run_cli):
    jsonschema = pytest.importorskip("jsonschema")
    result = run_cli("--output-format", "sarif", ".", cwd=project)
    log = json.loads(result.stdout)
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    errors = list(validator(schema, format_checker=jsonschema.FormatChecker()).iter_errors(log))
    assert errors == []
    run = log["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert {"CL000", "CL001", "CL004"} <= set(rules)
    for rule in rules.values():
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
    first = run["results"][0]
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "src%20dir/train.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 2, "startColumn": 7, "endLine": 2, "endColumn": 60}
    assert re.fullmatch(r"[0-9a-f]{16}:1", first["partialFingerprints"]["primaryLocationLineHash"])
    assert run["tool"]["driver"]["rules"][first["ruleIndex"]]["id"] == first["ruleId"] == "CL001"
    assert first["level"] == "error"


def test_sarif_carries_the_verdict(project, run_cli):
    pytest.importorskip("tensorflow")
    log = json.loads(run_cli("--verify", "--output-format", "sarif", "src dir/train.py", cwd=project).stdout)
    properties = log["runs"][0]["results"][0]["properties"]
    assert properties["verification"]["verdict"] == "confirmed"
    assert properties["verification"]["evidence"]


def _unescape_data(text):  # the runner's order (ActionCommand.cs): %0D, %0A, then %25 last
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def _unescape_property(text):
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def _parse_annotation(line):
    match = re.fullmatch(r"::(error|warning|notice) (.*?)::(.*)", line)
    assert match, line
    properties = {}
    for part in match.group(2).split(","):
        key, _, value = part.partition("=")
        properties[key] = _unescape_property(value)
    return match.group(1), properties, _unescape_data(match.group(3))


def test_github_annotations_round_trip_through_the_runners_unescaping():
    tricky = Finding("dir, with: odd/100%.py", 3, 5, 3, 9, "CL002", "optimizer-changed-after-compile", "warning",
                     "50% of runs: a, b\nsecond line\r")
    level, properties, message = _parse_annotation(github([tricky], RunInfo(1)).rstrip("\n"))
    assert level == "warning"
    assert properties == {"file": "dir, with: odd/100%.py", "line": "3", "col": "5", "endLine": "3",
                          "endColumn": "9", "title": "cliplint (CL002 optimizer-changed-after-compile)"}
    assert message == "CL002 50% of runs: a, b\nsecond line\r"


def test_github_format_from_the_cli(project, run_cli):
    lines = run_cli("--output-format", "github", ".", cwd=project).stdout.splitlines()
    assert len(lines) == 2
    level, properties, message = _parse_annotation(lines[0])
    assert (level, properties["file"], properties["line"], properties["col"]) == ("error", "src dir/train.py", "2", "7")
    assert message.startswith("CL001 ")


def test_junit_parses_as_xml(project, run_cli):
    root = ET.fromstring(run_cli("--output-format", "junit", ".", cwd=project).stdout)
    assert root.tag == "testsuites" and root.get("failures") == "2"
    suite = root.find("testsuite")
    assert suite.get("name") == "src dir/train.py"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["org.cliplint.CL001", "org.cliplint.CL004"]
    assert cases[0].get("line") == "2" and cases[0].find("failure").get("message")
    clean = ET.fromstring(run_cli("--output-format", "junit", "good.py", cwd=project).stdout)
    assert clean.find("testsuite/testcase").get("name") == "No errors found"


def test_gitlab_code_quality_fields(project, run_cli):
    report = json.loads(run_cli("--output-format", "gitlab", ".", cwd=project,
                                env={"CI_PROJECT_DIR": str(project)}).stdout)
    assert len(report) == 2
    for issue in report:
        assert set(issue) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["severity"] in ("info", "minor", "major", "critical", "blocker")
        assert not os.path.isabs(issue["location"]["path"])
        assert issue["location"]["lines"]["begin"] >= 1
        assert issue["description"].startswith(issue["check_name"] + ": ")
    assert len({issue["fingerprint"] for issue in report}) == 2


MATCHER_LINES = [
    ("src dir/train.py:2:7: CL001 error: `clipnorm` and `clipvalue`: a, b", "src dir/train.py", 2, 7, "CL001",
     "error", "`clipnorm` and `clipvalue`: a, b"),
    (r"C:\work\repo\train.py:12:9: CL003 warning: per tensor: 1:2", r"C:\work\repo\train.py", 12, 9, "CL003",
     "warning", "per tensor: 1:2"),
]
NOTEBOOK_LINE = "nb/My Notebook.ipynb:cell 3:1:13: CL004 error: log"


def _matchers(run_cli):
    vscode = json.loads(run_cli("problem-matcher", "--vscode").stdout)
    github_matcher = json.loads(run_cli("problem-matcher", "--github").stdout)["problemMatcher"][0]
    return [("vscode", vscode["pattern"]), ("github", github_matcher["pattern"][0])]


def test_problem_matchers_keep_a_notebook_cell(run_cli):
    """VS Code shows the cell's line; on GitHub a line of the cell is no line of the .ipynb's JSON,
    so the notebook matcher makes a file annotation whose message names the cell and its line."""
    vscode = json.loads(run_cli("problem-matcher", "--vscode").stdout)["pattern"]
    assert _groups(vscode, re.match(vscode["regexp"], NOTEBOOK_LINE)) == (
        "nb/My Notebook.ipynb", 1, 13, "CL004", "error", "log")
    python_lines, notebook_lines = json.loads(run_cli("problem-matcher", "--github").stdout)["problemMatcher"]
    assert re.match(python_lines["pattern"][0]["regexp"], NOTEBOOK_LINE) is None
    pattern = notebook_lines["pattern"][0]
    assert "line" not in pattern
    match = re.match(pattern["regexp"], NOTEBOOK_LINE)
    assert [match.group(pattern[key]) for key in ("file", "code", "severity", "message")] == [
        "nb/My Notebook.ipynb", "CL004", "error", "cell 3:1:13: CL004 error: log"]
    for line, *_ in MATCHER_LINES:
        assert re.match(pattern["regexp"], line) is None


def _groups(pattern, match):
    return (match.group(pattern["file"]), int(match.group(pattern["line"])), int(match.group(pattern["column"])),
            match.group(pattern["code"]), match.group(pattern["severity"]), match.group(pattern["message"]))


def test_problem_matchers_on_real_output_and_awkward_paths(project, run_cli):
    real = [line for line in run_cli(".", cwd=project).stdout.splitlines() if ": CL" in line]
    assert real
    for _, pattern in _matchers(run_cli):
        regex = re.compile(pattern["regexp"])
        for line in real:
            file, line_no, column, code, severity, message = _groups(pattern, regex.match(line))
            assert file == "src dir/train.py" and code in ("CL001", "CL004") and severity == "error"
            assert line.endswith(message) and (line_no, column) in ((2, 7), (4, 6))
        for line, *expected in MATCHER_LINES:
            assert _groups(pattern, regex.match(line)) == tuple(expected)
        assert regex.match("Found 2 problems in 1 file.") is None
        assert regex.match("All checks passed! (2 files checked)") is None


@pytest.mark.skipif(shutil.which("node") is None, reason="node runs the matchers' JavaScript RegExp engine")
def test_problem_matchers_in_javascript_regexp(run_cli):
    for _, pattern in _matchers(run_cli):
        script = ("const re = new RegExp(process.argv[1]);"
                  "for (const line of JSON.parse(process.argv[2])) { const m = re.exec(line);"
                  " console.log(JSON.stringify(m && [m[1], m[2], m[3], m[4], m[5], m[6]])); }")
        lines = [line for line, *_ in MATCHER_LINES]
        out = subprocess.run(["node", "-e", script, pattern["regexp"], json.dumps(lines)],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        for printed, (_, file, line_no, column, code, severity, message) in zip(out, MATCHER_LINES):
            assert json.loads(printed) == [file, str(line_no), str(column), code, severity, message]


def test_colour_only_on_a_terminal_and_never_with_no_color(project):
    import pty

    def run(env):
        leader, follower = pty.openpty()
        process = subprocess.Popen([sys.executable, "-m", "cliplint", "."], cwd=project, stdout=follower,
                                   stderr=follower, env=env)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait()
        os.close(leader)
        return b"".join(chunks).decode()

    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert "\x1b[" in run(environment)
    assert "\x1b[" not in run({**environment, "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    if shutil.which("git") is None or shutil.which("pre-commit") is None:
        pytest.skip("needs git and pre-commit")
    repo = tmp_path_factory.mktemp("user-repo")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home")),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    (repo / "bad_train.py").write_text(BAD)
    (repo / "good_train.py").write_text(GOOD)
    (repo / "README.md").write_text("clipnorm clipvalue\n")
    return repo, env


def _try_repo(repo, env, *args):
    return subprocess.run(["pre-commit", "try-repo", str(ROOT), "cliplint", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900)


def test_pre_commit_hook_fails_on_bad_and_passes_on_good(hook_repo):
    repo, env = hook_repo
    subprocess.run(["git", "add", "bad_train.py", "good_train.py", "README.md"], cwd=repo, check=True, env=env)
    bad = _try_repo(repo, env, "--files", "bad_train.py", "README.md")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "bad_train.py:2:7: CL001" in bad.stdout and "README" not in bad.stdout.split("cliplint", 2)[-1]
    good = _try_repo(repo, env, "--files", "good_train.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout


def test_pre_commit_hook_with_zero_files(hook_repo):
    repo, env = hook_repo
    subprocess.run(["git", "reset", "-q"], cwd=repo, env=env)
    result = _try_repo(repo, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Skipped" in result.stdout


# --- rule links come from one place; every output is useful without them ----------------------

def _project_urls():
    import tomllib  # Python 3.11+; the test extras run there

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]


def test_every_link_comes_from_the_project_urls(project, run_cli):
    urls = _project_urls()
    documentation = urls["Documentation"].rstrip("/")
    records = json.loads(run_cli("--output-format", "json", ".", cwd=project).stdout)
    assert records and all(r["url"] == f"{documentation}/{r['code']}.md" for r in records)
    driver = json.loads(run_cli("--output-format", "sarif", ".", cwd=project).stdout)["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == urls["Homepage"]
    for rule in driver["rules"]:
        page = "README.md" if rule["id"] == "CL000" else f"{rule['id']}.md"
        assert rule["helpUri"] == f"{documentation}/{page}"
        assert (ROOT / "rules" / page).is_file()  # the page the link names is in the published folder


def test_the_fallback_urls_are_the_project_urls(monkeypatch):
    import importlib.metadata

    from cliplint.report import links

    assert links.FALLBACK == {label: _project_urls()[label] for label in links.FALLBACK}

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "metadata", not_installed)
    links.project_urls.cache_clear()
    try:
        assert links.rule_url("CL004") == f"{_project_urls()['Documentation']}/CL004.md"
    finally:
        links.project_urls.cache_clear()


def test_sarif_carries_each_rules_whole_page(project, run_cli):
    driver = json.loads(run_cli("--output-format", "sarif", ".", cwd=project).stdout)["runs"][0]["tool"]["driver"]
    rules = {rule["id"]: rule for rule in driver["rules"]}
    for code in ("CL000", "CL003", "CL010"):
        explained = run_cli("explain", code).stdout
        assert rules[code]["help"]["markdown"].strip() == explained.strip()
    for code, rule in rules.items():
        text = rule["help"]["text"]
        assert "```" not in text and not text.startswith("#") and len(text) > 200, code
    assert "Why is this bad?" in rules["CL010"]["help"]["text"] and "Use instead" in rules["CL010"]["help"]["text"]


def test_text_output_says_how_to_read_about_a_rule(project, run_cli):
    lines = run_cli(".", cwd=project).stdout.splitlines()
    assert lines[-1] == "`cliplint explain CODE` prints a rule's documentation (e.g. `cliplint explain CL001`)."
    assert "cliplint explain" not in run_cli("good.py", cwd=project).stdout  # nothing to explain


# --- the README's pre-commit snippet works verbatim -------------------------------------------

def _readme_pre_commit_snippet():
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", readme, re.S)
    assert match, "README has no .pre-commit-config.yaml snippet"
    return match.group(1)


def _git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def test_readme_pre_commit_pin_resolves_in_this_repository():
    snippet = _readme_pre_commit_snippet()
    repo = re.search(r"^\s*- repo: (\S+)$", snippet, re.M).group(1)
    rev = re.search(r"^\s*rev: (\S+)", snippet, re.M).group(1)
    assert repo == _project_urls()["Homepage"]
    assert re.fullmatch(r"[0-9a-f]{40}", rev), f"pin a commit SHA, not {rev!r}"
    if shutil.which("git") is None or _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout")
    if _git("cat-file", "-e", f"{rev}^{{commit}}").returncode != 0:
        pytest.skip(f"{rev} is not in this clone (shallow?)")
    assert _git("merge-base", "--is-ancestor", rev, "HEAD").returncode == 0, "the pin is not in this branch's history"
    hooks = _git("show", f"{rev}:.pre-commit-hooks.yaml").stdout
    for hook in re.findall(r"^\s*#?\s*- id: (\S+)", snippet, re.M):
        assert f"- id: {hook}\n" in hooks, f"{hook} is not a hook at {rev}"


NOTEBOOK = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": BAD}]})
CONFIG = "optimizer:\n  class_name: Adam\n  config:\n    clipnorm: 1.0\n    clipvalue: 0.5\n"


@pytest.fixture(scope="module")
def snippet_repo(tmp_path_factory):
    """A user's repository with the README's snippet as its .pre-commit-config.yaml, pointing at
    this repository's committed HEAD (pre-commit installs what is committed)."""
    if shutil.which("git") is None or shutil.which("pre-commit") is None:
        pytest.skip("needs git and pre-commit")
    head = _git("rev-parse", "HEAD")
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    snippet = _readme_pre_commit_snippet()
    rev = re.search(r"^\s*rev: (\S+)", snippet, re.M).group(1)
    local = snippet.replace(_project_urls()["Homepage"], str(ROOT)).replace(rev, head.stdout.strip())
    repo = tmp_path_factory.mktemp("snippet-user")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home")),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    (repo / ".pre-commit-config.yaml").write_text(local)
    for name, text in (("bad_train.py", BAD), ("good_train.py", GOOD), ("explore.ipynb", NOTEBOOK),
                       ("exp.yaml", CONFIG), ("README.md", "clipnorm clipvalue\n")):
        (repo / name).write_text(text)
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    return repo, env, rev


def _pre_commit(repo, env, *args):
    return subprocess.run(["pre-commit", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=900)


def test_readme_pre_commit_snippet_runs_as_written(snippet_repo):
    repo, env, _ = snippet_repo
    result = _pre_commit(repo, env, "run", "--all-files")
    assert result.returncode == 1, result.stdout + result.stderr
    reported = result.stdout
    assert "bad_train.py:2:7: CL001" in reported
    assert "explore.ipynb:cell 1:2:7: CL001" in reported  # notebooks
    assert "exp.yaml:5:5: CL001" in reported  # training configs
    assert "good_train.py" not in reported and "README.md" not in reported
    good = _pre_commit(repo, env, "run", "--files", "good_train.py")
    assert good.returncode == 0 and "Passed" in good.stdout, good.stdout + good.stderr


def test_pre_commit_autoupdate_moves_the_pin_as_the_readme_says(snippet_repo):
    repo, env, rev = snippet_repo
    if _git("tag", "--merged", "HEAD").stdout.strip():
        pytest.skip("with a tag in the history, autoupdate pins the newest tag")
    config = repo / ".pre-commit-config.yaml"
    original = config.read_text()
    head = _git("rev-parse", "HEAD").stdout.strip()
    try:
        config.write_text(original.replace(head, rev))  # the README's own pin, an older commit
        result = _pre_commit(repo, env, "autoupdate")
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"rev: {head}" in config.read_text()  # no tag: the newest commit, as a SHA
    finally:
        config.write_text(original)
