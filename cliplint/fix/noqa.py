"""`--add-noqa`: `# noqa: CODES` on the line of each finding, in Python files, notebooks'
cells and YAML/TOML training configs, merged into the comment already there."""
from __future__ import annotations

import io
import tokenize
from typing import Dict, List, Optional, Sequence, Tuple

from ..discovery import Target
from ..files import decode_python, encode_python, write_bytes_atomically
from ..findings import Finding
from ..notebook import cell_sources, replace_sources
from ..suppress import NOQA, noqa_comments, noqa_lines
from .run import read_target


def add_noqa_text(text: str, findings: Sequence[Finding]) -> Tuple[str, int]:
    """`# noqa: CODES` on the line of each finding, merged into a `# noqa` comment already there;
    a line that ends inside a string moves the comment to where the string ends."""
    wanted: Dict[int, set] = {}
    ends = _string_ends(text)
    for finding in findings:
        line = finding.line
        while line in ends:
            line = ends[line]
        wanted.setdefault(line, set()).add(finding.code)
    return _with_noqa(text, wanted, noqa_comments(text))


def add_noqa_config(text: str, findings: Sequence[Finding]) -> Tuple[str, int]:
    """The same for a YAML or TOML training config, where `#` starts a comment on any line
    (a finding is on the line of a key, never inside a multi-line string)."""
    wanted: Dict[int, set] = {}
    for finding in findings:
        wanted.setdefault(finding.line, set()).add(finding.code)
    return _with_noqa(text, wanted, noqa_lines(text))


def _with_noqa(text: str, wanted: Dict[int, set], existing: Dict[int, Optional[set]]) -> Tuple[str, int]:
    """`text` with `# noqa: CODES` on each line of `wanted`, merged into the comment there."""
    lines = text.splitlines(keepends=True)
    added = 0
    for number, codes in wanted.items():
        if not 1 <= number <= len(lines):
            continue
        body = lines[number - 1]
        ending = body[len(body.rstrip("\r\n")):]
        body = body[:len(body) - len(ending)]
        if number in existing and existing[number] is None:
            continue  # a noqa comment without codes already suppresses everything
        merged = sorted(codes | (existing.get(number) or set()))
        if number in existing:
            body = NOQA.sub("# noqa: " + ", ".join(merged), body, count=1)
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(merged)
        lines[number - 1] = body + ending
        added += len(codes - (existing.get(number) or set()))
    return "".join(lines), added


def _string_ends(text: str) -> Dict[int, int]:
    """Line -> the line a token spanning its end (a triple-quoted string) ends on."""
    ends: Dict[int, int] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.end[0] > token.start[0] and token.type != tokenize.NL and token.type != tokenize.NEWLINE:
                for spanned in range(token.start[0], token.end[0]):
                    ends[spanned] = token.end[0]
    except (tokenize.TokenError, SyntaxError):
        pass
    for number, line in enumerate(text.splitlines(), 1):  # a comment cannot follow a backslash continuation
        if line.endswith("\\") and number not in ends:
            ends[number] = number + 1
    return ends


NOQA_SUFFIXES = (".py", ".pyi", ".ipynb", ".yaml", ".yml", ".toml")  # the kinds that have comments


def add_noqa_paths(findings: Sequence[Finding], targets: Dict[str, Target]) -> Tuple[int, List[Finding]]:
    """`--add-noqa` for the findings of a run: the number of codes added, and the findings no
    comment can suppress (a JSON config, a `.keras` archive, CL000, a file that changed)."""
    by_path: Dict[str, List[Finding]] = {}
    left: List[Finding] = []
    for finding in findings:
        if finding.code != "CL000" and finding.path in targets and finding.path.lower().endswith(NOQA_SUFFIXES):
            by_path.setdefault(finding.path, []).append(finding)
        else:
            left.append(finding)
    added = 0
    for display, found in sorted(by_path.items()):
        target = targets[display]
        data, failure = read_target(target)
        after, count = _noqa_bytes(target.path, data, found) if data is not None else (b"", 0)
        if count and after != data:
            write_bytes_atomically(target.path, after)
            added += count
        elif not count:
            left.extend(found)
    return added, sorted(left, key=Finding.sort_key)


def _noqa_bytes(path: str, data: bytes, findings: Sequence[Finding]) -> Tuple[bytes, int]:
    if path.lower().endswith(".ipynb"):
        raw, sources = data.decode("utf-8"), cell_sources(data)
        changed, added = {}, 0
        for number in sorted({f.cell for f in findings if f.cell in sources}):
            text, count = add_noqa_text(sources[number], [f for f in findings if f.cell == number])
            if count:
                changed[number], added = text, added + count
        return (replace_sources(raw, changed).encode("utf-8") if changed else data), added
    if path.lower().endswith((".yaml", ".yml", ".toml")):
        try:
            config = data.decode("utf-8")
        except UnicodeDecodeError:
            return data, 0
        fixed, added = add_noqa_config(config, findings)
        return (fixed.encode("utf-8") if added else data), added
    source, failure = decode_python(path, data)
    if source is None or failure is not None:
        return data, 0
    fixed, added = add_noqa_text(source, findings)
    return (encode_python(fixed, data) if added else data), added
