"""`path:line:col: CODE severity: message`, ruff's concise layout plus the severity word."""
from __future__ import annotations

from collections import Counter
from typing import List

from ..findings import Finding

_RESET, _BOLD, _RED, _YELLOW, _CYAN, _DIM = "\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[36m", "\x1b[2m"


def location(finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{finding.path}:{cell}{finding.line}:{finding.column}"


def line(finding: Finding, color: bool = False) -> str:
    verdict = ""
    if finding.verification:
        verdict = f" [{finding.verification['verdict']}: {finding.verification['evidence']}]"
    if not color:
        return f"{location(finding)}: {finding.code} {finding.severity}: {finding.message}{verdict}"
    tint = _RED if finding.severity == "error" else _YELLOW
    return (f"{_BOLD}{location(finding)}{_RESET}: {tint}{_BOLD}{finding.code}{_RESET} "
            f"{tint}{finding.severity}{_RESET}: {finding.message}{_DIM}{verdict}{_RESET}")


def summary(findings: List[Finding], files: int, verified: bool) -> str:
    if not findings:
        return f"All checks passed! ({files} file{'s' if files != 1 else ''} checked)"
    paths = len({f.path for f in findings})
    text = (f"Found {len(findings)} problem{'s' if len(findings) != 1 else ''} "
            f"in {paths} file{'s' if paths != 1 else ''}")
    if verified:
        counts = Counter(f.verification["verdict"] for f in findings if f.verification)
        parts = [f"{counts[v]} {v.replace('-', ' ')}" for v in
                 ("confirmed", "not-reproduced", "inconclusive", "skipped") if counts[v]]
        text += f" ({', '.join(parts)})" if parts else ""
    return text + "."


def statistics(findings: List[Finding]) -> str:
    counts = Counter((f.code, f.name) for f in findings)
    return "\n".join(f"{n:>5}  {code}  {name}" for (code, name), n in sorted(counts.items()))


def explain_hint(findings: List[Finding]) -> str:
    """Where to read more, without a network: the first code found as the example."""
    return f"`cliplint explain CODE` prints a rule's documentation (e.g. `cliplint explain {findings[0].code}`)."


def render(findings: List[Finding], info) -> str:
    lines = [line(f, info.color) for f in findings] + info.fixes
    if not info.quiet:
        lines.append(summary(findings, info.files, info.verified))
        if findings:
            lines.append(explain_hint(findings))
    return "\n".join(lines) + "\n" if lines else ""
