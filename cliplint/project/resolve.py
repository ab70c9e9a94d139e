"""Imports resolved the way Python resolves them, within the project.

A module is known by its file (`.../models.py`, a package's `__init__.py`) or, for a namespace
package, its folder. `import_map` reads a module's import statements into entries:

    ("module", ref)       `import a.b as c` (c), `import a.b` (a), `from pkg import models`
                          when models is a submodule
    ("name", ref, name)   `from m import name`: looked up in m when it is needed

and the modules it star-imports. Third-party and standard-library modules are not in the
project's roots, so they resolve to nothing and stay known by name (`names.ImportTable`).
"""
from __future__ import annotations

import ast
import os
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

Entry = Tuple[str, ...]  # ("module", ref) | ("name", ref, name)


def module_ref(dotted: str, roots: Sequence[str]) -> Optional[str]:
    """The file (or namespace folder) of an absolute module name, in the first root holding it."""
    parts = dotted.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    for root in roots:
        found = child_ref(os.path.join(root, *parts[:-1]), parts[-1]) if len(parts) > 1 else \
            child_ref(root, parts[0])
        if found is not None:
            return found
    return None


def child_ref(folder: str, name: str) -> Optional[str]:
    """The module `name` in `folder`: name.py, name/__init__.py, or name/ (a namespace package)."""
    base = os.path.join(folder, name)
    if os.path.isfile(base + ".py"):
        return base + ".py"
    package = os.path.join(base, "__init__.py")
    if os.path.isfile(package):
        return package
    return base if os.path.isdir(base) and _holds_python(base) else None


def _holds_python(folder: str) -> bool:
    """A folder without `__init__.py` is a namespace package only if some Python is in it
    (a `data/` folder is not imported)."""
    try:
        return any(entry.endswith(".py") or os.path.isdir(os.path.join(folder, entry))
                   for entry in os.listdir(folder))
    except OSError:
        return False


def package_folder(ref: str) -> Optional[str]:
    """The folder a package's submodules are in (None for a plain module)."""
    if os.path.basename(ref) == "__init__.py":
        return os.path.dirname(ref)
    return ref if not ref.endswith(".py") else None


def submodule(ref: str, name: str) -> Optional[str]:
    folder = package_folder(ref)
    return child_ref(folder, name) if folder is not None else None


def _relative_base(path: str, level: int) -> str:
    """The folder `from .` (level 1), `from ..` (level 2), ... means in the module at `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(level - 1):
        folder = os.path.dirname(folder)
    return folder


def _from_ref(node: ast.ImportFrom, path: str, roots: Sequence[str]) -> Optional[str]:
    if not node.level:
        return module_ref(node.module, roots) if node.module else None
    folder = _relative_base(path, node.level)
    if not node.module:
        package = os.path.join(folder, "__init__.py")
        return package if os.path.isfile(package) else folder
    parts = node.module.split(".")
    return child_ref(os.path.join(folder, *parts[:-1]), parts[-1])


def import_map(statements: Sequence[ast.stmt], path: str, roots: Sequence[str]
               ) -> Tuple[Dict[str, Entry], List[str]]:
    """local name -> entry, and the star-imported modules, for the project's imports among
    `statements` (a module's, with those under a top-level `if`/`try`)."""
    entries: Dict[str, Entry] = {}
    stars: List[str] = []
    for node in _imports(statements):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    ref = module_ref(alias.name, roots)
                    if ref is not None:
                        entries[alias.asname] = ("module", ref)
                else:
                    head = alias.name.split(".")[0]
                    ref = module_ref(head, roots)
                    if ref is not None:
                        entries[head] = ("module", ref)
            continue
        ref = _from_ref(node, path, roots)
        if ref is None:
            continue
        for alias in node.names:
            if alias.name == "*":
                stars.append(ref)
            else:
                entries[alias.asname or alias.name] = ("name", ref, alias.name)
    return entries, stars


def imported_modules(statements: Sequence[ast.stmt], path: str, roots: Sequence[str]) -> Set[str]:
    """The module files `statements` (of the module at `path`) import: by their names (`import
    a.b`, `from a.b import x`, relatively) and as a package's submodules (`from a import b`)."""
    found: Set[str] = set()
    for node in _imports(statements):
        if isinstance(node, ast.Import):
            found.update(ref for ref in (module_ref(alias.name, roots) for alias in node.names) if ref is not None)
            continue
        ref = _from_ref(node, path, roots)
        if ref is not None:
            found.add(ref)
            found.update(sub for sub in (submodule(ref, alias.name) for alias in node.names if alias.name != "*")
                         if sub is not None)
    return found


def _imports(statements: Sequence[ast.stmt]) -> Iterator[Union[ast.Import, ast.ImportFrom]]:
    """The imports of a module's top level, also inside `if` and `try` (walked with a stack:
    the branches may nest deeper than Python's recursion limit)."""
    todo = list(reversed(statements))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            todo += reversed([*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            todo += reversed([*node.body, *[s for h in node.handlers for s in h.body], *node.orelse])
