"""The source roots of a module: where Python would find the project's absolute imports."""
from __future__ import annotations

import os
from functools import lru_cache
from typing import Optional, Sequence, Tuple

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
LOOSE_DEPTH = 6  # how many folders above a loose script (no project marker) may hold its imports


@lru_cache(maxsize=4096)
def project_root(folder: str) -> Optional[str]:
    """The nearest folder at or above `folder` holding a pyproject.toml, setup.py, setup.cfg or
    .git; None when there is none (a loose script)."""
    while True:
        if any(os.path.exists(os.path.join(folder, marker)) for marker in MARKERS):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def source_roots(path: str, configured: Sequence[str] = ()) -> Tuple[str, ...]:
    """The folders absolute imports are looked up in, first match wins: the `src` setting's,
    the project root's `src/` (a src layout), the project root, and the module's own folder
    unless it is a package (`python train.py` puts a script's folder first on `sys.path`, so a
    flat layout's `import models` works; a package's `math.py` is no `import math`), or for a
    package's module the folder holding its top package (where the scripts importing it are run:
    pytest's "basedir", `agent/framework.py`'s `from agent.forward import ...`). A module with
    no project marker above it (a tree copied out of its checkout) has no known root: the folders
    above it, nearest first, are where `from rl.util import x` may start, as they would be for
    whoever runs it from there. In a checkout that is a package itself (an `__init__.py` at its
    root, where nobody imports it from), a package's module is also a script's: its own folder
    comes last (`from game.ai.utils import *` in `project/actor_learner.py`)."""
    return _roots(os.path.abspath(path), tuple(configured))  # memoised by where the file is, not how it is named


@lru_cache(maxsize=4096)
def _roots(path: str, configured: Tuple[str, ...]) -> Tuple[str, ...]:
    here = os.path.dirname(path)
    root = project_root(here)
    found = list(configured)
    if root is not None:
        src = os.path.join(root, "src")
        found += [src, root] if os.path.isdir(src) else [root]
    if not os.path.isfile(os.path.join(here, "__init__.py")):  # a package's module is imported, not run
        found.append(here)
    else:  # the folder holding its top package, where the scripts importing it run (pytest's basedir)
        found.append(_basedir(here))
        if root is not None and os.path.isfile(os.path.join(root, "__init__.py")):
            found.append(here)  # a checkout that is a package itself is run from its folders, not imported
    if root is None:
        found += _above(here)
    return tuple(dict.fromkeys(os.path.normpath(folder) for folder in found))


def _basedir(package: str) -> str:
    """The first folder above the package folder `package` that is not a package."""
    folder = package
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def _above(folder: str) -> list:
    """The folders above `folder`, nearest first, `LOOSE_DEPTH` of them at most, but not a package
    (a package's folder is imported from above, never put on `sys.path`: keras/src/backend is no
    root, or its `tensorflow/` would stand for TensorFlow)."""
    found = []
    for _ in range(LOOSE_DEPTH):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        if not os.path.isfile(os.path.join(parent, "__init__.py")):
            found.append(parent)
        folder = parent
    return found


def dotted(path: str, roots: Sequence[str]) -> str:
    """`mypkg.models` for src/mypkg/models.py: the module's name under the first root holding it
    (for messages; modules are known by their files)."""
    absolute = os.path.abspath(path)
    for root in roots:
        if absolute.startswith(root.rstrip(os.sep) + os.sep):
            parts = os.path.relpath(absolute, root).split(os.sep)
            parts[-1] = parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1]
            if parts[-1] == "__init__":
                parts.pop()
            if parts and all(part.isidentifier() for part in parts):
                return ".".join(parts)
    return os.path.splitext(os.path.basename(path))[0]
