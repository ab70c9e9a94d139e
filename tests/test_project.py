"""Issue 28, through the installed command: the project's own imports are followed.

The fixtures (fixtures/project/) are a package in a `src/` layout and a flat layout: relative
and absolute imports, `import a.b as c`, a star import of constants, an `__init__` re-export,
an import cycle (models <-> layers), a namespace package and a notebook importing the package.
Each mistake is split across modules; its finding is in the module where the sink is (its
`# expect:` markers, which tests/test_golden.py checks file by file too). The clean twins are the
same projects with logits and `clip_by_global_norm`.
"""
import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "fixtures" / "project"
MARKER = re.compile(r"#\s*expect:\s*(?P<codes>CL\d{3}(?:\s*,\s*CL\d{3})*)")
# What makes each fixture project's clean twin: logits instead of probabilities, one global clip,
# a positive clip value.
TWIN = (('activation="softmax"', "activation=None"), ("tf.nn.softmax(logits)", "logits"),
        ("[tf.clip_by_norm(g, CLIP_NORM) for g in grads]", "tf.clip_by_global_norm(grads, CLIP_NORM)[0]"),
        ("CLIPVALUE = -1.0", "CLIPVALUE = 0.5"))


def expected(root: Path):
    """{(path, line, code)} from the `# expect:` markers of a project's Python files."""
    found = set()
    for path in root.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = MARKER.search(line)
            if match:
                found |= {(path.relative_to(root).as_posix(), number, code.strip())
                          for code in match.group("codes").split(",")}
    return found


def findings(result, cells=False):
    assert result.returncode in (0, 1), result.stderr
    records = json.loads(result.stdout)
    return {(r["path"], r["line"], r["code"]) for r in records if cells == ("cell" in r)}


@pytest.fixture
def project(tmp_path):
    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(PROJECTS / name, target)
        return target
    return copy


def twin(root: Path) -> None:
    for path in root.rglob("*.py"):
        text = path.read_text()
        for old, new in TWIN:
            text = text.replace(old, new)
        path.write_text(MARKER.sub("", text))


@pytest.mark.parametrize("name", ["src_layout", "flat_layout"])
def test_every_finding_is_where_the_sink_is(project, run_cli, name):
    root = project(name)
    result = run_cli("--output-format", "json", "--no-cache", ".", cwd=root)
    assert findings(result) == expected(root)
    assert expected(root)


def test_the_new_users_case_is_reported_in_train_py_with_the_import_chain(project, run_cli):
    root = project("src_layout")
    result = run_cli("--no-cache", "src/mypkg/train.py", cwd=root)
    line = next(line for line in result.stdout.splitlines() if "CL010" in line)
    assert line.startswith("src/mypkg/train.py:12:")
    assert "`build_classifier(10)`, which runs `mypkg.models.build_classifier` (src/mypkg/models.py:7)" in line


def test_a_notebook_imports_the_package_through_its_init(project, run_cli):
    root = project("src_layout")
    result = run_cli("--output-format", "json", "--no-cache", "notebooks/explore.ipynb", cwd=root)
    records = json.loads(result.stdout)
    assert [(r["code"], r["cell"], r["line"]) for r in records] == [("CL010", 3, 2)]
    assert "mypkg.models.build_classifier" in records[0]["message"]


@pytest.mark.parametrize("name", ["src_layout", "flat_layout"])
def test_the_clean_twins_have_no_finding(project, run_cli, name):
    root = project(name)
    twin(root)
    result = run_cli("--no-cache", ".", cwd=root)
    assert result.returncode == 0, result.stdout
    assert "All checks passed" in result.stdout


@pytest.mark.parametrize("cache", [["--no-cache"], []])
def test_a_one_file_run_reads_the_modules_it_imports(project, run_cli, cache):
    """pre-commit passes only the changed file: its imports are summarised on demand, cold or
    from the cache."""
    root = project("src_layout")
    every = {f for f in expected(root) if f[0] == "src/mypkg/train.py"}
    for _ in range(2):  # cold, then warm
        result = run_cli("--output-format", "json", *cache, "src/mypkg/train.py", cwd=root)
        assert findings(result) == every


def test_a_helpers_change_changes_its_importers_findings_in_a_warm_run(project, run_cli):
    root = project("src_layout")
    models = root / "src" / "mypkg" / "models.py"
    original = models.read_text()
    before = findings(run_cli("--output-format", "json", ".", cwd=root))
    assert ("src/mypkg/train.py", 12, "CL010") in before
    models.write_text(original.replace('activation="softmax"', "activation=None"))
    after = findings(run_cli("--output-format", "json", ".", cwd=root))
    assert after == before - {("src/mypkg/train.py", 12, "CL010")}
    models.write_text(original)
    assert findings(run_cli("--output-format", "json", ".", cwd=root)) == before
    # the same for one file named alone, after the helper changed behind the cache's back
    models.write_text(original.replace('activation="softmax"', "activation=None"))
    alone = findings(run_cli("--output-format", "json", "src/mypkg/train.py", cwd=root))
    assert ("src/mypkg/train.py", 12, "CL010") not in alone


def test_a_change_that_leaves_the_summary_alone_keeps_the_cached_result(project, run_cli):
    """A comment or an unrelated function changes the helper's bytes, not its summary."""
    root = project("src_layout")
    models = root / "src" / "mypkg" / "models.py"
    first = findings(run_cli("--output-format", "json", ".", cwd=root))
    models.write_text(models.read_text() + "\n\ndef unrelated():\n    return 1\n")
    assert findings(run_cli("--output-format", "json", ".", cwd=root)) == first


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


COMPILE = ("import tensorflow as tf\nfrom {module} import build\nmodel = build()\n"
           "model.compile(loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))\n")
BUILD = ("import tensorflow as tf\n\n\ndef build():\n"
         "    return tf.keras.Sequential([tf.keras.layers.Dense(3, activation='softmax')])\n")


def test_the_src_setting_adds_a_source_root(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.cliplint]\nsrc = ["lib"]\n')
    write(tmp_path, "lib/shapes/builders.py", BUILD)
    write(tmp_path, "scripts/fit.py", COMPILE.format(module="shapes.builders"))
    result = run_cli("--output-format", "json", "--no-cache", "scripts/fit.py")
    assert findings(result) == {("scripts/fit.py", 4, "CL010")}


def test_a_tree_without_a_project_marker_finds_its_imports_in_the_folders_above(tmp_path, run_cli):
    """Files copied out of their checkout (no pyproject.toml, setup.py or .git, no __init__.py):
    `from shapes.builders import build` in scripts/deep/fit.py is looked up above it."""
    write(tmp_path, "copy/shapes/builders.py", BUILD)
    write(tmp_path, "copy/scripts/deep/fit.py", COMPILE.format(module="shapes.builders"))
    result = run_cli("--output-format", "json", "--no-cache", ".", cwd=tmp_path / "copy")
    assert findings(result) == {("scripts/deep/fit.py", 4, "CL010")}
    # with a marker the root is known, and nothing above it is looked in: `shapes` is outside it
    write(tmp_path, "rooted/shapes/builders.py", BUILD)
    write(tmp_path, "rooted/scripts/deep/fit.py", COMPILE.format(module="shapes.builders"))
    write(tmp_path, "rooted/scripts/pyproject.toml", "")
    result = run_cli("--output-format", "json", "--no-cache", ".", cwd=tmp_path / "rooted")
    assert findings(result) == set()
    # a package's folder is never a root: inside keras/src, `backend/tensorflow/` is not TensorFlow
    for package in ("lib", "lib/backend", "lib/backend/other"):
        write(tmp_path, f"loose/{package}/__init__.py", "")
    write(tmp_path, "loose/lib/backend/shapes/builders.py", BUILD)
    write(tmp_path, "loose/lib/backend/other/fit.py", COMPILE.format(module="shapes.builders"))
    result = run_cli("--output-format", "json", "--no-cache", ".", cwd=tmp_path / "loose")
    assert findings(result) == set()


def test_a_checkout_that_is_a_package_is_run_from_its_folders(tmp_path, run_cli):
    """An `__init__.py` at a checkout's root and in every folder: nobody imports it from above,
    its scripts run where they are, so `from game.ai.models import build` in
    `project/learner.py` is `project/game/ai/models.py`."""
    # without the root's `__init__.py` the package is imported from the root: `game` is not there
    for repo, found in (("repo", {("project/learner.py", 4, "CL010")}), ("plain", set())):
        packages = ("project", "project/game", "project/game/ai") + (("",) if repo == "repo" else ())
        for package in packages:
            write(tmp_path, f"{repo}/{package}/__init__.py".replace("//", "/"), "")
        write(tmp_path, f"{repo}/.git/HEAD", "")
        write(tmp_path, f"{repo}/project/game/ai/models.py", BUILD)
        write(tmp_path, f"{repo}/project/learner.py", COMPILE.format(module="game.ai.models"))
        result = run_cli("--output-format", "json", "--no-cache", ".", cwd=tmp_path / repo)
        assert findings(result) == found


def test_a_cycle_of_re_exports_ends(tmp_path, run_cli):
    """a re-exports b's name and b re-exports a's: the name is nowhere, and the run ends."""
    write(tmp_path, "pyproject.toml", "")
    write(tmp_path, "pkg/__init__.py", "from .a import build\n")
    write(tmp_path, "pkg/a.py", "from .b import build\nfrom . import b\n")
    write(tmp_path, "pkg/b.py", "from .a import build\nfrom .a import *\n")
    write(tmp_path, "fit.py", COMPILE.format(module="pkg"))
    result = run_cli("--no-cache", "fit.py")
    assert result.returncode == 0 and "All checks passed" in result.stdout


def test_a_helper_that_does_not_parse_leaves_its_name_opaque(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", "")
    write(tmp_path, "helpers.py", BUILD + "def broken(:\n")
    write(tmp_path, "fit.py", COMPILE.format(module="helpers"))
    result = run_cli("--output-format", "json", "--no-cache", "fit.py")
    assert findings(result) == set()


def test_keras_linting_its_own_sequential_is_still_a_sequential(tmp_path, run_cli):
    """In Keras' own repository `keras.models.Sequential` is a class of the project: a model built
    with it is still read by its layers (not as a subclassed model's `call`)."""
    write(tmp_path, "pyproject.toml", "")
    write(tmp_path, "keras/__init__.py", "from keras import layers, models\n")
    write(tmp_path, "keras/layers.py", "class Dense:\n    def __init__(self, units, activation=None):\n"
                                       "        self.units = units\n")
    write(tmp_path, "keras/models.py", "class Sequential:\n    def call(self, inputs):\n        return inputs\n")
    write(tmp_path, "keras/fit_test.py", "import keras\n\ndef test_fit(x, y):\n"
                                         "    model = keras.models.Sequential()\n"
                                         "    model.add(keras.layers.Dense(2))\n"
                                         "    model.compile(loss='categorical_crossentropy', optimizer='sgd')\n"
                                         "    model.fit(x, y)\n")
    result = run_cli("--output-format", "json", "--no-cache", "keras/fit_test.py")
    assert findings(result) == {("keras/fit_test.py", 6, "CL012")}


def test_third_party_modules_are_not_read(tmp_path, run_cli):
    """`tensorflow` is not in the project: nothing of the installed package is summarised."""
    write(tmp_path, "pyproject.toml", "")
    write(tmp_path, "fit.py", COMPILE.format(module="tensorflow.keras.models"))
    result = run_cli("--output-format", "json", "fit.py")
    assert findings(result) == set()
    assert not (tmp_path / ".cliplint_cache" / "summaries").exists() or not any(
        (tmp_path / ".cliplint_cache" / "summaries").rglob("*?"))


LINEAR_BUILD = ("from tensorflow import keras\n\n\ndef build(classes):\n"
                "    hidden = keras.layers.Dense(64, activation='relu')\n"
                "    return keras.Sequential([hidden, keras.layers.Dense({last})])\n")
FIT = ("from models import build\n\nmodel = build(10)\n"
       "model.compile(optimizer='adam', loss='categorical_crossentropy')\nmodel.fit(features, labels)\n")


@pytest.mark.parametrize("last, found", [("classes", {("fit.py", 4, "CL012")}),
                                         ("classes, activation='softmax'", set())])
def test_a_linear_model_built_in_another_module_is_followed_to_its_loss(tmp_path, run_cli, last, found):
    """CL012's source (a last layer without activation) is in models.py and nothing the rules
    look for is written in fit.py: the summary keeps model builders, and the gate reads them."""
    write(tmp_path, "pyproject.toml", "")
    write(tmp_path, "models.py", LINEAR_BUILD.format(last=last))
    write(tmp_path, "fit.py", FIT)
    result = run_cli("--output-format", "json", "--no-cache", "fit.py")
    assert findings(result) == found


def test_a_linked_class_that_compiles_its_model_is_reported_in_its_own_file_only(tmp_path, run_cli):
    """The subclass in `agent.py` links `model.py`'s class, whose method wraps a softmax model with
    a `from_logits=True` loss for TFF: the finding is `model.py`'s alone, and `agent.py`, which
    compiles the model again to evaluate it, lints clean (found on real code: the engine's query
    saw the linked module's call too, and reported it in the wrong file)."""
    write(tmp_path, "pyproject.toml", "")
    write(tmp_path, "model.py", "import tensorflow as tf\nimport tensorflow_federated as tff\n\n\nclass Model:\n"
                                "    def build(self):\n        dense = tf.keras.layers.Dense(3, activation='softmax')\n"
                                "        return tf.keras.Sequential([dense])\n\n"
                                "    def model_fn(self):\n        return tff.learning.models.from_keras_model(\n"
                                "            self.build(), input_spec=None,\n"
                                "            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))\n")
    write(tmp_path, "agent.py", "import tensorflow as tf\nimport tensorflow_federated as tff\nfrom model import Model\n"
                                "\n\nclass Agent(Model):\n    def run(self):\n"
                                "        return tff.learning.algorithms.build_weighted_fed_avg(self.model_fn)\n\n"
                                "    def evaluate(self, data):\n        model = self.build()\n"
                                "        model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(\n"
                                "            from_logits=False))\n        return model.evaluate(data)\n")
    result = run_cli("--output-format", "json", "--no-cache", ".")
    assert findings(result) == {("model.py", 13, "CL010")}
