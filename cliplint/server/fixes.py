"""The autofix (`fix.py`) for an editor's document: each fix as a quick fix, and "fix all".

Computed on the linting thread (a fix needs the whole text parsed) for the rules the
document's settings enable. "Fix all" applies what `cliplint check --fix` would: the safe
fixes, and the unsafe ones too where `unsafe-fixes = true`. In a notebook, "fix all" edits
the cells; fixes one by one are offered for Python files.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

from ..findings import SAFE
from ..fix import fix_notebook, fix_text, fixes_for
from ..notebook import cell_sources
from ..settings import ConfigError
from .changes import Change, change_between
from .documents import NOTEBOOK, PYTHON, Snapshot, WorkspaceSettings, enabled_rules, notebook_json


@dataclass(frozen=True)
class QuickFix:
    code: str
    line: int  # the finding's start, as the finding says it
    column: int
    title: str
    safe: bool
    change: Change


def quick_fixes(snapshot: Snapshot, workspace: WorkspaceSettings) -> List[QuickFix]:
    if snapshot.kind != PYTHON:
        return []
    try:
        _, _, rules = enabled_rules(snapshot, workspace)
    except ConfigError:  # the diagnostics say what is wrong with the settings
        return []
    text = snapshot.parts[0].text
    found = []
    for edit in fixes_for(snapshot.path, text, rules=rules) if rules else []:
        change = change_between(text, text[:edit.start] + edit.replacement + text[edit.end:])
        if change is not None:
            found.append(QuickFix(edit.code, edit.line, edit.column, edit.title, edit.safety == SAFE, change))
    return found


def fix_all(snapshot: Snapshot, workspace: WorkspaceSettings) -> List[Tuple[str, Change]]:
    """(document URI, change) for every document the fixes change."""
    try:
        settings, _, rules = enabled_rules(snapshot, workspace)
    except ConfigError:
        return []
    if not rules:
        return []
    if snapshot.kind == PYTHON:
        text = snapshot.parts[0].text
        change = change_between(text, fix_text(snapshot.path, text, rules, settings.unsafe_fixes).text)
        return [(snapshot.parts[0].uri, change)] if change is not None else []
    if snapshot.kind != NOTEBOOK:
        return []
    fixed = fix_notebook(snapshot.path, snapshot.path, notebook_json(snapshot), rules, settings.unsafe_fixes)
    if fixed is None or not fixed.changed:
        return []
    sources = cell_sources(fixed.after)
    changes = [(part.uri, change_between(part.text, sources[number]))
               for number, part in enumerate(snapshot.parts, 1) if number in sources]
    return [(uri, change) for uri, change in changes if change is not None]
