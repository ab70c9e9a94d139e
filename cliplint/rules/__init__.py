"""Rule base class and registry.

A rule is one small class (Fixit style) carrying its code, kebab-case name, severity, a
three-part doc (why / example / use instead) from which its page is generated, the byte
tokens without which it cannot fire (the engine's prefilter), and VALID/INVALID examples the
test suite runs (tests/test_rule_examples.py); the page only says how many there are.
"""
from __future__ import annotations

import importlib
import pkgutil
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Optional, Tuple

from ..analysis import Context
from ..facts import Facts
from ..findings import Report
from ..names import APPLICATIONS, PROBABILITY_WORDS

if TYPE_CHECKING:  # the config readers (PyYAML) are loaded only to audit a config
    from ..configs import ConfigOptimizer


@dataclass(frozen=True)
class Invalid:
    """An example that must produce a finding of the rule at `line` (1-based)."""

    source: str
    line: int
    contains: Optional[str] = None  # a phrase the message must include
    severity: Optional[str] = None


class Rule:
    code: str = ""
    name: str = ""
    summary: str = ""
    severity: str = "error"
    tokens: Tuple[bytes, ...] = ()
    # Words that change the rule's result wherever they occur in the module (not only where it
    # reports): definitions holding one are never left out of the parse (`reduction.reduced`).
    context_tokens: Tuple[bytes, ...] = ()
    why: str = ""
    example: str = ""
    instead: str = ""
    fixes: str = ""  # what `--fix` does and its safety (the rule page's "Fix" section)
    VALID: List[str] = []
    INVALID: List[Invalid] = []

    def could_fire(self, facts: Facts) -> bool:
        """From `facts.Facts` (CPython's ast): can this rule fire in the module at all? Must never
        say no where `check` would report (over-approximate)."""
        return True

    def check(self, ctx: Context) -> Iterator[Report]:
        raise NotImplementedError

    def check_config(self, optimizer: "ConfigOptimizer") -> Iterator[Report]:
        """Reports about an optimizer written as data in a training config or a `.keras`
        archive; a report's `node` is the offending key. Most rules have none."""
        return iter(())

    @classmethod
    def doc(cls) -> str:
        """The rule's Markdown page: why it is bad, example, use instead."""
        parts = [
            f"# {cls.code} {cls.name}",
            "",
            f"{cls.summary}",
            "",
            f"Default severity: **{cls.severity}**.",
            "",
            "## Why is this bad?",
            "",
            textwrap.dedent(cls.why).strip(),
            "",
            "## Example",
            "",
            "```python",
            textwrap.dedent(cls.example).strip(),
            "```",
            "",
            "## Use instead",
            "",
            "```python",
            textwrap.dedent(cls.instead).strip(),
            "```",
            "",
            *(["## Fix", "", textwrap.dedent(cls.fixes).strip(), ""] if cls.fixes else []),
            f"Examples checked by the test suite: {len(cls.VALID)} valid, {len(cls.INVALID)} invalid.",
            "",
        ]
        return "\n".join(parts)


def makes_probabilities(facts: Facts) -> bool:
    """The gate of the rules that need a probability: the module could make one (a library
    softmax/sigmoid, an activation string, one written out with `exp`, or a Keras application's
    classifier, softmax by default with no word of it written)."""
    return facts.has(*PROBABILITY_WORDS) or facts.refers_to(APPLICATIONS)


def _discover() -> Dict[str, Rule]:
    found: Dict[str, Rule] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.code:
                found[value.code] = value()
    return dict(sorted(found.items()))


ALL_RULES: Dict[str, Rule] = _discover()


def selected(codes: Iterable[str]) -> List[Rule]:
    """The rules of `codes` in code order (codes no rule has, CL000 among them, are skipped):
    the one place a selection of codes becomes rules."""
    return [ALL_RULES[code] for code in sorted(codes) if code in ALL_RULES]
