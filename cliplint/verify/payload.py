"""What is sent to the worker for one finding: the payload read back into its probe class
(`cliplint.probes`), then each field prepared by its type: every snippet rebuilt by layer 1, every
name checked to be a dotted chain of public names, every other field checked for its shape; or the
reason the finding is `skipped`."""
from __future__ import annotations

from dataclasses import fields
from typing import Union

from ..probes import STAND_IN, Attribute, Malformed, Name, Options, Probe, Snippet, field_types, parse, shape
from .allowlist import SETTABLE, identifier
from .rebuild import Refused, rebuild

ENVELOPE = ("rule", "fixed")  # set around the probe's own fields: its rule, and a fix's replay


def prepare(probe: dict, unchecked: bool = False) -> Union[dict, str]:
    """The payload with its snippets rebuilt, or why it must not run. `unchecked` (the test-only
    hook) sends the snippets as written."""
    if unchecked:
        return probe
    try:
        typed = parse(str(probe.get("rule")), {k: v for k, v in probe.items() if k not in ENVELOPE})
    except (Malformed, TypeError) as malformed:
        return f"it uses {malformed}"
    notes: list = []
    prepared: dict = {"kind": typed.kind, **{k: probe[k] for k in ENVELOPE if k in probe}}
    try:
        for declared, hint in _fields(typed):
            value = _prepared(typed, declared, hint, notes)
            if value is not None:  # an absent field, as the probe functions read it (`"compile" in probe`)
                prepared[declared.name] = value
    except Refused as refusal:
        return f"it uses {refusal}"
    prepared["notes"] = list(dict.fromkeys(notes))
    return prepared


def _fields(typed: Probe):
    hints = field_types(type(typed))
    return [(declared, hints[declared.name]) for declared in fields(typed)]


def _prepared(typed: Probe, declared, hint, notes: list):
    value = getattr(typed, declared.name)
    item, _, many = shape(hint)
    try:
        if many:
            return [_item(item, v, notes) for v in value]
        return None if value is None else _item(item, value, notes)
    except Refused as refusal:
        note = declared.metadata.get(STAND_IN)
        if note is None:
            raise
        code = " ".join(value.code.split())[:60]
        notes.append(note.format(code=code, refusal=f"it uses {refusal}", activation=typed.kind.replace("1-", "")))
        return None


def _item(item, value, notes: list):
    if item is Snippet:
        rebuilt = rebuild(value.wire())
        notes.extend(rebuilt.pop("notes"))
        return rebuilt
    if item is Name:
        return _dotted(value)
    if item is Attribute and value not in SETTABLE:
        raise Refused(f"a change of the attribute `{value}`")
    if item is Options:  # a config file's optimizer options: numbers only
        return {k: v for k, v in value.items() if _dotted(k) and isinstance(v, (int, float, bool, type(None)))}
    return value


def _dotted(text) -> str:
    """A name or a dotted chain of public names (what the probe may bind), else refused."""
    parts = identifier(str(text)).split(".")
    if not all(part.isidentifier() and not part.startswith("_") for part in parts):
        raise Refused(f"the expression `{str(text)[:60]}` where a name was expected")
    return ".".join(parts)
