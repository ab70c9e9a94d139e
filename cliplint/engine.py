"""Find files -> cheap prefilter -> parse once -> all rules in one pass -> suppressions.

This module finds the files, reads and decodes them, applies the prefilter, the cache and the
suppressions, and runs the files (in parallel when there are many). Parsing and the rules'
single pass live in `analysis.py`, which is imported only when a file needs parsing: a fully
cached run never imports libcst.
"""
from __future__ import annotations

import gc
import io
import os
import re
import tokenize
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from .config import glob_to_regex

if TYPE_CHECKING:  # libcst is imported only when a file is parsed (see analysis.py)
    import libcst

    from .facts import Facts


@dataclass(frozen=True)
class Finding:
    path: str
    line: int  # 1-based
    column: int  # 1-based, in code points
    end_line: int
    end_column: int  # 1-based, exclusive (the column after the last character)
    code: str
    name: str
    severity: str  # "error" | "warning"
    message: str
    probe: Optional[dict] = field(default=None, compare=False, repr=False)
    verification: Optional[dict] = field(default=None, compare=False)
    cell: Optional[int] = None

    def sort_key(self) -> Tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)


@dataclass
class Report:
    """What a rule says about one node; the engine turns it into a Finding."""

    node: "libcst.CSTNode"
    message: str
    severity: Optional[str] = None
    probe: Optional[dict] = None


def bad_input(path: str, reason: str, line: int = 1, column: int = 1, cell: Optional[int] = None) -> Finding:
    """A CL000 finding: the file could not be read, decoded or parsed."""
    return Finding(path, line, column, line, column, "CL000", "unreadable-file", "error", reason, cell=cell)


# --- reading and decoding ---------------------------------------------------------------

def decode_python(path: str, data: bytes) -> Tuple[Optional[str], Optional[Finding]]:
    """Source text honouring PEP 263, or a CL000 finding saying why it cannot be read."""
    if b"\x00" in data:
        return None, bad_input(path, "binary file (contains NUL bytes); not linted")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as err:
        return None, bad_input(path, f"invalid encoding declaration: {err}")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        declared = "declared" if encoding != "utf-8" else "no PEP 263 declaration, so UTF-8"
        return None, bad_input(
            path, f"cannot decode byte 0x{data[err.start]:02x} as {encoding} ({declared}); "
            "add a '# -*- coding: ... -*-' line or re-encode the file", line, column)
    except LookupError:
        return None, bad_input(path, f"unknown encoding {encoding!r} in the coding declaration")
    return text.lstrip("\ufeff"), None


def prefilter(data: bytes, rules: Sequence) -> bool:
    """True when some enabled rule's marker token occurs in the raw bytes."""
    return any(token in data for rule in rules for token in rule.tokens)


# --- suppressions -----------------------------------------------------------------------

_NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
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
            match = _NOQA.search(tok.string)
            if match:
                found[tok.start[0]] = _codes(match.group("codes"))
    return found


def noqa_lines(text: str) -> Dict[int, Optional[Set[str]]]:
    """The same, for YAML and TOML: a `#` starts a comment there too, line by line."""
    found: Dict[int, Optional[Set[str]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _NOQA.search(line)
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
        if line in noqa and (noqa[line] is ALL or code in noqa[line]):
            return True
    return False


# --- running the rules ------------------------------------------------------------------

def lint_bytes(path: str, data: bytes, rules: Sequence, display_path: Optional[str] = None
               ) -> Tuple[List[Finding], bool]:
    shown = display_path or path
    if not prefilter(data, rules):
        # Still report undecodable or binary files: the user asked for them to be linted.
        _, failure = decode_python(shown, data)
        return ([failure] if failure else []), False
    text, failure = decode_python(shown, data)
    if failure:
        return [failure], False
    return lint_text(path, text, rules, shown)


def lint_text(path: str, text: str, rules: Sequence, shown: str) -> Tuple[List[Finding], bool]:
    """Python source (a file, or a notebook's cells as one program): the ast gate, the reduced
    parse, then the rules."""
    facts = facts_of(text)
    rules = gate(facts, rules)
    if not rules:
        return [], False
    lines = None
    if facts is not None:
        words = {token.decode() for rule in rules for token in (*rule.tokens, *rule.context_tokens)}
        text, lines = facts.reduced(text, sorted(words))
    from .analysis import lint_module  # libcst is imported only when a file is parsed

    return lint_module(path, text, rules, shown, lines)


def facts_of(text: str) -> Optional["Facts"]:
    """CPython-ast facts about `text` (None when CPython cannot parse it)."""
    from .facts import Facts

    collecting = gc.isenabled()
    gc.disable()  # an ast is ~10^4 acyclic nodes: the cycle collector would only slow it down
    try:
        return Facts.of(text)
    finally:
        if collecting:
            gc.enable()


def gate(facts: Optional["Facts"], rules: Sequence) -> Sequence:
    """The rules that could fire, judged from the facts (all of them when CPython could not
    parse the text: the CST parser then reports why)."""
    return rules if facts is None else [rule for rule in rules if rule.could_fire(facts)]


# --- finding files ----------------------------------------------------------------------

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".keras")


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
        path = os.path.join(directory, ".gitignore")
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
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

    def ignored(self, path: str, is_dir: bool) -> bool:
        result = False
        for base, regex, negated, dir_only, anchored in self.rules:
            if dir_only and not is_dir:
                continue
            relative = os.path.relpath(path, base).replace(os.sep, "/")
            if relative.startswith(".."):
                continue
            subject = relative if anchored else relative.rsplit("/", 1)[-1]
            if regex.match(subject):
                result = not negated
        return result


@dataclass
class Target:
    path: str
    display: str
    settings: object
    kind: str  # file | missing | broken symlink | unreadable folder: ...
    cache: Optional[str] = None  # the cache folder, when caching


def display_path(path: str) -> str:
    absolute = os.path.abspath(path)
    cwd = os.getcwd()
    if absolute == cwd:
        return "."
    if absolute.startswith(cwd.rstrip(os.sep) + os.sep):  # both normalised: a slice is relpath
        return absolute[len(cwd.rstrip(os.sep)) + 1:].replace(os.sep, "/")
    return path


def discover(paths: Sequence[str], config) -> Iterator[Target]:
    """Files to lint: explicit files always (unless --force-exclude excludes them), folders walked."""
    for given in paths:
        settings = config.for_path(given if os.path.isdir(given) else given)
        if not os.path.lexists(given):
            yield Target(given, display_path(given), settings, "missing")
        elif os.path.isdir(given):
            if settings.force_exclude and settings.excluded(given) and given not in (".", "./"):
                continue
            yield from _walk(given, config, GitIgnore.for_root(given), given)
        elif settings.force_exclude and (settings.excluded(given) or (
                given.lower().endswith(CONFIG_SUFFIXES) and not settings.audits(given))):
            continue  # pre-commit names every staged file: settings decide, as for discovered files
        else:
            yield Target(given, display_path(given), settings, "file")


def _walk(root: str, config, ignore: GitIgnore, top: str) -> Iterator[Target]:
    settings = config.for_path(os.path.join(root, "_"))
    if settings.respect_gitignore:
        ignore = ignore.entering(root)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as err:
        yield Target(root, display_path(root), settings, f"unreadable folder: {err.strerror}")
        return
    for entry in entries:
        path = entry.path
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if settings.excluded(path, below=top) or (settings.respect_gitignore and ignore.ignored(path, is_dir)):
            continue
        if is_dir:
            if not os.path.exists(os.path.join(path, "pyvenv.cfg")):  # a virtualenv
                yield from _walk(path, config, ignore, top)
        elif entry.name.endswith(PYTHON_SUFFIXES) or settings.audits(path):
            kind = "file" if not entry.is_symlink() or os.path.exists(path) else "broken symlink"
            yield Target(path, display_path(path), config.for_path(path), kind)


# --- running ----------------------------------------------------------------------------

@dataclass
class RunResult:
    findings: List[Finding]
    files: int
    crashed: bool


def lint_target(target: Target) -> Tuple[List[Finding], bool]:
    """All findings for one file, as its settings select them."""
    from .rules import ALL_RULES  # rules import the engine, so not at module level

    settings = target.settings
    codes = settings.enabled_codes(target.path)
    rules = [ALL_RULES[c] for c in codes if c in ALL_RULES]
    findings, crashed = _read_and_lint(target, rules, settings, codes)
    return [f for f in findings if f.code in codes], crashed


def _read_and_lint(target: Target, rules, settings, codes) -> Tuple[List[Finding], bool]:
    shown = target.display
    if target.kind == "missing":
        return [bad_input(shown, "no such file or folder")], False
    if target.kind != "file":
        return [bad_input(shown, target.kind)], False
    if target.path.lower().endswith(".keras"):
        return _audit(target.path, target.path, rules, shown)  # read lazily from the archive, any size
    try:
        size = os.path.getsize(target.path)
        if size > settings.max_file_size:
            return [bad_input(shown, f"file is {size:,} bytes, above max-file-size "
                                     f"({settings.max_file_size:,}); not linted")], False
        with open(target.path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        return [bad_input(shown, f"cannot read: {err.strerror or err}")], False
    if target.cache is None:
        return _lint_data(target.path, data, rules, shown)
    from .cache import Cache

    findings, crashed = _lint_data(target.path, data, rules, shown)
    cache = Cache(target.cache)
    cache.put(cache.key(data, shown, codes), findings, crashed)
    return findings, crashed


def _cached(target: Target) -> Optional[Tuple[List[Finding], bool]]:
    """The cached result for a file whose bytes, settings and cliplint have not changed."""
    from .cache import Cache

    if target.kind != "file" or target.path.lower().endswith(".keras"):
        return None
    try:
        with open(target.path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > target.settings.max_file_size:
                return None
            data = handle.read()
    except OSError:
        return None
    codes = target.settings.enabled_codes(target.path)
    cache = Cache(target.cache)
    hit = cache.get(cache.key(data, target.display, codes))
    if hit is None:
        return None
    return [Finding(**record) for record in hit[0] if record["code"] in codes], hit[1]


def _lint_data(path: str, data: bytes, rules, shown: str) -> Tuple[List[Finding], bool]:
    if path.lower().endswith(CONFIG_SUFFIXES):
        return _audit(path, data, rules, shown)
    if path.lower().endswith(".ipynb"):
        from .notebook import lint_notebook

        return lint_notebook(path, data, rules, shown) if prefilter(data, rules) else ([], False)
    return lint_bytes(path, data, rules, shown)


def _audit(path: str, source, rules, shown: str) -> Tuple[List[Finding], bool]:
    from .configs import audit

    try:
        return audit(path, source, frozenset(r.code for r in rules), shown), False
    except Exception as err:  # a bug in the auditor must not stop the run
        return [bad_input(shown, f"internal error in the config auditor: {type(err).__name__}: {err}")], True


def run(paths: Sequence[str], config, jobs: int = 1, cache: Optional[str] = None) -> RunResult:
    targets = _unique(discover(paths, config))
    results: List = [None] * len(targets)
    misses = []
    for index, target in enumerate(targets):
        target.cache = cache
        hit = _cached(target) if cache is not None else None
        if hit is None:
            misses.append(index)
        results[index] = hit
    for index, result in zip(misses, _map(lint_target, [targets[i] for i in misses], jobs)):
        results[index] = result
    findings = [f for found, _ in results for f in found]
    findings.sort(key=Finding.sort_key)
    return RunResult(findings, len(targets), any(crashed for _, crashed in results))


def _unique(targets: Iterable[Target]) -> List[Target]:
    """Each file once, however many of the given paths reach it."""
    seen, unique = set(), []
    for target in targets:
        key = os.path.abspath(target.path)
        if key not in seen:
            seen.add(key)
            unique.append(target)
    return unique


def _map(function, targets: List[Target], jobs: int) -> List:
    # A pool costs ~0.1 s to start: only worth it for many files.
    if jobs <= 1 or len(targets) < 2 * PARALLEL_MIN_FILES:
        return [function(t) for t in targets]
    from concurrent.futures import ProcessPoolExecutor

    chunk = max(1, len(targets) // (jobs * 8))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(function, targets, chunksize=chunk))


PARALLEL_MIN_FILES = 16


def lint_stdin(data: bytes, filename: str, config) -> Tuple[List[Finding], bool]:
    """Standard input, reported (and configured) as `filename`."""
    settings = config.for_path(filename)
    if settings.force_exclude and settings.excluded(filename):
        return [], False
    target = Target(filename, display_path(filename) if filename != "-" else "-", settings, "file")
    from .rules import ALL_RULES

    codes = settings.enabled_codes(filename)
    findings, crashed = lint_bytes(filename, data, [ALL_RULES[c] for c in codes if c in ALL_RULES], target.display)
    return [f for f in findings if f.code in codes], crashed


def write_atomically(path: str, text: str) -> None:
    """Write via a temporary file in the same folder and rename: never a half-written file."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".cliplint-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
