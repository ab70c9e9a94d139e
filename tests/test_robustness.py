"""Never crash, never lose: property-based fuzzing and a matrix of hostile inputs.

The fuzz tests run a bounded number of examples here; `python bench/fuzz.py` runs them long
(CLIPLINT_FUZZ_EXAMPLES sets the number).
"""
import json
import os
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cliplint import discovery, engine, lint
from cliplint.analysis import lint_module
from cliplint.lint import lint_bytes
from cliplint.rules import ALL_RULES
from cliplint.settings import Config

RULES = list(ALL_RULES.values())
EXAMPLES = int(os.environ.get("CLIPLINT_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("CLIPLINT_FUZZ_RANDOM"),
                suppress_health_check=list(HealthCheck))
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FRAGMENTS = sorted({line for rule in RULES for source in [*rule.VALID, *(i.source for i in rule.INVALID)]
                    for line in source.splitlines() if line.strip()}
                   | {line for path in FIXTURES.glob("*.py") for line in path.read_text().splitlines() if line.strip()})


def _standalone(line: str) -> bool:
    try:
        compile(line.strip(), "<fragment>", "exec")
        return True
    except SyntaxError:
        return False


STATEMENTS = [line.strip() for line in FRAGMENTS if _standalone(line)]


def _top_level_statements(path: Path):
    import ast

    text = path.read_text()
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    return ["".join(lines[min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", []))]) - 1:s.end_lineno])
            for s in tree.body]


# Whole functions, classes and module statements of the realistic fixtures: modules built
# from them keep or break the references between definitions in every possible way.
TOP_LEVEL = sorted({s for p in FIXTURES.glob("*.py") if p.name != "broken_syntax.py" for s in _top_level_statements(p)})
TOKENS = "import tensorflow as tf  # clipnorm clipvalue softmax sigmoid gradient compile clip from_logits\n"


def check_findings(text: str, findings) -> None:
    lines = text.splitlines() or [""]
    for f in findings:
        assert 1 <= f.line <= len(lines) + 1 and f.column >= 1, f
        assert (f.end_line, f.end_column) >= (f.line, f.column), f
        if f.code != "CL000" and f.line <= len(lines):
            assert f.column <= len(lines[f.line - 1]) + 1, f


def lint_twice(text: str):
    first, crashed = lint_module("fuzz.py", text, RULES)
    second, _ = lint_module("fuzz.py", text, RULES)
    assert not crashed, [f.message for f in first if f.code == "CL000"]
    assert first == second
    check_findings(text, first)
    return first


@FUZZ
@given(hypothesmith.from_grammar(auto_target=False))
def test_valid_programs_never_crash_a_rule(source):
    lint_twice(TOKENS + source)


@FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=25),
       st.lists(st.integers(0, 3), min_size=25, max_size=25))
def test_training_code_mashups_never_crash_a_rule(lines, indents):
    text = "".join("    " * indent + line.strip() + "\n" for line, indent in zip(lines, indents))
    lint_twice(TOKENS + text)


@FUZZ
@given(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=40))
def test_valid_training_statement_mixes_never_crash_a_rule(lines):
    """Statements that parse on their own, in any order: valid programs that reach every rule.
    The ast gate must not change the result."""
    text = TOKENS + "".join(line + "\n" for line in lines)
    findings = lint_twice(text)
    facts = lint.facts_of(text)
    gated, _ = lint_module("fuzz.py", text, lint.gate(facts, RULES), lines=facts and facts.statement_lines)
    assert gated == findings


@FUZZ
@given(st.lists(st.sampled_from(TOP_LEVEL), min_size=1, max_size=30))
def test_leaving_definitions_out_of_the_parse_changes_nothing(statements):
    """The engine blanks out definitions no rule can see (`reduction.reduced`); whatever the mix
    of definitions, the findings equal those of every rule on the whole module."""
    # the tokens in a comment of their own, so that they do not mark `tf` as a token's binding
    text = "import tensorflow as tf\n# " + TOKENS.split("#")[1] + "\n".join(statements)
    assert lint_bytes("fuzz.py", text.encode(), RULES) == lint_module("fuzz.py", text, RULES)


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes_never_raise(data):
    findings, crashed = lint_bytes("fuzz.py", TOKENS.encode() + data, RULES)
    assert not crashed
    again, _ = lint_bytes("fuzz.py", TOKENS.encode() + data, RULES)
    assert all(f.code == "CL000" for f in findings) or findings == again


# --- the hostile-input matrix -------------------------------------------------------------

CONFLICT = "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)"


def lint_file(tmp_path, run_cli, name, content, *args):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, newline="")
    (tmp_path / "sibling.py").write_text("import tensorflow as tf\n" + CONFLICT + "\n")
    result = run_cli("--no-cache", "--output-format", "json", *args, ".", cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    records = json.loads(result.stdout)
    assert [r["code"] for r in records if r["path"] == "sibling.py"] == ["CL001"], "other files must still be linted"
    return [(r["code"], r["line"], r["column"], r["message"]) for r in records if r["path"] == name]


VALID_HOSTILE = [
    ("empty.py", "", []),
    ("bom_only.py", "\ufeff", []),
    ("crlf.py", "import tensorflow as tf\r\n\r\n" + CONFLICT + "\r\n", [("CL001", 3, 7)]),
    ("cr.py", "import tensorflow as tf\r\r" + CONFLICT + "\r", [("CL001", 3, 7)]),
    ("tabs.py", "import tensorflow as tf\nif True:\n\t" + CONFLICT + "\n", [("CL001", 3, 8)]),
    ("formfeed.py", "import tensorflow as tf\n\f\n" + CONFLICT + "\n", [("CL001", 3, 7)]),
    ("bom.py", "\ufeffimport tensorflow as tf\n" + CONFLICT + "\n", [("CL001", 2, 7)]),
    ("latin1_declared.py", "# -*- coding: latin-1 -*-\nimport tensorflow as tf\nname = 'caf\xe9'\n".encode("latin-1")
     + CONFLICT.encode() + b"\n", [("CL001", 4, 7)]),
    ("long_line.py", "import tensorflow as tf\nx = '" + "a" * 200_000 + "'\n" + CONFLICT + "\n", [("CL001", 3, 7)]),
    ("newest_syntax.py", "import tensorflow as tf\ntype Grads = list\ndef f[T](x: T) -> T:\n    match x:\n"
     "        case [a, *_]:\n            return a\n    return x\nmsg = f\"{f'{1:>{2}}'}\"\n" + CONFLICT + "\n",
     [("CL001", 9, 7)]),
]


@pytest.mark.parametrize("name,content,expected", VALID_HOSTILE, ids=[case[0] for case in VALID_HOSTILE])
def test_hostile_but_valid_inputs_give_correct_findings(tmp_path, run_cli, name, content, expected):
    assert [r[:3] for r in lint_file(tmp_path, run_cli, name, content)] == expected


UNREADABLE = [
    ("latin1_undeclared.py", b"import tensorflow as tf  # clipnorm\nname = 'caf\xe9'\n", "cannot decode byte 0xe9"),
    ("nul.py", b"import tensorflow as tf\x00 clipnorm", "binary file"),
    ("python2.py", "import tensorflow as tf\nprint 'clipnorm'\n", "syntax error"),
    ("deep.py", "import tensorflow as tf  # clipnorm\nx = " + "(" * 10_000 + "1" + ")" * 10_000 + "\n",
     "nested more than 100 levels"),
    ("chain.py", "import tensorflow as tf  # clipnorm\nx = a" + ".b" * 10_000 + "\n",
     "nested too deeply to parse: 10,001 levels at line 2, limit 1,000"),
    ("unary.py", "import tensorflow as tf  # clipnorm\nx = " + "-" * 30_000 + "1\n",
     "nested too deeply to parse: 30,001 levels at line 2, limit 1,000"),
    ("deep_blocks.py", "import tensorflow as tf  # clipnorm\n" + "".join(" " * i + "if x:\n" for i in range(150))
     + " " * 150 + "pass\n", "syntax error"),
]


@pytest.mark.parametrize("name,content,reason", UNREADABLE, ids=[case[0] for case in UNREADABLE])
def test_unreadable_inputs_give_one_clear_cl000(tmp_path, run_cli, name, content, reason):
    found = lint_file(tmp_path, run_cli, name, content)
    assert len(found) == 1 and found[0][0] == "CL000" and reason in found[0][3], found


def test_huge_file_is_skipped_with_a_configurable_limit(tmp_path, run_cli):
    huge = "import tensorflow as tf\n" + CONFLICT + "\n" + "#" * (50 * 1024 * 1024) + "\n"
    found = lint_file(tmp_path, run_cli, "huge.py", huge)
    assert len(found) == 1 and "above max-file-size (10,485,760)" in found[0][3]
    medium = "import tensorflow as tf\n" + CONFLICT + "\n" + "x = 1\n" * 20_000
    assert [r[0] for r in lint_file(tmp_path, run_cli, "medium.py", medium)] == ["CL001"]
    (tmp_path / "pyproject.toml").write_text("[tool.cliplint]\nmax-file-size = 100_000\n")
    found = lint_file(tmp_path, run_cli, "medium.py", medium)
    assert len(found) == 1 and "above max-file-size (100,000)" in found[0][3]


def test_symlink_loops_do_not_hang(tmp_path, run_cli):
    (tmp_path / "loop").mkdir()
    os.symlink(tmp_path / "loop", tmp_path / "loop" / "again")
    os.symlink(tmp_path / "a.py", tmp_path / "b.py")
    os.symlink(tmp_path / "b.py", tmp_path / "a.py")
    (tmp_path / "sibling.py").write_text("import tensorflow as tf\n" + CONFLICT + "\n")
    result = run_cli("--no-cache", "--output-format", "json", ".", cwd=tmp_path)
    records = json.loads(result.stdout)
    assert {r["path"]: r["code"] for r in records} == {"a.py": "CL000", "b.py": "CL000", "sibling.py": "CL001"}


def test_unreadable_file_and_folder(tmp_path, monkeypatch):
    """As root every file is readable, so the OS errors are injected."""
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "x.py").write_text(CONFLICT)
    (tmp_path / "locked.py").write_text(CONFLICT)
    (tmp_path / "ok.py").write_text("import tensorflow as tf\n" + CONFLICT + "\n")
    real_scandir, real_open = os.scandir, os.open

    def scandir(path):
        if str(path).endswith("secret"):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    def opener(path, *args, **kwargs):
        if str(path).endswith("locked.py"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(discovery.os, "scandir", scandir)
    monkeypatch.setattr(os, "open", opener)  # how cliplint.files opens a checkout's files
    result = engine.run([str(tmp_path)], Config(isolated=True))
    by_name = {Path(f.path).name: f for f in result.findings}
    assert "cannot read: Permission denied" in by_name["locked.py"].message
    assert "unreadable folder: Permission denied" in by_name["secret"].message
    assert by_name["ok.py"].code == "CL001"


def test_a_path_that_vanishes_during_the_run(tmp_path):
    path = tmp_path / "gone.py"
    path.write_text("import tensorflow as tf\n" + CONFLICT + "\n")
    targets = list(discovery.discover([str(tmp_path)], Config(isolated=True)))
    path.unlink()
    findings, crashed = engine.lint_target(targets[0])
    assert not crashed and findings[0].code == "CL000" and "No such file" in findings[0].message


@pytest.mark.parametrize("table,message", [
    ('select = ["CL001"', "invalid TOML"),
    ("select = 1", "must be a list of strings"),
    ('max-file-size = "big"', "max-file-size"),
    ("per-file-ignores = [1]", "per-file-ignores"),
    ("exclude = [1, 2]", "must be a list of strings"),
    ("force-exclude = 'yes'", "must be true or false"),
    ('select = ["CL9999"]', "unknown rule selector"),
])
def test_broken_configuration_is_one_clear_error(tmp_path, run_cli, table, message):
    (tmp_path / "pyproject.toml").write_text("[tool.cliplint]\n" + table + "\n")
    (tmp_path / "a.py").write_text("import tensorflow as tf\n" + CONFLICT + "\n")
    result = run_cli("a.py", cwd=tmp_path)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_rule_reporting_outside_the_file_is_an_internal_error_not_a_traceback(tmp_path, monkeypatch):
    """A rule that reports a node of another tree (a linked module's, as CL005 once did through
    the flow's name index) costs its findings and an internal-error CL000, never the run."""
    import libcst as cst

    from cliplint.findings import Report
    from cliplint.rules import Rule

    class Elsewhere(Rule):
        code, name, severity, tokens = "CL003", "per-tensor-clip-norm", "warning", (b"tf",)

        def check(self, ctx):
            yield Report(cst.parse_expression("tf.clip_by_norm(g, 1.0)"), "a node of another module")

    monkeypatch.setitem(ALL_RULES, "CL003", Elsewhere())
    (tmp_path / "a.py").write_text("import tensorflow as tf\n" + CONFLICT + "\n")
    result = engine.run([str(tmp_path / "a.py")], Config(isolated=True))
    assert [f.code for f in result.findings] == ["CL000", "CL001"]
    assert "internal error in rule CL003 (per-tensor-clip-norm): it reported outside the file" \
        in result.findings[0].message


def test_a_crashing_rule_means_exit_2_with_the_other_findings_kept(tmp_path, monkeypatch):
    from cliplint import cli
    from cliplint.rules import Rule

    class Boom(Rule):
        code, name, severity, tokens = "CL003", "per-tensor-clip-norm", "warning", (b"tf",)

        def check(self, ctx):
            raise RuntimeError("rule bug")

    monkeypatch.setitem(ALL_RULES, "CL003", Boom())
    (tmp_path / "a.py").write_text("import tensorflow as tf\n" + CONFLICT + "\n")
    result = engine.run([str(tmp_path / "a.py")], Config(isolated=True))
    assert [f.code for f in result.findings] == ["CL000", "CL001"]
    assert "internal error in rule CL003 (per-tensor-clip-norm): RuntimeError: rule bug" in result.findings[0].message
    from types import SimpleNamespace

    assert cli._exit_code(result, SimpleNamespace(exit_zero=True, verify=False, fail_on="warning")) == 2
