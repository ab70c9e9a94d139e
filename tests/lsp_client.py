"""A pytest-lsp client for `cliplint server` that keeps every publishDiagnostics in order, and helpers to wait on them.

pytest-lsp's own `wait_for_notification` keeps one waiter per method, so two notifications
read in one go (a notebook's cells are published back to back) can slip past it.
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Callable, List, Optional

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

SERVER = [sys.executable, "-m", "cliplint", "server"]


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # every PublishDiagnosticsParams received, in order

    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(params)

    def register(client: LanguageClient, params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    client.registrations = []  # what the server registered dynamically
    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish,
                                   types.CLIENT_REGISTER_CAPABILITY: register})
    return client


def editor_capabilities() -> types.ClientCapabilities:
    """VS Code's capabilities as pytest-lsp records them, plus LSP 3.17 notebook sync (VS Code has
    it since 1.73; the recording is older)."""
    capabilities = client_capabilities("visual-studio-code")
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(execution_summary_support=True))
    return capabilities


CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_client)


def initialize_params(folder: Path, capabilities: types.ClientCapabilities, **options) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=capabilities, root_uri=folder.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)],
        initialization_options={"debounceMs": 10, **options})


async def wait_for(condition: Callable, timeout: float = 60.0, what: str = "the server"):
    """Poll `condition` until it returns something true; fail after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (result := condition()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
    return result


async def published(client: LanguageClient, uri: str, after: int, version: Optional[int] = None,
                    timeout: float = 60.0) -> List[types.Diagnostic]:
    """The diagnostics of the first publish for `uri` among the notifications after index `after`
    (and, given a version, for that version)."""

    def found():
        for params in client.published[after:]:
            if params.uri == uri and (version is None or params.version == version):
                return params
        return None

    params = await wait_for(found, timeout, f"diagnostics for {uri}")
    return list(params.diagnostics)


def text_item(uri: str, text: str, version: int = 1, language: str = "python") -> types.TextDocumentItem:
    return types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)


def span(diagnostic: types.Diagnostic):
    """(start line, start character, end line, end character): easy to compare."""
    r = diagnostic.range
    return (r.start.line, r.start.character, r.end.line, r.end.character)


def apply(text: str, edits) -> str:
    """Apply LSP TextEdits (UTF-16 positions) to `text`."""
    lines = text.split("\n")

    def offset(position: types.Position) -> int:
        before = sum(len(line) + 1 for line in lines[:position.line])
        units = lines[position.line].encode("utf-16-le")[:2 * position.character]
        return before + len(units.decode("utf-16-le"))

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text
