"""Shared by the verifier tests: the findings of a program, verified with real TensorFlow."""
from __future__ import annotations

from cliplint.analysis import lint_module
from cliplint.rules import ALL_RULES
from cliplint.verify import verify_findings


def verdicts(path: str, source: str) -> dict:
    """(code, line) -> the verification of each finding the rules report in `source`."""
    findings, _ = lint_module(path, source, list(ALL_RULES.values()))
    return {(f.code, f.line): f.verification for f in verify_findings(findings, timeout=120)}
