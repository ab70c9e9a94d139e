"""Where a node is written: libcst's code generation, recording each node's span as two
character offsets, and those offsets as 1-based lines and columns.

`SpanRecorder` overrides libcst's code generation state (`libcst._nodes.internal`, private
API): the one module that depends on it, for the linter's positions and the incremental
linter's kept spans alike.
"""
from __future__ import annotations

import bisect
from contextlib import contextmanager
from itertools import accumulate
from typing import Dict, Iterator, List, Optional, Protocol, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState

from .trees import split_lines

Span = Tuple[int, int]  # start and end offsets
Place = Tuple[int, int, int, int]  # 1-based line, column, end line, end column


class SpanRecorder(CodegenState):
    """libcst's code generation, recording each node's syntactic span as two character offsets.

    The same spans as `PositionProvider` (whose states this mirrors), at a fraction of the
    cost: no regular expression per token and no position objects for nodes nobody asked for.
    """

    def __init__(self, module: cst.Module, offset: int = 0) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = offset
        self.spans: Dict[cst.CSTNode, Span] = {}
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
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None,
                                  end_node: Optional[cst.CSTNode] = None) -> Iterator[None]:
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


def generate(node: cst.CSTNode, state: SpanRecorder) -> str:
    """The code of `node`, its nodes' spans recorded in `state`."""
    node._codegen(state)
    return "".join(state.tokens)


def line_starts(source: str) -> List[int]:
    """The offset where each line of `source` starts."""
    return [0, *accumulate(len(line) for line in split_lines(source) if line.endswith(("\n", "\r")))]


class Lines:
    """Offsets of one text as 1-based (line, column)."""

    def __init__(self, source: str) -> None:
        self.starts = line_starts(source)

    def point(self, offset: int) -> Tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1

    def place(self, start: int, end: int) -> Place:
        return (*self.point(start), *self.point(end))


class Tree(Protocol):
    """What placing nodes reads of a parsed module (`analysis.Context` is one)."""

    source: str
    module: cst.Module
    parent: Dict[cst.CSTNode, Optional[cst.CSTNode]]


def top_statement(tree: Tree, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The top-level statement holding `node` (None for the module itself)."""
    parent = tree.parent.get(node)
    while parent is not None and parent is not tree.module:
        node, parent = parent, tree.parent.get(parent)
    return node if parent is not None else None


class Positions:
    """Node -> 1-based (line, column, end line, end column), generating only the code of the
    top-level statements that hold a finding.

    A top-level statement starts at its first line in CPython's ast (decorators included) less
    its leading blank and comment lines; its generated code must equal the source there, or
    the whole module is generated instead (the result is the same, only slower).
    """

    def __init__(self, tree: Tree, lines: Optional[List[int]] = None) -> None:
        self.tree = tree
        self.spans: Dict[cst.CSTNode, Span] = {}
        self.lines = Lines(tree.source)
        self.offsets = self._statement_offsets(lines)
        if self.offsets is None:
            self._generate(tree.module, 0)

    def _statement_offsets(self, lines: Optional[List[int]]) -> Optional[Dict[cst.CSTNode, int]]:
        if lines is None:  # CPython could not parse the text (the engine had no ast)
            return None
        offsets: Dict[cst.CSTNode, int] = {}
        index, starts = 0, self.lines.starts
        for statement in self.tree.module.body:
            if index >= len(lines):
                return None
            first = lines[index] - len(statement.leading_lines)
            if not 1 <= first <= len(starts):
                return None
            offsets[statement] = starts[first - 1]
            index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        return offsets if index == len(lines) else None

    def _generate(self, node: cst.CSTNode, offset: int) -> str:
        state = SpanRecorder(self.tree.module, offset)
        code = generate(node, state)
        self.spans.update(state.spans)
        return code

    def _place(self, node: cst.CSTNode) -> None:
        top = top_statement(self.tree, node)
        offset = self.offsets.get(top) if top is not None and self.offsets is not None else None
        if top is not None and offset is not None \
                and self.tree.source.startswith(self._generate(top, offset), offset):
            return
        self.offsets = None  # the ast and the CST disagree: generate everything
        self.spans.clear()
        self._generate(self.tree.module, 0)

    def get(self, node: cst.CSTNode) -> Place:
        if node not in self.spans:
            self._place(node)
        return self.lines.place(*self.spans[node])
