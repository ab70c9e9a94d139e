"""What a probe may execute: decided statically, before anything runs.

A snippet may contain literals, arithmetic, comprehensions, lambdas, plain statements, calls
into TensorFlow/Keras/NumPy (minus the parts that touch files, processes, the network or
native code), a few harmless builtins, and names the verifier binds to inert stand-ins.
Everything else (imports, `open`, `exec`, `eval`, `__import__`, `getattr`, `os`, dunder or
private attributes, `while`, `with`, function and class definitions, ...) makes the probe
`skipped`. The worker also runs with restricted builtins, a time limit and a memory limit,
in a temporary folder that is removed afterwards.
"""
from __future__ import annotations

import ast
import builtins
from typing import Dict, Optional

SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "dict", "enumerate", "float", "int", "len", "list", "map", "max",
    "min", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip", "isinstance",
    "setattr", "None", "True", "False",
})
LIBRARY_ROOTS = ("tensorflow", "keras", "numpy")
BLOCKED_PREFIXES = tuple(f"{p}" for p in (
    "tensorflow.io", "tensorflow.saved_model", "tensorflow.summary", "tensorflow.data", "tensorflow.lite",
    "tensorflow.profiler", "tensorflow.train.Checkpoint", "tensorflow.train.CheckpointManager",
    "tensorflow.sysconfig", "tensorflow.config", "tensorflow.distribute", "tensorflow.py_function",
    "tensorflow.numpy_function", "tensorflow.py_func", "tensorflow.gfile", "tensorflow.load_library",
    "tensorflow.load_op_library", "tensorflow.experimental.dtensor", "tensorflow.tpu", "tensorflow.debugging.experimental",
    "tensorflow.Session", "tensorflow.InteractiveSession",
    "keras.utils", "keras.datasets", "keras.applications", "keras.saving", "keras.models.load_model",
    "keras.callbacks", "keras.preprocessing", "keras.export", "keras.layers.TFSMLayer", "keras.layers.Lambda",
    "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "numpy.loadtxt",
    "numpy.genfromtxt", "numpy.fromfile", "numpy.memmap", "numpy.lib", "numpy.ctypeslib", "numpy.f2py",
    "numpy.distutils", "numpy.testing", "numpy.DataSource",
))
# Methods that write or read files whatever object they are called on.
BLOCKED_ATTRIBUTES = frozenset({
    "save", "save_weights", "load_weights", "save_spec", "tofile", "dump", "dumps", "export", "write",
    "read", "load", "system", "popen", "numpy_function", "py_function", "to_file", "save_own_variables",
    "load_own_variables",
})
ALLOWED_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.For, ast.If, ast.Pass,
                      ast.Continue, ast.Break)


def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def unsafe_reason(code: str, imports: Dict[str, str]) -> Optional[str]:
    """Why `code` must not be executed, or None when it may be.

    `imports` maps the snippet's local names to the canonical modules they were imported as.
    """
    try:
        tree = ast.parse(code.strip(), mode="exec")
    except SyntaxError:
        return "the snippet is not a complete statement on its own"
    nodes = list(ast.walk(tree))
    # Names first: "it uses os" says more than "it calls .system".
    for node in sorted(nodes, key=lambda n: not isinstance(n, ast.Name)):
        reason = _name_reason(node, imports) if isinstance(node, ast.Name) else _node_reason(node)
        if reason:
            return reason
    return None


def _node_reason(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.stmt) and not isinstance(node, ALLOWED_STATEMENTS):
        return f"it contains a `{type(node).__name__}` statement, which probes never execute"
    if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
        return f"it contains `{type(node).__name__}`"
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            return f"it accesses the private or dunder attribute `{node.attr}`"
        if node.attr in BLOCKED_ATTRIBUTES:
            return f"it calls `.{node.attr}`, which can touch files or processes"
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
        name = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and not name.value.startswith("_")):
            return "setattr with a computed or private attribute name"
    return None


def _name_reason(node: ast.Name, imports: Dict[str, str]) -> Optional[str]:
    name = node.id
    if name.startswith("__"):
        return f"it uses `{name}`"
    if name in imports:
        canonical = imports[name]
        if canonical.split(".")[0] not in LIBRARY_ROOTS:
            return f"it uses `{name}` ({canonical}), which is not TensorFlow, Keras or NumPy"
        return None
    if name in SAFE_BUILTINS:
        return None
    if hasattr(builtins, name):
        return f"it calls the builtin `{name}`"
    return None  # a local name: the verifier binds it to an inert stand-in


def blocked_call(dotted_canonical: str) -> bool:
    return dotted_canonical.startswith(BLOCKED_PREFIXES)


def library_reason(code: str, imports: Dict[str, str]) -> Optional[str]:
    """Reject uses of the blocked parts of TensorFlow/Keras/NumPy (files, processes, native code)."""
    from ..names import canonical

    tree = ast.parse(code.strip(), mode="exec")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)):
            dotted = _dotted(node)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            if head in imports:
                full = canonical(f"{imports[head]}.{rest}" if rest else imports[head])
                if blocked_call(full):
                    return f"it uses `{dotted}` ({full}), which can touch files, processes or native code"
    return None


def check(snippet: dict) -> Optional[str]:
    """The reason a rule's snippet must not run, or None."""
    code, imports = snippet["code"], snippet.get("imports", {})
    return unsafe_reason(code, imports) or library_reason(code, imports)
