"""One probe per rule, run inside the worker with the installed TensorFlow.

A probe executes the user's own flagged snippet (the constructor call, the clipping
comprehension or loop, the log expression, the filtering statements, the mutation after
compile) with the names it needs bound to stand-ins, measures what TensorFlow does, and
answers `confirmed`, `not-reproduced` or `inconclusive` with one line of evidence. Every
stand-in that could change the outcome is listed in `assumptions`. A probe measures what the
installed TensorFlow does and reports that, never what a rule's message expected.

`common` holds what every probe shares; the probes are grouped by what they replay: `optimizers`
(CL001, CL002, CL009, config files), `gradients` (CL003, CL005, CL006, CL007), `numerics`
(CL004, CL008, CL010) and `numerics_formulas` (CL011-CL015). This module dispatches a payload to
its probe, and after each probe resets Keras' global state (`common.reset_state`). `guard` checks
the values a snippet passes to allowlisted callables.
"""
from __future__ import annotations

import tensorflow as tf

from . import common, gradients, numerics, numerics_formulas, optimizers  # noqa: F401 (their probe functions register)
from .common import FLAVOUR, RUNNERS, MissingSymbol, Refusal, Used, kind_of, reset_state, verdict, versions

__all__ = ["PROBES", "run", "set_unchecked", "verdict", "versions"]


def set_unchecked(unchecked: bool) -> None:
    """The test-only hook: snippets run as written, without the worker's re-check of layer 1."""
    common.UNCHECKED = unchecked


# (rule code, probe kind) -> the probe function that runs it, from the functions' registrations
PROBES = {(rule, cls.kind): function for cls, function in RUNNERS.items() for rule in cls.rules}


def run(probe: dict) -> dict:
    handler = PROBES.get((str(probe.get("rule")), str(probe.get("kind"))))
    if handler is None:
        return verdict("skipped", f"no probe for {probe.get('rule')} ({probe.get('kind')})")
    Used.clear()
    try:
        return on_file_values(handler(probe))
    except MissingSymbol as err:  # raised by the worker itself, with a message it composed
        return verdict("inconclusive", f"{FLAVOUR}: the snippet needs something this installation does not have: "
                                       f"AttributeError: {err}", other_flavour=err.keras)
    except Refusal as err:
        return verdict("skipped", f"not executed: {err}")
    except (AttributeError, NameError, KeyError, IndexError, TypeError, ValueError, tf.errors.OpError) as err:
        return verdict("inconclusive", f"the snippet could not run with stand-ins: {failed(err)}")
    finally:
        reset_state()


def failed(err: BaseException) -> str:
    """What failed: for an attribute, its name (an identifier of the snippet) and the type of what
    it was asked of; else the exception's type alone (its message can quote a file name or any value
    the snippet built)."""
    name = getattr(err, "name", None) if isinstance(err, AttributeError) else None
    if isinstance(name, str) and name.isidentifier() and hasattr(err, "obj"):
        return (f"AttributeError: a stand-in `{type(err.obj).__name__}` has no attribute `{name}` "
                "(the code reads it from an object the probe could not provide)")
    return kind_of(err)


def on_file_values(found: dict) -> dict:
    """The verdict saying which of the file's values it ran on; and `inconclusive`, never
    `not-reproduced`, when a placeholder stood in for a value the finding may be about."""
    shown = list(dict.fromkeys(Used.file_values))
    evidence = found["evidence"] + (f" (run on the file's values: {', '.join(shown)})" if shown else "")
    if found["verdict"] == "not-reproduced" and Used.placeholders:
        evidence = (f"not reproduced with a placeholder standing in for a value cliplint could not read "
                    f"({', '.join(dict.fromkeys(Used.placeholders))}), which may be why: {evidence}")
        return {**found, "verdict": "inconclusive", "evidence": evidence}
    return {**found, "evidence": evidence}
