"""Code actions: each fix of a finding (unsafe ones labelled), "Disable CLxxx for this line", and
`source.fixAll.cliplint`, as LSP CodeActions with their text edits in the client's encoding."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from lsprotocol import types

from ..findings import Finding
from .changes import Change
from .fixes import QuickFix
from .protocol import Units, lines_of, position

FIX_ALL = "source.fixAll.cliplint"


def wanted(only: Optional[Sequence[str]], kind: str) -> bool:
    """Does the client's `only` filter admit actions of `kind` (kinds nest by dots)?"""
    return not only or any(kind == asked or kind.startswith(asked + ".") for asked in only)


def text_edit(change: Change, lines: Sequence[str], units: Units) -> types.TextEdit:
    return types.TextEdit(range=types.Range(start=position(lines, change.line, change.column, units),
                                            end=position(lines, change.end_line, change.end_column, units)),
                          new_text=change.text)


def fix_action(uri: str, fix: QuickFix, shown: types.Diagnostic, lines: Sequence[str],
               units: Units) -> types.CodeAction:
    title = fix.title if fix.safe else f"{fix.title} (unsafe fix: check the result)"
    return types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[shown],
                            is_preferred=fix.safe,
                            edit=types.WorkspaceEdit(changes={uri: [text_edit(fix.change, lines, units)]}))


def noqa_action(uri: str, finding: Finding, change: Change, shown: types.Diagnostic, lines: Sequence[str],
                units: Units) -> types.CodeAction:
    return types.CodeAction(title=f"Disable {finding.code} for this line", kind=types.CodeActionKind.QuickFix,
                            diagnostics=[shown],
                            edit=types.WorkspaceEdit(changes={uri: [text_edit(change, lines, units)]}))


def fix_all_action(changes: List[Tuple[str, Change]], texts: Dict[str, str], units: Units) -> types.CodeAction:
    edits: Dict[str, List[types.TextEdit]] = {}
    for uri, change in changes:
        edits.setdefault(uri, []).append(text_edit(change, lines_of(texts[uri]), units))
    return types.CodeAction(title="cliplint: fix all auto-fixable problems", kind=FIX_ALL,
                            edit=types.WorkspaceEdit(changes=edits))
