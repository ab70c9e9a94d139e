"""CI formats: SARIF 2.1.0 (GitHub code scanning), GitHub workflow annotations, JUnit XML,
GitLab Code Quality. Each layout is the one its consumer documents (SARIF's schema is in
tests/data and validates every SARIF report in the tests); each is tested against its consumer's rules."""
from __future__ import annotations

import hashlib
import json
import os
import textwrap
import xml.etree.ElementTree as ET
from typing import Any, Dict, List
from urllib.parse import quote

from .. import __version__
from ..files import read_regular
from ..findings import UNREADABLE, Finding
from .fixes import sarif_fixes
from .links import homepage, rule_page, rule_url

# The file was linted under max-file-size; this only bounds one swapped for something else since.
SOURCE_LIMIT = 256 * 1024 * 1024


def _rules() -> Dict[str, tuple]:
    """Code -> (name, summary, why, severity) of CL000 and every rule."""
    from ..rules import ALL_RULES

    described = {UNREADABLE.code: (UNREADABLE.name, UNREADABLE.summary, UNREADABLE.explanation, UNREADABLE.severity)}
    for code, rule in ALL_RULES.items():
        described[code] = (rule.name, rule.summary, textwrap.dedent(rule.why).strip(), rule.severity)
    return described


def _plain(markdown: str) -> str:
    """A rule page as plain text: no code fences, heading marks or bold marks."""
    lines = [line.lstrip("#").strip() if line.startswith("#") else line.replace("**", "")
             for line in markdown.splitlines() if not line.startswith("```")]
    return "\n".join(lines).strip() + "\n"


def _message(finding: Finding) -> str:
    text = finding.message
    if finding.cell is not None:
        text = f"(cell {finding.cell}, line {finding.line}) {text}"
    if finding.verification:
        text += f" [{finding.verification['verdict']}: {finding.verification['evidence']}]"
    return text


def _line_text(finding: Finding, cache: Dict[str, List[str]]) -> str:
    if finding.path not in cache:
        try:
            cache[finding.path] = read_regular(finding.path, SOURCE_LIMIT).decode(
                "utf-8", errors="replace").splitlines()
        except OSError:
            cache[finding.path] = []
    lines, line = cache[finding.path], finding.stored_region()[0]
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


# --- SARIF ----------------------------------------------------------------------------------

def sarif(findings: List[Finding], info) -> str:
    described = _rules()
    codes = sorted(described)
    results: List[dict] = []
    seen: Dict[str, int] = {}  # how many results so far have each fingerprint
    lines: Dict[str, List[str]] = {}  # each file's lines, read once
    for finding in findings:
        fingerprint = f"{finding.code}\0{finding.path}\0{_line_text(finding, lines)}"
        digest = hashlib.sha256(fingerprint.encode()).hexdigest()[:16]
        seen[digest] = seen.get(digest, 0) + 1
        result = {
            "ruleId": finding.code,
            "ruleIndex": codes.index(finding.code),
            "level": finding.severity,
            "message": {"text": _message(finding)},
            "locations": [{"physicalLocation": {
                "artifactLocation": _artifact(finding.path),
                "region": dict(zip(("startLine", "startColumn", "endLine", "endColumn"), finding.stored_region())),
            }}],
            "partialFingerprints": {"primaryLocationLineHash": f"{digest}:{seen[digest]}"},
        }
        fixes = sarif_fixes(finding, _artifact(finding.path))
        if fixes:
            result["fixes"] = fixes
        properties: Dict[str, Any] = {}
        if finding.cell is not None:
            properties["cell"] = finding.cell
        if finding.verification:
            properties["verification"] = finding.verification
        if properties:
            result["properties"] = properties
        results.append(result)
    driver = {
        "name": "cliplint", "version": __version__, "semanticVersion": __version__,
        "informationUri": homepage(),
        "rules": [_sarif_rule(code, *described[code]) for code in codes],
    }
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": _directory_uri(os.getcwd())}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2) + "\n"


def _sarif_rule(code, name, summary, why, severity) -> dict:
    page = rule_page(code)  # the whole page, so that the help needs no link to be useful
    return {
        "id": code, "name": name,
        "shortDescription": {"text": summary[:1024]},
        "fullDescription": {"text": " ".join(why.split())[:1024]},
        "help": {"text": _plain(page), "markdown": page},
        "helpUri": rule_url(code),
        "defaultConfiguration": {"level": severity},
        "properties": {"tags": ["tensorflow", "correctness"], "precision": "high",
                       "problem.severity": "error" if severity == "error" else "warning"},
    }


def _directory_uri(path: str) -> str:
    return "file://" + quote(path.replace(os.sep, "/").rstrip("/") + "/")


def _artifact(path: str) -> dict:
    if os.path.isabs(path):
        return {"uri": "file://" + quote(path.replace(os.sep, "/"))}
    return {"uri": quote(path.replace(os.sep, "/")), "uriBaseId": "%SRCROOT%"}


# --- GitHub workflow commands ------------------------------------------------------------------

def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(findings: List[Finding], info) -> str:
    lines = []
    for f in findings:
        line, column, end_line, end_column = f.stored_region()
        properties = [f"file={_escape_property(f.path)}", f"line={line}", f"col={column}",
                      f"endLine={end_line}", f"endColumn={end_column}",
                      f"title={_escape_property(f'cliplint ({f.code} {f.name})')}"]
        lines.append(f"::{f.severity} {','.join(properties)}::{_escape_data(f'{f.code} {_message(f)}')}")
    return "".join(line + "\n" for line in lines)


# --- JUnit XML --------------------------------------------------------------------------------

def junit(findings: List[Finding], info) -> str:
    suites = ET.Element("testsuites", name="cliplint", tests=str(max(len(findings), 1)),
                        failures=str(len(findings)), errors="0", skipped="0")
    by_path: Dict[str, List[Finding]] = {}
    for finding in findings:
        by_path.setdefault(finding.path, []).append(finding)
    for path, found in by_path.items():
        suite = ET.SubElement(suites, "testsuite", name=path, tests=str(len(found)), failures=str(len(found)),
                              errors="0", skipped="0", package="org.cliplint")
        for f in found:
            line, column, _, _ = f.stored_region()
            case = ET.SubElement(suite, "testcase", name=f"org.cliplint.{f.code}",
                                 classname=os.path.splitext(path)[0], line=str(line), column=str(column))
            properties = ET.SubElement(case, "properties")
            ET.SubElement(properties, "property", name="severity", value=f.severity)
            failure = ET.SubElement(case, "failure", message=_message(f), type=f.code)
            failure.text = f"line {line}, col {column}, {_message(f)}"
    if not findings:
        suite = ET.SubElement(suites, "testsuite", name="cliplint", tests="1", failures="0", errors="0", skipped="0")
        ET.SubElement(suite, "testcase", name="No errors found", classname="cliplint")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# --- GitLab Code Quality ----------------------------------------------------------------------

def gitlab(findings: List[Finding], info) -> str:
    root = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    report, fingerprints = [], set()
    for f in findings:
        path = os.path.relpath(os.path.abspath(f.path), root).replace(os.sep, "/")
        salt = 0
        while True:  # line-independent, unique within the report (ruff's scheme)
            fingerprint = hashlib.sha256(f"{f.code}\0{path}\0{f.message}\0{salt}".encode()).hexdigest()[:16]
            if fingerprint not in fingerprints:
                break
            salt += 1
        fingerprints.add(fingerprint)
        line, column, end_line, end_column = f.stored_region()
        report.append({
            "check_name": f.code,
            "description": f"{f.code}: {_message(f)}",
            "severity": "major" if f.severity == "error" else "minor",
            "fingerprint": fingerprint,
            "location": {"path": path, "lines": {"begin": line, "end": end_line},
                         "positions": {"begin": {"line": line, "column": column},
                                       "end": {"line": end_line, "column": end_column}}},
        })
    return json.dumps(report, indent=2) + "\n"
