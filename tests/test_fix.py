"""Autofix: every fix an INVALID example offers parses, removes its finding, is idempotent and
leaves the rest of the file alone; golden files fixed by the installed command; --diff,
--add-noqa, notebooks, encodings; a hypothesis property over generated training programs."""
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from command import run_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cliplint.analysis import lint_module
from cliplint.fix import compiles, fix_text, fixes_for, offered
from cliplint.notebook import replace_sources, source_spans
from cliplint.rules import ALL_RULES

GOLDEN = Path(__file__).resolve().parent / "data" / "fixing"
CASES = [(code, index, example) for code, rule in ALL_RULES.items() for index, example in enumerate(rule.INVALID)]
HEADER = "# a header comment that must survive\n"
FOOTER = "\nkept  =  [1,2 ,3]   # odd formatting, kept as written\n"


def findings(text, codes=None):
    rules = [ALL_RULES[c] for c in (codes or ALL_RULES)]
    return lint_module("x.py", text, rules)[0]


def cliplint(*args, cwd):
    return run_in_process(["--isolated", "--no-cache", *args], cwd)


@pytest.mark.parametrize("code,index,example", CASES, ids=[f"{c}-{i}" for c, i, _ in CASES])
def test_each_offered_fix_parses_removes_its_finding_and_is_idempotent(code, index, example):
    source = HEADER + example.source + FOOTER
    rules = [ALL_RULES[code]]
    before = [f for f in findings(source, [code]) if f.code == code]
    outcome = fix_text("x.py", source, rules, unsafe=True)
    if not outcome.applied:
        return  # no fix offered for this shape (the rule page says when)
    assert compiles(outcome.text)
    after = [f for f in findings(outcome.text, [code]) if f.code == code]
    assert len(after) == len(before) - len(outcome.applied)
    assert fix_text("x.py", outcome.text, rules, unsafe=True).text == outcome.text
    assert outcome.text.startswith(HEADER) and outcome.text.endswith(FOOTER)


def _first_fix(source, code):
    edits = offered("x.py", source, [ALL_RULES[code]])
    return edits[0] if edits else None


@pytest.mark.parametrize("code,source,safety", [
    ("CL004", "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(logits))\n", "safe"),
    ("CL004", "import tensorflow as tf\np = tf.sigmoid(z)\nbce = tf.math.log(1 - p)\n", "unsafe"),
    ("CL006", "import tensorflow as tf\ngrads = tf.clip_by_global_norm(grads, 1.0)\n"
              "opt.apply_gradients(zip(grads, vs))\n", "safe"),
    ("CL003", ALL_RULES["CL003"].INVALID[0].source, "unsafe"),
    ("CL005", ALL_RULES["CL005"].INVALID[2].source, "unsafe"),
    ("CL007", ALL_RULES["CL007"].INVALID[0].source, "unsafe"),
    ("CL008", ALL_RULES["CL008"].INVALID[1].source, "unsafe"),
    ("CL001", ALL_RULES["CL001"].INVALID[0].source, "unsafe"),
    ("CL010", ALL_RULES["CL010"].INVALID[0].source, "unsafe"),
])
def test_the_listed_fixes_exist_with_their_safety(code, source, safety):
    edit = _first_fix(source, code)
    assert edit is not None and edit.safety == safety


@pytest.mark.parametrize("source,expected", [
    ("import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(x, axis=1))\n", "tf.nn.log_softmax(x, axis=1)"),
    ("import tensorflow as tf\nlp = tf.math.log(1 - tf.sigmoid(a + b))\n", "tf.math.log_sigmoid(-(a + b))"),
    ("import tensorflow as tf\nfrom keras import ops\nlp = ops.log(ops.softmax(x))\n", "ops.log_softmax(x)"),
    ("import tensorflow.compat.v1 as tf1\nlp = tf1.log(tf1.nn.softmax(x))\n", "tf1.nn.log_softmax(x)"),
])
def test_cl004_fix_keeps_the_files_aliases(source, expected):
    fixed = fix_text("x.py", source, [ALL_RULES["CL004"]]).text
    assert expected in fixed


@pytest.mark.parametrize("source", [
    # no import names log_softmax: a fix never adds one
    "from tensorflow.keras import backend as K\nlp = K.log(K.softmax(x))\n",
    # a probability picked out of the softmax
    "import tensorflow as tf\np = tf.nn.softmax(z)\nlp = tf.math.log(tf.gather(p, a, batch_dims=1))\n",
    # the softmax's input is rebound between the softmax and the log
    "import tensorflow as tf\np = tf.nn.softmax(z)\nz = z * 2\nlp = tf.math.log(p + 1e-9)\n",
])
def test_cl004_offers_no_fix_where_it_would_be_wrong(source):
    assert _first_fix(source, "CL004") is None


def test_cl007_offers_no_fix_when_the_clip_is_in_a_branch():
    assert _first_fix(ALL_RULES["CL007"].INVALID[1].source, "CL007") is None


def test_cl001_offers_no_fix_for_clipnorm_with_global_clipnorm_or_legacy():
    assert _first_fix(ALL_RULES["CL001"].INVALID[1].source, "CL001") is None
    assert _first_fix(ALL_RULES["CL001"].INVALID[2].source, "CL001") is None


def test_safe_fixes_only_without_unsafe():
    source = ("import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(z))\n"
              "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n")
    outcome = fix_text("x.py", source, list(ALL_RULES.values()))
    assert [e.code for e in outcome.applied] == ["CL004"]
    assert "clipvalue=0.5" in outcome.text


def test_a_file_with_a_syntax_error_is_never_touched():
    source = "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(z))\ndef broken(:\n"
    assert offered("x.py", source, list(ALL_RULES.values())) is None
    assert fix_text("x.py", source, list(ALL_RULES.values()), unsafe=True).text == source


def test_fixes_for_gives_edits_for_given_findings():
    source = "import tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(z))\n"
    found = findings(source)
    edits = fixes_for("x.py", source, found)
    assert len(edits) == 1 and edits[0].span(source)[0] == 2 and edits[0].code == "CL004"
    assert source[:edits[0].start] + edits[0].replacement + source[edits[0].end:] == \
        "import tensorflow as tf\nlp = tf.nn.log_softmax(z)\n"
    assert fixes_for("x.py", source, []) == []


# --- golden files through the installed command ---------------------------------------------

@pytest.mark.parametrize("name,args", [("custom_loop.py", ["--unsafe-fixes"]), ("keras_fit.py", []),
                                       ("notebook.ipynb", ["--unsafe-fixes"])])
def test_golden_files_fixed_end_to_end(tmp_path, name, args):
    shutil.copy(GOLDEN / name, tmp_path / name)
    result = cliplint("--fix", *args, name, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    stem, suffix = name.rsplit(".", 1)
    assert (tmp_path / name).read_bytes() == (GOLDEN / f"{stem}.fixed.{suffix}").read_bytes()
    assert "Fixed " in result.stdout
    again = cliplint("--fix", *args, name, cwd=tmp_path)
    assert (tmp_path / name).read_bytes() == (GOLDEN / f"{stem}.fixed.{suffix}").read_bytes()
    assert "Fixed 0 problems" in again.stdout


def test_summary_counts_remaining_and_unsafe(tmp_path):
    shutil.copy(GOLDEN / "keras_fit.py", tmp_path / "k.py")
    result = cliplint("--fix", "k.py", cwd=tmp_path)
    assert "Fixed 1 problem (1 remaining; 1 more with --unsafe-fixes)." in result.stdout
    assert result.returncode == 1


def test_diff_writes_nothing_and_exits_1(tmp_path):
    shutil.copy(GOLDEN / "custom_loop.py", tmp_path / "c.py")
    before = (tmp_path / "c.py").read_bytes()
    mtime = os.stat(tmp_path / "c.py").st_mtime_ns
    result = cliplint("--diff", "c.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "+    return -tf.reduce_sum(labels * tf.nn.log_softmax(logits, axis=-1), axis=-1)" in result.stdout
    assert (tmp_path / "c.py").read_bytes() == before and os.stat(tmp_path / "c.py").st_mtime_ns == mtime
    assert not [p for p in tmp_path.iterdir() if p.name != "c.py"]
    shutil.copy(GOLDEN / "custom_loop.fixed.py", tmp_path / "c.py")
    clean = cliplint("--diff", "--unsafe-fixes", "c.py", cwd=tmp_path)
    assert clean.returncode == 0 and clean.stdout == ""


def test_fix_only_reports_nothing_else(tmp_path):
    shutil.copy(GOLDEN / "keras_fit.py", tmp_path / "k.py")
    result = cliplint("--fix-only", "k.py", cwd=tmp_path)
    assert result.returncode == 0 and "CL010" not in result.stdout and "Fixed 1 problem" in result.stdout


def test_fix_setting_in_pyproject(tmp_path):
    shutil.copy(GOLDEN / "custom_loop.py", tmp_path / "c.py")
    (tmp_path / "pyproject.toml").write_text("[tool.cliplint]\nfix = true\nunsafe-fixes = true\n")
    subprocess.run([sys.executable, "-m", "cliplint", "--no-cache", "c.py"], cwd=tmp_path, capture_output=True)
    assert (tmp_path / "c.py").read_bytes() == (GOLDEN / "custom_loop.fixed.py").read_bytes()


def test_add_noqa_then_relint_reports_nothing(tmp_path):
    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    for path in fixtures.glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(GOLDEN / "notebook.ipynb", tmp_path / "notebook.ipynb")
    (tmp_path / "merged.py").write_text("import tensorflow as tf\n"
                                        "lp = tf.math.log(tf.nn.softmax(z))  # noqa: CL001\n"
                                        "s = '''\nx''' + tf.math.log(tf.nn.softmax(z))\n")
    first = cliplint("--add-noqa", ".", cwd=tmp_path)
    assert first.returncode == 0 and "Added" in first.stdout
    assert "# noqa: CL001, CL004" in (tmp_path / "merged.py").read_text()
    assert "  broken_syntax.py:5:1: CL000" in first.stdout  # named as not suppressed: fixed, not silenced
    relint = cliplint(".", "--ignore", "CL000", cwd=tmp_path)  # CL000 stays on under any --select
    assert relint.returncode == 0, relint.stdout
    json.loads((tmp_path / "notebook.ipynb").read_text())


def test_encoding_line_endings_and_mode_are_kept(tmp_path):
    source = ("# -*- coding: latin-1 -*-\r\nimport tensorflow as tf\r\n# caf\xe9\r\n"
              "lp = tf.math.log(tf.nn.softmax(z))\r\n")
    path = tmp_path / "l.py"
    path.write_bytes(source.encode("latin-1"))
    os.chmod(path, 0o755)
    cliplint("--fix", "l.py", cwd=tmp_path)
    fixed = source.replace("tf.math.log(tf.nn.softmax(z))", "tf.nn.log_softmax(z)")
    assert path.read_bytes() == fixed.encode("latin-1")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o755
    bom = tmp_path / "b.py"
    bom.write_bytes(b"\xef\xbb\xbfimport tensorflow as tf\nlp = tf.math.log(tf.nn.softmax(z))\n")
    cliplint("--fix", "b.py", cwd=tmp_path)
    assert bom.read_bytes() == b"\xef\xbb\xbfimport tensorflow as tf\nlp = tf.nn.log_softmax(z)\n"


def test_notebook_json_outside_the_fixed_cell_is_unchanged():
    raw = (GOLDEN / "notebook.ipynb").read_text(encoding="utf-8")
    fixed = (GOLDEN / "notebook.fixed.ipynb").read_text(encoding="utf-8")
    spans, fixed_spans = source_spans(raw), source_spans(fixed)
    changed = [n for n in spans if raw[slice(*spans[n])] != fixed[slice(*fixed_spans[n])]]
    assert changed == [7]
    start, end = spans[7]
    fixed_start, fixed_end = fixed_spans[7]
    assert raw[:start] == fixed[:fixed_start] and raw[end:] == fixed[fixed_end:]


def test_notebook_sources_re_encode_byte_for_byte():
    for path in (Path(__file__).resolve().parent.parent / "fixtures" / "notebooks").glob("*.ipynb"):
        raw = path.read_text(encoding="utf-8")
        cells = json.loads(raw)["cells"]
        sources = {n: "".join(c["source"]) for n, c in enumerate(cells, 1) if c["cell_type"] == "code"}
        assert replace_sources(raw, sources) == raw


def test_magic_lines_in_notebooks_are_never_edited(tmp_path):
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                           "source": ["import tensorflow as tf\n", "%time lp = tf.math.log(tf.nn.softmax(z))\n",
                                      "lq = tf.math.log(tf.nn.softmax(z))\n"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "m.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    cliplint("--fix", "m.ipynb", cwd=tmp_path)
    source = json.loads(path.read_text())["cells"][0]["source"]
    assert source[1] == "%time lp = tf.math.log(tf.nn.softmax(z))\n"
    assert source[2] == "lq = tf.nn.log_softmax(z)\n"


# --- property: fixes never produce a syntax error --------------------------------------------

SNIPPETS = sorted({example.source for rule in ALL_RULES.values() for example in rule.INVALID}
                  | {source for rule in ALL_RULES.values() for source in rule.VALID})


def _indent(source: str) -> str:
    return "".join("    " + line if line.strip() else line for line in source.splitlines(keepends=True))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(SNIPPETS), st.booleans()), min_size=1, max_size=5))
def test_applying_every_offered_fix_never_gives_a_syntax_error(parts):
    program = "".join(f"def step_{i}():\n{_indent(src)}\n" if nested else src + "\n"
                      for i, (src, nested) in enumerate(parts))
    if not compiles(program):
        return
    outcome = fix_text("gen.py", program, list(ALL_RULES.values()), unsafe=True)
    assert compiles(outcome.text)
