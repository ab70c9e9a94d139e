"""Baselines: adopt cliplint on a codebase that has findings today without editing it.

`--write-baseline FILE` records the findings of a run; `--baseline FILE` then reports only the
findings it does not hold. A finding is keyed by its rule, its file (relative to the baseline's
folder, so the run may start anywhere) and the text of the code it flags, never by its line:
code moved up or down keeps its entry, as in ruff's and pylint's baselines. The same key twice
in a file is counted, so a third copy of a baselined mistake is new.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from typing import Dict, List, Sequence, Tuple

from .files import read_regular, write_atomically
from .findings import Finding
from .settings import ConfigError

FORMAT = "cliplint-baseline"
VERSION = 1
SOURCE_LIMIT = 256 * 1024 * 1024  # the file was linted under max-file-size; this bounds a swapped one
Key = Tuple[str, str, str]  # (code, path relative to the baseline's folder, the flagged code's text)


class _Sources:
    """The lines of each file findings point at, read once per run."""

    def __init__(self) -> None:
        self._lines: Dict[str, List[str]] = {}

    def text(self, finding: Finding) -> str:
        """The flagged lines, whitespace collapsed: the code, wherever it moves. A `.keras`
        archive (binary) or a file gone since is keyed by the finding's message instead."""
        if finding.path not in self._lines:
            self._lines[finding.path] = _read_lines(finding.path)
        lines = self._lines[finding.path]
        start, _, end, _ = finding.stored_region()
        if not lines or not 0 < start <= len(lines):
            return finding.message
        return " ".join(" ".join(lines[start - 1:max(end, start)]).split())


def _read_lines(path: str) -> List[str]:
    if path.lower().endswith(".keras") or path == "-":
        return []
    try:
        return read_regular(path, SOURCE_LIMIT).decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def _keys(findings: Sequence[Finding], folder: str) -> List[Key]:
    sources = _Sources()
    return [(f.code, os.path.relpath(os.path.abspath(f.path), folder).replace(os.sep, "/"), sources.text(f))
            for f in findings]


def write(path: str, findings: Sequence[Finding]) -> int:
    """Record `findings` in the baseline file `path` (sorted, so that it diffs well); their number."""
    counts = Counter(_keys(findings, _folder(path)))
    entries = [{"code": code, "path": where, "text": text, "count": n}
               for (code, where, text), n in sorted(counts.items(), key=lambda item: (item[0][1], item[0]))]
    document = {"format": FORMAT, "version": VERSION, "findings": entries}
    try:
        write_atomically(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    except OSError as err:
        raise ConfigError(f"cannot write the baseline {path}: {err.strerror or err}") from None
    return len(findings)


def without_baselined(path: str, findings: Sequence[Finding]) -> Tuple[List[Finding], int]:
    """The findings the baseline `path` does not hold, and how many it held."""
    remaining = _load(path)
    new: List[Finding] = []
    for finding, key in zip(findings, _keys(findings, _folder(path))):
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            new.append(finding)
    return new, len(findings) - len(new)


def _load(path: str) -> Counter:
    try:
        document = json.loads(read_regular(path, SOURCE_LIMIT).decode("utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read the baseline {path}: {err.strerror or err}") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not a cliplint baseline (invalid JSON: {err})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT or document.get("version") != VERSION:
        raise ConfigError(f"{path}: not a cliplint baseline of version {VERSION} (write one with --write-baseline)")
    counts: Counter = Counter()
    for entry in document.get("findings", []):
        try:
            counts[(entry["code"], entry["path"], entry["text"])] += int(entry["count"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{path}: a baseline entry needs code, path, text and count: {entry!r}") from None
    return counts


def _folder(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))
