"""Every install the README documents works as written: the Quick start
from a clone, a built wheel, the git URL, and the GitHub Actions and GitLab CI snippets, each
run verbatim in a fresh virtual environment. Only the repository's address is swapped for this
checkout (committed HEAD), as the pre-commit snippet's test does.

The fresh environments see this test environment's site-packages through a `.pth` file, so
that `tensorflow-cpu` and libcst are found installed rather than downloaded again; cliplint
itself is built and installed into each fresh environment from the documented source."""
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BAD = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"


def _homepage():
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]


def _blocks(heading: str, language: str):
    """The fenced blocks of one README section."""
    section = README.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


LOCAL = Path("/tmp") / f"cliplint-readme-{os.getuid()}" / "cliplint"  # this checkout, under the name a clone gets


def _local(text: str) -> str:
    """The README's text with the repository's address pointing at this checkout (committed HEAD)."""
    LOCAL.parent.mkdir(exist_ok=True)
    if not LOCAL.is_symlink():
        LOCAL.symlink_to(ROOT)
    # file://localhost/...: pip 23 (a fresh venv's) refuses a `git+file:///` URL without a host
    return text.replace(_homepage(), f"file://localhost{LOCAL}" if "git+" in text else str(LOCAL))


@pytest.fixture
def venv(tmp_path):
    """A fresh virtual environment (the documented first step) whose dependencies resolve to
    the ones already installed here."""
    if shutil.which("git") is None or subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT,
                                                     capture_output=True).returncode != 0:
        pytest.skip("needs git and a git checkout")
    home = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([str(home / "bin" / "python"), "-c", purelib], capture_output=True, text=True,
                          check=True).stdout.strip()
    Path(site, "_cliplint_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{home / 'bin'}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(home), NO_COLOR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", RUNNER_TEMP=str(tmp_path))
    return home, env


def _bash(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)


def _installed_here(home: Path, env: dict) -> str:
    """Where the fresh environment's `cliplint` command imports cliplint from."""
    return _bash(f"{home}/bin/python -c 'import cliplint; print(cliplint.__file__)'", home, env).stdout


def test_quick_start_is_two_commands_and_says_to_use_a_venv():
    section = README.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(commands) == 2 and all(len(c.strip().splitlines()) == 1 for c in commands)
    assert "python3 -m venv" in section and "from a clone" in section


def test_install_from_a_clone_then_the_quick_start(tmp_path, venv):
    home, env = venv
    clone, wheel, url = _blocks("## Install", "bash")
    assert "git clone" in clone and "pip wheel" in wheel and "git+" in url
    script = _local("\n".join(line for line in clone.splitlines() if not line.startswith("#")))
    installed = _bash("set -e\n" + script, tmp_path, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert str(home) in _installed_here(home, env)
    quick = _blocks("## Quick start", "bash")[0].strip()
    run = _bash(quick, tmp_path / "cliplint", env)  # in the clone, as the Quick start says
    assert run.returncode == 1, run.stdout + run.stderr  # the example has findings
    assert re.search(r"Found \d+ problems in \d+ files \(\d+ confirmed", run.stdout), run.stdout


def test_install_from_a_built_wheel(tmp_path, venv):
    home, env = venv
    subprocess.run(["git", "clone", "-q", str(ROOT), str(tmp_path / "clone")], check=True)
    wheel = _blocks("## Install", "bash")[1]
    result = _bash("set -e\n" + wheel, tmp_path / "clone", env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert list((tmp_path / "clone" / "dist").glob("cliplint-*.whl"))
    (tmp_path / "train.py").write_text(BAD)
    lint = _bash("cliplint train.py", tmp_path, env)
    assert lint.returncode == 1 and "train.py:2:7: CL001" in lint.stdout, lint.stdout + lint.stderr


def test_install_from_the_git_url(tmp_path, venv):
    home, env = venv
    url = _local(_blocks("## Install", "bash")[2])
    result = _bash("set -e\n" + url, tmp_path, env)
    assert result.returncode == 0, result.stdout + result.stderr
    (tmp_path / "train.py").write_text(BAD)
    assert _bash("cliplint train.py", tmp_path, env).returncode == 1
    assert str(home) in _installed_here(home, env)


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text(BAD)
    return project


def test_the_github_actions_workflow_runs_as_written(tmp_path, venv):
    home, env = venv
    [workflow] = [b for b in _blocks("### GitHub Actions: code scanning (SARIF) and annotations", "yaml")
                  if b.startswith("# .github/workflows/")]
    steps = yaml.safe_load(workflow)["jobs"]["cliplint"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    project = _project(tmp_path)
    results = [_bash(_local(run), project, env) for run in runs]
    install, sarif, annotations = results
    assert install.returncode == 0, install.stdout + install.stderr
    assert sarif.returncode == 0, sarif.stderr  # --exit-zero: the upload step runs
    log = json.loads((project / "cliplint.sarif").read_text())
    assert log["runs"][0]["results"][0]["properties"]["verification"]["verdict"] == "confirmed"
    assert annotations.returncode == 1 and annotations.stdout.startswith("::error file=src/train.py,line=2,")


def test_the_problem_matcher_lines_run_as_written(tmp_path, venv):
    home, env = venv
    install = _local(_blocks("## Install", "bash")[2])
    assert _bash(install, tmp_path, env).returncode == 0
    guide = (ROOT / "docs" / "ci.md").read_text()
    matcher = re.findall(r"```yaml\n(.*?)```", guide.split("\n## GitHub Actions", 1)[1], re.S)[0]
    assert "add-matcher" in matcher
    project = _project(tmp_path)
    runs = [step["run"] for step in yaml.safe_load(textwrap.dedent(matcher))]
    register, lint = (_bash(run, project, env) for run in runs)
    assert register.stdout.strip() == f"::add-matcher::{tmp_path}/cliplint-matcher.json"
    assert json.loads((tmp_path / "cliplint-matcher.json").read_text())["problemMatcher"][0]["owner"] == "cliplint"
    assert lint.returncode == 1 and "src/train.py:2:7: CL001" in lint.stdout


def test_the_gitlab_job_runs_as_written(tmp_path, venv):
    home, env = venv
    [job] = _blocks("### GitLab Code Quality and JUnit", "yaml")
    script = yaml.safe_load(job)["cliplint"]["script"]
    project = _project(tmp_path)
    results = [_bash(_local(line), project, env) for line in script]
    assert results[0].returncode == 0, results[0].stdout + results[0].stderr
    assert results[1].returncode == 0 and results[2].returncode == 1  # --exit-zero, then the JUnit gate
    report = json.loads((project / "gl-code-quality-report.json").read_text())
    assert report[0]["location"]["path"] == "src/train.py" and (project / "cliplint-junit.xml").is_file()
