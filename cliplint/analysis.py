"""Parse once, index once, run every rule in one pass, then place the findings.

The tree is walked once to build an index (nodes by type, parents, source order); every rule
queries that index. Positions cost a code generation, so they are computed only for files
that have something to report, and only as character offsets (see `Positions`).
"""
from __future__ import annotations

import ast
import bisect
import gc
import re
import sys
from contextlib import contextmanager
from itertools import accumulate
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type, cast

import libcst as cst
from libcst._nodes.internal import CodegenState  # positions: see Positions

from .facts import cpython_tree, nesting, split_lines
from .findings import Finding, Report, bad_input, syntax_error
from .flow import Flow
from .flow.nodes import N, children, first_numbered
from .names import ImportTable
from .probes import payload
from .suppress import ALL, file_noqa, noqa_comments, suppressed

# The newest grammar libcst knows, whatever Python runs cliplint: `type X = ...`, `def f[T]()`,
# nested f-strings parse on 3.9 too (code that is only valid in older Pythons is rare).
_CONFIG = cst.PartialParserConfig(python_version=cst.KNOWN_PYTHON_VERSION_STRINGS[-1])


class TreeIndex:
    """One walk of a tree: each node's parent, pre- and post-order number, and the nodes of
    each type in source order. Built for a module, or for each top-level statement and then
    joined: an editor's unchanged statements keep theirs from one version to the next.

    Rules only compare the numbers, so a statement's may start anywhere (`first`) as long as
    the statements' ranges keep their source order."""

    __slots__ = ("parent", "pre", "post", "by_type", "first", "size", "scattered")

    def __init__(self, root: cst.CSTNode, first: int = 0,
                 elsewhere: Optional[Callable[[cst.CSTNode, int], Optional[int]]] = None) -> None:
        """`elsewhere(node, number)`: for a node whose subtree another index numbers (a class's
        statements, kept apart so that an edit of one re-indexes only that one), the number to
        go on from; None for the others. Such an index is `scattered`: its nodes of one type
        are not consecutive in source order."""
        counter = self.first = first
        self.scattered = elsewhere is not None
        self.parent: Dict[cst.CSTNode, Optional[cst.CSTNode]] = {}
        self.pre: Dict[cst.CSTNode, int] = {}
        self.post: Dict[cst.CSTNode, int] = {}
        self.by_type: Dict[type, List[cst.CSTNode]] = {}
        by_type, pre, post, parent = self.by_type, self.pre, self.post, self.parent
        stack: List[Tuple[cst.CSTNode, Optional[cst.CSTNode], bool]] = [(root, None, False)]
        while stack:
            node, above, leaving = stack.pop()
            if not leaving and elsewhere is not None:
                after = elsewhere(node, counter)
                if after is not None:
                    parent[node] = above
                    counter = after
                    continue
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

    @classmethod
    def joined(cls, module: cst.Module, statements: Sequence["TreeIndex"]) -> "TreeIndex":
        """The index of `module` from those of its top-level statements: spliced into an empty
        one (merging dicts reuses their stored hashes: no node is hashed again)."""
        index = cls.__new__(cls)
        index.parent, index.pre, index.post, index.by_type = {}, {}, {}, {}
        index.scattered = False
        index.splice(module, (), statements)
        return index

    def splice(self, module: cst.Module, removed: Sequence["TreeIndex"], added: Sequence["TreeIndex"]) -> None:
        """In place: the index of `module`, which has the statements of `added` where the
        previous module had those of `removed` (the work is the size of the edit)."""
        previous = self.by_type.get(cst.Module, [None])[0]
        for part in removed:
            for kind, nodes in part.by_type.items():
                listed = self.by_type[kind]
                for run in ([node] for node in nodes) if part.scattered else (nodes,):
                    at = first_numbered(listed, part.pre[run[0]], self.pre)
                    del listed[at:at + len(run)]
            for numbers in (self.parent, self.pre, self.post):
                for node in part.pre:
                    del numbers[node]
        for part in added:  # the parts whose parents must win come last
            self.parent.update(part.parent)
            self.pre.update(part.pre)
            self.post.update(part.post)
            for kind, nodes in part.by_type.items():
                listed = self.by_type.setdefault(kind, [])
                for run in ([node] for node in nodes) if part.scattered else (nodes,):
                    at = first_numbered(listed, part.pre[run[0]], self.pre)
                    listed[at:at] = run
        self._root(module, previous)

    def renamed(self, renamed: Dict[cst.CSTNode, cst.CSTNode], parents: Dict[cst.CSTNode, cst.CSTNode],
                dropped: Sequence[cst.CSTNode]) -> "TreeIndex":
        """A copy with nodes replaced by their rebuilt versions (`renamed`: a class and its body
        around a re-parsed method), the parents of the nodes it does not number set (`parents`)
        and those of `dropped` forgotten. The numbers stay."""
        index = TreeIndex.__new__(TreeIndex)
        index.first, index.size, index.scattered = self.first, self.size, self.scattered
        index.pre = {renamed.get(node, node): number for node, number in self.pre.items()}
        index.post = {renamed.get(node, node): number for node, number in self.post.items()}
        index.parent = {renamed.get(node, node): renamed.get(above, above) for node, above in self.parent.items()}
        for node in dropped:
            index.parent.pop(node, None)
        index.parent.update(parents)
        index.by_type = {kind: [renamed.get(node, node) for node in nodes] for kind, nodes in self.by_type.items()}
        return index

    def _root(self, module: cst.Module, previous: Optional[cst.Module]) -> None:
        """Number the module around its statements and make it their parent."""
        for numbers in (self.parent, self.pre, self.post):
            numbers.pop(previous, None)
        self.parent[module], self.pre[module] = None, -1
        for statement in module.body:
            self.parent[statement] = module
        self.post[module] = self.post[module.body[-1]] + 1 if module.body else 0
        self.by_type[cst.Module] = [module]
        self.first, self.size = -1, self.post[module] + 2


class Context:
    """One parsed module, indexed once, shared by every rule."""

    def __init__(self, path: str, source: str, module: cst.Module, index: Optional[TreeIndex] = None,
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
        self._call_names: Dict[cst.CSTNode, Optional[str]] = {}
        self._texts = texts if texts is not None else {}
        for node in self.nodes(cst.Import, cst.ImportFrom):
            self.imports.add(node)
        self.flow = Flow(self, probes)

    def nodes(self, *types: Type[N]) -> List[N]:
        """All nodes of the given types, in source order."""
        by_type = cast(Dict[Type[N], List[N]], self._by_type)  # it files each node under its type
        if len(types) == 1:
            return by_type.get(types[0], [])
        found = [n for t in types for n in by_type.get(t, [])]
        return sorted(found, key=self.pre.__getitem__)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        node = self.parent.get(node)
        while node is not None:
            yield node
            node = self.parent.get(node)

    def encloses(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        return self.pre[outer] <= self.pre[inner] and self.post[inner] <= self.post[outer]

    def qualify(self, expr: cst.BaseExpression) -> Optional[str]:
        """Canonical TF/Keras name of an expression, through imports and local aliases."""
        name = self.imports.qualify(expr)
        if name is None and isinstance(expr, (cst.Name, cst.Attribute)):
            name = self.flow.alias_of(expr)
        return name

    def call_name(self, node: cst.CSTNode) -> Optional[str]:
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


_BRACKETS = re.compile(r"[()\[\]{}]")
MAX_NESTING = 100  # brackets; CPython itself stops at 200
MAX_DEPTH = 1000  # libcst nodes nested in one another: see `facts.nesting`
# libcst's native parser recurses without a limit, and its time grows with the square of the
# nesting. bench/fuzz_parser.py measures where it dies (main thread, 8 MB stack, libcst 1.9):
# 3,400 nested lambdas, 4,000-8,000 `and`s, 8,000-16,000 `elif`s (SIGSEGV); unary operators,
# sums, attribute and subscript chains take 3-15 s at 4,000 levels. MAX_DEPTH stays 3x below
# the first crash, and below 2 s at its worst (subscript chains). The rules' recursion (libcst's
# code generation: about three frames a level) fits in RECURSION_LIMIT at that depth.
RECURSION_LIMIT = 12 * MAX_DEPTH
MAX_NODES = 500_000  # CPython's nodes (~3 a line of code); libcst: 0.4 GB and 5-20 s for a list of 100,000 numbers
RISKY_DEPTH, RISKY_NODES = MAX_DEPTH // 4, MAX_NODES // 4  # real code: 20 levels deep (TensorFlow's own)
MAX_UNPARSED_LINE = 100_000  # characters of a line, in a file CPython cannot parse
# Without CPython's tree (a syntax error, or deeper than CPython goes): every operator or
# keyword of one logical line may nest, and so may each `elif` of the file.
_LEXICAL = re.compile(r"""(?P<skip>[rRbBuUfF]{0,2}(?:'{3}(?:[^'\\]|\\.|'(?!''))*'{3}|"{3}(?:[^"\\]|\\.|"(?!""))*"{3}"""
                      r"""|'[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")|\#[^\n]*|\\\r?\n)"""
                      r"|(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<end>\n)|(?P<elif>\belif\b)"
                      r"|(?P<nests>[-+*/%&|^~.@<>=:]|\b(?:not|lambda|await|if|else|and|or|in|is|for|yield)\b)")


def lexical_nesting(text: str) -> Tuple[int, int]:
    """An upper bound of `nesting` from the tokens alone, and the line where it is reached."""
    deepest, at, count, elifs, depth, line = 0, 1, 0, 0, 0, 1
    for match in _LEXICAL.finditer(text):
        kind = match.lastgroup
        if kind == "end":
            line += 1
            if depth == 0:
                count = 0
            continue
        if kind == "skip":
            line += match.group().count("\n")
            continue
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif kind == "elif":
            elifs += 1
        count += 1
        if max(count, elifs) > deepest:
            deepest, at = max(count, elifs), line
    return deepest, at


def assess(text: str, measured: Optional[Tuple[int, int, int]] = None) -> Tuple[Optional[Finding], bool]:
    """Input the CST parser cannot take safely, with where and why (None when it is fine), and
    whether it is risky all the same: within the limits, but nearer them than any code a person
    writes (the caller then parses it in a child process). `measured`: the `nesting` of
    CPython's tree of `text` when the caller has it (`Facts.nesting`; else it is parsed here)."""
    brackets, line = _brackets(text)
    if brackets > MAX_NESTING:
        return bad_input("", f"brackets nested more than {MAX_NESTING} levels deep; not parsed", line), True
    parsed = measured is not None
    if measured is None:
        tree = cpython_tree(text)
        parsed = tree is not None
        measured = nesting(tree) if tree is not None else (*lexical_nesting(text), 0)
    levels, line, nodes = measured
    if levels > MAX_DEPTH:
        return bad_input("", f"nested too deeply to parse: {levels:,} levels at line {line}, "
                             f"limit {MAX_DEPTH:,}", line), True
    if nodes > MAX_NODES:
        return bad_input("", f"too large to parse: {nodes:,} syntax nodes, limit {MAX_NODES:,} (generated code?)"), True
    longest = max(split_lines(text) or [""], key=len) if not parsed else ""
    if len(longest) > MAX_UNPARSED_LINE:  # libcst's error for a 10 MB line of commas: 20 s, 3 GB
        line = text.count("\n", 0, text.index(longest)) + 1
        return bad_input("", f"CPython cannot parse the file and line {line} is {len(longest):,} characters "
                             f"long (limit {MAX_UNPARSED_LINE:,}); not parsed", line), True
    return None, levels > RISKY_DEPTH or nodes > RISKY_NODES or brackets > RISKY_DEPTH // 10


def _brackets(text: str) -> Tuple[int, int]:
    """How deep brackets nest in `text` (counted up to MAX_NESTING + 1), and the line where."""
    depth = deepest = at = 0
    for match in _BRACKETS.finditer(text):
        depth += 1 if match.group() in "([{" else -1
        if depth > deepest:
            deepest, at = depth, match.start()
            if deepest > MAX_NESTING:
                break
    return deepest, text.count("\n", 0, at) + 1


def parse(path: str, text: str, gated: bool = False) -> Tuple[Optional[cst.Module], Optional[Finding]]:
    """libcst's tree of `text`, or why not. `gated`: the caller has `assess`ed the text already."""
    refused = None if gated else assess(text)[0]
    if refused is not None:
        return None, bad_input(path, refused.message, refused.line)
    try:
        return cst.parse_module(text, _CONFIG), None
    except cst.ParserSyntaxError as err:
        return None, _syntax_error(path, text, err)
    except (RecursionError, MemoryError):
        return None, bad_input(path, "file is nested too deeply to parse")
    except Exception as err:  # libcst raises a few non-ParserSyntaxError errors on odd input
        return None, bad_input(path, f"cannot parse: {type(err).__name__}: {err}")


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


def lint_module(path: str, text: str, rules: Sequence, display_path: Optional[str] = None,
                lines: Optional[List[int]] = None, gated: bool = False) -> Tuple[List[Finding], bool]:
    """Findings for one Python source text; the bool is True when a rule crashed. `lines`: the
    first line of each top-level statement, when the caller has CPython's ast at hand; `gated`:
    the caller has `assess`ed the text (or one it was reduced from) already."""
    shown = display_path or path
    collecting = gc.isenabled()
    gc.disable()  # a parse allocates ~10^5 acyclic nodes: the cycle collector would only slow it
    try:
        module, failure = parse(shown, text, gated)
        if failure:
            return [failure], False
        try:
            ctx = Context(shown, text, module)
            return _run_rules(ctx, rules, lines)
        except RecursionError:
            return [bad_input(shown, "file is nested too deeply to analyse")], False
    finally:
        if collecting:
            gc.enable()


def _run_rules(ctx: "Context", rules: Sequence, lines: Optional[List[int]]) -> Tuple[List[Finding], bool]:
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


def reports_of(ctx: "Context", rules: Sequence, lines: Optional[List[int]] = None,
               positions: Optional[Callable[["Context"], "Positions"]] = None
               ) -> Tuple[List[Tuple[Finding, Report]], List[Finding]]:
    """Every rule on one parsed module: (finding, the rule's report) for each finding that is not
    suppressed, and a CL000 finding for each rule that crashed. The fixer needs the reports.
    `positions` places the findings (by default `Positions` over `lines`)."""
    with deeper():
        return _reports(ctx, rules, lines, positions)


def _reports(ctx: "Context", rules: Sequence, lines: Optional[List[int]],
             positions: Optional[Callable[["Context"], "Positions"]]
             ) -> Tuple[List[Tuple[Finding, Report]], List[Finding]]:
    reports: List[Tuple[object, Report]] = []
    crashed: List[Finding] = []
    for rule in rules:
        try:
            reports.extend((rule, r) for r in rule.check(ctx))
        except RecursionError:  # deeper than RECURSION_LIMIT allows: the input's fault, not the rule's
            crashed.append(bad_input(ctx.path, f"rule {rule.code} ({rule.name}) skipped: expression nested too deeply"))
        except Exception as err:  # one broken rule must not erase the others' findings
            crashed.append(bad_input(
                ctx.path, f"internal error in rule {rule.code} ({rule.name}): {type(err).__name__}: {err}"))
    if not reports:
        return [], crashed
    placed = positions(ctx) if positions is not None else Positions(ctx, lines)
    return _locate(ctx, reports, placed), crashed


class SpanRecorder(CodegenState):
    """libcst's code generation, recording each node's syntactic span as two character offsets.

    The same spans as `PositionProvider` (whose states this mirrors), at a fraction of the
    cost: no regular expression per token and no position objects for nodes nobody asked for.
    """

    def __init__(self, module: cst.Module, offset: int = 0) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = offset
        self.spans: Dict[cst.CSTNode, Tuple[int, int]] = {}
        self.starts: List[int] = []

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        self.offset += sum(len(token) for token in self.indent_tokens)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        if node not in self.spans:
            self.spans[node] = (start, self.offset)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.offset -= len(self.tokens.pop())

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        start = self.offset
        try:
            yield
        finally:
            end = self.offset
            if start_node is not None:
                start = self.spans[start_node][0]
            if end_node is not None:
                end = self.spans[end_node][1]
            self.spans[node] = (start, end)


class Positions:
    """Node -> 1-based (line, column, end line, end column), generating only the code of the
    top-level statements that hold a finding.

    A top-level statement starts at its first line in CPython's ast (decorators included) less
    its leading blank and comment lines; its generated code must equal the source there, or
    the whole module is generated instead (the result is the same, only slower).
    """

    def __init__(self, ctx: Context, lines: Optional[List[int]] = None) -> None:
        self.ctx = ctx
        self.spans: Dict[cst.CSTNode, Tuple[int, int]] = {}
        self.line_starts = line_starts(ctx.source)
        self.offsets = self._statement_offsets(lines)
        if self.offsets is None:
            self._generate(ctx.module, 0)

    def _statement_offsets(self, lines: Optional[List[int]]) -> Optional[Dict[cst.CSTNode, int]]:
        if lines is None:  # CPython could not parse the text (the engine had no ast)
            return None
        offsets, index = {}, 0
        for statement in self.ctx.module.body:
            if index >= len(lines):
                return None
            first = lines[index] - len(statement.leading_lines)
            if not 1 <= first <= len(self.line_starts):
                return None
            offsets[statement] = self.line_starts[first - 1]
            index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        return offsets if index == len(lines) else None

    def _generate(self, node: cst.CSTNode, offset: int) -> str:
        state = SpanRecorder(self.ctx.module, offset)
        node._codegen(state)
        self.spans.update(state.spans)
        return "".join(state.tokens)

    def _top(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        parent = self.ctx.parent.get(node)
        while parent is not None and parent is not self.ctx.module:
            node, parent = parent, self.ctx.parent.get(parent)
        return node if parent is not None else None

    def _place(self, node: cst.CSTNode) -> None:
        top = self._top(node)
        offset = self.offsets.get(top) if top is not None else None
        if offset is not None and self.ctx.source.startswith(self._generate(top, offset), offset):
            return
        self.offsets = None  # the ast and the CST disagree: generate everything
        self.spans.clear()
        self._generate(self.ctx.module, 0)

    def _point(self, offset: int) -> Tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def get(self, node: cst.CSTNode) -> Tuple[int, int, int, int]:
        if node not in self.spans:
            self._place(node)
        start, end = self.spans[node]
        return (*self._point(start), *self._point(end))


def line_starts(source: str) -> List[int]:
    """The offset where each line of `source` starts."""
    return [0, *accumulate(len(line) for line in split_lines(source) if line.endswith(("\n", "\r")))]


def _locate(ctx: Context, reports: List[Tuple[object, Report]], positions: "Positions"
            ) -> List[Tuple[Finding, Report]]:
    noqa = noqa_comments(ctx.source)
    file_level, file_codes = file_noqa(ctx.source)
    located: Dict[Tuple, Tuple[Finding, Report]] = {}
    for rule, report in reports:
        if file_level and (file_codes is ALL or rule.code in file_codes):
            continue
        if _expects_error(ctx, report.node):
            continue
        line, column, end_line, end_column = positions.get(report.node)
        statement = positions.get(_statement_of(ctx, report.node))
        if suppressed(rule.code, range(statement[0], statement[2] + 1), noqa):
            continue
        finding = Finding(
            ctx.path, line, column, end_line, end_column,
            rule.code, rule.name, report.severity or rule.severity, report.message,
            payload(report.probe) if ctx.flow.probes and report.probe is not None else None,
            fix=report.fix.summary() if report.fix is not None else None)
        located.setdefault((finding.line, finding.column, finding.code), (finding, report))
    return list(located.values())
