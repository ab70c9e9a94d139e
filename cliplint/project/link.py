"""Pass 2: a file's dataflow follows its imports into the summaries of the modules it imports.

Each summary's code is parsed once per process into a small libcst module, numbered in a range
of its own (above any file's), so that its nodes sort after the file's and never collide with
them. `Linked` is the `ModuleIndex` the file's `Flow` reads: the file's nodes and the summaries'
(the bindings, calls and returns of both), with the file's parents and source order extended by
the summaries'. The rules still visit only the file's own nodes (`Context.nodes`), so findings
are only ever in the file linted. The flow asks two questions of it (duck-typed: `flow/` does
not import this package): `imported(module, dotted)`, the summary module and name a name
imported from the project refers to, and `defined_at(node)`, where a summary's definition is.
"""
from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple, Type

import libcst as cst

from ..names import ImportTable
from .lookup import Lookup, Table, table_of
from .roots import dotted
from .session import Imported

if TYPE_CHECKING:
    from ..analysis import TreeIndex

FIRST = 1 << 40  # summaries are numbered from here, each in a range of SPAN numbers
SPAN = 1 << 26


class Part:
    """The definitions of one summary a file is linked with, indexed: each is parsed and
    numbered once per process (`Parsed.statement`), and a part joins those a file uses, so a
    file pays for what it uses only."""

    __slots__ = ("ref", "summary", "module", "first", "table", "parent", "pre", "post", "by_type")

    def __init__(self, ref: str, summary: dict, parsed: "Parsed", names: List[str]) -> None:
        self.ref, self.summary, self.module, self.first = ref, summary, parsed.module, parsed.first
        self.table = parsed.table
        self.parent: Dict[cst.CSTNode, Optional[cst.CSTNode]] = {parsed.module: None}
        self.pre: Dict[cst.CSTNode, int] = {parsed.module: parsed.first}
        self.post: Dict[cst.CSTNode, int] = {parsed.module: parsed.first + SPAN - 1}
        self.by_type: Dict[type, List[cst.CSTNode]] = {}
        chosen = [found for found in dict.fromkeys(parsed.statement(name) for name in names) if found is not None]
        for statement, index in sorted(chosen, key=lambda pair: pair[1].pre[pair[0]]):  # in source order
            self.parent.update(index.parent)
            self.parent[statement] = parsed.module
            self.pre.update(index.pre)
            self.post.update(index.post)
            for kind, nodes in index.by_type.items():
                self.by_type.setdefault(kind, []).extend(nodes)


class Parsed:
    """A summary's code, parsed a definition at a time when a file first uses it (once per
    process): an empty module stands for the summary's module (the scope of its definitions),
    its imports make its import table."""

    def __init__(self, summary: dict, first: int) -> None:
        from ..analysis import _CONFIG  # libcst's parser: only for a file that is parsed too

        self.summary, self.first, self.next = summary, first, first + 1
        self.lines = summary["code"].splitlines(keepends=True)
        spans = summary["spans"].values()
        head = min((first_line for first_line, _ in spans), default=len(self.lines) + 1)
        imports = cst.parse_module("".join(self.lines[:head - 1]), config=_CONFIG)
        self.module = cst.Module(body=())
        self.table = ImportTable()
        for statement in imports.body:
            for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    self.table.add(small)
        self._statements: Dict[Tuple[int, int], Optional[Tuple[cst.CSTNode, "TreeIndex"]]] = {}

    def statement(self, name: str) -> Optional[Tuple[cst.CSTNode, "TreeIndex"]]:
        """The top-level statement defining `name`, parsed and indexed (None if it does not parse)."""
        from ..analysis import _CONFIG, TreeIndex

        span = self.summary["spans"].get(name)
        if span is None:
            return None
        key = (span[0], span[1])
        if key not in self._statements:
            try:
                statement = cst.parse_statement("".join(self.lines[span[0] - 1:span[1]]), config=_CONFIG)
            except (cst.ParserSyntaxError, RecursionError, MemoryError):
                self._statements[key] = None
                return None
            index = TreeIndex(statement, first=self.next)
            self.next += index.size
            self._statements[key] = (statement, index)
        return self._statements[key]


_parsed: Dict[str, Optional[Parsed]] = {}  # summary hash -> its code, parsed as it is used
_parts: Dict[Tuple[str, Tuple[str, ...]], Part] = {}  # (summary hash, definitions) -> their part


def _part(ref: str, summary: dict, names: List[str]) -> Optional[Part]:
    """The part of `summary` holding `names` (joined once per process)."""
    digest = summary["hash"]
    if digest not in _parsed:
        try:
            _parsed[digest] = Parsed(summary, FIRST + len(_parsed) * SPAN)
        except (cst.ParserSyntaxError, RecursionError, MemoryError):
            _parsed[digest] = None
    parsed = _parsed[digest]
    if parsed is None:
        return None
    key = (digest, tuple(names))
    if key not in _parts:
        _parts[key] = Part(ref, summary, parsed, names)
    return _parts[key]


class LinkedImports(ImportTable):
    """The file's import table, except for a summary's nodes: each is qualified by its own
    module's imports (`tf` may be `tensorflow.compat.v1` there)."""

    def __init__(self, own: ImportTable, foreign: Dict[cst.CSTNode, ImportTable]) -> None:
        super().__init__()
        self.aliases = own.aliases
        self.stars = own.stars
        self._foreign = foreign

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        head = node
        while isinstance(head, cst.Attribute):
            head = head.value
        table = self._foreign.get(head)
        return table.qualify(node) if table is not None else super().qualify(node)

    def star_qualify(self, node: cst.BaseExpression) -> Optional[str]:
        head: cst.BaseExpression = node
        while isinstance(head, cst.Attribute):
            head = head.value
        table = self._foreign.get(head)
        return table.star_qualify(node) if table is not None else super().star_qualify(node)


class Linked:
    """The file's index with the summaries it imports (see the module's docstring)."""

    def __init__(self, ctx, imported: Imported, parts: List[Part]) -> None:
        self.ctx = ctx
        self.module = ctx.module
        self._parts = parts  # in numbering order
        self._by_ref = {part.ref: part.module for part in parts}
        self._by_ref[imported.path] = ctx.module  # an importer's use of the file: the file's own nodes
        self._tables: Dict[cst.CSTNode, Table] = {ctx.module: imported.table}
        for part in parts:
            self._tables[part.module] = table_of(part.summary)
        self._lookup = Lookup(imported.summaries.get, imported.home)
        self._by_type: Dict[type, List[cst.CSTNode]] = {}

    # --- ModuleIndex: the file's, with the summaries' nodes ---------------------------------

    @property
    def imports(self) -> ImportTable:
        return self.ctx.imports

    @property
    def parent(self):
        return self.ctx.parent

    @property
    def pre(self):
        return self.ctx.pre

    @property
    def post(self):
        return self.ctx.post

    @property
    def own(self):
        return self.ctx.own

    def nodes(self, *types: Type[cst.CSTNode]) -> List[cst.CSTNode]:
        found: List[cst.CSTNode] = []
        for kind in types:
            if kind not in self._by_type:
                self._by_type[kind] = list(self.ctx.nodes(kind)) + [
                    node for part in self._parts for node in part.by_type.get(kind, [])]
            found += self._by_type[kind]
        return found if len(types) == 1 else sorted(found, key=self.pre.__getitem__)

    def ancestors(self, node: cst.CSTNode):
        return self.ctx.ancestors(node)

    def encloses(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        return self.ctx.encloses(outer, inner)

    def qualify(self, expr: cst.BaseExpression) -> Optional[str]:
        return self.ctx.qualify(expr)

    def call_name(self, node: cst.CSTNode) -> Optional[str]:
        return self.ctx.call_name(node)

    def text(self, node: cst.CSTNode) -> str:
        return self.ctx.text(node)

    # --- what the flow asks ------------------------------------------------------------------

    def imported(self, module: cst.CSTNode, name: str) -> Optional[Tuple[cst.Module, str]]:
        """The summary module, and the name in it, that `name` (dotted: `models.build`) means in
        `module` (the file's or a summary's) through the project's imports; None when it is not
        a definition of a module linked in. An importer's name for the file's own definition is
        the file's module (`losses.ce(model(x), y)` in a script importing the file)."""
        table = self._tables.get(module)
        target = self._lookup.chain(table, name) if table is not None else None
        if target is None or target[0] != "def" or target[1] not in self._by_ref:
            return None
        if name.count(".") and self._lookup.chain(table, name.rsplit(".", 1)[0]) == target:  # type: ignore[arg-type]
            return None  # `models.Net.call`: an attribute of the definition, not the definition
        return self._by_ref[target[1]], target[2]

    def defined_at(self, node: cst.CSTNode) -> Optional[str]:
        """"`mypkg.models.build` (src/mypkg/models.py:9)" for a summary's definition (or a
        node in one); None for the file's own nodes."""
        number = self.pre.get(node)
        if number is None or number < FIRST:
            return None
        for part in self._parts:
            if part.first <= number < part.first + SPAN:
                top = node
                while self.parent.get(top) is not None and self.parent.get(top) is not part.module:
                    top = self.parent[top]
                name = getattr(getattr(top, "name", None), "value", None)
                if name not in part.summary["defined"]:
                    return None
                shown = os.path.relpath(part.ref) if not os.path.relpath(part.ref).startswith("..") else part.ref
                return f"`{dotted(part.ref, _roots_of(part.summary))}.{name}` ({shown}:{part.summary['defined'][name]})"
        return None


def _roots_of(summary: dict) -> Tuple[str, ...]:
    from .roots import source_roots

    return source_roots(summary["path"])


def link(ctx, imported: Imported):
    """The `ModuleIndex` `ctx`'s flow reads: `ctx` itself when no summary has code, else the
    file's nodes with the summaries' (`ctx`'s parents, numbers and imports are extended: copies,
    so an editor's kept index is not changed)."""
    if imported.star_aliases:  # `tf` of `from utils import *`: a copy, so an editor's kept table is not changed
        ctx.imports = _with_aliases(ctx.imports, imported.star_aliases)
    parts = [part for part in (_part(ref, imported.summaries[ref], names) for ref, names in imported.linked.items()
                               if imported.summaries[ref]["code"]) if part is not None]
    if not parts:
        return ctx
    parts.sort(key=lambda part: part.first)
    ctx.parent, ctx.pre, ctx.post = dict(ctx.parent), dict(ctx.pre), dict(ctx.post)
    foreign: Dict[cst.CSTNode, ImportTable] = {}
    for part in parts:
        ctx.parent.update(part.parent)
        ctx.pre.update(part.pre)
        ctx.post.update(part.post)
        foreign.update((name, part.table) for name in part.by_type.get(cst.Name, []))
    ctx.imports = LinkedImports(ctx.imports, foreign)
    return Linked(ctx, imported, parts)


def _with_aliases(table: ImportTable, aliases: Dict[str, str]) -> ImportTable:
    """`table` with the names of `aliases` it does not bind itself."""
    widened = ImportTable()
    widened.aliases = {**aliases, **table.aliases}
    widened.stars = table.stars
    return widened


def link_on_demand(ctx):
    """`link` for a caller that has only the libcst module (an editor's incremental lint): the
    file's imports are read from its text with CPython's parser first."""
    import ast

    from .session import CURRENT

    reading = CURRENT.get()
    if reading is None or not (_may_import_project(ctx, reading.src) or reading.importers(os.path.abspath(ctx.path))):
        return ctx
    try:
        tree = ast.parse(ctx.source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    imported = reading.prepare(os.path.abspath(ctx.path), tree) if tree is not None else None
    return link(ctx, imported) if imported is not None else ctx


def _may_import_project(ctx, src: Tuple[str, ...]) -> bool:
    """Could the file import one of its project's modules? False when the statements
    `import_map` reads (the top level's imports, also under a top-level `if` or `try`), parsed
    alone, import none: `Reading.prepare` would then answer None whatever the rest of the file
    holds. Parsing those few statements instead of the whole text is what an editor's lint of
    a file importing only TensorFlow costs, on every edit."""
    import ast

    from ..positions import top_statement
    from .resolve import import_map
    from .roots import source_roots

    tops = {top: None for top in map(partial(top_statement, ctx), ctx.nodes(cst.Import, cst.ImportFrom))
            if isinstance(top, (cst.SimpleStatementLine, cst.If, cst.Try))}
    if not tops:
        return False
    try:
        statements = ast.parse("".join(ctx.text(top) for top in tops)).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True  # the whole text decides
    path = os.path.abspath(ctx.path)
    entries, stars = import_map(statements, path, source_roots(path, src))
    return bool(entries or stars)
