"""Which files a run lints: paths given, folders walked, excludes, .gitignore, config globs."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from .files import read_regular
from .globs import glob_to_regex
from .settings import CONFIG_SUFFIXES, PYTHON_SUFFIXES, Settings

IGNORE_LIMIT = 1024 * 1024  # a bigger .gitignore is not read (a link to /dev/zero never ends)


class GitIgnore:
    """The .gitignore files that apply below a folder (nested files included), gitignore rules."""

    def __init__(self, rules: Tuple = ()) -> None:
        self.rules = rules  # (base folder, regex, negated, directories only, anchored)

    @staticmethod
    def for_root(root: str) -> "GitIgnore":
        """Start with the .gitignore files of the folders above `root`, up to the repository top."""
        chain, directory = [], os.path.abspath(root)
        while True:
            chain.append(directory)
            if os.path.exists(os.path.join(directory, ".git")):
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                chain = [os.path.abspath(root)]
                break
            directory = parent
        ignore = GitIgnore()
        for directory in reversed(chain[1:]):
            ignore = ignore.entering(directory)
        return ignore

    def entering(self, directory: str) -> "GitIgnore":
        try:
            lines = read_regular(os.path.join(directory, ".gitignore"), IGNORE_LIMIT).decode(
                "utf-8", errors="replace").splitlines()
        except OSError:
            return self
        rules = list(self.rules)
        for line in lines:
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            line = line[1:] if negated else line
            dir_only = line.endswith("/")
            line = line.strip("/") if dir_only else line
            anchored = "/" in line.lstrip("/") or line.startswith("/")
            rules.append((directory, glob_to_regex(line.lstrip("/")), negated, dir_only, anchored))
        return GitIgnore(tuple(rules))

    def in_folder(self, folder: str) -> "FolderRules":
        """The rules that can match an entry of `folder` (absolute, normalised), each with the
        folder's path relative to the rule's base, so that an entry's path is a concatenation:
        the `relpath` gitignore matching needs, computed once per folder instead of per entry."""
        prepared = []
        for base, regex, negated, dir_only, anchored in self.rules:
            relative = os.path.relpath(folder, base).replace(os.sep, "/")
            if not relative.startswith(".."):  # always so: a rule's base is the folder or above it
                prepared.append(("" if relative == "." else relative + "/", regex, negated, dir_only, anchored))
        return FolderRules(tuple(prepared))


class FolderRules:
    """`GitIgnore.in_folder`: the rules for one folder's entries, matched by name."""

    def __init__(self, rules: Tuple) -> None:
        self.rules = rules  # (the folder relative to the rule's base + "/", regex, negated, dir only, anchored)

    def ignored(self, name: str, is_dir: bool) -> bool:
        result = False
        for prefix, regex, negated, dir_only, anchored in self.rules:
            if dir_only and not is_dir:
                continue
            if regex.match(prefix + name if anchored else name):
                result = not negated
        return result


@dataclass
class Target:
    path: str
    display: str
    settings: Settings
    kind: str  # file | missing | broken symlink | unreadable folder: ...
    cache: Optional[str] = None  # the cache folder, when caching
    absolute: str = ""  # os.path.abspath(path), when discovery computed it


def display_of(path: str, absolute: Optional[str] = None, cwd: Optional[str] = None) -> str:
    """How a report names `path`: relative to the current folder when inside it. `absolute`
    and `cwd`, when the caller has them (a folder walk): no abspath or getcwd per file."""
    absolute = os.path.abspath(path) if absolute is None else absolute
    cwd = os.getcwd() if cwd is None else cwd
    if absolute == cwd:
        return "."
    if absolute.startswith(cwd.rstrip(os.sep) + os.sep):  # both normalised: a slice is relpath
        return absolute[len(cwd.rstrip(os.sep)) + 1:].replace(os.sep, "/")
    return path


def discover(paths: Sequence[str], config) -> Iterator[Target]:
    """Files to lint: explicit files always (unless --force-exclude excludes them), folders walked."""
    for given in paths:
        # A folder's own pyproject.toml configures it (`cliplint src/` with src/pyproject.toml).
        settings = config.for_path(os.path.join(given, "_") if os.path.isdir(given) else given)
        if not os.path.lexists(given):
            yield Target(given, display_of(given), settings, "missing")
        elif os.path.isdir(given):
            if settings.force_exclude and settings.excluded(given) and given not in (".", "./"):
                continue
            yield from _walk(given, config, GitIgnore.for_root(given), given)
        elif force_excluded(given, settings):
            continue
        else:
            yield Target(given, display_of(given), settings, "file")


def lintable(path: str) -> bool:
    """Is a file named on the command line of a kind cliplint lints: Python, a notebook, a
    training config, or a script without a suffix whose first line runs Python? (`git diff
    --name-only | xargs cliplint` names README.md and requirements.txt too.)"""
    name = os.path.basename(path).lower()
    if name.endswith(PYTHON_SUFFIXES + CONFIG_SUFFIXES):
        return True
    if "." in name.lstrip("."):
        return False
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return True  # linted, which reports why it cannot be read
    return first.startswith(b"#!") and b"python" in first


def force_excluded(path: str, settings) -> bool:
    """Is a file named on the command line (or by `--stdin-filename`) skipped by `--force-exclude`?
    pre-commit names every staged file: the settings decide, as for a discovered file."""
    return settings.force_exclude and (settings.excluded(path) or (
        path.lower().endswith(CONFIG_SUFFIXES) and not settings.audits(path)))


def _walk(root: str, config, ignore: GitIgnore, top: str) -> Iterator[Target]:
    absolute = os.path.abspath(root)
    settings = config.for_folder(absolute)
    if settings.respect_gitignore:
        ignore = ignore.entering(root)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as err:
        yield Target(root, display_of(root), settings, f"unreadable folder: {err.strerror}")
        return
    folder = absolute.rstrip(os.sep) + os.sep  # an entry's absolute path is `folder + name`
    cwd, fixed = os.getcwd(), settings.fixed_components(top, absolute)
    rules = ignore.in_folder(absolute) if settings.respect_gitignore else None
    for entry in entries:
        path = entry.path
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        relative = settings.entry_relative(folder, entry.name, path)
        if settings.excluded_relative(relative, fixed) or (rules is not None and rules.ignored(entry.name, is_dir)):
            continue
        if is_dir:
            if not os.path.exists(os.path.join(path, "pyvenv.cfg")):  # a virtualenv
                yield from _walk(path, config, ignore, top)
        elif entry.name.endswith(PYTHON_SUFFIXES) or settings.audits(path):
            kind = "file" if not entry.is_symlink() or os.path.exists(path) else "broken symlink"
            # the folder's settings: a file's are its folder's (`Config.for_path`)
            yield Target(path, display_of(path, folder + entry.name, cwd), settings, kind,
                         absolute=folder + entry.name)


def unique(targets: Iterable[Target]) -> List[Target]:
    """Each file once, however many of the given paths reach it."""
    seen, unique = set(), []
    for target in targets:
        key = target.absolute or os.path.abspath(target.path)
        if key not in seen:
            seen.add(key)
            unique.append(target)
    return unique
