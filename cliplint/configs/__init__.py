"""Auditors for optimizer settings in YAML, JSON and TOML training configs and `.keras` archives.

Many teams never write `Adam(clipnorm=...)` in code: the optimizer comes from a config file
(`optimizer: {class_name: Adam, config: {...}}`, a Hydra `_target_`, a sweep JSON, a TOML
table) or from a saved model. The same mistakes live there: CL001 (several clip options on
one optimizer) and CL009 (a clip threshold <= 0).

A mapping is an optimizer mapping when it has a clip key *and* a marker: a known optimizer as
`class_name`/`name`/`type`/`_target_`/`optimizer`, or a `learning_rate`/`lr` key; the Keras
serialized form `{class_name: Adam, config: {...}}` counts through its `class_name`. Unrelated
`clipvalue` keys elsewhere are not reported.
"""
from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

from ..findings import Finding
from ..suppress import file_noqa, noqa_lines, suppressed
from .readers import Tree, read_json, read_keras, read_toml, read_yaml

CLIP_KEYS = ("clipnorm", "clipvalue", "global_clipnorm")
MARKER_KEYS = ("class_name", "name", "type", "_target_", "optimizer", "cls", "class_path")
RATE_KEYS = ("learning_rate", "lr")
OPTIMIZERS = {"adam", "sgd", "rmsprop", "adamw", "adagrad", "adadelta", "adamax", "nadam", "ftrl", "lion",
              "adafactor", "lamb", "lossscaleoptimizer"}
NOT_KERAS = ("torch.", "optax.", "jax.", "flax.", "paddle.", "mxnet.")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".keras")
READERS = {".yaml": read_yaml, ".yml": read_yaml, ".json": read_json, ".toml": read_toml, ".keras": read_keras}
TOKENS = (b"clipnorm", b"clipvalue")


def _optimizer_name(value) -> Optional[str]:
    """'Adam' for 'adam', 'Adam', 'tensorflow.keras.optimizers.Adam'; None for anything else."""
    if not isinstance(value, str) or value.startswith(NOT_KERAS):
        return None
    last = value.rsplit(".", 1)[-1]
    return last if last.lower() in OPTIMIZERS else None


def _is_optimizer(mapping: dict, parent: Optional[dict]) -> Optional[str]:
    """The optimizer's name (or '?' when only a learning rate marks it), else None."""
    for key in MARKER_KEYS:
        if key in mapping and isinstance(mapping[key], str):
            name = _optimizer_name(mapping[key])
            if name:
                return name
            if mapping[key].startswith(NOT_KERAS):
                return None
    if parent is not None and isinstance(parent.get("config"), dict) and parent["config"] is mapping:
        name = _optimizer_name(parent.get("class_name"))
        if name:
            return name
    if any(key in mapping for key in RATE_KEYS):
        return "?"
    return None


def _set(value) -> bool:
    return value is not None and not isinstance(value, bool) and isinstance(value, (int, float))


def audit(path: str, data, codes, display: str) -> List[Finding]:
    """CL001/CL009 findings (and CL000 for unreadable files) for one config file, given as bytes,
    or a `.keras` archive, given as its path (only its config.json is read)."""
    suffix = "." + path.rsplit(".", 1)[-1].lower() if "." in path else ""
    reader = READERS.get(suffix)
    if reader is None:
        return []
    if suffix != ".keras" and not any(token in data for token in TOKENS):
        return []
    tree, failure = reader(display, data)
    if failure is not None:
        return [failure]
    findings = list(_walk(tree, tree.root, (), None, display, codes))
    if suffix == ".keras":
        return findings
    text = data.decode("utf-8", errors="replace")
    noqa = noqa_lines(text)
    file_level, file_codes = file_noqa(text)
    return [f for f in findings
            if not (file_level and (file_codes is None or f.code in file_codes))
            and not suppressed(f.code, range(f.line, f.line + 1), noqa)]


def _walk(tree: Tree, node, path: Tuple[str, ...], parent, display: str, codes) -> Iterator[Finding]:
    if isinstance(node, dict):
        if any(key in node for key in CLIP_KEYS):
            name = _is_optimizer(node, parent)
            if name is not None:
                yield from _check(tree, node, path, parent, name, display, codes)
        for key, value in node.items():
            yield from _walk(tree, value, path + (str(key),), node, display, codes)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(tree, item, path + (str(index),), parent, display, codes)


def _check(tree: Tree, mapping: dict, path, parent, name: str, display: str, codes) -> Iterator[Finding]:
    present = [key for key in CLIP_KEYS if key in mapping and _set(mapping[key])]
    dotted = ".".join(path)
    probe = _probe(mapping, parent, name)
    if "CL001" in codes and len(present) > 1:
        key = present[-1]
        line, column = tree.position(mapping, key, path + (key,))
        listed = " and ".join(f"`{dotted + '.' if dotted else ''}{k}`" for k in present)
        if "clipnorm" in present and "global_clipnorm" in present:
            effect = "every Keras flavour raises ValueError when this optimizer is built"
        else:
            effect = ("Keras 3 raises ValueError when this optimizer is built; tf-keras silently ignores `clipvalue`; "
                      "legacy optimizers apply both")
        yield Finding(display, line, column, line, column + len(key), "CL001", "conflicting-clip-options", "error",
                      f"{listed} are both set on one optimizer: {effect}. Keep one option.", probe)
    if "CL009" in codes:
        for key in present:
            if mapping[key] <= 0:
                line, column = tree.position(mapping, key, path + (key,))
                where = f"{dotted + '.' if dotted else ''}{key}"
                yield Finding(display, line, column, line, column + len(key), "CL009", "invalid-clip-threshold",
                              "error", f"`{where}: {mapping[key]:g}` does not clip: Keras 3 and tf-keras silently "
                              f"turn clipping off (tf-keras legacy optimizers zero every gradient for 0 and reject "
                              f"negative values). Use a positive threshold, or remove the key.", probe)


def _probe(mapping: dict, parent, name: str) -> dict:
    """The optimizer as data for the verifier: a known class and its numeric/boolean options."""
    if parent is not None and parent.get("config") is mapping and _optimizer_name(parent.get("class_name")):
        name = _optimizer_name(parent.get("class_name"))
    options = {("learning_rate" if k == "lr" else k): v for k, v in mapping.items()
               if isinstance(k, str) and isinstance(v, (int, float)) and v == v and abs(v) != float("inf")}
    return {"kind": "config", "class_name": name if name != "?" else "SGD", "assumed_class": name == "?",
            "options": options}
