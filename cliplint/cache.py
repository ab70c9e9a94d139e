"""Content-hash result cache (`.cliplint_cache/`).

An entry is keyed by the file's bytes, the display path (findings carry it), the rules enabled
for the file, and cliplint's own code (its version and a fingerprint of its source files), so
an edit, a setting change or an upgrade can never return a stale result. Entries are written
to a temporary file and renamed into place, so two runs sharing the cache never see half an
entry; a corrupt or unreadable entry is a miss. A file with nothing to report has an empty
entry: most files in a tree, read with one `stat`.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from functools import lru_cache
from typing import List, Optional, Tuple

from . import __version__


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """cliplint's version plus the size and mtime of each of its source files."""
    root = os.path.dirname(os.path.abspath(__file__))
    parts = [__version__]
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith((".py", ".json")):
                stat = os.stat(os.path.join(folder, name))
                parts.append(f"{os.path.relpath(os.path.join(folder, name), root)}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class Cache:
    def __init__(self, folder: str) -> None:
        self.folder = folder

    def key(self, content: bytes, display: str, codes, extra: str = "") -> str:
        digest = hashlib.sha256()
        for part in (code_fingerprint(), display, ",".join(sorted(codes)), extra):
            digest.update(part.encode() + b"\0")
        digest.update(content)
        return digest.hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, key[:2], key[2:] + ".json")

    def get(self, key: str) -> Optional[Tuple[List[dict], bool]]:
        path = self._path(key)
        try:
            if os.stat(path).st_size == 0:
                return [], False  # most files: nothing found, an empty entry (no open, no JSON)
            with open(path, encoding="utf-8") as handle:
                entry = json.load(handle)
            return entry["findings"], entry["crashed"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, findings, crashed: bool) -> None:
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self._mark_folder()
            import tempfile  # 10 ms to import: only when an entry is written

            handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                if findings or crashed:
                    json.dump({"findings": [asdict(f) for f in findings], "crashed": crashed}, out)
            os.replace(temporary, path)
        except OSError:
            pass  # a read-only or full disk only costs the cache

    def _mark_folder(self) -> None:
        ignore = os.path.join(self.folder, ".gitignore")
        if not os.path.exists(ignore):
            with open(ignore, "w", encoding="utf-8") as out:
                out.write("# Created by cliplint automatically.\n*\n")
            with open(os.path.join(self.folder, "CACHEDIR.TAG"), "w", encoding="utf-8") as out:
                out.write("Signature: 8a477f597d28d172789f06886806bc55\n# cliplint result cache\n")
