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
these cannot be display cheaply, the whole text is parsed instead: slower, same result. The tests
check each version's tree against a parse of the whole text.
"""
from __future__ import annotations

import gc
from bisect import bisect_right
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import libcst as cst

from ..analysis import Context, parse, reports_of
from ..files import common_ends
from ..findings import Finding, bad_input
from ..lint import facts_of, lint_text
from ..positions import Lines, Place, Positions, top_statement
from .index import DocumentIndex, StatementIndex
from .pieces import Piece, lines_code, number, reparsed_members, written

_GROWTH = 8  # a region that keeps needing its next piece is parsed whole instead


class Region(NamedTuple):
    """What an edit replaces: the pieces `first`..`last` (-1 and len(pieces) stand for the
    header and the footer) and their span `start`..`end` in the previous text."""

    first: int
    last: int
    start: int
    end: int


@dataclass(frozen=True)
class Done:
    """The region was parsed and put in place: `reparsed` characters."""

    reparsed: int


@dataclass(frozen=True)
class Grow:
    """The region cannot be parsed alone: try this larger one."""

    region: Region


class Whole:
    """Only a parse of the whole text will do."""


WHOLE = Whole()
Step = Union[Done, Grow, Whole]


class Layout(NamedTuple):
    """What libcst infers for the whole text: how the kept pieces are read."""

    indent: str
    newline: str
    encoding: str
    trailing_newline: bool

    @classmethod
    def of(cls, module: cst.Module) -> "Layout":
        return cls(module.default_indent, module.default_newline, module.encoding, module.has_trailing_newline)


class Change(NamedTuple):
    """How the document's index changes: the indexes removed, those added, the nodes gone."""

    removed: List[StatementIndex]
    added: List[StatementIndex]
    gone: List[cst.CSTNode]


class Failure(NamedTuple):
    """A text libcst could not parse whole, and why."""

    text: str
    finding: Finding


class Version:
    """One parsed version of the buffer: its text, pieces, module and index, edited in place
    into the next one (or left as it was when the edit cannot be parsed alone)."""

    def __init__(self, text: str, parsed: cst.Module, pieces: List[Piece]) -> None:
        self.text = text
        self.pieces = pieces
        self.header: Sequence[cst.EmptyLine] = parsed.header
        self.footer: Sequence[cst.EmptyLine] = parsed.footer
        self.module = self._module(Layout.of(parsed))
        self.index = DocumentIndex(self.module, [part for piece in pieces for part in piece.parts()])
        self.texts: Dict[cst.CSTNode, str] = {}  # code of the nodes rules asked for (snippets, messages)

    @classmethod
    def parsed(cls, text: str) -> Union["Version", Failure, None]:
        """The version of `text` parsed whole; why not, or None when its code does not write
        back to the text."""
        parsed = parse("", text)
        if isinstance(parsed, Finding):
            return Failure(text, parsed)
        pieces = [written(statement, parsed) for statement in parsed.body]
        if not _writes_back(text, parsed, pieces, True, True):
            return None
        number(pieces, 0, None)
        return cls(text, parsed, pieces)

    def _module(self, layout: Layout) -> cst.Module:
        """The module of the pieces, and where each piece starts."""
        module = cst.Module(body=tuple(piece.statement for piece in self.pieces), header=self.header,
                            footer=self.footer, encoding=layout.encoding, default_indent=layout.indent,
                            default_newline=layout.newline, has_trailing_newline=layout.trailing_newline)
        self.header_length = len(lines_code(module, self.header))
        self.starts = list(accumulate((piece.length for piece in self.pieces[:-1]), initial=self.header_length)) \
            if self.pieces else []
        self.footer_start = self.starts[-1] + self.pieces[-1].length if self.pieces else self.header_length
        return module

    def _reassemble(self, layout: Layout, change: Optional[Change]) -> None:
        """The module of the pieces after an edit, and its index: `change` updates the last
        one, None builds it anew."""
        previous = self.module
        self.module = self._module(layout)
        if change is None:
            self.index = DocumentIndex(self.module, [part for piece in self.pieces for part in piece.parts()])
            self.texts = {}
            return
        for node in change.gone:
            self.texts.pop(node, None)
        self.texts.pop(previous, None)
        self.index.splice(self.module, change.removed, change.added)

    def placed(self, ctx: Context) -> "PiecePositions":
        return PiecePositions(ctx, dict(zip((piece.statement for piece in self.pieces),
                                            zip(self.starts, self.pieces))))

    # Editing ---------------------------------------------------------------------------------

    def edit(self, text: str) -> Optional[int]:
        """Bring the pieces up to `text` by parsing what the edit touched: the characters
        parsed, or None when only a parse of the whole text will do (nothing changed then)."""
        same_start, same_end = common_ends(self.text, text)
        reparsed = self._edit_members(text, same_start, len(self.text) - same_end)
        if reparsed is not None:
            return reparsed
        region = self._region(same_start, same_end)
        for _ in range(_GROWTH):
            step = self._splice(text, region)
            if isinstance(step, Done):
                return step.reparsed
            if not isinstance(step, Grow):
                return None
            region = step.region
        return None

    def _whole(self, region: Region) -> bool:
        return region.start == 0 and region.end == len(self.text)

    def _region(self, same_start: int, same_end: int) -> Region:
        """The pieces an edit touches, given how many characters at the start and at the end
        of the text it left alone."""
        first = min(self._piece_at(same_start), len(self.pieces) - 1)  # the footer: the last block may own it
        if 0 < first and same_start <= self.starts[first] + self.pieces[first].first_token \
                and isinstance(self.pieces[first - 1].statement, cst.BaseCompoundStatement):
            first -= 1  # the edit reaches into the leading lines: the block before may own them now
        last = max(self._piece_at(len(self.text) - same_end), first, 0)
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

    def _edit_members(self, text: str, start: int, end: int) -> Optional[int]:
        """An edit inside the statements of one top-level class (characters `start`..`end` of
        the previous text replaced): those statements parsed again inside a stand-in class
        written at the same indentation, the class rebuilt around them; the characters parsed.
        None when the edit reaches the class's own lines, or the usual conditions (see the
        module) do not hold there; the top-level statements are then parsed instead."""
        at = self._piece_at(start)
        if not 0 <= at < len(self.pieces) or not self.pieces[at].members:
            return None
        piece, base, module = self.pieces[at], self.starts[at], self.module
        members, starts = piece.members, piece.member_starts
        block = piece.block()
        indent = block.indent or module.default_indent
        members_end = starts[-1] + members[-1].length
        if start - base < starts[0] or end - base >= members_end or indent != module.default_indent:
            return None
        first, last = bisect_right(starts, start - base) - 1, bisect_right(starts, end - base) - 1
        if first > 0 and start - base <= starts[first] + members[first].first_token \
                and isinstance(members[first - 1].statement, cst.BaseCompoundStatement):
            first -= 1  # the method before may own the comment lines typed
        if last + 1 < len(members) and self._indented_past(base + starts[last + 1], members[last + 1].first_token,
                                                           indent):
            last += 1  # the edited method's block could own those lines now
        if last == len(members) - 1 and (block.footer or base + members_end >= len(self.text) or at + 1 < len(
                self.pieces) and self._leading_indented(at + 1, "")):
            return None  # lines after the class could change owner, or the file's last newline
        region_start = base + starts[first]
        region_end = base + starts[last] + members[last].length + len(text) - len(self.text)
        source = text[region_start:region_end]
        new = reparsed_members(source, module, block)
        if new is None:
            return None
        low = members[first - 1].end if first > 0 else piece.index.pre[block] + 1
        high = members[last + 1].index.first if last + 1 < len(members) else piece.index.post[block]
        if not number(new, low, high):
            return None
        rebuilt = piece.with_members(first, last, new, source, len(text) - len(self.text))
        self.pieces[at] = rebuilt
        self.text = text
        replaced = members[first:last + 1]
        self._reassemble(Layout.of(module), Change(
            [member.index for member in replaced] + [piece.index], [member.index for member in new] + [rebuilt.index],
            [piece.statement, block, *(node for member in replaced for node in member.spans)]))
        return len(source)

    def _leading_indented(self, at: int, indent: str) -> bool:
        return self._indented_past(self.starts[at], self.pieces[at].first_token, indent)

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

    def _splice(self, text: str, region: Region) -> Step:
        """Parse `region` of `text` and put its pieces in place."""
        if self._whole(region):
            return WHOLE
        old_length = len(self.text)
        source = text[region.start:region.end + len(text) - old_length]
        parsed = parse("", source)
        if isinstance(parsed, Finding):
            return WHOLE
        at_start, at_end = region.start == 0, region.end == old_length
        if not at_end and (parsed.footer or not parsed.has_trailing_newline):
            return Grow(self._span(region.first, region.last + 1))  # trailing lines: the next statement's
        if not parsed.body and not at_end:
            # no statement left: the next one's leading lines are read with these (at the start,
            # libcst gives the header every line up to the last blank one before a statement)
            return Grow(self._span(region.first, region.last + 1))
        if not at_start and not parsed.body:
            return WHOLE
        body = list(parsed.body)
        if not at_start and parsed.header:
            body[0] = body[0].with_changes(leading_lines=(*parsed.header, *body[0].leading_lines))
        new = [written(statement, parsed) for statement in body]
        if not _writes_back(source, parsed, new, at_start, at_end):
            return WHOLE
        kept_before = self.pieces[:max(region.first, 0)]
        replaced = self.pieces[max(region.first, 0):region.last + 1]
        kept_after = self.pieces[region.last + 1:] if region.last < len(self.pieces) else []
        layout = self._layout(parsed, new, kept_before, kept_after, region, source)
        if layout is None:
            return WHOLE
        # Nothing can fail from here on: the kept pieces may be renumbered.
        renumbered = not number(new, kept_before[-1].end if kept_before else 0,
                                kept_after[0].index.first if kept_after else None)
        if renumbered:
            number(kept_before + new + kept_after, 0, None)
        if at_start:
            self.header = parsed.header
        if at_end:
            self.footer = parsed.footer
        self.pieces = kept_before + new + kept_after
        self.text = text
        self._reassemble(layout, None if renumbered else Change(
            [part for piece in replaced for part in piece.parts()], [part for piece in new for part in piece.parts()],
            [node for piece in replaced for node in piece.nodes()]))
        return Done(len(source))

    def _layout(self, parsed: cst.Module, new: List[Piece], before: List[Piece], after: List[Piece],
                region: Region, source: str) -> Optional[Layout]:
        """The layout of the whole text, or None when the region's own would change how the
        kept pieces were read."""
        module = self.module
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
        return Layout(indent, newline, encoding, trailing)


def _writes_back(source: str, parsed: cst.Module, new: List[Piece], at_start: bool, at_end: bool) -> bool:
    """The region's header, pieces and footer write back exactly its text (libcst does not
    write back every text it parses: odd continuations)."""
    code = "".join((lines_code(parsed, parsed.header) if at_start else "", *(piece.code for piece in new),
                    lines_code(parsed, parsed.footer) if at_end else ""))
    if at_end and not parsed.has_trailing_newline:  # libcst added the newline the text ends without
        return code.startswith(source) and code[len(source):] in ("", "\n", "\r\n", "\r")
    return code == source


class Document:
    """The parsed state of one editor buffer, brought up to date version by version."""

    def __init__(self) -> None:
        self.version: Optional[Version] = None  # the last text that parsed
        self.reparsed = 0  # characters parsed by the last update (bench/incremental_check.py and the tests read it)
        self.failure: Optional[Failure] = None  # the last text that did not parse whole

    @property
    def text(self) -> Optional[str]:
        return self.version.text if self.version is not None else None

    @property
    def module(self) -> Optional[cst.Module]:
        return self.version.module if self.version is not None else None

    @property
    def index(self) -> Optional[DocumentIndex]:
        return self.version.index if self.version is not None else None

    def lint(self, path: str, text: str, rules: Sequence, display: str, probes: bool = True
             ) -> Tuple[List[Finding], bool]:
        """What `lint_text` gives for `text` (findings, a rule crashed), reusing what the last
        version parsed. `probes`: False leaves out what the verifier runs (about a third of
        the rules' time)."""
        if not rules:
            return [], False
        collecting = gc.isenabled()
        gc.disable()  # see lint_module: the trees are acyclic
        try:
            version = self.update(text)
            if version is None:
                return self._unparsed(path, text, rules, display)
            try:
                ctx = Context(display, text, version.module, version.index, version.texts, probes)
                located, crashed = reports_of(ctx, rules, positions=version.placed)
            except RecursionError:
                return [bad_input(display, "file is nested too deeply to analyse")], False
            return [finding for finding, _ in located] + crashed, bool(crashed)
        finally:
            if collecting:
                gc.enable()

    def _unparsed(self, path: str, text: str, rules: Sequence, display: str) -> Tuple[List[Finding], bool]:
        """A text libcst cannot parse whole: the command line's answer."""
        if self.failure is not None and self.failure.text == text and facts_of(text) is None:
            # lint_text's answer, when CPython cannot parse it either
            return [replace(self.failure.finding, path=display)], False
        return lint_text(path, text, rules, display)

    def _positions(self, ctx: Context) -> "PiecePositions":
        assert self.version is not None, "positions of a document that parsed"
        return self.version.placed(ctx)

    def update(self, text: str) -> Optional[Version]:
        """Bring the pieces up to `text`; None when libcst cannot parse it (or its code does
        not write back to the text, or nests too deeply to walk): the caller lints it the
        command line's way, and the next edit starts from the last version that parsed. A
        half-updated version never outlives an error: it is dropped."""
        try:
            updated = self._update(text)
        except RecursionError:
            self.version = None
            return None
        except Exception:
            self.version = None
            raise
        if updated is not None:
            self.version = updated
        return updated

    def _update(self, text: str) -> Optional[Version]:
        version = self.version
        if version is not None and text == version.text:
            self.reparsed = 0
            return version
        if version is not None:
            reparsed = version.edit(text)
            if reparsed is not None:
                self.reparsed = reparsed
                return version
        fresh = Version.parsed(text)
        if isinstance(fresh, Failure):
            self.failure = fresh
            return None
        if fresh is not None:
            self.reparsed = len(text)
        return fresh


class PiecePositions:
    """Positions from each piece's spans, kept since the piece was parsed: no code generation
    (but for the module itself)."""

    def __init__(self, ctx: Context, where: Dict[cst.CSTNode, Tuple[int, Piece]]) -> None:
        self.ctx = ctx
        self.lines = Lines(ctx.source)
        self.where = where
        self.whole: Optional[Positions] = None  # the module's own span: its code generated

    def get(self, node: cst.CSTNode) -> Place:
        top = top_statement(self.ctx, node)
        if top is None:  # the module itself
            self.whole = self.whole or Positions(self.ctx)
            return self.whole.get(node)
        offset, piece = self.where[top]
        member = piece.member_at(node, self.ctx.parent) if piece.members else None
        if member is not None:
            offset, piece = offset + member[0], member[1]
        start, end = piece.spans[node]
        return self.lines.place(offset + start, offset + end)
