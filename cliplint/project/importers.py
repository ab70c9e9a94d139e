"""Who imports a module: the project's files whose import statements name it.

A file's analysis follows its own imports forward (`session.Reading.prepare`); a loss library,
a base class or a helper is also given its values by the modules that import it (`losses.ce(
model(x), y)`, `class Net(BaseModel)`). The candidates are found without parsing: one pass per
run over the project's `.py` files reads the words of their import lines (a regular expression
on the bytes, re-read only when a file's `stat` changes); a module's importers are among the
files naming its last name there, and are those whose import statements, parsed alone, resolve
to its file. Only those are summarised.
"""
from __future__ import annotations

import ast
import os
import re
import time
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..cache import StatKey, stat_key
from ..files import read_regular
from ..settings import DEFAULT_EXCLUDE, DEFAULT_MAX_FILE_SIZE
from .resolve import imported_modules
from .roots import source_roots

# An import statement: `import a.b as c, d`, `from .a.b import c`, `from . import (c,\n d)`.
IMPORT_STATEMENT = re.compile(
    rb"^[ \t]*(from[ \t]+[.\w]+[ \t]+import[ \t]*(?:\([^)]*\)|[^#\r\n]*)|import[ \t]+[^#\r\n]*)", re.M)
WORD = re.compile(rb"[A-Za-z_]\w*")
MAX_FILES = 4000  # a project is scanned up to this many files (a checkout with a vendored world stops here)
MAX_IMPORTERS = 8  # importers linked into one file, the nearest first
REWALK_SECONDS = 2.0


class Importers:
    """The import words of a project's files, read once per run; `fresh` (an editor's session,
    whose files change under it) walks the project again when asked `REWALK_SECONDS` after the
    last walk (not at every keystroke), re-reading the files whose `stat` changed."""

    def __init__(self, fresh: bool = False) -> None:
        self.fresh = fresh
        # file -> (its stat, the words of its imports, those import statements)
        self._files: Dict[str, Tuple[Optional[StatKey], FrozenSet[str], Tuple[str, ...]]] = {}
        self._roots: Dict[str, Dict[str, List[str]]] = {}  # root -> word -> the files naming it
        self._walked: Dict[str, float] = {}  # root -> when it was last walked (`fresh`)
        self._resolved: Dict[Tuple[str, Tuple[str, ...], Optional[StatKey]], FrozenSet[str]] = {}

    def of(self, path: str, root: str, src: Sequence[str] = ()) -> List[str]:
        """The files under `root` (other than `path`) whose imports resolve to `path` (their import
        statements alone parsed, with `src` roots), the nearest to it first, at most `MAX_IMPORTERS`."""
        found = [other for other in self._index(root).get(module_word(path), [])
                 if other != path and self._imports(other, path, tuple(src))]
        here = os.path.dirname(path)
        found.sort(key=lambda other: (_distance(here, os.path.dirname(other)), other))
        return found[:MAX_IMPORTERS]

    def _index(self, root: str) -> Dict[str, List[str]]:
        walked = self._walked.get(root)
        if root in self._roots and (not self.fresh or time.monotonic() - (walked or 0.0) < REWALK_SECONDS):
            return self._roots[root]
        self._walked[root] = time.monotonic()
        index: Dict[str, List[str]] = {}
        for path in _python_files(root):
            for word in self._read(path):
                index.setdefault(word, []).append(path)
        self._roots[root] = index
        return index

    def _read(self, path: str) -> FrozenSet[str]:
        stamp = stat_key(path)
        known = self._files.get(path)
        if known is None or known[0] != stamp or stamp is None:
            try:
                data = read_regular(path, DEFAULT_MAX_FILE_SIZE)
            except OSError:
                data = b""
            statements = IMPORT_STATEMENT.findall(data)
            words = frozenset(word.decode() for statement in statements for word in WORD.findall(statement))
            texts = tuple(statement.decode("utf-8", "replace").strip() for statement in statements)
            known = self._files[path] = (stamp, words, texts)
        return known[1]

    def _imports(self, importer: str, path: str, src: Tuple[str, ...]) -> bool:
        """Does `importer` import `path`? Its import statements are parsed and resolved once."""
        key = (importer, src, self._files[importer][0])
        if key not in self._resolved:
            statements: List[ast.stmt] = []
            for text in self._files[importer][2]:
                try:
                    statements += ast.parse(text).body
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue  # a backslash continuation, a statement the regular expression cut short
            self._resolved[key] = frozenset(imported_modules(statements, importer, source_roots(importer, src)))
        return path in self._resolved[key]


def imports_project(path: str, data: bytes, src: Sequence[str] = ()) -> bool:
    """Does the source `data` of the file at `path` import one of its project's modules? Read
    from its import statements alone (the regular expression, each statement parsed by itself)."""
    statements: List[ast.stmt] = []
    for match in IMPORT_STATEMENT.finditer(data):
        try:
            statements += ast.parse(match.group(1).decode("utf-8", "replace").strip()).body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return bool(statements) and bool(imported_modules(statements, path, source_roots(os.path.abspath(path), src)))


def module_word(path: str) -> str:
    """The name an importer must write: the module's file name, or its package's for `__init__.py`."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.basename(os.path.dirname(path)) if stem == "__init__" else stem


def _python_files(root: str) -> List[str]:
    found: List[str] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d not in DEFAULT_EXCLUDE and not d.startswith("."))
        found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
        if len(found) >= MAX_FILES:
            return found[:MAX_FILES]
    return found


def _distance(here: str, there: str) -> int:
    """How many folders apart two folders are (siblings 0... a test suite beside the package 2)."""
    common = os.path.commonpath([here, there])
    return len(os.path.relpath(here, common).split(os.sep)) + len(os.path.relpath(there, common).split(os.sep))
