"""Findings as LSP diagnostics: 0-based lines, columns in the client's position encoding.

A finding's columns count code points (1-based, end exclusive); LSP counts UTF-16 code units
unless the client agreed to another encoding, so each column is re-measured on its line.
Lines are split as CPython and LSP split them (\\n, \\r\\n, \\r), not as str.splitlines does.
"""
from __future__ import annotations

from typing import Callable, List, Sequence

from lsprotocol import types

from ..findings import Finding
from ..report.links import rule_url
from ..trees import split_lines

SOURCE = "cliplint"
SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning}
Units = Callable[[str], int]  # how many client code units a string takes


def lines_of(text: str) -> List[str]:
    """The document's lines without their line ends; a final empty line after a trailing newline."""
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    if not lines or text.endswith(("\n", "\r")):
        lines.append("")
    return lines


def position(lines: Sequence[str], line: int, column: int, units: Units) -> types.Position:
    """A 1-based line and code-point column, clamped to the document."""
    index = min(max(line - 1, 0), len(lines) - 1)
    before = lines[index][:max(column - 1, 0)]
    # an ASCII character is one code unit in every encoding (UTF-8, -16, -32): no count per character
    return types.Position(line=index, character=len(before) if before.isascii() else units(before))


def finding_range(finding: Finding, lines: Sequence[str], units: Units) -> types.Range:
    start = position(lines, finding.line, finding.column, units)
    end = position(lines, finding.end_line, finding.end_column, units)
    if (end.line, end.character) < (start.line, start.character):
        end = start
    return types.Range(start=start, end=end)


def message(finding: Finding) -> str:
    """The message, with the verifier's verdict when there is one (as the text report shows it)."""
    if not finding.verification:
        return finding.message
    verification = finding.verification
    return f"{finding.message} [{verification['verdict']}: {verification['evidence']}]"


def severity(finding: Finding) -> types.DiagnosticSeverity:
    """The rule's severity; a finding the verifier did not reproduce is shown as information,
    as it does not fail the run either."""
    if finding.verification and finding.verification.get("verdict") == "not-reproduced":
        return types.DiagnosticSeverity.Information
    return SEVERITY.get(finding.severity, types.DiagnosticSeverity.Information)


def diagnostic(finding: Finding, lines: Sequence[str], units: Units) -> types.Diagnostic:
    return types.Diagnostic(
        range=finding_range(finding, lines, units),
        severity=severity(finding),
        code=finding.code,
        code_description=types.CodeDescription(href=rule_url(finding.code)),
        source=SOURCE,
        message=message(finding),
        data={"name": finding.name},
    )


def contains(span: types.Range, point: types.Position) -> bool:
    return (span.start.line, span.start.character) <= (point.line, point.character) \
        <= (span.end.line, span.end.character)


def overlaps(first: types.Range, second: types.Range) -> bool:
    return (first.start.line, first.start.character) <= (second.end.line, second.end.character) \
        and (second.start.line, second.start.character) <= (first.end.line, first.end.character)
