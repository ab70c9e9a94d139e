"""JSON and JSON Lines: one object per finding, with a documented, stable schema."""
from __future__ import annotations

import json
from typing import List

from ..findings import Finding
from .fixes import json_fix
from .links import rule_url


def as_dict(finding: Finding) -> dict:
    record = {
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "code": finding.code,
        "name": finding.name,
        "severity": finding.severity,
        "message": finding.message,
        "url": rule_url(finding.code),
        "fix": json_fix(finding),
    }
    if finding.cell is not None:
        record["cell"] = finding.cell
    if finding.verification is not None:
        record["verification"] = finding.verification
    return record


def json_array(findings: List[Finding], info) -> str:
    return json.dumps([as_dict(f) for f in findings], indent=2) + "\n"


def json_lines(findings: List[Finding], info) -> str:
    return "".join(json.dumps(as_dict(f)) + "\n" for f in findings)
