"""An update written in place is the binary operation it abbreviates: `x op= y` binds `x` to
`x op y` in the value-flow engine (`flow.local.Dataflow._written_out`), for every rule. Every
rule's examples, the golden fixtures and a sample of the generated matrix are rewritten both ways
(each `x = x op y` as `x op= y`, each `x op= y` as `x = x op y`), and each variant must give the
same findings, on the same lines, as the original."""
from __future__ import annotations

import random
import re
from pathlib import Path
from typing import List, Tuple, Union

import libcst as cst
import pytest
from flow_matrix import CARRIERS, matrix

from cliplint.lint import lint_text
from cliplint.rules import ALL_RULES

RULES = list(ALL_RULES.values())
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# A line that may be rewritten: `x op= y`, or `x = x op ...` (parsing every program would take minutes).
UPDATE = re.compile(r"^ *(?:[\w.]+ *(?:[-+*/@%]|//|\*\*)=|([\w.]+) = \1 (?:[-+*/@%]|//|\*\*) )", re.M)
MATRIX_SAMPLE = 150  # generated programs (`bench/flow_matrix.py` runs the whole matrix)
ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString)


class InPlace(cst.CSTTransformer):
    """`x = x op y` -> `x op= y` (a single target, the operation's left side the target itself)."""

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> Union[cst.Assign, cst.AugAssign]:
        value = updated.value
        if len(updated.targets) != 1 or not isinstance(value, cst.BinaryOperation) or value.lpar:
            return updated
        target = updated.targets[0].target
        if not isinstance(target, (cst.Name, cst.Attribute)) or not target.deep_equals(value.left):
            return updated
        operator = getattr(cst, type(value.operator).__name__ + "Assign")()
        return cst.AugAssign(target, operator, value.right)


class WrittenOut(cst.CSTTransformer):
    """`x op= y` -> `x = x op (y)` (parentheses unless `y` is an atom)."""

    def leave_AugAssign(self, original: cst.AugAssign, updated: cst.AugAssign) -> Union[cst.AugAssign, cst.Assign]:
        if not isinstance(updated.target, (cst.Name, cst.Attribute)):
            return updated
        right = updated.value
        if not isinstance(right, ATOMS):
            right = right.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        operator = getattr(cst, type(updated.operator).__name__[:-len("Assign")])()
        return cst.Assign([cst.AssignTarget(updated.target)], cst.BinaryOperation(updated.target, operator, right))


def _rewritten(text: str, transformer: cst.CSTTransformer) -> str:
    try:
        return cst.parse_module(text).visit(transformer).code
    except cst.ParserSyntaxError:
        return text


def _sources() -> List[Tuple[str, str]]:
    found = [(f"{rule.code}-{kind}-{i}", getattr(example, "source", example)) for rule in RULES
             for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID))
             for i, example in enumerate(examples)]
    found += [(str(path.relative_to(FIXTURES)), path.read_text()) for path in sorted(FIXTURES.rglob("*.py"))]
    programs = [(f"matrix-{program.label}{suffix}", text) for program in matrix()
                for suffix, text in [("", program.text)] + [(f"-twin-{i}", t) for i, t in enumerate(program.twins)]
                if UPDATE.search(text)]
    return found + random.Random(3).sample(programs, min(MATRIX_SAMPLE, len(programs)))


def _variants() -> List[Tuple[str, str, str]]:
    variants = []
    for label, text in _sources():
        for name, transformer in (("in-place", InPlace()), ("written-out", WrittenOut())):
            changed = _rewritten(text, transformer)
            if changed != text:
                variants.append((f"{label}-{name}", text, changed))
    return variants


def _findings(text: str) -> List[Tuple[str, int]]:
    return sorted((f.code, f.line) for f in lint_text("m.py", text, RULES, "m.py")[0])


VARIANTS = _variants()


def test_both_ways_are_generated():
    """Enough programs of each direction that the test means something."""
    kinds = [label.rsplit("-", 2)[-2:] for label, _, _ in VARIANTS]
    assert sum(k == ["in", "place"] for k in kinds) >= 5 and sum(k == ["written", "out"] for k in kinds) >= 100
    assert "augmented +=" in CARRIERS and "masked *=" in CARRIERS


@pytest.mark.parametrize("original, text", [(o, t) for _, o, t in VARIANTS], ids=[label for label, _, _ in VARIANTS])
def test_an_update_in_place_is_its_binary_operation(original, text):
    assert _findings(text) == _findings(original), text
