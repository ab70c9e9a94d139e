"""A document's pieces: each top-level statement with its code as libcst writes it back, its
nodes' spans and its index; a top-level class split into one piece per statement of its body."""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import libcst as cst

from ..analysis import parse
from ..findings import Finding
from ..positions import Span, SpanRecorder, generate
from .index import StatementIndex

_ROOM = 1 << 20  # node numbers left free around a statement, for it to grow into edit after edit
_MEMBER_ROOM = 1 << 16  # the same around each statement of a class

Spans = Dict[cst.CSTNode, Span]
Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]  # what a block's body holds


class NotNumbered(LookupError):
    """A piece's index was asked for before `number` gave it one (a bug)."""


@dataclass
class Piece:
    """One statement: its node, its code, where its first token starts (after its leading
    lines) and its nodes' spans, relative to the piece's start; whether it holds an indented
    block (libcst reads those against the file's first indentation); and its index, numbered
    where the document puts it.

    A top-level class is split: each statement of its body is a piece of its own (`members`),
    so that typing in one method re-parses, indexes and places that method only. The class's
    own `spans` and `index` then hold just the nodes outside its members."""

    statement: Statement
    code: str
    first_token: int
    spans: Spans
    has_block: bool
    members: List["Piece"] = field(default_factory=list)  # empty: not split
    member_starts: List[int] = field(default_factory=list)
    numbered: Optional[StatementIndex] = None  # set by `number`

    @property
    def length(self) -> int:
        return len(self.code)

    @property
    def index(self) -> StatementIndex:
        if self.numbered is None:
            raise NotNumbered(self.statement)
        return self.numbered

    @property
    def end(self) -> int:
        """The number after its last node's."""
        return self.index.end

    @property
    def weight(self) -> int:
        """At most how many numbers its index takes: each indexed node was written once and is
        numbered twice (plus the room a class leaves around its members)."""
        return 2 * len(self.spans) + sum(member.weight + _MEMBER_ROOM for member in self.members)

    def number(self, first: int) -> None:
        """Index it from `first` (a class's members each with room around them)."""
        if not self.members:
            self.numbered = StatementIndex.of(self.statement, first)
            return
        members: Dict[cst.CSTNode, Piece] = {member.statement: member for member in self.members}
        last = self.members[-1].statement

        def elsewhere(node: cst.CSTNode, counter: int) -> Optional[int]:
            member = members.get(node)
            if member is None:
                return None
            member.number(counter + _MEMBER_ROOM)
            return member.end + (_MEMBER_ROOM if node is last else 0)

        self.numbered = StatementIndex.around(self.statement, first, elsewhere)

    def parts(self) -> List[StatementIndex]:
        """Its indexes, the class's own last (it says whose parent each member is)."""
        return [member.index for member in self.members] + [self.index]

    def nodes(self) -> Iterator[cst.CSTNode]:
        yield from self.spans
        for member in self.members:
            yield from member.spans

    def block(self) -> cst.IndentedBlock:
        """A split class's body."""
        body = self.statement.body
        assert isinstance(body, cst.IndentedBlock), "only a class with an indented body is split"
        return body

    def with_members(self, first: int, last: int, new: List["Piece"], source: str, delta: int) -> "Piece":
        """This class with its members `first`..`last` replaced by `new` (numbered already),
        whose code is `source`, `delta` characters longer than theirs."""
        old_class, old_block = self.statement, self.block()
        members = self.members[:first] + new + self.members[last + 1:]
        block = old_block.with_changes(body=tuple(member.statement for member in members))
        statement = old_class.with_changes(body=block)
        cut_start = self.member_starts[first]
        cut_end = self.member_starts[last] + self.members[last].length
        renamed: Dict[cst.CSTNode, cst.CSTNode] = {old_class: statement, old_block: block}
        spans = {renamed.get(node, node): span for node, span in self.spans.items()}
        for node in (statement, block):
            spans[node] = (spans[node][0], spans[node][1] + delta)
        index = self.index.renamed(renamed, {member.statement: block for member in members},
                                   [member.statement for member in self.members[first:last + 1]])
        return Piece(statement, self.code[:cut_start] + source + self.code[cut_end:], self.first_token, spans, True,
                     members, list(accumulate((member.length for member in members[:-1]),
                                              initial=self.member_starts[0])), index)

    def member_at(self, node: cst.CSTNode, parent: Dict[cst.CSTNode, Optional[cst.CSTNode]]
                  ) -> Optional[Tuple[int, "Piece"]]:
        """(offset in the class, member) of the member holding `node`, if one does."""
        block = self.block()
        above: Optional[cst.CSTNode] = node
        while above is not None:
            node, above = above, parent.get(above)
            if above is block:
                for start, member in zip(self.member_starts, self.members):
                    if member.statement is node:
                        return start, member
                return None
        return None


def written(statement: Statement, module: cst.Module, indent: str = "", split: bool = True) -> Piece:
    """`statement` of `module` as a piece. `indent`: where the statement is written (a class's
    statement); `split`: a class is split into members."""
    body = statement.body if split and isinstance(statement, cst.ClassDef) else None
    members = statements(body) if isinstance(body, cst.IndentedBlock) else []
    state = _MemberRecorder(module, members) if members else SpanRecorder(module)
    if indent:
        state.indent_tokens.append(indent)
    code = generate(statement, state)
    first_token = state.spans[statement][0]
    if not isinstance(state, _MemberRecorder):
        return Piece(statement, code, first_token, state.spans, _has_block(state.spans))
    spans, parts = state.split()
    return Piece(statement, code, first_token, spans, True,
                 [Piece(part.node, code[part.start:part.end], part.spans[part.node][0], part.spans,
                        _has_block(part.spans)) for part in parts],
                 [part.start for part in parts])


def statements(block: cst.IndentedBlock) -> List[Statement]:
    """A block's statements (libcst types them as any statement; they are always these two)."""
    return [node for node in block.body if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement))]


def _has_block(spans: Spans) -> bool:
    return any(type(node) is cst.IndentedBlock for node in spans)


class _Member(NamedTuple):
    """A member's code generation: its node, where its code starts and ends in the class's,
    and its spans (relative to its start)."""

    node: Statement
    start: int
    end: int
    spans: Spans


class _Window(NamedTuple):
    node: Statement
    start: int
    end: int
    first_span: int
    last_span: int


class _MemberRecorder(SpanRecorder):
    """Code generation that notes, for each of `members`, where its code starts and ends and
    which spans it recorded (a window of the spans' insertion order: a node's span is recorded
    between its start and its end)."""

    def __init__(self, module: cst.Module, members: Sequence[Statement]) -> None:
        super().__init__(module)
        self.wanted = set(members)
        self.open: List[Tuple[int, int]] = []
        self.members: List[_Window] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node in self.wanted:
            self.open.append((self.offset, len(self.spans)))
        super().before_codegen(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        super().after_codegen(node)
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and node in self.wanted:
            start, first = self.open.pop()
            self.members.append(_Window(node, start, self.offset, first, len(self.spans)))

    def split(self) -> Tuple[Spans, List[_Member]]:
        """The spans outside the members, and each member's, relative to its start."""
        items = list(self.spans.items())
        head: Spans = {}
        members: List[_Member] = []
        at = 0
        for window in self.members:
            head.update(items[at:window.first_span])
            members.append(_Member(window.node, window.start, window.end,
                                   {key: (a - window.start, b - window.start)
                                    for key, (a, b) in items[window.first_span:window.last_span]}))
            at = window.last_span
        head.update(items[at:])
        return head, members


def reparsed_members(source: str, module: cst.Module, block: cst.IndentedBlock) -> Optional[List[Piece]]:
    """The statements of a class written in `source` (at the class's indentation), as pieces,
    when a stand-in class around them parses to exactly them and writes them back."""
    newline, indent = module.default_newline, block.indent or module.default_indent
    parsed = parse("", f"class _:{newline}{source}")
    if isinstance(parsed, Finding) or parsed.header or parsed.footer or len(parsed.body) != 1:
        return None
    stand_in = parsed.body[0]
    if not isinstance(stand_in, cst.ClassDef) or not isinstance(stand_in.body, cst.IndentedBlock) \
            or stand_in.body.footer or parsed.default_indent != indent or parsed.default_newline != newline:
        return None
    new = [written(statement, parsed, indent, split=False) for statement in statements(stand_in.body)]
    return new if "".join(piece.code for piece in new) == source else None


def number(pieces: List[Piece], low: int, high: Optional[int]) -> bool:
    """Index `pieces` with node numbers between `low` and `high` (None: no bound), room left
    around each; False when they do not fit."""
    room = _ROOM if high is None else (high - low - sum(piece.weight for piece in pieces)) // (len(pieces) + 1)
    if room < 1:
        return False
    for piece in pieces:
        piece.number(low + room)
        low = piece.end
    return True


def lines_code(module: cst.Module, lines: Sequence[cst.EmptyLine]) -> str:
    """The code of a header's or footer's comment and blank lines."""
    state = SpanRecorder(module)
    for line in lines:
        line._codegen(state)
    return "".join(state.tokens)
