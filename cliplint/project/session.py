"""A run's summaries, and what linting one file reads of them.

`Project` keeps the summaries of a run (in memory, and in the cache folder's `summaries`
store, keyed by the module's path, roots and content hash: an unchanged module is never read
with `ast` again). `Project.reading(src)` makes the summaries the current file imports
available to the linter (`lint.lint_text` asks `CURRENT`) and records each one it read, by
its hash: a file's cached findings are valid while those hashes are.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from ..cache import code_fingerprint, open_store, stat_key
from ..files import decode_python, read_regular
from ..settings import DEFAULT_MAX_FILE_SIZE
from .importers import Importers
from .lookup import Lookup, Table
from .resolve import import_map
from .roots import project_root, source_roots
from .summary import chains, summarise, top_names

if TYPE_CHECKING:  # CPython's ast facts: imported only when a gate is widened
    from ..facts import Facts

# How far a file's imports are followed: the modules whose code one file is linked with (those
# defining what it uses), and the hops from a definition to what it uses in turn. A training
# script uses a handful of its project's definitions; keras/src's files use dozens.
MAX_MODULES = 16
MAX_HOPS = 3

Reads = Dict[str, str]  # module file -> the hash of the summary read


class Project:
    """The summaries of one run. `buffers(path)`: an editor's unsaved text of a file, which
    takes precedence over the disk."""

    def __init__(self, cache: Optional[str] = None, buffers: Optional[Callable[[str], Optional[str]]] = None) -> None:
        self.cache = cache
        self.buffers = buffers
        self.importers = Importers(fresh=buffers is not None)
        self._memo: Dict[Tuple[str, Tuple[str, ...]], Tuple[object, Optional[dict]]] = {}

    def __getstate__(self) -> dict:  # a pool's workers: the folder only (buffers are the editor's)
        return {"cache": self.cache}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["cache"])  # type: ignore[misc]

    def summary(self, ref: str, src: Tuple[str, ...]) -> Optional[dict]:
        """The summary of the module file `ref` (None for a namespace folder or an unreadable file).
        A run's files do not change under it; an editor's do: with `buffers`, each answer is
        checked against the buffer's text or the file's `stat`."""
        key = (ref, src)
        stamp = self._stamp(ref) if self.buffers is not None else None
        known = self._memo.get(key)
        if known is None or known[0] != stamp:
            known = self._memo[key] = (stamp, self._summary(ref, src) if ref.endswith(".py") else None)
        return known[1]

    def _stamp(self, ref: str) -> object:
        text = self.buffers(ref) if self.buffers is not None else None
        return ("buffer", text) if text is not None else ("disk", stat_key(ref))

    def _summary(self, ref: str, src: Tuple[str, ...]) -> Optional[dict]:
        text = self.buffers(ref) if self.buffers is not None else None
        if text is None:
            try:
                text, _ = decode_python(ref, read_regular(ref, DEFAULT_MAX_FILE_SIZE))
            except OSError:
                return None
            if text is None:
                return None
        roots = source_roots(ref, src)
        digest = hashlib.sha256("\0".join(("summary", code_fingerprint(), ref, *roots, text)).encode()).hexdigest()
        store = self._store()
        body = store.read(digest) if store is not None else None
        if body:
            try:
                return json.loads(body)
            except ValueError:
                pass
        try:
            found = summarise(ref, text, roots)
        except (RecursionError, MemoryError):  # nested past what a summary can walk: the module stays opaque
            return None
        if store is not None:
            store.write(digest, json.dumps(found, separators=(",", ":")).encode())
        return found

    def _store(self):
        return open_store(self.cache, "summaries")[0] if self.cache is not None else None

    def unchanged(self, reads: Reads, src: Tuple[str, ...]) -> bool:
        """Do the modules a cached result read (those it imports, those importing it) still
        summarise to what it read? A new importer is a file linted afresh: the engine then
        re-lints what it imports (`engine.run`)."""
        for ref, recorded in reads.items():
            found = self.summary(ref, src)
            if found is None or found["hash"] != recorded:
                return False
        return True

    @contextmanager
    def reading(self, src: Tuple[str, ...] = ()) -> Iterator[Reads]:
        """While linting one file: its imports are followed, and what is read is recorded."""
        reading = Reading(self, tuple(src))
        token = CURRENT.set(reading)
        try:
            yield reading.reads
        finally:
            CURRENT.reset(token)


@dataclass
class Imported:
    """What one file imports from its project: its own import table, the summaries consulted to
    resolve its names (module file -> summary), and the modules whose code it is linked with:
    those defining what it uses, and what their definitions use, `MAX_HOPS` deep."""

    path: str
    table: Table
    summaries: Dict[str, dict]
    linked: Dict[str, List[str]]  # module file -> the definitions of it the file is linked with
    names: Set[str] = field(default_factory=set)  # the file's names bound to the project's modules, or used by them
    home: Optional[Tuple[str, FrozenSet[str]]] = None  # the file and its top-level names (`lookup.Lookup`)
    # the library names its star imports of the project's modules bind: `tf` of `from utils import *`
    star_aliases: Dict[str, str] = field(default_factory=dict)


@dataclass
class Reading:
    project: Project
    src: Tuple[str, ...]
    reads: Reads = field(default_factory=dict)

    def prepare(self, path: str, tree: ast.Module) -> Optional[Imported]:
        """The summaries the module `tree` (at `path`) uses, and those of the modules that import
        it; None when it neither imports the project's modules nor is imported by one."""
        path = os.path.abspath(path)  # as the modules' files are known
        entries, stars = import_map(tree.body, path, source_roots(path, self.src))
        importers = self.importers(path)
        if not entries and not stars and not importers:
            return None
        consulted: Dict[str, dict] = {}
        home = (path, top_names(tree.body))
        lookup = Lookup(lambda ref: self._summary(ref, consulted), home)
        table: Table = (entries, stars)
        used = {c for c in chains(tree) if stars or c.split(".")[0] in entries}
        heads = {head for head in {c.split(".")[0] for c in used} if lookup.chain(table, head) is not None}
        wanted = [(table, c) for c in sorted(used) if c.split(".")[0] in heads]
        callers, names = self._callers(lookup, path, importers)
        wanted += [(lookup.table(ref, consulted[ref]), read) for ref, name in callers
                   for read in consulted[ref]["reads"].get(name, [])]  # what the importers' code uses in turn
        linked: Dict[str, List[str]] = {}
        for ref, name in callers + self._definitions(lookup, wanted, path):
            if ref in linked or len(linked) < MAX_MODULES:
                linked.setdefault(ref, []).append(name)
        for ref, names_of in linked.items():
            linked[ref] = _with_uses(consulted[ref], names_of)
        aliases = {local: full for local, full in self._star_aliases(stars, consulted).items() if local not in home[1]}
        return Imported(path, table, consulted, linked, set(entries) | heads | names, home, aliases)

    def _star_aliases(self, stars: List[str], consulted: Dict[str, dict]) -> Dict[str, str]:
        """What the modules a file star-imports bind by importing libraries, and those they
        star-import in turn (Python re-exports them): the first module binding a name wins."""
        aliases: Dict[str, str] = {}
        pending, seen = list(stars), set[str]()
        while pending and len(seen) < MAX_MODULES:
            ref = pending.pop(0)
            summary = self._summary(ref, consulted) if ref not in seen else None
            seen.add(ref)
            if summary is not None:
                for local, full in summary["aliases"].items():
                    aliases.setdefault(local, full)
                pending += summary["stars"]
        return aliases

    def importers(self, path: str) -> List[str]:
        """The project's files whose imports resolve to `path` (`importers.Importers`)."""
        here = os.path.dirname(os.path.abspath(path))
        return self.project.importers.of(os.path.abspath(path), project_root(here) or here, self.src)

    @staticmethod
    def _callers(lookup: Lookup, path: str, importers: List[str]) -> Tuple[List[Tuple[str, str]], Set[str]]:
        """The definitions of the importers that use what they import from `path` (a call of
        its function, a subclass of its class, its module named), and the names of `path` used."""
        callers: List[Tuple[str, str]] = []
        used: Set[str] = set()
        for ref in importers:
            summary = lookup.summary_of(ref)
            if summary is None:
                continue
            table = lookup.table(ref, summary)
            mine: Dict[str, Optional[str]] = {}  # local name -> the name of `path` it is (None: the module)
            starred = lookup.summary_of(path) if path in summary["stars"] else None  # `from losses import *`
            for local in [*summary["imports"], *(starred["public"] if starred is not None else ())]:
                target = lookup.chain(table, local)
                if target is not None and target[1] == path:
                    mine[local] = target[2] if target[0] == "def" else None
            direct = []
            for name, reads in summary["reads"].items():
                reached = [_reached(lookup, table, mine, read, path) for read in reads
                           if read.split(".")[0] in mine or read.split(".")[0] in summary["imports"]]
                if any(reached):
                    direct.append(name)
                    used.update(filter(None, reached))
            callers += [(ref, name) for name in _with_users(summary, direct)]
        return callers, used

    def _definitions(self, lookup: Lookup, wanted: List[Tuple[Table, str]], path: str) -> List[Tuple[str, str]]:
        """The (module, name) definitions the dotted names reach, then those their code reads,
        breadth first, `MAX_HOPS` deep (not the file's own, `path`'s: those are its nodes)."""
        found: Dict[Tuple[str, str], None] = {}
        for _ in range(MAX_HOPS):
            following: List[Tuple[Table, str]] = []
            for table, dotted in wanted:
                target = lookup.chain(table, dotted)
                if target is None or target[0] != "def" or (target[1], target[2]) in found or target[1] == path:
                    continue
                found[(target[1], target[2])] = None
                summary = lookup.summary_of(target[1])
                if summary is not None:
                    following += [(lookup.table(target[1], summary), read)
                                  for read in summary["reads"].get(target[2], [])]
            wanted = following
        return list(found)

    def _summary(self, ref: str, consulted: Dict[str, dict]) -> Optional[dict]:
        if ref not in consulted:
            summary = self.project.summary(ref, self.src)
            if summary is None:
                return None
            consulted[ref] = summary
            self.reads[ref] = summary["hash"]
        return consulted[ref]


def _reached(lookup: Lookup, table: Table, mine: Dict[str, Optional[str]], read: str, path: str) -> Optional[str]:
    """The name of `path` that an importer's dotted read uses: through a name imported from it
    (`mine`: `ce(...)`, `losses.ce(...)`), or down a package chain (`import pkg.losses`, then
    `pkg.losses.ce(...)`); None when the read does not reach `path`'s definitions."""
    head, *rest = read.split(".")
    if head in mine:
        return mine[head] or (rest[0] if rest else head)
    target = lookup.chain(table, read)
    return target[2] if target is not None and target[0] == "def" and target[1] == path else None


def _with_uses(summary: dict, names: List[str]) -> List[str]:
    """`names` and the module's definitions they use, to a fixpoint, in the summary's order."""
    found, pending = set(names), list(names)
    while pending:
        for used in summary["uses"].get(pending.pop(), []):
            if used not in found:
                found.add(used)
                pending.append(used)
    return [name for name in summary["defined"] if name in found]


def _with_users(summary: dict, names: List[str]) -> List[str]:
    """`names` and the module's definitions that use them, `MAX_HOPS` deep: the callers of an
    importer's helper pass it what it hands on (`compute_entropy(policy)` in the agent's method,
    `safe_log(policy[0])` in `compute_entropy`)."""
    found, frontier = dict.fromkeys(names), list(names)
    for _ in range(MAX_HOPS):
        frontier = [user for user, uses in summary["uses"].items() if user not in found
                    and any(name in uses for name in frontier)]
        found.update(dict.fromkeys(frontier))
    return list(found)


CURRENT: ContextVar[Optional[Reading]] = ContextVar("cliplint_project", default=None)

_GATE_FIELDS = ("words", "stored_attributes", "none_compare", "assigned", "calls_by_name", "keyword_values",
                "argument_callees", "statement_callees", "assignments", "single_assignments", "iterables",
                "zipped_first", "bindings", "calls")
# (summary, a definition's lines) -> its Facts
_summary_facts: Dict[Tuple[str, Tuple[int, ...]], Optional["Facts"]] = {}


def add_gate_facts(facts, imported: Imported) -> None:
    """Widen `facts` (what the rules' gates read of the file) by those of the summaries' code: a
    gate may only skip what the engine could not report, and the engine now follows values into
    them (a star-imported `CLIPVALUE = -1.0` is a threshold <= 0; a helper's `tape.gradient`)."""
    from ..facts import Facts

    facts.add_aliases(imported.star_aliases)
    for ref, names in imported.linked.items():
        summary = imported.summaries[ref]
        lines = summary["code"].splitlines(keepends=True)
        # the summary's code starts with its module's imports: a definition's TF names qualify there
        imports = "".join(lines[:min((span[0] for span in summary["spans"].values()), default=1) - 1])
        for span in dict.fromkeys(tuple(summary["spans"][name]) for name in names):
            key = (summary["hash"], span)
            if key not in _summary_facts:
                _summary_facts[key] = Facts.of(imports + "".join(lines[span[0] - 1:span[1]]))
            other = _summary_facts[key]
            if other is not None:
                for field_name in _GATE_FIELDS:
                    _widen(facts, field_name, getattr(other, field_name))
                facts.qualified().update(other.qualified())  # what `refers_to` asks


def _widen(facts, name: str, more) -> None:
    mine = getattr(facts, name)
    if isinstance(mine, bool):
        setattr(facts, name, mine or more)
    elif isinstance(mine, set):
        mine |= more
    elif isinstance(mine, list):
        mine += more
    elif isinstance(mine, dict):
        for key, value in more.items():
            mine[key] = mine[key] + value if key in mine else value
