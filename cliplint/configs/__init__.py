"""Auditors for optimizer settings in YAML, JSON and TOML training configs and `.keras` archives.

Many teams never write `Adam(clipnorm=...)` in code: the optimizer comes from a config file
(`optimizer: {class_name: Adam, config: {...}}`, a Hydra `_target_`, a sweep JSON, a TOML
table) or from a saved model. The same mistakes live there: CL001 (several clip options on
one optimizer) and CL009 (a clip threshold <= 0). This module finds the optimizers; what is
wrong with one is each rule's `check_config`, beside its check of Python code.

A mapping is an optimizer mapping when it has a clip key *and* a marker: a known optimizer as
`class_name`/`name`/`type`/`_target_`/`optimizer`, or a `learning_rate`/`lr` key; the Keras
serialized form `{class_name: Adam, config: {...}}` counts through its `class_name`. Unrelated
`clipvalue` keys elsewhere are not reported.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from ..findings import Finding
from ..names import CLIP_OPTIONS
from ..probes import Config, Name, Options, payload
from ..suppress import file_noqa, noqa_lines, suppressed
from .readers import Tree, read_json, read_keras, read_toml, read_yaml

MARKER_KEYS = ("class_name", "name", "type", "_target_", "optimizer", "cls", "class_path")
RATE_KEYS = ("learning_rate", "lr")
OPTIMIZERS = {"adam", "sgd", "rmsprop", "adamw", "adagrad", "adadelta", "adamax", "nadam", "ftrl", "lion",
              "adafactor", "lamb", "lossscaleoptimizer"}
NOT_KERAS = ("torch.", "optax.", "jax.", "flax.", "paddle.", "mxnet.")
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


@dataclass(frozen=True)
class ConfigOptimizer:
    """An optimizer written as data: what a rule's `check_config` is shown."""

    path: Tuple[str, ...]  # the keys leading to the mapping
    name: str  # the optimizer class ('Adam'), or '?' when only a learning rate marks it
    options: Dict[str, float]  # the clip options set to a number, in CLIP_OPTIONS order

    def where(self, key: str) -> str:
        """The dotted key path of one of its keys: `optimizer.config.clipnorm`."""
        return ".".join((*self.path, key))


def audit(path: str, data, rules: Sequence, display: str) -> List[Finding]:
    """Findings of the rules' config checks (and CL000 for unreadable files) for one config
    file, given as bytes, or a `.keras` archive, given as its path or an open file (only its
    config.json is read)."""
    suffix = "." + path.rsplit(".", 1)[-1].lower() if "." in path else ""
    reader = READERS.get(suffix)
    if reader is None:
        return []
    if suffix != ".keras" and not any(token in data for token in TOKENS):
        return []
    tree = reader(display, data)
    if isinstance(tree, Finding):
        return [tree]
    findings = list(_walk(tree, tree.root, (), None, display, rules))
    if suffix == ".keras":
        return findings
    text = data.decode("utf-8", errors="replace")
    noqa = noqa_lines(text)
    file_level, file_codes = file_noqa(text)
    return [f for f in findings
            if not (file_level and (file_codes is None or f.code in file_codes))
            and not suppressed(f.code, range(f.line, f.line + 1), noqa)]


def _walk(tree: Tree, node, path: Tuple[str, ...], parent, display: str, rules: Sequence) -> Iterator[Finding]:
    if isinstance(node, dict):
        if any(key in node for key in CLIP_OPTIONS):
            name = _is_optimizer(node, parent)
            if name is not None:
                yield from _check(tree, node, path, parent, name, display, rules)
        for key, value in node.items():
            yield from _walk(tree, value, path + (str(key),), node, display, rules)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(tree, item, path + (str(index),), parent, display, rules)


def _check(tree: Tree, mapping: dict, path, parent, name: str, display: str, rules: Sequence) -> Iterator[Finding]:
    optimizer = ConfigOptimizer(path, name, {key: mapping[key] for key in CLIP_OPTIONS
                                             if key in mapping and _set(mapping[key])})
    probe = _probe(mapping, parent, name)
    for rule in rules:
        for report in rule.check_config(optimizer):
            key = report.node
            line, column = tree.position(mapping, key, path + (key,))
            yield Finding(display, line, column, line, column + len(key), rule.code, rule.name,
                          report.severity or rule.severity, report.message, probe)
def _probe(mapping: dict, parent, name: str) -> dict:
    """The optimizer as data for the verifier: a known class and its numeric/boolean options."""
    wrapped = parent is not None and parent.get("config") is mapping
    name = (_optimizer_name(parent.get("class_name")) if wrapped else None) or name
    options = {("learning_rate" if k == "lr" else k): v for k, v in mapping.items()
               if isinstance(k, str) and isinstance(v, (int, float)) and v == v and abs(v) != float("inf")}
    return payload(Config(Name(name if name != "?" else "SGD"), Options(options), name == "?"))
