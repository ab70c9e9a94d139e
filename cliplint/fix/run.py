"""A `--fix` or `--diff` run over paths: each file its settings ask to fix, written back
atomically; `--fix --verify`'s check of each fix."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..discovery import Target, discover, unique
from ..files import FileTooLarge, read_regular, write_bytes_atomically
from ..findings import Finding, bad_input
from ..lint import prefilter
from ..rules import selected
from .file import FileFix, fix_notebook, fix_python
from .text import Accept, Edit

FIXABLE_SUFFIXES = (".py", ".pyi", ".ipynb")


def fix_paths(paths: Sequence[str], config, unsafe: Optional[bool] = None, write: bool = True,
              everywhere: bool = False, accept: Optional[Accept] = None) -> Tuple[List[FileFix], List[Finding]]:
    """Fix every Python file and notebook under `paths` whose settings ask for fixing (`--fix`
    or `fix = true`; all of them when `everywhere`, as for `--diff`). Returns what was done per
    file that had something to fix, and CL000 findings for files that could not be read.
    `unsafe`: the `--unsafe-fixes` flag when given, else each file's `unsafe-fixes` setting."""
    results, unreadable = [], []
    for target in unique(discover(paths, config)):
        if target.kind != "file" or not target.path.lower().endswith(FIXABLE_SUFFIXES):
            continue
        if not (everywhere or target.settings.fix):
            continue
        data, failure = read_target(target)
        if failure is not None:
            unreadable.append(failure)
        if data is None:  # unreadable, or above max-file-size (the lint says so)
            continue
        result = fix_data(target, data, unsafe, accept)
        if result is not None and (result.applied or result.refused or result.notes):
            results.append(result)
            if write and result.changed:
                write_bytes_atomically(target.path, result.after)
    return results, unreadable


def fix_data(target: Target, data: bytes, unsafe: Optional[bool] = None,
             accept: Optional[Accept] = None) -> Optional[FileFix]:
    rules = selected(target.settings.enabled_codes(target.path))
    if not prefilter(data, rules):
        return None
    use_unsafe = unsafe if unsafe is not None else target.settings.unsafe_fixes
    fixer = fix_notebook if target.path.lower().endswith(".ipynb") else fix_python
    return fixer(target.path, target.display, data, rules, use_unsafe, accept)


def read_target(target: Target) -> Tuple[Optional[bytes], Optional[Finding]]:
    try:
        return read_regular(target.path, target.settings.max_file_size), None
    except FileTooLarge:
        return None, None
    except OSError as err:
        return None, bad_input(target.display, f"cannot read: {err.strerror or err}")


def where(display: str, edit: Edit) -> str:
    """`path:line:col`, or `path:cell N:line:col` in a notebook, as findings are shown."""
    cell = f"cell {edit.cell}:" if edit.cell is not None else ""
    return f"{display}:{cell}{edit.line}:{edit.column}"


class FixVerifier:
    """`--fix --verify`: each fix's probe runs on the original snippet and on the fixed one,
    through the verifier's own checks and worker. A fix whose fixed snippet still reproduces
    the problem is not applied."""

    def __init__(self, timeout: float) -> None:
        from ..verify import Session  # TensorFlow's worker: only when verifying

        self.session = Session(timeout)

    def __call__(self, edit: Edit) -> Tuple[bool, Optional[str]]:
        if edit.probe is None or edit.fixed_probe is None:
            return True, f"fixed, not verified: no probe for {edit.code}"
        before = self._verdict(edit, edit.probe)
        after = self._verdict(edit, edit.fixed_probe)
        if after["verdict"] == "confirmed":
            return False, f"fix not applied: the fixed code still reproduces the problem: {after['evidence']}"
        if after["verdict"] == "not-reproduced":
            shown = f" (before the fix: {before['evidence']})" if before["verdict"] == "confirmed" else ""
            return True, f"fixed and verified: {after['evidence']}{shown}"
        return True, f"fixed, not verified ({after['verdict']}): {after['evidence']}"

    def _verdict(self, edit: Edit, probe: dict) -> dict:
        finding = Finding("", edit.line, edit.column, edit.line, edit.column, edit.code, "", "", "", probe=probe)
        return self.session.verify(finding)

    def close(self) -> None:
        self.session.close()
