"""Safe readers that keep the position of every key: YAML and JSON through PyYAML's node graph
(no object is ever constructed), TOML through tomllib plus a line search, `.keras` archives
through zipfile without extracting anything."""
from __future__ import annotations

import io
import json
import re
import tomllib
import zipfile
from typing import Dict, List, Optional, Protocol, Tuple, Union

import yaml

from ..findings import Finding, bad_input

MAX_MEMBER = 16 * 1024 * 1024  # bytes of config.json read from a .keras archive, at most
STANDARD_TAG = "tag:yaml.org,2002:"
SAFE_TAGS = {STANDARD_TAG + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary")}
# libyaml's loader where PyYAML has it: 60 KB of nested `[` took 57 s in the pure-Python one.
# Its nodes and events carry the same marks (line, column), which is all the readers use.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 100  # collections nested in a config (real ones nest under 10); the readers recurse
_FLOW = re.compile(r"[\[\]{}\n]")
_BLOCK = re.compile(r"( *)((?:- +)*)(.?)")


class Tree:
    """A parsed config: plain dicts and lists, plus where each key was written."""

    def __init__(self, root, positions: Optional[Dict[Tuple[int, str], Tuple[int, int]]] = None,
                 text: str = "") -> None:
        self.root = root
        self.positions = positions or {}
        self.text = text

    def position(self, mapping: dict, key: str, path: Tuple[str, ...]) -> Tuple[int, int]:
        """1-based (line, column) of `key` in `mapping`."""
        found = self.positions.get((id(mapping), key))
        if found is not None:
            return found
        return _toml_position(self.text, path) if self.text else (1, 1)


# --- YAML and JSON --------------------------------------------------------------------------

def _scalar(node: yaml.ScalarNode):
    tag = node.tag
    if tag == STANDARD_TAG + "null":
        return None
    if tag == STANDARD_TAG + "bool":
        return node.value.lower() in ("true", "yes", "on", "y")
    if tag == STANDARD_TAG + "int":
        try:
            return int(node.value.replace("_", ""), 0)
        except ValueError:
            return node.value
    if tag == STANDARD_TAG + "float":
        text = node.value.lower().replace("_", "")
        if text in (".inf", "+.inf"):
            return float("inf")
        if text == "-.inf":
            return float("-inf")
        if text == ".nan":
            return float("nan")
        return float(text)
    return node.value


class _Problem(Exception):
    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line, self.column = line, column


def _convert(node, positions):
    if isinstance(node, yaml.MappingNode):
        mapping = {}
        for key_node, value_node in node.value:
            key = _convert(key_node, positions)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                key = str(key)
            if key in mapping:
                raise _Problem(f"duplicate key {key!r}", key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            mapping[key] = _convert(value_node, positions)
            positions[(id(mapping), key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        return mapping
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, positions) for item in node.value]
    return _scalar(node)


def _check_events(text: str, kind: str) -> None:
    """Refuse what cliplint does not follow: custom tags and anchors/aliases."""
    for event in yaml.parse(text, Loader=LOADER):
        tag = getattr(event, "tag", None)
        if tag and tag not in SAFE_TAGS and tag != "!":
            raise _Problem(f"custom {kind} tag {tag!r} is not supported (cliplint loads configs safely)",
                           *_where(event.start_mark))
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Problem("anchors and aliases (&name / *name) are not followed; the optimizer settings "
                           "behind them are not audited", *_where(event.start_mark))


class _Mark(Protocol):
    """A position in a YAML stream (PyYAML's pure-Python and C marks both have these)."""

    line: int
    column: int


def _where(mark: Optional[_Mark]) -> Tuple[int, int]:
    """A YAML mark's (line, column), 1-based; (1, 1) without one."""
    return (mark.line + 1, mark.column + 1) if mark else (1, 1)


def read_yaml(display: str, data: bytes) -> Union[Tree, Finding]:
    text, failure = _decode(display, data)
    failure = failure or _too_deep(display, text, "YAML", block=True)
    if failure:
        return failure
    try:
        _check_events(text, "YAML")
        positions: Dict = {}
        documents = [_convert(node, positions) for node in yaml.compose_all(text, Loader=LOADER)]
    except _Problem as problem:
        return bad_input(display, f"unsupported YAML: {problem}", problem.line, problem.column)
    except yaml.MarkedYAMLError as err:
        line, column = _where(err.problem_mark or err.context_mark)
        return bad_input(display, f"invalid YAML: {err.problem or err.context}", line, column)
    except (yaml.YAMLError, RecursionError) as err:
        return bad_input(display, f"invalid YAML: {type(err).__name__}")
    return Tree(documents[0] if len(documents) == 1 else documents, positions)


def read_json(display: str, data: bytes) -> Union[Tree, Finding]:
    text, failure = _decode(display, data)
    failure = failure or _too_deep(display, text, "JSON")
    if failure:
        return failure

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        duplicate = next((k for k in keys if keys.count(k) > 1), None)
        if duplicate is not None:
            raise ValueError(f"duplicate key {duplicate!r}")
        return dict(pairs)

    try:
        json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as err:
        return bad_input(display, f"invalid JSON: {err.msg}", err.lineno, err.colno)
    except (ValueError, RecursionError) as err:
        return bad_input(display, f"invalid JSON: {err}")
    try:  # JSON is YAML: the node graph gives every key's position
        positions: Dict = {}
        return Tree(_convert(yaml.compose(text, Loader=LOADER), positions), positions)
    except (yaml.YAMLError, _Problem, RecursionError):
        return Tree(json.loads(text))


# --- TOML -----------------------------------------------------------------------------------

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_toml(display: str, data: bytes) -> Union[Tree, Finding]:
    text, failure = _decode(display, data)
    failure = failure or _too_deep(display, text, "TOML")
    if failure:
        return failure
    try:
        return Tree(tomllib.loads(text), text=text)
    except RecursionError:  # not expected below MAX_DEPTH
        return bad_input(display, "invalid TOML: nested too deeply")
    except tomllib.TOMLDecodeError as err:
        match = _TOML_POSITION.search(str(err))
        line, column = (int(match.group(1)), int(match.group(2))) if match else (1, 1)
        return bad_input(display, f"invalid TOML: {_TOML_POSITION.sub('', str(err)).strip()}", line, column)


def _toml_position(text: str, path: Tuple[str, ...]) -> Tuple[int, int]:
    """Where a key path is written: after its table header if there is one, else its first
    assignment (dotted keys and inline tables included)."""
    key = path[-1]
    lines = text.splitlines()
    assignment = re.compile(r"^\s*(?:[\w\"'.-]+\.)?[\"']?" + re.escape(key) + r"[\"']?\s*=")
    inline = re.compile(r"[{,]\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
    start = 0
    tables = [".".join(path[:i]) for i in range(len(path) - 1, 0, -1)]
    for table in tables:
        header = re.compile(r"^\s*\[+\s*" + re.escape(table) + r"\s*\]+")
        found = next((n for n, line in enumerate(lines) if header.match(line)), None)
        if found is not None:
            start = found
            break
    for number in range(start, len(lines)):
        for pattern in (assignment, inline):
            match = pattern.search(lines[number])
            if match:
                return number + 1, lines[number].index(key, match.start()) + 1
    return 1, 1


# --- .keras archives ------------------------------------------------------------------------

def read_keras(display: str, source) -> Union[Tree, Finding]:
    """The archive's config.json (`source` is the archive's path or bytes): nothing is extracted,
    no weights are read, and at most MAX_MEMBER bytes are decompressed."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (zipfile.BadZipFile, OSError, ValueError):
        return bad_input(display, "not a .keras archive (not a zip file)")
    with archive:
        try:
            info = archive.getinfo("config.json")
        except KeyError:
            return bad_input(display, "not a .keras archive: it has no config.json")
        if info.file_size > MAX_MEMBER:
            return bad_input(display, f"config.json is {info.file_size:,} bytes uncompressed, above the "
                                            f"{MAX_MEMBER:,}-byte limit; not audited")
        try:
            with archive.open(info) as member:
                raw = member.read(MAX_MEMBER + 1)
        except (zipfile.BadZipFile, OSError, RuntimeError, EOFError) as err:
            return bad_input(display, f"cannot read config.json from the archive: {err}")
    if len(raw) > MAX_MEMBER:
        return bad_input(display, "config.json decompresses beyond the size limit; not audited")
    try:
        return Tree(json.loads(raw.decode("utf-8")))
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        return bad_input(display, f"the archive's config.json is not valid JSON: {err}")


def _too_deep(display: str, text: str, kind: str, block: bool = False) -> Optional[Finding]:
    """CL000 where `text` nests collections deeper than MAX_DEPTH, found without parsing it:
    brackets and braces (flow collections, JSON, TOML arrays and inline tables) and, in YAML,
    indentation and `- ` entries. It over-counts (a bracket in a string counts): a bound."""
    depth, line = 0, 1
    for match in _FLOW.finditer(text):
        mark = match.group()
        if mark == "\n":
            line += 1
        elif mark in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return _refused(display, kind, line)
        else:
            depth = max(depth - 1, 0)
    return _too_deep_blocks(display, text) if block else None


def _too_deep_blocks(display: str, text: str) -> Optional[Finding]:
    """YAML's block collections: one level an indentation still open, one a `- ` before the value."""
    indents: List[int] = []
    for number, line in enumerate(text.split("\n"), 1):
        block = _BLOCK.match(line)
        if block is None:  # not reached: every group of the pattern may be empty
            continue
        spaces, dashes, first = block.groups()
        if first in ("", "#"):
            continue
        while indents and indents[-1] >= len(spaces):
            indents.pop()
        indents.append(len(spaces))
        if len(indents) + dashes.count("-") > MAX_DEPTH:
            return _refused(display, "YAML", number)
    return None


def _refused(display: str, kind: str, line: int) -> Finding:
    return bad_input(display, f"{kind} nested more than {MAX_DEPTH} levels deep; not audited", line)


def _decode(display: str, data: bytes) -> Tuple[str, Optional[Finding]]:
    """The text and None, or "" and why it cannot be read."""
    if b"\x00" in data:
        return "", bad_input(display, "binary file (contains NUL bytes); not audited")
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        return "", bad_input(display, f"cannot decode byte 0x{data[err.start]:02x} as UTF-8", line)
