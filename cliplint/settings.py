"""`[tool.cliplint]` in pyproject.toml: select, ignore, per-file-ignores, exclude.

Discovery is ruff's: each file uses the closest `pyproject.toml` that has a `[tool.cliplint]`
table, walking up from the file. Settings are not merged across files; command-line flags
override every file, and rule selection follows ruff's precedence (`selected_codes`).
`--config FILE` uses one file for all, `--isolated` none.
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from . import catalogue
from .files import read_regular
from .findings import UNREADABLE, Finding, bad_input
from .globs import matcher, path_matches

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".keras")
# ruff's documented list of commonly ignored folders, then cliplint's own cache and __pycache__.
DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache", ".nox",
    ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", ".vscode",
    "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
    "__pycache__", ".cliplint_cache",
)
KEYS = {"select", "extend-select", "ignore", "per-file-ignores", "exclude", "extend-exclude",
        "force-exclude", "respect-gitignore", "max-file-size", "config-files", "fix", "unsafe-fixes",
        "severity", "fail-on", "verify-timeout", "verify-budget", "jobs", "cache-dir", "src"}
SEVERITIES = ("error", "warning")
# The settings of a whole run, not of a file: taken from the settings of the first path named
# (the current folder's by default), and a flag given on the command line wins.
LIMIT_DEFAULTS = {"verify_timeout": 30.0, "verify_budget": 600.0}  # settings may only lower these
RUN_DEFAULTS = {"fail_on": "warning", **LIMIT_DEFAULTS, "jobs": 0, "cache_dir": ".cliplint_cache"}
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024
DEFAULT_CONFIG_FILES = tuple("*" + suffix for suffix in CONFIG_SUFFIXES)
# Files that cannot hold optimizer settings: never audited unless named on the command line.
CONFIG_SKIP = (
    ".github/", ".gitlab/", ".gitlab-ci.yml", ".circleci/", ".devcontainer/", ".vscode/", ".idea/",
    "*lock*", "package.json", "tsconfig*.json", "jsconfig*.json", ".eslintrc*", ".prettierrc*", "renovate.json",
    ".pre-commit-config.yaml", ".pre-commit-hooks.yaml", "pyproject.toml", "Cargo.toml", "poetry.toml",
    "environment.yml", "environment.yaml", "docker-compose*.y*ml", "compose.y*ml", "mkdocs.yml",
    ".readthedocs.y*ml", "codecov.y*ml", ".codecov.y*ml", "*.schema.json", ".markdownlint*", "dependabot.yml",
    "cliplint-baseline.json",
)


class ConfigError(Exception):
    """A configuration or usage mistake: reported in one line, exit code 2."""


def resolve_codes(selectors: Iterable[str], where: str) -> FrozenSet[str]:
    """Codes, prefixes (`CL00`), names (`log-of-softmax`) and `ALL` to a set of codes."""
    codes: Set[str] = set()
    for selector in selectors:
        if not isinstance(selector, str):
            raise ConfigError(f"{where}: expected rule codes as strings, got {selector!r}")
        resolved = _selector(selector.strip())
        if resolved is None:
            known = ", ".join(catalogue.codes())
            raise ConfigError(f"{where}: unknown rule selector {selector!r} (known: {known})")
        codes.update(resolved[1])
    return frozenset(codes)


@lru_cache(maxsize=256)
def _selector(token: str) -> Optional[Tuple[int, FrozenSet[str]]]:
    """(specificity, codes) of one selector, or None when it selects nothing known. Specificity
    is ruff's: `ALL` 0, a prefix its length, a code or a name a whole code's length."""
    all_codes, names = tuple(catalogue.codes()), catalogue.names()
    if token.upper() == "ALL":
        return 0, frozenset(all_codes)
    if token.lower() in names:
        code = names[token.lower()]
        return len(code), frozenset((code,))
    if re.fullmatch(r"[A-Za-z]+\d*", token):
        matched = frozenset(c for c in all_codes if c.startswith(token.upper()))
        return (len(token), matched) if matched else None
    return None


@dataclass(frozen=True)
class Selection:
    """One layer of rule selection: a configuration file's, or the command line's. Selectors
    are kept as written (validated), because their specificity decides conflicts."""

    select: Optional[Tuple[str, ...]] = None
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()

    @staticmethod
    def of(select: Optional[Sequence[str]], extend_select: Sequence[str], ignore: Sequence[str],
           name: Callable[[str], str]) -> "Selection":
        """A validated layer; `name(key)` says where a key comes from in an error message."""
        for key, selectors in (("select", select or ()), ("extend-select", extend_select), ("ignore", ignore)):
            resolve_codes(selectors, name(key))
        return Selection(None if select is None else _stripped(select), _stripped(extend_select), _stripped(ignore))

    def named_codes(self) -> FrozenSet[str]:
        """The rules `select` and `extend-select` name one by one (by code or name, not by prefix)."""
        selectors = (*(self.select or ()), *self.extend_select)
        return frozenset(code for specificity, codes in map(_known, selectors) if len(codes) == 1
                         for code in codes if specificity == len(code))


def _known(token: str) -> Tuple[int, FrozenSet[str]]:
    """`_selector` of a selector `Selection.of` has validated."""
    found = _selector(token)
    if found is None:
        raise ConfigError(f"unknown rule selector {token!r}")
    return found


def _stripped(selectors: Sequence[str]) -> Tuple[str, ...]:
    return tuple(selector.strip() for selector in selectors)


@lru_cache(maxsize=64)
def selected_codes(selections: Tuple[Selection, ...]) -> FrozenSet[str]:
    """The codes enabled before per-file-ignores, by ruff's precedence: a layer with `select`
    replaces everything before it, a layer without one adjusts it; inside a layer the more
    specific selector wins and, at equal specificity, `ignore` wins. A layer that is only
    `select = []` plus `ignore` hands its ignores on to the next layer."""
    enabled = frozenset(catalogue.codes())  # the default: every rule
    carried: Tuple[str, ...] = ()
    for layer in selections:
        chosen = [(s, True) for s in (*(layer.select or ()), *layer.extend_select)]
        chosen += [(s, False) for s in (*layer.ignore, *carried)]
        updates: Dict[str, bool] = {}  # least specific first; at equal specificity, ignores last
        for selector, on in sorted(chosen, key=lambda pair: (_known(pair[0])[0], pair[1] is False)):
            updates.update(dict.fromkeys(_known(selector)[1], on))
        turned_on = frozenset(code for code, on in updates.items() if on)
        carried = ()
        if layer.select is not None:
            enabled = turned_on
            if not layer.select and not layer.extend_select and layer.ignore:
                carried = layer.ignore
        else:
            enabled = (enabled | turned_on) - (set(updates) - turned_on)
    return enabled | _unreadable_kept(selections)


def _unreadable_kept(selections: Tuple[Selection, ...]) -> FrozenSet[str]:
    """CL000 stays on whatever `select` says (a file that cannot be parsed is always reported,
    as ruff reports syntax errors): only an `ignore` naming it, by code or name, turns it off."""
    named = any(_selector(s) == (len(UNREADABLE.code), frozenset((UNREADABLE.code,)))
                for layer in selections for s in layer.ignore)
    return frozenset() if named else frozenset((UNREADABLE.code,))


@dataclass(frozen=True)
class Settings:
    root: str  # the folder patterns are relative to
    source: Optional[str] = None  # the pyproject.toml these came from
    selections: Tuple[Selection, ...] = ()  # the configuration file's, then the command line's
    per_file_ignores: Tuple[Tuple[str, FrozenSet[str]], ...] = ()
    exclude: Tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: Tuple[str, ...] = ()
    force_exclude: bool = False
    respect_gitignore: bool = True
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    config_files: Tuple[str, ...] = DEFAULT_CONFIG_FILES
    fix: bool = False  # `fix = true`: apply safe fixes as if `--fix` were given
    unsafe_fixes: bool = False  # `unsafe-fixes = true`: unsafe fixes too
    severity: Tuple[Tuple[str, str], ...] = ()  # (code, "error" | "warning"): a rule's severity changed
    run: Tuple[Tuple[str, object], ...] = ()  # the run-wide keys set here (RUN_DEFAULTS' names)
    src: Tuple[str, ...] = ()  # `src = [...]`: more source roots for the project's imports (absolute)

    def severity_of(self, code: str, default: str) -> str:
        return dict(self.severity).get(code, default)

    def run_setting(self, name: str):
        """A run-wide setting: this file's value, else cliplint's default."""
        return dict(self.run).get(name, RUN_DEFAULTS[name])

    def relative(self, path: str) -> str:
        """`path` relative to the folder of the settings' file, with forward slashes."""
        absolute = path if os.path.isabs(path) and ".." not in path else os.path.abspath(path)
        prefix = self.root.rstrip(os.sep) + os.sep
        if absolute.startswith(prefix):  # the usual case: a plain slice, no relpath
            return absolute[len(prefix):].replace(os.sep, "/")
        return os.path.relpath(absolute, self.root).replace(os.sep, "/")

    def too_large(self, display: str, size: int, unit: str = "bytes") -> Optional[Finding]:
        """CL000 for a file of `size` `unit` above max-file-size; None within it."""
        if size <= self.max_file_size:
            return None
        return bad_input(display, f"file is {size:,} {unit}, above max-file-size ({self.max_file_size:,}); not linted")

    def enabled_codes(self, path: str) -> FrozenSet[str]:
        codes = selected_codes(self.selections)
        if not self.per_file_ignores:
            return codes
        relative = self.relative(path)
        for pattern, ignored in self.per_file_ignores:
            negated = pattern.startswith("!")
            if path_matches(pattern[1:] if negated else pattern, relative) != negated:
                codes -= ignored
        return codes

    def excluded(self, path: str, below: Optional[str] = None) -> bool:
        """Is `path` excluded? With `below`, only the components under that folder (one the
        user named explicitly) can match."""
        return self.excluded_relative(self.relative_or_absolute(path), self.fixed_components(below, path))

    def excluded_relative(self, relative: str, fixed: int = 0) -> bool:
        """`excluded` of a path given as `relative_or_absolute` says it, its first `fixed`
        components never matched (a folder walk computes both once per folder)."""
        return matcher(tuple(self.exclude) + tuple(self.extend_exclude))(relative, fixed)

    def fixed_components(self, below: Optional[str], within: str) -> int:
        """How many leading components of the `relative_or_absolute` path of `within` (a path under
        the folder `below`, or `below` itself) that folder takes (0: no folder given)."""
        if below is None:
            return 0
        start = self.relative_or_absolute(below)
        path = self.relative_or_absolute(within)
        # A walk started above the settings' folder (a nested pyproject.toml, or `..` without
        # one): `within` is relative to the settings' folder, so no component of it is the start's.
        if start in ("", ".") or (path != start and not path.startswith(start + "/")):
            return 0
        return len(start.split("/"))

    def relative_or_absolute(self, path: str) -> str:
        """`relative`, or the absolute path without its leading slash when `path` is outside the
        settings' folder: what exclude and config-skip patterns are matched against."""
        relative = self.relative(path)
        if relative.startswith(".."):
            relative = os.path.abspath(path).replace(os.sep, "/").lstrip("/")
        return relative

    def entry_relative(self, folder: str, name: str, path: str) -> str:
        """`relative_or_absolute(path)` of the entry `name` of `folder` (absolute, normalised, ending
        in a separator), a slice and a concatenation in the usual case: `folder` inside the
        settings' folder (a walk asks this for every entry of every folder)."""
        prefix = self.root.rstrip(os.sep) + os.sep
        if folder.startswith(prefix):
            relative = folder[len(prefix):].replace(os.sep, "/") + name
            if not relative.startswith(".."):
                return relative
        return self.relative_or_absolute(path)

    def audits(self, path: str) -> bool:
        """Is this (discovered) file a training config the auditor should read?"""
        name = os.path.basename(path)
        relative = self.relative_or_absolute(path)
        return any(fnmatch.fnmatch(name, glob) for glob in self.config_files) \
            and not any(path_matches(pattern, relative) for pattern in CONFIG_SKIP)

    def fingerprint(self) -> str:
        """What in these settings can change a file's findings (for the cache key)."""
        return repr((sorted(selected_codes(self.selections)), self.per_file_ignores, self.max_file_size))


def _table(path: str) -> Optional[dict]:
    try:  # imported only when a pyproject.toml is read: most folders a run walks have none
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore
    try:
        data = tomllib.loads(read_regular(path, DEFAULT_MAX_FILE_SIZE).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    tool = data.get("tool")
    table = tool.get("cliplint") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.cliplint] must be a table")
    return table


def _strings(value, key: str, where: str) -> Tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings, got {value!r}")
    return tuple(value)


def settings_from_table(table: dict, root: str, source: str) -> Settings:
    where = f"{source} [tool.cliplint]"
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KEYS))})")
    settings = Settings(root=root, source=source)
    if {"select", "extend-select", "ignore"} & set(table):
        settings = replace(settings, selections=(Selection.of(
            _strings(table["select"], "select", where) if "select" in table else None,
            _strings(table.get("extend-select", []), "extend-select", where),
            _strings(table.get("ignore", []), "ignore", where), lambda key: f"{where}: `{key}`"),))
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError(f"{where}: `per-file-ignores` must be a table of glob = [codes]")
        settings = replace(settings, per_file_ignores=tuple(
            (pattern, resolve_codes(_strings(codes, f"per-file-ignores.{pattern}", where), where))
            for pattern, codes in pfi.items()))
    if "exclude" in table:
        settings = replace(settings, exclude=_strings(table["exclude"], "exclude", where))
    if "extend-exclude" in table:
        settings = replace(settings, extend_exclude=_strings(table["extend-exclude"], "extend-exclude", where))
    if "config-files" in table:
        settings = replace(settings, config_files=_strings(table["config-files"], "config-files", where))
    for key in ("force-exclude", "respect-gitignore", "fix", "unsafe-fixes"):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{where}: `{key}` must be true or false, got {table[key]!r}")
            settings = replace(settings, **{key.replace("-", "_"): table[key]})
    if "max-file-size" in table:
        size = table["max-file-size"]
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ConfigError(f"{where}: `max-file-size` must be a positive number of bytes, got {size!r}")
        settings = replace(settings, max_file_size=size)
    if "severity" in table:
        settings = replace(settings, severity=_severities(table["severity"], where))
    if "src" in table:  # as ruff's `src`: folders, relative to the configuration file's
        settings = replace(settings, src=tuple(os.path.normpath(os.path.join(root, folder))
                                               for folder in _strings(table["src"], "src", where)))
    run = tuple((key.replace("-", "_"), _run_value(key, table[key], root, where))
                for key in ("fail-on", "verify-timeout", "verify-budget", "jobs", "cache-dir") if key in table)
    return replace(settings, run=run)


def _inside(root: str, value: str, where: str) -> str:
    """`cache-dir` relative to the pyproject.toml's folder, as ruff's, and inside it (links
    resolved): a checkout's settings must not make a run write elsewhere; `--cache-dir` and
    $CLIPLINT_CACHE_DIR, which the user sets, may name any folder."""
    folder = os.path.join(root, value)
    real_root = os.path.realpath(root)
    if os.path.isabs(value) or os.path.commonpath([real_root, os.path.realpath(folder)]) != real_root:
        raise ConfigError(f"{where}: `cache-dir` must be a folder inside {root}, got {value!r} (a folder "
                          "elsewhere: --cache-dir or $CLIPLINT_CACHE_DIR)")
    return folder


def _severities(table, where: str) -> Tuple[Tuple[str, str], ...]:
    """`[tool.cliplint.severity]`: rule selector -> "error" | "warning"; a more specific selector
    wins over a prefix (`CL = "warning"`, `CL004 = "error"`), as in rule selection."""
    if not isinstance(table, dict):
        raise ConfigError(f'{where}: `severity` must be a table of rule = "error" | "warning"')
    levels: Dict[str, str] = {}
    for selector, level in sorted(table.items(), key=lambda item: (_selector(item[0].strip()) or (0,))[0]):
        if level not in SEVERITIES:
            raise ConfigError(f'{where}: `severity.{selector}` must be "error" or "warning", got {level!r}')
        levels.update({code: str(level) for code in resolve_codes([selector], f"{where}: `severity`")})
    return tuple(sorted(levels.items()))


def _run_value(key: str, value, root: str, where: str):
    """A run-wide key's value, checked as its flag checks it."""
    if key == "fail-on" and value in SEVERITIES:
        return value
    if key in ("verify-timeout", "verify-budget") and isinstance(value, (int, float)) \
            and not isinstance(value, bool) and 0 < value < float("inf"):
        default = LIMIT_DEFAULTS[key.replace("-", "_")]
        if value > default:  # the checkout's own code runs under these limits: it may only shorten them
            raise ConfigError(f"{where}: `{key}` may be at most its default ({default:g} s) in settings, got "
                              f"{value!r}; pass --{key} to allow more")
        return float(value)
    if key == "jobs" and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if key == "cache-dir" and isinstance(value, str) and value:
        return _inside(root, value, where)
    expected = {"fail-on": '"error" or "warning"', "verify-timeout": "a number of seconds above 0",
                "verify-budget": "a number of seconds above 0", "jobs": "a whole number, 0 or more",
                "cache-dir": "a folder path"}[key]
    raise ConfigError(f"{where}: `{key}` must be {expected}, got {value!r}")


@dataclass
class Overrides:
    """Command-line flags; each one that is set wins over every config file."""

    select: Optional[Sequence[str]] = None
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    exclude: Optional[Sequence[str]] = None
    extend_exclude: Sequence[str] = ()
    force_exclude: Optional[bool] = None
    fix: Optional[bool] = None
    unsafe_fixes: Optional[bool] = None

    def selection(self) -> Optional[Selection]:
        """The command line's layer of rule selection (None when no flag selects rules)."""
        if self.select is None and not self.extend_select and not self.ignore:
            return None
        return Selection.of(self.select, self.extend_select, self.ignore, lambda key: f"--{key}")

    def apply(self, settings: Settings) -> Settings:
        layer = self.selection()
        if layer is not None:
            settings = replace(settings, selections=settings.selections + (layer,))
        if self.exclude is not None:
            settings = replace(settings, exclude=tuple(self.exclude))
        if self.extend_exclude:
            settings = replace(settings, extend_exclude=settings.extend_exclude + tuple(self.extend_exclude))
        for flag in ("force_exclude", "fix", "unsafe_fixes"):
            if getattr(self, flag) is not None:
                settings = replace(settings, **{flag: getattr(self, flag)})
        return settings


@dataclass
class Config:
    """Settings for every path of a run."""

    overrides: Overrides = field(default_factory=Overrides)
    config_file: Optional[str] = None  # --config
    isolated: bool = False  # --isolated
    _by_dir: Dict[str, Settings] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._fixed: Optional[Settings]  # the one Settings of --config or --isolated
        self.overrides.apply(Settings(root=os.getcwd()))  # validate flags early
        if self.config_file is not None:
            table = _table(self.config_file)
            if table is None:
                raise ConfigError(f"{self.config_file}: no [tool.cliplint] table")
            self._fixed = self.overrides.apply(settings_from_table(table, os.getcwd(), self.config_file))
        elif self.isolated:
            self._fixed = self.overrides.apply(Settings(root=os.getcwd()))
        else:
            self._fixed = None

    def for_path(self, path: str) -> Settings:
        if self._fixed is not None:
            return self._fixed
        return self._for_dir(os.path.dirname(os.path.abspath(path)))

    def for_folder(self, folder: str) -> Settings:
        """The settings of the files in `folder` (absolute and normalised): `for_path` of any of them."""
        return self._fixed if self._fixed is not None else self._for_dir(folder)

    def _for_dir(self, directory: str) -> Settings:
        cached = self._by_dir.get(directory)
        if cached is not None:
            return cached
        candidate = os.path.join(directory, "pyproject.toml")
        table = _table(candidate) if os.path.isfile(candidate) else None
        parent = os.path.dirname(directory)
        if table is not None:
            settings = self.overrides.apply(settings_from_table(table, directory, candidate))
        elif parent != directory:
            settings = self._for_dir(parent)
        else:
            settings = self.overrides.apply(Settings(root=os.getcwd()))
        self._by_dir[directory] = settings
        return settings

    def warnings(self) -> List[str]:
        """What the settings used so far do that the user may not expect: select no rule at all,
        or turn off a rule the command line names."""
        used = {id(s): s for s in (*self._by_dir.values(), self._fixed) if s is not None}
        layer = self.overrides.selection()
        named = layer.named_codes() & selected_codes((layer,)) if layer is not None else frozenset()
        found: List[str] = []
        for settings in used.values():
            where = _shown(settings.source) if settings.source else None
            enabled = selected_codes(settings.selections)
            if not enabled - {UNREADABLE.code}:
                origin = " and ".join(filter(None, (where, "the command line" if layer is not None else None)))
                found.append(f"no rule is enabled by {origin}: nothing is reported for the files it configures")
            found.extend(f"{code} is selected on the command line but the `ignore` of {where} removes it: a "
                         "configuration with `select = []` and `ignore` carries its ignores over to the command line"
                         for code in sorted(named - enabled))
            for pattern, ignored in settings.per_file_ignores:
                found.extend(f"{code} is selected on the command line but `per-file-ignores` \"{pattern}\" in "
                             f"{where} turns it off for the files that pattern matches"
                             for code in sorted(named & ignored))
        return list(dict.fromkeys(found))


def _shown(path: str) -> str:
    """A configuration file's path as a message names it: relative to the current folder when inside it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
