"""Suppressions: `# noqa[: CODES]` on a line, `# cliplint: noqa[: CODES]` for a whole file.

Python sources are tokenized, so a `# noqa` inside a string does not count; YAML and TOML are
read line by line (a `#` starts a comment there too).
"""
from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, Optional, Set, Tuple

NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(
    r"^\s*#\s*cliplint:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?\s*$", re.IGNORECASE)
_NOQA_WORD = re.compile("noqa", re.IGNORECASE)
ALL = None  # a suppression without codes


def _codes(text: Optional[str]) -> Optional[Set[str]]:
    return None if not text else {c.upper() for c in re.split(r"[,\s]+", text.strip()) if c}


def noqa_comments(source: str) -> Dict[int, Optional[Set[str]]]:
    """Line -> suppressed codes (None = all) for each `# noqa` comment."""
    found: Dict[int, Optional[Set[str]]] = {}
    if not _NOQA_WORD.search(source):
        return found  # most files: no need to tokenize
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source, newline=None).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        tokens = []
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            match = NOQA.search(tok.string)
            if match:
                found[tok.start[0]] = _codes(match.group("codes"))
    return found


def noqa_lines(text: str) -> Dict[int, Optional[Set[str]]]:
    """The same, for YAML and TOML: a `#` starts a comment there too, line by line."""
    found: Dict[int, Optional[Set[str]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = NOQA.search(line)
        if match:
            found[number] = _codes(match.group("codes"))
    return found


def file_noqa(source: str) -> Tuple[bool, Optional[Set[str]]]:
    """(present, codes) for a file-level `# cliplint: noqa[: CODES]` on a line of its own."""
    if "cliplint" not in source:
        return False, None
    for line in source.splitlines():
        match = _FILE_NOQA.match(line)
        if match:
            return True, _codes(match.group("codes"))
    return False, None


def suppressed(code: str, lines: range, noqa: Dict[int, Optional[Set[str]]]) -> bool:
    for line in lines:
        codes = noqa.get(line, set())
        if codes is ALL or code in codes:
            return True
    return False
