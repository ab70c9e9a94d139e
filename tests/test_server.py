"""`cliplint server` end to end: pytest-lsp spawns the real server and speaks LSP to it.

Diagnostics are compared with what `cliplint check --output-format json` reports for the same
text on disk (same engine, same positions), plus exact UTF-16 ranges where a line holds an emoji.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_client import CONFIG, apply, editor_capabilities, initialize_params, published, span, text_item, wait_for
from lsprotocol import types
from pytest_lsp import LanguageClient

from cliplint.report.links import rule_url

pytestmark = pytest.mark.asyncio

TRAIN = (
    "import tensorflow as tf\n"
    "\n"
    "def loss(logits, labels):\n"
    '    name = "\U0001F600"; p = tf.math.log(tf.nn.softmax(logits))\n'
    "    return p\n"
    "\n"
    "opt = tf.keras.optimizers.Adam(clipnorm=1.0, clipvalue=0.5)\n"
)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
NOQA = "# noqa"  # kept apart from the codes in expected texts, where ruff would take it for its own comment
CONFLICTING_YAML = "optimizer:\n  name: adam\n  clipnorm: 1.0\n  clipvalue: 0.5\n"


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient, tmp_path):
    params = initialize_params(tmp_path, editor_capabilities())
    lsp_client.initialized_with = await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


def cli_findings(folder, name):
    """What the command line reports for `name` on disk."""
    result = subprocess.run([sys.executable, "-m", "cliplint", "--output-format", "json", "--no-cache", name],
                            cwd=folder, capture_output=True, text=True, timeout=300)
    return json.loads(result.stdout)


def utf16_span(text: str, record: dict):
    lines = text.split("\n")

    def units(line, column):
        return len(lines[line - 1][:column - 1].encode("utf-16-le")) // 2

    return (record["line"] - 1, units(record["line"], record["column"]),
            record["end_line"] - 1, units(record["end_line"], record["end_column"]))


async def open_document(client, uri, text, language="python", version=1):
    mark = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_item(uri, text, version, language)))
    return await published(client, uri, mark, version)


async def quick_fixes(client, uri, diagnostic, *only):
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic], only=list(only) or None)))


def titled(actions, start):
    (action,) = [a for a in actions if a.title.startswith(start)]
    return action


async def change_document(client, uri, text, version):
    mark = len(client.published)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    return await published(client, uri, mark, version)


async def test_initialize_advertises_what_the_server_does(client: LanguageClient, tmp_path):
    result = client.initialized_with
    capabilities = result.capabilities
    assert result.server_info.name == "cliplint"
    assert capabilities.hover_provider
    assert types.CodeActionKind.QuickFix in capabilities.code_action_provider.code_action_kinds
    assert "cliplint.verify" in capabilities.execute_command_provider.commands
    assert capabilities.notebook_document_sync.notebook_selector[0].cells[0].language == "python"
    assert capabilities.text_document_sync.save
    await wait_for(lambda: client.registrations, what="the pyproject.toml watcher")
    (watch,) = client.registrations
    assert watch.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    assert watch.register_options["watchers"][0]["globPattern"] == "**/pyproject.toml"


async def test_python_open_change_save_close(client: LanguageClient, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    uri = (tmp_path / "train.py").as_uri()
    diagnostics = await open_document(client, uri, TRAIN)
    expected = cli_findings(tmp_path, "train.py")
    assert [d.code for d in diagnostics] == [r["code"] for r in expected] == ["CL004", "CL001"]
    assert [span(d) for d in diagnostics] == [utf16_span(TRAIN, r) for r in expected]
    log_call = TRAIN.split("\n")[3].index("tf.math.log")
    assert span(diagnostics[0]) == (3, log_call + 1, 3, log_call + 1 + len("tf.math.log(tf.nn.softmax(logits))"))
    for shown, record in zip(diagnostics, expected):
        assert shown.source == "cliplint" and shown.message == record["message"]
        assert shown.severity == types.DiagnosticSeverity.Error
        assert shown.code_description.href == rule_url(shown.code) == record["url"]

    # The unsaved text is linted: the optimizer fixed in the buffer only.
    fixed = TRAIN.replace("clipnorm=1.0, clipvalue=0.5", "clipnorm=1.0")
    diagnostics = await change_document(client, uri, fixed, 2)
    assert [d.code for d in diagnostics] == ["CL004"]

    # An incremental change: insert a line above; the remaining finding moves down with it.
    mark = len(client.published)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(1, 0), end=types.Position(1, 0)), text="import numpy as np\n")]))
    diagnostics = await published(client, uri, mark, 3)
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("CL004", 4)]

    mark = len(client.published)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert [d.code for d in await published(client, uri, mark, 3)] == ["CL004"]

    mark = len(client.published)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert await published(client, uri, mark) == []


async def test_edits_in_one_statement_relint_the_whole_module(client: LanguageClient, tmp_path):
    """The server re-parses only the statements an edit touches, yet every version gets the
    command line's findings: an import edited away and back changes findings in other functions."""
    text = (FIXTURES / "two_stage_training.py").read_text(encoding="utf-8")
    uri = (tmp_path / "train.py").as_uri()
    await open_document(client, uri, text)
    edits = [((2, 19), (2, 24), "kx"),  # `import tf_keras as kx`: `keras.optimizers.Adam` at line 54 is unknown now
             ((2, 19), (2, 21), "keras"),  # and back
             ((27, 0), (27, 0), "\n    # one more line above\n"),  # positions below move
             ((29, 0), (30, 0), "")]  # the re-compile deleted: its clipnorm change is a finding now
    counts = []
    for version, (start, end, typed) in enumerate(edits, 2):
        changed = types.Range(types.Position(*start), types.Position(*end))
        mark = len(client.published)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=changed, text=typed)]))
        text = apply(text, [types.TextEdit(changed, typed)])
        diagnostics = await published(client, uri, mark, version)
        (tmp_path / "train.py").write_text(text, encoding="utf-8")
        expected = cli_findings(tmp_path, "train.py")
        assert [(d.code, span(d)) for d in diagnostics] == [(r["code"], utf16_span(text, r)) for r in expected]
        counts.append(len(expected))
    assert counts == [3, 4, 4, 5]
    assert [r["line"] for r in expected if r["code"] == "CL002"] == [18, 27, 38, 48, 55]


async def test_noqa_code_action_produces_the_expected_text(client: LanguageClient, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    diagnostics = await open_document(client, uri, TRAIN)
    log = diagnostics[0]
    actions = await quick_fixes(client, uri, log, types.CodeActionKind.QuickFix)
    assert [a.title for a in actions] == ["use `tf.nn.log_softmax(logits)`", "Disable CL004 for this line"]
    assert {a.kind for a in actions} == {types.CodeActionKind.QuickFix}
    assert actions[1].diagnostics[0].code == "CL004"
    edited = apply(TRAIN, actions[1].edit.changes[uri])
    assert edited.split("\n")[3] == TRAIN.split("\n")[3] + f"  {NOQA}: CL004"
    assert [d.code for d in await change_document(client, uri, edited, 2)] == ["CL001"]

    # A second code on a line that already silences one is merged into its comment.
    merged_source = f"import tensorflow as tf\nopt = tf.keras.optimizers.Adam(clipnorm=0.0)  {NOQA}: CL004\n"
    other = (tmp_path / "other.py").as_uri()
    (cl009,) = await open_document(client, other, merged_source)
    actions = await quick_fixes(client, other, cl009)
    edited = apply(merged_source, titled(actions, "Disable").edit.changes[other])
    assert edited.split("\n")[1] == f"opt = tf.keras.optimizers.Adam(clipnorm=0.0)  {NOQA}: CL004, CL009"
    assert await change_document(client, other, edited, 2) == []


async def test_quick_fixes_and_fix_all(client: LanguageClient, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    log, adam = await open_document(client, uri, TRAIN)
    fix = titled(await quick_fixes(client, uri, log), "use `tf.nn.log_softmax")
    assert fix.is_preferred and fix.diagnostics[0].code == "CL004"
    fixed = apply(TRAIN, fix.edit.changes[uri])
    assert fixed.split("\n")[3] == '    name = "\U0001F600"; p = tf.nn.log_softmax(logits)'  # UTF-16 columns right
    unsafe = titled(await quick_fixes(client, uri, adam), "drop `clipvalue`")
    assert unsafe.title.endswith("(unsafe fix: check the result)") and not unsafe.is_preferred

    # source.fixAll.cliplint: the safe fixes only (`cliplint check --fix`), one edit per change.
    (fix_all,) = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)),
        context=types.CodeActionContext(diagnostics=[], only=["source.fixAll"])))
    assert fix_all.kind == "source.fixAll.cliplint"
    assert apply(TRAIN, fix_all.edit.changes[uri]) == fixed
    assert [d.code for d in await change_document(client, uri, fixed, 2)] == ["CL001"]


async def test_noqa_goes_where_a_comment_can_stand(client: LanguageClient, tmp_path):
    # The finding starts on a line that ends inside a triple-quoted string: the comment goes on
    # the statement's last line, which silences it as well.
    source = ('import tensorflow as tf\nx = tf.math.log(tf.nn.softmax(tf.constant("""\n'
              'a""" == "a" and [1.0] or [2.0])))\n')
    uri = (tmp_path / "strings.py").as_uri()
    (found,) = await open_document(client, uri, source)
    actions = await quick_fixes(client, uri, found)
    edited = apply(source, titled(actions, "Disable").edit.changes[uri])
    assert edited.split("\n")[1:3] == ['x = tf.math.log(tf.nn.softmax(tf.constant("""',
                                       f'a""" == "a" and [1.0] or [2.0])))  {NOQA}: CL004']
    assert await change_document(client, uri, edited, 2) == []


async def test_hover_shows_the_rule_page(client: LanguageClient, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    diagnostics = await open_document(client, uri, TRAIN)
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), diagnostics[1].range.start))
    assert hover.contents.kind == types.MarkupKind.Markdown
    page = hover.contents.value
    assert "# CL001 conflicting-clip-options" in page and "## Why is this bad?" in page and "## Use instead" in page
    assert rule_url("CL001") in page
    nothing = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(0, 0)))
    assert nothing is None


def notebook_params(uri: str, cells, version: int = 1) -> types.DidOpenNotebookDocumentParams:
    kinds = {"code": types.NotebookCellKind.Code, "markdown": types.NotebookCellKind.Markup}
    return types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=uri, notebook_type="jupyter-notebook", version=version,
            cells=[types.NotebookCell(kind=kinds[kind], document=f"{uri}#cell{i}")
                   for i, (kind, _) in enumerate(cells)]),
        cell_text_documents=[text_item(f"{uri}#cell{i}", text, 1, "python" if kind == "code" else "markdown")
                             for i, (kind, text) in enumerate(cells)])


async def change_cell(client, uri, cell, text, version):
    """Replace one cell's text (the cell's version and the notebook's move together here)."""
    mark = len(client.published)
    cell_uri = f"{uri}#cell{cell}"
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(uri=uri, version=version),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(uri=cell_uri, version=version),
                changes=[types.TextDocumentContentChangeWholeDocument(text=text)])]))))
    return await published(client, cell_uri, mark)


async def test_notebook_cells_are_one_program(client: LanguageClient, tmp_path):
    uri = (tmp_path / "explore.ipynb").as_uri()
    cells = [("code", "import tensorflow as tf\n%matplotlib inline\nprobs = tf.nn.softmax(logits)"),
             ("markdown", "# The loss: log of the probabilities"),
             ("code", "!pip list\nloss = -tf.reduce_sum(labels * tf.math.log(probs))"),
             ("code", "p = tf.math.log(tf.nn.softmax(z))")]
    mark = len(client.published)
    client.notebook_document_did_open(notebook_params(uri, cells))
    third = await published(client, f"{uri}#cell2", mark)
    assert await published(client, f"{uri}#cell0", mark) == []
    # Cross-cell flow: `probs` comes from the first cell; the range is in the third cell's own lines.
    start = cells[2][1].split("\n")[1].index("tf.math.log(probs)")
    assert [(d.code, span(d)) for d in third] == [("CL004", (1, start, 1, start + len("tf.math.log(probs)")))]
    # The command line reads the same cells from the .ipynb file and places the finding the same way.
    outputs = {"code": {"outputs": [], "execution_count": None}, "markdown": {}}
    notebook = {"cells": [{"cell_type": kind, "source": text, "metadata": {}, **outputs[kind]} for kind, text in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "explore.ipynb").write_text(json.dumps(notebook))
    record, _ = cli_findings(tmp_path, "explore.ipynb")
    assert (record["cell"], record["line"] - 1, record["column"] - 1, record["end_column"] - 1) == (3, 1, start,
                                                                                                   start + 18)

    # Fix all: the safe fix (in the fourth cell); the third cell's fix bypasses `probs`, unsafe, left alone.
    (fourth,) = await published(client, f"{uri}#cell3", mark)
    (fix_all,) = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(f"{uri}#cell3"), range=fourth.range,
        context=types.CodeActionContext(diagnostics=[fourth], only=["source.fixAll.cliplint"])))
    assert list(fix_all.edit.changes) == [f"{uri}#cell3"]
    assert apply(cells[3][1], fix_all.edit.changes[f"{uri}#cell3"]) == "p = tf.nn.log_softmax(z)"

    # `log(softmax + eps)` is still a log of a softmax output; only the real fix clears the cell.
    assert [d.code for d in await change_cell(client, uri, 2, "loss = tf.math.log(probs + 1e-7)", 2)] == ["CL004"]
    assert await change_cell(client, uri, 2, "loss = -tf.reduce_sum(labels)", 3) == []

    client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
        notebook_document=types.NotebookDocumentIdentifier(uri=uri),
        cell_text_documents=[types.TextDocumentIdentifier(f"{uri}#cell{i}") for i in range(4)]))
    # The last lint's other cells may still be arriving: what counts is the state the close leaves.
    cells_uris = [f"{uri}#cell{i}" for i in range(4)]
    await wait_for(lambda: all(len(client.diagnostics.get(cell, "?")) == 0 for cell in cells_uris), 30, "clear cells")
    await asyncio.sleep(0.5)  # nothing published after the close brings a finding back
    assert all(len(client.diagnostics[cell]) == 0 for cell in cells_uris)


async def test_yaml_config_open_change_close(client: LanguageClient, tmp_path):
    (tmp_path / "exp.yaml").write_text(CONFLICTING_YAML)
    uri = (tmp_path / "exp.yaml").as_uri()
    diagnostics = await open_document(client, uri, CONFLICTING_YAML, "yaml")
    expected = cli_findings(tmp_path, "exp.yaml")
    assert [(d.code, span(d)) for d in diagnostics] == [(r["code"], utf16_span(CONFLICTING_YAML, r))
                                                          for r in expected]
    assert [d.code for d in diagnostics] == ["CL001"]
    actions = await quick_fixes(client, uri, diagnostics[0])
    edited = apply(CONFLICTING_YAML, titled(actions, "Disable").edit.changes[uri])
    assert edited == CONFLICTING_YAML.replace("clipvalue: 0.5", f"clipvalue: 0.5  {NOQA}: CL001")
    assert await change_document(client, uri, "optimizer:\n  name: adam\n  clipnorm: 1.0\n", 2) == []
    mark = len(client.published)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert await published(client, uri, mark) == []


async def test_config_files_the_auditor_skips_stay_clean(client: LanguageClient, tmp_path):
    workflow = (tmp_path / ".github" / "workflows" / "train.yml").as_uri()
    assert await open_document(client, workflow, CONFLICTING_YAML, "yaml") == []
    json_uri = (tmp_path / "sweep.json").as_uri()
    sweep = '{"optimizer": {"name": "adam", "clipnorm": 1, "clipvalue": 1}}'
    (found,) = await open_document(client, json_uri, sweep, "json")
    actions = await quick_fixes(client, json_uri, found)
    assert not [a for a in actions if a.title.startswith("Disable")]  # JSON has no comments to hold a noqa


async def test_settings_from_pyproject_and_reload(client: LanguageClient, tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.cliplint]\nignore = ["CL004"]\n')
    uri = (tmp_path / "train.py").as_uri()
    assert [d.code for d in await open_document(client, uri, TRAIN)] == ["CL001"]

    pyproject.write_text('[tool.cliplint]\nignore = ["CL001"]\n')
    mark = len(client.published)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=pyproject.as_uri(), type=types.FileChangeType.Changed)]))
    assert [d.code for d in await published(client, uri, mark)] == ["CL004"]

    pyproject.write_text('[tool.cliplint]\nselect = ["CL999"]\n')
    mark = len(client.published)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(pyproject.as_uri())))
    (broken,) = await published(client, uri, mark)
    assert broken.code == "CL000" and "configuration error" in broken.message and "CL999" in broken.message


async def test_malformed_documents_give_cl000_and_the_server_keeps_serving(client: LanguageClient, tmp_path):
    broken = "import tensorflow as tf\nx = tf.math.log(tf.nn.softmax(\n"
    (syntax,) = await open_document(client, (tmp_path / "broken.py").as_uri(), broken)
    assert syntax.code == "CL000" and "syntax error" in syntax.message
    bad_yaml = "optimizer:\n  clipnorm: 1.0\n   clipvalue: [\n"
    (yaml_error,) = await open_document(client, (tmp_path / "bad.yaml").as_uri(), bad_yaml, "yaml")
    assert yaml_error.code == "CL000" and "invalid YAML" in yaml_error.message and yaml_error.range.start.line == 2
    nul = await open_document(client, (tmp_path / "nul.py").as_uri(), "import tensorflow\x00 as tf\ntf.math.log(1)\n")
    assert [d.code for d in nul] in ([], ["CL000"])
    # Still serving: a good document gets its findings.
    assert [d.code for d in await open_document(client, (tmp_path / "train.py").as_uri(), TRAIN)] == ["CL004", "CL001"]


async def test_stale_versions_are_dropped(client: LanguageClient, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    await open_document(client, uri, TRAIN)
    mark = len(client.published)
    texts = [TRAIN + "\n" * i for i in range(1, 20)] + [TRAIN.replace("clipvalue=0.5", "")]
    for version, text in enumerate(texts, 2):
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    last = len(texts) + 1
    assert [d.code for d in await published(client, uri, mark, last)] == ["CL004"]
    versions = [p.version for p in client.published[mark:] if p.uri == uri]
    assert versions == sorted(versions) and len(versions) < len(texts)  # debounced, never out of order


async def test_requests_are_answered_while_a_big_file_is_linted(client: LanguageClient, tmp_path):
    big = TRAIN + "".join(f"y{i} = tf.math.log(tf.nn.softmax(x{i}))\n" for i in range(3000))
    uri = (tmp_path / "big.py").as_uri()
    mark = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_item(uri, big)))
    await asyncio.sleep(0.05)  # the lint has started on its thread
    answered = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(3, 25)))
    assert answered is None and not any(p.uri == uri for p in client.published[mark:])
    assert len(await published(client, uri, mark)) == 3002


async def test_untitled_buffer_is_linted_with_the_workspace_settings(client: LanguageClient, tmp_path):
    diagnostics = await open_document(client, "untitled:Untitled-1", TRAIN)
    assert [d.code for d in diagnostics] == ["CL004", "CL001"]


async def test_shutdown_and_exit_end_the_server(client: LanguageClient, tmp_path):
    await open_document(client, (tmp_path / "train.py").as_uri(), TRAIN)
    await client.shutdown_session()
    assert client._server.returncode == 0
    client.capabilities = None  # the fixture's own shutdown has nothing left to do


async def test_without_the_lsp_extra_the_command_says_what_to_install(tmp_path):
    # A module named pygls that fails to import, first on the path: as if the extra were missing.
    (tmp_path / "pygls.py").write_text("raise ModuleNotFoundError('No module named pygls', name='pygls')\n")
    environment = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "cliplint", "server"], capture_output=True, text=True,
        env=environment, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert "install cliplint's `lsp` extra (in a clone: pip install '.[lsp]'" in result.stderr
