"""The engine's cheap position computation agrees with libcst's PositionProvider on every node."""
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from cliplint.analysis import Positions

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SOURCES = [p for p in sorted(FIXTURES.glob("*.py")) if p.name != "broken_syntax.py"]
EXTRA = ["x = 1\r\ny = (\r\n  2)\r\n", "\tif a:\n\t\tb = 'é😀'; c = [\n  1,\n]\n" .replace("\t", "", 1),
         "s = f'{a!r:>{w}}'\n", "", "# only a comment\n"]


@pytest.mark.parametrize("source", [p.read_text() for p in SOURCES] + EXTRA)
def test_positions_match_position_provider(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    mine = Positions(module)
    assert mine.spans.keys() >= set(expected.keys()) - {module}
    for node, span in expected.items():
        if node is module:
            continue
        assert mine.get(node) == (span.start.line, span.start.column + 1, span.end.line, span.end.column + 1), node
