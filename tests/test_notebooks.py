"""Notebooks: cells as one program, magics, positions, suppressions, malformed input, verify."""
import ast
import json
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cliplint.engine import run
from cliplint.ipython_input import transform
from cliplint.notebook import python_cells
from cliplint.settings import Config


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
                     ("code", "lp = tf.math.log(tf.nn.softmax(z))\n"
                              "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)  # noqa: CL001"),
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


# --- cells read as IPython runs them: magics, shell escapes, automagics -----------------------

ADAM = "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)"


def findings(tmp_path, cells, name="nb.ipynb", config=None):
    """(cell, line, column, code, severity) of every finding, linted in-process."""
    (tmp_path / name).write_text(notebook(cells))
    result = run([str(tmp_path / name)], config or Config(isolated=True), jobs=1)
    return [(f.cell, f.line, f.column, f.code, f.severity) for f in result.findings]


def python(source, shadowed=()):
    return "\n".join(transform(source, set(shadowed)).lines)


# Each cell with what IPython 9.18 (and 8.12) does with it: True = it compiles after IPython's
# input transformations. Checked with IPython's own TransformerManager / transform_cell.
IPYTHON_VERDICTS = [
    ("print('Epoch: %d, accuracy: %f.'\n      %(epoch, accuracy))", True),  # % inside brackets: an operator
    ("x = (a\n % b)", True),
    ("x = a \\\n  % b", True),  # after a backslash: still the operator
    ("!python save.py --data a.csv  \\\n        --save_path data.npz\nx = 1", True),
    ("%pip install -q \\\n    tensorflow", True),
    ("  for x in ds.take(3):\n    print(x)", True),  # indented as a whole
    ("\tif x:\n\t\ty = 1", True),
    ("  x = 1\n y = 2", False),  # IPython 9 removes the common " ", 8 the first line's "  ": both fail
    ("ls ./data/", True), ("pwd", True), ("cd dir", True), ("pip install x", True), ("env", True),
    ("who", True), ("conda install -y x", True),
    ("cd data\nls", False),  # automagic needs a one-line cell
    ("cd /content\nls", True),  # ... though `cd / content` is a division, and compiles
    ("pip install x\n\n", False),  # ... and a trailing empty line is a second line
    ("ls = 3", True), ("x = !ls -l", True), ("files = \\\n  !ls", True), ("x = %time f(1)", True),
    ("s = '''\n!not a shell line\n%nor a magic\n'''", True), ("x = '!echo'", True),
    ("obj?", True), ("model.fit??", True), ("f(x)?", False), ("x?  # a comment after it", False),
    ("%%bash\nls -l\nif [ -f x ]; then echo ?; fi", True), ("%%time\n  model.fit(x)", True),
    ("%%time\nmodel.fit(x", False),
    ("@manual{Intro1,\n title={Tutorial},\n year={2021},\n}", False),
    ("if x:\n    !ls\n    %time y = 1", True), ("/print 1 2", True), ("?", True),
    ("x = 1 \\\n  %time f()", False), ("a == %b", False), ("%time for i in range(3): f(i)", True),
]


@pytest.mark.parametrize("cell,runs", IPYTHON_VERDICTS)
def test_a_cell_is_python_exactly_when_ipython_runs_it(cell, runs):
    """A cell IPython does not run is one warning; what is linted of it is at most the rest of it
    with the failing lines blanked (`notebook.salvage`)."""
    cells, skipped = python_cells("nb.ipynb", [(1, cell)])
    assert len(skipped) == (0 if runs else 1)
    if runs:
        assert len(cells) == 1
    else:
        assert all(len([line for line in c.lines if line.strip()]) < len(cell.strip().splitlines()) for _, c in cells)


def test_a_cell_only_ipython_8_dedents_is_python_too():
    """IPython 7-8 strip the first line's indentation from the lines that start with it (Colab
    runs 7.34); IPython 9 strips the common indentation and rejects this cell."""
    cell = " s = f(1,\n        2)\ns(3)"
    cells, skipped = python_cells("nb.ipynb", [(1, cell)])
    assert skipped == [] and cells[0][1].lines == ["s = f(1,", "       2)", "s(3)"] and cells[0][1].shifts == [1, 1, 0]


@pytest.fixture(scope="module")
def ipython():
    """IPython's shell; afterwards the process's `__main__` and hooks as they were (the shell
    replaces `__main__` with a module a spawned child cannot be prepared from: lint.contained)."""
    interactive = pytest.importorskip("IPython.core.interactiveshell")
    main, hooks = sys.modules["__main__"], (sys.displayhook, sys.excepthook)
    yield interactive.InteractiveShell.instance()
    interactive.InteractiveShell.clear_instance()
    sys.modules["__main__"] = main
    sys.displayhook, sys.excepthook = hooks


@pytest.mark.parametrize("cell,runs", IPYTHON_VERDICTS)
def test_the_verdicts_are_ipythons_own(ipython, cell, runs):
    """When IPython is installed (it is not a dependency), ask it directly."""
    shell = ipython
    shell.user_ns.clear()
    code = shell.transform_cell(cell)
    magic_body = re.match(r"get_ipython\(\)\.run_cell_magic\('time', '', (.*)\)\n\Z", code, re.S)
    if magic_body:  # %%time compiles its body when it runs
        code = shell.transform_cell(ast.literal_eval(magic_body.group(1)))
    try:
        compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError:
        assert not runs
    else:
        assert runs


@pytest.mark.parametrize("cell,expected", [
    ("x = (a\n % b)", "x = (a\n % b)"),
    ("!pip install \\\n   x\ny = 1", "pass\n\ny = 1"),
    ("  for x in ds:\n    f(x)", "for x in ds:\n  f(x)"),
    ("x = !ls", "x = get_ipython()"),
    ("x = %time f(1)", "x =       f(1)"),  # %time returns what it ran: x is still f's result
    ("%time history = model.fit(x)", "pass; history = model.fit(x)"),
    ("%timeit -n 10 -r 2 model(x)", "pass;              model(x)"),
    ("time model.fit(x)", "pass;model.fit(x)"),  # automagic %time keeps its statement too
    ("%%writefile train.py\nimport tensorflow", "\n"),
    ("if x:\n    !ls\n    y = 1", "if x:\n    pass\n    y = 1"),
])
def test_special_lines_become_python_on_the_same_lines(cell, expected):
    assert python(cell) == expected


@pytest.mark.parametrize("line,defining,runs", [
    ("ls -l", "ls = ['a']", True),  # then `ls - l`, Python
    ("pwd", "import os as pwd", True),
    ("pip install tf", "def pip(): pass", False),  # then a syntax error, as in IPython
    ("who", "for who in x: pass", True),
    ("history", "if True:\n    history = model.fit(x)", True),
])
def test_an_automagic_is_python_once_an_earlier_cell_defines_the_name(line, defining, runs):
    assert python(line) == "pass"
    assert python(line, shadowed={line.split()[0]}) == line
    cells, skipped = python_cells("nb.ipynb", [(1, defining), (2, line)])
    assert ([c.lines for _, c in cells[1:]], len(skipped)) == (([[line]], 0) if runs else ([], 1))


@pytest.mark.parametrize("defining", ["def f():\n    pip = 1", "from os import *", "class C:\n    pip = 1"])
def test_local_names_and_star_imports_do_not_shadow_an_automagic(defining):
    cells, skipped = python_cells("nb.ipynb", [(1, defining), (2, "pip install tf")])
    assert skipped == [] and cells[1][1].lines == ["pass"]


def test_shapes_from_real_notebooks_lint_without_cl000(tmp_path):
    cells = [("code", "import tensorflow as tf"),
             ("code", "for epoch in range(3):\n    print('Epoch: %d, accuracy: %f'\n"
                      "          %(epoch, acc))"),
             ("code", "!python scripts/save_features.py --data_path data.csv  \\\n"
                      "                                --save_path data.npz"),
             ("code", " for x in ds.take(3):\n   print(x)"),
             ("code", "ls ./data/"), ("code", "pip install -q tensorflow-datasets"), ("code", "pwd"),
             ("code", "cd models"), ("code", "env"), ("code", "who")]
    assert findings(tmp_path, cells) == []


def test_positions_in_an_indented_cell_point_at_the_original_columns(tmp_path):
    cell = "    import tensorflow as tf\n    if True:\n        " + ADAM
    assert findings(tmp_path, [("code", cell)]) == [(1, 3, 15, "CL001", "error")]
    assert cell.splitlines()[2][14:].startswith("tf.keras.optimizers.Adam(")


def test_a_cell_that_is_not_python_is_one_warning_and_the_rest_is_linted(tmp_path):
    bibtex = "@manual{Intro1,\n title={Training},\n year={2021},\n}"
    cells = [("code", "import tensorflow as tf"), ("code", bibtex), ("markdown", "x"), ("code", ADAM)]
    found = [(cell, line, code, severity) for cell, line, _, code, severity in findings(tmp_path, cells)]
    assert found == [(2, 2, "CL000", "warning"), (4, 1, "CL001", "error")]  # CPython's position
    result = run([str(tmp_path / "nb.ipynb")], Config(isolated=True), jobs=1)
    assert result.findings[0].message.startswith("cell 2 is not Python: skipped (running it raises SyntaxError")


def test_an_exercise_cell_with_a_blank_to_fill_is_linted_but_for_that_line(tmp_path, run_cli):
    """A course notebook's `z = ` left for the student: the cell is not Python, yet the line is all
    that is skipped. The softmax bound after it reaches the next cell's log, and a fix of the cell
    leaves the unfinished line as it was."""
    exercise = "w = tf.Variable(tf.zeros([4, 3]))\nz = \nprob = tf.nn.softmax(z)\n" + ADAM
    cells = [("code", "import tensorflow as tf"), ("code", exercise),
             ("code", "loss = -tf.reduce_sum(y * tf.math.log(prob))")]
    found = [(cell, line, code, severity) for cell, line, _, code, severity in findings(tmp_path, cells)]
    assert found == [(2, 2, "CL000", "warning"), (2, 4, "CL001", "error"), (3, 1, "CL004", "error")]
    result = run([str(tmp_path / "nb.ipynb")], Config(isolated=True), jobs=1)
    assert result.findings[0].message.startswith("cell 2 is not Python: line 2 skipped, the rest linted")
    run_cli("--fix", "--unsafe-fixes", "nb.ipynb")
    fixed = "".join(json.loads((tmp_path / "nb.ipynb").read_text())["cells"][1]["source"])
    assert "\nz = \n" in fixed and "clipvalue" not in fixed


def test_the_warning_is_silenced_per_folder_or_notebook_without_the_findings(tmp_path, run_cli):
    bibtex = "@manual{Intro1,\n title={Training},\n}"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "nb.ipynb").write_text(notebook([("code", "import tensorflow as tf\n" + ADAM),
                                                          ("code", bibtex)]))
    (tmp_path / "pyproject.toml").write_text('[tool.cliplint.per-file-ignores]\n"docs/**/*.ipynb" = ["CL000"]\n')
    result = run_cli("--output-format", "json", "docs")
    assert [r["code"] for r in json.loads(result.stdout)] == ["CL001"] and result.returncode == 1
    noqa = [("code", "# cliplint: noqa: CL000\nimport tensorflow as tf\n" + ADAM), ("code", bibtex)]
    assert [f[3] for f in findings(tmp_path, noqa, "b.ipynb")] == ["CL001"]
    on_the_line = [("code", "import tensorflow as tf\n" + ADAM),
                   ("code", "@manual{Intro1,\n title={T},  # noqa: CL000\n}")]
    assert [f[3] for f in findings(tmp_path, on_the_line, "c.ipynb")] == ["CL001"]


def test_by_default_the_warning_fails_the_run_and_a_py_syntax_error_stays_an_error(tmp_path, run_cli):
    clean = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=1.0)"
    (tmp_path / "nb.ipynb").write_text(notebook([("code", clean), ("code", "@manual{x,\n}")]))
    result = run_cli("nb.ipynb")
    assert result.returncode == 1 and "nb.ipynb:cell 2:" in result.stdout and "CL000 warning" in result.stdout
    (tmp_path / "train.py").write_text(clean + "\n@manual{x,\n}\n")
    records = json.loads(run_cli("--output-format", "json", "train.py").stdout)
    assert [(r["code"], r["severity"]) for r in records] == [("CL000", "error")]
    assert records[0]["message"].startswith("syntax error")


def test_a_time_magic_keeps_the_statement_it_runs_for_cross_cell_flow(tmp_path):
    cells = [("code", "import tensorflow as tf\nlogits = model(x)"),
             ("code", "%time probs = tf.nn.softmax(logits)"),
             ("code", "%%time\nloss = -tf.reduce_sum(y * tf.math.log(probs))")]
    assert [(c, line, code) for c, line, _, code, _ in findings(tmp_path, cells)] == [(3, 2, "CL004")]


# Lines of IPython-flavoured cells: Python statements, magics, escapes, help, continuations.
_LINES = st.sampled_from([
    "x = 1", "y = f(x,\n      2)", "s = '''\n!text\n'''", "!pip install -q x", "!cmd --a 1 \\\n    --b 2",
    "%matplotlib inline", "%time z = g(1)", "files = !ls", "r = %env HOME", "obj?", "print('%d'\n  % 3)",
    "if x:\n    !ls\n    w = 2", "# a comment with ! and %", "", "t = (1 +\n     2)", "%timeit -n 3 h()",
])


def aligned(original: str, python_line: str, shift: int) -> bool:
    """`python_line` is the original line less `shift` columns of indentation, or a replacement
    that keeps whatever it kept in the original columns."""
    if original[:shift].strip():
        return False
    rest = original[shift:]
    if python_line == rest or python_line == "" or python_line.strip() == "pass":
        return True
    if python_line.endswith("get_ipython()"):
        return rest.startswith(python_line[:-len("get_ipython()")])
    if python_line.lstrip().startswith("pass;"):  # `%time stmt`: the statement in its columns
        kept = len(python_line) - len(python_line.lstrip()) + 5
        statement = python_line[kept:].lstrip()
        return len(python_line) == len(rest) and bool(statement) and rest.endswith(statement)
    return False


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, min_size=1, max_size=8), st.sampled_from(["", " ", "    ", "\t"]))
def test_every_python_line_keeps_the_original_columns(lines, indent):
    source = "\n".join(indent + line if line else line for line in "\n".join(lines).split("\n"))
    cell = transform(source)
    original = source.split("\n")
    assert len(cell.lines) == len(original) == len(cell.shifts)
    for before, after, shift in zip(original, cell.lines, cell.shifts):
        assert aligned(before, after, shift), (before, after, shift)


@settings(max_examples=25, deadline=None)
@given(st.lists(_LINES, max_size=4), st.lists(_LINES, max_size=4), st.sampled_from(["", "  ", "    "]),
       st.booleans())
def test_a_finding_points_at_its_original_line_and_column(tmp_path_factory, before, after, indent, in_block):
    statement = ("if True:\n    " + ADAM) if in_block else ADAM
    body = "\n".join(before + ["import tensorflow as tf", statement] + after)
    cell = "\n".join(indent + line if line else line for line in body.split("\n"))
    tmp_path = tmp_path_factory.mktemp("nb")
    found = findings(tmp_path, [("markdown", "# t"), ("code", cell)])
    lines = cell.split("\n")
    row = next(i for i, line in enumerate(lines) if "Adam(" in line)
    assert found == [(2, row + 1, lines[row].index("tf.keras.optimizers") + 1, "CL001", "error")]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab =%!?,;/\\#'\"()[]{}:\t\n\r xyz%%12")), max_size=80))
def test_any_cell_text_gives_python_lines_or_one_warning_never_an_exception(text):
    cell = transform(text)
    assert len(cell.lines) == len(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")) == len(cell.shifts)
    cells, skipped = python_cells("nb.ipynb", [(1, text)])
    assert len(cells) + len(skipped) == 1 or (len(skipped) == 1 and "the rest linted" in skipped[0].message)
    assert all(f.code == "CL000" and f.severity == "warning" and 1 <= f.line <= len(cell.lines) for f in skipped)


@pytest.mark.parametrize("layout", ["lines", "one string", "compact", "ascii escapes"])
def test_ci_outputs_point_at_the_ipynb_line_holding_the_code(tmp_path, run_cli, layout):
    """GitHub annotations, SARIF, GitLab and JUnit land on the .ipynb's own line and column (what
    a pull request shows), the cell and its line stay in the message; whatever the JSON layout."""
    code = ('import tensorflow as tf\n'
            'name = "caf\u00e9\\t\U0001F600"; opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n')
    source = code if layout == "one string" else code.splitlines(keepends=True)
    data = json.loads(notebook([("markdown", "# t"), ("code", "x = 1"), ("code", source)]))
    text = json.dumps(data, indent=None if layout == "compact" else 1, ensure_ascii=layout == "ascii escapes")
    (tmp_path / "nb.ipynb").write_text(text, encoding="utf-8")
    flagged = "tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)"

    def holds_flagged_code(line: int, column: int, end_line: int, end_column: int) -> None:
        lines = text.splitlines()
        assert line == end_line and lines[line - 1][column - 1:end_column - 1] == flagged

    annotation = run_cli("--output-format", "github", "nb.ipynb").stdout
    fields = dict(part.split("=", 1) for part in annotation.split("::")[1].split(" ", 1)[1].split(","))
    holds_flagged_code(*(int(fields[key]) for key in ("line", "col", "endLine", "endColumn")))
    assert "(cell 3, line 2)" in annotation
    result = json.loads(run_cli("--output-format", "sarif", "nb.ipynb").stdout)["runs"][0]["results"][0]
    region = result["locations"][0]["physicalLocation"]["region"]
    holds_flagged_code(region["startLine"], region["startColumn"], region["endLine"], region["endColumn"])
    assert result["properties"]["cell"] == 3 and "(cell 3, line 2)" in result["message"]["text"]
    location = json.loads(run_cli("--output-format", "gitlab", "nb.ipynb").stdout)[0]["location"]["positions"]
    holds_flagged_code(location["begin"]["line"], location["begin"]["column"],
                       location["end"]["line"], location["end"]["column"])
    records, _ = lint(tmp_path, run_cli, "nb.ipynb", text)
    assert [(r["cell"], r["line"], r["code"]) for r in records] == [(3, 2, "CL001")]  # JSON: the cell's line
    assert run_cli("nb.ipynb").stdout.startswith("nb.ipynb:cell 3:2:")
