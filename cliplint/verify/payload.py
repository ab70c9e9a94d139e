"""What is sent to the worker for one finding: every snippet rebuilt by layer 1, every other field
checked for its shape, or the reason the finding is `skipped`."""
from __future__ import annotations

from typing import Union

from .allowlist import SETTABLE, identifier
from .rebuild import Refused, rebuild

# Snippets a probe can do without: when layer 1 refuses one, the probe stands in for its value
# (CL004: the softmax/sigmoid of stand-in logits for a producer built with `slim` or a model).
OPTIONAL_SNIPPETS = {"source": "the probabilities' producer `{}` is not run ({}): the {} of stand-in logits stands in "
                               "for its output"}
# Fields the probes parse as a name or a `name.attribute` to bind their stand-ins to; never run.
NAME_FIELDS = ("gradients", "variables", "result")


def prepare(probe: dict, unchecked: bool = False) -> Union[dict, str]:
    """The payload with its snippets rebuilt, or why it must not run. `unchecked` (the test-only
    hook) sends the snippets as written."""
    if unchecked:
        return probe
    prepared: dict = {"notes": []}
    try:
        for field, value in probe.items():
            prepared[field] = _optional(field, value, probe, prepared["notes"])
    except Refused as refusal:
        return f"it uses {refusal}"
    prepared["notes"] = list(dict.fromkeys(prepared["notes"]))
    return prepared


def _optional(field: str, value, probe: dict, notes: list):
    try:
        return _field(field, value, notes)
    except Refused as refusal:
        if field not in OPTIONAL_SNIPPETS or not _is_snippet(value):
            raise
        code = " ".join(str(value["code"]).split())
        kind = str(probe.get("kind", "")).replace("1-", "")
        notes.append(OPTIONAL_SNIPPETS[field].format(code[:60], f"it uses {refusal}", kind))
        return None


def _field(field: str, value, notes: list):
    if _is_snippet(value):
        return _snippet(value, notes)
    if isinstance(value, list) and value and all(_is_snippet(v) for v in value):
        return [_snippet(v, notes) for v in value]
    if field in NAME_FIELDS and value is not None:
        return _dotted(value)
    if field == "appends":
        return [_dotted(name) for name in value]
    if field == "attribute" and value not in SETTABLE:
        raise Refused(f"a change of the attribute `{value}`")
    if field == "options":  # a config file's optimizer options: numbers only
        return {k: v for k, v in value.items() if _dotted(k) and isinstance(v, (int, float, bool, type(None)))}
    if field == "class_name":
        return _dotted(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise Refused(f"an unexpected `{field}` field")


def _is_snippet(value) -> bool:
    return isinstance(value, dict) and "code" in value


def _snippet(snippet: dict, notes: list) -> dict:
    rebuilt = rebuild(snippet)
    notes.extend(rebuilt.pop("notes"))
    return rebuilt


def _dotted(text) -> str:
    """A name or a dotted chain of public names (what the probe may bind), else refused."""
    parts = identifier(str(text)).split(".")
    if not all(part.isidentifier() and not part.startswith("_") for part in parts):
        raise Refused(f"the expression `{str(text)[:60]}` where a name was expected")
    return ".".join(parts)
