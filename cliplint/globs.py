"""Gitignore-style globs, as exclude, per-file-ignores, config-files and .gitignore write them."""
from __future__ import annotations

import fnmatch
import re
from functools import lru_cache
from typing import Callable, Tuple


def glob_to_regex(pattern: str) -> re.Pattern:
    """A gitignore-style glob: `**` crosses directories, `*` and `?` do not."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i)
            if end == -1:
                out.append(re.escape(pattern[i]))
                i += 1
            else:
                out.append(fnmatch.translate(pattern[i:end + 1])[4:-3])
                i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def path_matches(pattern: str, relative: str, fixed: int = 0) -> bool:
    """Does a path (posix, relative to the config's folder) match an exclude/ignore pattern?

    A pattern without a slash matches any path component (`venv`, `*.pyi`); one with a slash
    matches the path or one of the folders above it (`fixtures/`, `tests/**`). The first
    `fixed` components were named on the command line and are never matched.
    """
    pattern = pattern.replace("\\", "/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    pattern = pattern.rstrip("/")
    regex = _compiled(pattern)
    parts = relative.split("/")
    if "/" not in pattern:
        return any(regex.match(part) for part in parts[fixed:])
    return any(regex.match("/".join(parts[:i])) for i in range(max(fixed, 0) + 1, len(parts) + 1))


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern:
    return glob_to_regex(pattern)


@lru_cache(maxsize=64)
def matcher(patterns: Tuple[str, ...]) -> Callable[..., bool]:
    """`path_matches` for a whole list of patterns at once: one regex for the patterns that
    match a single component, and the few with a slash tried one by one."""
    cleaned = [p.replace("\\", "/")[2:] if p.startswith("./") else p.replace("\\", "/") for p in patterns]
    cleaned = [p.rstrip("/") for p in cleaned]
    component = [_compiled(p).pattern for p in cleaned if "/" not in p]
    one = re.compile("|".join(f"(?:{c})" for c in component)) if component else None
    with_slash = [p for p in cleaned if "/" in p]

    def matches(relative: str, fixed: int = 0) -> bool:
        parts = relative.split("/")
        if one is not None and any(one.match(part) for part in parts[fixed:]):
            return True
        return any(path_matches(p, relative, fixed) for p in with_slash)

    return matches
