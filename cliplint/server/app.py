"""The language server: document sync, scheduled linting, diagnostics, code actions, hover, verify.

Everything that touches the protocol runs on pygls' event loop; linting runs on one worker
thread and verification on another, so a slow file or a TensorFlow probe never delays a reply.
Linting is incremental (each open document keeps its parsed statements between versions) and
debounced on the leading edge: a change is linted at once unless a lint of that document
started less than the debounce ago; then it waits out the rest, and a newer change replaces
it. A result whose document has moved on to another version is dropped, never published.
"""
from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Dict, Generic, List, Optional, Tuple, TypeVar
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path, uri_scheme

from .. import __version__
from ..findings import UNREADABLE, Finding
from ..incremental import Document
from ..settings import ConfigError
from .actions import FIX_ALL, fix_action, fix_all_action, noqa_action, wanted
from .changes import noqa_change
from .dependents import Dependents
from .documents import NOTEBOOK, Part, Snapshot, WorkspaceSettings, kind_of
from .fixes import fix_all, quick_fixes
from .pages import hover_text
from .protocol import contains, diagnostic, lines_of, overlaps
from .verifier import Verifier

VERIFY_COMMAND = "cliplint.verify"
DEFAULT_DEBOUNCE = 0.05  # seconds between two lints of one document: a burst of keystrokes coalesces
DEFAULT_VERIFY_TIMEOUT = 30.0
THREAD_STACK = 64 * 1024 * 1024
SETTINGS_FILE = "pyproject.toml"


@dataclass(frozen=True)
class Published:
    """What one document's diagnostics were computed from: code actions and hover answer from it."""

    version: Optional[int]
    part: Part
    snapshot: Snapshot
    findings: Tuple[Tuple[Finding, types.Diagnostic], ...]


T = TypeVar("T")


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """Something computed for one version of a document."""

    version: int
    value: T


@dataclass
class Tracked:
    """The server's state of one open document (a notebook's for all its cells), dropped
    whole when it is closed."""

    buffer: Document = field(default_factory=Document)  # its parsed statements (the lint thread's)
    started: float = float("-inf")  # when its last lint started (monotonic)
    pending: Optional[asyncio.Task] = None  # a lint waiting out the debounce
    published: Dict[str, Published] = field(default_factory=dict)  # part URI -> its diagnostics
    linted: Optional[Versioned[Dict[str, List[Finding]]]] = None  # the last lint: findings per part URI
    verdicts: Optional[Versioned[Dict[Finding, Optional[dict]]]] = None  # from cliplint.verify
    computed: Dict[str, Versioned[object]] = field(default_factory=dict)  # what (quick fixes, fix all) -> result

    def cancel(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None


class CliplintServer(LanguageServer):
    def __init__(self) -> None:
        cells = types.NotebookDocumentFilterWithCells(
            notebook="*", cells=[types.NotebookCellLanguage(language="python")])
        super().__init__("cliplint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=types.NotebookDocumentSyncOptions(
                             notebook_selector=[cells], save=True))
        # libcst's native parser recurses on the linting thread: give the threads started from
        # here a stack of a known size (a platform's default may be 128 KB), 25x what the deepest
        # text the nesting gate lets through needs (limits.MAX_DEPTH).
        threading.stack_size(THREAD_STACK)
        self.lint_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cliplint-lint")
        self.verify_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cliplint-verify")
        self.settings = WorkspaceSettings()  # used by the lint thread only
        self.tracked: Dict[str, Tracked] = {}  # document (or notebook) URI -> its state
        self.dependents = Dependents()  # what each lint read of the project's other modules
        self.debounce = DEFAULT_DEBOUNCE
        self.verifier = Verifier(DEFAULT_VERIFY_TIMEOUT)
        self.shutdown_requested = False
        self.tokens = itertools.count(1)

    # Documents -----------------------------------------------------------------------------

    def state(self, key: str) -> Tracked:
        tracked = self.tracked.get(key)
        if tracked is None:
            tracked = self.tracked[key] = Tracked()
        return tracked

    def open_text(self, uri: str):
        """The synchronised text document, or None when the editor has closed it."""
        return self.workspace.text_documents.get(unquote(uri))

    def notebook_of(self, uri: str):
        return self.workspace.get_notebook_document(notebook_uri=uri) \
            or self.workspace.get_notebook_document(cell_uri=uri)

    def current_version(self, key: str) -> Optional[int]:
        notebook = self.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            return notebook.version
        document = self.open_text(key)
        return document.version if document is not None else None

    def root_of(self, path: str) -> str:
        folders = [to_fs_path(folder.uri) for folder in self.workspace.folders.values()]
        holding = [folder for folder in folders if folder and path.startswith(folder.rstrip(os.sep) + os.sep)]
        if holding:
            return max(holding, key=len)
        return self.workspace.root_path or os.path.dirname(path)

    def path_of(self, uri: str) -> str:
        path = to_fs_path(uri) if uri_scheme(uri) == "file" else None
        if path is not None:
            return path
        base = self.workspace.root_path or os.getcwd()  # an untitled buffer: settings of the workspace
        return os.path.join(base, unquote(uri).rsplit("/", 1)[-1].rsplit(":", 1)[-1] or "untitled")

    def snapshot(self, key: str) -> Optional[Snapshot]:
        """The document's text now, if it is one cliplint lints."""
        notebook = self.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            return self._notebook_snapshot(notebook)
        document = self.open_text(key)
        if document is None or self.workspace.get_notebook_document(cell_uri=key) is not None:
            return None
        path = self.path_of(key)
        kind = kind_of(path, document.language_id)
        if kind is None:
            return None
        part = Part(key, document.source, document.version)
        return Snapshot(key, document.version, kind, path, self.root_of(path), (part,))

    def _notebook_snapshot(self, notebook) -> Snapshot:
        parts = []
        for cell in notebook.cells:
            document = self.open_text(cell.document)
            text = document.source if document is not None else ""
            version = document.version if document is not None else None
            parts.append(Part(cell.document, text, version, cell.kind == types.NotebookCellKind.Code))
        path = self.path_of(notebook.uri)
        return Snapshot(notebook.uri, notebook.version, NOTEBOOK, path, self.root_of(path), tuple(parts))

    # Linting -------------------------------------------------------------------------------

    def schedule(self, key: str, debounce: float) -> None:
        """Lint `key` once `debounce` seconds have passed since its last lint started (at once
        if they have), replacing a lint already waiting for it."""
        tracked = self.state(key)
        tracked.cancel()
        delay = max(0.0, tracked.started + debounce - time.monotonic())
        tracked.pending = asyncio.ensure_future(self._lint_later(key, delay))

    async def _lint_later(self, key: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        snapshot = self.snapshot(key)
        if snapshot is None:
            return
        try:
            await self.lint(snapshot)
        except Exception as err:  # a failed publish must be said, not lost in an unawaited task
            self.window_log_message(types.LogMessageParams(
                type=types.MessageType.Error, message=f"cliplint: linting {key} failed: {type(err).__name__}: {err}"))

    async def lint(self, snapshot: Snapshot) -> Optional[Dict[str, List[Finding]]]:
        """Lint on the worker thread and publish, unless the document changed meanwhile."""
        tracked = self.state(snapshot.key)
        tracked.started = time.monotonic()
        found = await asyncio.get_running_loop().run_in_executor(
            self.lint_pool, self.dependents.diagnose, snapshot, self.settings, tracked.buffer, False)
        for importer in self.dependents.take_stale(snapshot.key):  # they read its old summary
            self.schedule(importer, 0)
        if self.current_version(snapshot.key) != snapshot.version:
            return None  # stale: a newer version is (or will be) linted
        self.state(snapshot.key).linted = Versioned(snapshot.version, found)
        self.publish(snapshot, self._with_verdicts(snapshot, found))
        return found

    def _with_verdicts(self, snapshot: Snapshot, found: Dict[str, List[Finding]]) -> Dict[str, List[Finding]]:
        verdicts = self.state(snapshot.key).verdicts
        if verdicts is None or verdicts.version != snapshot.version:
            return found
        return {uri: [replace(f, verification=verdicts.value.get(f)) for f in findings]
                for uri, findings in found.items()}

    def publish(self, snapshot: Snapshot, found: Dict[str, List[Finding]]) -> None:
        units = self.workspace.position_codec.client_num_units
        published = self.state(snapshot.key).published
        uris = {part.uri for part in snapshot.parts}
        self.clear([uri for uri in published if uri not in uris])  # a notebook's deleted cells
        for uri in [uri for uri in published if uri not in uris]:
            del published[uri]
        for part in snapshot.parts:
            lines = lines_of(part.text)
            pairs = tuple((f, diagnostic(f, lines, units)) for f in found.get(part.uri, ()))
            published[part.uri] = Published(part.version, part, snapshot, pairs)
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=part.uri, diagnostics=[d for _, d in pairs], version=part.version))

    def clear(self, uris: List[str]) -> None:
        for uri in uris:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def forget(self, key: str, uris: List[str]) -> None:
        """A closed document: nothing pending, nothing shown."""
        tracked = self.tracked.pop(key, None)
        if tracked is not None:
            tracked.cancel()
        for importer in self.dependents.forget(key, self.path_of(key)):  # they read the disk's version now
            self.schedule(importer, 0)
        published = list(tracked.published) if tracked is not None else []
        self.clear(uris + [uri for uri in published if uri not in uris])

    def open_keys(self) -> List[str]:
        """Every open document: text documents that are no notebook's cell, and notebooks."""
        texts = [uri for uri in self.workspace.text_documents
                 if self.workspace.get_notebook_document(cell_uri=uri) is None]
        return texts + list(self.workspace.notebook_documents)

    def relint_all(self) -> None:
        """Every open document again (the settings changed)."""
        for key in self.open_keys():
            self.schedule(key, 0)

    # Verification --------------------------------------------------------------------------

    async def verify(self, uri: str) -> List[dict]:
        notebook = self.notebook_of(uri)
        key = notebook.uri if notebook is not None else uri
        snapshot = self.snapshot(key)
        if snapshot is None:
            raise ValueError(f"{uri} is not a document cliplint lints")
        linted = self.state(key).linted
        found = linted.value if linted is not None and linted.version == snapshot.version else None
        if found is None:
            found = await self.lint(snapshot)  # not linted at this version yet
        if found is None:
            raise ValueError(f"{uri} changed while it was being linted; run the command again")
        loop = asyncio.get_running_loop()
        probed = await loop.run_in_executor(  # live diagnostics carry no probe: lint again with them
            self.lint_pool, self.dependents.diagnose, snapshot, self.settings, self.state(key).buffer, True)
        placed = [(part_uri, f) for part_uri, findings in probed.items() for f in findings]
        token = await self._begin_progress(len(placed))

        def report(done: int, total: int, finding: Finding) -> None:
            if token is not None:
                loop.call_soon_threadsafe(self.work_done_progress.report, token, types.WorkDoneProgressReport(
                    message=f"{finding.code} line {finding.line} ({done + 1}/{total})",
                    percentage=100 * done // max(total, 1)))

        try:
            verified = await loop.run_in_executor(
                self.verify_pool, self.verifier.verify, [f for _, f in placed], report)
        except ConfigError as err:
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=str(err)))
            raise ValueError(str(err)) from None
        finally:
            if token is not None:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message="cliplint: verified"))
        if self.current_version(key) == snapshot.version:  # not edited (nor closed) meanwhile
            self.state(key).verdicts = Versioned(snapshot.version, {f: f.verification for f in verified})
            self.publish(snapshot, self._with_verdicts(snapshot, found))
        return [{"uri": part_uri, "code": f.code, "line": f.line, "column": f.column, **(f.verification or {})}
                for (part_uri, _), f in zip(placed, verified)]

    async def _begin_progress(self, total: int) -> Optional[str]:
        """A server-initiated progress token, when the client shows progress."""
        window = self.client_capabilities.window
        if window is None or not window.work_done_progress:
            return None
        token = f"cliplint-verify-{next(self.tokens)}"
        await self.work_done_progress.create_async(token)
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title="cliplint: verifying with TensorFlow", message=f"{total} finding(s)", percentage=0))
        return token

    # Editor features -----------------------------------------------------------------------

    def current(self, uri: str) -> Optional[Published]:
        """The published diagnostics of `uri`, if they belong to the text the editor shows now."""
        notebook = self.notebook_of(uri)
        tracked = self.tracked.get(notebook.uri if notebook is not None else uri)
        published = tracked.published.get(uri) if tracked is not None else None
        document = self.open_text(uri)
        if published is None or document is None or document.version != published.version:
            return None
        return published

    async def code_actions(self, params: types.CodeActionParams) -> List[types.CodeAction]:
        uri, only = params.text_document.uri, params.context.only
        published = self.current(uri)
        if published is None:
            return []
        units = self.workspace.position_codec.client_num_units
        lines = lines_of(published.part.text)
        chosen = [(f, shown) for f, shown in published.findings
                  if f.code != UNREADABLE.code and overlaps(shown.range, params.range)]
        actions: List[types.CodeAction] = []
        if chosen and wanted(only, types.CodeActionKind.QuickFix):
            fixable = any(f.fix for f, _ in chosen)  # the lint said which findings have a fix: no parse otherwise
            fixes = await self.on_lint_thread(published, quick_fixes) if fixable else []
            for finding, shown in chosen:
                actions.extend(fix_action(uri, fix, shown, lines, units) for fix in fixes
                               if (fix.code, fix.line, fix.column) == (finding.code, finding.line, finding.column))
            actions.extend(self._noqa_actions(uri, published, chosen, lines, units))
        if any(f.fix for f, _ in published.findings) and wanted(only, FIX_ALL):
            changes = await self.on_lint_thread(published, fix_all)
            if changes:
                texts = {part.uri: part.text for part in published.snapshot.parts}
                actions.append(fix_all_action(changes, texts, units))
        return actions if self.current(uri) is published else []  # the document changed meanwhile

    def _noqa_actions(self, uri: str, published: Published, chosen, lines, units) -> List[types.CodeAction]:
        actions, seen = [], set()
        for finding, shown in chosen:
            change = noqa_change(published.part.text, finding, published.snapshot.kind, published.snapshot.path)
            if change is not None and (finding.code, change.line) not in seen:
                seen.add((finding.code, change.line))
                actions.append(noqa_action(uri, finding, change, shown, lines, units))
        return actions

    async def on_lint_thread(self, published: Published, compute):
        """`compute(snapshot, settings)` on the linting thread, once per document version."""
        computed = self.state(published.snapshot.key).computed
        done = computed.get(compute.__name__)
        if done is not None and done.version == published.snapshot.version:
            return done.value
        result = await asyncio.get_running_loop().run_in_executor(
            self.lint_pool, compute, published.snapshot, self.settings)
        self.state(published.snapshot.key).computed[compute.__name__] = Versioned(published.snapshot.version, result)
        return result

    def hover(self, params: types.HoverParams) -> Optional[types.Hover]:
        published = self.current(params.text_document.uri)
        if published is None:
            return None
        under = [(f, shown) for f, shown in published.findings if contains(shown.range, params.position)]
        if not under:
            return None
        text = "\n\n---\n\n".join(hover_text(f) for f, _ in under)
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
                           range=under[0][1].range)

    def close(self) -> None:
        """Stop the verifier's worker and the threads (shutdown, exit, or the editor went away)."""
        self.verifier.close()
        self.lint_pool.shutdown(wait=False, cancel_futures=True)
        self.verify_pool.shutdown(wait=False, cancel_futures=True)


def document_uri(params) -> str:
    """The URI a sync notification is about: the text document's, or the notebook's."""
    document = getattr(params, "notebook_document", None) or params.text_document
    return document.uri


def is_settings_file(uri: str) -> bool:
    return unquote(uri).rsplit("/", 1)[-1] == SETTINGS_FILE


def build() -> CliplintServer:
    server = CliplintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: CliplintServer, params: types.InitializeParams) -> None:
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        ls.debounce = float(options.get("debounceMs", DEFAULT_DEBOUNCE * 1000)) / 1000
        ls.verifier.timeout = float(options.get("verifyTimeout", DEFAULT_VERIFY_TIMEOUT))

    @server.feature(types.INITIALIZED)
    async def initialized(ls: CliplintServer, params: types.InitializedParams) -> None:
        watched = ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files
        if watched and watched.dynamic_registration:
            watcher = types.FileSystemWatcher(glob_pattern=f"**/{SETTINGS_FILE}")
            await ls.client_register_capability_async(types.RegistrationParams(registrations=[types.Registration(
                id="cliplint-settings", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=[watcher]))]))

    def opened(ls: CliplintServer, params) -> None:
        ls.schedule(document_uri(params), 0)

    def changed(ls: CliplintServer, params) -> None:
        ls.schedule(document_uri(params), ls.debounce)

    def saved(ls: CliplintServer, params) -> None:
        if is_settings_file(document_uri(params)):
            ls.relint_all()
        else:
            ls.schedule(document_uri(params), 0)

    def closed(ls: CliplintServer, params) -> None:
        cells = [cell.uri for cell in getattr(params, "cell_text_documents", ())]
        ls.forget(document_uri(params), cells or [document_uri(params)])

    for handler, methods in ((opened, (types.TEXT_DOCUMENT_DID_OPEN, types.NOTEBOOK_DOCUMENT_DID_OPEN)),
                             (changed, (types.TEXT_DOCUMENT_DID_CHANGE, types.NOTEBOOK_DOCUMENT_DID_CHANGE)),
                             (saved, (types.TEXT_DOCUMENT_DID_SAVE, types.NOTEBOOK_DOCUMENT_DID_SAVE)),
                             (closed, (types.TEXT_DOCUMENT_DID_CLOSE, types.NOTEBOOK_DOCUMENT_DID_CLOSE))):
        for method in methods:
            server.feature(method)(handler)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: CliplintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(is_settings_file(change.uri) for change in params.changes):
            ls.relint_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def folders_changed(ls: CliplintServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        ls.relint_all()

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]))
    async def code_action(ls: CliplintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
        return await ls.code_actions(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: CliplintServer, params: types.HoverParams) -> Optional[types.Hover]:
        return ls.hover(params)

    @server.command(VERIFY_COMMAND)
    async def verify(ls: CliplintServer, *arguments) -> List[dict]:
        """Arguments: the document's URI (a notebook's, or one of its cells'), or {"uri": ...}; none:
        every open document cliplint lints (editors whose command pickers pass no arguments)."""
        first = arguments[0] if arguments else None
        uri = first.get("uri") if isinstance(first, dict) else first
        if first is not None and not isinstance(uri, str):
            raise ValueError(f"{VERIFY_COMMAND} takes the document's URI as its argument")
        if uri is not None:
            return await ls.verify(uri)
        keys = [key for key in ls.open_keys() if ls.snapshot(key) is not None]
        return [verdict for key in keys for verdict in await ls.verify(key)]

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: CliplintServer, params: None) -> None:
        ls.shutdown_requested = True
        for tracked in ls.tracked.values():
            tracked.cancel()
        ls.close()

    return server
