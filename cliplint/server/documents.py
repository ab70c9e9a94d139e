"""What the server lints: an editor's unsaved text to findings, as `cliplint check` finds them on disk.

A `Snapshot` is taken on the message loop (the text at one version) and linted on a worker
thread, incrementally: each open document keeps its parsed statements between versions
(`incremental.Document`). The rules, the notebook reader and the config auditor are the command line's own; only
the bytes come from the editor instead of the file. Every failure inside cliplint becomes a
CL000 finding in that document: the server itself never stops for one document.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..configs import audit
from ..findings import Finding, bad_input
from ..incremental import Document
from ..lint import prefilter
from ..notebook import lint_notebook
from ..rules import selected
from ..settings import CONFIG_SUFFIXES, Config, ConfigError, Settings

PYTHON, NOTEBOOK, CONFIG = "python", "notebook", "config"
# `.keras` archives are binary: an editor never holds one as text.
TEXT_CONFIG_SUFFIXES = tuple(suffix for suffix in CONFIG_SUFFIXES if suffix != ".keras")


@dataclass(frozen=True)
class Part:
    """One text document diagnostics are published for: a file, or one cell of a notebook."""

    uri: str
    text: str
    version: Optional[int] = None
    code: bool = True  # False for a markdown cell (kept for the cell numbering only)


@dataclass(frozen=True)
class Snapshot:
    key: str  # the text document's URI, or the notebook's
    version: int
    kind: str  # PYTHON | NOTEBOOK | CONFIG
    path: str  # the file on disk (for settings and messages); a made-up one for an untitled buffer
    root: str  # the workspace folder holding it: relative patterns start there when no pyproject.toml does
    parts: Tuple[Part, ...]


def kind_of(path: str, language_id: Optional[str]) -> Optional[str]:
    """PYTHON, CONFIG or None (not linted) for a text document."""
    lowered = path.lower()
    if lowered.endswith((".py", ".pyi")) or (language_id == "python" and not lowered.endswith(".ipynb")):
        return PYTHON
    if lowered.endswith(TEXT_CONFIG_SUFFIXES):
        return CONFIG
    return None


class WorkspaceSettings:
    """`[tool.cliplint]` discovery as on the command line (the closest pyproject.toml with the
    table, walking up from the file), forgotten whenever a pyproject.toml on that walk changes.

    Used by the linting thread only. Checking the walk's pyproject.toml files costs a few stat
    calls per lint; it keeps the settings right whether or not the editor reports file changes.
    """

    def __init__(self) -> None:
        self.config = Config()
        self.seen: Dict[str, Optional[int]] = {}  # pyproject.toml -> mtime_ns (None: absent)

    def for_path(self, path: str, root: str) -> Settings:
        self._forget_if_changed(os.path.dirname(os.path.abspath(path)))
        settings = self.config.for_path(path)
        return settings if settings.source is not None else replace(settings, root=root)

    def _forget_if_changed(self, directory: str) -> None:
        stamps = {}
        while True:
            candidate = os.path.join(directory, "pyproject.toml")
            stamps[candidate] = _mtime(candidate)
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        # A pyproject.toml never seen before cannot be stale: no folder of its walk was cached.
        if any(path in self.seen and self.seen[path] != stamp for path, stamp in stamps.items()):
            self.config = Config()
            self.seen = {}
        self.seen.update(stamps)


def _mtime(path: str) -> Optional[int]:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def diagnose(snapshot: Snapshot, workspace: WorkspaceSettings, document: Optional[Document] = None,
             probes: bool = True) -> Dict[str, List[Finding]]:
    """Findings per published document (an empty list clears a document's diagnostics).
    `document`: what earlier versions parsed (None: parse from scratch); `probes`: False for
    findings that will not be verified (Python code: they carry no probe)."""
    found: Dict[str, List[Finding]] = {part.uri: [] for part in snapshot.parts}
    document = document if document is not None else Document()
    try:
        findings = _findings(snapshot, workspace, partial(document.lint, probes=probes))
    except ConfigError as err:
        findings = [bad_input(snapshot.path, f"configuration error: {err}")]
    except Exception as err:  # a bug in cliplint costs this document its findings, not the server
        findings = [bad_input(snapshot.path, f"internal error in cliplint: {type(err).__name__}: {err}")]
    for finding in sorted(findings, key=Finding.sort_key):
        uri, finding = _place(snapshot, finding)
        found[uri].append(finding)
    return found


def enabled_rules(snapshot: Snapshot, workspace: WorkspaceSettings) -> Tuple[Settings, FrozenSet[str], list]:
    """The document's settings, enabled codes and rules (none for an excluded file or a config
    file the auditor skips); raises ConfigError for a broken pyproject.toml."""
    settings = workspace.for_path(snapshot.path, snapshot.root)
    if settings.excluded(snapshot.path) or (snapshot.kind == CONFIG and not settings.audits(snapshot.path)):
        return settings, frozenset(), []
    codes = settings.enabled_codes(snapshot.path)
    return settings, codes, selected(codes)


def _findings(snapshot: Snapshot, workspace: WorkspaceSettings, lint: Callable) -> List[Finding]:
    """`lint`: `lint_text`'s signature and answer (the document's incremental lint)."""
    settings, codes, rules = enabled_rules(snapshot, workspace)
    if not codes:
        return []
    text = snapshot.parts[0].text
    size = sum(len(part.text) for part in snapshot.parts)
    refused = settings.too_large(snapshot.path, size, "characters")
    if refused is not None:
        return [refused]
    if snapshot.kind == NOTEBOOK:
        findings = _notebook(snapshot, rules, lint)
    elif snapshot.kind == CONFIG:
        findings = audit(snapshot.path, text.encode("utf-8", "surrogatepass"), rules, snapshot.path)
    elif prefilter(text.encode("utf-8", "surrogatepass"), rules):
        findings, _ = lint(snapshot.path, text.lstrip("\ufeff"), rules, snapshot.path)
    else:
        findings = []
    # the severity `[tool.cliplint.severity]` gives a rule, as on the command line
    return [replace(f, severity=settings.severity_of(f.code, f.severity)) for f in findings if f.code in codes]


def notebook_json(snapshot: Snapshot) -> bytes:
    """The cells as the nbformat file the command line reads, so that cells are joined, magics
    neutralised and findings mapped back (and fixes made) exactly as there."""
    cells: List[Dict[str, object]] = [
        {"cell_type": "code" if part.code else "markdown", "source": part.text, "metadata": {}}
        for part in snapshot.parts]
    return json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5, "metadata": {}}).encode()


def _notebook(snapshot: Snapshot, rules: Sequence, lint: Callable) -> List[Finding]:
    data = notebook_json(snapshot)
    if not prefilter(data, rules):
        return []
    findings, _ = lint_notebook(snapshot.path, data, rules, snapshot.path, lint)
    return findings


def _place(snapshot: Snapshot, finding: Finding) -> Tuple[str, Finding]:
    """The document a finding belongs to: its cell in a notebook (a finding about the whole
    notebook goes to the first code cell)."""
    if snapshot.kind != NOTEBOOK:
        return snapshot.parts[0].uri, finding
    if finding.cell is not None and 1 <= finding.cell <= len(snapshot.parts):
        return snapshot.parts[finding.cell - 1].uri, finding
    first = next((part for part in snapshot.parts if part.code), snapshot.parts[0])
    return first.uri, replace(finding, line=1, column=1, end_line=1, end_column=1)
