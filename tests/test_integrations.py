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
    ("nb/My Notebook.ipynb:cell 3:1:13: CL004 error: log", "nb/My Notebook.ipynb", 1, 13, "CL004", "error", "log"),
]


def _matchers(run_cli):
    vscode = json.loads(run_cli("problem-matcher", "--vscode").stdout)
    github_matcher = json.loads(run_cli("problem-matcher", "--github").stdout)["problemMatcher"][0]
    return [("vscode", vscode["pattern"]), ("github", github_matcher["pattern"][0])]


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
