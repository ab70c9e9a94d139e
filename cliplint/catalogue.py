"""Every rule's code, name and marker tokens, without importing the rules (and libcst with them).

Configuration (`select`, `ignore`), cached runs and the token prefilter need these, but parsing
is what imports libcst. `GENERATED` and `TOKENS` are written by `python -m cliplint.docs` from
the rule classes (a test keeps them in step). A rule module that it does not list yet (one just added) is
read with CPython's `ast` instead, so a new rule is selectable before the file is regenerated.
"""
from __future__ import annotations

import os
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Tuple

from .findings import UNREADABLE

# generated: begin
GENERATED = {
    "CL001": ("conflicting-clip-options", "conflicting_clip_options"),
    "CL002": ("optimizer-changed-after-compile", "optimizer_changed_after_compile"),
    "CL003": ("per-tensor-clip-norm", "per_tensor_clip_norm"),
    "CL004": ("log-of-softmax", "log_of_softmax"),
    "CL005": ("unfiltered-none-gradients", "unfiltered_none_gradients"),
    "CL006": ("clip-result-not-unpacked", "clip_result_not_unpacked"),
    "CL007": ("clipped-gradients-unused", "clipped_gradients_unused"),
    "CL008": ("removed-numerics-check", "removed_numerics_check"),
    "CL009": ("invalid-clip-threshold", "invalid_clip_threshold"),
    "CL010": ("softmax-then-from-logits", "softmax_then_from_logits"),
    "CL011": ("unstable-formula", "unstable_formula"),
    "CL012": ("probabilities-loss-on-logits", "probabilities_loss_on_logits"),
    "CL013": ("single-unit-softmax", "single_unit_softmax"),
    "CL014": ("nan-gradient-at-zero", "nan_gradient_at_zero"),
    "CL015": ("where-nan-gradient", "where_nan_gradient"),
}
TOKENS = {
    "CL001": ('clipnorm', 'clipvalue'),
    "CL002": ('compile', 'Callback', 'callbacks'),
    "CL003": ('clip_by_norm',),
    "CL004": ('softmax', 'sigmoid', 'Softmax', 'exp', 'applications'),
    "CL005": ('gradient',),
    "CL006": ('clip_by_global_norm',),
    "CL007": ('clip_by',),
    "CL008": ('add_check_numerics_ops',),
    "CL009": ('clipnorm', 'clipvalue', 'clip_by'),
    "CL010": ('from_logits', '_cross_entropy', 'sequence_loss'),
    "CL011": ('exp',),
    "CL012": ('rossentropy',),
    "CL013": ('softmax', 'Softmax'),
    "CL014": ('norm', 'sqrt', 'std'),
    "CL015": ('where',),
}
# generated: end
RULES_FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")


def tokens(codes_: Iterable[str]) -> Optional[Tuple[bytes, ...]]:
    """The marker tokens of these rules (`Rule.tokens`), or None when one of them is not in the
    table yet (then the rules themselves must be asked)."""
    found: List[bytes] = []
    for code in codes_:
        if code == UNREADABLE.code:
            continue
        if code not in TOKENS:
            return None
        found.extend(token.encode() for token in TOKENS[code])
    return tuple(found)


def any_rule_tokens() -> Tuple[bytes, ...]:
    """Every rule's marker tokens."""
    return tuple(token.encode() for listed in TOKENS.values() for token in listed)


@lru_cache(maxsize=1)
def codes() -> Dict[str, str]:
    """Code -> name of CL000 and every rule, sorted by code."""
    found = {code: name for code, (name, _) in GENERATED.items()}
    listed = {module for _, module in GENERATED.values()}
    for module in rule_modules():
        if module not in listed:
            found.update(_declared(os.path.join(RULES_FOLDER, module + ".py")))
    return {UNREADABLE.code: UNREADABLE.name, **dict(sorted(found.items()))}


def names() -> Dict[str, str]:
    """Name -> code."""
    return {name: code for code, name in codes().items()}


def rule_modules() -> Tuple[str, ...]:
    """The modules of the rules package (a folder listing: nothing is imported)."""
    return tuple(sorted(entry[:-3] for entry in os.listdir(RULES_FOLDER)
                        if entry.endswith(".py") and not entry.startswith("_")))


def _declared(path: str) -> Dict[str, str]:
    """`code` and `name` of the rule classes a module declares, read from its syntax tree."""
    import ast  # only for a rule module the generated table does not list yet

    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found: Dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            values = {target.id: statement.value.value for statement in node.body
                      if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
                      for target in statement.targets if isinstance(target, ast.Name)}
            code, name = values.get("code"), values.get("name")
            if isinstance(code, str) and isinstance(name, str):
                found[code] = name
    return found


def generated_source(rules: Dict[str, Tuple[str, str]], markers: Dict[str, Tuple[str, ...]]) -> str:
    """This module's text with `GENERATED` set to `rules` (code -> (name, module)) and `TOKENS`
    to `markers` (code -> tokens)."""
    with open(__file__, encoding="utf-8") as handle:
        text = handle.read()
    head, rest = text.split("# generated: begin\n", 1)
    _, tail = rest.split("# generated: end\n", 1)
    body = "".join(f'    "{code}": ("{name}", "{module}"),\n' for code, (name, module) in sorted(rules.items()))
    listed = "".join(f'    "{code}": {tuple(found)!r},\n' for code, found in sorted(markers.items()))
    return (f"{head}# generated: begin\nGENERATED = {{\n{body}}}\nTOKENS = {{\n{listed}}}\n"
            f"# generated: end\n{tail}")
