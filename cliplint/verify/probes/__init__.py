"""One probe per rule, run inside the worker with the installed TensorFlow.

A probe executes the user's own flagged snippet (the constructor call, the clipping
comprehension or loop, the log expression, the filtering statements, the mutation after
compile) with the names it needs bound to stand-ins, measures what TensorFlow does, and
answers `confirmed`, `not-reproduced` or `inconclusive` with one line of evidence. Every
stand-in that could change the outcome is listed in `assumptions`. A probe measures what the
installed TensorFlow does and reports that, never what a rule's message expected.

`common` holds what every probe shares; the probes are grouped by what they replay: `optimizers`
(CL001, CL002, CL009, config files), `gradients` (CL003, CL005, CL006, CL007) and `numerics`
(CL004, CL008, CL010). This module dispatches a payload to its probe, and after each probe
resets Keras' global state (`common.reset_state`). `guard` checks the values a snippet passes to
allowlisted callables.
"""
from __future__ import annotations

import tensorflow as tf

from ...findings import ProbeKind
from . import common
from .common import FLAVOUR, MissingSymbol, Refusal, Used, quoted, reset_state, verdict, versions
from .gradients import (
    probe_discarded,
    probe_misaligned,
    probe_none_unsafe,
    probe_not_unpacked,
    probe_per_tensor,
    probe_unused,
)
from .numerics import probe_double_activation, probe_log_softmax, probe_numerics
from .optimizers import probe_after_compile, probe_config, probe_construct, probe_late_attribute, probe_threshold

__all__ = ["PROBES", "run", "set_unchecked", "verdict", "versions"]


def set_unchecked(unchecked: bool) -> None:
    """The test-only hook: snippets run as written, without the worker's re-check of layer 1."""
    common.UNCHECKED = unchecked


# (rule code, probe kind) -> the probe that runs it
PROBES = {
    ("CL001", ProbeKind.CONSTRUCT): probe_construct,
    ("CL001", ProbeKind.LATE_ATTRIBUTE): probe_late_attribute,
    ("CL002", ProbeKind.OPTION): probe_after_compile,
    ("CL002", ProbeKind.REPLACE): probe_after_compile,
    ("CL002", ProbeKind.REBIND): probe_after_compile,
    ("CL002", ProbeKind.CALLBACK): probe_after_compile,
    ("CL003", ProbeKind.PER_TENSOR): probe_per_tensor,
    ("CL004", ProbeKind.SOFTMAX): probe_log_softmax,
    ("CL004", ProbeKind.SIGMOID): probe_log_softmax,
    ("CL004", ProbeKind.ONE_MINUS_SIGMOID): probe_log_softmax,
    ("CL005", ProbeKind.NONE_UNSAFE): probe_none_unsafe,
    ("CL005", ProbeKind.MISALIGNED): probe_misaligned,
    ("CL006", ProbeKind.NOT_UNPACKED): probe_not_unpacked,
    ("CL007", ProbeKind.UNUSED): probe_unused,
    ("CL007", ProbeKind.DISCARDED): probe_discarded,
    ("CL008", ProbeKind.NUMERICS): probe_numerics,
    ("CL009", ProbeKind.OPTIMIZER): probe_threshold,
    ("CL009", ProbeKind.TENSOR): probe_threshold,
    ("CL009", ProbeKind.VALUE): probe_threshold,
    ("CL010", ProbeKind.SOFTMAX): probe_double_activation,
    ("CL010", ProbeKind.SIGMOID): probe_double_activation,
    ("CL001", ProbeKind.CONFIG): probe_config,
    ("CL009", ProbeKind.CONFIG): probe_config,
}


def run(probe: dict) -> dict:
    handler = PROBES.get((probe.get("rule"), probe.get("kind")))
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
    """What failed, by name: the attribute and the kind of object it was asked of, or the message."""
    if isinstance(err, AttributeError) and getattr(err, "name", None) and hasattr(err, "obj"):
        return (f"AttributeError: a stand-in `{type(err.obj).__name__}` has no attribute `{err.name}` "
                "(the code reads it from an object the probe could not provide)")
    return quoted(err)


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
