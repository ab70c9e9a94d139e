"""One probe per rule, run inside the worker with the installed TensorFlow.

A probe executes the user's own flagged snippet (the constructor call, the clipping
comprehension or loop, the log expression, the filtering statements, the mutation after
compile) with the names it needs bound to stand-ins, measures what TensorFlow does, and
answers `confirmed`, `not-reproduced` or `inconclusive` with one line of evidence. Every
stand-in that could change the outcome is listed in `assumptions`. The ground truth each
probe checks is in TF_FACTS.md; where TensorFlow disagrees, the verdict follows TensorFlow.

`common` holds what every probe shares; the probes are grouped by what they replay: `optimizers`
(CL001, CL002, CL009, config files), `gradients` (CL003, CL005, CL006, CL007) and `numerics`
(CL004, CL008, CL010). This module dispatches a payload to its probe.
"""
from __future__ import annotations

import tensorflow as tf

from . import common
from .common import FLAVOUR, MissingSymbol, Refusal, first_line, kind_of, verdict, versions
from .gradients import probe_misaligned, probe_none_unsafe, probe_not_unpacked, probe_per_tensor, probe_unused
from .numerics import probe_double_activation, probe_log_softmax, probe_numerics
from .optimizers import probe_after_compile, probe_config, probe_construct, probe_late_attribute, probe_threshold

__all__ = ["PROBES", "run", "set_unchecked", "verdict", "versions"]


def set_unchecked(unchecked: bool) -> None:
    """The test-only hook: snippets run as written, without the worker's re-check of layer 1."""
    common.UNCHECKED = unchecked


PROBES = {
    ("CL001", "construct"): probe_construct,
    ("CL001", "late-attribute"): probe_late_attribute,
    ("CL002", "option"): probe_after_compile,
    ("CL002", "replace"): probe_after_compile,
    ("CL002", "rebind"): probe_after_compile,
    ("CL002", "callback"): probe_after_compile,
    ("CL003", "per-tensor"): probe_per_tensor,
    ("CL004", "softmax"): probe_log_softmax,
    ("CL004", "sigmoid"): probe_log_softmax,
    ("CL004", "1-sigmoid"): probe_log_softmax,
    ("CL005", "none-unsafe"): probe_none_unsafe,
    ("CL005", "misaligned"): probe_misaligned,
    ("CL006", "not-unpacked"): probe_not_unpacked,
    ("CL007", "unused"): probe_unused,
    ("CL008", "numerics"): probe_numerics,
    ("CL009", "optimizer"): probe_threshold,
    ("CL009", "tensor"): probe_threshold,
    ("CL009", "value"): probe_threshold,
    ("CL010", "softmax"): probe_double_activation,
    ("CL010", "sigmoid"): probe_double_activation,
    ("CL001", "config"): probe_config,
    ("CL009", "config"): probe_config,
}


def run(probe: dict) -> dict:
    handler = PROBES.get((probe.get("rule"), probe.get("kind")))
    if handler is None:
        return verdict("skipped", f"no probe for {probe.get('rule')} ({probe.get('kind')})")
    try:
        return handler(probe)
    except MissingSymbol as err:
        return verdict("inconclusive", f"{FLAVOUR}: the snippet needs something this installation does not have: "
                                       f"{first_line(err)}", other_flavour="keras" in str(err))
    except Refusal as err:
        return verdict("skipped", f"not executed: {err}")
    except (AttributeError, NameError, KeyError, IndexError, TypeError, ValueError, tf.errors.OpError) as err:
        return verdict("inconclusive", f"the snippet could not run with stand-ins ({kind_of(err)})")
