"""An editor's successive versions of one Python file: only the top-level statements an edit
touched are parsed, indexed and placed again. The rules still run on the whole module, so
findings that depend on other statements (a compile in one method, the optimizer changed in
another) are found exactly as on the command line.

A version is a header, pieces and a footer. A piece is one top-level statement with its code
as libcst writes it back: the comment and blank lines it owns before it (`leading_lines`) and,
for a compound statement, the ones its last block owns after it. Header, pieces and footer, in
order, are the text. After an edit, the pieces the changed characters touch are parsed again as
a module of their own; every other piece keeps its statement node, its index and its spans.
The statements of a top-level class are pieces too: an edit inside them re-parses just those,
inside a stand-in `class _:` at the same indentation, and the class node is rebuilt around
them (training code is often one big class).

That region parses to the statements a parse of the whole text gives when: it starts after a
complete top-level statement and ends before the next one; nothing in it could continue the
statement before it (`else:`, a dangling decorator: the region alone does not parse); the
comment lines at its edges cannot change owner (the piece before is taken in when the edit
reaches into a piece's leading lines, the piece after when its leading lines are indented);
and it agrees with the whole text on the indentation and newline libcst infers. Whenever one of
these cannot be shown cheaply, the whole text is parsed instead: slower, same result. The tests
check each version's tree against a parse of the whole text.
"""
from __future__ import annotations

import gc
from bisect import bisect_right
from dataclasses import replace
from itertools import accumulate
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import libcst as cst

from .analysis import Context, Positions, SpanRecorder, TreeIndex, line_starts, parse, reports_of
from .files import common_ends
from .findings import Finding, bad_input
from .lint import facts_of, lint_text

_GROWTH = 8  # a region that keeps needing its next piece is parsed whole instead
_ROOM = 1 << 20  # node numbers left free around a statement, for it to grow into edit after edit
_MEMBER_ROOM = 1 << 16  # the same around each statement of a class


class Piece:
    """One statement: its node, its code, where its first token starts (after its leading
    lines) and its nodes' spans, relative to the piece's start; whether it holds an indented
    block (libcst reads those against the file's first indentation); and its index, numbered
    where the document puts it.

    A top-level class is split: each statement of its body is a piece of its own (`members`),
    so that typing in one method re-parses, indexes and places that method only. The class's
    own `spans` and `index` then hold just the nodes outside its members."""

    __slots__ = ("statement", "code", "length", "first_token", "spans", "has_block", "index",
                 "members", "member_starts")

    def __init__(self, statement: cst.BaseStatement, module: cst.Module, indent: str = "", split: bool = True) -> None:
        """`indent`: where the statement is written (a class's statement); `split`: a class is
        split into members."""
        body = statement.body if split and isinstance(statement, cst.ClassDef) else None
        members = body.body if isinstance(body, cst.IndentedBlock) else ()
        state = _Recorder(module, members) if members else SpanRecorder(module)
        if indent:
            state.indent_tokens.append(indent)
        statement._codegen(state)
        self.statement = statement
        self.code = "".join(state.tokens)
        self.length = len(self.code)
        self.first_token = state.spans[statement][0]
        self.index: Optional[TreeIndex] = None
        self.members: Optional[List[Piece]] = None
        self.member_starts: List[int] = []
        if members:
            self.spans, written = state.split()
            self.members = [_member(node, self.code[start:end], spans) for node, start, end, spans in written]
            self.member_starts = [start for _, start, _, _ in written]
            self.has_block = True
        else:
            self.spans = state.spans
            self.has_block = any(type(node) is cst.IndentedBlock for node in self.spans)

    @property
    def end(self) -> int:
        """The number after its last node's."""
        return self.index.first + self.index.size

    @property
    def weight(self) -> int:
        """At most how many numbers its index takes: each indexed node was written once and is
        numbered twice (plus the room a class leaves around its members)."""
        return 2 * len(self.spans) + sum(member.weight + _MEMBER_ROOM for member in self.members or ())

    def number(self, first: int) -> None:
        """Index it from `first` (a class's members each with room around them)."""
        if self.members is None:
            self.index = TreeIndex(self.statement, first)
            return
        members = {member.statement: member for member in self.members}
        last = self.members[-1].statement

        def elsewhere(node: cst.CSTNode, counter: int) -> Optional[int]:
            member = members.get(node)
            if member is None:
                return None
            member.number(counter + _MEMBER_ROOM)
            return member.end + (_MEMBER_ROOM if node is last else 0)

        self.index = TreeIndex(self.statement, first, elsewhere)

    def parts(self) -> List[TreeIndex]:
        """Its indexes, the class's own last (it says whose parent each member is)."""
        return [member.index for member in self.members or ()] + [self.index]

    def nodes(self) -> Iterator[cst.CSTNode]:
        yield from self.spans
        for member in self.members or ():
            yield from member.spans

    def with_members(self, first: int, last: int, new: List["Piece"], source: str, delta: int) -> "Piece":
        """This class with its members `first`..`last` replaced by `new` (numbered already),
        whose code is `source`, `delta` characters longer than theirs."""
        old_class, old_block = self.statement, self.statement.body
        members = self.members[:first] + new + self.members[last + 1:]
        block = old_block.with_changes(body=tuple(member.statement for member in members))
        statement = old_class.with_changes(body=block)
        rebuilt = Piece.__new__(Piece)
        cut_start = self.member_starts[first]
        cut_end = self.member_starts[last] + self.members[last].length
        rebuilt.statement, rebuilt.code = statement, self.code[:cut_start] + source + self.code[cut_end:]
        rebuilt.length, rebuilt.first_token, rebuilt.has_block = len(rebuilt.code), self.first_token, True
        rebuilt.members = members
        rebuilt.member_starts = list(accumulate((member.length for member in members[:-1]),
                                                initial=self.member_starts[0]))
        renamed = {old_class: statement, old_block: block}
        rebuilt.spans = {renamed.get(node, node): span for node, span in self.spans.items()}
        for node in (statement, block):
            rebuilt.spans[node] = (rebuilt.spans[node][0], rebuilt.spans[node][1] + delta)
        rebuilt.index = self.index.renamed(renamed, {member.statement: block for member in members},
                                           [member.statement for member in self.members[first:last + 1]])
        return rebuilt

    def member_at(self, node: cst.CSTNode, parent: Dict[cst.CSTNode, Optional[cst.CSTNode]]
                  ) -> Optional[Tuple[int, "Piece"]]:
        """(offset in the class, member) of the member holding `node`, if one does."""
        block = self.statement.body
        while node is not None:
            above = parent.get(node)
            if above is block:
                for start, member in zip(self.member_starts, self.members):
                    if member.statement is node:
                        return start, member
                return None
            node = above
        return None


class _Recorder(SpanRecorder):
    """Code generation that notes, for each of `members`, where its code starts and ends and
    which spans it recorded (a window of the spans' insertion order: a node's span is recorded
    between its start and its end)."""

    def __init__(self, module: cst.Module, members: Sequence[cst.CSTNode]) -> None:
        super().__init__(module)
        self.wanted = set(members)
        self.open: List[Tuple[int, int]] = []
        self.members: List[Tuple[cst.CSTNode, int, int, int, int]] = []  # node, start, end, first span, last span

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node in self.wanted:
            self.open.append((self.offset, len(self.spans)))
        super().before_codegen(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        super().after_codegen(node)
        if node in self.wanted:
            start, first = self.open.pop()
            self.members.append((node, start, self.offset, first, len(self.spans)))

    def split(self) -> Tuple[Dict, List[Tuple[cst.CSTNode, int, int, Dict]]]:
        """The spans outside the members, and each member's, relative to its start."""
        items = list(self.spans.items())
        head, at, members = {}, 0, []
        for node, start, end, first, last in self.members:
            head.update(items[at:first])
            members.append((node, start, end, {key: (a - start, b - start) for key, (a, b) in items[first:last]}))
            at = last
        head.update(items[at:])
        return head, members


def _reparsed_members(source: str, module: cst.Module, block: cst.IndentedBlock) -> Optional[List[Piece]]:
    """The statements of a class written in `source` (at the class's indentation), as pieces,
    when a stand-in class around them parses to exactly them and writes them back."""
    newline, indent = module.default_newline, block.indent or module.default_indent
    parsed, failure = parse("", f"class _:{newline}{source}")
    if failure is not None or parsed.header or parsed.footer or len(parsed.body) != 1:
        return None
    stand_in = parsed.body[0]
    if not isinstance(stand_in, cst.ClassDef) or not isinstance(stand_in.body, cst.IndentedBlock) \
            or stand_in.body.footer or parsed.default_indent != indent or parsed.default_newline != newline:
        return None
    new = [Piece(statement, parsed, indent, split=False) for statement in stand_in.body.body]
    return new if "".join(piece.code for piece in new) == source else None


def _member(statement: cst.BaseStatement, code: str, spans: Dict[cst.CSTNode, Tuple[int, int]]) -> Piece:
    """A class's statement as a piece, from the class's code generation."""
    member = Piece.__new__(Piece)
    member.statement, member.code, member.length, member.spans = statement, code, len(code), spans
    member.first_token = spans[statement][0]
    member.has_block = any(type(node) is cst.IndentedBlock for node in spans)
    member.index, member.members, member.member_starts = None, None, []
    return member


class Region:
    """What an edit replaces: the pieces `first`..`last` (-1 and len(pieces) stand for the
    header and the footer) and their span `start`..`end` in the previous text."""

    def __init__(self, first: int, last: int, start: int, end: int) -> None:
        self.first, self.last, self.start, self.end = first, last, start, end


class Document:
    """The parsed state of one editor buffer, brought up to date version by version."""

    def __init__(self) -> None:
        self.text: Optional[str] = None  # the last text that parsed
        self.pieces: List[Piece] = []
        self.starts: List[int] = []  # each piece's offset in `text`
        self.header: Sequence[cst.EmptyLine] = ()
        self.footer: Sequence[cst.EmptyLine] = ()
        self.header_length = self.footer_start = 0
        self.module: Optional[cst.Module] = None
        self.index: Optional[TreeIndex] = None
        self.texts: Dict[cst.CSTNode, str] = {}  # code of the nodes rules asked for (snippets, messages)
        self.reparsed = 0  # characters parsed by the last update (bench/incremental_check.py and the tests read it)
        self.failure: Optional[Tuple[str, Finding]] = None  # (text, why) when the whole text did not parse

    # Linting -------------------------------------------------------------------------------

    def lint(self, path: str, text: str, rules: Sequence, shown: str, probes: bool = True
             ) -> Tuple[List[Finding], bool]:
        """What `lint_text` gives for `text` (findings, a rule crashed), reusing what the last
        version parsed. `probes`: False leaves out what the verifier runs (about a third of
        the rules' time)."""
        if not rules:
            return [], False
        collecting = gc.isenabled()
        gc.disable()  # see lint_module: the trees are acyclic
        try:
            if not self.update(text):
                return self._unparsed(path, text, rules, shown)
            try:
                ctx = Context(shown, text, self.module, self.index, self.texts, probes)
                located, crashed = reports_of(ctx, rules, positions=self._positions)
            except RecursionError:
                return [bad_input(shown, "file is nested too deeply to analyse")], False
            return [finding for finding, _ in located] + crashed, bool(crashed)
        finally:
            if collecting:
                gc.enable()

    def _unparsed(self, path: str, text: str, rules: Sequence, shown: str) -> Tuple[List[Finding], bool]:
        """A text libcst cannot parse whole: the command line's answer."""
        if self.failure is not None and self.failure[0] == text and facts_of(text) is None:
            return [replace(self.failure[1], path=shown)], False  # lint_text's, when CPython cannot parse it either
        return lint_text(path, text, rules, shown)

    def _positions(self, ctx: Context) -> "PiecePositions":
        return PiecePositions(ctx, dict(zip((piece.statement for piece in self.pieces),
                                            zip(self.starts, self.pieces))))

    # Keeping the pieces up to date ---------------------------------------------------------

    def update(self, text: str) -> bool:
        """Bring the pieces up to `text`; False when libcst cannot parse it (or its code does
        not write back to the text, or nests too deeply to walk): the caller lints it the
        command line's way. A half-updated state never outlives an error: it is dropped."""
        try:
            return self._update(text)
        except RecursionError:
            self.__init__()
            return False
        except Exception:
            self.__init__()
            raise

    def _update(self, text: str) -> bool:
        if text == self.text:
            self.reparsed = 0
            return True
        if self.text is not None:
            same_start, same_end = common_ends(self.text, text)
            if self._edit_members(text, same_start, len(self.text) - same_end):
                return True
            region = self._region(same_start, same_end)
            for _ in range(_GROWTH):
                grown = self._splice(text, region)
                if grown is None:
                    return True
                if grown is False:
                    break
                region = grown
        return self._splice(text, Region(-1, len(self.pieces), 0, len(self.text or ""))) is None

    def _whole(self, region: Region) -> bool:
        return region.start == 0 and region.end == len(self.text or "")

    def _region(self, same_start: int, same_end: int) -> Region:
        """The pieces an edit touches, given how many characters at the start and at the end
        of the text it left alone."""
        old = self.text
        first = min(self._piece_at(same_start), len(self.pieces) - 1)  # the footer: the last block may own it
        if 0 < first and same_start <= self.starts[first] + self.pieces[first].first_token \
                and isinstance(self.pieces[first - 1].statement, cst.BaseCompoundStatement):
            first -= 1  # the edit reaches into the leading lines: the block before may own them now
        last = max(self._piece_at(len(old) - same_end), first, 0)
        if last + 1 < len(self.pieces) and self._leading_indented(last + 1, ""):
            last += 1  # the edited block could own those lines now
        return self._span(first, last)

    def _span(self, first: int, last: int) -> Region:
        if first <= 0:
            first = -1  # the first statement's leading lines are the module's header
        if last >= len(self.pieces) - 1:
            last = len(self.pieces)  # the last block could own footer lines
        start = 0 if first < 0 else self.starts[first]
        end = len(self.text) if last >= len(self.pieces) else self.starts[last] + self.pieces[last].length
        return Region(first, last, start, end)

    def _edit_members(self, text: str, start: int, end: int) -> bool:
        """An edit inside the statements of one top-level class (characters `start`..`end` of
        the previous text replaced): those statements parsed again inside a stand-in class
        written at the same indentation, the class rebuilt around them. False when the edit
        reaches the class's own lines, or the usual conditions (see the module) do not hold
        there; the top-level statements are then parsed instead."""
        number = self._piece_at(start)
        if not 0 <= number < len(self.pieces) or self.pieces[number].members is None:
            return False
        piece, base, module = self.pieces[number], self.starts[number], self.module
        members, starts = piece.members, piece.member_starts
        block = piece.statement.body
        members_end = starts[-1] + members[-1].length
        if start - base < starts[0] or end - base >= members_end or (block.indent or module.default_indent) \
                != module.default_indent:
            return False
        first, last = bisect_right(starts, start - base) - 1, bisect_right(starts, end - base) - 1
        if first > 0 and start - base <= starts[first] + members[first].first_token \
                and isinstance(members[first - 1].statement, cst.BaseCompoundStatement):
            first -= 1  # the method before may own the comment lines typed
        if last + 1 < len(members) and self._indented_past(base + starts[last + 1], members[last + 1].first_token,
                                                           block.indent or module.default_indent):
            last += 1  # the edited method's block could own those lines now
        if last == len(members) - 1 and (block.footer or base + members_end >= len(self.text) or number + 1 < len(
                self.pieces) and self._leading_indented(number + 1, "")):
            return False  # lines after the class could change owner, or the file's last newline
        region_start = base + starts[first]
        region_end = base + starts[last] + members[last].length + len(text) - len(self.text)
        source = text[region_start:region_end]
        new = _reparsed_members(source, module, block)
        if new is None:
            return False
        low = members[first - 1].end if first > 0 else piece.index.pre[block] + 1
        high = members[last + 1].index.first if last + 1 < len(members) else piece.index.post[block]
        if not _number(new, low, high):
            return False
        rebuilt = piece.with_members(first, last, new, source, len(text) - len(self.text))
        self.pieces[number] = rebuilt
        self.text = text
        self.reparsed = len(source)
        replaced = members[first:last + 1]
        self._assemble((module.default_indent, module.default_newline, module.encoding, module.has_trailing_newline),
                       ([member.index for member in replaced] + [piece.index],
                        [member.index for member in new] + [rebuilt.index],
                        [piece.statement, block, *(node for member in replaced for node in member.spans)]))
        return True

    def _leading_indented(self, number: int, indent: str) -> bool:
        return self._indented_past(self.starts[number], self.pieces[number].first_token, indent)

    def _indented_past(self, start: int, length: int, indent: str) -> bool:
        """Whether the leading lines at `start` (`length` characters, up to a statement written
        at `indent`) hold a line indented further, or one of only whitespace: a block that ends
        just before them could own it."""
        leading = self.text[start:start + length]
        for line in leading[:max(leading.rfind("\n"), leading.rfind("\r")) + 1].splitlines():  # not the statement's own
            stripped = line.lstrip(" \t\f")
            if line and (not stripped or not line.startswith(indent) or line[len(indent):][:1] in (" ", "\t", "\f")):
                return True
        return False

    def _piece_at(self, offset: int) -> int:
        if offset < self.header_length:
            return -1
        if offset >= self.footer_start:
            return len(self.pieces)
        return bisect_right(self.starts, offset) - 1


    def _splice(self, text: str, region: Region):
        """Parse `region` of `text` and put its pieces in place: None when done, a larger
        region to try instead, or False when only a parse of the whole text will do."""
        old_length = len(self.text or "")
        end = region.end + len(text) - old_length
        source = text[region.start:end]
        parsed, failure = parse("", source)
        if failure is not None:
            if self._whole(region):
                self.failure = (text, failure)
            return False
        at_start, at_end = region.start == 0, region.end == old_length
        if not at_end and (parsed.footer or not parsed.has_trailing_newline):
            return self._span(region.first, region.last + 1)  # trailing lines: the next statement's
        if not at_start and not parsed.body:
            return self._span(region.first, region.last + 1) if not at_end else False
        body = list(parsed.body)
        if not at_start and parsed.header:
            body[0] = body[0].with_changes(leading_lines=(*parsed.header, *body[0].leading_lines))
        new = [Piece(statement, parsed) for statement in body]
        if not self._writes_back(source, parsed, new, at_start, at_end):
            return False
        kept_before = self.pieces[:max(region.first, 0)]
        replaced = self.pieces[max(region.first, 0):region.last + 1]
        kept_after = self.pieces[region.last + 1:] if region.last < len(self.pieces) else []
        settings = self._module_settings(parsed, new, kept_before, kept_after, region, source)
        if settings is None:
            return False
        # Nothing can fail from here on: the kept pieces may be renumbered.
        renumbered = not _number(new, kept_before[-1].end if kept_before else 0,
                                 kept_after[0].index.first if kept_after else None)
        if renumbered:
            _number(kept_before + new + kept_after, 0, None)
        if at_start:
            self.header = parsed.header
        if at_end:
            self.footer = parsed.footer
        self.pieces = kept_before + new + kept_after
        self.text = text
        self.reparsed = len(source)
        self._assemble(settings, None if renumbered or self._whole(region) else (
            [part for piece in replaced for part in piece.parts()], [part for piece in new for part in piece.parts()],
            [node for piece in replaced for node in piece.nodes()]))
        return None

    def _writes_back(self, source: str, parsed: cst.Module, new: List[Piece], at_start: bool, at_end: bool) -> bool:
        """The region's header, pieces and footer write back exactly its text (libcst does not
        write back every text it parses: odd continuations)."""
        code = "".join((_lines_code(parsed, parsed.header) if at_start else "", *(piece.code for piece in new),
                        _lines_code(parsed, parsed.footer) if at_end else ""))
        if at_end and not parsed.has_trailing_newline:  # libcst added the newline the text ends without
            return code.startswith(source) and code[len(source):] in ("", "\n", "\r\n", "\r")
        return code == source

    def _module_settings(self, parsed: cst.Module, new: List[Piece], before: List[Piece], after: List[Piece],
                         region: Region, source: str) -> Optional[Tuple[str, str, str, bool]]:
        """(default indent, default newline, encoding, trailing newline) of the whole text, or
        None when the region's own would change how the kept pieces were read."""
        module = self.module
        if module is None or self._whole(region):
            return parsed.default_indent, parsed.default_newline, parsed.encoding, parsed.has_trailing_newline
        indent, newline = module.default_indent, module.default_newline
        encoding = parsed.encoding if region.start == 0 else module.encoding
        trailing = parsed.has_trailing_newline if region.end == len(self.text) else module.has_trailing_newline
        if ("\n" in source or "\r" in source) and parsed.default_newline != newline:
            return None  # libcst infers the first newline's kind: a mixed file is parsed whole
        blocks_in_region = any(piece.has_block for piece in new)
        if any(piece.has_block for piece in before):
            if blocks_in_region and parsed.default_indent != indent:
                return None
        elif blocks_in_region:
            if parsed.default_indent != indent and any(piece.has_block for piece in after):
                return None
            indent = parsed.default_indent
        elif any(piece.has_block for piece in self.pieces[max(region.first, 0):region.last + 1]):
            return None  # the file's first block went away: the next one decides the indent
        return indent, newline, encoding, trailing

    def _assemble(self, settings: Tuple[str, str, str, bool],
                  change: Optional[Tuple[List[TreeIndex], List[TreeIndex], List[cst.CSTNode]]]) -> None:
        """The module of the pieces, and its index: `change` (indexes removed, indexes added,
        nodes gone) updates the last one, None builds it anew."""
        indent, newline, encoding, trailing = settings
        self.module = cst.Module(body=tuple(piece.statement for piece in self.pieces), header=self.header,
                                 footer=self.footer, encoding=encoding, default_indent=indent,
                                 default_newline=newline, has_trailing_newline=trailing)
        self.header_length = len(_lines_code(self.module, self.header))
        self.starts = list(accumulate((piece.length for piece in self.pieces[:-1]), initial=self.header_length)) \
            if self.pieces else []
        self.footer_start = self.starts[-1] + self.pieces[-1].length if self.pieces else self.header_length
        if change is None or self.index is None:
            self.index = TreeIndex.joined(self.module, [part for piece in self.pieces for part in piece.parts()])
            self.texts = {}
        else:
            removed, added, gone = change
            for node in gone:
                self.texts.pop(node, None)
            self.texts.pop(self.index.by_type[cst.Module][0], None)
            self.index.splice(self.module, removed, added)


class PiecePositions(Positions):
    """`Positions` from each piece's spans, kept since the piece was parsed: no code generation."""

    def __init__(self, ctx: Context, where: Dict[cst.CSTNode, Tuple[int, Piece]]) -> None:
        self.ctx = ctx
        self.spans: Dict[cst.CSTNode, Tuple[int, int]] = {}
        self.line_starts = line_starts(ctx.source)
        self.where = where

    def get(self, node: cst.CSTNode) -> Tuple[int, int, int, int]:
        top = self._top(node)
        if top is None:  # the module itself
            if node not in self.spans:
                self._generate(self.ctx.module, 0)
            return super().get(node)
        offset, piece = self.where[top]
        member = piece.member_at(node, self.ctx.parent) if piece.members else None
        if member is not None:
            offset, piece = offset + member[0], member[1]
        start, end = piece.spans[node]
        return (*self._point(offset + start), *self._point(offset + end))


def _number(pieces: List[Piece], low: int, high: Optional[int]) -> bool:
    """Index `pieces` with node numbers between `low` and `high` (None: no bound), room left
    around each; False when they do not fit."""
    room = _ROOM if high is None else (high - low - sum(piece.weight for piece in pieces)) // (len(pieces) + 1)
    if room < 1:
        return False
    for piece in pieces:
        piece.number(low + room)
        low = piece.end
    return True


def _lines_code(module: cst.Module, lines: Sequence[cst.EmptyLine]) -> str:
    """The code of a header's or footer's comment and blank lines."""
    state = SpanRecorder(module)
    for line in lines:
        line._codegen(state)
    return "".join(state.tokens)


