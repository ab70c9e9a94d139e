"""The types every part of cliplint shares: a finding, a rule's report, and CL000.

A leaf module: it imports nothing from cliplint, so any module may import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Tuple, Union

if TYPE_CHECKING:
    import libcst


@dataclass(frozen=True)
class Finding:
    path: str
    line: int  # 1-based
    column: int  # 1-based, in code points
    end_line: int
    end_column: int  # 1-based, exclusive (the column after the last character)
    code: str
    name: str
    severity: str  # "error" | "warning"
    message: str
    probe: Optional[dict] = field(default=None, compare=False, repr=False)  # the payload of a `probes.Probe`
    verification: Optional[dict] = field(default=None, compare=False)
    cell: Optional[int] = None
    fix: Optional[dict] = field(default=None, compare=False)  # {"title", "safety"} when the rule offers one
    # Where the finding sits in the file as stored, when that is not (line, column): a notebook
    # cell's line lies on some line of the .ipynb's JSON. (line, column, end line, end column).
    file_region: Optional[Tuple[int, int, int, int]] = field(default=None, compare=False)

    def sort_key(self) -> Tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    def stored_region(self) -> Tuple[int, int, int, int]:
        """(line, column, end line, end column) in the file as stored: what CI annotations and
        SARIF regions point at, so that they land on the line a pull request shows."""
        if self.file_region is not None:  # a list after the cache's JSON round trip
            line, column, end_line, end_column = self.file_region
            return line, column, end_line, end_column
        return self.line, self.column, self.end_line, max(self.end_column, self.column)


# The Keras optimizer clip options: rules (Python and configs) and the verifier's probes both
# name them, and the worker must not import the analysis modules, so they live in this leaf.
CLIP_OPTIONS = ("clipnorm", "clipvalue", "global_clipnorm")


SAFE, UNSAFE = "safe", "unsafe"
Change = Tuple["libcst.CSTNode", Optional["libcst.CSTNode"]]  # (node in the tree, its replacement or None: removed)


@dataclass(frozen=True)
class Fix:
    """A rule's automatic fix: libcst replacements of nodes of the checked tree. `safe`: the
    same behaviour except the bug (applied by `--fix`); `unsafe`: changes behaviour beyond the
    bug or needs a judgement (applied only with `--unsafe-fixes`)."""

    title: str
    safety: str
    changes: Tuple[Change, ...]

    def summary(self) -> dict:
        return {"title": self.title, "safety": self.safety}


class Report:
    """What a rule says about one node (a CST node in Python code; the key, in a training
    config); the engine turns it into a Finding."""

    __slots__ = ("node", "message", "severity", "probe", "fix")

    def __init__(self, node: Union["libcst.CSTNode", str], message: str, *, severity: Optional[str] = None,
                 probe: Optional[object] = None, fix: Optional[Fix] = None) -> None:
        self.node = node
        self.message = message
        self.severity = severity  # None: the rule's default
        self.probe = probe  # a `cliplint.probes.Probe` (a leaf too: findings imports neither way)
        self.fix = fix


@dataclass(frozen=True)
class Unreadable:
    """CL000: not a rule class; emitted for unreadable files and for rules that crashed."""

    code: str = "CL000"
    name: str = "unreadable-file"
    severity: str = "error"
    summary: str = "The file could not be read, decoded or parsed."
    explanation: str = (
        "Reported with the location and the reason (syntax error, undeclared encoding, binary or "
        "oversized file, unreadable path, a rule that crashed); the other files are still linted.")


UNREADABLE = Unreadable()
SYNTAX_ERROR = "syntax error: "


def bad_input(path: str, reason: str, line: int = 1, column: int = 1, cell: Optional[int] = None) -> Finding:
    """A CL000 finding: the file could not be read, decoded or parsed."""
    return Finding(path, line, column, line, column, UNREADABLE.code, UNREADABLE.name, UNREADABLE.severity, reason,
                   cell=cell)


def syntax_error(path: str, message: str, line: int, column: int) -> Finding:
    return bad_input(path, SYNTAX_ERROR + message, line, column)


def is_syntax_error(finding: Finding) -> bool:
    return finding.code == UNREADABLE.code and finding.message.startswith(SYNTAX_ERROR)
