"""The language server's pieces in-process: the noqa edit, settings re-read, the crash net, positions."""
from __future__ import annotations

import os

import pytest

from cliplint.findings import Finding
from cliplint.incremental import Document
from cliplint.server.changes import Change, change_between, noqa_change
from cliplint.server.documents import CONFIG, PYTHON, Part, Snapshot, WorkspaceSettings, diagnose
from cliplint.server.protocol import lines_of, position

LOG = "import tensorflow as tf\ny = tf.math.log(tf.nn.softmax(x))\n"


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def finding(line: int, code: str = "CL004") -> Finding:
    return Finding("a.py", line, 1, line, 2, code, "name", "error", "message")


def edited(text: str, change: Change) -> str:
    lines = text.split("\n")

    def offset(line, column):
        return sum(len(before) + 1 for before in lines[:line - 1]) + column - 1

    return text[:offset(change.line, change.column)] + change.text + text[offset(change.end_line, change.end_column):]


@pytest.mark.parametrize("source,line,expected", [
    ("x = 1   \n", 1, "x = 1  # noqa: CL004\n"),  # trailing spaces go
    ("x = 1  # keep me\n", 1, "x = 1  # keep me  # noqa: CL004\n"),  # another comment stays
    ("x = 1  # noqa: CL001\n", 1, "x = 1  # noqa: CL001, CL004\n"),  # codes merged
    # a backslash continuation cannot end in a comment: the statement's next line takes it
    ("x = 1 + \\\n    2\n", 1, "x = 1 + \\\n    2  # noqa: CL004\n"),
    ("x = f(\n    2)\n", 1, "x = f(  # noqa: CL004\n    2)\n"),  # inside brackets: fine on the first line
    ("x = '# noqa: CL001'\n", 1, "x = '# noqa: CL001'  # noqa: CL004\n"),  # a string is no comment
])
def test_python_noqa_edit(source, line, expected):
    assert edited(source, noqa_change(source, finding(line), PYTHON, "a.py")) == expected


def test_config_noqa_edits():
    toml = "[opt]\nclipnorm = 0  # noqa: CL001\n"
    assert edited(toml, noqa_change(toml, finding(2, "CL009"), CONFIG, "a.toml")) == \
        "[opt]\nclipnorm = 0  # noqa: CL001, CL009\n"
    yaml = "opt:\n  clipnorm: 0\n"
    assert edited(yaml, noqa_change(yaml, finding(2, "CL009"), CONFIG, "a.yaml")) == \
        "opt:\n  clipnorm: 0  # noqa: CL009\n"
    assert noqa_change('{"clipnorm": 0}', finding(1, "CL009"), CONFIG, "a.json") is None


def test_change_between_is_the_differing_middle():
    assert change_between("a\nbXc\n", "a\nbYYc\n") == Change(2, 2, 2, 3, "YY")
    assert change_between("same", "same") is None


def test_positions_count_utf16_units_and_clamp():
    lines = lines_of('s = "\U0001F600"; t\n')
    assert position(lines, 1, 9, utf16).character == 9  # the emoji takes two units
    assert position(lines, 7, 1, utf16).line == len(lines) - 1  # past the end: the last line
    assert lines_of("a\r\nb\rc") == ["a", "b", "c"] and lines_of("a\n") == ["a", ""]


def snapshot(folder, name, text, kind=PYTHON):
    path = os.path.join(folder, name)
    return Snapshot(path, 1, kind, path, str(folder), (Part(path, text, 1),))


def test_settings_are_reread_when_pyproject_changes(tmp_path):
    workspace = WorkspaceSettings()
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.cliplint]\nignore = ["CL004"]\n')
    assert diagnose(snapshot(tmp_path, "a.py", LOG), workspace)[os.path.join(tmp_path, "a.py")] == []
    pyproject.write_text('[tool.cliplint]\nselect = ["CL004"]\n')
    os.utime(pyproject, ns=(1, 1))  # a different mtime even on a coarse clock
    (found,) = diagnose(snapshot(tmp_path, "a.py", LOG), workspace)[os.path.join(tmp_path, "a.py")]
    assert found.code == "CL004"


def test_exclusions_apply_to_open_documents(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.cliplint]\nextend-exclude = ["generated/"]\n')
    (tmp_path / "generated").mkdir()
    found = diagnose(snapshot(tmp_path, "generated/a.py", LOG), WorkspaceSettings())
    assert found == {os.path.join(tmp_path, "generated/a.py"): []}


def test_a_crash_inside_cliplint_is_a_cl000_in_that_document(tmp_path):
    # A snapshot whose text is missing (never produced by the server, but any bug looks alike):
    # the document gets CL000 saying so, and the next document is linted as usual.
    broken = snapshot(tmp_path, "a.py", None)
    (found,) = diagnose(broken, WorkspaceSettings())[os.path.join(tmp_path, "a.py")]
    assert found.code == "CL000" and found.message.startswith("internal error in cliplint: TypeError")
    assert [f.code for f in diagnose(snapshot(tmp_path, "b.py", LOG), WorkspaceSettings())[
        os.path.join(tmp_path, "b.py")]] == ["CL004"]


def test_live_diagnostics_leave_out_probes_until_verify_asks(tmp_path):
    """The same findings either way; only a lint for `cliplint.verify` builds what the
    verifier runs, and a document's next version reuses its parsed statements."""
    document = Document()
    live = diagnose(snapshot(tmp_path, "a.py", LOG), WorkspaceSettings(), document, probes=False)
    probed = diagnose(snapshot(tmp_path, "a.py", LOG), WorkspaceSettings(), document)
    path = os.path.join(tmp_path, "a.py")
    assert live == probed and [f.code for f in live[path]] == ["CL004"]
    assert live[path][0].probe is None and probed[path][0].probe["kind"] == "softmax"
    assert document.text == LOG and document.reparsed == 0  # the second lint parsed nothing
