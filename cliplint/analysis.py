"""Parse once, index once, run every rule in one pass, then place the findings.

The tree is walked once to build an index (nodes by type, parents, source order); every rule
queries that index. Positions cost a code generation, so they are computed only for files
that have something to report, and only as character offsets (see `Positions`).
"""
from __future__ import annotations

import ast
import gc
import sys
from contextlib import contextmanager
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Type,
    Union,
    overload,
)

import libcst as cst

from .findings import Finding, Report, bad_input, syntax_error
from .flow import Flow
from .flow.nodes import M, N, children
from .limits import RECURSION_LIMIT, assess
from .names import ImportTable
from .positions import Place, Positions
from .probes import Probe, payload
from .suppress import ALL, file_noqa, noqa_comments, suppressed

# The newest grammar libcst knows, whatever Python runs cliplint: `type X = ...`, `def f[T]()`,
# nested f-strings parse on 3.9 too (code that is only valid in older Pythons is rare).
_CONFIG = cst.PartialParserConfig(python_version=cst.KNOWN_PYTHON_VERSION_STRINGS[-1])


class Index(Protocol):
    """What `Context` reads of an indexed tree: each node's parent, pre- and post-order
    number, and the nodes of each type in source order (`TreeIndex` is one; the incremental
    linter joins one from its statements')."""

    parent: Dict[cst.CSTNode, Optional[cst.CSTNode]]
    pre: Dict[cst.CSTNode, int]
    post: Dict[cst.CSTNode, int]
    by_type: Dict[type, List[cst.CSTNode]]


class PositionSource(Protocol):
    """Node -> 1-based (line, column, end line, end column) (`positions.Positions` is one)."""

    def get(self, node: cst.CSTNode) -> Place: ...


class Checker(Protocol):
    """What the pipeline reads of a rule (`rules.Rule` is one; this module is below them)."""

    code: str
    name: str
    severity: str

    def check(self, ctx: "Context") -> Iterable[Report]: ...


class TreeIndex:
    """One walk of a tree: each node's parent, pre- and post-order number from `first`, and
    the nodes of each type in source order; `size` numbers in all."""

    __slots__ = ("parent", "pre", "post", "by_type", "size")

    def __init__(self, root: cst.CSTNode, first: int = 0) -> None:
        counter = first
        self.parent: Dict[cst.CSTNode, Optional[cst.CSTNode]] = {}
        self.pre: Dict[cst.CSTNode, int] = {}
        self.post: Dict[cst.CSTNode, int] = {}
        self.by_type: Dict[type, List[cst.CSTNode]] = {}
        by_type, pre, post, parent = self.by_type, self.pre, self.post, self.parent
        stack: List[Tuple[cst.CSTNode, Optional[cst.CSTNode], bool]] = [(root, None, False)]
        while stack:
            node, above, leaving = stack.pop()
            if leaving:
                post[node] = counter
            else:
                parent[node] = above
                pre[node] = counter
                kind = type(node)
                if kind in by_type:
                    by_type[kind].append(node)
                else:
                    by_type[kind] = [node]
                stack.append((node, above, True))
                stack.extend((child, node, False) for child in reversed(children(node)))
            counter += 1
        self.size = counter - first


class Context:
    """One parsed module, indexed once, shared by every rule."""

    def __init__(self, path: str, source: str, module: cst.Module, index: Optional[Index] = None,
                 texts: Optional[Dict[cst.CSTNode, str]] = None, probes: bool = True) -> None:
        """`index`: the module's, when the caller has it; `texts`: node -> code, kept by a caller
        whose next module reuses nodes (the code of a node depends on nothing else); `probes`:
        False when the findings need not carry what the verifier runs."""
        self.path = path
        self.source = source
        self.module = module
        self.imports = ImportTable()
        index = index or TreeIndex(module)
        self.parent, self.pre, self.post, self._by_type = index.parent, index.pre, index.post, index.by_type
        self.own = index.pre  # the file's own nodes: a project link extends `pre` with its summaries'
        self._call_names: Dict[cst.CSTNode, Optional[str]] = {}
        self._texts = texts if texts is not None else {}
        for node in self.nodes(cst.Import, cst.ImportFrom):
            self.imports.add(node)
        self.flow = Flow(self, probes)

    @overload
    def nodes(self, kind: Type[N], /) -> List[N]: ...

    @overload
    def nodes(self, kind: Type[N], other: Type[M], /) -> List[Union[N, M]]: ...

    def nodes(self, *types: Type[cst.CSTNode]) -> List[Any]:
        """All nodes of the given types, in source order."""
        if len(types) == 1:
            return self._by_type.get(types[0], [])
        found = [n for t in types for n in self._by_type.get(t, [])]
        return sorted(found, key=self.pre.__getitem__)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        above = self.parent.get(node)
        while above is not None:
            yield above
            above = self.parent.get(above)

    def encloses(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        return self.pre[outer] <= self.pre[inner] and self.post[inner] <= self.post[outer]

    def qualify(self, expr: cst.BaseExpression) -> Optional[str]:
        """Canonical TF/Keras name of an expression, through imports and local aliases."""
        name = self.imports.qualify(expr)
        if name is None and isinstance(expr, (cst.Name, cst.Attribute)):
            name = self.flow.alias_of(expr)
        if name is None and self.imports.stars and isinstance(expr, (cst.Name, cst.Attribute)):
            head: cst.BaseExpression = expr
            while isinstance(head, cst.Attribute):
                head = head.value
            if isinstance(head, cst.Name) and self.flow.binding_of(head) is None:  # not the module's own
                name = self.imports.star_qualify(expr)
        return name

    def call_name(self, node: Optional[cst.CSTNode]) -> Optional[str]:
        """Canonical name of the function a Call calls (memoised: every rule asks)."""
        if not isinstance(node, cst.Call):
            return None
        if node not in self._call_names:
            self._call_names[node] = self.qualify(node.func)
        return self._call_names[node]

    def text(self, node: cst.CSTNode) -> str:
        code = self._texts.get(node)
        if code is None:
            code = self._texts[node] = self.module.code_for_node(node)
        return code


def parse(path: str, text: str, gated: bool = False) -> Union[cst.Module, Finding]:
    """libcst's tree of `text`, or why not (a CL000 finding). `gated`: the caller has `assess`ed
    the text already."""
    refused = None if gated else assess(text)[0]
    if refused is not None:
        return bad_input(path, refused.message, refused.line)
    try:
        return cst.parse_module(text, _CONFIG)
    except cst.ParserSyntaxError as err:
        return _syntax_error(path, text, err)
    except (RecursionError, MemoryError):
        return bad_input(path, "file is nested too deeply to parse")
    except Exception as err:  # libcst raises a few non-ParserSyntaxError errors on odd input
        return bad_input(path, f"cannot parse: {type(err).__name__}: {err}")


def _syntax_error(path: str, text: str, err: cst.ParserSyntaxError) -> Finding:
    """CPython's own message and position where it has one: clearer than the CST parser's.
    Compiled under a name that is no file: given a path, CPython reads the line back from the
    disk to place the error, and an editor's unsaved text is not what is on the disk."""
    try:
        compile(text, "<cliplint>", "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except SyntaxError as py_err:
        if py_err.lineno:
            return syntax_error(path, py_err.msg, py_err.lineno, max(py_err.offset or 1, 1))
    except (RecursionError, MemoryError, ValueError):
        pass
    first = str(err.message).splitlines()[0] if err.message else "invalid syntax"
    return syntax_error(path, first, err.editor_line, err.editor_column)


_EXPECTS_ERROR = {"raises", "assertRaises", "assertRaisesRegex", "assertRaisesRegexp"}


def _expects_error(ctx: Context, node: cst.CSTNode) -> bool:
    """Inside `with pytest.raises(...)` / `self.assertRaises(...)`: a test of the very behaviour."""
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.With):
            for item in anc.items:
                call = item.item
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
                        and call.func.attr.value in _EXPECTS_ERROR:
                    return True
    return False


def _statement_of(ctx: Context, node: cst.CSTNode) -> cst.CSTNode:
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.SimpleStatementLine):
            return anc
        if isinstance(anc, (cst.BaseCompoundStatement, cst.IndentedBlock)):
            break
    return node


def lint_module(path: str, text: str, rules: Sequence[Checker], display: Optional[str] = None,
                lines: Optional[List[int]] = None, gated: bool = False) -> Tuple[List[Finding], bool]:
    """Findings for one Python source text; the bool is True when a rule crashed. `lines`: the
    first line of each top-level statement, when the caller has CPython's ast at hand; `gated`:
    the caller has `assess`ed the text (or one it was reduced from) already."""
    display = display or path
    collecting = gc.isenabled()
    gc.disable()  # a parse allocates ~10^5 acyclic nodes: the cycle collector would only slow it
    try:
        module = parse(display, text, gated)
        if isinstance(module, Finding):
            return [module], False
        try:
            ctx = Context(display, text, module)
            return _run_rules(ctx, rules, lines)
        except RecursionError:
            return [bad_input(display, "file is nested too deeply to analyse")], False
    finally:
        if collecting:
            gc.enable()


def _run_rules(ctx: "Context", rules: Sequence[Checker], lines: Optional[List[int]]) -> Tuple[List[Finding], bool]:
    located, crashed = reports_of(ctx, rules, lines)
    return [finding for finding, _ in located] + crashed, bool(crashed)


@contextmanager
def deeper() -> Iterator[None]:
    """Python recursing as deep as a tree the gate lets through needs (libcst's code generation
    and visitors recurse), for the rules only: CPython's own parser goes deeper, and crashes,
    with a higher limit, so the limit is put back for it (and for the next file)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def reports_of(ctx: "Context", rules: Sequence[Checker], lines: Optional[List[int]] = None,
               positions: Optional[Callable[["Context"], PositionSource]] = None
               ) -> Tuple[List[Tuple[Finding, Report]], List[Finding]]:
    """Every rule on one parsed module: (finding, the rule's report) for each finding that is not
    suppressed, and a CL000 finding for each rule that crashed. The fixer needs the reports.
    `positions` places the findings (by default `Positions` over `lines`)."""
    with deeper():
        return _reports(ctx, rules, lines, positions)


def _reports(ctx: "Context", rules: Sequence[Checker], lines: Optional[List[int]],
             positions: Optional[Callable[["Context"], PositionSource]]
             ) -> Tuple[List[Tuple[Finding, Report]], List[Finding]]:
    reports: List[Tuple[Checker, Report]] = []
    crashed: List[Finding] = []
    for rule in rules:
        try:
            reports.extend((rule, r) for r in rule.check(ctx))
        except RecursionError:  # deeper than RECURSION_LIMIT allows: the input's fault, not the rule's
            crashed.append(bad_input(ctx.path, f"rule {rule.code} ({rule.name}) skipped: expression nested too deeply"))
        except Exception as err:  # one broken rule must not erase the others' findings
            crashed.append(bad_input(
                ctx.path, f"internal error in rule {rule.code} ({rule.name}): {type(err).__name__}: {err}"))
    for _, report in reports:  # a report on the `x op y` the dataflow made of `x op= y`: the statement's
        if isinstance(report.node, cst.CSTNode):
            report.node = ctx.flow.written_as.get(report.node, report.node)
    for rule in dict.fromkeys(rule for rule, report in reports if report.node not in ctx.own):  # a linked module's
        crashed.append(bad_input(ctx.path, f"internal error in rule {rule.code} ({rule.name}): "
                                           "it reported outside the file; those findings were dropped"))
    reports = [(rule, report) for rule, report in reports if report.node in ctx.own]
    if not reports:
        return [], crashed
    placed = positions(ctx) if positions is not None else Positions(ctx, lines)
    return _locate(ctx, reports, placed), crashed


def _locate(ctx: Context, reports: List[Tuple[Checker, Report]], positions: PositionSource
            ) -> List[Tuple[Finding, Report]]:
    noqa = noqa_comments(ctx.source)
    file_level, file_codes = file_noqa(ctx.source)
    located: Dict[Tuple, Tuple[Finding, Report]] = {}
    for rule, report in reports:
        if file_level and (file_codes is ALL or rule.code in file_codes):
            continue
        node = report.node
        assert isinstance(node, cst.CSTNode), f"{rule.code} reported a key of a config on Python code"
        if _expects_error(ctx, node):
            continue
        line, column, end_line, end_column = positions.get(node)
        statement = positions.get(_statement_of(ctx, node))
        if suppressed(rule.code, range(statement[0], statement[2] + 1), noqa):
            continue
        finding = Finding(
            ctx.path, line, column, end_line, end_column,
            rule.code, rule.name, report.severity or rule.severity, report.message,
            payload(report.probe) if ctx.flow.probes and isinstance(report.probe, Probe) else None,
            fix=report.fix.summary() if report.fix is not None else None)
        located.setdefault((finding.line, finding.column, finding.code), (finding, report))
    return list(located.values())
