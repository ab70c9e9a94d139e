"""Layer 1 at run time: the values a snippet passes to the allowlisted symbols it names.

The parent's rebuild (`rebuild.py`) checks names and literals; a snippet can still build values
at run time (`"soft"[0:2] + ...`, `str(tf.keras.layers.Dense)`, `dict(zip(...))`) and hand them to
an allowlisted Keras constructor that interprets strings and dicts by deserialising them, and from
there reach most of Keras (file "vocabularies", SavedModels, Keras' global configuration). So every
allowlisted callable is bound wrapped (`Guarded`): each call's arguments, recursively through lists
and tuples, must be numbers, booleans, None, strings of `allowlist.STRINGS`, numeric tensors and
arrays, dtypes and shapes, allowlisted symbols, or objects made by an allowlisted call in this probe
(`REGISTRY`) or of the kinds the probe itself provides (Keras layers, models, optimizers, losses,
stand-ins). A dict is never admitted (Keras reads a dict as a configuration to deserialise), nor a
string a snippet built that is not on the list, nor any other object. A refusal makes the finding
`skipped`, naming the callable and the argument; the value itself is never shown (its text is the
snippet's).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Dict, Tuple

import numpy as np
import tensorflow as tf

from ..allowlist import ATTRIBUTES, STRINGS

# Keyword arguments that only (de)serialisation takes.
DESERIALISING_KEYWORDS = frozenset({"safe_mode", "custom_objects", "config", "module", "registered_name"})
MAX_NESTING = 20  # lists in lists in lists...: deeper is refused (and the check never recurses far)
NUMERIC_KINDS = "biufc"  # numpy dtype kinds: bool, int, unsigned, float, complex


class Refusal(Exception):
    """The worker refused a snippet (layer 1's re-check, or a value at run time); composed here."""


class Registry:
    """Objects an allowlisted call returned during the current probe (kept alive, so that their
    ids are not reused), and the kinds of objects the probe provides."""

    def __init__(self) -> None:
        self.made: Dict[int, Any] = {}
        self.kinds: Tuple[type, ...] = ()

    def add(self, value: Any, depth: int = 0) -> None:
        """Keep what an allowlisted call returned, unless `admit` judges it by its type anyway
        (tensors, arrays, numbers, strings: a loop of a million matmuls keeps nothing alive)."""
        if isinstance(value, (list, tuple)):
            for item in value if depth < MAX_NESTING else ():
                self.add(item, depth + 1)
        elif not isinstance(value, _BY_TYPE):
            self.made[id(value)] = value

    def admits(self, value: Any) -> bool:
        return id(value) in self.made or isinstance(value, self.kinds)

    def clear(self) -> None:
        self.made.clear()


REGISTRY = Registry()
# What `admit` judges by its type alone, never by the registry.
_BY_TYPE = (type(None), bool, int, float, complex, str, bytes, dict, set, frozenset, np.ndarray, np.generic,
            tf.Tensor, tf.Variable, tf.DType, tf.TensorShape)


class Guarded:
    """An allowlisted callable as a snippet sees it: the same call, with its arguments checked."""

    __slots__ = ("target", "qualified")

    def __init__(self, target: Any, qualified: str) -> None:
        self.target = target
        self.qualified = qualified

    def __call__(self, *args, **keywords):
        checked = tuple(admit(value, self.qualified, f"argument {i + 1}") for i, value in enumerate(args))
        for keyword in keywords:
            if keyword in DESERIALISING_KEYWORDS or keyword.startswith("_"):
                raise Refusal(f"the worker refused `{self.qualified}` called with `{keyword}=`, which only "
                              "Keras (de)serialisation takes")
        named = {k: admit(v, self.qualified, f"`{k}=`") for k, v in keywords.items()}
        result = self.target(*checked, **named)
        REGISTRY.add(result)
        return result

    def __getattr__(self, attribute: str):
        if attribute not in ATTRIBUTES:
            raise AttributeError(attribute)
        return getattr(self.target, attribute)

    def __instancecheck__(self, value: Any) -> bool:  # isinstance(x, tf.Variable) with the wrapped class
        return isinstance(self.target, type) and isinstance(value, self.target)


def guard(target: Any, qualified: str) -> Any:
    """How a snippet is given an allowlisted symbol: callables wrapped, constants (dtypes, pi) as they are."""
    return Guarded(target, qualified) if callable(target) and not isinstance(target, tf.DType) else target


def unwrapped(value: Any) -> Any:
    return value.target if isinstance(value, Guarded) else value


def admit(value: Any, qualified: str, where: str, depth: int = 0) -> Any:
    """`value` as the allowlisted callable may receive it (wrapped symbols unwrapped, iterators read
    into a checked list), or Refusal."""
    if depth > MAX_NESTING:
        raise _refused(qualified, where, "a value nested too deeply")
    if isinstance(value, Guarded):
        return value.target
    if value is None or value is Ellipsis or isinstance(value, (bool, int, float, complex, range)):
        return value
    if isinstance(value, str):
        if value in STRINGS:
            return value
        raise _refused(qualified, where, "a string that is not a known argument value (built at run time)")
    if isinstance(value, (dict, set, frozenset)):
        raise _refused(qualified, where, f"a {type(value).__name__} (Keras reads mappings and names as "
                                         "configurations to deserialise)")
    if isinstance(value, (np.ndarray, np.generic)):
        return _numeric(value, value.dtype.kind, qualified, where)
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return _numeric(value, "O" if value.dtype in (tf.string, tf.variant, tf.resource) else "f", qualified, where)
    if isinstance(value, (tf.DType, np.dtype, tf.TensorShape)):
        return value
    if type(value) in (list, tuple):
        return type(value)(admit(item, qualified, where, depth + 1) for item in value)
    if REGISTRY.admits(value):
        return value
    if isinstance(value, Iterator):  # zip, map, a generator: read it, check every item, hand on an iterator
        return iter([admit(item, qualified, where, depth + 1) for item in value])
    raise _refused(qualified, where, f"a `{type(value).__name__}` object the snippet did not make through the "
                                     "allowlist")


def _numeric(value: Any, kind: str, qualified: str, where: str) -> Any:
    if kind in NUMERIC_KINDS:
        return value
    raise _refused(qualified, where, "a tensor or array of strings or objects")


def _refused(qualified: str, where: str, what: str) -> Refusal:
    return Refusal(f"the worker refused `{qualified}` called with {what} as {where}")
