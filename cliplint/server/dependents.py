"""Project-wide analysis in the editor: open buffers are the project's modules as the user sees
them, and a change to a module's summary lints its open importers again.

The command line reads a helper module from disk; here an open, unsaved buffer of it takes
precedence (`Project(buffers=...)`). Each lint records the summaries it read (module file ->
hash); after a document is linted, the open documents that read an older summary of it are
the ones to lint again (an edit that leaves the summary as it was, a comment or an unrelated
function, re-lints nothing else).
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from ..flow.local import LINK
from ..incremental import Document
from ..project.link import link_on_demand
from ..project.session import Project, Reads
from ..settings import ConfigError
from .documents import PYTHON, Snapshot, WorkspaceSettings, diagnose


class Dependents:
    """Used by the linting thread (`diagnose`) and, for the keys to lint again, the message loop
    after that thread has answered."""

    def __init__(self) -> None:
        self.texts: Dict[str, str] = {}  # file -> the text of its open Python buffer
        self.project = Project(buffers=self.texts.get)
        self.reads: Dict[str, Reads] = {}  # document key -> what its last lint read
        self.stale: Dict[str, List[str]] = {}  # document key -> the open importers to lint again after it

    def diagnose(self, snapshot: Snapshot, workspace: WorkspaceSettings, document: Optional[Document] = None,
                 probes: bool = True) -> Dict[str, list]:
        """`documents.diagnose`, following the document's imports into the project's modules."""
        path = os.path.abspath(snapshot.path)
        if snapshot.kind == PYTHON:
            self.texts[path] = snapshot.parts[0].text
        src = self._src(snapshot, workspace)
        with self.project.reading(src) as reads:
            token = LINK.set(link_on_demand)
            try:
                found = diagnose(snapshot, workspace, document, probes)
            finally:
                LINK.reset(token)
        self.reads[snapshot.key] = dict(reads)
        self.stale[snapshot.key] = self._importers(path, snapshot.key, src)
        return found

    def forget(self, key: str, path: str) -> List[str]:
        """A closed document: its importers read the file on disk again (those to lint)."""
        self.reads.pop(key, None)
        self.stale.pop(key, None)
        absolute = os.path.abspath(path)
        if self.texts.pop(absolute, None) is None:
            return []
        return self._importers(absolute, key, ())

    def take_stale(self, key: str) -> List[str]:
        return self.stale.pop(key, [])

    def _importers(self, path: str, key: str, src: Tuple[str, ...]) -> List[str]:
        """The other open documents whose last lint read another summary of `path` than its own now."""
        readers = [other for other, read in self.reads.items() if other != key and path in read]
        if not path.endswith(".py") or not readers:  # summarising the buffer costs as much as linting it
            return []
        summary = self.project.summary(path, src)
        now = summary["hash"] if summary is not None else None
        return [other for other in readers if self.reads[other][path] != now]

    @staticmethod
    def _src(snapshot: Snapshot, workspace: WorkspaceSettings) -> Tuple[str, ...]:
        try:
            return workspace.for_path(snapshot.path, snapshot.root).src
        except ConfigError:  # reported by the lint itself
            return ()
