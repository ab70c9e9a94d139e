"""`cliplint.verify` from the editor, against real TensorFlow: progress, verdicts in the diagnostics,
and no worker process left once the server has exited."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import pytest_lsp
from lsp_client import CONFIG, editor_capabilities, initialize_params, published, text_item, wait_for
from lsprotocol import types
from pytest_lsp import LanguageClient

pytest.importorskip("tensorflow", reason="the verifier tests need tensorflow-cpu (pip install '.[verify]')")
pytestmark = pytest.mark.asyncio

SOURCE = "import tensorflow as tf\nopt = tf.keras.optimizers.Adam(learning_rate=0.1, clipnorm=1.0, clipvalue=0.5)\n"


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient, tmp_path):
    await lsp_client.initialize_session(initialize_params(tmp_path, editor_capabilities(), verifyTimeout=120))
    yield
    await lsp_client.shutdown_session()


def worker_processes(parent: int):
    """PIDs of the verifier workers `parent` started (alive, not zombies)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if b"cliplint.verify.worker" in command and int(fields["PPid"]) == parent:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_verify_command_republishes_verdicts_and_exit_stops_the_worker(client: LanguageClient, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    mark = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_item(uri, SOURCE)))
    (before,) = await published(client, uri, mark, 1)
    assert before.code == "CL001" and "[confirmed" not in before.message

    mark = len(client.published)
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="cliplint.verify", arguments=[uri]))
    assert [(a["code"], a["line"], a["verdict"]) for a in answer] == [("CL001", 2, "confirmed")]
    (after,) = [p for p in client.published[mark:] if p.uri == uri][-1].diagnostics
    assert after.message.startswith(before.message) and "[confirmed: " in after.message
    assert after.range == before.range

    (progress,) = client.progress_reports.values()
    kinds = [report.kind for report in progress]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds

    hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri),
                                                                     after.range.start))
    assert "Verified against TensorFlow: **confirmed**" in hover.contents.value

    server = client._server
    workers = worker_processes(server.pid)
    # TensorFlow was started on request (a second worker runs the other Keras flavour when both are installed).
    assert workers and all(alive(pid) for pid in workers)
    await client.shutdown_session()
    client.capabilities = None  # the fixture's own shutdown has nothing left to do
    assert server.returncode == 0
    assert not any(alive(pid) for pid in workers), "the verifier's worker outlived the server"


async def test_verify_of_a_document_without_findings_starts_nothing(client: LanguageClient, tmp_path):
    uri = (tmp_path / "clean.py").as_uri()
    mark = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_item(uri, "import tensorflow as tf\n")))
    assert await published(client, uri, mark) == []
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="cliplint.verify", arguments=[{"uri": uri}]))
    assert answer == [] and worker_processes(client._server.pid) == []
    everything = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="cliplint.verify"))
    assert everything == [] and worker_processes(client._server.pid) == []
    assert os.path.exists(f"/proc/{client._server.pid}")  # still serving


async def test_the_editor_going_away_mid_verification_leaves_no_worker(client: LanguageClient, tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    mark = len(client.published)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_item(uri, SOURCE)))
    await published(client, uri, mark, 1)
    verifying = asyncio.ensure_future(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="cliplint.verify", arguments=[uri])))
    server = client._server
    workers = await wait_for(lambda: worker_processes(server.pid), 300, "the verifier's worker")
    server.stdin.close()  # no shutdown, no exit: the editor was killed (TensorFlow may still be importing)
    assert await asyncio.wait_for(server.wait(), 60) == 1
    await wait_for(lambda: not any(alive(pid) for pid in workers), 10, "the worker to stop")
    verifying.cancel()
    client.capabilities = None  # nothing left to shut down
