"""Issue 28 in the language server: open buffers are the project's modules, and a change to a
module's summary lints the open documents that import it again."""
from __future__ import annotations

import pytest
import pytest_lsp
from lsp_client import CONFIG, editor_capabilities, initialize_params, published, text_item
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio

BUILD = ("import tensorflow as tf\n\n\ndef build():\n"
         "    return tf.keras.Sequential([tf.keras.layers.Dense(3, activation='softmax')])\n")
LINEAR = BUILD.replace(", activation='softmax'", "")
TRAIN = ("import tensorflow as tf\nfrom models import build\nmodel = build()\n"
         "model.compile(loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))\n")


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "models.py").write_text(BUILD)
    (tmp_path / "train.py").write_text(TRAIN)
    await lsp_client.initialize_session(initialize_params(tmp_path, editor_capabilities()))
    yield
    await lsp_client.shutdown_session()


async def opened(client, uri, text):
    mark = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_item(uri, text)))
    return await published(client, uri, mark, 1)


def edit(client, uri, text, version):
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def codes(diagnostics):
    return [(d.code, d.range.start.line) for d in diagnostics]


async def test_editing_a_helper_relints_its_open_importer(client: LanguageClient, tmp_path):
    train, models = (tmp_path / "train.py").as_uri(), (tmp_path / "models.py").as_uri()
    diagnostics = await opened(client, train, TRAIN)
    assert codes(diagnostics) == [("CL010", 3)]
    assert "models.py:4" in diagnostics[0].message
    assert await opened(client, models, BUILD) == []
    mark = len(client.published)
    edit(client, models, LINEAR, 2)  # unsaved: the buffer, not the disk, is what train.py imports
    assert codes(await published(client, train, mark)) == []
    mark = len(client.published)
    edit(client, models, BUILD, 3)
    assert codes(await published(client, train, mark)) == [("CL010", 3)]


async def test_an_import_under_a_top_level_try_is_followed_edit_after_edit(client: LanguageClient, tmp_path):
    """The server reads a file's imports from its top-level statements alone before following
    them: an import under `try` counts, as on the command line, and an edit elsewhere keeps it."""
    train = (tmp_path / "guarded.py").as_uri()
    text = TRAIN.replace("from models import build\n", "try:\n    from models import build\nexcept ImportError:\n"
                                                        "    raise\n")
    assert codes(await opened(client, train, text)) == [("CL010", 6)]
    mark = len(client.published)
    edit(client, train, text.replace("model = build()", "model = build()  # typed"), 2)
    assert codes(await published(client, train, mark)) == [("CL010", 6)]
    mark = len(client.published)
    edit(client, train, text.replace("from models import build", "from keras import build"), 3)
    assert codes(await published(client, train, mark)) == []


async def test_closing_an_edited_helper_brings_back_the_disk_version(client: LanguageClient, tmp_path):
    train, models = (tmp_path / "train.py").as_uri(), (tmp_path / "models.py").as_uri()
    await opened(client, models, BUILD)
    mark = len(client.published)
    edit(client, models, LINEAR, 2)
    await published(client, models, mark, 2)
    assert codes(await opened(client, train, TRAIN)) == []  # the open buffer wins over the disk
    mark = len(client.published)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(models)))
    assert codes(await published(client, train, mark)) == [("CL010", 3)]


async def test_an_edit_that_keeps_the_summary_relints_nothing_else(client: LanguageClient, tmp_path):
    train, models = (tmp_path / "train.py").as_uri(), (tmp_path / "models.py").as_uri()
    await opened(client, train, TRAIN)
    await opened(client, models, BUILD)
    mark = len(client.published)
    edit(client, models, BUILD + "# a comment\n", 2)
    await published(client, models, mark, 2)
    edit(client, models, LINEAR, 3)  # a change that matters: train.py's next publish is for it
    assert codes(await published(client, train, mark)) == []  # a relint after the comment would be CL010
