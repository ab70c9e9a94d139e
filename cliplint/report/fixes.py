"""The edits of each finding's fix, for the machine outputs (JSON, SARIF): what `--fix` would
write, as ruff's JSON gives it: 1-based (row, column) ranges of the text replaced and the new
text. Computed only for those outputs and only for findings whose rule offers a fix: the files
are parsed again, as `--fix` parses them (whole, never the reduced parse the linter uses)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..findings import Finding

Key = Tuple[Optional[int], int, int, str]  # (cell, line, column or 0 in a notebook, code)
SOURCE_LIMIT = 256 * 1024 * 1024  # the file was linted under max-file-size; this bounds one swapped since


def with_edits(findings: Sequence[Finding]) -> List[Finding]:
    """The findings, each fix carrying `edits` (an empty list when it cannot be placed: a
    notebook line IPython rewrites, a file changed since it was linted)."""
    by_path: Dict[str, List[Finding]] = {}
    for finding in findings:
        if finding.fix:
            by_path.setdefault(finding.path, []).append(finding)
    placed: Dict[str, Dict[Key, List[dict]]] = {path: _edits(path, found) for path, found in by_path.items()}
    return [replace(f, fix={**f.fix, "edits": placed[f.path].get(_key(f), [])}) if f.fix else f for f in findings]


def _key(finding: Finding) -> Key:
    # a notebook finding's column counts the cell's indentation the program strips: match by line
    column = 0 if finding.cell is not None else finding.column
    return finding.cell, finding.line, column, finding.code


def _edits(path: str, findings: Sequence[Finding]) -> Dict[Key, List[dict]]:
    from ..files import read_regular
    from ..fix import placed_fixes

    try:
        data = read_regular(path, SOURCE_LIMIT)
    except OSError:
        return {}
    placed = placed_fixes(path, data, {f.code for f in findings})
    return {key: [_ruff_edit(content, start, end, key[0])] for key, (content, start, end) in placed.items()}


def _ruff_edit(content: str, start: Tuple[int, int], end: Tuple[int, int], cell: Optional[int]) -> dict:
    edit: Dict[str, Any] = {"content": content, "location": {"row": start[0], "column": start[1]},
            "end_location": {"row": end[0], "column": end[1]}}
    if cell is not None:
        edit["cell"] = cell
    return edit


def json_fix(finding: Finding) -> Optional[dict]:
    """A finding's `fix` in the JSON outputs: title, applicability (ruff's word for safe or
    unsafe) and the edits; None when its rule offers no fix."""
    if not finding.fix:
        return None
    return {"title": finding.fix["title"], "applicability": finding.fix["safety"],
            "edits": finding.fix.get("edits", [])}


def sarif_fixes(finding: Finding, artifact: dict) -> List[dict]:
    """SARIF `fixes` (§3.55): the same edits as replacements of regions of the file. A
    notebook's edits are of a cell's source, not of the .ipynb's text: not given here."""
    edits = (finding.fix or {}).get("edits") or []
    if finding.cell is not None or not edits or finding.fix is None:
        return []
    replacements = [{"deletedRegion": {"startLine": e["location"]["row"], "startColumn": e["location"]["column"],
                                       "endLine": e["end_location"]["row"], "endColumn": e["end_location"]["column"]},
                     "insertedContent": {"text": e["content"]}} for e in edits]
    return [{"description": {"text": f"{finding.fix['title']} ({finding.fix['safety']} fix)"},
             "artifactChanges": [{"artifactLocation": artifact, "replacements": replacements}]}]
