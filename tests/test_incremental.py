"""The language server's incremental linting: after any edit, the module a `Document` assembles
from reused and re-parsed statements is the module a parse of the whole text gives, its
positions are PositionProvider's, and its findings are `lint_text`'s, whether the edit was
re-parsed alone or the whole text was."""
import random
import warnings
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from libcst.metadata import MetadataWrapper, PositionProvider

from cliplint.analysis import TreeIndex
from cliplint.files import common_ends
from cliplint.incremental import Document
from cliplint.incremental.index import DocumentIndex
from cliplint.lint import lint_text
from cliplint.rules import ALL_RULES

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for p in (ROOT / "fixtures").glob("*.py") if p.name != "broken_syntax.py")
RULES = list(ALL_RULES.values())
# Lines an editor's user types: `{i}` is the indentation of the line they are typed above.
TYPED = ["{i}x = 1\n", "{i}# note\n", "\n", "{i}\n", "# column 0\n", "{i}    # deeper\n", "{i}@decorator\n",
         "{i}if ready:\n{i}    pass\n{i}else:\n{i}    retry = 2\n", "{i}def helper():\n{i}  return 1\n",
         "{i}grads = [tf.clip_by_norm(g, 1.0) for g in grads]\n", "{i}loss = tf.math.log(tf.nn.softmax(y))\n",
         "class Extra:\n    pass\n", "import tensorflow as tf\n", "{i}'''doc\ncolumn 0 inside a string\n'''\n",
         "{i}z = (1,\n2)\n", "{i}total = 1 + \\\n", "else:\n", "{i}(\n"]


def findings(document: Document, text: str):
    return sorted(document.lint("train.py", text, RULES, "train.py")[0], key=lambda f: f.sort_key())


def expected(text: str):
    return sorted(lint_text("train.py", text, RULES, "train.py")[0], key=lambda f: f.sort_key())


def order(index: TreeIndex):
    """The node types in pre- and post-order: what the rules compare the numbers for."""
    return ([type(node) for node in sorted(index.pre, key=index.pre.__getitem__)],
            [type(node) for node in sorted(index.post, key=index.post.__getitem__)])


def assert_same_as_whole(document: Document, text: str) -> None:
    """The document's module, index and positions are those of a parse of the whole text."""
    assert document.text == text
    whole = cst.parse_module(text)
    module = document.module
    assert module.code == text
    assert whole.deep_equals(module)
    for name in ("default_indent", "default_newline", "has_trailing_newline", "encoding"):
        assert getattr(module, name) == getattr(whole, name), name
    assert order(document.index) == order(TreeIndex(whole))


def check(document: Document, text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # CPython's, about the typed code
        assert findings(document, text) == expected(text)
    if document.text == text:
        assert_same_as_whole(document, text)


def edited(text: str, line: int, typed: str) -> str:
    lines = text.splitlines(keepends=True)
    line = min(line, len(lines))
    current = lines[line] if line < len(lines) else ""
    indent = current[:len(current) - len(current.lstrip(" \t"))]
    newline = "\r\n" if "\r\n" in text else "\n"
    lines.insert(line, typed.format(i=indent).replace("\n", newline))
    return "".join(lines)


# Fixture n is typed lines (8n .. 8n + 7) % len(TYPED): the first SAMPLED fixtures type every
# kind of line at least twice. They are the sample every run checks; the rest run with --full-sweeps.
SAMPLED = -(-2 * len(TYPED) // 8)


@pytest.mark.parametrize("number, path", [
    pytest.param(number, path, marks=() if number < SAMPLED else pytest.mark.beyond_sample)
    for number, path in enumerate(SOURCES)], ids=[path.stem for path in SOURCES])
def test_typed_lines_match_a_whole_parse(number, path):
    """Lines typed at random places of every fixture, each undone again (as an editor's buffer
    goes in and out of valid syntax); across the fixtures every kind of line is typed."""
    text = path.read_text()
    document = Document()
    check(document, text)
    chosen = random.Random(path.name)
    for kind in range(8):
        typed = TYPED[(8 * number + kind) % len(TYPED)]
        check(document, edited(text, chosen.randrange(text.count("\n") + 1), typed))
        check(document, text)


@given(st.text("ab\n", max_size=12), st.text("ab\n", max_size=12))
def test_common_ends_are_the_longest_shared_start_then_end(old, new):
    same_start, same_end = common_ends(old, new)
    assert old[:same_start] == new[:same_start] and old[len(old) - same_end:] == new[len(new) - same_end:]
    assert same_start + same_end <= min(len(old), len(new))
    assert same_start == min(len(old), len(new)) or old[same_start] != new[same_start]
    assert same_start + same_end == min(len(old), len(new)) or old[-1 - same_end] != new[-1 - same_end]


def test_one_character_reparses_one_statement():
    """The point of it: typing in one function re-parses that function, not the file."""
    text = "\n\n".join((ROOT / "fixtures" / f"{name}.py").read_text()
                       for name in ("actor_critic", "two_stage_training", "keras_fit_mnist"))
    document = Document()
    check(document, text)
    at = text.index("def ", len(text) // 2)
    new = text[:at] + "def _" + text[at + 4:]
    check(document, new)
    assert 0 < document.reparsed < len(text) / 4


def test_typing_in_a_method_reparses_that_method():
    """A file that is one big class (common in training code): a keystroke in one method
    re-parses that method, and the class around it is rebuilt, not parsed."""
    methods = "".join(f"    def step_{n}(self, x):\n        loss = tf.math.log(tf.nn.softmax(x))\n"
                      f"        return loss\n\n" for n in range(40))
    text = f"import tensorflow as tf\n\n\nclass Trainer:\n    # the steps\n{methods}    # end of class\n"
    document = Document()
    check(document, text)
    at = text.index("return loss", len(text) // 2)
    new = text[:at] + "return  loss" + text[at + len("return loss"):]
    check(document, new)
    assert 0 < document.reparsed < 100
    check(document, text)


CLASS = ("class A:\n    def f(self):\n        a = 1\n\n    def g(self):\n        b = 2\n\n"
         "    def h(self):\n        c = 3\n")


@pytest.mark.parametrize("after", [
    CLASS.replace("        b = 2\n", "        b = 2\n        # owned by g's block\n"),
    CLASS.replace("\n    def g", "\n        # deeper, after f\n    def g"),
    CLASS.replace("\n    def g", "\n# column 0 inside the class\n    def g"),
    CLASS.replace("    def g(self):", "    @property\n    def g(self):"),
    CLASS.replace("        b = 2\n", "        b = 2\n    else_ = 1\n"),
    CLASS.replace("        b = 2\n", "        b = 2\n  x = 1\n"),  # a dedent into nothing: not Python
    CLASS.replace("        b = 2\n", "        b = 2\nx = 1\n"),  # the class ends there now
    CLASS.replace("        b = 2\n", "        if b:\n            pass\n        else:\n            b = 3\n"),
    CLASS.replace("        c = 3\n", "        c = 3\n    # trailing\n"),
    CLASS.replace("    def h(self):\n        c = 3\n", ""),
    CLASS.replace("        b = 2\n", "        class Inner:\n            pass\n"),
    CLASS.replace("\n", "\r\n").replace("b = 2", "b = 22"),
    CLASS.replace("    ", "  ").replace("b = 2", "b = 22"),
    "x = 1\n" + CLASS.replace("b = 2", "b = 22"),
    CLASS.rstrip("\n").replace("b = 2", "b = 22"),  # no newline at the end of the file
])
def test_edges_of_reuse_inside_a_class(after):
    document = Document()
    before = after.replace("b = 22", "b = 2") if "b = 22" in after else CLASS
    check(document, before)
    check(document, after)
    check(document, before)


def test_the_last_method_at_the_end_of_a_file_without_its_newline():
    """Deleting a class's last line at the end of the file: the file's last newline moves."""
    before = "class A:\n    def f(self):\n        a = 1\n        \n        return a"
    after = "class A:\n    def f(self):\n        a = 1\n        \n"
    document = Document()
    check(document, before)
    check(document, after)
    check(document, before)


@pytest.mark.parametrize("before, after", [
    # A block the edit does not touch comes to own an indented comment typed after it.
    ("def f():\n    x = 1\n\ny = 2\n", "def f():\n    x = 1\n    # mine now\n\ny = 2\n"),
    # `else:` continues the statement before: the edit alone does not parse, the whole does.
    ("if a:\n    b = 1\nc = 2\n", "if a:\n    b = 1\nelse:\n    c = 2\n"),
    # A decorator typed above the next function.
    ("x = 1\ndef f():\n    pass\n", "x = 1\n@dec\ndef f():\n    pass\n"),
    # The first block sets libcst's default indentation for the whole file.
    ("def f():\n    a = 1\ndef g():\n    b = 2\n", "def f():\n  a = 1\ndef g():\n    b = 2\n"),
    ("x = 1\ndef g():\n  b = 2\n", "def f():\n    a = 1\nx = 1\ndef g():\n  b = 2\n"),
    # Windows newlines, a mixed one, no newline at the end.
    ("a = 1\r\nb = 2\r\n", "a = 1\r\nb = 3\r\n"),
    ("a = 1\r\nb = 2\r\n", "a = 1\nb = 2\r\n"),
    ("a = 1\nb = 2", "a = 1\nb = 2\nc = 3"),
    ("a = 1\nb = 2", "a = 1\nb = 2  # end"),
    # Statements deleted, the whole file emptied, comments only.
    ("a = 1\n\nb = 2\n\nc = 3\n", "a = 1\n\n\nc = 3\n"),
    ("a = 1\n", ""),
    ("# one\n", "# one\n# two\n"),
    # libcst writes this back differently from the text: the command line's answer, not positions from it.
    ("class A:\n    def f(self):\n        self.a = 1\n", "class A:\n    def f(self):\n      \\\nf.a = 1\n"),
])
def test_edges_of_reuse(before, after):
    document = Document()
    check(document, before)
    check(document, after)
    check(document, before)


def test_syntax_error_then_fixed():
    text = (ROOT / "fixtures" / "custom_loop_gradient_tape.py").read_text()
    document = Document()
    check(document, text)
    at = text.index("tf.clip_by_norm(")
    broken = text[:at] + "tf.clip_by_norm((" + text[at + len("tf.clip_by_norm("):]
    check(document, broken)
    assert [f.code for f in findings(document, broken)] == ["CL000"]
    check(document, text)
    assert document.reparsed < len(text), "the statements kept from before the error were reused"


def test_syntax_error_in_an_unsaved_buffer_is_placed_in_the_buffer(tmp_path):
    """CPython, given a file name, reads the error's line back from the disk to place it: the
    editor's text is placed, not the saved file's (which has an empty line there)."""
    saved = tmp_path / "train.py"
    saved.write_text("import tensorflow as tf\n\nvalue = tf.math.log(tf.nn.softmax(x))\n")
    unsaved = "import tensorflow as tf\n        x = 1\n"
    (finding,) = Document().lint(str(saved), unsaved, RULES, str(saved))[0]
    assert (finding.code, finding.line, finding.column) == ("CL000", 2, 8)
    assert lint_text(str(saved), unsaved, RULES, str(saved))[0] == [finding]


def test_an_error_mid_update_leaves_no_half_state(monkeypatch):
    """A bug (here: splicing the index fails) costs that version, not the document: the next
    version is parsed from scratch and is right."""
    text = (ROOT / "fixtures" / "actor_critic.py").read_text()
    document = Document()
    check(document, text)

    def broken(*args):
        raise KeyError("simulated")

    monkeypatch.setattr(DocumentIndex, "splice", broken)
    with pytest.raises(KeyError):
        document.update(edited(text, 10, "{i}x = 1\n"))
    monkeypatch.undo()
    assert document.text is None
    check(document, edited(text, 10, "{i}x = 2\n"))


def test_deeply_nested_brackets_as_on_the_command_line():
    deep = "x = " + "[" * 60 + "]" * 60 + "\n"
    text = "import tensorflow as tf\n" + deep
    document = Document()
    check(document, text)
    check(document, text + "y = tf.math.log(tf.nn.softmax(x))\n")


def test_positions_are_position_providers_after_edits():
    """Spans kept per statement, shifted by the edits before them: PositionProvider's."""
    text = (ROOT / "fixtures" / "train_step_override.py").read_text()
    document = Document()
    document.update(text)
    for line in (3, 20, 40):
        text = edited(text, line, "{i}# a longer comment line é😀\n{i}value = 'é😀' + str(1)\n")
        assert document.update(text)
    positions = document._positions(type("Ctx", (), {"source": text, "module": document.module,
                                                     "parent": document.index.parent})())
    expected_spans = MetadataWrapper(document.module, unsafe_skip_copy=True).resolve(PositionProvider)
    for node in document.index.pre:
        if node is not document.module:
            span = expected_spans[node]
            assert positions.get(node) == (span.start.line, span.start.column + 1, span.end.line,
                                           span.end.column + 1), node


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(SOURCES), edits=st.lists(st.tuples(
    st.floats(0, 1), st.integers(0, 40), st.sampled_from(["", " ", "\n", "x", "(", ")", ":", "#", "    ", "'''",
                                                          "\\\n", "tf.nn.softmax(", "else:\n", "\r\n"])),
    min_size=1, max_size=6))
# found by a CI run: a docstring made a comment, then joined with the next line, leaves the region
# with no statement; the blank line after it is the header's, not the next statement's
@example(path=ROOT / "fixtures" / "clean_global_norm.py", edits=[(0.0, 0, "#"), (0.03125, 32, "")])
def test_random_keystrokes(path, edits):
    """Characters typed and deleted anywhere: valid or not, each version gets lint_text's findings."""
    text = path.read_text()
    document = Document()
    for where, deleted, typed in edits:
        at = int(where * len(text))
        text = text[:at] + typed + text[at + deleted:]
        check(document, text)
