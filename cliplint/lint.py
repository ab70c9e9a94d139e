"""One Python source text to findings: the prefilter, the ast gate, the reduced parse, the rules.

Parsing with libcst (`analysis.py`) is imported only when some rule could fire in the text:
most files of a tree never pay for it.
"""
from __future__ import annotations

import gc
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from .files import decode_python
from .findings import Finding

if TYPE_CHECKING:
    from .facts import Facts


def prefilter(data: bytes, rules: Sequence) -> bool:
    """True when some enabled rule's marker token occurs in the raw bytes."""
    return any(token in data for rule in rules for token in rule.tokens)


def lint_bytes(path: str, data: bytes, rules: Sequence, display_path: Optional[str] = None
               ) -> Tuple[List[Finding], bool]:
    shown = display_path or path
    if not prefilter(data, rules):
        # Still report undecodable or binary files: the user asked for them to be linted.
        _, failure = decode_python(shown, data)
        return ([failure] if failure else []), False
    text, failure = decode_python(shown, data)
    if failure:
        return [failure], False
    return lint_text(path, text, rules, shown)


def lint_text(path: str, text: str, rules: Sequence, shown: str) -> Tuple[List[Finding], bool]:
    """Python source (a file, or a notebook's cells as one program): the ast gate, the reduced
    parse, then the rules."""
    from .facts import Facts, cpython_tree  # CPython's ast: imported only when a file passes the prefilter

    tree = _without_gc(cpython_tree, text)  # the ast gate's, and the nesting gate's (analysis.too_complex)
    facts = _without_gc(Facts, tree) if tree is not None else None
    rules = gate(facts, rules)
    if not rules:
        return [], False
    lines = None
    if facts is not None:
        words = {token.decode() for rule in rules for token in (*rule.tokens, *rule.context_tokens)}
        text, lines = facts.reduced(text, sorted(words))
    from .analysis import lint_module  # libcst is imported only when a file is parsed

    return lint_module(path, text, rules, shown, lines, tree)


def facts_of(text: str) -> Optional["Facts"]:
    """CPython-ast facts about `text` (None when CPython cannot parse it)."""
    from .facts import Facts  # CPython's ast: imported only when a file passes the prefilter

    return _without_gc(Facts.of, text)


def _without_gc(function, argument):
    collecting = gc.isenabled()
    gc.disable()  # an ast is ~10^4 acyclic nodes: the cycle collector would only slow it down
    try:
        return function(argument)
    finally:
        if collecting:
            gc.enable()


def gate(facts: Optional["Facts"], rules: Sequence) -> Sequence:
    """The rules that could fire, judged from the facts (all of them when CPython could not
    parse the text: the CST parser then reports why)."""
    return rules if facts is None else [rule for rule in rules if rule.could_fire(facts)]
