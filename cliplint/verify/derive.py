"""Derive the verifier's list of pure TensorFlow functions (`data/pure_tensorflow.txt`) by tracing.

Run `python -m cliplint.verify.derive > cliplint/data/pure_tensorflow.txt` with tensorflow-cpu
installed; `tests/test_verify_allowlist.py` re-derives it and compares. Never imported by the linter
or the worker (it imports TensorFlow and traces graphs); the worker reads only the list.

A candidate is a public function of `tf.math`, `tf.nn`, `tf.linalg` or of TensorFlow's top level
defined in its math, array, clip or nn op modules. It is admitted when:

- none of its parameters takes a Python callable (`fn`, `func`, `body`...: code to run);
- traced in a `tf.function` on float32 tensors, it builds a graph (else it is never admitted), and
  every op of that graph is, by TensorFlow's own op registry, not stateful (no variables, no
  randomness, no printing, no file writes), has no string, resource or variant input or output
  (no file names, no handles), no attribute naming a file, path, memory region or shared resource,
  and calls no other function graph.

Each admitted function is listed under every spelling that names the very same object:
`tensorflow.X`, `tensorflow.math.X`, `tensorflow.compat.v1.X` (the worker's `compat.v2` is folded
onto `tensorflow.`). The worker's guard still checks every argument at run time (numbers, numeric
tensors, known strings), so an admitted function never receives a file name either.
"""
from __future__ import annotations

import inspect
from typing import Any, Iterator, List, Optional, Tuple

NAMESPACES = ("", "math", "nn", "linalg")
TOP_LEVEL_MODULES = ("math_ops", "array_ops", "clip_ops", "nn_ops", "nn_impl", "special_math_ops", "gen_math_ops",
                     "gen_array_ops", "gen_nn_ops", "linalg_ops", "nn", "tensor_conversion", "array_ops_stack")
CALLABLE_PARAMETERS = frozenset({"fn", "func", "f", "body", "cond", "callable", "function", "map_fn", "loop_fn",
                                 "initializer", "py_func"})
REFUSED_ATTRIBUTE_WORDS = ("file", "path", "region", "shared_name", "container", "device")
REFUSED_DTYPES = ("string", "resource", "variant")
FUNCTION_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If",
                          "StatelessIf", "Case", "StatelessCase"})
HEADER = "# Derived by `python -m cliplint.verify.derive`; do not edit (tests/test_verify_allowlist.py re-derives it)."


def candidates(tf) -> Iterator[Tuple[str, object]]:
    """(dotted name below `tensorflow.`, object) of every public function to try."""
    for namespace in NAMESPACES:
        module = getattr(tf, namespace) if namespace else tf
        for name in sorted(dir(module)):
            value = None if name.startswith("_") else getattr(module, name, None)
            target = inspect.unwrap(value) if callable(value) else None
            if not inspect.isfunction(target):
                continue
            if not namespace and target.__module__.rpartition(".")[2] not in TOP_LEVEL_MODULES:
                continue
            yield (f"{namespace}.{name}" if namespace else name), value


def _takes_callable(function) -> bool:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return True
    return any(name in CALLABLE_PARAMETERS for name in parameters)


def _graph(tf, function) -> Optional[Any]:
    """The tf.Graph of `function` traced on float32 tensors, trying one to three arguments."""
    x = tf.constant([[0.5, 2.0, 3.0], [1.0, 4.0, 0.25]])
    for args in ((x,), (x, x), (x, 0.5, 2.0), (x, 1), ([x, x], 1.0), (x, [-1]), (x, [1, 0]), ([x, x],),
                 ([2, 3],), ([2, 3], 0.5), ([0, 1], 3)):
        try:
            return tf.function(lambda: function(*args), autograph=False).get_concrete_function().graph
        except Exception:  # an arity or dtype it does not take: try the next
            continue
    return None


def _pure_op(registry, operation) -> bool:
    if operation.type in FUNCTION_OPS:
        return False
    op_def = registry.get(operation.type)
    if op_def is None or op_def.is_stateful:
        return False
    if any(word in attr.name for attr in op_def.attr for word in REFUSED_ATTRIBUTE_WORDS):
        return False
    tensors = [*operation.inputs, *operation.outputs]
    return not any(tensor.dtype.name in REFUSED_DTYPES for tensor in tensors)


def pure(tf, function) -> bool:
    from tensorflow.python.framework import op_def_registry

    if _takes_callable(function):
        return False
    graph = _graph(tf, function)
    return graph is not None and all(_pure_op(op_def_registry, op) for op in graph.get_operations())


def spellings(tf, name: str, value) -> List[str]:
    """Every allowlist name of the same object: `tensorflow.math.log` is also `tensorflow.compat.v1.log`
    and `tensorflow.compat.v1.math.log`; a namespace's function is also listed at the top level
    when TensorFlow exports it there."""
    short = name.rpartition(".")[2]
    found = []
    for root, dotted in (("tensorflow", name), ("tensorflow", short), ("tensorflow.compat.v1", name),
                         ("tensorflow.compat.v1", short)):
        if _lookup(tf, root, dotted) is value:
            found.append(f"{root}.{dotted}")
    return found


def _lookup(tf, root: str, dotted: str):
    found = tf.compat.v1 if root.endswith("v1") else tf
    for part in dotted.split("."):
        found = getattr(found, part, None)
    return found


def derive(tf) -> List[str]:
    names = set()
    for name, value in candidates(tf):
        if pure(tf, value):
            names.update(spellings(tf, name, value))
    return sorted(names)


def main() -> None:
    import tensorflow as tf

    print(HEADER)
    print(f"# TensorFlow {tf.__version__}")
    for name in derive(tf):
        print(name)


if __name__ == "__main__":
    main()
