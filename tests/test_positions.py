"""The engine's cheap position computation agrees with libcst's PositionProvider on every node."""
import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from cliplint.analysis import Context
from cliplint.facts import statement_lines
from cliplint.positions import Positions

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SOURCES = [p for p in sorted(FIXTURES.glob("*.py")) if p.name != "broken_syntax.py"]
EXTRA = ["x = 1\r\ny = (\r\n  2)\r\n", "\tif a:\n\t\tb = 'é😀'; c = [\n  1,\n]\n" .replace("\t", "", 1),
         "s = f'{a!r:>{w}}'\n", "", "# only a comment\n"]


@pytest.mark.parametrize("source", [p.read_text() for p in SOURCES] + EXTRA)
@pytest.mark.parametrize("wrong_lines", [False, True])
def test_positions_match_position_provider(source, wrong_lines):
    """Statement by statement (or, when the statement lines given are wrong, the whole module
    at once): the same spans as PositionProvider."""
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    lines = statement_lines(ast.parse(source))
    if wrong_lines:
        lines = [line + 1 for line in lines]
    ctx = Context("x.py", source, module)
    mine = Positions(ctx, lines)

    def check(node):
        span = expected[node]
        assert mine.get(node) == (span.start.line, span.start.column + 1, span.end.line, span.end.column + 1), node

    # What findings are placed on: nodes inside the top-level statements.
    for node in ctx.pre:
        if node is not module and ctx.parent.get(node) is not None:
            check(node)
    if module.body and not wrong_lines:
        assert mine.offsets is not None, "the statement-by-statement path was not taken"
    # Everything else too (header comments, whitespace nodes): the whole module is generated.
    for node in expected:
        if node is not module:
            check(node)
